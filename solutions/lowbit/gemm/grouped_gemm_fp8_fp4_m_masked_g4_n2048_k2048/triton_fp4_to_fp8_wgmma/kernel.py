"""Triton kernels: M-masked grouped GEMM, A in FP8 e4m3 (per-row per-128 float32 scale) times
B in FP4 E2M1 (per-row per-32 float32 scale), bf16 out.

The FP4 weights are decoded to e4m3 bit patterns with integer ops (every E2M1 value is exact in
e4m3) and multiplied with an fp8 ``tl.dot`` (wgmma on sm_90, tcgen05 on sm_100). Two ways:
- two passes (most shapes): ``decode_b_kernel`` writes B as e4m3 plus one fp32 multiplier per
  row and 128-K block, then ``grouped_tile_gemm_kernel`` (one output tile per program, TMA or
  pointer loads; ``grouped_gemm_kernel`` with PREDEC is the older walking form) loads it like
  any FP8 operand (pipelined by Triton);
- one pass (few rows in buckets of at most 32 or at least 1024 rows, since the seventh
  session): ``grouped_gemm_kernel`` with the weights on the MMA's M side (SWAP) decodes B
  inside its K loop, in the prmt lookup's own k order (KPERM: no shuffle before wgmma), with
  A loaded in that order, optionally with K split over programs (SPLIT_K). Triton waits on
  each wgmma before the fp32 promotion, so decode and MMA overlap only across CTAs; for few
  rows that costs less than the decode pass and its 32 MiB of extra traffic.

Scales, per 128-wide K block and per weight row n:
- fast path: the four per-32 scales are positive normal powers of two within FOLD_SPREAD
  binades of each other. Their ratio to ``ref = max(scale) * 2**-6`` is added to the e4m3 exponent field of the
  decoded values (exact: results stay normal, below 448 and never hit the NaN pattern), and
  ``a_scale[m] * ref[n]`` is applied to the block's fp32 partial product.
- any other row (zero, negative, non power of two, too widely spread scales) gets ref = 0 and
  unscaled codes in the main loop (so it contributes exactly 0 there), and one flag per tile
  records that. After the main loop, only tiles that saw such a row run a correction loop with
  four K=32 dots per affected block, each scaled in fp32 by the exact scales of those rows.
- in grouped_tile_gemm_kernel, a 32- or 128-wide tile none of whose rows folds its first block
  skips the main loop and runs an exact K=32 loop over all of K instead (fallback scales come
  whole tensors at a time, and then the main loop's work would all be redone).
- 128-wide tiles (ROW_REF, ninth session; 64-wide ones optionally): the decode pass folds
  each weight row against one multiplier R taken from the row's first block (ROW_HEADROOM
  binades above its largest scale), ref = R for every block that folds; the GEMM promotes
  with a_scale alone and applies R per column after the loop; a tile with any block that
  did not fold takes the exact K=32 loop instead of the correction loop.

The fp8 MMA's partial sums are promoted to fp32 once per 128-K block
(acc += dot(...) * scale), never accumulated across blocks inside the MMA.
"""

import triton
import triton.language as tl

try:  # programmatic dependent launch (sm_90+); only kernels compiled with PDL=True use these
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - older Triton: PDL stays off
    gdc_launch_dependents = gdc_wait = None


@triton.jit
def _e2m1_to_e4m3(code, dexp):
    """int32 E2M1 codes (0..15) -> int32 e4m3 bit patterns of code_value * 2**(dexp >> 3).

    dexp is an exponent-field addend (a multiple of 8, in [-40, 48]); 0 keeps the plain value.
    """
    mag = code & 7
    base = tl.where(mag == 1, 0x30, (mag << 2) + 0x30) + dexp
    val = tl.where(mag == 0, 0, base)
    return val | ((code & 8) << 4)


# Widest spread (binades) of a block's four per-32 scales that the fast path folds into the
# e4m3 exponents. Up to 11 stays exact in e4m3, but the FP8 MMA (~14 bits inside a 128-K
# block) then adds products 2^11 apart: with scales spread randomly over 2^32 per group, 218
# of 1 M outputs missed the tolerance by 2 bf16 ulps (H200, 2026-11-30). Real per-32 scales
# of one block lie within a binade or two; wider blocks take the exact fp16 correction loop.
FOLD_SPREAD = tl.constexpr(3)

# One 32-bit word of 8 codes ($2) -> two words of e4m3 bytes: $0 codes 0-3, $1 codes 4-7.
# Magnitudes: a prmt lookup in the 8-byte table {$3, $7} with the codes' low 3 bits as
# selectors (prmt reads only the selector's low 16 bits, so one mask of the whole word
# serves both halves, the high one shifted down). Signs: prmt's sign-replicate mode
# (selector bit 3) turns each output byte into 0xFF/0x00 from the top bit of a source byte;
# the odd codes' signs are the top bits of the word's bytes, the even codes' those of the
# word shifted left by 4. About 9 instructions per word after ptxas's fusion, against 15-16
# for the shift-and-mask version of the first seven sessions (eighth session, run 35: GPU
# time -0.3 us at max_m 1; ninth session, run 39: one mask instead of two).
# tests/test_grouped_gemm_kernel.py (test_prmt_*_decode_matches_e2m1) runs this text on the
# CPU against the E2M1 values.
_PRMT_ASM_TEXT = """
{
.reg .b32 s, m, g, w4;
shl.b32 w4, $2, 4;
and.b32 s, $2, 0x77777777;
prmt.b32 m, $3, $7, s;
prmt.b32 g, $2, w4, 0x9D8C;
and.b32 g, g, 0x80808080;
or.b32 $0, m, g;
shr.u32 s, s, 16;
prmt.b32 m, $3, $7, s;
prmt.b32 g, $2, w4, 0xBFAE;
and.b32 g, g, 0x80808080;
or.b32 $1, m, g;
}
"""
_PRMT_ASM = tl.constexpr(_PRMT_ASM_TEXT)
# The same lookup on one int32 word at a time (pack=1): the second table is operand $4.
_PRMT_WORD_ASM_TEXT = _PRMT_ASM_TEXT.replace("$7", "$4")
_PRMT_WORD_ASM = tl.constexpr(_PRMT_WORD_ASM_TEXT)


@triton.jit
def _decode_block(b_rows_ptr, row_mask, row_stride, koff, dexp3, BR: tl.constexpr,
                  NG: tl.constexpr, USE_ASM: tl.constexpr):
    """Load NG*16 packed bytes per row (NG groups of 32 K) and decode them to [BR, NG*32] fp8.

    b_rows_ptr: [BR] pointers to the start of each weight row; koff: byte offset along the row;
    dexp3: [BR, NG, 1] exponent addends (or a scalar 0).
    USE_ASM: one PTX prmt byte-table lookup per 4 codes (magnitudes) plus a prmt/shift for the
    signs, 8 codes per 32-bit word; otherwise plain Triton integer ops per code (portable, and
    what the interpreter runs).
    """
    gi = tl.arange(0, NG)
    bi = tl.arange(0, 16)
    ptrs = b_rows_ptr[:, None, None] + (koff + gi[None, :, None] * 16 + bi[None, None, :])
    if USE_ASM:
        byte = tl.load(ptrs, mask=row_mask[:, None, None], other=0)
        # Byte table per (row, group): magnitude code i -> e4m3 byte of E2M1(i) * 2**(dexp/8).
        d = tl.zeros((BR, NG, 1), dtype=tl.int32) + dexp3
        lut0 = tl.broadcast_to(0x3C383000 + d * 0x01010100, (BR, NG, 16))
        lut1 = tl.broadcast_to(0x4C484440 + d * 0x01010101, (BR, NG, 16))
        # x[..., 4q+t] = decoded code k=8q+t, y[..., 4q+t] = code k=8q+4+t (natural nibble order)
        x, y = tl.inline_asm_elementwise(
            _PRMT_ASM, "=r,=r,r,r,r,r,r,r,r,r,r", [byte, lut0, lut1],
            dtype=(tl.int8, tl.int8), is_pure=True, pack=4)
        xy = tl.join(tl.reshape(x, [BR, NG, 4, 4]), tl.reshape(y, [BR, NG, 4, 4]))
        bits = tl.reshape(tl.permute(xy, (0, 1, 2, 4, 3)), [BR, NG * 32])
    else:
        byte = tl.load(ptrs, mask=row_mask[:, None, None], other=0).to(tl.int32) & 0xFF
        lo = _e2m1_to_e4m3(byte & 15, dexp3).to(tl.int8)
        hi = _e2m1_to_e4m3(byte >> 4, dexp3).to(tl.int8)
        bits = tl.reshape(tl.join(lo, hi), [BR, NG * 32])
    return bits.to(tl.float8e4nv, bitcast=True)


