"""CPU tests (Triton interpreter) of the grouped FP8 x FP4 masked GEMM solution, against the
float64 oracle, at reduced sizes, with both tile orientations and every scale path."""

import dataclasses
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle
from lowbit_gemm.solutions import load_solution
from definition_cases import grouped_operands as make

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
main = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma")
heur = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics")
fws = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "fused_ws")

NORMAL = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1)
SWAP = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1)
SPLIT = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, m_split=2)
FOLD1D = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, fold2d=False)
FOLD1DN = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, fold2d=False)
PREDEC = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, predec=True)
# The decode pass with narrower row blocks than n (edge rows masked) and 8 warps.
PREDEC_D32 = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, predec=True,
                         decode_rows=32, decode_warps=8)
# The decode pass with two adjacent 128-K blocks per program (64 rows: at n = 96 the second
# row block is half past n, masked).
PREDEC_KB2 = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, predec=True, tiles=True,
                         decode_rows=64, decode_kb=2)
SPLITK = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, split_k=2)
SPLITK_SWAP = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, split_k=3)
# Pass 2 as one output tile per program (zeros included), tiles not dividing max_m or n.
TILES = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, predec=True, tiles=True)
# Weight tiles wider than 32: their fallback tiles take the raw-code exact loop (kernel._exact_tile_raw).
TILES128 = heur.Config(BM=16, BN=128, swap=False, num_warps=4, num_stages=1, predec=True, tiles=True)
# 128-wide tiles on a row-referenced decode pass (one multiplier per weight row, applied
# after the GEMM's loop); tiles with a block that does not fold take the exact loop.
TILES128_ROW = heur.Config(BM=16, BN=128, swap=False, num_warps=4, num_stages=1, predec=True, tiles=True,
                           row_ref=True)
TILES64_ROW = heur.Config(BM=16, BN=64, swap=False, num_warps=4, num_stages=1, predec=True, tiles=True,
                          row_ref=True)
# 64-wide weight tiles: main loop + correction loop, no fallback guess.
TILES64 = heur.Config(BM=16, BN=64, swap=False, num_warps=4, num_stages=1, predec=True, tiles=True)
# One pass, weights on the MMA's M side, B decoded in the prmt lookup's k order (A loaded in it).
KPERM = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, kperm=True)
KPERM1D = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, fold2d=False, kperm=True)
KPERM_SPLITK = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, kperm=True, split_k=3)
KPERM_SPLITK2 = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, kperm=True, split_k=2)
# Two 128-K blocks per loop iteration (kernel._kperm_pair_loop).
KPERM_U2 = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, kperm=True, unroll=2)
KPERM_SPLITK2_U2 = heur.Config(BM=16, BN=32, swap=True, num_warps=4, num_stages=1, kperm=True, split_k=2, unroll=2)
CONFIGS = {"kperm": KPERM, "kperm1d": KPERM1D, "kperm_splitk": KPERM_SPLITK, "kperm_splitk2": KPERM_SPLITK2, "kperm_u2": KPERM_U2,
           "kperm_splitk2_u2": KPERM_SPLITK2_U2, "tiles": TILES, "tiles128": TILES128, "tiles128_row": TILES128_ROW, "tiles64_row": TILES64_ROW, "tiles64": TILES64, "normal": NORMAL, "swap": SWAP, "split": SPLIT, "fold1d": FOLD1D, "fold1dn": FOLD1DN,
           "predec": PREDEC, "predec_d32": PREDEC_D32, "predec_kb2": PREDEC_KB2, "splitk": SPLITK, "splitk_swap": SPLITK_SWAP}


def call(a, a_s, b, b_s, mm, config, expected_m=None):
    g, max_m, _ = a.shape
    c = torch.full((g, max_m, b.shape[1]), float("nan"), dtype=torch.bfloat16)  # poisoned
    out = main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, expected_m=expected_m, config=config)
    assert out is c
    return c


def check(a, a_s, b, b_s, mm, config):
    c = call(a, a_s, b, b_s, mm, config)
    ref = grouped_gemm_oracle(a, a_s, b, b_s, mm)
    check_accuracy(c, ref)
    # Rows at/after clamp(masked_m) are exact zeros (not NaN from the poisoned buffer).
    for grp in range(a.shape[0]):
        rows = min(max(int(mm[grp]), 0), a.shape[1])
        assert torch.all(c[grp, rows:] == 0)
    return c


