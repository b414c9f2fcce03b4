"""The sparse CUDA solution without a GPU: every bad argument is refused by name before anything
is built, a CPU tensor is refused as not on a Hopper GPU, the path table covers every m, and
a model of the few-rows kernel's group decode and K order (sparse_mma.cu) holds for every
a_vals and a_meta byte."""

import itertools

import numpy as np
import pytest
import torch

from lowbit_gemm.solutions import load_solution
from ptx_model import h2f

DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
main = load_solution(DEF, "lowbit", "cuda_sparse_fp4_mma")
heuristics = load_solution(DEF, "lowbit", "cuda_sparse_fp4_mma", entry="heuristics")

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def inputs(m=8, n=2048, k=2048):
    return (torch.zeros(m, k // 4, dtype=torch.uint8), torch.zeros(m, k // 4, dtype=torch.uint8),
            torch.zeros(n, k, dtype=torch.float8_e4m3fn), torch.empty(m, n, dtype=torch.bfloat16))


@pytest.mark.parametrize("position, bad, match", [
    (0, torch.zeros(8, 512, dtype=torch.float16), "a_vals"),
    (0, torch.zeros(8, 500, dtype=torch.uint8), "a_vals"),
    (1, torch.zeros(8, 512, dtype=torch.int32), "a_meta"),
    (2, torch.zeros(2048, 1000, dtype=torch.float8_e4m3fn), "b_fp8"),
    (2, torch.zeros(1024, 2048, dtype=torch.float8_e4m3fn), "b_fp8"),
    (3, torch.empty(8, 2048, dtype=torch.float32), "c"),
    (3, torch.empty(8, 2048, dtype=torch.bfloat16).t().contiguous().t(), "c"),
])
def test_bad_arguments_are_named(position, bad, match):
    args = list(inputs())
    args[position] = bad
    with pytest.raises(ValueError, match=match):
        main.run(*args)


def test_cpu_tensors_are_refused_as_not_hopper():
    with pytest.raises(ValueError, match="Hopper"):
        main.run(*inputs())


@pytest.mark.parametrize("tile", [(3, 2), (1, 16), "1x2", 4])
def test_a_tile_the_kernel_lacks_is_named(tile):
    with pytest.raises(ValueError, match="tile"):
        main.sparse_gemm_fp4_fp8(*inputs(), tile=tile)


def test_every_m_has_a_path():
    for m in itertools.chain(range(1, 300), (1000, 2048, 4096, 8192, 1 << 20)):
        tile = heuristics.choose(m, 2048)
        assert tile in heuristics.PATHS or tile in heuristics.TILES, (m, tile)
        # the sparse-MMA kernel's tiles need n % 128 == 0: other n take the dense path
        assert heuristics.choose(m, 2000) not in heuristics.SPARSE_MMA, m
        # the K split takes k / 128 stages in two halves: an odd count keeps the whole tile a CTA
        assert heuristics.SPARSE_MMA.get(heuristics.choose(m, 2048, 132, 384), (1, 128, 1))[2] == 1, m


def test_k_split_only_where_its_tiles_fit_one_wave():
    for m in (193, 256):  # 2 token tiles x 32 tiles of 64 weight rows x 2 halves of K: 128 CTAs
        assert heuristics.choose(m, 2048, 132) == "wgmma_sp_128_n64_k2", m
    for m in (257, 512):
        assert heuristics.choose(m, 2048, 132) == "wgmma_sp_128_k2", m
    assert heuristics.choose(513, 2048, 132) == "wgmma_sp_128"
    assert heuristics.choose(256, 2048, 60) == "wgmma_sp_128"  # 64 split tiles, 60 SMs


def group_f16_model(v: int, meta: int):
    """group_f16 in sparse_mma.cu, on integers: (lo, hi) f16x2 words of the group's values at
    positions 0, 1 and 2, 3."""
    h0 = ((v & 7) << 9) | ((v & 8) << 12)
    h1 = ((v & 0x70) << 5) | ((v & 0x80) << 8)
    s0 = h0 << (16 * (meta & 3))
    s1 = h1 << (4 * (meta & 12))
    halves = []
    for shift in (0, 16, 32, 48):
        a, b = (s0 >> shift) & 0xFFFF, (s1 >> shift) & 0xFFFF
        halves.append(np.float16(np.float16(h2f(a)) + np.float16(h2f(b))) * np.float16(16384.0))
    return [float(x) for x in halves]


def test_group_decode_for_every_vals_and_meta_byte():
    # the definition: value of code c is sign * E2M1[c & 7]; slot p holds the sum of the codes
    # whose position is p; bits 4-7 of a_meta are ignored
    for v, meta in itertools.product(range(256), range(256)):
        want = [0.0] * 4
        for code, pos in ((v & 15, meta & 3), (v >> 4, (meta >> 2) & 3)):
            want[pos] += (-1.0 if code & 8 else 1.0) * E2M1[code & 7]
        assert group_f16_model(v, meta) == want, (v, meta)


def test_fragment_k_order_covers_each_chunk_once():
    # thread t's fragment columns 2t, 2t+1, 2t+8, 2t+9 of k16 step s stand for K 16t + 4s + 0..3
    # of a 64-wide chunk: for both operands, every K of the chunk exactly once
    seen = sorted(16 * t + 4 * s + j for t in range(4) for s in range(4) for j in range(4))
    assert seen == list(range(64))


def test_few_rows_tiles_by_rows():
    # 17-24 rows: 16 B rows and 8 tokens a CTA; 25-32: 16 tokens; from 33: 64 B rows a CTA
    assert [heuristics.choose(m, 2048) for m in (16, 17, 24, 25, 32, 33, 128)] == [
        (1, 2), (1, 1), (1, 1), (1, 2), (1, 2), (4, 2), (4, 2)]
