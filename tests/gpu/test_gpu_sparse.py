"""Definition B's own solutions on a CUDA GPU, through their public entry point, at the
definition's sizes (n = k = 2048): m from 1 to 8192 including 63 and 65 around a tile, pruned
and random 2:4 metadata (repeated positions, high bits), every metadata byte, e4m3 B at its
full range (amax 448), and one call captured in a CUDA graph. Tensors are allocated at their
exact sizes, so compute-sanitizer's memcheck sees any read past an end (README, Development)."""

import pytest
import torch

from gpu_solutions import call, capture, check, check_calls, entry_point, needs_cuda, own_solutions, replay_on
from lowbit_gemm.oracle import sparse_gemm_oracle
from lowbit_gemm.solutions import load_solution
from lowbit_gemm.testing import sparse_pruned_inputs, sparse_random_inputs

pytestmark = needs_cuda
triton = pytest.importorskip("triton")

DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
N = K = 2048
SOLUTIONS = own_solutions(DEF)

# (id, m, builder and its options)
CASES = [(f"pruned_m_{m}", m, "pruned", {}) for m in (1, 2, 3, 7, 16, 37, 63, 64, 65, 256, 1000, 2048)]
CASES += [
    ("random_meta_m_64", 64, "random", {}),
    ("random_meta_m_1000", 1000, "random", {}),
    ("pruned_meta_random_vals_m_4096", 4096, "random", {"pruned_meta": True}),
    ("pruned_meta_random_vals_m_8192", 8192, "random", {"pruned_meta": True}),
    ("full_range_b_m_16", 16, "pruned", {"full_range_b": True}),
    ("full_range_b_m_1024", 1024, "pruned", {"full_range_b": True}),
    ("every_meta_byte_m_8", 8, "all_meta", {}),
]