@pytest.mark.parametrize("orient", ["normal", "swap", "split", "fold1d", "predec", "splitk", "tiles", "kperm", "kperm_splitk2",
                                    "predec_kb2", "kperm_u2", "tiles128_row", "tiles64_row"])
@pytest.mark.parametrize("masked", [[-3, 0, 40, 17], [41, 1000, 16, 33]])
def test_masked_rows(orient, masked):
    # max_m 41 and n 96: neither a multiple of the tiles.
    a, a_s, b, b_s = make(4, 41, 96, 256)
    check(a, a_s, b, b_s, torch.tensor(masked, dtype=torch.int32), CONFIGS[orient])


@pytest.mark.parametrize("orient", ["normal", "swap", "tiles"])
def test_max_m_one_and_int64_masked(orient):
    a, a_s, b, b_s = make(2, 1, 64, 128, seed=1)
    check(a, a_s, b, b_s, torch.tensor([1, 5], dtype=torch.int64), CONFIGS[orient])


@pytest.mark.parametrize("orient", ["swap", "tiles", "kperm"])
def test_int64_masked_past_int32(orient):
    """masked_m beyond int32's range means max_m rows (or none): clamped in its own width."""
    a, a_s, b, b_s = make(3, 3, 64, 128, seed=2)
    check(a, a_s, b, b_s, torch.tensor([2 ** 32 + 1, -(2 ** 33), 2], dtype=torch.int64), CONFIGS[orient])


def test_max_m_zero_launches_nothing():
    a, a_s, b, b_s = make(3, 0, 32, 128)
    c = torch.empty(3, 0, 32, dtype=torch.bfloat16)
    main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, torch.zeros(3, dtype=torch.int32), c)


@pytest.mark.parametrize("orient", ["normal", "swap", "predec", "tiles", "kperm", "predec_kb2", "kperm_u2",
                                    "tiles128_row"])
def test_ue8m0_moderate_spread_fast_path(orient):
    # Powers of two spread over up to 11 binades inside one 128-block: folded (spread up to
    # kernel.FOLD_SPREAD) or corrected exactly (wider), both in one tile.
    a, a_s, b, b_s = make(2, 24, 64, 256, seed=2)
    gen = torch.Generator().manual_seed(3)
    b_s = torch.exp2(torch.randint(-8, 4, b_s.shape, generator=gen).float())
    check(a, a_s, b, b_s, torch.tensor([24, 13], dtype=torch.int32), CONFIGS[orient])


@pytest.mark.parametrize("orient", ["normal", "swap", "fold1d", "fold1dn", "predec", "splitk_swap", "tiles", "tiles64", "kperm", "kperm1d", "kperm_splitk", "tiles128_row", "tiles64_row"])
def test_wide_and_non_power_of_two_scales_fallback(orient):
    a, a_s, b, b_s = make(2, 24, 64, 384, seed=4)
    gen = torch.Generator().manual_seed(5)
    b_s = b_s.clone()
    b_s[0, 3, 1] *= 2.0 ** 31          # > 30 binades inside one 128-block
    b_s[0, 3, 2] *= 2.0 ** -12
    b_s[0, 40, 5] = -0.37              # negative, not a power of two
    b_s[1, 7, 0] = 0.0                 # zero
    b_s[1, 60:, 8:] = torch.rand(4, 4, generator=gen) + 0.1   # any float, whole block
    b_s[1, 10, 11] = 2.0 ** -130       # subnormal power of two
    a_s = a_s * (torch.rand(a_s.shape, generator=gen) * 3 - 1)  # any-float a_scale, some negative
    check(a, a_s, b, b_s, torch.tensor([24, 20], dtype=torch.int32), CONFIGS[orient])


@pytest.mark.parametrize("orient", ["kperm_u2", "kperm_splitk2_u2"])
def test_two_blocks_per_iteration_with_fallback_scales(orient):
    # The paired loop on k = 512 (4 blocks: two iterations, or one per split) with scales
    # that do not fold in either block of a pair, and rows past n in the last weight tile.
    a, a_s, b, b_s = make(2, 20, 70, 512, seed=23)
    b_s = b_s.clone()
    b_s[0, 3, 5] = -0.5                # block 1 (second of the first pair)
    b_s[0, 68, 8] *= 2.0 ** 20         # block 2 (first of the second pair), a row of the last tile
    b_s[1, 9, :] = torch.rand(16) + 0.1  # every block of a row
    check(a, a_s, b, b_s, torch.tensor([20, 11], dtype=torch.int32), CONFIGS[orient])


