"""Definition A's own solutions on a CUDA GPU, through their public entry point, at the
definition's sizes (g 4, n = k = 2048), and through their generic entry at other k: edge cases of masked_m and max_m, serving-shaped and
harness-shaped inputs, scheduling hints that are wrong, and one call captured in a CUDA graph.
Tensors are allocated at their exact sizes, so compute-sanitizer's memcheck sees any read past
an end (README, Development)."""

import pytest
import torch

from gpu_solutions import (OWN_AUTHOR, call, capture, check, check_calls, entry_point, needs_cuda, own_solutions,
                           replay_on)
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle
from lowbit_gemm.solutions import load_solution
from lowbit_gemm.testing import (expected_m_hint, grouped_inputs, grouped_random_inputs, nan_output, spread_a_scale,
                                 wide_b_scale)

pytestmark = needs_cuda
triton = pytest.importorskip("triton")

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
G, N, K = 4, 2048, 2048
SOLUTIONS = own_solutions(DEF)

# (id, max_m, masked_m, how the inputs are made)
CASES = [
    ("max_m_1", 1, [1, 1, 0, 1], "quantized"),
    ("rows_1_63_65_128", 128, [1, 63, 65, 128], "quantized"),
    ("max_m_65_full", 65, [65, 63, 1, 64], "quantized"),
    ("odd_max_m_5", 5, [5, 3, 0, 9], "quantized"),
    ("odd_max_m_41", 41, [41, 17, -1, 30], "quantized"),
    ("decode_rows", 128, [9, 32, 17, 24], "quantized"),
    ("out_of_range", 256, [-7, 300, 0, 100], "quantized"),
    ("int32_extremes", 64, [2**31 - 1, -2**31, 1, 0], "quantized"),
    ("all_empty", 256, [0, 0, 0, 0], "quantized"),
    ("one_full_group", 256, [256, 0, 0, 0], "quantized"),
    ("max_m_512_full", 512, [512] * 4, "quantized"),
    ("max_m_1024_three_quarters", 1024, [768, 700, 812, 790], "quantized"),
    ("max_m_4096_few_rows", 4096, [20, 14, 26, 23], "quantized"),
    ("max_m_4096_many_rows", 4096, [1228, 1100, 1390, 1300], "quantized"),
    ("outlier_channels", 64, [64, 40, 12, 33], "outliers"),
    ("outlier_channels_large", 1024, [1024, 600, 900, 1000], "outliers"),
    ("harness_random", 64, [64, 17, 0, 50], "random"),
    ("harness_random_large", 512, [512, 300, 129, 511], "random"),
    ("wide_b_scale", 128, [128, 100, 31, 77], "wide"),
    ("subnormal_fold", 256, [256, 200, 31, 129], "subnormal"),
    ("a_scale_spread", 300, [300, 129, 0, 257], "a_scale_spread"),
    ("a_scale_beyond_rescale", 300, [300, 129, 0, 257], "a_scale_beyond"),
]


def make(max_m, masked_m, how, seed=0, expected_m=None):
    if how == "random":
        inputs = grouped_random_inputs(max_m, masked_m, N, K, seed=seed,
                                       expected_m=expected_m_hint(masked_m, max_m))
    else:
        inputs = grouped_inputs(max_m, masked_m, N, K, seed=seed, outliers=how == "outliers")
    if how == "wide":
        inputs = (*inputs[:3], wide_b_scale(G, N, K, seed=seed), *inputs[4:])
    if how == "subnormal":
        inputs = subnormal_fold(inputs)
    if how in ("a_scale_spread", "a_scale_beyond"):  # token scales far apart, zero blocks: the prepared form's rescale
        a_scale = spread_a_scale(inputs[1], seed=seed)
        if how == "a_scale_beyond":  # one row's scales past the rescale's 2^45: the exact fallback
            a_scale[1, 77] *= 2.0 ** 60
        inputs = (inputs[0], a_scale, *inputs[2:])
    if expected_m is not None:
        inputs = (*inputs[:5], expected_m)
    return tuple(t.cuda() if isinstance(t, torch.Tensor) else t for t in inputs)


