"""CPU tests (Triton interpreter) of the B200 grouped solution `triton_fp4_dot_scaled`
(tl.dot_scaled on the packed FP4 weights), against the float64 oracle at reduced sizes, in
both orientations, with every kind of b_scale. Triton 3.6's interpreter cannot run
tl.dot_scaled; the suite's Triton (3.9) can."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch
import triton

from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle
from lowbit_gemm.solutions import load_solution
from definition_cases import grouped_operands as make

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
main = load_solution(DEF, "lowbit", "triton_fp4_dot_scaled")
TILES = {"plain": main.Tile(16, 32, False, 4, 1), "swap": main.Tile(16, 32, True, 4, 1)}

pytestmark = pytest.mark.skipif(tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 7),
                                reason="Triton 3.6's interpreter cannot run tl.dot_scaled")


def check(a, a_s, b, b_s, mm, tile, expected_m=None):
    c = torch.full((a.shape[0], a.shape[1], b.shape[1]), float("nan"), dtype=torch.bfloat16)  # poisoned
    assert main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, expected_m, tile=tile) is c
    check_accuracy(c, grouped_gemm_oracle(a, a_s, b, b_s, mm))
    for grp in range(a.shape[0]):
        assert torch.all(c[grp, min(max(int(mm[grp]), 0), a.shape[1]):] == 0)


@pytest.mark.parametrize("orient", TILES)
@pytest.mark.parametrize("masked", [[-3, 0, 40, 17], [41, 1000, 16, 33]])
def test_masked_rows(orient, masked):
    # max_m 41 and n 96: neither a multiple of the tiles.
    a, a_s, b, b_s = make(4, 41, 96, 256)
    check(a, a_s, b, b_s, torch.tensor(masked, dtype=torch.int32), TILES[orient])


@pytest.mark.parametrize("orient", TILES)
def test_scales_that_are_not_ue8m0(orient):
    # Widely spread powers of two take the MMA; the rest (negative, zero, not a power of two,
    # subnormal, a whole block of any floats) the exact per-32 path, beside MMA rows in one tile.
    a, a_s, b, b_s = make(2, 24, 64, 384, seed=4)
    gen = torch.Generator().manual_seed(5)
    b_s = b_s.clone()
    b_s[0, 3, 1] *= 2.0 ** 31
    b_s[0, 3, 2] *= 2.0 ** -12
    b_s[0, 40, 5] = -0.37
    b_s[1, 7, 0] = 0.0
    b_s[1, 60:, 8:] = torch.rand(4, 4, generator=gen) + 0.1
    b_s[1, 10, 11] = 2.0 ** -130
    a_s = a_s * (torch.rand(a_s.shape, generator=gen) * 3 - 1)  # any-float a_scale, some negative
    check(a, a_s, b, b_s, torch.tensor([24, 20], dtype=torch.int32), TILES[orient])


def test_heuristic_tiles_and_int64_masked():
    a, a_s, b, b_s = make(2, 5, 130, 128, seed=1)
    check(a, a_s, b, b_s, torch.tensor([5, 2], dtype=torch.int64), None, expected_m=3)
    assert main.choose_tile(4096, 20, (10, 0)) == main.Tile(32, 128, True, 4, 3)
    assert main.choose_tile(512, None, (10, 0)) == main.Tile(128, 128, False, 4, 3)
    assert main.choose_tile(1, 1, (9, 0)) == main.Tile(64, 64, False, 4, 3)


def test_empty_shapes_and_bad_arguments():
    a, a_s, b, b_s = make(3, 0, 32, 128)
    c = torch.empty(3, 0, 32, dtype=torch.bfloat16)
    assert main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, torch.zeros(3, dtype=torch.int32), c) is c
    a, a_s, b, b_s = make(4, 8, 2048, 2048)
    c = torch.empty(4, 8, 2048, dtype=torch.bfloat16)
    mm = torch.zeros(4, dtype=torch.int32)
    with pytest.raises(ValueError, match="b_scale"):
        main.run(a, a_s, b, b_s[:, :, :32].contiguous(), mm, 8, c)
    with pytest.raises(ValueError, match="masked_m"):
        main.run(a, a_s, b, b_s, mm.float(), 8, c)
    with pytest.raises(ValueError, match="a_fp8"):
        main.run(a[:, :, :1024].contiguous(), a_s, b, b_s, mm, 8, c)


@pytest.mark.parametrize("orient", TILES)
def test_cancelling_group_beside_far_smaller_ones(orient):
    # One weight row's 128-K block: groups at 2^-6 and 2^-7 and one at 2^25 whose products
    # cancel exactly (codes +v then -v against equal A columns). Summed inside one MMA block,
    # fp32 loses the small groups behind the large partial sums (H200, emulated MMA, 2026-11-30:
    # 0.0315 off at an output of -0.055); such rows (scales more than FOLD_SPREAD
    # binades apart) take the exact per-32 path.
    a, a_s, b, b_s = make(1, 16, 32, 128, seed=9)
    a = a.clone()
    a[0, :, 112:128] = a[0, :, 96:112]
    b = b.clone()
    b[0, 3, 48:56] = 0x33    # codes 3 (1.5) in both nibbles: k = 96..111
    b[0, 3, 56:64] = 0xBB - 256    # codes 11 (-1.5): k = 112..127 (b_fp4 is int8)
    b_s = b_s.clone()
    b_s[0, 3] = torch.tensor([2.0 ** -6, 2.0 ** -27, 2.0 ** -7, 2.0 ** 25])
    check(a, a_s, b, b_s, torch.tensor([16], dtype=torch.int32), TILES[orient])