def test_two_blocks_per_iteration_need_an_even_block_count():
    a, a_s, b, b_s = make(1, 4, 32, 384)
    with pytest.raises(ValueError, match="unroll"):
        call(a, a_s, b, b_s, torch.tensor([4], dtype=torch.int32), KPERM_U2)


@pytest.mark.parametrize("orient", ["tiles128_row", "tiles64_row"])
@pytest.mark.parametrize("first_block_low", [False, True])
def test_row_referenced_decode_with_blocks_outside_the_window(first_block_low, orient):
    # The row multiplier comes from the first block's largest scale with ROW_HEADROOM
    # binades above it; blocks more than that above, or 11 binades below the reference, are
    # left unfolded (ref = -1) and their tiles take the exact loop; a row whose first block
    # has no power of two folds nothing. Rows past n in the last tile.
    a, a_s, b, b_s = make(2, 20, 150, 512, seed=25)
    b_s = b_s.clone()
    b_s[0, 5, 8:12] *= 2.0 ** 6        # block 2 above the window
    b_s[0, 130, 4:8] *= 2.0 ** -13     # block 1 below it (the second row tile)
    b_s[1, 7, :4] = -1.0 / 64          # no power of two in the first block
    if first_block_low:                # the whole tensor's first blocks 3 binades low
        b_s[:, :, :4] *= 2.0 ** -3
    c = check(a, a_s, b, b_s, torch.tensor([20, 13], dtype=torch.int32), CONFIGS[orient])
    assert torch.isfinite(c.float()).all()


def test_row_ref_needs_64_or_128_wide_tiles():
    a, a_s, b, b_s = make(1, 4, 64, 256)
    with pytest.raises(ValueError, match="row_ref"):
        call(a, a_s, b, b_s, torch.tensor([4], dtype=torch.int32), dataclasses.replace(TILES, row_ref=True))


@pytest.mark.parametrize("hint", [30, 300])
def test_heuristic_decode_shape_with_fallback_scales(hint):
    # The decode pass as the heuristic launches it (DECODE_ROWS rows x DECODE_KB blocks), on
    # rows whose scales do not fold in some blocks (ref = -1 there, fixed by the GEMM's
    # correction loop, or by the exact loop on the 128-wide row-referenced tiles a hint of
    # 300 rows picks) and a row count that is no multiple of its row block.
    a, a_s, b, b_s = make(2, 40, 100, 512, seed=16)
    b_s = b_s.clone()
    b_s[0, 5, 2] = -0.25               # block 0, inside a 4-block program
    b_s[0, 97, 13] *= 2.0 ** 20        # block 3, a row of the last, partial row block
    b_s[1, 30, 8] = 0.0                # block 2
    cfg = dataclasses.replace(heur.choose_config(40 if hint < 40 else 512, hint, 100, k=512), tma=False, pdl=False)
    assert cfg.row_ref == (hint >= 256)
    assert cfg.predec and cfg.decode_kb == heur.DECODE_KB and cfg.decode_rows == heur.DECODE_ROWS
    check(a, a_s, b, b_s, torch.tensor([40, 7], dtype=torch.int32), cfg)


def test_decode_kb_must_divide_the_blocks():
    a, a_s, b, b_s = make(1, 4, 32, 384)
    with pytest.raises(ValueError, match="decode_kb"):
        call(a, a_s, b, b_s, torch.tensor([4], dtype=torch.int32), PREDEC_KB2)


@pytest.mark.parametrize("orient", ["normal", "tiles", "tiles128", "tiles64"])
def test_all_scales_nonfoldable(orient):
    # "tiles", "tiles128": every tile takes an exact K=32 loop instead of the FP8 main loop.
    a, a_s, b, b_s = make(2, 20, 160, 256, seed=6)
    b_s = torch.rand(b_s.shape, generator=torch.Generator().manual_seed(7)) * 0.01 + 1e-4
    check(a, a_s, b, b_s, torch.tensor([20, 7], dtype=torch.int32), CONFIGS[orient])


def test_tiles_fallback_guess_from_first_block():
    # Weight rows 0-31 (the first 32-wide tile) have no foldable first block but fold later
    # (the exact loop must apply those later, folded scales too); rows 32-63 fold everywhere
    # except row 40's last block (FP8 main loop, then the correction loop).
    a, a_s, b, b_s = make(2, 20, 64, 512, seed=8)
    gen = torch.Generator().manual_seed(9)
    b_s = torch.exp2(torch.randint(-7, -4, b_s.shape, generator=gen).float())
    b_s[:, :32, 0:4] = torch.rand(2, 32, 4, generator=gen) * 0.05 + 1e-3
    b_s[:, 40, 12:16] = -0.3
    check(a, a_s, b, b_s, torch.tensor([20, 17], dtype=torch.int32), TILES)