def subnormal_fold(inputs):
    """Blocks that fold with 23 binades of spread: sub-block 0 of every 128-K block has scale 1 and
    only zero codes, sub-blocks 1-3 scales 2^-15, 2^-20, 2^-23, so an fp16 fold holds them as
    subnormals and they alone make the output (a_scale x 2^15 brings it to the check's scale):
    a flushed or rounded subnormal shows in every element."""
    a_fp8, a_scale, b_fp4, b_scale, masked_m, hint = inputs
    packed = b_fp4.clone().view(torch.uint8).reshape(G, N, K // 128, 64)
    packed[..., :16] = 0  # K 0..31 of each block: codes 0
    exps = torch.tensor([0.0, -15.0, -20.0, -23.0]).repeat(K // 128)
    b_scale = torch.exp2(exps).expand(G, N, K // 32).contiguous()
    return a_fp8, a_scale * 2.0 ** 15, packed.reshape(G, N, K // 2).view(torch.int8), b_scale, masked_m, hint


def oracle(inputs):
    return grouped_gemm_oracle(*inputs[:5])


@pytest.mark.parametrize("name", SOLUTIONS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_oracle_and_reference(name, case):
    cid, max_m, masked_m, how = case
    run = entry_point(DEF, name)
    inputs = make(max_m, masked_m, how)
    check_calls(run, inputs, (G, max_m, N), oracle(inputs), DEF, f"{name} {cid}")


@pytest.mark.parametrize("name", SOLUTIONS)
@pytest.mark.parametrize("max_m, masked_m, hint", [
    (1024, [900, 1000, 1024, 800], 1),     # hint far below the rows
    (64, [3, 1, 0, 2], 4096),              # hint far above max_m
    (256, [100, 200, 50, 0], -5),          # negative hint
], ids=["hint_too_small", "hint_too_large", "hint_negative"])
def test_expected_m_never_changes_the_result(name, max_m, masked_m, hint):
    run = entry_point(DEF, name)
    inputs = make(max_m, masked_m, "quantized", seed=1, expected_m=hint)
    check(call(run, inputs, (G, max_m, N)), inputs, oracle(inputs), DEF, f"{name} hint {hint}")


@pytest.mark.parametrize("name", SOLUTIONS)
def test_one_call_in_a_cuda_graph(name):
    """Captured once, replayed on the captured inputs and again after they are overwritten in
    place: a replay must read the inputs, not what the capture saw."""
    run = entry_point(DEF, name)
    max_m, masked_m = 128, [128, 40, 0, 77]
    inputs = make(max_m, masked_m, "quantized", seed=2)
    c = torch.empty(G, max_m, N, dtype=torch.bfloat16, device="cuda")
    graph = capture(run, inputs, c)
    for seed, mm in ((2, masked_m), (3, [5, 128, 64, 1])):
        replay_on(graph, inputs, make(max_m, mm, "quantized", seed=seed), c)
        check(c, inputs, oracle(inputs), DEF, f"{name} graph replay, seed {seed}")


@pytest.mark.parametrize("name", SOLUTIONS)
@pytest.mark.parametrize("k", [128, 384, 640, 2048 + 128])
def test_k_that_is_no_multiple_of_512(name, k):
    """The solutions' generic entry (grouped_gemm_fp8_fp4_masked) at k = 128 x 1, 3, 5, 17 with
    more tiles than SMs, so each CTA crosses tile boundaries mid-way through a ring of stages
    (the CUDA kernel's raw ring is 4 stages deep: k = 2048 alone never shows a boundary there)."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m, n = 1024, 512
    masked_m = [1024, 1000, 777, 1024]
    inputs = tuple(t.cuda() for t in grouped_inputs(max_m, masked_m, n, k, seed=5)[:5])
    c = nan_output((G, max_m, n), device="cuda")
    mod.grouped_gemm_fp8_fp4_masked(*inputs, c)
    torch.cuda.synchronize()
    check_accuracy(c, grouped_gemm_oracle(*inputs), what=f"{name} k {k}")


# the CUDA kernel's every tile, forced past the heuristic: each must be exact wherever a wrong hint
# could send it (edges of masked_m, groups of more rows than the tokens-as-N form's 32, every fold mode,
# the rows past masked_m however many: none, most of a 4096-row bucket, all)
TILE_CASE_IDS = ("rows_1_63_65_128", "max_m_65_full", "odd_max_m_41", "out_of_range", "all_empty", "max_m_512_full",
                 "max_m_1024_three_quarters", "max_m_4096_few_rows", "max_m_4096_many_rows", "outlier_channels_large",
                 "wide_b_scale", "subnormal_fold", "a_scale_spread", "a_scale_beyond_rescale")
CUDA_KERNEL = [p for p in SOLUTIONS if p.values[0] == "cuda_fp4_wgmma"]
CUDA_TILES = load_solution(DEF, OWN_AUTHOR, "cuda_fp4_wgmma").TILES  # every tile the kernel instantiates


@pytest.mark.parametrize("name", CUDA_KERNEL)
@pytest.mark.parametrize("tile", CUDA_TILES, ids=lambda t: "x".join(map(str, t)))
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in TILE_CASE_IDS], ids=lambda c: c[0])
def test_cuda_kernel_at_every_tile(name, tile, case):
    cid, max_m, masked_m, how = case
    mod = load_solution(DEF, OWN_AUTHOR, name)
    inputs = make(max_m, masked_m, how)
    c = nan_output((G, max_m, N), device="cuda")
    mod.grouped_gemm_fp8_fp4_masked(*inputs[:5], c, tile=tile)
    torch.cuda.synchronize()
    check(c, inputs, oracle(inputs), DEF, f"{name} {cid} tile {tile}")


@pytest.mark.parametrize("tile", [(128, 256, "prepared"), (256, 128, "register")], ids=["prepared", "register"])
@pytest.mark.parametrize("name", CUDA_KERNEL)
def test_gated_form_in_a_cuda_graph(name, tile):
    """The prepared form's two launches and the register-weights form's three (each after the
    first a programmatic dependent) captured once and replayed on new inputs whose scales clear
    the gate, then set it (weight scales over 30+ binades): the gate is read on the device at
    every replay."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m, masked_m = 300, [300, 129, 0, 257]
    inputs = make(max_m, masked_m, "quantized", seed=7)
    c = nan_output((G, max_m, N), device="cuda")

    def run(a, a_s, b, b_s, mm, hint, out):
        return mod.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, out, tile=tile)
    graph = capture(run, inputs, c)
    for seed, mm, how in ((8, [1, 300, 256, 128], "quantized"), (9, masked_m, "wide"), (10, masked_m, "quantized")):
        replay_on(graph, inputs, make(max_m, mm, how, seed=seed), c)
        check(c, inputs, oracle(inputs), DEF, f"{name} {tile[2]} form in a graph, {how}, seed {seed}")


@pytest.mark.parametrize("tile", [(128, 256, "prepared"), (256, 128, "register")], ids=["prepared", "register"])
@pytest.mark.parametrize("name", CUDA_KERNEL)
def test_gated_form_calls_on_two_streams(name, tile):
    """Two calls of a form with a workspace (first pass, GEMM, fallback) in flight at once on two
    streams, one of them gated (a token row's scales past the rescale): each call has its own
    workspace and gate, so neither sees the other's."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m = 1024
    ins = [make(max_m, [1024, 700, 0, 900], "a_scale_beyond", seed=21), make(max_m, [600, 1024, 333, 1], "quantized",
                                                                           seed=22)]
    outs = [nan_output((G, max_m, N), device="cuda") for _ in ins]
    streams = [torch.cuda.Stream() for _ in ins]
    torch.cuda.synchronize()
    for st, x, c in zip(streams, ins, outs):
        with torch.cuda.stream(st):
            mod.grouped_gemm_fp8_fp4_masked(*x[:5], c, tile=tile)
    torch.cuda.synchronize()
    for x, c in zip(ins, outs):
        check(c, x, oracle(x), DEF, f"{name} {tile[2]} form on two streams")


@pytest.mark.parametrize("name", CUDA_KERNEL)
def test_register_form_with_every_tile_empty_after_a_gated_call(name):
    """The register-weights GEMM's tiles wholly past masked_m do not wait for the first pass, so
    where every tile is empty its fallback may read the pass's gate words before the pass has
    written them. Alternated with calls whose pass sets a word (the same sizes, so the allocator
    hands back the same workspace), every call must still be exact: zeros where all are empty."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m = 300
    for i, (how, masked_m) in enumerate([("a_scale_beyond", [300, 129, 0, 257]), ("quantized", [0, 0, 0, 0])] * 2):
        inputs = make(max_m, masked_m, how, seed=12 + i)[:5]
        c = nan_output((G, max_m, N), device="cuda")
        mod.grouped_gemm_fp8_fp4_masked(*inputs, c, tile=(256, 128, "register"))
        torch.cuda.synchronize()
        check_accuracy(c, grouped_gemm_oracle(*inputs), what=f"{name} register form, {how}, call {i}")


@pytest.mark.parametrize("name", CUDA_KERNEL)
@pytest.mark.parametrize("n", [384, 2048 + 128])
def test_many_rows_where_n_is_no_multiple_of_256(name, n):
    """Groups of more than 1024 rows where the prepared form's 256 weight rows do not divide n:
    the heuristic's register-weights form, through the generic entry."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m, k, masked_m = 1536, 1024, [1536, 1100, 0, 1025]
    assert mod.tile_shape(G, max_m, n, max_m) == (256, 128, "register")
    inputs = tuple(t.cuda() for t in grouped_inputs(max_m, masked_m, n, k, seed=8)[:5])
    c = nan_output((G, max_m, n), device="cuda")
    mod.grouped_gemm_fp8_fp4_masked(*inputs, c)
    torch.cuda.synchronize()
    check_accuracy(c, grouped_gemm_oracle(*inputs), what=f"{name} n {n}")


@pytest.mark.parametrize("name", CUDA_KERNEL)
@pytest.mark.parametrize("tile", [(128, 256, "prepared"), (256, 128, "register")], ids=["prepared", "register"])
@pytest.mark.parametrize("k", [128, 384, 640])
def test_gated_forms_over_many_tiles_a_cta_at_odd_block_counts(name, tile, k):
    """At k = 128 x 1, 3, 5 (an odd number of 128-K blocks) and 2,048 rows a group: the prepared
    form's persistent walk, which counts its ring's slots over a CTA's three or four tiles (some
    past masked_m) and stages the epilogue in the last block's two slots, and the register-weights
    form's block loop, unrolled by two, ending on a lone block."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m, masked_m = 2048, [2048, 1500, 0, 1900]
    inputs = tuple(t.cuda() for t in grouped_inputs(max_m, masked_m, N, k, seed=11)[:5])
    c = nan_output((G, max_m, N), device="cuda")
    mod.grouped_gemm_fp8_fp4_masked(*inputs, c, tile=tile)
    torch.cuda.synchronize()
    check_accuracy(c, grouped_gemm_oracle(*inputs), what=f"{name} {tile[2]} k {k}")


@pytest.mark.parametrize("name", CUDA_KERNEL)
@pytest.mark.parametrize("k", [128, 384, 640])
def test_tokens_as_n_form_with_fewer_stages_than_warpgroups(name, k):
    """The 32 x 64 form splits K's stages over four warpgroups: at k = 128 and 384 some have none,
    at 640 one has two; masked_m past 32 rows takes two rounds of token rows."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m, n, masked_m = 40, 512, [40, 3, 0, 33]
    inputs = tuple(t.cuda() for t in grouped_inputs(max_m, masked_m, n, k, seed=6)[:5])
    c = nan_output((G, max_m, n), device="cuda")
    mod.grouped_gemm_fp8_fp4_masked(*inputs, c, tile=(32, 64))
    torch.cuda.synchronize()
    check_accuracy(c, grouped_gemm_oracle(*inputs), what=f"{name} tokens-as-N k {k}")


@pytest.mark.parametrize("name", CUDA_KERNEL)
@pytest.mark.parametrize("tile", [(8, 32), (16, 32)], ids=["8x32", "16x32"])
@pytest.mark.parametrize("k", [128, 384, 640, 1152])
def test_mma_sync_form_with_fewer_blocks_than_warps(name, tile, k):
    """The mma.sync form splits K's 128-K blocks over 8 warps, two at a time where it loads two:
    at k = 128 .. 640 some warps have none, at 1152 one has a block past k; masked_m past the
    round's token rows takes more rounds than the grid's 4 token CTAs."""
    mod = load_solution(DEF, OWN_AUTHOR, name)
    max_m, n, masked_m = 40, 512, [40, 3, 0, 33]
    inputs = tuple(t.cuda() for t in grouped_inputs(max_m, masked_m, n, k, seed=7)[:5])
    c = nan_output((G, max_m, n), device="cuda")
    mod.grouped_gemm_fp8_fp4_masked(*inputs, c, tile=tile)
    torch.cuda.synchronize()
    check_accuracy(c, grouped_gemm_oracle(*inputs), what=f"{name} mma.sync {tile} k {k}")
