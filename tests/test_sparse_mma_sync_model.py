"""CPU model of the sparse CUDA solution's warp-level sparse-MMA path
(cuda_sparse_fp4_mma/sparse_mma_sync_sp.cuh): what a_frags writes for each (16-token tile, 32-K
chunk, lane), and what each lane of the GEMM hands mma.sp m16n8k32 (A's value registers and
metadata word from a_frags, B's four f16x2 from its 16-byte load), put back together by the
instruction's fragment layouts (PTX ISA, sparse m16n8k32 .f16: A as the dense m16n8k16 A over
compressed columns, metadata of rows g / g + 8 in bits 0-15 / 16-31 of lanes t & 1 == 0 (K 0-15)
and 1 (K 16-31); B: thread t holds K 2t + 8v + {0, 1} of column g). The product over the MMA's
logical K must be the definition's over the physical K, for random bytes (repeated positions,
high bits set) and rows past m."""

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import sparse_wgmma_sp_layout as lay  # noqa: E402

from lowbit_gemm.numerics import E2M1_VALUES, sparse_a_dense  # noqa: E402

CUH = ROOT / "solutions/lowbit/gemm/sparse_gemm_fp4_fp8_n2048_k2048/cuda_sparse_fp4_mma/sparse_mma_sync_sp.cuh"
SRC = CUH.read_text()


def phi(l):
    """physical group of a 32-K chunk holding the MMA's logical group l (the kernel's phi())"""
    return 4 * (l & 1) + (l >> 1)


def test_source_matches_model():
    """The kernel's address arithmetic is the model's: warp wk's step s is chunk wk + WARPS_K s."""
    for line in ("return 4 * (l & 1) + (l >> 1);",
                 "const int p_lo = phi(t), p_hi = phi(t) + 2;",
                 "const int p = phi(4 * (t & 1) + j);",
                 "word |= nib << (16 * h + 4 * j);",
                 "brow[j] = b8 + static_cast<size_t>(bok[j] ? r : 0) * k + 32 * wk + 16 * (t >> 1);",
                 "const long long base = ((aok[i] ? tile0 + i : 0) * kc + wk) * 32 + lane;",
                 "av[s][i] = ok ? __ldg(arow[i] + 32 * WARPS_K * step) : make_uint4(0u, 0u, 0u, 0u);",
                 "const int sh = 16 * (t & 1);",
                 "bf[j][v] = e4m3x2_to_f16x2(word_of(bq[s][j], v) >> sh);",
                 "__ldg(reinterpret_cast<const uint4*>(brow[j] + 32 * WARPS_K * step))"):
        assert line in SRC, line


def a_frags_model(a_vals, a_meta, m):
    """(values [tiles, kc, 32 lanes, 4 regs, 2] float, meta [tiles, kc, 32] int) as a_frags writes them."""
    k = 4 * a_vals.shape[1]
    tiles, kc = -(-m // 16), k // 32
    v = torch.zeros(tiles * 16, k // 4, dtype=torch.int64)
    me = torch.zeros_like(v)
    v[:m] = a_vals.view(torch.uint8).to(torch.int64)
    me[:m] = a_meta.view(torch.uint8).to(torch.int64)
    lo, hi, nib = lay.canon(v, me)  # per (row, group)
    vals = torch.zeros(tiles, kc, 32, 4, 2)
    meta = torch.zeros(tiles, kc, 32, dtype=torch.int64)
    for tile in range(tiles):
        for c in range(kc):
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                for h in range(2):
                    row = 16 * tile + g + 8 * h
                    for r, p in ((h, phi(t)), (2 + h, phi(t) + 2)):
                        vals[tile, c, lane, r, 0] = lo[row, 8 * c + p]
                        vals[tile, c, lane, r, 1] = hi[row, 8 * c + p]
                    for j in range(4):
                        p = phi(4 * (t & 1) + j)
                        meta[tile, c, lane] |= int(nib[row, 8 * c + p]) << (16 * h + 4 * j)
    return vals, meta


def mma_logical_a(vals, meta):
    """One (tile, chunk): the 16 x 32 dense A the instruction reads from the lanes' registers."""
    a = torch.zeros(16, 32)
    for r in range(16):
        g, h = r % 8, r // 8
        for j in range(8):  # logical group
            e = int(meta[g * 4 + j // 4]) >> (16 * h + 4 * (j % 4)) & 15
            i0, i1 = e & 3, e >> 2
            assert i0 < i1
            reg = (2 if j >= 4 else 0) + h
            pair = vals[g * 4 + j % 4, reg]
            a[r, 4 * j + i0] += pair[0]
            a[r, 4 * j + i1] += pair[1]
    return a


def mma_logical_b(b_rows, c):
    """One chunk of 8 weight rows (e4m3 [8, k]): the 32 x 8 B the lanes' four f16x2 registers hold."""
    raw = b_rows.float()
    b = torch.zeros(32, 8)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for v in range(4):
            for hb in range(2):
                byte = 32 * c + 16 * (t >> 1) + 4 * v + 2 * (t & 1) + hb  # the 16-byte load's word v, pair t & 1
                b[2 * t + 8 * v + hb, g] = raw[g, byte]
    return b


def test_fragments_multiply_to_the_definition():
    gen = torch.Generator().manual_seed(7)
    m, n, k = 20, 8, 128
    a_vals = torch.randint(0, 256, (m, k // 4), generator=gen, dtype=torch.uint8)
    a_meta = torch.randint(0, 256, (m, k // 4), generator=gen, dtype=torch.uint8)
    b = (torch.randn(n, k, generator=gen) * 60).clamp(-448, 448).to(torch.float8_e4m3fn)
    want = sparse_a_dense(a_vals, a_meta).double() @ b.double().t()
    vals, meta = a_frags_model(a_vals, a_meta, m)
    got = torch.zeros(vals.shape[0] * 16, n, dtype=torch.float64)
    for tile in range(vals.shape[0]):
        for c in range(k // 32):
            a = mma_logical_a(vals[tile, c], meta[tile, c]).double()
            got[16 * tile:16 * tile + 16] += a @ mma_logical_b(b, c).double()
    assert torch.equal(got[:m], want)
    assert not got[m:].any()  # rows past m hold zeros


def test_e2m1_table_is_the_models():
    assert lay.E2M1 == E2M1_VALUES.tolist()