@pytest.mark.parametrize("max_m,expected", [(24, 8), (200, None), (300, 280), (1030, 20)])
def test_heuristic_config_runs(max_m, expected):
    # The heuristic's tiles on a small problem: few rows, mid, and many rows (the one-tile-
    # per-program kernel, whose TMA loads are switched off under the interpreter).
    a, a_s, b, b_s = make(1, max_m, 64, 128, seed=8)
    mm = torch.tensor([max_m - 3], dtype=torch.int32)
    c = call(a, a_s, b, b_s, mm, None, expected_m=expected)
    check_accuracy(c, grouped_gemm_oracle(a, a_s, b, b_s, mm))


def test_run_entry_checks_definition_shapes():
    a, a_s, b, b_s = make(2, 8, 32, 128)
    c = torch.empty(2, 8, 32, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="a_fp8"):
        main.run(a, a_s, b, b_s, torch.zeros(2, dtype=torch.int32), 8, c)


@pytest.mark.parametrize("bad", ["a_scale_dtype", "b_shape", "k", "c_dtype", "masked_m", "contig"])
def test_validation(bad):
    a, a_s, b, b_s = make(2, 8, 32, 256)
    mm = torch.zeros(2, dtype=torch.int32)
    c = torch.empty(2, 8, 32, dtype=torch.bfloat16)
    args = dict(a_fp8=a, a_scale=a_s, b_fp4=b, b_scale=b_s, masked_m=mm, c=c)
    name = {"a_scale_dtype": "a_scale", "b_shape": "b_scale", "k": "a_fp8", "c_dtype": "c",
            "masked_m": "masked_m", "contig": "a_scale"}[bad]
    if bad == "a_scale_dtype":
        args["a_scale"] = a_s.double()
    elif bad == "b_shape":
        args["b_scale"] = b_s[:, :, :4].contiguous()
    elif bad == "k":
        args["a_fp8"] = a[:, :, :200].contiguous()
    elif bad == "c_dtype":
        args["c"] = c.float()
    elif bad == "masked_m":
        args["masked_m"] = mm.float()
    elif bad == "contig":
        args["a_scale"] = a_s.transpose(0, 1).contiguous().transpose(0, 1)
    with pytest.raises(ValueError, match=name):
        main.grouped_gemm_fp8_fp4_masked(**args)


# --- The PTX decode (USE_ASM) can't run in the interpreter: execute its text with a tiny
# --- emulator of the six instructions it uses, on every byte and every exponent addend.

kernel_mod = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "kernel")


def _prmt(a, b, c):
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        v = src[sel & 7]
        if sel & 8:
            v = 0xFF if v & 0x80 else 0
        out |= v << (8 * i)
    return out


def _run_ptx(text, regs):
    M = 0xFFFFFFFF
    for line in text.splitlines():
        line = line.strip().rstrip(";")
        if not line or line[0] in "{}." or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        d, *src = [x.strip() for x in args.split(",")]
        v = [int(x, 0) if x[0].isdigit() else regs[x] for x in src]
        r = {"mov.b32": lambda: v[0], "and.b32": lambda: v[0] & v[1], "or.b32": lambda: v[0] | v[1],
             "shl.b32": lambda: (v[0] << v[1]) & M, "shr.u32": lambda: v[0] >> v[1],
             "prmt.b32": lambda: _prmt(v[0], v[1], v[2])}[op]()
        regs[d] = r & M
    return regs


def _prmt_cases(seed):
    """Per exponent addend: (lut0, lut1, bytes, 32-bit words of those bytes, wanted float64
    values of their codes in k order) for checking the PRMT decode tables. Each output byte
    depends on one input nibble and its position in the word, so the words (v, v, v, v)
    put every code in every nibble position."""
    from lowbit_gemm.numerics import e2m1_decode, unpack_fp4

    gen = torch.Generator().manual_seed(seed)
    for dexp in range(-5, 7):
        d = dexp * 8
        lut0 = (0x3C383000 + d * 0x01010100) & 0xFFFFFFFF
        lut1 = (0x4C484440 + d * 0x01010101) & 0xFFFFFFFF
        byt = torch.cat([torch.arange(256), torch.arange(256).repeat_interleave(4),
                         torch.randint(0, 256, (64,), generator=gen)]).to(torch.uint8)
        words = [sum(int(byt[q + i]) << (8 * i) for i in range(4)) for q in range(0, len(byt), 4)]
        want = e2m1_decode(unpack_fp4(byt.view(torch.int8))).to(torch.float64) * 2.0 ** dexp
        yield dexp, lut0, lut1, words, want


