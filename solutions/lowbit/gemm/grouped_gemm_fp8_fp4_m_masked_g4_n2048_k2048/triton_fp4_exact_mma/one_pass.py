"""Triton kernel: the grouped GEMM in one pass, for buckets with few rows a group, exact on
fp16 MMAs.

Where few tokens share each weight tile, decoding all of B to memory first (kernel.py's two
passes) costs more than the GEMM: each program here decodes its own [BN, 128] block of B in
registers, with PTX byte permutes (``prmt``: one lookup turns four E2M1 codes into the high
bytes of their fp16 values; every E2M1 value's fp16 low byte is zero), and multiplies it
with A on fp16 MMAs.

fp16 holds the products exactly (e4m3 values, and E2M1 values times 2**d for d >= -23: fp16's
subnormals end at 2**-24); a block whose scales do not fold within 23 binades takes the
exact path (kernel._exact_tile) like the two-pass form's.

K order: a block's 64 bytes of B hold codes k = 2j (low nibble) and 2j + 1 (high nibble); the
decode returns the even and the odd codes as two [BN, 64] tensors, and A is read in the same
order (one 16-bit load a pair), so the block is two K=64 MMAs with no shuffle.
"""

import triton
import triton.language as tl

from .kernel import _exact_tile, masked_tile
from .rounding import to_bf16

MAX_SPREAD16 = tl.constexpr(23)

# Per 4 bytes (8 codes) of B: for each 16-bit half (4 codes, k order), the magnitudes index a
# table of fp16 high bytes (0, 0.5, 1, 1.5, 2, 3, 4, 6), the sign bits are spread to bit 7 of
# each byte by a sign-replicating permute of 0x80 bytes (0x80 or 0xFF, shifted left once),
# and the four bytes are placed as the high bytes of two fp16 pairs: (even k, even k) and
# (odd k, odd k). Outputs $0, $1: even codes 0-1, 2-3 of the pack; $2, $3: odd codes.
_PRMT_DECODE = tl.constexpr("""
{
.reg .b32 t0, t1, lut0, lut1, sgn, m, s, h;
mov.b32 lut0, 0x3E3C3800;
mov.b32 lut1, 0x46444240;
mov.b32 sgn, 0x80808080;
and.b32 m, $4, 0x7777;
prmt.b32 m, lut0, lut1, m;
prmt.b32 s, sgn, sgn, $4;
shl.b32 s, s, 1;
and.b32 s, s, 0x80808080;
or.b32 h, m, s;
prmt.b32 $0, h, 0, 0x2404;
prmt.b32 $2, h, 0, 0x3414;
shr.u32 t0, $4, 16;
and.b32 m, t0, 0x7777;
prmt.b32 m, lut0, lut1, m;
prmt.b32 s, sgn, sgn, t0;
shl.b32 s, s, 1;
and.b32 s, s, 0x80808080;
or.b32 h, m, s;
prmt.b32 $1, h, 0, 0x2404;
prmt.b32 $3, h, 0, 0x3414;
}
""")


