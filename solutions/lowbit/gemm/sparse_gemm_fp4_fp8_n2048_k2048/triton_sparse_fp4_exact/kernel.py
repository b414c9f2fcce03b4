"""Triton kernel: 2:4-sparse E2M1 A times dense e4m3 B, bf16 out, exact on fp16 MMAs.

Why fp16 operands: every E2M1 value, and the sum of two (a repeated position sums its two
values), is exact in fp16, and so is every e4m3 value; Hopper's fp16 MMA sums the exact
products in fp32. Its FP8 MMA keeps about 14 bits and fails FlashInfer-Bench's elementwise
check when B uses e4m3's range (FP8 weights scaled per tensor to amax 448).

Data flow of one output tile, per 128-wide K block (32 groups of 4):
- a_vals [rows, 32] bytes -> two E2M1 codes a group -> fp16 values (code bits placed in the
  fp16 exponent/mantissa fields, times 2**14);
- a_meta [rows, 32] bytes -> two 2-bit positions a group (bits 4-7 ignored); the dense
  [rows, 32, 4] block is each slot's value where its position matches, both summed when the
  positions are equal, then viewed as [rows, 128] (k = 4 * group + position);
- B [cols, 128] e4m3 -> fp16 (exact);
- acc = A @ B^T on the MMA, accumulated in fp32 across all of K (no scales to promote).
SWAP=True puts B's rows on the MMA's M side, for few rows of A.
"""

import triton
import triton.language as tl

from .rounding import to_bf16


@triton.jit
def _e2m1_fp16(codes):
    """E2M1 codes (int32, 0..15) -> fp16 values: the code's bits as an fp16 are value * 2**-14."""
    h = ((codes & 7) << 9) | ((codes & 8) << 12)
    return h.to(tl.int16).to(tl.float16, bitcast=True) * 16384.0


@triton.jit
def _a_at(x0, x1, p0, p1, p: tl.constexpr):
    """[BM, 32] fp16: A at position p of each group (both slots summed when they share it)."""
    zero = tl.zeros_like(x0)
    return tl.where(p0 == p, x0, zero) + tl.where(p1 == p, x1, zero)


@triton.jit
def _b_at(words, p: tl.constexpr):
    """[BN, 32] fp16: B at position p of each group (byte p of the group's 32-bit word)."""
    return ((words >> (8 * p)) & 0xFF).to(tl.int8).to(tl.float8e4nv, bitcast=True).to(tl.float16)


@triton.jit
def _mma(x, y, acc, SWAP: tl.constexpr):
    """acc + x @ y^T (A's rows on M), or acc + y @ x^T (B's rows on M) when SWAP."""
    if SWAP:
        return tl.dot(y, tl.trans(x), acc)
    else:
        return tl.dot(x, tl.trans(y), acc)