def test_prmt_asm_decode_matches_e2m1():
    for dexp, lut0, lut1, words, want in _prmt_cases(9):
        xs, ys = [], []
        for w in words:
            regs = _run_ptx(kernel_mod._PRMT_ASM_TEXT, {"$2": w, "$3": lut0, "$7": lut1})
            xs.append([(regs["$0"] >> (8 * i)) & 0xFF for i in range(4)])
            ys.append([(regs["$1"] >> (8 * i)) & 0xFF for i in range(4)])
        x = torch.tensor(xs, dtype=torch.uint8)  # [words, 4]: codes 8q+t
        y = torch.tensor(ys, dtype=torch.uint8)  # codes 8q+4+t
        # The kernel's join / permute / reshape back to k order.
        bits = torch.stack((x, y), -1).permute(0, 2, 1).reshape(-1)
        got = bits.view(torch.float8_e4m3fn).to(torch.float64)
        assert torch.equal(got, want), dexp


def test_unsupported_tile_rejected():
    a, a_s, b, b_s = make(1, 8, 32, 128)
    c = torch.empty(1, 8, 32, dtype=torch.bfloat16)
    bad = heur.Config(BM=16, BN=16, swap=False, num_warps=4, num_stages=1)
    with pytest.raises(ValueError, match="config"):
        main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, torch.ones(1, dtype=torch.int32), c, config=bad)


def test_split_k_repeat_calls_agree():
    # Per-call workspaces (fresh zeroed tickets): a second call must give the same c.
    a, a_s, b, b_s = make(2, 20, 64, 512, seed=9)
    mm = torch.tensor([20, 11], dtype=torch.int32)
    cfg = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, split_k=4)
    first = check(a, a_s, b, b_s, mm, cfg)
    second = check(a, a_s, b, b_s, mm, cfg)
    assert torch.equal(first, second)


def test_split_k_must_divide_k_blocks():
    a, a_s, b, b_s = make(1, 4, 32, 384)
    with pytest.raises(ValueError, match="split_k"):
        call(a, a_s, b, b_s, torch.tensor([4], dtype=torch.int32),
             heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, split_k=2))


def test_prmt_word_asm_decode_matches_e2m1():
    """The two-pass decode's word-at-a-time lookup: lo/hi words are the e4m3 bytes of codes
    0-3 and 4-7 of the input word, in k order (no shuffles)."""
    for dexp, lut0, lut1, words, want in _prmt_cases(10):
        out = []
        for w in words:
            regs = _run_ptx(kernel_mod._PRMT_WORD_ASM_TEXT, {"$2": w, "$3": lut0, "$4": lut1})
            out += [(regs[r] >> (8 * i)) & 0xFF for r in ("$0", "$1") for i in range(4)]
        got = torch.tensor(out, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float64)
        assert torch.equal(got, want), dexp


def test_two_pass_rejects_unaligned_b():
    a, a_s, b, b_s = make(1, 4, 32, 128)
    flat = torch.zeros(b.numel() + 1, dtype=b.dtype)
    b_odd = flat[1:].view(b.shape)  # contiguous, but starts one byte into its storage
    b_odd.copy_(b)
    with pytest.raises(ValueError, match="b_fp4"):
        call(a, a_s, b_odd, b_s, torch.tensor([4], dtype=torch.int32), PREDEC)


def test_plan_cache_still_rejects_bad_arguments():
    # A valid call caches its plan; a later call with the same shapes but a bad argument must
    # miss that cache and be rejected, never launched with the cached plan.
    a, a_s, b, b_s = make(1, 8, 32, 128, seed=11)
    mm = torch.tensor([8], dtype=torch.int32)
    check(a, a_s, b, b_s, mm, NORMAL)
    c_t = torch.empty(1, 32, 8, dtype=torch.bfloat16).transpose(1, 2)  # right shape, not contiguous
    with pytest.raises(ValueError, match="c: expected a contiguous"):
        main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c_t, config=NORMAL)
    with pytest.raises(ValueError, match="masked_m: expected dtype"):
        main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm.float(), torch.empty(1, 8, 32, dtype=torch.bfloat16),
                                         config=NORMAL)
    with pytest.raises(ValueError, match="a_scale: expected dtype"):
        main.grouped_gemm_fp8_fp4_masked(a, a_s.double(), b, b_s, mm, torch.empty(1, 8, 32, dtype=torch.bfloat16),
                                         config=NORMAL)