@triton.jit
def _kperm_cols():
    """k (within a 128-K block) of each of the 64 columns of _decode_block_xy's x: x holds
    codes 8w..8w+3 of word w at columns 4w..4w+3 (y the codes 4 further on)."""
    p = tl.arange(0, 64)
    return (p // 4) * 8 + (p % 4)


@triton.jit
def _decode_block_xy(b_rows_ptr, row_mask, koff, dexp, BR: tl.constexpr, USE_ASM: tl.constexpr,
                     MASKED: tl.constexpr = True):
    """One 128-K block of BR weight rows (64 bytes each from koff) -> two [BR, 64] fp8 halves
    in the prmt lookup's own k order, with no shuffle: x[:, 4w + t] = code 8w + t and
    y[:, 4w + t] = code 8w + 4 + t (w the 32-bit word, t < 4). A dot needs only both operands
    in the same k order, so the caller loads A's columns at _kperm_cols() (and + 4) instead.
    dexp [BR, 4]: exponent addends of the block's four 32-groups (column // 16), broadcast
    along each group's 16 columns (run 26: selecting them per column cost 9-18 us).
    Triton still stores x and y to shared memory and reloads them in wgmma's register layout
    (its hoisting of that conversion takes single-operand asm only), but without the shuffle."""
    p = tl.arange(0, 64)
    dcol = tl.reshape(tl.broadcast_to(dexp[:, :, None], (BR, 4, 16)), [BR, 64])
    if USE_ASM:
        # Four bytes (one word, 8 codes) per pack: the word's x and y bytes come out of one call.
        if MASKED:
            byte = tl.load(b_rows_ptr[:, None] + (koff + p[None, :]), mask=row_mask[:, None], other=0)
        else:  # the caller's row pointers are all valid
            byte = tl.load(b_rows_ptr[:, None] + (koff + p[None, :]))
        x, y = tl.inline_asm_elementwise(
            _PRMT_ASM, "=r,=r,r,r,r,r,r,r,r,r,r", [byte, 0x3C383000 + dcol * 0x01010100, 0x4C484440 + dcol * 0x01010101],
            dtype=(tl.int8, tl.int8), is_pure=True, pack=4)
    else:
        # Code 8w + t sits in byte 4w + t // 2, nibble t % 2 (low nibble = even k).
        src = (p // 4) * 4 + (p % 4) // 2
        shift = ((p % 2) * 4)[None, :]
        bmask = row_mask[:, None] | (not MASKED)
        bx = tl.load(b_rows_ptr[:, None] + (koff + src[None, :]), mask=bmask, other=0).to(tl.int32)
        by = tl.load(b_rows_ptr[:, None] + (koff + 2 + src[None, :]), mask=bmask, other=0).to(tl.int32)
        x = _e2m1_to_e4m3((bx >> shift) & 15, dcol).to(tl.int8)
        y = _e2m1_to_e4m3((by >> shift) & 15, dcol).to(tl.int8)
    return x.to(tl.float8e4nv, bitcast=True), y.to(tl.float8e4nv, bitcast=True)


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
def _exp_field(s):
    """float32 (any shape) -> (biased exponent field, is a positive normal power of two)."""
    sb = s.to(tl.int32, bitcast=True)
    ef = (sb >> 23) & 0xFF
    return ef, ((sb & 0x7FFFFF) == 0) & (sb > 0) & (ef < 255)


@triton.jit
def _fold_scales(s0, s1, s2, s3):
    """The four per-32 scales of one 128-K block, each [BR] float32 (elementwise: no
    cross-thread reductions) -> (row_ok [BR], dexp [BR, 4] exponent-field addends, ref [BR])."""
    e0, p0 = _exp_field(s0)
    e1, p1 = _exp_field(s1)
    e2, p2 = _exp_field(s2)
    e3, p3 = _exp_field(s3)
    emax = tl.maximum(tl.maximum(e0, e1), tl.maximum(e2, e3))
    emin = tl.minimum(tl.minimum(e0, e1), tl.minimum(e2, e3))
    row_ok = p0 & p1 & p2 & p3 & ((emax - emin) <= FOLD_SPREAD)
    base = 6 - emax
    d0 = tl.where(row_ok, (e0 + base) * 8, 0)
    d1 = tl.where(row_ok, (e1 + base) * 8, 0)
    d2 = tl.where(row_ok, (e2 + base) * 8, 0)
    d3 = tl.where(row_ok, (e3 + base) * 8, 0)
    # [BR, 4] in group order: join pairs, then put the pair index before the element index.
    dexp = tl.reshape(tl.permute(tl.join(tl.join(d0, d1), tl.join(d2, d3)), (0, 2, 1)),
                      [s0.shape[0], 4])
    smax = tl.maximum(tl.maximum(s0, s1), tl.maximum(s2, s3))
    ref = tl.where(row_ok, smax * 0.015625, 0.0)
    return row_ok, dexp, ref


@triton.jit
def _or(x, y):
    return x | y


@triton.jit
def _block_bits(s):
    """[BR, 4] scales -> (their bits, each row's largest and smallest bits, whether the row's
    block folds by itself: all positive (min > 0: no sign bit, not zero), normal powers of
    two (no mantissa bits: subnormals and NaN have some), finite (max below +inf's bits),
    spread <= FOLD_SPREAD)."""
    sb = s.to(tl.int32, bitcast=True)
    bmax = tl.max(sb, axis=1)
    bmin = tl.min(sb, axis=1)
    mant = tl.reduce(sb, 1, _or) & 0x7FFFFF
    ok = (bmin > 0) & (mant == 0) & (bmax < 0x7F800000) & (bmax - bmin <= FOLD_SPREAD * 0x800000)
    return sb, bmax, bmin, ok


@triton.jit
def _fold_scales_2d(s):
    """_fold_scales on a [BR, 4] tile (reductions along axis 1), on the scales' bit patterns:
    positive floats order like their bits as int32, and where the four mantissa fields are
    zero the bits differ by whole exponent steps (2^23), so three integer reductions (max,
    min, or) decide the block and give its exponent addends. Unlike _fold_scales, a row that
    does not fold gets addends clamped into the decode's safe range instead of 0 (its ref is
    0, which cancels it; the decode pass, which keeps such rows' raw codes, zeroes them)."""
    sb, bmax, bmin, row_ok = _block_bits(s)
    # (e_j - e_max) * 8 + 48: with the mantissas zero, sb >> 20 is 8 e (plus the sign). It is
    # <= 48 for every row (bmax is the largest of the four), and the lower clamp (a no-op
    # where the row folds) keeps rows that do not fold decoding to finite bytes (their ref
    # is 0, which cancels them) without a test of row_ok here.
    dexp = tl.maximum((sb >> 20) - (bmax >> 20)[:, None] + 48, -40)
    ref = tl.where(row_ok, bmax.to(tl.float32, bitcast=True) * 0.015625, 0.0)
    return row_ok, dexp, ref


# Binades above the largest scale of a row's first block that the row multiplier leaves
# room for (ROW_REF: the decode pass folds every block of a row against one multiplier).
ROW_HEADROOM = tl.constexpr(3)


@triton.jit
def _row_ref_bits(s0):
    """The bits of a row's reference scale 2^(e0 + ROW_HEADROOM), e0 the largest exponent
    among the positive normal powers of two of its first block's four scales s0 [P, 4]
    (0 where there is none: then no block of the row folds). Every decode program reads
    the same first block, so all of a row's blocks agree on it."""
    _, pow2 = _exp_field(s0)
    e0 = tl.max(tl.where(pow2, s0.to(tl.int32, bitcast=True), 0), axis=1)
    return tl.where((e0 > 0) & (e0 < 0x7F800000 - ROW_HEADROOM * 0x800000), e0 + ROW_HEADROOM * 0x800000, 0)


@triton.jit
def _fold_scales_row(s, rbits):
    """_fold_scales_2d against the row's reference scale (bits rbits from _row_ref_bits)
    instead of the block's own largest: a block folds when it would on its own and its
    scales lie within [ref / 2^11, ref], so that the addends d = e - e_ref + 6 stay in
    [-5, 6] (normal e4m3 values). -> (row_ok, dexp (0 where it does not fold), ref = R =
    ref scale * 2^-6, the same for every block of the row that folds)."""
    sb, bmax, bmin, row_ok = _block_bits(s)
    row_ok = row_ok & (rbits > 0) & (bmax <= rbits) & (bmin >= rbits - 11 * 0x800000)
    dexp = tl.where(row_ok[:, None], (sb >> 20) - (rbits >> 20)[:, None] + 48, 0)
    ref = tl.where(row_ok, rbits.to(tl.float32, bitcast=True) * 0.015625, 0.0)
    return row_ok, dexp, ref


@triton.jit
def _load_fold(bs_rows, n_valid, kb, FOLD2D: tl.constexpr):
    """Load the 4 scales of K block kb for each row and fold them (see _fold_scales)."""
    if FOLD2D:
        g4 = tl.arange(0, 4)
        s = tl.load(bs_rows[:, None] + (kb * 4 + g4[None, :]), mask=n_valid[:, None], other=1.0)
        return _fold_scales_2d(s)
    else:
        s0 = tl.load(bs_rows + kb * 4, mask=n_valid, other=1.0)
        s1 = tl.load(bs_rows + (kb * 4 + 1), mask=n_valid, other=1.0)
        s2 = tl.load(bs_rows + (kb * 4 + 2), mask=n_valid, other=1.0)
        s3 = tl.load(bs_rows + (kb * 4 + 3), mask=n_valid, other=1.0)
        return _fold_scales(s0, s1, s2, s3)


@triton.jit
def _correct_tile(acc, a_rows, as_rows, b_rows, bs_rows, m_valid, n_valid, kb_lo, kb_hi, KH,
                  BN: tl.constexpr, SWAP: tl.constexpr, FOLD2D: tl.constexpr, USE_ASM: tl.constexpr):
    """Exact path for rows whose scales could not be folded (they contributed 0 in the main
    loop): for each 128-block that has such rows, four K=32 dots of the raw codes, each scaled
    in fp32 by those rows' own scales (the other rows get 0 here: they are already done).
    The dots run on fp16 operands (e4m3 and E2M1 values are exact in fp16, and the fp16 MMA
    accumulates in fp32): Hopper's FP8 MMA keeps ~14 bits even inside one K=32 step, and with
    scales that differ by 2^30 between groups the cancelling sums erred by 2 bf16 ulps
    (H200, 2026-11-30, 218 of 1 M outputs)."""
    k32 = tl.arange(0, 32)
    for kb in range(kb_lo, kb_hi):
        row_ok, dexp, ref = _load_fold(bs_rows, n_valid, kb, FOLD2D)
        if tl.max((~row_ok).to(tl.int32), axis=0) != 0:
            a_s = tl.load(as_rows + kb, mask=m_valid, other=0.0)
            for j in range(0, 4):
                a = tl.load(a_rows[:, None] + (kb * 128 + j * 32 + k32[None, :]),
                            mask=m_valid[:, None], other=0.0)
                s_j = tl.load(bs_rows + (kb * 4 + j), mask=n_valid, other=0.0)
                s_j = tl.where(row_ok, 0.0, s_j)
                braw = _decode_block(b_rows, n_valid, KH, kb * 64 + j * 16, 0, BN, 1, USE_ASM).to(tl.float16)
                a = a.to(tl.float16)
                if SWAP:
                    acc += tl.dot(braw, tl.trans(a)) * (s_j[:, None] * a_s[None, :])
                else:
                    acc += tl.dot(a, tl.trans(braw)) * (a_s[:, None] * s_j[None, :])
    return acc


@triton.jit
def _kperm_operands(a_rows, b_rows, n_valid, kb, dexp, BN: tl.constexpr, USE_ASM: tl.constexpr):
    """One 128-K block of the one-pass KPERM loop: B's codes decoded (scales folded by dexp)
    in the prmt lookup's own k order, as wgmma's register operand, and A loaded in that same
    order: (x, y, ax, ay) for _kperm_product. Row pointers are all valid (no masks, see
    _gemm_tile)."""
    x, y = _decode_block_xy(b_rows, n_valid, kb * 64, dexp, BN, USE_ASM, False)
    ka = kb * 128 + _kperm_cols()
    return x, y, tl.load(a_rows[:, None] + ka[None, :]), tl.load(a_rows[:, None] + (ka + 4)[None, :])


@triton.jit
def _kperm_product(x, y, ax, ay):
    """The block's [BN, BM] partial from _kperm_operands, before its fp32 promotion."""
    return tl.dot(y, tl.trans(ay), tl.dot(x, tl.trans(ax)))


@triton.jit
def _kperm_pair_loop(acc, a_rows, as_rows, b_rows, bs_rows, n_valid, kb_lo, kb_hi, KB,
                     BN: tl.constexpr, BM: tl.constexpr, USE_ASM: tl.constexpr):
    """The one-pass KPERM loop two 128-K blocks at a time (UNROLL = 2; kb_hi - kb_lo even):
    the two blocks' scale folds, decodes and dots are independent chains in one iteration,
    which the compiler interleaves. With one warp per scheduler the single-block loop waits
    on each instruction's predecessor (~1150 cycles for ~310 instructions a step, ninth
    session); a second chain fills those waits. Each block keeps its own partial and fp32
    promotion. Row pointers are all valid (no masks, see _gemm_tile). -> (acc, bad_rows)."""
    g4 = tl.arange(0, 4)
    bad_rows = tl.zeros((BN,), dtype=tl.int32)
    # a_scale feeds the promotion, not the dots: prefetched one pair ahead by hand.
    a_s0_next = tl.load(as_rows + kb_lo)
    a_s1_next = tl.load(as_rows + kb_lo + 1)
    for kb in range(kb_lo, kb_hi, 2):
        a_s0 = a_s0_next
        a_s1 = a_s1_next
        a_s0_next = tl.load(as_rows + tl.minimum(kb + 2, KB - 2))
        a_s1_next = tl.load(as_rows + tl.minimum(kb + 3, KB - 1))
        ok0, dexp0, ref0 = _fold_scales_2d(tl.load(bs_rows[:, None] + (kb * 4 + g4[None, :])))
        ok1, dexp1, ref1 = _fold_scales_2d(tl.load(bs_rows[:, None] + (kb * 4 + 4 + g4[None, :])))
        x0, y0, ax0, ay0 = _kperm_operands(a_rows, b_rows, n_valid, kb, dexp0, BN, USE_ASM)
        x1, y1, ax1, ay1 = _kperm_operands(a_rows, b_rows, n_valid, kb + 1, dexp1, BN, USE_ASM)
        part0 = _kperm_product(x0, y0, ax0, ay0)
        part1 = _kperm_product(x1, y1, ax1, ay1)
        acc += part0 * (ref0[:, None] * a_s0[None, :])
        acc += part1 * (ref1[:, None] * a_s1[None, :])
        bad_rows = bad_rows | ((ref0 == 0.0) | (ref1 == 0.0)).to(tl.int32)
    return acc, bad_rows


@triton.jit
def _gemm_tile(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, bq_ptr, ref_ptr, part_ptr, tick_ptr,
               grp64, pid_m, pid_n, pid_k, mm, MAX_M, N, K,
               BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr,
               MANUAL_RNE: tl.constexpr, USE_ASM: tl.constexpr, FOLD2D: tl.constexpr,
               PREDEC: tl.constexpr, SPLIT_K: tl.constexpr, ABLATE: tl.constexpr = 0,
               CORR_ASM: tl.constexpr = True, KPERM: tl.constexpr = False, UNROLL: tl.constexpr = 1):
    """One [BM tokens x BN weight rows] tile over K slice pid_k of SPLIT_K; stores only rows
    < mm (the zero CTAs do the rest).

    SWAP=False: acc[BM, BN] = A @ Bdec^T (tokens on the MMA's M side).
    SWAP=True:  acc[BN, BM] = Bdec @ A^T (weight rows on the MMA's M side; for few tokens).
    PREDEC: B comes already decoded (bq, ref from decode_b_kernel) instead of being decoded
    here, so the K loop is a plain pipelined FP8 GEMM with one fp32 promotion per block.
    SPLIT_K > 1: the fp32 partial goes to part_ptr; the last of the tile's SPLIT_K programs
    (ticket in tick_ptr) sums the partials in slice order, stores c and resets the ticket.
    CORR_ASM: the correction loop may use the PTX decode (see grouped_gemm_kernel).
    KPERM (SWAP, not PREDEC): B decoded by _decode_block_xy, in the prmt lookup's own k
    order, as wgmma's register operand (no shuffle first); A loaded in that same k order.
    """
    KB = K // 128
    KH = K // 2
    kb_lo = pid_k * (KB // SPLIT_K)
    kb_hi = kb_lo + KB // SPLIT_K
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    m_valid = offs_m < mm
    n_valid = offs_n < N

    a_rows = _a_rows(a_ptr, grp64, offs_m, MAX_M, K)
    as_rows = _as_rows(as_ptr, grp64, offs_m, MAX_M, K)
    b_rows = _b_rows(b_ptr, grp64, offs_n, N, K)
    bs_rows = _bs_rows(bs_ptr, grp64, offs_n, N, K)
    if KPERM:
        # The one-pass loop loads without masks (each mask is a compare and a select per
        # loaded element in its loop): token rows past MAX_M and weight rows past N point at
        # valid rows instead. Their results are never stored (only rows < mm of valid
        # weight rows are), and each output depends only on its own A and B rows.
        a_rows_k = _a_rows(a_ptr, grp64, tl.minimum(offs_m, MAX_M - 1), MAX_M, K)
        as_rows_k = _as_rows(as_ptr, grp64, tl.minimum(offs_m, MAX_M - 1), MAX_M, K)
        b_rows_k = _b_rows(b_ptr, grp64, tl.minimum(offs_n, N - 1), N, K)
        bs_rows_k = _bs_rows(bs_ptr, grp64, tl.minimum(offs_n, N - 1), N, K)

    k128 = tl.arange(0, 128)
    if SWAP:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    # Per-row flag of blocks whose scales did not fold; reduced once after the loop (a
    # cross-warp reduction per K step would add a barrier to every iteration).
    bad_rows = tl.zeros((BN,), dtype=tl.int32)
    # a_scale is prefetched one K block ahead by hand: Triton's pipeliner only prefetches loads
    # that feed the dot's operands, and this one feeds the fp32 promotion after the dot, so
    # its latency was exposed once per K block (measured: ~half of the kernel's time).
    if KPERM:
        a_s_next = tl.load(as_rows_k + kb_lo)
    else:
        a_s_next = tl.load(as_rows + kb_lo, mask=m_valid, other=0.0)
    if PREDEC:
        q_rows = bq_ptr + grp64 * N * K + offs_n.to(tl.int64) * K
        ref_rows = ref_ptr + grp64 * KB * N + offs_n
        ref_next = tl.load(ref_rows + kb_lo * N, mask=n_valid, other=0.0)
    # Same for the 1-D scale vectors (the [BN, 4] tile of FOLD2D feeds the decode, so the
    # pipeliner already prefetches it).
    if FOLD2D:
        sn0 = tl.zeros((BN,), dtype=tl.float32)
        sn1 = sn0
        sn2 = sn0
        sn3 = sn0
    else:
        sn0 = tl.load(bs_rows + kb_lo * 4, mask=n_valid, other=1.0)
        sn1 = tl.load(bs_rows + (kb_lo * 4 + 1), mask=n_valid, other=1.0)
        sn2 = tl.load(bs_rows + (kb_lo * 4 + 2), mask=n_valid, other=1.0)
        sn3 = tl.load(bs_rows + (kb_lo * 4 + 3), mask=n_valid, other=1.0)
    if KPERM and UNROLL == 2:
        acc, bad_rows = _kperm_pair_loop(acc, a_rows_k, as_rows_k, b_rows_k, bs_rows_k, n_valid, kb_lo, kb_hi, KB,
                                         BN, BM, USE_ASM)
    else:
        for kb in range(kb_lo, kb_hi):
            if not KPERM:
                a = tl.load(a_rows[:, None] + (kb * 128 + k128[None, :]), mask=m_valid[:, None], other=0.0)
            a_s = a_s_next
            if KPERM:
                a_s_next = tl.load(as_rows_k + tl.minimum(kb + 1, KB - 1))
            else:
                a_s_next = tl.load(as_rows + tl.minimum(kb + 1, KB - 1), mask=m_valid, other=0.0)
            if PREDEC:
                # ref < 0 marks a row whose scales did not fold (its bq codes are unscaled).
                ref_raw = ref_next
                ref_next = tl.load(ref_rows + tl.minimum(kb + 1, KB - 1) * N, mask=n_valid, other=0.0)
                row_ok = ref_raw >= 0.0
                ref = tl.maximum(ref_raw, 0.0)
            elif ABLATE & 2:  # timing experiment only: no scale handling (wrong results)
                row_ok = n_valid
                dexp = tl.zeros((BN, 4), dtype=tl.int32)
                ref = tl.full((BN,), 1.0, tl.float32)
            elif FOLD2D and KPERM:
                row_ok, dexp, ref = _fold_scales_2d(tl.load(bs_rows_k[:, None] + (kb * 4 + tl.arange(0, 4)[None, :])))
            elif FOLD2D:
                row_ok, dexp, ref = _load_fold(bs_rows, n_valid, kb, FOLD2D)
            else:
                row_ok, dexp, ref = _fold_scales(sn0, sn1, sn2, sn3)
                kn = tl.minimum(kb + 1, KB - 1) * 4
                sn0 = tl.load(bs_rows + kn, mask=n_valid, other=1.0)
                sn1 = tl.load(bs_rows + (kn + 1), mask=n_valid, other=1.0)
                sn2 = tl.load(bs_rows + (kn + 2), mask=n_valid, other=1.0)
                sn3 = tl.load(bs_rows + (kn + 3), mask=n_valid, other=1.0)
            bad_rows = bad_rows | (ref == 0.0).to(tl.int32)
            if KPERM:
                x, y, ax, ay = _kperm_operands(a_rows_k, b_rows_k, n_valid, kb, dexp, BN, USE_ASM)
                acc += _kperm_product(x, y, ax, ay) * (ref[:, None] * a_s[None, :])
            else:
                if PREDEC:
                    bdec = tl.load(q_rows[:, None] + (kb * 128 + k128[None, :]), mask=n_valid[:, None], other=0.0)
                elif ABLATE & 1:  # timing experiment only: bytes used as fp8 twice, no decode
                    byte = tl.load(b_rows[:, None] + (kb * 64 + tl.arange(0, 64)[None, :]), mask=n_valid[:, None], other=0)
                    bdec = tl.reshape(tl.join(byte, byte), [BN, 128]).to(tl.float8e4nv, bitcast=True)
                else:
                    bdec = _decode_block(b_rows, n_valid, KH, kb * 64, dexp[:, :, None], BN, 4, USE_ASM)
                if SWAP:
                    acc += tl.dot(bdec, tl.trans(a)) * (ref[:, None] * a_s[None, :])
                else:
                    acc += tl.dot(a, tl.trans(bdec)) * (a_s[:, None] * ref[None, :])

    if tl.max(bad_rows, axis=0) != 0:
        acc = _correct_tile(acc, a_rows, as_rows, b_rows, bs_rows, m_valid, n_valid, kb_lo, kb_hi, KH,
                            BN, SWAP, FOLD2D, USE_ASM and CORR_ASM)

    if SPLIT_K == 1:
        _store_tile(acc, c_ptr, grp64, offs_m, offs_n, m_valid, n_valid, MAX_M, N, SWAP, MANUAL_RNE)
    else:
        # Split K: store this slice's fp32 partial and take the tile's ticket; the program that
        # draws the last one sums all partials in slice order (deterministic), stores c and
        # leaves the ticket at zero again (the caller's ticket buffer arrives zeroed).
        tile = (grp64 * tl.cdiv(MAX_M, BM) + pid_m) * tl.cdiv(N, BN) + pid_n
        p_ptrs = (part_ptr + tile * (SPLIT_K * BM * BN)
                  + tl.arange(0, acc.shape[0])[:, None] * acc.shape[1] + tl.arange(0, acc.shape[1])[None, :])
        tl.store(p_ptrs + pid_k * (BM * BN), acc)
        tl.debug_barrier()  # every thread's partial is written before the (release) ticket
        ticket = tl.atomic_add(tick_ptr + tile, 1)
        if ticket == SPLIT_K - 1:
            total = tl.zeros(acc.shape, dtype=tl.float32)
            for s in tl.static_range(SPLIT_K):
                total += tl.load(p_ptrs + s * (BM * BN), cache_modifier=".cg")
            _store_tile(total, c_ptr, grp64, offs_m, offs_n, m_valid, n_valid, MAX_M, N, SWAP, MANUAL_RNE)
            tl.atomic_xchg(tick_ptr + tile, 0)


@triton.jit
def _store_tile(acc, c_ptr, grp64, offs_m, offs_n, m_valid, n_valid, MAX_M, N, SWAP: tl.constexpr,
                MANUAL_RNE: tl.constexpr):
    """bf16 of the fp32 tile into c[g], rows < mm only."""
    c_base = c_ptr + grp64 * MAX_M * N
    out = _to_bf16(acc, MANUAL_RNE)
    if SWAP:
        ptrs = c_base + offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
        tl.store(ptrs, out, mask=n_valid[:, None] & m_valid[None, :])
    else:
        ptrs = c_base + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        tl.store(ptrs, out, mask=m_valid[:, None] & n_valid[None, :])


@triton.jit
def grouped_gemm_kernel(
    a_ptr, as_ptr, b_ptr, bs_ptr, mm_ptr, c_ptr, bq_ptr, ref_ptr, part_ptr, tick_ptr,
    MAX_M, N, K, M_SPLIT,
    BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr, ZR: tl.constexpr, ZN: tl.constexpr,
    MANUAL_RNE: tl.constexpr, USE_ASM: tl.constexpr, FOLD2D: tl.constexpr,
    PREDEC: tl.constexpr = False, SPLIT_K: tl.constexpr = 1, ABLATE: tl.constexpr = 0,
    CORR_ASM: tl.constexpr = True, KPERM: tl.constexpr = False, UNROLL: tl.constexpr = 1,
    ORDER: tl.constexpr = 0,
):
    """grid = (cdiv(N, BN) * M_SPLIT + cdiv(MAX_M, ZR), g, SPLIT_K).

    bq_ptr/ref_ptr: decode_b_kernel's output (PREDEC only); part_ptr/tick_ptr: split-K fp32
    partials and tickets (SPLIT_K > 1 only). Unused pointers may be any tensor.

    GEMM programs (pid < cdiv(N, BN) * M_SPLIT) own one weight tile and walk the token tiles
    pid_m = split, split + M_SPLIT, ... while pid_m * BM < clamp(masked_m[g]); masked_m is read
    here, so nothing on the host depends on it. Zero programs each own ZR rows of c[g] and write
    zeros to those at or past clamp(masked_m[g]) (rows before it are the GEMM's).

    CORR_ASM (host-chosen): the PTX decode packs four bytes of one thread per call, so it needs
    at least 4 contiguous bytes per thread; the correction loop's [BN, 16]-byte tile gives
    BN * 16 / (32 * num_warps), which is 2 for BN = 16 with 4 warps or BN = 32 with 8, and
    then decoded the wrong bytes (H200, 2026-11-30). Such tiles take the integer decode there.

    ORDER 1: the programs are renumbered so that every group's GEMM programs come before any
    zero program in launch order (blockIdx x, then y), instead of each group's GEMM programs
    behind the previous group's zero programs (run 48: max_m 4096 with ~20 rows per group
    34.2 -> 29.3 us, 2048 26.1 -> 23.9; +1.3 at max_m 1, not understood).
    """
    pid = tl.program_id(0)
    grp = tl.program_id(1)
    pid_k = tl.program_id(2)
    num_n = tl.cdiv(N, BN)
    n_gemm = num_n * M_SPLIT
    if ORDER == 1:
        per_grp = tl.num_programs(0)
        lin = grp * per_grp + pid
        all_gemm = tl.num_programs(1) * n_gemm
        zero_idx = lin - all_gemm
        grp = tl.where(lin < all_gemm, lin // n_gemm, zero_idx // (per_grp - n_gemm))
        pid = tl.where(lin < all_gemm, lin % n_gemm, n_gemm + zero_idx % (per_grp - n_gemm))
    grp64 = grp.to(tl.int64)
    mm = tl.load(mm_ptr + grp)
    mm = tl.minimum(tl.maximum(mm, 0), MAX_M)
    if pid < n_gemm:
        pid_n = pid % num_n
        split = pid // num_n
        num_m_used = tl.cdiv(mm, BM)
        for pid_m in range(split, num_m_used, M_SPLIT):
            _gemm_tile(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, bq_ptr, ref_ptr, part_ptr, tick_ptr,
                       grp64, pid_m, pid_n, pid_k, mm, MAX_M, N, K,
                       BM, BN, SWAP, MANUAL_RNE, USE_ASM, FOLD2D, PREDEC, SPLIT_K, ABLATE, CORR_ASM, KPERM, UNROLL)
    elif pid_k == 0:
        r0 = (pid - n_gemm) * ZR
        if r0 + ZR > mm:
            rows = r0 + tl.arange(0, ZR)
            rmask = (rows >= mm) & (rows < MAX_M)
            zeros = tl.zeros((ZR, ZN), dtype=tl.bfloat16)
            base = c_ptr + grp64 * MAX_M * N + rows.to(tl.int64)[:, None] * N
            for n0 in range(0, N, ZN):
                cols = n0 + tl.arange(0, ZN)
                tl.store(base + cols[None, :], zeros, mask=rmask[:, None] & (cols < N)[None, :])


@triton.jit
def _a_rows(a_ptr, grp64, offs_m, MAX_M, K):
    return a_ptr + grp64 * MAX_M * K + offs_m.to(tl.int64) * K


@triton.jit
def _as_rows(as_ptr, grp64, offs_m, MAX_M, K):
    return as_ptr + grp64 * MAX_M * (K // 128) + offs_m.to(tl.int64) * (K // 128)


@triton.jit
def _b_rows(b_ptr, grp64, offs_n, N, K):
    return b_ptr + grp64 * N * (K // 2) + offs_n.to(tl.int64) * (K // 2)


@triton.jit
def _bs_rows(bs_ptr, grp64, offs_n, N, K):
    return bs_ptr + grp64 * N * (K // 32) + offs_n.to(tl.int64) * (K // 32)


@triton.jit
def _block_rows(a_ptr, bq_ptr, grp64, offs_m, offs_n, MAX_M, N, K):
    """Row pointers of A and of the decoded B for the pointer-load path. Token rows past
    MAX_M and weight rows past N are clamped to valid ones: their results are never stored,
    and each output row depends only on its own A row."""
    a_rows = _a_rows(a_ptr, grp64, tl.minimum(offs_m, MAX_M - 1), MAX_M, K)
    q_rows = bq_ptr + grp64 * N * K + tl.minimum(offs_n, N - 1).to(tl.int64) * K
    return a_rows, q_rows


@triton.jit
def _load_block(a_desc, bq_desc, a_rows, q_rows, grp, pid_m, pid_n, kb, MAX_M, N,
                BM: tl.constexpr, BN: tl.constexpr, TMA: tl.constexpr):
    """128-K block kb of the A tile [BM, 128] and of the decoded B tile [BN, 128]: TMA
    through the descriptors, or pointer loads (both pipelined by Triton in the K loop)."""
    if TMA:
        a = a_desc.load([grp * MAX_M + pid_m * BM, kb * 128])
        bdec = bq_desc.load([grp * N + pid_n * BN, kb * 128])
    else:
        k128 = tl.arange(0, 128)
        a = tl.load(a_rows[:, None] + (kb * 128 + k128[None, :]))
        bdec = tl.load(q_rows[:, None] + (kb * 128 + k128[None, :]))
    return a, bdec


@triton.jit
def _folded_tile(a_ptr, as_ptr, b_ptr, bs_ptr, bq_ptr, ref_rows, ref_first, a_desc, bq_desc,
                 grp, grp64, pid_m, pid_n, offs_m, offs_n, m_valid, n_valid, MAX_M, N, K,
                 BM: tl.constexpr, BN: tl.constexpr, TMA: tl.constexpr, USE_ASM: tl.constexpr,
                 CORR_ASM: tl.constexpr, PLAIN: tl.constexpr):
    """grouped_tile_gemm_kernel's usual tile: the FP8 main loop over the decoded B with one
    fp32 promotion per 128-K block, then the correction loop for rows whose scales did not
    fold (ref < 0) in some block."""
    KB = K // 128
    a_rows, q_rows = _block_rows(a_ptr, bq_ptr, grp64, offs_m, offs_n, MAX_M, N, K)
    as_rows = _as_rows(as_ptr, grp64, offs_m, MAX_M, K)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    bad_rows = tl.zeros((BN,), dtype=tl.int32)
    # The block scales feed the fp32 promotion, not the dot, so Triton's pipeliner does not
    # prefetch them: they are loaded one K block ahead by hand.
    a_s_next = tl.load(as_rows, mask=m_valid, other=0.0)
    ref_next = ref_first
    for kb in range(0, KB):
        a, bdec = _load_block(a_desc, bq_desc, a_rows, q_rows, grp, pid_m, pid_n, kb, MAX_M, N, BM, BN, TMA)
        a_s = a_s_next
        a_s_next = tl.load(as_rows + tl.minimum(kb + 1, KB - 1), mask=m_valid, other=0.0)
        ref_raw = ref_next
        ref_next = tl.load(ref_rows + tl.minimum(kb + 1, KB - 1) * N, mask=n_valid, other=0.0)
        # ref < 0 marks a row whose scales did not fold (its bq codes are unscaled).
        bad_rows = bad_rows | (ref_raw < 0.0).to(tl.int32)
        ref = tl.maximum(ref_raw, 0.0)
        if PLAIN:
            acc = tl.dot(a, tl.trans(bdec), acc)
        else:
            acc += tl.dot(a, tl.trans(bdec)) * (a_s[:, None] * ref[None, :])
    if tl.max(bad_rows, axis=0) != 0:
        acc = _correct_tile(acc, _a_rows(a_ptr, grp64, offs_m, MAX_M, K), as_rows, _b_rows(b_ptr, grp64, offs_n, N, K),
                            _bs_rows(bs_ptr, grp64, offs_n, N, K), m_valid, n_valid, 0, KB, K // 2, BN,
                            False, True, USE_ASM and CORR_ASM)
    return acc


@triton.jit
def _row_scaled_tile(a_ptr, as_ptr, bq_ptr, ref_ptr, a_desc, bq_desc, grp, grp64, pid_m, pid_n, offs_m, offs_n,
                     m_valid, tile_ref, MAX_M, N, K, BM: tl.constexpr, BN: tl.constexpr, TMA: tl.constexpr):
    """The FP8 main loop of a tile whose weight rows were decoded against one multiplier per
    row (decode_b_kernel with ROW_REF: ref[g, kb, n] = that row's R for every block that
    folded): -> (acc without R, any block of the tile did not fold).

    The promotion then needs only the tokens' a_scale, times tile_ref (a power of two, the
    tile's largest R, which keeps the sums at the magnitudes a per-block multiplier would);
    the caller applies R / tile_ref per column once, after the loop. Against _folded_tile:
    no [BN] multiplier and its prefetch in the loop (a 128-wide vector is 32 registers a
    thread in the MMA layout), one FFMA per element instead of an FMUL and an FFMA (Triton
    3.6: 155 SASS instructions per step against 228, 151 registers against 236). A block that
    did not fold holds raw codes in bq, which this loop would add unscaled: the flag (from
    ref, loaded as a compact vector) sends the tile to the exact loop instead."""
    KB = K // 128
    a_rows, q_rows = _block_rows(a_ptr, bq_ptr, grp64, offs_m, offs_n, MAX_M, N, K)
    as_rows = _as_rows(as_ptr, grp64, offs_m, MAX_M, K)
    offs_c = pid_n * BN + tl.arange(0, BN)
    ref_c = ref_ptr + grp64 * KB * N + offs_c
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    bad = tl.zeros((BN,), dtype=tl.int32)
    # a_scale feeds the promotion, not the dot: loaded one block ahead by hand.
    a_s_next = tl.load(as_rows, mask=m_valid, other=0.0) * tile_ref
    for kb in range(0, KB):
        a, bdec = _load_block(a_desc, bq_desc, a_rows, q_rows, grp, pid_m, pid_n, kb, MAX_M, N, BM, BN, TMA)
        a_s = a_s_next
        a_s_next = tl.load(as_rows + tl.minimum(kb + 1, KB - 1), mask=m_valid, other=0.0) * tile_ref
        bad = bad | (tl.load(ref_c + kb * N, mask=offs_c < N, other=0.0) < 0.0).to(tl.int32)
        acc += tl.dot(a, tl.trans(bdec)) * a_s[:, None]
    return acc, tl.max(bad, axis=0) != 0


@triton.jit
def _k_quarters(x, R: tl.constexpr):
    """[R, 128] -> its four [R, 32] column blocks (k 0-31, 32-63, 64-95, 96-127)."""
    y = tl.reshape(tl.permute(tl.reshape(x, [R, 4, 32]), (0, 2, 1)), [R, 32, 2, 2])  # [r, c, p, q]: k = 32(2p+q) + c
    even, odd = tl.split(y)  # q = 0: blocks 0 and 2; q = 1: blocks 1 and 3
    x0, x2 = tl.split(even)
    x1, x3 = tl.split(odd)
    return x0, x1, x2, x3


@triton.jit
def _quarters_of_4(s, R: tl.constexpr):
    """[R, 4] -> its four [R] columns."""
    even, odd = tl.split(tl.reshape(s, [R, 2, 2]))
    s0, s2 = tl.split(even)
    s1, s3 = tl.split(odd)
    return s0, s1, s2, s3


@triton.jit
def _exact_tile(a_ptr, as_ptr, bs_ptr, bq_ptr, ref_rows, ref_first, a_desc, bq_desc,
                grp, grp64, pid_m, pid_n, offs_m, offs_n, m_valid, n_valid, MAX_M, N, K,
                BM: tl.constexpr, BN: tl.constexpr, TMA: tl.constexpr):
    """[BM, BN] fp32 tile (32-wide weight tiles) exact for any finite scales, from the decoded
    B: per 128-K block the
    same loads as the FP8 main loop (TMA where it runs, so Triton pipelines them), then four
    K=32 dots on fp16 operands (e4m3 values and their products are exact in fp16, and the fp16
    MMA accumulates in fp32), each scaled in fp32 by a_scale x its weight rows' multiplier:
    ref for a row whose block folded (bq holds E2M1 * 2^d), the row's own per-32 scale for a
    row whose block did not (bq holds the raw codes)."""
    KB = K // 128
    a_rows, q_rows = _block_rows(a_ptr, bq_ptr, grp64, offs_m, offs_n, MAX_M, N, K)
    as_rows = _as_rows(as_ptr, grp64, offs_m, MAX_M, K)
    bs_rows = _bs_rows(bs_ptr, grp64, offs_n, N, K)
    g4 = tl.arange(0, 4)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # The scales feed the promotion, not the dots: loaded one block ahead by hand.
    a_s_next = tl.load(as_rows, mask=m_valid, other=0.0)
    ref_next = ref_first
    s_next = tl.load(bs_rows[:, None] + g4[None, :], mask=n_valid[:, None], other=0.0)
    for kb in range(0, KB):
        a, bdec = _load_block(a_desc, bq_desc, a_rows, q_rows, grp, pid_m, pid_n, kb, MAX_M, N, BM, BN, TMA)
        a_s = a_s_next
        ref_raw = ref_next
        s4 = s_next
        nxt = tl.minimum(kb + 1, KB - 1)
        a_s_next = tl.load(as_rows + nxt, mask=m_valid, other=0.0)
        ref_next = tl.load(ref_rows + nxt * N, mask=n_valid, other=0.0)
        s_next = tl.load(bs_rows[:, None] + (nxt * 4 + g4[None, :]), mask=n_valid[:, None], other=0.0)
        mult = tl.where(ref_raw[:, None] >= 0.0, ref_raw[:, None], s4)
        m0, m1, m2, m3 = _quarters_of_4(mult, BN)
        a0, a1, a2, a3 = _k_quarters(a.to(tl.float16), BM)
        b0, b1, b2, b3 = _k_quarters(bdec.to(tl.float16), BN)
        acc += tl.dot(a0, tl.trans(b0)) * (a_s[:, None] * m0[None, :])
        acc += tl.dot(a1, tl.trans(b1)) * (a_s[:, None] * m1[None, :])
        acc += tl.dot(a2, tl.trans(b2)) * (a_s[:, None] * m2[None, :])
        acc += tl.dot(a3, tl.trans(b3)) * (a_s[:, None] * m3[None, :])
    return acc


@triton.jit
def _exact_tile_raw(a_ptr, as_ptr, b_ptr, bs_ptr, grp64, offs_m, offs_n, m_valid, n_valid, MAX_M, N, K,
                    BM: tl.constexpr, BN: tl.constexpr, USE_ASM: tl.constexpr):
    """_exact_tile for 128-wide weight tiles, from the raw codes (decoded here) and the exact
    scales: one K=32 dot per 32-group on fp16 operands, scaled in fp32 by a_scale x b_scale.
    The scales feed the promotion, not the dot, so they are loaded one step ahead by hand.
    (H200, run 18, max_m 512 with no scale folding: 156 us, against 295 for _exact_tile's
    K quarters, which spill at this width, and 207 for the main loop + correction loop.)"""
    a_rows = _a_rows(a_ptr, grp64, offs_m, MAX_M, K)
    as_rows = _as_rows(as_ptr, grp64, offs_m, MAX_M, K)
    b_rows = _b_rows(b_ptr, grp64, offs_n, N, K)
    bs_rows = _bs_rows(bs_ptr, grp64, offs_n, N, K)
    KS = K // 32
    k32 = tl.arange(0, 32)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    a_s_next = tl.load(as_rows, mask=m_valid, other=0.0)
    s_next = tl.load(bs_rows, mask=n_valid, other=0.0)
    for st in range(0, KS):
        a = tl.load(a_rows[:, None] + (st * 32 + k32[None, :]), mask=m_valid[:, None], other=0.0)
        braw = _decode_block(b_rows, n_valid, K // 2, st * 16, 0, BN, 1, USE_ASM)
        a_s = a_s_next
        s_j = s_next
        nxt = tl.minimum(st + 1, KS - 1)
        a_s_next = tl.load(as_rows + nxt // 4, mask=m_valid, other=0.0)
        s_next = tl.load(bs_rows + nxt, mask=n_valid, other=0.0)
        acc += tl.dot(a.to(tl.float16), tl.trans(braw.to(tl.float16))) * (a_s[:, None] * s_j[None, :])
    return acc


@triton.jit
def _tile_of_program(mm_ptr, MAX_M, N, BM: tl.constexpr, BN: tl.constexpr, ORDER: tl.constexpr,
                     G_P2: tl.constexpr):
    """(group, token tile, weight tile) of this program of grouped_tile_gemm_kernel's grid
    (cdiv(MAX_M, BM) * cdiv(N, BN), g). ORDER 0: token tiles fastest within a weight tile of
    a group. ORDER 1: the tiles with rows (before clamp(masked_m[g], 0, MAX_M)) of every group
    come before every tile of zeros in launch order (blockIdx x, then y), each part group by
    group, token tiles fastest; masked_m is read here (all g values, g <= G_P2), so the order
    follows the data without a host read. A bijection either way: every tile is taken by
    exactly one program. Run 48: ORDER 1 pays where few of the tiles have rows (their long K
    loops no longer start behind thousands of zero tiles); where most have rows, the grid's
    order, which spreads the zero stores among them, is faster."""
    pid = tl.program_id(0)
    grp = tl.program_id(1)
    num_m = tl.cdiv(MAX_M, BM)
    pid_m = pid % num_m
    pid_n = pid // num_m
    if ORDER == 1:
        num_n = tl.cdiv(N, BN)
        gi = tl.arange(0, G_P2)
        in_g = gi < tl.num_programs(1)
        mmv = tl.load(mm_ptr + gi, mask=in_g, other=0)
        used_m = tl.where(in_g, tl.cdiv(tl.minimum(tl.maximum(mmv, 0), MAX_M), BM), 0)
        free_m = tl.where(in_g, num_m - used_m, 0)
        lin = grp * (num_m * num_n) + pid
        split = tl.sum(used_m, axis=0) * num_n
        rows_part = lin < split
        idx = tl.where(rows_part, lin, lin - split)
        part_m = tl.where(rows_part, used_m, free_m)  # token tiles per group in this part
        counts = part_m * num_n
        grp = tl.sum((tl.cumsum(counts, axis=0) <= idx).to(tl.int32), axis=0)
        local = idx - tl.sum(tl.where(gi < grp, counts, 0), axis=0)
        mine = gi == grp
        my_part_m = tl.sum(tl.where(mine, part_m, 0), axis=0)
        pid_m = local % my_part_m + tl.where(rows_part, 0, tl.sum(tl.where(mine, used_m, 0), axis=0))
        pid_n = local // my_part_m
    return grp, pid_m, pid_n


@triton.jit
def grouped_tile_gemm_kernel(
    a_ptr, as_ptr, b_ptr, bs_ptr, mm_ptr, c_ptr, bq_ptr, ref_ptr, a_desc, bq_desc,
    MAX_M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, TMA: tl.constexpr, MANUAL_RNE: tl.constexpr,
    USE_ASM: tl.constexpr, CORR_ASM: tl.constexpr, PLAIN: tl.constexpr = False,
    PDL: tl.constexpr = False, ROW_REF: tl.constexpr = False, ORDER: tl.constexpr = 0,
    G_P2: tl.constexpr = 1,
):
    """Pass 2 (the heuristic's choice from max_m 33): grid = (cdiv(MAX_M, BM) * cdiv(N, BN), g),
    one output tile per program, token tiles fastest, so the programs that share a weight tile
    run side by side and each decoded B tile comes from DRAM once.

    B comes pre-decoded (bq, ref from decode_b_kernel). Tiles at or past
    clamp(masked_m[g], 0, MAX_M) store zeros and skip the GEMM; the others store rows < mm and
    zeros below, so c may arrive uninitialised and every element is written exactly once.
    The loads need no masks: token rows past MAX_M and weight rows past N are clamped to valid
    ones (their results are never stored; each output row depends only on its own A row).
    TMA (GPU, sm_90+): A and bq come through host-made tensor descriptors over the 2-D views
    [g * MAX_M, K] and [g * N, K] (rows past a group's end belong to the next group or are
    zero-filled, and are never stored). PLAIN: timing experiment only (no scales; wrong).
    ROW_REF (64- or 128-wide tiles, with decode_b_kernel's ROW_REF): _row_scaled_tile's lean
    loop, the exact raw-code loop for tiles with a block that did not fold (no correction
    loop). The heuristic takes it for the 128-wide tiles (run 42); on 64-wide ones it was
    within noise (run 43).
    Scales: see the module docstring (the first-block guess and its exact loops are below).
    PDL (launched as a programmatic dependent of decode_b_kernel): zero tiles are stored
    while the decode pass still runs; GEMM tiles wait for its writes (gdc_wait) first.
    ORDER (G_P2: a power of two >= g): which tile each program takes, see _tile_of_program.
    """
    grp, pid_m, pid_n = _tile_of_program(mm_ptr, MAX_M, N, BM, BN, ORDER, G_P2)
    grp64 = grp.to(tl.int64)
    mm = tl.load(mm_ptr + grp)
    mm = tl.minimum(tl.maximum(mm, 0), MAX_M)
    KB = K // 128
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    m_valid = offs_m < mm
    n_valid = offs_n < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if pid_m * BM < mm:
        if PDL:
            gdc_wait()  # bq and ref come from the decode pass
        ref_rows = ref_ptr + grp64 * KB * N + offs_n
        ref_first = tl.load(ref_rows, mask=n_valid, other=0.0)
        if ROW_REF:
            # 64- or 128-wide tiles on a row-referenced decode (the config allows no other):
            # the lean loop where every block folded; otherwise (found from the first block
            # before it, or by its flag after) the exact raw-code loop, as for a fallback tile.
            tile_ref = tl.max(ref_first, axis=0)
            exact = (tl.min(ref_first, axis=0) < 0.0) | (tile_ref == 0.0)
            if not exact:
                acc, exact = _row_scaled_tile(a_ptr, as_ptr, bq_ptr, ref_ptr, a_desc, bq_desc, grp, grp64, pid_m,
                                              pid_n, offs_m, offs_n, m_valid, tile_ref, MAX_M, N, K, BM, BN, TMA)
                # R per column from the last block's ref (the same R in a tile whose blocks
                # all folded; the first block's, loaded above, would be kept across the loop).
                acc = acc * (tl.load(ref_rows + (KB - 1) * N, mask=n_valid, other=0.0) / tile_ref)[None, :]
            if exact:
                acc = _exact_tile_raw(a_ptr, as_ptr, b_ptr, bs_ptr, grp64, offs_m, offs_n, m_valid, n_valid,
                                      MAX_M, N, K, BM, BN, USE_ASM and CORR_ASM)
        elif BN == 64:
            # 64-wide tiles keep the fourth session's flow (main loop, then the correction
            # loop): with the fallback guess below, three workloads on them ran 3.6-9.4 us
            # slower (harness run J against run H): compiled in, the exact loops take the
            # 64x64 kernel from 160 to 191 registers, 3 to 2 CTAs per SM (run 21).
            acc = _folded_tile(a_ptr, as_ptr, b_ptr, bs_ptr, bq_ptr, ref_rows, ref_first, a_desc, bq_desc,
                               grp, grp64, pid_m, pid_n, offs_m, offs_n, m_valid, n_valid, MAX_M, N, K,
                               BM, BN, TMA, USE_ASM, CORR_ASM, PLAIN)
        # Otherwise a tile none of whose weight rows folds its first block is taken for a
        # fallback tile (scales that are not powers of two, or widely spread, come whole
        # tensors at a time): it skips the FP8 main loop, whose every block the correction
        # loop would redo, and runs an exact K=32 loop over all of K instead. Exact either
        # way; only the speed depends on the guess.
        elif tl.max((n_valid & (ref_first >= 0.0)).to(tl.int32), axis=0) != 0:
            acc = _folded_tile(a_ptr, as_ptr, b_ptr, bs_ptr, bq_ptr, ref_rows, ref_first, a_desc, bq_desc,
                               grp, grp64, pid_m, pid_n, offs_m, offs_n, m_valid, n_valid, MAX_M, N, K,
                               BM, BN, TMA, USE_ASM, CORR_ASM, PLAIN)
        elif BN > 32:
            acc = _exact_tile_raw(a_ptr, as_ptr, b_ptr, bs_ptr, grp64, offs_m, offs_n, m_valid, n_valid,
                                  MAX_M, N, K, BM, BN, USE_ASM and CORR_ASM)
        else:
            acc = _exact_tile(a_ptr, as_ptr, bs_ptr, bq_ptr, ref_rows, ref_first, a_desc, bq_desc,
                              grp, grp64, pid_m, pid_n, offs_m, offs_n, m_valid, n_valid, MAX_M, N, K,
                              BM, BN, TMA)
        acc = tl.where(m_valid[:, None], acc, 0.0)
    out = _to_bf16(acc, MANUAL_RNE)
    c_ptrs = c_ptr + grp64 * MAX_M * N + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, out, mask=(offs_m < MAX_M)[:, None] & n_valid[None, :])


@triton.jit
def _decode_words(w, d, USE_ASM: tl.constexpr):
    """int32 words of 8 E2M1 codes (code i in bits 4i..4i+3, i.e. k order) -> (lo, hi) int32
    words holding the e4m3 bytes of codes 0-3 and 4-7 times 2**(d >> 3), in k order.

    d: exponent-field addends broadcastable to w (multiples of 8 in [-40, 48]). USE_ASM: the
    prmt table lookup of _decode_block, one word at a time (no byte shuffles afterwards:
    lo and hi are already in k order); otherwise plain integer ops per code.
    """
    if USE_ASM:
        d = tl.zeros_like(w) + d
        lo, hi = tl.inline_asm_elementwise(
            _PRMT_WORD_ASM, "=r,=r,r,r,r", [w, 0x3C383000 + d * 0x01010100, 0x4C484440 + d * 0x01010101],
            dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    else:
        lo = tl.zeros_like(w)
        hi = tl.zeros_like(w)
        for i in tl.static_range(4):
            lo |= (_e2m1_to_e4m3((w >> (4 * i)) & 15, d) & 0xFF) << (8 * i)
            hi |= (_e2m1_to_e4m3((w >> (4 * i + 16)) & 15, d) & 0xFF) << (8 * i)
    return lo, hi


@triton.jit
def decode_b_kernel(bw_ptr, bs_ptr, mm_ptr, qw_ptr, ref_ptr, MAX_M, N, K, BR: tl.constexpr,
                    USE_ASM: tl.constexpr, PDL: tl.constexpr = False, KPER: tl.constexpr = 1,
                    ROW_REF: tl.constexpr = False):
    """Pass 1 of the two-pass path: grid (cdiv(N, BR), K / (128 KPER), g), one [BR rows,
    KPER x 128 K] block per program and no loop, so the whole grid streams B at once.

    bw: b_fp4 [g, N, K/2] bytes, read as int32 words [g, N, K/8] (the pointer is cast here, so
    the host passes the tensor as it is); qw: the decoded B [g, N, K] e4m3 bytes in k order,
    written as int32 words, with the block's per-32 scales folded in as in the fused loop;
    ref[g, kb, n]: the block's fp32 multiplier, or -1 where the scales did not fold (those
    codes are left unscaled and the GEMM's correction loop handles the row exactly).
    Groups with clamp(masked_m[g], 0, MAX_M) = 0 are skipped: pass 2 reads no B of a group
    without rows (mm_ptr is masked_m, read here on the device).
    PDL: let pass 2 (launched as a programmatic dependent) start once every program here has
    started; its programs then take SM slots as these retire, store their zero tiles at once
    and wait (gdc_wait) for this grid's writes only where they need B.
    """
    if PDL:
        gdc_launch_dependents()
    grp = tl.program_id(2)
    if tl.minimum(tl.load(mm_ptr + grp), MAX_M) > 0:
        _decode_b_block(bw_ptr.to(tl.pointer_type(tl.int32), bitcast=True), bs_ptr,
                        qw_ptr.to(tl.pointer_type(tl.int32), bitcast=True), ref_ptr, grp.to(tl.int64), N, K,
                        BR, USE_ASM, KPER, ROW_REF)


@triton.jit
def _decode_b_block(bw_ptr, bs_ptr, qw_ptr, ref_ptr, grp64, N, K, BR: tl.constexpr, USE_ASM: tl.constexpr,
                    KPER: tl.constexpr = 1, ROW_REF: tl.constexpr = False):
    """decode_b_kernel's block (program ids 0 and 1: weight-row block and KPER 128-K blocks).
    The BR x KPER (row, block) pairs are handled as BR * KPER rows of one 128-K block each,
    a row's KPER blocks adjacent (64 * KPER contiguous bytes), so every load of the program
    is issued before the first decode."""
    KB = K // 128
    KS = K // 32
    p = tl.arange(0, BR * KPER)
    offs_n = tl.program_id(0) * BR + p // KPER
    kb = tl.program_id(1) * KPER + p % KPER
    n_valid = offs_n < N
    rows = offs_n.to(tl.int64)
    bs_rows = bs_ptr + grp64 * N * KS + rows * KS
    s = tl.load(bs_rows[:, None] + (kb * 4)[:, None] + tl.arange(0, 4)[None, :], mask=n_valid[:, None], other=1.0)
    if ROW_REF:
        s0 = tl.load(bs_rows[:, None] + tl.arange(0, 4)[None, :], mask=n_valid[:, None], other=1.0)
        row_ok, dexp, ref = _fold_scales_row(s, _row_ref_bits(s0))
    else:
        row_ok, dexp, ref = _fold_scales_2d(s)
        dexp = tl.where(row_ok[:, None], dexp, 0)  # rows that do not fold keep their raw codes
    # 16 words of 8 codes per (row, block), loaded as one [BR * KPER, 16] tile (a [BR, 4, 4]
    # load used half of every 32-byte sector, measured with ncu); word j has the scale of
    # group j // 4.
    w_ptrs = bw_ptr + (grp64 * N * (K // 8) + rows * (K // 8) + kb * 16)[:, None] + tl.arange(0, 16)[None, :]
    w = tl.load(w_ptrs, mask=n_valid[:, None], other=0)
    d = tl.reshape(tl.broadcast_to(dexp[:, :, None], [BR * KPER, 4, 4]), [BR * KPER, 16])
    lo, hi = _decode_words(w, d, USE_ASM)
    out = tl.reshape(tl.join(lo, hi), [BR * KPER, 32])
    q_ptrs = qw_ptr + (grp64 * N * (K // 4) + rows * (K // 4) + kb * 32)[:, None] + tl.arange(0, 32)[None, :]
    tl.store(q_ptrs, out, mask=n_valid[:, None])
    tl.store(ref_ptr + (grp64 * KB + kb) * N + offs_n, tl.where(row_ok, ref, -1.0), mask=n_valid)
