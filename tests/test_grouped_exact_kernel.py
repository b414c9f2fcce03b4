"""CPU tests (Triton interpreter) of the grouped solution's two forms (one pass on fp16 MMAs,
two passes on bf16) against the float64 oracle at reduced sizes: tile edges, the scale fold's
boundaries, the exact path for scales that do not fold, masked_m's odd values, serving-shaped
data, argument checks, and the one-pass form's PTX decode (emulated)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle
from lowbit_gemm.solutions import load_solution
from definition_cases import grouped_operands as make
from ptx_model import prmt

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
SOL = "triton_fp4_exact_mma"
main = load_solution(DEF, "lowbit", SOL)
heur = load_solution(DEF, "lowbit", SOL, "heuristics")
kernel = load_solution(DEF, "lowbit", SOL, "kernel")
T = heur.Tile
TILES = {"narrow": T(16, 32, 4, 1, GROUP_M=2), "wide": T(32, 64, 4, 1),
         "one_pass": T(16, 32, 4, 1, one_pass=True), "one_pass_swap": T(16, 64, 4, 1, one_pass=True, SWAP=True)}


def check(a, a_s, b, b_s, mm, tile, expected_m=None):
    g, max_m, _ = a.shape
    c = torch.full((g, max_m, b.shape[1]), float("nan"), dtype=torch.bfloat16)  # poisoned
    assert main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, expected_m, tile=tile) is c
    check_accuracy(c, grouped_gemm_oracle(a, a_s, b, b_s, mm))
    for grp in range(g):
        rows = min(max(int(mm[grp]), 0), max_m)
        assert torch.all(c[grp, rows:] == 0)
    return c


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize("masked", [[-3, 0, 40, 17], [41, 1000, 16, 33]])
def test_masked_rows_and_tile_edges(tile, masked):
    a, a_s, b, b_s = make(4, 41, 96, 256)  # max_m 41 and n 96: no multiple of the tiles
    check(a, a_s, b, b_s, torch.tensor(masked, dtype=torch.int32), TILES[tile])


@pytest.mark.parametrize("tile", list(TILES))
def test_max_m_one_and_int64_masked_past_int32(tile):
    a, a_s, b, b_s = make(3, 1, 64, 128, seed=1)
    check(a, a_s, b, b_s, torch.tensor([1, 2 ** 32 + 1, -(2 ** 33)], dtype=torch.int64), TILES[tile])


def test_max_m_zero_and_no_groups_launch_nothing():
    a, a_s, b, b_s = make(3, 0, 32, 128)
    c = torch.empty(3, 0, 32, dtype=torch.bfloat16)
    main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, torch.zeros(3, dtype=torch.int32), c)
    a, a_s, b, b_s = make(0, 4, 32, 128)
    main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, torch.zeros(0, dtype=torch.int32),
                                     torch.empty(0, 4, 32, dtype=torch.bfloat16))


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize("spread", [23, 24, int(kernel.MAX_SPREAD.value), int(kernel.MAX_SPREAD.value) + 1])
def test_fold_boundary(tile, spread):
    """A block whose scales span exactly MAX_SPREAD binades stays on the folded path; one more
    binade takes the exact path. A is nonzero only where the block's smallest scale applies,
    so the output is made of the values the fold shifts furthest: a flush or a lost bit
    shows beyond the tolerance."""
    a, a_s, b, b_s = make(2, 16, 64, 256, seed=2)
    a = a.float()
    a[..., 32:] = 0
    a = a.to(torch.float8_e4m3fn)
    a_s = torch.ones_like(a_s)
    b_s = torch.full_like(b_s, 2.0 ** (spread - 100))
    b_s[..., 0] = 2.0 ** -100
    a_s = torch.full_like(a_s, 2.0 ** 97)
    c = check(a, a_s, b, b_s, torch.tensor([16, 9], dtype=torch.int32), TILES[tile])
    assert c.abs().max() > 0.5


@pytest.mark.parametrize("tile", list(TILES))
def test_scales_that_do_not_fold_take_the_exact_path(tile):
    a, a_s, b, b_s = make(2, 24, 64, 384, seed=4)
    gen = torch.Generator().manual_seed(5)
    b_s = b_s.clone()
    b_s[0, 3, 1] = 2.0 ** 100          # > 125 binades inside one 128-block
    b_s[0, 3, 2] = 2.0 ** -30
    b_s[0, 9, 6] = 2.0 ** 120          # 126 binades above its neighbours
    b_s[0, 40, 5] = -0.37              # negative, not a power of two
    b_s[1, 7, 0] = 0.0                 # zero
    b_s[1, 60:, 8:] = torch.rand(4, 4, generator=gen) + 0.1   # any float, whole block
    b_s[1, 10, 11] = 2.0 ** -130       # subnormal power of two
    a_s = a_s * (torch.rand(a_s.shape, generator=gen) * 3 - 1)  # any-float a_scale, some negative
    check(a, a_s, b, b_s, torch.tensor([24, 20], dtype=torch.int32), TILES[tile])


def test_outlier_channels_and_outlier_weights():
    """Serving-shaped data: 4 activation channels 50x the rest, 1 % of weights 30x their row."""
    gen = torch.Generator().manual_seed(6)
    from lowbit_gemm.quantize import quantize_act_fp8_per128, quantize_weight_fp4_per32
    x = torch.randn(2, 20, 256, generator=gen)
    x[..., torch.randperm(256, generator=gen)[:4]] *= 50
    w = torch.randn(2, 64, 256, generator=gen) * 0.02
    w = torch.where(torch.rand(w.shape, generator=gen) < 0.01, w * 30, w)
    a, a_s = quantize_act_fp8_per128(x)
    b, b_s = quantize_weight_fp4_per32(w)
    for tile in TILES.values():
        check(a, a_s, b, b_s, torch.tensor([20, 11], dtype=torch.int32), tile)


@pytest.mark.parametrize("max_m,expected", [(1, 1), (64, 28), (128, None), (512, 512), (4096, 24)])
def test_heuristic_tile_runs(max_m, expected):
    tile = heur.choose(max_m, expected)
    assert isinstance(tile, heur.Tile)
    a, a_s, b, b_s = make(1, min(max_m, 20), 128, 128, seed=7)
    check(a, a_s, b, b_s, torch.tensor([13], dtype=torch.int32), tile)


def test_every_rule_says_why():
    assert heur.RULES[-1][0] is None
    assert all(why for _, _, why in heur.RULES)


def test_run_entry_checks_definition_shapes():
    a, a_s, b, b_s = make(2, 8, 32, 128)
    c = torch.empty(2, 8, 32, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="a_fp8"):
        main.run(a, a_s, b, b_s, torch.zeros(2, dtype=torch.int32), 8, c)


@pytest.mark.parametrize("bad", ["a_scale_dtype", "b_shape", "k", "c_dtype", "masked_m", "contig", "hint", "tile"])
def test_bad_arguments_name_the_argument(bad):
    a, a_s, b, b_s = make(2, 8, 32, 256)
    args = dict(a_fp8=a, a_scale=a_s, b_fp4=b, b_scale=b_s, masked_m=torch.zeros(2, dtype=torch.int32),
                c=torch.empty(2, 8, 32, dtype=torch.bfloat16))
    name = {"a_scale_dtype": "a_scale", "b_shape": "b_scale", "k": "a_fp8", "c_dtype": "c",
            "masked_m": "masked_m", "contig": "a_scale", "hint": "expected_m", "tile": "tile"}[bad]
    if bad == "a_scale_dtype":
        args["a_scale"] = a_s.double()
    elif bad == "b_shape":
        args["b_scale"] = b_s[:, :, :4].contiguous()
    elif bad == "k":
        args["a_fp8"] = a[:, :, :200].contiguous()
    elif bad == "c_dtype":
        args["c"] = args["c"].float()
    elif bad == "masked_m":
        args["masked_m"] = args["masked_m"].float()
    elif bad == "contig":
        args["a_scale"] = a_s.transpose(0, 1).contiguous().transpose(0, 1)
    elif bad == "hint":
        args["expected_m"] = "many"
    elif bad == "tile":
        args["tile"] = (16, 32)
    with pytest.raises(ValueError, match=name):
        main.grouped_gemm_fp8_fp4_masked(**args)
    # A cached plan for the good arguments does not let the bad ones through later.
    if bad not in ("hint", "tile"):
        good = dict(a_fp8=a, a_scale=a_s, b_fp4=b, b_scale=b_s, masked_m=torch.zeros(2, dtype=torch.int32),
                    c=torch.empty(2, 8, 32, dtype=torch.bfloat16))
        main.grouped_gemm_fp8_fp4_masked(**good)
        with pytest.raises(ValueError, match=name):
            main.grouped_gemm_fp8_fp4_masked(**args)


def test_a_float_hint_is_refused_after_an_equal_int_one_made_the_plan():
    a, a_s, b, b_s = make(2, 8, 32, 256)
    args = dict(a_fp8=a, a_scale=a_s, b_fp4=b, b_scale=b_s, masked_m=torch.zeros(2, dtype=torch.int32),
                c=torch.empty(2, 8, 32, dtype=torch.bfloat16))
    main.grouped_gemm_fp8_fp4_masked(**args, expected_m=4)
    with pytest.raises(ValueError, match="expected_m"):
        main.grouped_gemm_fp8_fp4_masked(**args, expected_m=4.0)


# --- The one-pass form's PTX decode cannot run in the interpreter: its text is executed here
# --- by a small emulator of the instructions it uses, on every byte in every position.

one_pass = load_solution(DEF, "lowbit", SOL, "one_pass")


def _run_ptx(text, regs):
    mask = 0xFFFFFFFF
    for line in text.splitlines():
        line = line.strip().rstrip(";")
        if not line or line[0] in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        dst, *srcs = [x.strip() for x in args.split(",")]
        v = [int(x, 0) if x[0].isdigit() else regs[x] for x in srcs]
        regs[dst] = {"mov.b32": lambda: v[0], "and.b32": lambda: v[0] & v[1], "or.b32": lambda: v[0] | v[1],
                     "shl.b32": lambda: (v[0] << v[1]) & mask, "shr.u32": lambda: v[0] >> v[1],
                     "prmt.b32": lambda: prmt(v[0], v[1], v[2])}[op]() & mask
    return regs


def test_prmt_decode_matches_e2m1_for_every_byte():
    from lowbit_gemm.numerics import e2m1_decode

    text = one_pass._PRMT_DECODE.value
    words = [b0 | (b1 << 8) | (b2 << 16) | (b3 << 24) for b0 in range(256) for b1, b2, b3 in
             ((b0 ^ 0x5A, (b0 * 7) & 0xFF, 255 - b0), (0x00, 0xFF, 0x88), (0x91, 0x19, 0x7F))]
    for word in words:
        r = _run_ptx(text, {"$4": word})
        got = torch.tensor([r["$0"], r["$1"], r["$2"], r["$3"]], dtype=torch.int64)
        halves = torch.stack((got & 0xFFFF, got >> 16), dim=-1).flatten().to(torch.int16)  # int16 wraps
        values = halves.view(torch.float16).to(torch.float64)
        # $0, $1: the even codes (low nibbles) of bytes 0-1, 2-3; $2, $3: the odd codes.
        data = [(word >> (8 * i)) & 0xFF for i in range(4)]
        want_even = e2m1_decode(torch.tensor([d & 0xF for d in data])).to(torch.float64)
        want_odd = e2m1_decode(torch.tensor([d >> 4 for d in data])).to(torch.float64)
        assert torch.equal(values[:4], want_even) and torch.equal(values[4:], want_odd), hex(word)
        assert torch.equal(torch.signbit(values[:4]), torch.signbit(want_even)), hex(word)  # -0 is -0