@triton.jit
def sparse_fp16_kernel(v_ptr, m_ptr, b_ptr, c_ptr, M, N, G,
                       BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr,
                       GROUP_M: tl.constexpr, MANUAL_RNE: tl.constexpr):
    """One [BM rows of A x BN rows of B] tile of c; K = 4 * G, a multiple of 128."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_band = GROUP_M * tiles_n
    band = pid // per_band
    first_m = band * GROUP_M
    band_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_band) % band_m
    pid_n = (pid % per_band) // band_m

    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    m_ok = rows < M
    n_ok = cols < N
    K = 4 * G
    if SWAP:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    # K is walked by position within the group: k = 4 * group + p, so A's four [BM, 32]
    # slices come straight from the 2:4 encoding and B's from one 32-bit load a group.
    offs_g = tl.arange(0, 32)
    for kb in range(tl.cdiv(G, 32)):
        ptrs = rows[:, None].to(tl.int64) * G + (kb * 32 + offs_g)[None, :]
        v = tl.load(v_ptr + ptrs, mask=m_ok[:, None], other=0).to(tl.int32)
        meta = tl.load(m_ptr + ptrs, mask=m_ok[:, None], other=0).to(tl.int32)
        x0 = _e2m1_fp16(v & 0xF)
        x1 = _e2m1_fp16((v >> 4) & 0xF)
        p0 = meta & 3
        p1 = (meta >> 2) & 3
        words = tl.load(b_ptr.to(tl.pointer_type(tl.int32)) + cols[:, None].to(tl.int64) * G
                        + (kb * 32 + offs_g)[None, :], mask=n_ok[:, None], other=0)
        acc = _mma(_a_at(x0, x1, p0, p1, 0), _b_at(words, 0), acc, SWAP)
        acc = _mma(_a_at(x0, x1, p0, p1, 1), _b_at(words, 1), acc, SWAP)
        acc = _mma(_a_at(x0, x1, p0, p1, 2), _b_at(words, 2), acc, SWAP)
        acc = _mma(_a_at(x0, x1, p0, p1, 3), _b_at(words, 3), acc, SWAP)
    out = to_bf16(acc, MANUAL_RNE)
    if SWAP:
        out = tl.trans(out)
    tl.store(c_ptr + rows[:, None].to(tl.int64) * N + cols[None, :], out, mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _bf16_bits(x):
    """The bf16 bit pattern (int32, 0..0xFFFF) of fp32 values that bf16 holds exactly."""
    return (x.to(tl.int32, bitcast=True) >> 16) & 0xFFFF


@triton.jit
def dense_operands_kernel(v_ptr, m_ptr, b_ptr, a16_ptr, b16_ptr, M, N, G, ROWS: tl.constexpr,
                          CHUNK: tl.constexpr):
    """The many-rows form's first pass, program (i, j): rows [i * ROWS, (i + 1) * ROWS) of A
    (i < cdiv(M, ROWS)) or of B (the rest), K columns [j * CHUNK, (j + 1) * CHUNK), written
    dense in bf16. A from its 2:4 encoding, positions summed when equal, each group's four
    bf16 values stored as one 64-bit word; B converted from e4m3. Both exact: A's values and
    their pairwise sums hold 5 significant bits at most, e4m3 values 4, bf16 8. cuBLAS then
    multiplies them with fp32 accumulation."""
    pid = tl.program_id(0)
    a_programs = tl.cdiv(M, ROWS)
    K = 4 * G
    if pid < a_programs:
        rows = pid * ROWS + tl.arange(0, ROWS)
        groups = tl.program_id(1) * (CHUNK // 4) + tl.arange(0, CHUNK // 4)
        ptrs = rows[:, None].to(tl.int64) * G + groups[None, :]
        a_ok = (rows < M)[:, None] & (groups < G)[None, :]
        v = tl.load(v_ptr + ptrs, mask=a_ok, other=0).to(tl.int32)
        meta = tl.load(m_ptr + ptrs, mask=a_ok, other=0).to(tl.int32)
        x0 = _e2m1_fp16(v & 0xF).to(tl.float32)
        x1 = _e2m1_fp16((v >> 4) & 0xF).to(tl.float32)
        p0 = meta & 3
        p1 = (meta >> 2) & 3
        zero = tl.zeros_like(x0)
        word = tl.zeros(x0.shape, dtype=tl.int64)
        for p in tl.static_range(4):
            at_p = tl.where(p0 == p, x0, zero) + tl.where(p1 == p, x1, zero)
            word = word | (_bf16_bits(at_p).to(tl.int64) << (16 * p))
        tl.store(a16_ptr.to(tl.pointer_type(tl.int64)) + ptrs, word, mask=a_ok)
    else:
        rows = (pid - a_programs) * ROWS + tl.arange(0, ROWS)
        cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
        offs = rows[:, None].to(tl.int64) * K + cols[None, :]
        b_ok = (rows < N)[:, None] & (cols < K)[None, :]
        b = tl.load(b_ptr + offs, mask=b_ok, other=0.0)
        tl.store(b16_ptr + offs, b.to(tl.float32).to(tl.bfloat16), mask=b_ok)