def make(m, how, opts, seed=0):
    if how == "pruned":
        inputs = sparse_pruned_inputs(m, N, K, seed=seed, **opts)
    elif how == "random":
        inputs = sparse_random_inputs(m, N, K, seed=seed, **opts)
    else:  # each row holds all 256 meta bytes twice
        vals, _, b = sparse_random_inputs(m, N, K, seed=seed)
        meta = torch.arange(256).repeat(m, K // 4 // 256).to(torch.uint8).view(torch.int8)
        inputs = (vals, meta, b)
    return tuple(t.cuda() for t in inputs)


@pytest.mark.parametrize("name", SOLUTIONS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_oracle_and_reference(name, case):
    cid, m, how, opts = case
    run = entry_point(DEF, name)
    inputs = make(m, how, opts)
    check_calls(run, inputs, (m, N), sparse_gemm_oracle(*inputs), DEF, f"{name} {cid}")


@pytest.mark.parametrize("name", SOLUTIONS)
def test_a_call_after_a_larger_one(name):
    """Workspaces or counters a large call leaves behind must not leak into a smaller one."""
    run = entry_point(DEF, name)
    call(run, make(4096, "random", {"pruned_meta": True}, seed=5), (4096, N))
    inputs = make(8192, "random", {"pruned_meta": True}, seed=6)
    check(call(run, inputs, (8192, N)), inputs, sparse_gemm_oracle(*inputs), DEF, f"{name} after m 4096")
    inputs = make(65, "pruned", {}, seed=7)
    check(call(run, inputs, (65, N)), inputs, sparse_gemm_oracle(*inputs), DEF, f"{name} m 65 after m 8192")


@pytest.mark.parametrize("name", SOLUTIONS)
@pytest.mark.parametrize("m", [256, 4096])
def test_one_call_in_a_cuda_graph(name, m):
    """Captured once, replayed on the captured inputs and again after they are overwritten in
    place: a replay must read the inputs, not what the capture saw."""
    run = entry_point(DEF, name)
    inputs = make(m, "pruned", {}, seed=2)
    c = torch.empty(m, N, dtype=torch.bfloat16, device="cuda")
    graph = capture(run, inputs, c)
    for seed in (2, 3):
        replay_on(graph, inputs, make(m, "pruned", {}, seed=seed), c)
        check(c, inputs, sparse_gemm_oracle(*inputs), DEF, f"{name} graph replay, seed {seed}")


CUDA = "cuda_sparse_fp4_mma"
_HEUR = load_solution(DEF, "lowbit", CUDA, entry="heuristics")
CUDA_TILES = [*_HEUR.TILES, *_HEUR.PATHS]
is_hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(not is_hopper, reason=f"{CUDA} needs a Hopper GPU")
@pytest.mark.parametrize("tile", CUDA_TILES, ids=[t if isinstance(t, str) else "%dx%d" % t for t in CUDA_TILES])
@pytest.mark.parametrize("m", [1, 9, 65, 200])
def test_cuda_every_tile(tile, m):
    """Each of the CUDA solution's tiles, forced, on random meta bytes and B at e4m3's full range:
    m 1 and 9 leave a token round part-filled, 65 and 200 need several rounds a tile."""
    main = load_solution(DEF, "lowbit", CUDA)
    inputs = make(m, "random", {"full_range_b": True}, seed=m)
    check_calls(lambda *a: main.sparse_gemm_fp4_fp8(*a, tile=tile), inputs, (m, N), sparse_gemm_oracle(*inputs), DEF,
                f"{CUDA} tile {tile} m {m}")


@pytest.mark.skipif(not is_hopper, reason=f"{CUDA} needs a Hopper GPU")
@pytest.mark.parametrize("tile", list(_HEUR.SPARSE_MMA))
@pytest.mark.parametrize("m", [255, 257, 1000, 4100], ids=lambda m: f"m{m}")
def test_cuda_sparse_mma_rows(tile, m):
    """The sparse-MMA paths, forced, around and past their tiles (128 / 256 tokens, m_pad a
    multiple of 256), random meta bytes and B at e4m3's full range."""
    main = load_solution(DEF, "lowbit", CUDA)
    inputs = make(m, "random", {"full_range_b": True}, seed=m)
    check_calls(lambda *a: main.sparse_gemm_fp4_fp8(*a, tile=tile), inputs, (m, N), sparse_gemm_oracle(*inputs), DEF,
                f"{CUDA} tile {tile} m {m}")


@pytest.mark.skipif(not is_hopper, reason=f"{CUDA} needs a Hopper GPU")
def test_cuda_calls_on_two_streams():
    """Two many-row calls in flight at once on two streams: each has its own workspace."""
    main = load_solution(DEF, "lowbit", CUDA)
    ins = [make(4096, "random", {"pruned_meta": True}, seed=s) for s in (11, 12)]
    outs = [torch.full((4096, N), float("nan"), dtype=torch.bfloat16, device="cuda") for _ in ins]
    streams = [torch.cuda.Stream() for _ in ins]
    torch.cuda.synchronize()
    for st, x, c in zip(streams, ins, outs):
        with torch.cuda.stream(st):
            main.run(*x, c)
    torch.cuda.synchronize()
    for x, c in zip(ins, outs):
        check(c, x, sparse_gemm_oracle(*x), DEF, f"{CUDA} two streams")


@pytest.mark.skipif(not is_hopper, reason=f"{CUDA} needs a Hopper GPU")
def test_cuda_first_call_of_a_process_on_many_rows():
    """A process whose first call takes the sparse-MMA path (the library is built or loaded while
    the plan is made), as the benchmark's fresh worker processes do."""
    import subprocess
    import sys

    code = (f"import torch; from lowbit_gemm.solutions import load_solution; "
            f"from lowbit_gemm.testing import sparse_random_inputs; "
            f"main = load_solution({DEF!r}, 'lowbit', {CUDA!r}); "
            f"x = [t.cuda() for t in sparse_random_inputs(4096, {N}, {K}, seed=1)]; "
            f"c = torch.empty(4096, {N}, dtype=torch.bfloat16, device='cuda'); main.run(*x, c); "
            f"torch.cuda.synchronize(); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