@triton.jit
def _decode_f16(packed, USE_ASM: tl.constexpr):
    """[BN, NK] int8 bytes of two E2M1 codes -> (even-k values, odd-k values), fp16 [BN, NK]."""
    if USE_ASM:
        return tl.inline_asm_elementwise(_PRMT_DECODE, "=r,=r,=r,=r,r", [packed],
                                         dtype=(tl.float16, tl.float16), is_pure=True, pack=4)
    else:
        codes = packed.to(tl.int32)
        lo = ((((codes & 7) << 9) | ((codes & 8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)) * 16384.0
        hi = codes >> 4
        hi = ((((hi & 7) << 9) | ((hi & 8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)) * 16384.0
        return lo, hi


@triton.jit
def _fold16(s):
    """A 128-K block's per-32 scales, loaded once per halves position [BN, 64], folded relative
    to each row's largest: (fp16 factors 2**d [BN, 64], fp32 reference [BN], 0 where the block
    does not fold within 23 binades or its scales are not positive normal powers of two)."""
    bits = s.to(tl.int32, bitcast=True)
    e = (bits >> 23) & 0xFF
    ref = tl.max(e, axis=1)
    d = tl.maximum(e - ref[:, None], -MAX_SPREAD16 - 1)
    bad = (bits < 0) | ((bits & 0x7FFFFF) != 0) | (e == 0) | (e >= 253) | (d < -MAX_SPREAD16)
    f_bits = tl.where(d >= -14, (15 + d) << 10, 1 << (24 + tl.maximum(d, -24)))  # 2**d, subnormal below 2**-14
    factor = f_bits.to(tl.int16).to(tl.float16, bitcast=True)
    ref_f = tl.where(tl.max(bad.to(tl.int32), axis=1) > 0, 0.0, (ref << 23).to(tl.float32, bitcast=True))
    return factor, ref_f


@triton.jit
def grouped_one_pass_kernel(a_ptr, as_ptr, b_ptr, s_ptr, mm_ptr, c_ptr, MAX_M, N,
                            K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr,
                            INTERPRETER: tl.constexpr, USE_ASM: tl.constexpr):
    """One [BM tokens x BN weight rows] tile of group program_id(1), token tile fastest.
    SWAP puts the weight rows on the MMA's M side (the token side can then be 16 wide)."""
    KB: tl.constexpr = K // 128
    pid = tl.program_id(0)
    grp = tl.program_id(1).to(tl.int64)
    tiles_m = tl.cdiv(MAX_M, BM)
    pid_m = pid % tiles_m
    pid_n = pid // tiles_m
    rows, rows_m, rows_n, n_ok, c_ptrs, c_mask = masked_tile(mm_ptr, c_ptr, grp, pid_m, pid_n, MAX_M, N, BM, BN)
    if pid_m * BM >= rows:  # no row of this tile is computed: zeros
        tl.store(c_ptrs, tl.zeros((BM, BN), dtype=tl.bfloat16), mask=c_mask)
        return
    m_ok = rows_m < rows
    a_base = a_ptr + grp * MAX_M * K
    as_base = as_ptr + grp * MAX_M * KB
    b_base = b_ptr + grp * N * (K // 2)
    s_base = s_ptr + grp * N * (K // 32)
    a_rows = a_base + rows_m[:, None].to(tl.int64) * K
    b_rows = b_base + rows_n[:, None].to(tl.int64) * (K // 2)
    if SWAP:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    bad = tl.zeros((BN,), dtype=tl.int1)
    # Loads are issued one block ahead by hand (the compiler's own pipelining of loads that
    # feed no MMA directly was 3-4x slower here): block kb's arithmetic runs while block
    # kb + 1's bytes arrive.
    a_pairs = a_rows.to(tl.pointer_type(tl.int16)) + tl.arange(0, 64)[None, :]
    b_bytes = b_rows + tl.arange(0, 64)[None, :]
    s_rows = s_base + rows_n[:, None].to(tl.int64) * (K // 32) + tl.arange(0, 64)[None, :] // 16
    pairs = tl.load(a_pairs, mask=m_ok[:, None], other=0)
    packed = tl.load(b_bytes, mask=n_ok[:, None], other=0)
    s = tl.load(s_rows, mask=n_ok[:, None], other=1.0)
    sa = tl.load(as_base + rows_m * KB, mask=m_ok, other=0.0)
    for kb in range(KB):
        nxt = tl.minimum(kb + 1, KB - 1)
        pairs_n = tl.load(a_pairs + nxt * 64, mask=m_ok[:, None], other=0)
        packed_n = tl.load(b_bytes + nxt * 64, mask=n_ok[:, None], other=0)
        s_n = tl.load(s_rows + nxt * 4, mask=n_ok[:, None], other=1.0)
        sa_n = tl.load(as_base + rows_m * KB + nxt, mask=m_ok, other=0.0)
        a_even = (pairs & 0xFF).to(tl.int8).to(tl.float8e4nv, bitcast=True).to(tl.float16)
        a_odd = ((pairs >> 8) & 0xFF).to(tl.int8).to(tl.float8e4nv, bitcast=True).to(tl.float16)
        lo, hi = _decode_f16(packed, USE_ASM)
        factor, ref = _fold16(s)
        bad = bad | (ref == 0.0)
        if SWAP:
            blk = tl.dot(lo * factor, tl.trans(a_even))
            blk = tl.dot(hi * factor, tl.trans(a_odd), blk)
            acc += blk * (ref[:, None] * sa[None, :])
        else:
            blk = tl.dot(a_even, tl.trans(lo * factor))
            blk = tl.dot(a_odd, tl.trans(hi * factor), blk)
            acc += blk * (sa[:, None] * ref[None, :])
        pairs, packed, s, sa = pairs_n, packed_n, s_n, sa_n
    if tl.max(bad.to(tl.int32), axis=0) > 0:
        exact = _exact_tile(a_base, as_base, b_base, s_base, rows_m, m_ok, rows_n, n_ok, K, INTERPRETER)
        if SWAP:
            acc = tl.trans(exact)
        else:
            acc = exact
    out = to_bf16(acc, INTERPRETER)
    if SWAP:
        out = tl.trans(out)
    out = tl.where(m_ok[:, None], out, tl.zeros((BM, BN), dtype=tl.bfloat16))
    tl.store(c_ptrs, out, mask=c_mask)