def test_correction_loop_ptx_decode_only_with_four_bytes_per_thread():
    """The PTX decode packs 4 bytes of one thread; the correction loop's [BN, 16]-byte tile
    has BN * 16 / (32 * warps) bytes per thread, so 64x32 with 8 warps must use the integer
    decode there (it decoded wrong bytes on an H200), while the chosen tiles keep PTX."""
    a, a_s, b, b_s = make(1, 16, 64, 256)
    mm = torch.tensor([16], dtype=torch.int32)
    c = torch.empty(1, 16, 64, dtype=torch.bfloat16)

    def corr_asm(cfg):
        return main._make_plan(a, a_s, b, b_s, mm, c, None, cfg).consts["CORR_ASM"]
    assert not corr_asm(heur.Config(BM=64, BN=32, swap=False, num_warps=8, num_stages=4, predec=True))
    for cfg in (heur.choose_config(64, 20, 2048, k=256), heur.choose_config(256, 200, 2048, k=256),
                heur.choose_config(4096, 4096, 2048, k=256)):
        assert corr_asm(dataclasses.replace(cfg, tma=False, pdl=False)), cfg  # TMA and PDL need a GPU


def test_ws_kernel_choice():
    """fused_ws_kernel (Gluon, warp-specialised) wherever at most 64 rows are expected per
    group, in a bucket of any size (twentieth session, runs 90-93; 1-128 rows before), any hint
    in a 65-128-row bucket, at most 116 from 129 rows, 192 from 2048 and 232 from 4096, on
    128-token tiles past 64 rows (twenty-second session, runs 101-103; 65-2047-row buckets in
    the twenty-fifth, run 130), on sm_90 only, and only where the caller says it can run it
    (ws=True: Gluon, a CUDA device, aligned inputs)."""
    for max_m, hint in ((64, 20), (64, None), (33, 64), (48, 1), (128, 26), (128, 64), (100, 1), (32, 24),
                        (32, None), (17, 17), (16, 16), (16, 10), (16, None), (8, 6), (12, 1), (1, 1), (7, 7),
                        (17, 16), (32, 16), (32, 1), (129, 16), (256, 1), (256, 64), (512, 16), (1024, 20),
                        (4096, 24), (512, 80), (512, 96), (1024, 90), (2048, 96), (2048, 192), (4096, 128),
                        (4096, 232), (8192, 150), (65, None), (128, 65), (128, None), (96, 80), (256, 76),
                        (256, 116), (511, 80), (512, 97), (512, 116), (1024, 116), (2047, 116)):
        cfg = heur.choose_config(max_m, hint, 2048, (9, 0), ws=True)
        rows = min(max_m, hint or max_m)
        assert cfg.ws and cfg.BM == (64 if rows <= 64 else 128) and cfg.BN == fws.BW == 64, (max_m, hint, cfg)
        assert not heur.choose_config(max_m, hint, 2048, (9, 0)).ws
        assert not heur.choose_config(max_m, hint, 2048, (10, 0), ws=True).ws  # wgmma: Hopper only
    for max_m, hint in ((129, None), (200, 123), (256, 117), (512, 311), (1024, 128), (2047, 117), (2047, 150),
                        (2048, 193), (4095, 200), (4096, 233), (4096, 1228)):
        assert not heur.choose_config(max_m, hint, 2048, (9, 0), ws=True).ws, (max_m, hint)


def test_ws_token_tiles():
    """fused_ws's token tile follows the bucket (16, 32, 64) up to the heuristic's most (Config.BM):
    128 only where the bucket has more than 64 rows and BM allows it; its plan then holds four
    stages of two blocks' copies and two of decoded tiles (run 116), and below 128 tokens as
    many of each."""
    assert [fws.token_tile(m) for m in (1, 16, 17, 32, 33, 64, 65, 4096)] == [16, 16, 32, 32, 64, 64, 64, 64]
    assert [fws.token_tile(m, 128) for m in (1, 16, 32, 64, 65, 200, 4096)] == [16, 16, 32, 64, 128, 128, 128]
    c = fws.consts(4, 512, 2048, most=128)
    assert (c["BT"], c["SUB"], c["STAGES"], c["DSTAGES"]) == (128, 2, 4, 2)
    c = fws.consts(4, 512, 384, most=128)  # k / 128 odd: one block a stage
    assert (c["SUB"], c["STAGES"], c["DSTAGES"]) == (1, 8, 4)
    assert all(c["STAGES"] == c["DSTAGES"] for c in (fws.consts(4, m, 2048) for m in (1, 32, 64, 4096)))
    assert fws.grid_and_sizes(4, 200, 2048, 132, 128) == ((132, 1, 1), 32)
    assert fws.grid_and_sizes(4, 128, 2048, 132, 128) == ((128, 1, 1), 32)


