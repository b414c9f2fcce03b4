"""Triton kernel: M-masked grouped GEMM, A in FP8 e4m3 (float32 scale per row and 128 K) times
B in packed FP4 E2M1 (scale per row and 32 K), bf16 out, through ``tl.dot_scaled``.

On sm_100 (B200) ``tl.dot_scaled(e4m3, e2m1)`` lowers to the block-scaled tensor-core MMA
(``tcgen05.mma kind::mxf8f6f4``, FP8 rate): B's codes go to the MMA as they are stored, with
its UE8M0 scales as the MMA's block scales, so nothing is decoded and nothing is written
before the GEMM. Other GPUs get Triton's own emulation of the same call (correct, slow); this
file is for the B200 entry. Nothing in it has run on a B200: it is compiled for sm_100a on a
CPU machine and its results are checked under the Triton
interpreter and, emulated, on an H200.

Per 128-K block and weight row:
- fast path: the four per-32 scales are positive normal powers of two within FOLD_SPREAD
  binades of each other; a float32 power of two's exponent field is exactly the UE8M0 byte
  the MMA takes (same bias, 127);
- any other row (zero, negative, not a power of two, subnormal, spread wider) has its codes
  zeroed for the MMA (so it contributes exactly 0 there) and, in tiles that hold such a row,
  its contribution is added exactly: per 32-K group, an fp16 dot of A with the raw codes,
  times the group's float32 scales.
Each block's product is promoted to fp32 with a_scale (``acc += p * a_scale``), which is
what the definition's per-128 activation scale needs; A's own MMA scale is 1 (byte 127).
"""

import triton
import triton.language as tl

from .rounding import to_bf16

E8M0_ONE = tl.constexpr(127)  # UE8M0 byte of 1.0
# Widest spread, in binades, of a weight row's four per-32 scales in one 128-K block that takes
# the MMA: its fp32 sums lose the smaller groups' products behind partial sums of the larger
# ones, which matters where the larger groups cancel (a row at 2^-6 / 2^-27 / 2^-7 / 2^25 was
# 0.03 off at an output of -0.055 through Triton's emulation on an H200, 2026-11-30).
FOLD_SPREAD = tl.constexpr(3)


@triton.jit
def _ue8m0(s):
    """(UE8M0 byte, exact) of float32 scales: the exponent field, exact where the scale is a
    positive normal power of two (sign and mantissa bits zero, exponent field 1..254)."""
    bits = s.to(tl.int32, bitcast=True)
    field = (bits >> 23) & 0xFF
    exact = ((bits & 0x7FFFFF) == 0) & (bits > 0) & (field < 255)  # bits > 0: positive, not 0
    return field.to(tl.uint8), exact


@triton.jit
def _e2m1_values(packed, BR: tl.constexpr, KW: tl.constexpr):
    """[BR, KW / 2] bytes of two E2M1 codes (low nibble first) -> [BR, KW] float32 values."""
    codes = tl.reshape(tl.join(packed & 0xF, packed >> 4), [BR, KW]).to(tl.int32)
    mag = codes & 7
    # Magnitudes 2..7 are normal: exponent (mag >> 1) - 1, one mantissa bit (mag & 1); 0 and 1
    # are 0 and 0.5. Built from bits, so every value is exact on any backend.
    normal = ((((mag >> 1) + 126) << 23) | ((mag & 1) << 22)).to(tl.float32, bitcast=True)
    val = tl.where(mag < 2, (mag & 1).to(tl.float32) * 0.5, normal)
    return tl.where((codes & 8) != 0, -val, val)


@triton.jit
def _fast_block(a, a_ones, b, s, BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr, kb):
    """One 128-K block on the block-scaled MMA: a [BM, 128] e4m3, b [BN, 64] packed E2M1, s [BN,
    4] float32 scales. Returns (product, row_fast): the product ([BM, BN], or [BN, BM] with
    SWAP: weight rows on the MMA's M side, for few tokens) over the weight rows whose four
    scales are UE8M0 within FOLD_SPREAD binades (row_fast); the other rows' codes are
    zeroed, so they add exactly 0."""
    e8, exact = _ue8m0(s)
    field = e8.to(tl.int32)
    spread = tl.max(field, axis=1) - tl.min(field, axis=1)
    row_fast = (tl.min(exact.to(tl.int32), axis=1) == 1) & (spread <= FOLD_SPREAD)
    b_fast = tl.where(row_fast[:, None], b, 0)
    e8 = tl.where(row_fast[:, None], e8, E8M0_ONE)
    # The MMA's accumulator is passed in, not left to default: Triton 3.6 fails to compile a
    # block-scaled MMA for sm_100 whose accumulator starts at a constant zero inside a loop
    # (TritonGPUOptimizeAccumulatorInit); 3.9 compiles either form. Zeros times the loop
    # counter keep it from being seen as that constant.
    if SWAP:
        zero = tl.zeros((BN, BM), dtype=tl.float32) * (kb + 1)
        p = tl.dot_scaled(b_fast, e8, "e2m1", tl.trans(a), a_ones, "e4m3", acc=zero)
    else:
        zero = tl.zeros((BM, BN), dtype=tl.float32) * (kb + 1)
        p = tl.dot_scaled(a, a_ones, "e4m3", tl.trans(b_fast), e8, "e2m1", acc=zero)
    return p, row_fast


