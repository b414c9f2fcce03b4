"""Triton kernels: M-masked grouped GEMM, A in e4m3 (fp32 scale per row per 128 of K) times B
in packed E2M1 (fp32 UE8M0 scale per row per 32 of K), bf16 out, exact on bf16 MMAs.

Why bf16 operands: every e4m3 value is exact in bf16, and so is every E2M1 value times a
power of two 2**d for -125 <= d <= 0 (bf16 has fp32's exponent range). Hopper's bf16 MMA
sums the exact products in fp32, where its FP8 MMA keeps about 14 bits and fails
FlashInfer-Bench's elementwise check on activations with outlier channels. fp16 would hold
the products too, but only over 23 binades of scale spread; bf16 runs at the same rate.

Two passes:
1. ``decode_b_kernel``: each 128-K block of each weight row to bf16 ``code * 2**d``, with
   ``d = e(scale) - max e(the block's four scales)``: the codes' bits placed in fp32's
   exponent/mantissa fields give ``code * 2**-126``, times ``2**(126 + d)``, both exact, then
   rounded to bf16, exact too (two significant bits at most). Beside it, the
   block's reference ``2**(max e - 127)`` in fp32, or 0 where the block's scales do not fold
   (zero, negative, not a power of two, subnormal, inf/NaN, 2**126 or more, or spread wider
   than 125 binades).
2. ``gemm_bf16_kernel``: per output tile, per 128-K block, ``blk = bf16(A) @ Bq^T`` on the
   MMA in fp32, then ``acc += blk * a_scale[row, kb] * ref[col, kb]`` in fp32 (the per-128
   promotion the per-128 ``a_scale`` needs anyway). A tile holding a row whose block did not
   fold is recomputed from the raw codes with each 32-K sub-block promoted by its own scales
   (``_exact_tile``): exact for any scales, slower, never taken by quantized weights.
Programs whose token tile lies past masked_m store zeros and return.
"""

import triton
import triton.language as tl

from .rounding import to_bf16

MAX_SPREAD = tl.constexpr(125)  # binades a block's scales may span on the fast path


@triton.jit
def _e2m1_tiny(codes):
    """E2M1 codes (int32, 0..15) -> fp32 code_value * 2**-126: the code's three magnitude bits
    as fp32's lowest exponent bits and top mantissa bit, bit 3 as the sign."""
    return (((codes & 7) << 22) | ((codes & 8) << 28)).to(tl.float32, bitcast=True)


@triton.jit
def _dot(x, y, INTERPRETER: tl.constexpr):
    """x @ y^T for bf16 x [M, K] and y [N, K], fp32 out. The Triton interpreter's bf16 dot is
    wrong, so it multiplies the same (exact) values in fp32 there."""
    if INTERPRETER:
        return tl.dot(x.to(tl.float32), tl.trans(y.to(tl.float32)), input_precision="ieee")
    else:
        return tl.dot(x, tl.trans(y))