def test_ws_config_refused_where_it_cannot_run():
    """Under the interpreter (no Gluon lowering) the heuristic never picks fused_ws_kernel, and
    an explicit ws config is refused with the reason."""
    a, a_s, b, b_s = make(1, 48, 64, 256)
    mm = torch.tensor([40], dtype=torch.int32)
    c = torch.empty(1, 48, 64, dtype=torch.bfloat16)
    assert not main._make_plan(a, a_s, b, b_s, mm, c, 24, None).config.ws
    ws = heur.Config(BM=64, BN=64, swap=True, num_warps=4, num_stages=4, ws=True)
    with pytest.raises(ValueError, match="ws needs Gluon, an sm_90"):
        main._make_plan(a, a_s, b, b_s, mm, c, 24, ws)


def test_decode_pass_config_is_checked():
    a, a_s, b, b_s = make(1, 16, 64, 256)
    mm = torch.tensor([16], dtype=torch.int32)
    c = torch.empty(1, 16, 64, dtype=torch.bfloat16)
    bad = heur.Config(BM=16, BN=32, swap=False, num_warps=4, num_stages=1, predec=True, decode_rows=48)
    with pytest.raises(ValueError, match="decode_rows"):
        main._make_plan(a, a_s, b, b_s, mm, c, None, bad)


def test_heuristic_regimes_and_tma_key():
    """From max_m 33 every regime takes the one-tile-per-program kernel, its tile width from
    the hint (and max_m for few rows), TMA on sm_90+ except for the 32-wide tiles; smaller
    buckets keep the walking kernel. The fast relaunch keys a TMA descriptor by dtype and block shape
    (hashable)."""
    for max_m in (1, 16, 32):
        assert not heur.choose_config(max_m, 1, 2048, (9, 0)).tiles
    # One pass (kperm, no decode pass) for <= 32 rows in buckets of <= 32 (K split in two from
    # 17 rows) or >= 1024.
    for max_m, hint, bm, split in ((1, 1, 16, 1), (16, 8, 16, 1), (32, 24, 32, 2), (128, 26, 0, 0), (1024, 20, 32, 1),
                                   (4096, 12, 32, 1), (4096, None, 0, 0), (64, 20, 0, 0), (512, 20, 0, 0)):
        cfg = heur.choose_config(max_m, hint, 2048, (9, 0))
        assert cfg.kperm == (bm > 0), (max_m, hint, cfg)
        assert not bm or (cfg.BM == bm and cfg.swap and not cfg.predec and cfg.split_k == split), (max_m, hint, cfg)
        assert not heur.choose_config(max_m, hint, 2048, (9, 0), one_pass=False).kperm
    # K split in two only where k / 128 is even; two blocks per iteration where it is and K
    # is not split.
    assert heur.choose_config(32, 24, 2048, (9, 0), k=384).split_k == 1
    assert [heur.choose_config(m, h, 2048, (9, 0), k=k).unroll for m, h, k in
            ((1, 1, None), (1, 1, 384), (32, 24, None), (4096, 12, 2048))] == [2, 1, 1, 2]
    # The decode pass takes 4 blocks per program where k / 128 allows, fewer otherwise.
    assert heur.choose_config(512, None, 2048, (9, 0)).decode_kb == 4
    assert heur.choose_config(512, None, 2048, (9, 0), k=384).decode_kb == 1
    assert heur.choose_config(512, None, 2048, (9, 0), k=768).decode_kb == 2
    widths = {(512, None): 128, (2048, 1830): 128, (64, 20): 32, (256, 1): 32, (4096, 230): 64, (200, 123): 64}
    for (max_m, hint), bn in widths.items():
        cfg = heur.choose_config(max_m, hint, 2048, (9, 0))
        assert cfg.tiles and cfg.predec and cfg.BN == bn and cfg.tma == (bn >= 64), (max_m, hint, cfg)
        assert cfg.pdl == heur.PDL, cfg  # the dependent launch on every one-tile config
    assert not heur.choose_config(512, None, 2048, (8, 0)).tma
    # 64x128 tiles get the register cap (a third CTA per SM) only where it saves a wave:
    # 512 full is 512 tiles, two waves on 132 SMs either way; 2048 rows (hint 1830) 1856.
    assert heur.choose_config(512, None, 2048, (9, 0)).maxnreg == 0
    assert heur.choose_config(2048, 1830, 2048, (9, 0)).maxnreg == 168
    # The row-referenced decode and lean loop on the 128-wide tiles only.
    assert [heur.choose_config(m, h, 2048, (9, 0)).row_ref for m, h in ((512, None), (2048, 1830), (200, 123),
                                                                       (128, 25))] == [True, True, False, False]
    assert heur.choose_config(2048, 1830, 2048, (8, 0)).maxnreg == 0
    assert heur.three_ctas_pay(768, 132) and not heur.three_ctas_pay(512, 132)
    # Launch order (run 48): the programs with rows first in buckets of >= 1024 rows, on the
    # tile kernel only where at most an eighth of the bucket is expected to have rows.
    assert [heur.choose_config(m, h, 2048, (9, 0)).order for m, h in
            ((1, 1), (32, 24), (1024, 20), (4096, 20), (4096, 230), (4096, 1228), (2048, 1830), (512, 20),
             (200, 123), (4096, None))] == [0, 0, 1, 1, 1, 0, 0, 0, 0, 0]
    from triton.tools.tensor_descriptor import TensorDescriptor
    desc = TensorDescriptor.from_tensor(torch.zeros(64, 256, dtype=torch.float8_e4m3fn), [64, 128])
    assert hash(main._arg_key(desc)) == hash(("desc", torch.float8_e4m3fn, (64, 128)))


