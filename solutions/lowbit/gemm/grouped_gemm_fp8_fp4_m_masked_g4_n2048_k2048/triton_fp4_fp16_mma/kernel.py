"""Triton kernel: M-masked grouped GEMM, A in e4m3 (fp32 scale per row per 128 of K) times B
in packed E2M1 (fp32 UE8M0 scale per row per 32 of K), bf16 out, exact on fp16 MMAs.

Why fp16 operands: every e4m3 value is exact in fp16, and so is every E2M1 value times a
power of two 2**d for -23 <= d <= 0 (fp16 subnormals reach 2**-24). Hopper's fp16 MMA sums
exact products in fp32, where its FP8 MMA keeps about 14 bits and fails FlashInfer-Bench's
elementwise check on activations with outlier channels.

Data flow of one output tile, per 128-wide K block ``kb``:
- A [rows, 128] e4m3 -> fp16 (one cvt per pair, exact); rows past masked_m load as zero;
- B [cols, 64] bytes -> 128 E2M1 codes -> fp16 ``code * 2**-14`` by placing the code's bits
  in the fp16 exponent/mantissa fields, then times ``2**(14 + d)`` where
  ``d = e(scale) - max e(scales of the block's row)``: the block's four per-32 scales folded
  exactly relative to one reference per weight row and block;
- blk = A @ B^T on the MMA in fp32, then ``acc += blk * a_scale[row, kb] * ref[col, kb]`` in
  fp32 (the per-128 promotion the per-128 ``a_scale`` needs anyway).
A block whose scales do not fold (zero, negative, not a power of two, subnormal, inf/NaN, or
spread over more than 23 binades) marks the tile; such a tile is recomputed after the main
loop in fp32 with each value times its own scale (``_exact_tile``): exact, slow, never taken
by real quantized weights (a 24-binade spread inside 128 weights of one row).

Orientation: SWAP=False puts tokens on the MMA's M side (tile BM tokens x BN weight rows);
SWAP=True puts weight rows there (tile BN weight rows x BM tokens), for buckets with few
rows, where the MMA's M must be >= 64 and the token side can be as small as 16.
Programs whose token tile lies past masked_m store zeros and return.
"""

import triton
import triton.language as tl

MAX_SPREAD = tl.constexpr(23)  # binades a block's scales may span on the fast path (fp16 subnormals: 2**-24)