@triton.jit
def _codes(b_ptr, rows_n, n_ok, k0, NK: tl.constexpr, K: tl.constexpr):
    """[BN, 2 * NK] int32 E2M1 codes of k in [k0, k0 + 2 * NK) (low nibble = even k)."""
    offs = k0 // 2 + tl.arange(0, NK)
    packed = tl.load(b_ptr + rows_n[:, None].to(tl.int64) * (K // 2) + offs[None, :], mask=n_ok[:, None], other=0)
    packed = packed.to(tl.int32)
    return tl.reshape(tl.join(packed & 0xF, (packed >> 4) & 0xF), (rows_n.shape[0], 2 * NK))


@triton.jit
def _block_fold(s_ptr, rows_n, n_ok, kb, K: tl.constexpr):
    """A 128-K block's four per-32 scales folded relative to each row's largest: (fp32
    factors 2**(126 + d) [BN, 128], fp32 reference [BN], 0 where the block does not fold)."""
    offs = kb * 4 + tl.arange(0, 4)
    s = tl.load(s_ptr + rows_n[:, None].to(tl.int64) * (K // 32) + offs[None, :], mask=n_ok[:, None], other=1.0)
    bits = s.to(tl.int32, bitcast=True)
    e = (bits >> 23) & 0xFF
    ref = tl.max(e, axis=1)
    d = e - ref[:, None]
    bad = (bits < 0) | ((bits & 0x7FFFFF) != 0) | (e == 0) | (e >= 253) | (d < -MAX_SPREAD)
    factor = ((253 + tl.maximum(d, -MAX_SPREAD)) << 23).to(tl.float32, bitcast=True)  # 2**(126 + d)
    factor = tl.reshape(tl.broadcast_to(factor[:, :, None], (rows_n.shape[0], 4, 32)), (rows_n.shape[0], 128))
    ref_f = tl.where(tl.max(bad.to(tl.int32), axis=1) > 0, 0.0, (ref << 23).to(tl.float32, bitcast=True))
    return factor, ref_f


@triton.jit
def masked_tile(mm_ptr, c_ptr, grp, pid_m, pid_n, MAX_M, N, BM: tl.constexpr, BN: tl.constexpr):
    """A tile's rows and c pointers: (rows computed in the group = clamp(masked_m, 0, max_m),
    token rows [BM], weight rows [BN], weight-row mask, c pointers [BM, BN], c mask)."""
    rows = tl.minimum(tl.maximum(tl.load(mm_ptr + grp), 0), MAX_M).to(tl.int32)
    rows_m = pid_m * BM + tl.arange(0, BM)
    rows_n = pid_n * BN + tl.arange(0, BN)
    n_ok = rows_n < N
    c_ptrs = c_ptr + grp * MAX_M * N + rows_m[:, None].to(tl.int64) * N + rows_n[None, :]
    return rows, rows_m, rows_n, n_ok, c_ptrs, (rows_m < MAX_M)[:, None] & n_ok[None, :]


@triton.jit
def decode_b_kernel(b_ptr, s_ptr, bq_ptr, ref_ptr, N, K: tl.constexpr, BR: tl.constexpr):
    """Pass 1: one [BR rows x 128 K] block of B to bf16 with its scales folded, and its fp32
    reference per row (0: the block does not fold)."""
    KB: tl.constexpr = K // 128
    rows_n = tl.program_id(0) * BR + tl.arange(0, BR)
    kb = tl.program_id(1)
    grp = tl.program_id(2).to(tl.int64)
    n_ok = rows_n < N
    codes = _codes(b_ptr + grp * N * (K // 2), rows_n, n_ok, kb * 128, 64, K)
    factor, ref = _block_fold(s_ptr + grp * N * (K // 32), rows_n, n_ok, kb, K)
    rows64 = grp * N + rows_n.to(tl.int64)
    tl.store(bq_ptr + rows64[:, None] * K + kb * 128 + tl.arange(0, 128)[None, :], (_e2m1_tiny(codes) * factor).to(tl.bfloat16),
             mask=n_ok[:, None])
    tl.store(ref_ptr + rows64 * KB + kb, ref, mask=n_ok)


@triton.jit
def _exact_tile(a_ptr, as_ptr, b_ptr, s_ptr, rows_m, m_ok, rows_n, n_ok, K: tl.constexpr,
                INTERPRETER: tl.constexpr):
    """The tile with every 32-K sub-block promoted by its own scales: exact for any scales
    (the bf16 products of e4m3 and plain E2M1 values are exact, their sums fp32)."""
    KB: tl.constexpr = K // 128
    acc = tl.zeros((rows_m.shape[0], rows_n.shape[0]), dtype=tl.float32)
    for sub in range(K // 32):
        offs_k = sub * 32 + tl.arange(0, 32)
        a = tl.load(a_ptr + rows_m[:, None].to(tl.int64) * K + offs_k[None, :], mask=m_ok[:, None], other=0.0)
        b = (_e2m1_tiny(_codes(b_ptr, rows_n, n_ok, sub * 32, 16, K)) * 8.507059173023462e37).to(tl.bfloat16)
        blk = _dot(a.to(tl.bfloat16), b, INTERPRETER)
        sa = tl.load(as_ptr + rows_m * KB + sub // 4, mask=m_ok, other=0.0)
        sb = tl.load(s_ptr + rows_n.to(tl.int64) * (K // 32) + sub, mask=n_ok, other=0.0)
        acc += blk * (sa[:, None] * sb[None, :])
    return acc


@triton.jit
def gemm_bf16_kernel(a_ptr, as_ptr, b_ptr, s_ptr, bq_ptr, ref_ptr, mm_ptr, c_ptr, MAX_M, N,
                     K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr,
                     INTERPRETER: tl.constexpr):
    """Pass 2: one [BM tokens x BN weight rows] tile of group program_id(1).

    program_id(0) walks GROUP_M token tiles of every weight tile before the next band, so
    programs that run together share B tiles in L2.
    """
    KB: tl.constexpr = K // 128
    pid = tl.program_id(0)
    grp = tl.program_id(1).to(tl.int64)
    tiles_m = tl.cdiv(MAX_M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_band = GROUP_M * tiles_n
    first_m = (pid // per_band) * GROUP_M
    band_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_band) % band_m
    pid_n = (pid % per_band) // band_m

    rows, rows_m, rows_n, n_ok, c_ptrs, c_mask = masked_tile(mm_ptr, c_ptr, grp, pid_m, pid_n, MAX_M, N, BM, BN)
    if pid_m * BM >= rows:  # no row of this tile is computed: zeros
        tl.store(c_ptrs, tl.zeros((BM, BN), dtype=tl.bfloat16), mask=c_mask)
        return
    m_ok = rows_m < rows
    a_base = a_ptr + grp * MAX_M * K
    as_base = as_ptr + grp * MAX_M * KB
    rows64 = grp * N + rows_n.to(tl.int64)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    bad = tl.zeros((BN,), dtype=tl.int1)
    for kb in range(KB):
        offs_k = kb * 128 + tl.arange(0, 128)
        a = tl.load(a_base + rows_m[:, None].to(tl.int64) * K + offs_k[None, :], mask=m_ok[:, None], other=0.0)
        b = tl.load(bq_ptr + rows64[:, None] * K + offs_k[None, :], mask=n_ok[:, None], other=0.0)
        blk = _dot(a.to(tl.bfloat16), b, INTERPRETER)
        sa = tl.load(as_base + rows_m * KB + kb, mask=m_ok, other=0.0)
        ref = tl.load(ref_ptr + rows64 * KB + kb, mask=n_ok, other=1.0)
        bad = bad | (ref == 0.0)
        acc += blk * (sa[:, None] * ref[None, :])
    if tl.max(bad.to(tl.int32), axis=0) > 0:
        acc = _exact_tile(a_base, as_base, b_ptr + grp * N * (K // 2), s_ptr + grp * N * (K // 32),
                          rows_m, m_ok, rows_n, n_ok, K, INTERPRETER)
    # Rows past masked_m are zero by the masked loads (unless B holds inf/NaN): stored as 0.
    out = tl.where(m_ok[:, None], to_bf16(acc, INTERPRETER), tl.zeros((BM, BN), dtype=tl.bfloat16))
    tl.store(c_ptrs, out, mask=c_mask)