def test_rebased_descriptor_matches_from_tensor():
    # The fast path rebases a plan's descriptor template onto each call's tensor; it must
    # describe exactly what from_tensor would (the launcher reads base, shape, strides, block).
    from triton.tools.tensor_descriptor import TensorDescriptor
    a1 = torch.empty(4, 64, 256, dtype=torch.float8_e4m3fn)
    a2 = torch.empty(4, 64, 256, dtype=torch.float8_e4m3fn)
    tmpl = TensorDescriptor.from_tensor(a1.view(256, 256), [64, 128])
    got = main._rebased(tmpl, a2)
    want = TensorDescriptor.from_tensor(a2.view(256, 256), [64, 128])
    assert got.base.data_ptr() == want.base.data_ptr()
    assert {k: v for k, v in vars(got).items() if k != "base"} == {k: v for k, v in vars(want).items() if k != "base"}
    assert tmpl.base.data_ptr() == a1.data_ptr()  # the template is left as it was
    # Plans keep templates without their base (no call's tensors kept alive); rebasing fills it.
    kept = main._templates(a=tmpl)["a"]
    assert kept.base is None and main._rebased(kept, a2).base is a2


@pytest.mark.parametrize("orient", ["tiles", "tiles128_row", "kperm_u2", "kperm_splitk2"])
def test_rows_first_order_covers_every_tile_once(orient):
    # Programs renumbered so that the tiles with rows come first: each tile still taken
    # exactly once (NaN-poisoned c), with groups empty, partial, full and past max_m, and
    # max_m, n off the tiles.
    cfg = dataclasses.replace(CONFIGS[orient], order=1)
    a, a_s, b, b_s = make(5, 41, 96, 256, seed=1)
    check(a, a_s, b, b_s, torch.tensor([17, 0, 41, -2, 1000], dtype=torch.int32), cfg)
    check(a, a_s, b, b_s, torch.zeros(5, dtype=torch.int32), cfg)
    with pytest.raises(ValueError, match="order"):
        call(a, a_s, b, b_s, torch.zeros(5, dtype=torch.int32), dataclasses.replace(cfg, order=2))


def test_zero_rows_per_program():
    a, a_s, b, b_s = make(3, 41, 64, 256, seed=4)
    mm = torch.tensor([5, 41, 0], dtype=torch.int32)
    for zr in (1, 64):
        check(a, a_s, b, b_s, mm, dataclasses.replace(KPERM, zero_rows=zr, order=1))
    with pytest.raises(ValueError, match="zero_rows"):
        call(a, a_s, b, b_s, mm, dataclasses.replace(KPERM, zero_rows=24))