@triton.jit
def _to_bf16(x, MANUAL_RNE: tl.constexpr):
    """fp32 -> bf16, round to nearest even. The Triton interpreter truncates in its cast, so
    MANUAL_RNE rounds with integer ops there (finite inputs); on GPUs the cast is used."""
    if MANUAL_RNE:
        bits = x.to(tl.int32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def _a_halves(a_ptr, rows_m, m_ok, k0, NK: tl.constexpr, K: tl.constexpr):
    """A's even and odd k in [k0, k0 + 2 * NK) as two [BM, NK] fp16 tensors (one 16-bit load
    a pair: the K order the packed FP4 bytes come in, so no shuffle is needed on either side)."""
    offs = k0 // 2 + tl.arange(0, NK)
    pairs = tl.load(a_ptr.to(tl.pointer_type(tl.int16)) + rows_m[:, None] * (K // 2) + offs[None, :],
                    mask=m_ok[:, None], other=0)
    even = (pairs & 0xFF).to(tl.int8).to(tl.float8e4nv, bitcast=True).to(tl.float16)
    odd = ((pairs >> 8) & 0xFF).to(tl.int8).to(tl.float8e4nv, bitcast=True).to(tl.float16)
    return even, odd


@triton.jit
def _b_codes(b_ptr, rows_n, n_ok, k0, NK: tl.constexpr, K: tl.constexpr):
    """B's E2M1 codes at even and odd k in [k0, k0 + 2 * NK), two [BN, NK] int32 tensors."""
    offs = k0 // 2 + tl.arange(0, NK)
    packed = tl.load(b_ptr + rows_n[:, None] * (K // 2) + offs[None, :], mask=n_ok[:, None], other=0)
    packed = packed.to(tl.int32)
    return packed & 0xF, (packed >> 4) & 0xF


@triton.jit
def _fp16_bits(codes):
    """E2M1 codes -> fp16 code_value * 2**-14 (the code's bits in fp16's exponent/mantissa)."""
    return (((codes & 7) << 9) | ((codes & 8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def _block_fold(s_ptr, rows_n, n_ok, kb, K: tl.constexpr):
    """A 128-K block's per-32 scales folded relative to each row's largest: (fp16 factors
    2**(14 + d) for the block's 64 even (= odd) k positions [BN, 64], fp32 reference
    2**(ref - 127) [BN], [BN] flags of rows whose scales do not fold)."""
    sub = kb * 4 + tl.arange(0, 64) // 16  # k = 2j and 2j + 1 lie in sub-block j // 16
    s = tl.load(s_ptr + rows_n[:, None] * (K // 32) + sub[None, :], mask=n_ok[:, None], other=1.0)
    bits = s.to(tl.int32, bitcast=True)
    e = (bits >> 23) & 0xFF
    ref = tl.max(e, axis=1)
    d = e - ref[:, None]
    bad = (bits < 0) | ((bits & 0x7FFFFF) != 0) | (e == 0) | (e == 255) | (d < -MAX_SPREAD)
    factor = ((29 + tl.maximum(d, -MAX_SPREAD)) << 10).to(tl.int16).to(tl.float16, bitcast=True)
    ref_f = (tl.maximum(ref, 1) << 23).to(tl.float32, bitcast=True)
    return factor, ref_f, tl.max(bad.to(tl.int32), axis=1)


@triton.jit
def _mma(x, y, acc, SWAP: tl.constexpr):
    """acc + x @ y^T (tokens on M), or acc + y @ x^T (weights on M) when SWAP."""
    if SWAP:
        return tl.dot(y, tl.trans(x), acc)
    else:
        return tl.dot(x, tl.trans(y), acc)


@triton.jit
def _promote(acc, blk, sa, sb, SWAP: tl.constexpr):
    """acc + blk * sa[token] * sb[weight row], in fp32."""
    if SWAP:
        return acc + blk * (sb[:, None] * sa[None, :])
    else:
        return acc + blk * (sa[:, None] * sb[None, :])


@triton.jit
def _exact_tile(a_ptr, as_ptr, b_ptr, s_ptr, rows_m, m_ok, rows_n, n_ok, acc, K: tl.constexpr,
                SWAP: tl.constexpr):
    """The tile with every 32-K sub-block promoted by its own scales: exact for any scales
    (the fp16 products of e4m3 and plain E2M1 values are exact, their sums fp32)."""
    KB: tl.constexpr = K // 128
    for sub in range(K // 32):
        a_even, a_odd = _a_halves(a_ptr, rows_m, m_ok, sub * 32, 16, K)
        lo, hi = _b_codes(b_ptr, rows_n, n_ok, sub * 32, 16, K)
        blk = _mma(a_even, _fp16_bits(lo), tl.zeros_like(acc), SWAP)
        blk = _mma(a_odd, _fp16_bits(hi), blk, SWAP)
        sa = tl.load(as_ptr + rows_m * KB + sub // 4, mask=m_ok, other=0.0)
        sb = tl.load(s_ptr + rows_n * (K // 32) + sub, mask=n_ok, other=0.0)
        acc = _promote(acc, blk * 16384.0, sa, sb, SWAP)
    return acc


@triton.jit
def grouped_fp16_kernel(a_ptr, as_ptr, b_ptr, s_ptr, mm_ptr, c_ptr, MAX_M, N,
                        K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr,
                        GROUP_M: tl.constexpr, MANUAL_RNE: tl.constexpr, EXACT: tl.constexpr = True):
    """One [BM tokens x BN weight rows] tile of group program_id(1).

    program_id(0) walks the token tiles of one weight tile GROUP_M at a time, so programs
    that run together share B tiles in L2.
    """
    KB: tl.constexpr = K // 128
    pid = tl.program_id(0)
    grp = tl.program_id(1).to(tl.int64)
    tiles_m = tl.cdiv(MAX_M, BM)
    tiles_n = tl.cdiv(N, BN)
    # Grouped order: GROUP_M token tiles x all weight tiles, token tile fastest.
    per_band = GROUP_M * tiles_n
    band = pid // per_band
    first_m = band * GROUP_M
    band_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_band) % band_m
    pid_n = (pid % per_band) // band_m

    rows = tl.minimum(tl.maximum(tl.load(mm_ptr + grp).to(tl.int32), 0), MAX_M)
    rows_m = pid_m * BM + tl.arange(0, BM)
    rows_n = pid_n * BN + tl.arange(0, BN)
    n_ok = rows_n < N
    c_base = c_ptr + grp * MAX_M * N
    if pid_m * BM >= rows:  # no row of this tile is computed: zeros
        zero = tl.zeros((BM, BN), dtype=tl.bfloat16)
        tl.store(c_base + rows_m[:, None] * N + rows_n[None, :], zero,
                 mask=(rows_m < MAX_M)[:, None] & n_ok[None, :])
        return
    m_ok = rows_m < rows
    a_base = a_ptr + grp * MAX_M * K
    as_base = as_ptr + grp * MAX_M * KB
    b_base = b_ptr + grp * N * (K // 2)
    s_base = s_ptr + grp * N * (K // 32)

    if SWAP:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    bad = tl.zeros((BN,), dtype=tl.int32)
    for kb in range(KB):
        a_even, a_odd = _a_halves(a_base, rows_m, m_ok, kb * 128, 64, K)
        lo, hi = _b_codes(b_base, rows_n, n_ok, kb * 128, 64, K)
        factor, ref, blk_bad = _block_fold(s_base, rows_n, n_ok, kb, K)
        bad = bad | blk_bad
        blk = _mma(a_even, _fp16_bits(lo) * factor, tl.zeros_like(acc), SWAP)
        blk = _mma(a_odd, _fp16_bits(hi) * factor, blk, SWAP)
        sa = tl.load(as_base + rows_m * KB + kb, mask=m_ok, other=0.0)
        acc = _promote(acc, blk, sa, ref, SWAP)
    if EXACT and tl.max(bad, axis=0) > 0:
        acc = _exact_tile(a_base, as_base, b_base, s_base, rows_m, m_ok, rows_n, n_ok, tl.zeros_like(acc), K, SWAP)

    out = _to_bf16(acc, MANUAL_RNE)
    if SWAP:
        out = tl.trans(out)
    # Rows past masked_m are zero by the masked loads (unless B holds inf/NaN): stored as 0.
    out = tl.where(m_ok[:, None], out, tl.zeros_like(out))
    tl.store(c_base + rows_m[:, None] * N + rows_n[None, :], out,
             mask=(rows_m < MAX_M)[:, None] & n_ok[None, :])


@triton.jit
def decode_b_kernel(b_ptr, s_ptr, bq_ptr, ref_ptr, N, K: tl.constexpr, BR: tl.constexpr,
                    NATURAL: tl.constexpr = True):
    """The two-pass form's first pass: one [BR rows x 128 K] block of B decoded to fp16 with
    its scales folded, stored in the K order the GEMM reads A in (the block's 64 even k, then
    its 64 odd k), and the block's fp32 reference per row (0 where the scales do not fold:
    the GEMM takes the exact path for a tile holding such a row)."""
    KB: tl.constexpr = K // 128
    rows_n = tl.program_id(0) * BR + tl.arange(0, BR)
    kb = tl.program_id(1)
    grp = tl.program_id(2).to(tl.int64)
    n_ok = rows_n < N
    b_base = b_ptr + grp * N * (K // 2)
    lo, hi = _b_codes(b_base, rows_n, n_ok, kb * 128, 64, K)
    factor, ref, bad = _block_fold(s_ptr + grp * N * (K // 32), rows_n, n_ok, kb, K)
    out = bq_ptr + grp * N * K + rows_n[:, None].to(tl.int64) * K + kb * 128 + tl.arange(0, 64)[None, :]
    if NATURAL:
        both = tl.reshape(tl.join(_fp16_bits(lo) * factor, _fp16_bits(hi) * factor), (BR, 128))
        tl.store(bq_ptr + grp * N * K + rows_n[:, None].to(tl.int64) * K + kb * 128 + tl.arange(0, 128)[None, :],
                 both, mask=n_ok[:, None])
    else:
        tl.store(out, _fp16_bits(lo) * factor, mask=n_ok[:, None])
        tl.store(out + 64, _fp16_bits(hi) * factor, mask=n_ok[:, None])
    tl.store(ref_ptr + (grp * N + rows_n) * KB + kb, tl.where(bad > 0, 0.0, ref), mask=n_ok)


@triton.jit
def gemm_fp16_kernel(a_ptr, as_ptr, b_ptr, s_ptr, bq_ptr, ref_ptr, mm_ptr, c_ptr, MAX_M, N,
                     K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr,
                     MANUAL_RNE: tl.constexpr, NATURAL: tl.constexpr = True, EXACT: tl.constexpr = True):
    """The two-pass form's GEMM: one [BM tokens x BN weight rows] tile from the decoded B
    (decode_b_kernel) on fp16 MMAs, promoted per 128-K block; a tile with a row whose block
    did not fold is recomputed from the raw codes (_exact_tile)."""
    KB: tl.constexpr = K // 128
    pid = tl.program_id(0)
    grp = tl.program_id(1).to(tl.int64)
    tiles_m = tl.cdiv(MAX_M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_band = GROUP_M * tiles_n
    band = pid // per_band
    first_m = band * GROUP_M
    band_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_band) % band_m
    pid_n = (pid % per_band) // band_m

    rows = tl.minimum(tl.maximum(tl.load(mm_ptr + grp).to(tl.int32), 0), MAX_M)
    rows_m = pid_m * BM + tl.arange(0, BM)
    rows_n = pid_n * BN + tl.arange(0, BN)
    n_ok = rows_n < N
    c_base = c_ptr + grp * MAX_M * N
    if pid_m * BM >= rows:
        tl.store(c_base + rows_m[:, None] * N + rows_n[None, :], tl.zeros((BM, BN), dtype=tl.bfloat16),
                 mask=(rows_m < MAX_M)[:, None] & n_ok[None, :])
        return
    m_ok = rows_m < rows
    a_base = a_ptr + grp * MAX_M * K
    as_base = as_ptr + grp * MAX_M * KB
    bq = bq_ptr + grp * N * K + rows_n[:, None].to(tl.int64) * K + tl.arange(0, 64)[None, :]
    ref_base = ref_ptr + (grp * N + rows_n) * KB
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    bad = tl.zeros((BN,), dtype=tl.int1)
    for kb in range(KB):
        if NATURAL:
            offs_k = kb * 128 + tl.arange(0, 128)
            a = tl.load(a_base + rows_m[:, None] * K + offs_k[None, :], mask=m_ok[:, None], other=0.0)
            b = tl.load(bq_ptr + grp * N * K + rows_n[:, None].to(tl.int64) * K + offs_k[None, :],
                        mask=n_ok[:, None], other=0.0)
            blk = tl.dot(a.to(tl.float16), tl.trans(b))
        else:
            a_even, a_odd = _a_halves(a_base, rows_m, m_ok, kb * 128, 64, K)
            b_even = tl.load(bq + kb * 128, mask=n_ok[:, None], other=0.0)
            b_odd = tl.load(bq + kb * 128 + 64, mask=n_ok[:, None], other=0.0)
            blk = tl.dot(a_even, tl.trans(b_even))
            blk = tl.dot(a_odd, tl.trans(b_odd), blk)
        sa = tl.load(as_base + rows_m * KB + kb, mask=m_ok, other=0.0)
        ref = tl.load(ref_base + kb, mask=n_ok, other=1.0)
        bad = bad | (ref == 0.0)
        acc += blk * (sa[:, None] * ref[None, :])
    if EXACT and tl.max(bad.to(tl.int32), axis=0) > 0:
        acc = _exact_tile(a_base, as_base, b_ptr + grp * N * (K // 2), s_ptr + grp * N * (K // 32),
                          rows_m, m_ok, rows_n, n_ok, tl.zeros_like(acc), K, False)
    out = tl.where(m_ok[:, None], _to_bf16(acc, MANUAL_RNE), tl.zeros((BM, BN), dtype=tl.bfloat16))
    tl.store(c_base + rows_m[:, None] * N + rows_n[None, :], out, mask=(rows_m < MAX_M)[:, None] & n_ok[None, :])