@triton.jit
def _exact_rows(p, a_rows, b_rows, s, row_fast, kb, BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr):
    """p plus the block's products over the weight rows that are not row_fast, exactly: per
    32-K group, an fp16 dot of A with the raw codes (both exact in fp16, products exact,
    fp32 sums), times that group's float32 scales. (An fp32 tl.dot is not exact everywhere:
    Triton 3.6 lowers it to TF32 on sm_100; and the interpreter's bf16 dot is wrong.)"""
    for j in range(4):  # a loop, not unrolled: one MMA accumulator (tensor memory on sm_100) for all four
        a_j = tl.load(a_rows[:, None] + kb * 128 + j * 32 + tl.arange(0, 32)[None, :]).to(tl.float16)
        b_j = tl.load(b_rows[:, None] + kb * 64 + j * 16 + tl.arange(0, 16)[None, :]).to(tl.uint8, bitcast=True)
        v_j = _e2m1_values(b_j, BN, 32).to(tl.float16)
        s_j = tl.where(row_fast, 0.0, tl.sum(tl.where(tl.arange(0, 4)[None, :] == j, s, 0.0), axis=1))
        if SWAP:
            p += tl.dot(v_j, tl.trans(a_j)) * s_j[:, None]
        else:
            p += tl.dot(a_j, tl.trans(v_j)) * s_j[None, :]
    return p


@triton.jit
def grouped_dot_scaled_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, mm_ptr, c_ptr, MAX_M, N, K,
                              BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr,
                              MANUAL_RNE: tl.constexpr):
    """grid = (cdiv(MAX_M, BM) * cdiv(N, BN), g): one [BM tokens, BN weights] output tile per
    program, token tiles fastest. Tiles at or past clamp(masked_m[g], 0, MAX_M) store zeros and
    skip the GEMM; the others store their rows before it and zeros after, so c may arrive
    uninitialised and every element is written once. masked_m is read here (no host read).
    a_ptr: [g, MAX_M, K] e4m3; as_ptr: [g, MAX_M, K/128] f32; b_ptr: [g, N, K/2] bytes;
    bs_ptr: [g, N, K/32] f32; c_ptr: [g, MAX_M, N] bf16. K a multiple of 128."""
    pid = tl.program_id(0)
    grp64 = tl.program_id(1).to(tl.int64)
    num_m = tl.cdiv(MAX_M, BM)
    pid_m = pid % num_m
    pid_n = pid // num_m
    mm = tl.minimum(tl.maximum(tl.load(mm_ptr + tl.program_id(1)), 0), MAX_M)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    if SWAP:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    if pid_m * BM < mm:
        # Rows past MAX_M or N are clamped to valid ones (loads need no masks); their results
        # are never stored, and each output depends only on its own A and B rows.
        rows_m = tl.minimum(offs_m, MAX_M - 1).to(tl.int64)
        rows_n = tl.minimum(offs_n, N - 1).to(tl.int64)
        a_rows = a_ptr + grp64 * MAX_M * K + rows_m * K
        as_rows = as_ptr + grp64 * MAX_M * (K // 128) + rows_m * (K // 128)
        b_rows = b_ptr + grp64 * N * (K // 2) + rows_n * (K // 2)
        bs_rows = bs_ptr + grp64 * N * (K // 32) + rows_n * (K // 32)
        a_ones = tl.full((BM, 4), E8M0_ONE, dtype=tl.uint8)
        for kb in range(0, K // 128):
            a = tl.load(a_rows[:, None] + kb * 128 + tl.arange(0, 128)[None, :])
            b = tl.load(b_rows[:, None] + kb * 64 + tl.arange(0, 64)[None, :]).to(tl.uint8, bitcast=True)
            s = tl.load(bs_rows[:, None] + kb * 4 + tl.arange(0, 4)[None, :])
            a_s = tl.load(as_rows + kb)
            p, row_fast = _fast_block(a, a_ones, b, s, BM, BN, SWAP, kb)
            if tl.min(row_fast.to(tl.int32), axis=0) == 0:  # scales that are not UE8M0
                p = _exact_rows(p, a_rows, b_rows, s, row_fast, kb, BM, BN, SWAP)
            if SWAP:
                acc += p * a_s[None, :]
            else:
                acc += p * a_s[:, None]
    m_valid = offs_m < mm
    c_base = c_ptr + grp64 * MAX_M * N
    if SWAP:
        out = to_bf16(tl.where(m_valid[None, :], acc, 0.0), MANUAL_RNE)
        ptrs = c_base + offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
        tl.store(ptrs, out, mask=(offs_n < N)[:, None] & (offs_m < MAX_M)[None, :])
    else:
        out = to_bf16(tl.where(m_valid[:, None], acc, 0.0), MANUAL_RNE)
        ptrs = c_base + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        tl.store(ptrs, out, mask=(offs_m < MAX_M)[:, None] & (offs_n < N)[None, :])
