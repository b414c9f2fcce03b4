"""CPU model of the CUDA grouped GEMM's data placement (cuda_fp4_wgmma/grouped_wgmma.cu and its
headers).

The kernel copies each stage's packed E2M1 into a raw ring laid out for its copies and decode
reads, multiplies in a permuted K order inside each 128-K stage, decodes with permutes, folds each
block's scales into fp16 in one of three modes (whole: B' carries the scales, promote by a_scale
only; relative: B' carries 2^(e_j - max e), promote per column by a_scale * ref; plain: B' is the
codes, promote each 32-K sub-block by its actual scale) and writes B into 128-byte-swizzled shared
memory. This ports those pieces bit for bit (tables and constants read from the .cu file) and
checks: the decode on every byte, each mode's fold against the definition's dequantisation, the
kernel's fold (the whole fold's short path, else the other modes) against the modes' definition
on every edge of the scales' bits, that
the raw ring's copies and decode reads meet at the same chunks without bank conflicts, that the
producer's stores land where the MMA's descriptor reads the logical K the consumers' A fragments
hold, and whole stages of one warp, in each promotion path, against the definition's sum; and, for
the mma.sync tokens-as-N form, one warp's block from its loads through the fragments and both
promotions against the definition's sum.
"""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from ptx_model import M32, f2h, h2f, prmt, source_has, sw128_offset

CU = (Path(__file__).resolve().parents[1] / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
      / "cuda_fp4_wgmma/grouped_wgmma.cu")
SRC = "\n".join(p.read_text() for p in [CU, *sorted(CU.parent.glob("*.cuh"))])  # the kernel and its headers
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def const(name: str) -> int:
    """A namespace constant's value: `constexpr int|uint32_t [A = .., ]NAME = expr[, ..];`, expr
    integer literals (u suffix allowed) joined by + - * and parentheses."""
    m = re.search(rf"constexpr (?:uint32_t|int) (?:[^;]*?, )?{name} = ([^,;]+)[,;]", SRC)
    expr = re.sub(r"\b(0x[0-9a-f]+|\d+)u\b", r"\1", m.group(1))
    assert re.fullmatch(r"[0-9a-fx +\-*()]+", expr), expr
    return int(eval(expr, {"__builtins__": {}}))


LO, HI, MAX_SPREAD = const("E2M1_F16_HI_0_3"), const("E2M1_F16_HI_4_7"), const("MAX_SPREAD")
WHOLE_E_MIN, WHOLE_E_MAX = const("WHOLE_E_MIN"), const("WHOLE_E_MAX")
MODE_PER_COLUMN, MODE_PER_SUBBLOCK = const("MODE_PER_COLUMN"), const("MODE_PER_SUBBLOCK")
WHOLE, RELATIVE, PLAIN = 0, MODE_PER_COLUMN, MODE_PER_COLUMN | MODE_PER_SUBBLOCK  # a row's fold modes
assert (WHOLE_E_MIN, WHOLE_E_MAX, MAX_SPREAD) == (127 - 23, 127 + 13, 23)  # the edges scale_sets and the stages test
BNS = sorted({int(x) for x in re.findall(r"launch<grouped_wgmma_kernel<(\d+)>, ", SRC)})  # the producer form's widths
assert BNS == [64, 128]
BN = 128  # the width the one-stage tests model


# out[b] = prmt(mag_lo or mag_hi, 0u, SPREAD) | (prmt(w4, w, SIGNS) & 0x80008000u), read from the .cu
OUTS = [(m.group(2), int(m.group(3), 16), int(m.group(4), 16)) for m in re.finditer(
    r"out\[(\d)\] = prmt\(mag_(lo|hi), 0u, (0x[0-9a-f]+)u\) \| \(prmt\(w4, w, (0x[0-9a-f]+)u\) & 0x80008000u\);", SRC)]
assert len(OUTS) == 4 and "(w >> 16) & 0x7777u" in SRC and "const uint32_t w4 = w << 4;" in SRC


def e2m1x8_to_f16x2x4(w: int):
    mags = {"lo": prmt(LO, HI, w & 0x7777), "hi": prmt(LO, HI, (w >> 16) & 0x7777)}
    w4 = (w << 4) & M32
    return [prmt(mags[half], 0, spread) | (prmt(w4, w, signs) & 0x80008000) for half, spread, signs in OUTS]


def f16_pow2(d: int) -> int:
    """fp16 bits of 2^d for -24 < d < 16: normal from 2^-14, subnormal below."""
    return ((d + 15) << 10) if d >= -14 else (1 << max(d + 24, 0))


def fold_modes(bits):
    """The three fold modes as defined (module docstring): (mode, f16x2 decode factor per
    sub-block, fp32 bits of the promote factor per sub-block) of a row's four scale bits. The
    kernel's fold_row (ported below) must give every row exactly this."""
    es = [(b >> 23) & 0xFF for b in bits]
    pow2 = all((b & 0x807FFFFF) == 0 and 1 <= e <= 252 for b, e in zip(bits, es))  # positive, normal
    whole = pow2 and min(es) >= WHOLE_E_MIN and max(es) <= WHOLE_E_MAX
    relative = pow2 and max(es) - min(es) <= MAX_SPREAD
    mode = WHOLE if whole else RELATIVE if relative else PLAIN
    e_ref = 127 if whole else max(es)
    factor2, promote_bits = [], []
    for b, e in zip(bits, es):
        h = f16_pow2(e - e_ref)
        factor2.append(h | (h << 16) if whole or relative else 0x3C003C00)
        promote_bits.append(0x3F800000 if whole else max(es) << 23 if relative else b)
    return mode, factor2, promote_bits


def f32(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


# The kernel's fold, ported: rows whose four scales all fold whole (quantized weights) take a short
# path (one OR, a min and a max of the bits, the scales themselves converted to fp16); every other
# row takes fold_row_modes (relative or plain). whole_factor2 is the one-scale test of the
# register-weights and prepared forms. The lines the port follows:
FOLD_SRC = [
    "return (ored & 0x807fffffu) == 0u && lo >= (static_cast<uint32_t>(WHOLE_E_MIN) << 23) &&",
    "hi <= (static_cast<uint32_t>(WHOLE_E_MAX) << 23);",
    "return whole_bits(sc.x | sc.y | sc.z | sc.w, min(min(sc.x, sc.y), min(sc.z, sc.w)),",
    "ok = whole_bits(bits, bits, bits);",
    "if (!folds_whole(sc)) return fold_row_modes(sc);",
    "f.factor2[j] = f16x2_dup(__uint_as_float(bits[j]));",
    'asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(x));',
    "return f16x2_dup(ok ? __uint_as_float(bits) : 1.0f);",
    "const bool relative = pow2 && e_max - e_min <= MAX_SPREAD;",
    "f.mode = relative ? MODE_PER_COLUMN : MODE_PER_COLUMN | MODE_PER_SUBBLOCK;",
    "const uint32_t h = f16_pow2(static_cast<int>((bits[j] >> 23) & 0xffu) - e_max);",
    "f.factor2[j] = relative ? (h | (h << 16)) : 0x3c003c00u;",
    "f.promote_bits[j] = relative ? static_cast<uint32_t>(e_max) << 23 : bits[j];",
]
source_has(SRC, *FOLD_SRC)


def f16x2_dup(bits: int) -> int:
    """cvt.rn.f16x2.f32 of one fp32 value (bits) into both halves (numpy rounds to nearest even)."""
    h = f2h(f32(bits))
    return h | (h << 16)


def whole_bits(ored: int, lo: int, hi: int) -> bool:
    return (ored & 0x807FFFFF) == 0 and lo >= WHOLE_E_MIN << 23 and hi <= WHOLE_E_MAX << 23


def folds_whole(bits) -> bool:
    return whole_bits(bits[0] | bits[1] | bits[2] | bits[3], min(bits), max(bits))


def whole_factor2(bits: int):
    ok = whole_bits(bits, bits, bits)
    return ok, f16x2_dup(bits if ok else 0x3F800000)


def fold_row_modes(bits):
    """A row whose scales do not all fold whole: relative or plain."""
    es = [(b >> 23) & 0xFF for b in bits]
    pow2 = all((b & 0x807FFFFF) == 0 and 1 <= e <= 252 for b, e in zip(bits, es))
    relative = pow2 and max(es) - min(es) <= MAX_SPREAD
    factor2 = [f16_pow2(e - max(es)) * 0x10001 if relative else 0x3C003C00 for e in es]
    promote_bits = [max(es) << 23 if relative else b for b in bits]
    return RELATIVE if relative else PLAIN, factor2, promote_bits


def fold_row(bits):
    """(mode, f16x2 decode factor per sub-block, fp32 bits of the promote factor per sub-block) as
    the kernel's fold_row computes them from a row's four scale bits (the thread that folds a row
    hands sub-block j's decode factor to the warp that decodes it and writes the promote factors
    for the consumers)."""
    if folds_whole(bits):
        return WHOLE, [f16x2_dup(b) for b in bits], [0x3F800000] * 4
    return fold_row_modes(bits)


def p2(e: int) -> int:  # fp32 bits of 2^e
    return int(np.array([2.0 ** e], dtype=np.float32).view(np.uint32)[0])


def mul_f16(a: int, b: int) -> int:  # mul.rn.f16 on one half
    return f2h(float(np.float16(h2f(a)) * np.float16(h2f(b))))


def mul_f16x2(a: int, b: int) -> int:  # mul.rn.f16x2
    return mul_f16(a & 0xFFFF, b & 0xFFFF) | (mul_f16(a >> 16, b >> 16) << 16)


# ---- the K order: producer stores, consumer fragments ----
def producer_address(row: int, s: int, t: int, b: int, bn: int = BN) -> int:
    """Byte offset (in the stage of a bn-wide tile) of the f16x2 the producer stores for row,
    sub-block s, word t, byte b of its 16-byte chunk: the v4 store b, element t (atoms of bn rows x
    128 bytes)."""
    chunk = (4 * (s & 1) + b) ^ (row & 7)
    return (s >> 1) * bn * 128 + row * 128 + (chunk << 4) + 4 * t


def consumer_logical_k(s: int, t: int, h: int, q: int) -> int:
    """Logical stage K (16 j + fragment column) the consumer's thread t puts actual k = 32 s + 8 t
    + 4 h + q at: step j = 2 s + h, columns 2 t + q (q < 2) or 8 + 2 t + q - 2."""
    col = 2 * t + q if q < 2 else 8 + 2 * t + q - 2
    return 16 * (2 * s + h) + col


def consumer_a_by_logical_k(a):
    """A [16 rows, 128 K] of one warp as its fragments hold it, by logical stage K: thread
    (g, t) puts rows g and g + 8, actual k = 32 s + 8 t + 4 h + q, at consumer_logical_k."""
    a_logical = np.zeros((16, 128))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for row in (g, g + 8):
            for s in range(4):
                for h in range(2):
                    for q in range(4):
                        a_logical[row, consumer_logical_k(s, t, h, q)] = a[row, 32 * s + 8 * t + 4 * h + q]
    return a_logical


def test_decode_every_byte():
    gen = np.random.default_rng(0)
    for byte in range(256):
        for pos in range(4):
            w = int(gen.integers(0, 2 ** 32)) & ~(0xFF << (8 * pos)) | (byte << (8 * pos))
            out = e2m1x8_to_f16x2x4(w)[pos]
            assert (h2f(out & 0xFFFF), h2f(out >> 16)) == (E2M1[byte & 15], E2M1[byte >> 4]), (byte, pos)
            assert np.signbit(h2f(out & 0xFFFF)) == bool(byte & 8) and np.signbit(h2f(out >> 16)) == bool(byte & 0x80)


def scale_sets():
    bits = lambda x: int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    yield [p2(0)] * 4, WHOLE
    yield [p2(-6)] * 4, WHOLE
    yield [p2(-3), p2(-1), p2(-20), p2(-2)], WHOLE
    yield [p2(-23)] * 4, WHOLE                           # the exponent edges
    yield [p2(13)] * 4, WHOLE
    yield [p2(-23), p2(13), p2(0), p2(-23)], WHOLE        # spread 36: whole does not need the spread
    yield [p2(-24), p2(-1), p2(-2), p2(-3)], RELATIVE     # just past the edges
    yield [p2(14), p2(0), p2(13), p2(5)], RELATIVE
    yield [p2(-30)] * 4, RELATIVE
    yield [p2(20), p2(-3), p2(0), p2(5)], RELATIVE        # spread 23
    yield [p2(-126), p2(-126), p2(-110), p2(-126)], RELATIVE
    yield [p2(125), p2(120), p2(125), p2(110)], RELATIVE
    yield [p2(20), p2(-4), p2(0), p2(5)], PLAIN           # spread 24
    yield [p2(126)] * 4, PLAIN                            # exponent field 253
    yield [p2(126), 0, 0, 0], PLAIN                       # 2^126 and zeros
    yield [p2(0), bits(-1.0), p2(0), p2(0)], PLAIN
    yield [p2(0), bits(1.5), p2(0), p2(0)], PLAIN
    yield [p2(0), 1, p2(0), p2(0)], PLAIN                 # subnormal
    yield [p2(0), bits(float("inf")), p2(0), p2(0)], PLAIN
    yield [p2(0), bits(float("nan")), p2(0), p2(0)], PLAIN


@pytest.mark.parametrize("case", range(len(list(scale_sets()))))
def test_fold_is_the_dequantisation(case):
    bits, want_mode = list(scale_sets())[case]
    mode, factor2, promote_bits = fold_row(bits)
    assert mode == want_mode
    for s in range(4):
        fac = factor2[s]
        assert fac >> 16 == fac & 0xFFFF  # both halves of the f16x2 multiply
        if mode == PLAIN:  # plain codes; the consumer multiplies each sub-block by the actual scale
            assert fac == 0x3C003C00 and promote_bits[s] == bits[s]
            continue
        # code * factor (fp16, exact for every code) * promote factor == code * scale, exactly
        for code in range(16):
            v = mul_f16(f2h(E2M1[code]), fac)
            assert h2f(v) * f32(promote_bits[s]) == E2M1[code] * f32(bits[s]), (case, s, code)
        if mode == WHOLE:  # B' carries the scale itself; nothing left to promote by
            assert h2f(fac) == f32(bits[s]) and promote_bits[s] == 0x3F800000
    if mode != PLAIN:  # one promote factor for the row: the per-column path reads sub-block 0's
        assert len(set(promote_bits)) == 1


def edge_scale_bits():
    """fp32 bits around every edge the folds test: each exponent field with sign and mantissa
    bits clear or set, zero, subnormals, inf and NaN."""
    for e in range(256):
        for extra in (0, 1, 0x400000, 0x7FFFFF, 0x80000000, 0x80000001):
            yield (e << 23) | extra


def test_kernel_fold_is_the_modes_definition():
    """The kernel's fold (the whole path, else fold_row_modes) gives every row the mode, decode
    factors and promote factors the modes' definition gives it: on the listed scale sets, on every
    edge bit pattern in each position beside whole scales, and on random rows mixing them."""
    rows = [bits for bits, _ in scale_sets()]
    edges = list(edge_scale_bits())
    for b in edges:
        for pos in range(4):
            row = [p2(-3), p2(0), p2(-20), p2(13)]
            row[pos] = b
            rows.append(row)
    gen = np.random.default_rng(1)
    pool = edges + [p2(e) for e in range(-23, 14)] * 60 + [p2(e) for e in range(-30, 20)] * 4
    rows += [[pool[i] for i in gen.integers(0, len(pool), 4)] for _ in range(20000)]
    whole_rows = 0
    for row in rows:
        assert fold_row(row) == fold_modes(row), [hex(b) for b in row]
        whole_rows += folds_whole(row)
    assert whole_rows > 1000  # the fast path is exercised, not only the fallback


def test_whole_factor2_is_the_whole_folds_factor():
    """whole_factor2 accepts a scale exactly where a row of four such scales folds whole, and its
    factor is that fold's (1.0 where it does not fold)."""
    for b in edge_scale_bits():
        ok, fac = whole_factor2(b)
        mode, factor2, _ = fold_modes([b] * 4)
        assert ok == (mode == WHOLE), hex(b)
        assert fac == (factor2[0] if ok else 0x3C003C00), hex(b)


@pytest.mark.parametrize("bn", BNS)
def test_producer_stores_where_the_consumers_k_order_reads(bn):
    seen = set()
    for row in range(bn):
        for s in range(4):
            for t in range(4):
                for b in range(4):
                    h, qp = divmod(b, 2)
                    for e in range(2):
                        # word t, byte b of sub-block s's chunk holds codes at actual k = 32 s + 8 t + 2 b + e
                        k_logical = consumer_logical_k(s, t, h, 2 * qp + e)
                        assert producer_address(row, s, t, b, bn) + 2 * e == sw128_offset(row, k_logical, bn)
                        seen.add((row, k_logical))
    assert len(seen) == bn * 128  # every logical element of the stage written once


# ---- the raw ring: packed FP4 of a stage, BN rows x 4 sub-blocks of 16-byte chunks ----
def raw_chunk_offset(row: int, q: int) -> int:
    """Byte offset in a raw stage of the 16 bytes (32 codes) of row, sub-block q."""
    return ((row // 32) * 4 + q) * 512 + (row % 32) * 16


def raw_copy(p: int, i: int, k: int = 2048):
    """Copy i of producer thread p: (shared byte offset in the raw stage, global byte offset of
    its 16 bytes from the tile's first row's stage bytes, rows k / 2 bytes apart)."""
    return (p & 3) * 512 + (p >> 2) * 16 + i * 2048, ((p >> 2) + 32 * i) * (k // 2) + (p & 3) * 16


def raw_decode_read(s: int, lane: int, i: int) -> int:
    """Shared byte offset in the raw stage producer thread (s, lane) decodes row lane + 32 i from."""
    return s * 512 + lane * 16 + i * 2048


def conflict_free(offsets) -> bool:
    """A warp's 32 16-byte accesses in the fewest wavefronts: distinct 16-byte slots filling four
    whole 128-byte lines, so no two lanes share a bank within a line's wavefront."""
    slots = {o // 16 for o in offsets}
    lines = {o // 128 for o in offsets}
    return all(o % 16 == 0 for o in offsets) and len(slots) == 32 and len(lines) == 4


RAW_SRC = [
    "constexpr int ROWS = BN / 32;",
    "static constexpr int RAW_CODE_BYTES = BN * BK / 2;",
    "const uint32_t raw_copy = base + S::OFF_RAW + (p & 3) * 512 + (p >> 2) * 16;",
    "const uint32_t raw = base + S::OFF_RAW + s * 512 + lane * 16;",
    "const size_t src_row32 = static_cast<size_t>(32) * (k / 2);",
    "(static_cast<size_t>(grp) * n + n0 + (p >> 2)) * (k / 2) + (p & 3) * 16;",
    "for (int i = 0; i < ROWS; ++i) cp_async16(raw_copy + slot + i * 2048, src + i * src_row32 + st * 64);",
    "uint4 codes = ld_shared16(slot_raw);",
    "if (i + 1 < ROWS) codes = ld_shared16(slot_raw + (i + 1) * 2048);",
    "const uint32_t raw_sc = base + S::OFF_RAW + S::RAW_CODE_BYTES + fold_r * 16;",
]


@pytest.mark.parametrize("bn", BNS)
def test_raw_ring_copies_and_decode_reads_meet(bn):
    """Thread p copies chunks c = p + 128 i (row c / 4, sub-block c % 4; four threads read one
    row's 64 contiguous stage bytes) to the layout address of that chunk; thread (s, lane) reads
    row lane + 32 i, sub-block s, at its layout address; the codes fill RAW_CODE_BYTES exactly
    (the scales follow), and each warp's copies (8 rows x 4 sub-blocks) and decode reads (32 rows
    of one sub-block) cover whole 128-byte lines."""
    source_has(SRC, *RAW_SRC)
    k, rows_per_thread = 2048, bn // 32
    raw_code_bytes = bn * 128 // 2
    copied = {}
    for p in range(128):
        for i in range(rows_per_thread):
            dst, src = raw_copy(p, i, k)
            c = p + 128 * i
            row, q = c // 4, c % 4
            assert src == row * (k // 2) + 16 * q  # sub-block q: bytes 16 q .. 16 q + 15 of the row's stage bytes
            assert dst == raw_chunk_offset(row, q)
            copied.setdefault((row, q), []).append(dst)
    assert sorted(copied) == [(r, q) for r in range(bn) for q in range(4)]
    assert all(len(v) == 1 for v in copied.values())
    offsets = sorted(v[0] for v in copied.values())
    assert offsets == list(range(0, raw_code_bytes, 16))  # the chunks tile [0, RAW_CODE_BYTES)
    for s in range(4):
        for i in range(rows_per_thread):
            for lane in range(32):
                assert raw_decode_read(s, lane, i) == raw_chunk_offset(lane + 32 * i, s)
            assert conflict_free([raw_decode_read(s, lane, i) for lane in range(32)])
    for warp in range(4):
        for i in range(rows_per_thread):
            assert conflict_free([raw_copy(32 * warp + lane, i, k)[0] for lane in range(32)])


# the consumers' promotion paths the stage model follows: the stage's mode is the OR of its rows'
assert "const uint32_t mode = warp_modes.x | warp_modes.y | warp_modes.z | warp_modes.w;" in SRC
assert "if (!(mode & MODE_PER_SUBBLOCK)) {" in SRC
assert "if (mode == 0u) {\n          promote_rows(acc, blk, sa0, sa1);" in SRC
assert "promote(acc, blk, fac, sa0, sa1, t);" in SRC and "promote(acc, blk, fac + sub * BN * 4, sa0, sa1, t);" in SRC


def stage_of_one_warp(a, sa, codes, bits):
    """(stage mode, what the stage adds to acc) for rows g, g + 8 of a warp (A [16, 128 actual K],
    a_scale sa [16]) against len(codes) weight rows, one 128-K stage. Producer: each row folded,
    its packed bytes decoded, times the decode factor, placed at the consumers' logical K.
    Consumers: every row whole: the eight k16 MMAs' sum times a_scale; per column only: times
    a_scale * the column's promote factor (sub-block 0's); per sub-block: each 32-K sub-block
    (steps 2 s, 2 s + 1) times a_scale * that sub-block's promote factor of the column."""
    rows = len(codes)
    bq = np.zeros((rows, 128))  # B' by logical stage K
    promote = np.zeros((4, rows))  # fp32 [sub-block][row], as the producer writes them
    mode = 0
    for n in range(rows):
        row_mode, factor2, promote_bits = fold_row(bits[n])
        mode |= row_mode
        for s in range(4):
            promote[s, n] = f32(promote_bits[s])
            chunk = [sum(int(codes[n, 32 * s + 8 * t + 2 * i]) << (8 * i) | int(codes[n, 32 * s + 8 * t + 2 * i + 1]) << (8 * i + 4)
                         for i in range(4)) for t in range(4)]
            for t in range(4):
                out = e2m1x8_to_f16x2x4(chunk[t])
                for b in range(4):
                    h, qp = divmod(b, 2)
                    word = mul_f16x2(out[b], factor2[s])
                    for e in range(2):
                        bq[n, consumer_logical_k(s, t, h, 2 * qp + e)] = h2f(word >> (16 * e))
    a_logical = consumer_a_by_logical_k(a)
    if not mode & MODE_PER_SUBBLOCK:
        blk = a_logical @ bq.T  # what the eight k16 MMAs sum
        return mode, blk * sa[:, None] if mode == 0 else blk * (sa[:, None] * promote[0][None, :])
    got = np.zeros((16, rows))
    for s in range(4):  # logical K 32 s .. 32 s + 31
        blk = a_logical[:, 32 * s: 32 * s + 32] @ bq[:, 32 * s: 32 * s + 32].T
        got += blk * (sa[:, None] * promote[s][None, :])
    return mode, got


def a_operand(seed: int):
    """A [16, 128] of random e4m3 bytes (no NaN) as float64."""
    gen = torch.Generator().manual_seed(seed)
    a_bytes = torch.randint(0, 256, (16, 128), generator=gen, dtype=torch.int64).to(torch.uint8)
    a_bytes[(a_bytes & 0x7F) == 0x7F] = 0x3C
    return a_bytes.view(torch.float8_e4m3fn).double().numpy(), gen


@pytest.mark.parametrize("exps, want_mode", [
    # every row's exponents inside [-23, 13]: the whole fold, promoted by a_scale only
    ([[-3, -1, -20, -2], [0, 0, 0, 0], [4, -9, 1, 2], [-23, -23, -23, -23],
      [1, 2, 3, 4], [13, -5, -23, -5], [9, 0, -1, -14], [2, 2, 2, 2]], WHOLE),
    # rows 3 and 5 below 2^-23: relative, every column promoted by a_scale * its ref (1 for the whole rows)
    ([[-3, -1, -20, -2], [0, 0, 0, 0], [4, -9, 1, 2], [-30, -30, -30, -30],
      [1, 2, 3, 4], [-5, -5, -27, -5], [9, 0, -1, -14], [2, 2, 2, 2]], RELATIVE),
])
def test_one_stage_of_one_warp_is_the_definitions_sum(exps, want_mode):
    """8 B rows of power-of-two scales, one 128-K stage, through the producer's fold and decode
    and the consumers' promotion; against sum_k A * code * scale (float64; the orders of addition
    differ, so equal to 1e-12)."""
    a, gen = a_operand(3)
    codes = torch.randint(0, 16, (8, 128), generator=gen).numpy()
    exps = np.array(exps)
    scales = [[p2(int(e)) for e in row] for row in exps]
    sa = np.array([0.37 + r for r in range(16)])
    want = (a * sa[:, None]) @ (np.array(E2M1)[codes] * (2.0 ** exps).repeat(32, axis=1)).T
    mode, got = stage_of_one_warp(a, sa, codes, scales)
    assert mode == want_mode
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert np.count_nonzero(got) > got.size // 2


def test_unfolded_stage_is_the_definitions_sum():
    """A stage holding rows of all three modes (whole, plain for 0.75 and 0 or a spread of 33
    binades, relative below 2^-23): every row's B is its codes times its decode factor, each 32-K
    sub-block promoted by its own factor (1 for whole rows, ref for the relative one, the actual
    scale for plain ones); against sum_k A * code * scale."""
    a, gen = a_operand(5)
    codes = torch.randint(0, 16, (5, 128), generator=gen).numpy()
    scale = np.array([[1.0, 0.5, 0.25, 2.0], [0.75, 1.0, 1.0, 0.0], [2.0 ** -3] * 4, [8.0, 2.0 ** -30, 1.0, 1.0],
                      [2.0 ** -30, 2.0 ** -8, 2.0 ** -25, 2.0 ** -12]])
    bits = [[int(np.array([x], dtype=np.float32).view(np.uint32)[0]) for x in row] for row in scale]
    assert [fold_row(row)[0] for row in bits] == [WHOLE, PLAIN, WHOLE, PLAIN, RELATIVE]
    sa = np.array([1.0 + r / 4 for r in range(16)])
    want = (a * sa[:, None]) @ (np.array(E2M1)[codes] * scale.repeat(32, axis=1)).T
    mode, got = stage_of_one_warp(a, sa, codes, bits)
    assert mode == PLAIN
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


# ---- the persistent walk: the tiles with rows, spread evenly over the CTAs ----
SCHED_GROUPS = const("SCHED_GROUPS")


def tile_list(masked_m, max_m: int, n: int, bn: int, bm: int = 128):
    """tile_of for every tile index the walk hands out, ported from the kernel (thread 0's
    counts, then the scan): the tiles with rows where the groups are listed, else every tile in
    the plain order."""
    groups, tiles_n, m_tiles = len(masked_m), n // bn, -(-max_m // bm)
    total = groups * m_tiles * tiles_n
    if groups > SCHED_GROUPS:  # the plain order
        return [(t // (m_tiles * tiles_n), (t % (m_tiles * tiles_n)) // tiles_n * bm, t % tiles_n * bn)
                for t in range(total)]
    rows = [min(max(int(v), 0), max_m) for v in masked_m]
    busy_pre, busy = [], 0
    for r in rows:
        busy_pre.append(busy)
        busy += -(-r // bm) * tiles_n
    busy_pre.append(busy)
    out = []
    for tile in range(busy):
        grp = 0
        while busy_pre[grp + 1] <= tile:
            grp += 1
        j = tile - busy_pre[grp]
        out.append((grp, j // tiles_n * bm, j % tiles_n * bn))
    return out


@pytest.mark.parametrize("masked_m, max_m, bn", [
    ([141, 248, 152, 150], 4096, 128), ([0, 256, 0, 0], 256, 64), ([-7, 300, 0, 100], 256, 64),
    ([200, 143, 67, 1], 200, 64), ([512] * 4, 512, 128), ([0] * 4, 256, 128), ([1, 1, 0, 1], 1, 64),
    ([(37 * i) % 300 for i in range(SCHED_GROUPS)], 256, 64),  # exactly SCHED_GROUPS groups: still listed
    (list(range(0, 70 * 37, 37)), 2048, 128),  # 70 groups: more than SCHED_GROUPS, the plain order
])
def test_walk_hands_out_busy_tiles_evenly(masked_m, max_m, bn):
    n, sms = 2048, 132
    tiles = tile_list(masked_m, max_m, n, bn)
    m_tiles = -(-max_m // 128)
    rows = [min(max(v, 0), max_m) for v in masked_m]
    everything = {(g, m * 128, c * bn) for g in range(len(masked_m)) for m in range(m_tiles) for c in range(n // bn)}
    if len(masked_m) > SCHED_GROUPS:  # every tile, the consumers storing the zero ones
        assert len(tiles) == len(everything) and set(tiles) == everything
        return
    busy = {t for t in everything if t[1] < rows[t[0]]}
    assert len(tiles) == len(busy) and set(tiles) == busy  # the rest is zero_rows_async's
    grid = min(len(everything), sms)
    per_cta = [len(tiles[c::grid]) for c in range(grid)]
    assert max(per_cta) - min(per_cta) <= 1


def zero_rows_async(rows, max_m: int, n: int, worker: int, workers: int, piece: int, pieces: int, zero_bytes: int):
    """The bulk copies (byte offset into c, bytes) of one piece of a CTA's share (zero_share,
    zero_piece_of, zero_rows_async), ported."""
    total = sum(max_m - r for r in rows)
    s0, s1 = total * worker // workers, total * (worker + 1) // workers
    shift = pieces.bit_length() - 1
    assert 1 << shift == pieces
    r0, r1 = s0 + (((s1 - s0) * piece) >> shift), s0 + (((s1 - s0) * (piece + 1)) >> shift)
    row_bytes, first, out = 2 * n, 0, []
    for gi, r in enumerate(rows):
        if first >= r1:
            break
        lo, hi = max(r0, first), min(r1, first + max_m - r)
        if lo < hi:
            dst, left = (gi * max_m + r + lo - first) * row_bytes, (hi - lo) * row_bytes
            while left > 0:
                out.append((dst, min(left, zero_bytes)))
                left, dst = left - zero_bytes, dst + zero_bytes
        first += max_m - r
    return out


ZERO_SRC = [
    "return make_longlong2(total * worker / workers, total * (worker + 1) / workers);",
    "return make_longlong2(share.x + ((len * p) >> SHIFT), share.x + ((len * (p + 1)) >> SHIFT));",
    "const long long lo = max(r.x, first), hi = min(r.y, first + (max_m - rows));",
    "uint8_t* dst = reinterpret_cast<uint8_t*>(c) + (static_cast<long long>(gi) * max_m + rows + (lo - first)) * row_bytes;",
    "for (long long left = (hi - lo) * row_bytes; left > 0; left -= zero_bytes, dst += zero_bytes)",
    "bulk_s2g(dst, zeros, static_cast<uint32_t>(left < zero_bytes ? left : zero_bytes));",
    "if (zeroing && zero_piece < ZERO_PIECES && zero_piece * KT <= it * ZERO_PIECES) zero_next();",
    "while (zero_piece < ZERO_PIECES) zero_next();",
]


@pytest.mark.parametrize("masked_m, max_m, n", [
    ([20, 14, 26, 23], 4096, 2048), ([141, 248, 152, 150], 4096, 2048), ([0] * 4, 256, 2048),
    ([512] * 4, 512, 2048), ([-7, 300, 0, 100], 256, 2048), ([1, 1, 0, 1], 1, 2048), ([41, 17, -1, 30], 41, 128),
    ([(37 * i) % 300 for i in range(SCHED_GROUPS)], 256, 64),
])
@pytest.mark.parametrize("workers, pieces", [(132, 8), (128, 1), (1, 8), (7, 4)])
def test_zero_rows_async_writes_every_row_past_masked_m_once(masked_m, max_m, n, workers, pieces):
    """Every CTA's pieces together write each byte of rows [rows_g, max_m) of every group exactly
    once and nothing else, in bulk copies of at most the zero buffer, 16-byte aligned and sized."""
    source_has(SRC, *ZERO_SRC)
    rows = [min(max(v, 0), max_m) for v in masked_m]
    zero_bytes = 8 * 1024
    hits = np.zeros(len(rows) * max_m * n * 2 // 16, dtype=np.int32)  # 16-byte units of c
    for w in range(workers):
        for p in range(pieces):
            for dst, size in zero_rows_async(rows, max_m, n, w, workers, p, pieces, zero_bytes):
                assert dst % 16 == 0 and size % 16 == 0 and 0 < size <= zero_bytes
                hits[dst // 16:(dst + size) // 16] += 1
    want = np.zeros_like(hits)
    for g, r in enumerate(rows):
        want[(g * max_m + r) * n * 2 // 16:(g + 1) * max_m * n * 2 // 16] = 1
    np.testing.assert_array_equal(hits, want)


WALK_SRC = [
    "s_walk[0] = bx < busy ? (busy - bx + G - 1) / G : 0;",
    "return w < s_walk[0] ? static_cast<int>(blockIdx.x + w * gridDim.x) : -1;",
]


@pytest.mark.parametrize("busy, grid", [
    (416, 132), (800, 132), (48, 128), (256, 132), (133, 132), (131, 132), (1, 132), (264, 132), (7, 7), (5000, 132),
])
def test_walk_gives_each_busy_tile_to_one_cta(busy, grid):
    """Thread 0's count of its CTA's tiles and walk(w): CTA bx walks list indices bx, bx + grid,
    ...; together the CTAs walk every busy tile exactly once, none past the list."""
    source_has(SRC, *WALK_SRC)
    walked = []
    for bx in range(grid):
        count = (busy - bx + grid - 1) // grid if bx < busy else 0
        walked += [bx + w * grid for w in range(count)]
    assert sorted(walked) == list(range(busy))


@pytest.mark.parametrize("bn", BNS)
def test_each_rows_fold_is_written_once_and_read_by_each_decoder(bn):
    """Producer thread (s, lane) folds row lane + 32 s where the tile has it and writes factor j of
    it at [j][row] (the consumers' promote factors and the exchange's decode factors alike);
    thread (s, lane) decodes rows lane + 32 i, i < bn / 32, of sub-block s and reads [s][row]:
    each (sub-block, row) is written by one thread and read by exactly one."""
    written, read = {}, {}
    for s in range(4):
        for lane in range(32):
            fold_r = lane + 32 * s
            if fold_r < bn:
                for j in range(4):
                    written.setdefault(j * bn + fold_r, []).append((s, lane))
            for i in range(bn // 32):
                read.setdefault(s * bn + lane + 32 * i, []).append((s, lane))
    assert sorted(written) == sorted(read) == list(range(4 * bn))
    assert all(len(v) == 1 for v in written.values()) and all(len(v) == 1 for v in read.values())
    src = SRC[SRC.index("const int fold_r = lane + 32 * s;"):]
    assert "st_shared4(xchg + (j * BN + fold_r) * 4, f.factor2[j]);" in src
    assert "ld_shared4(xchg + (s * BN + lane + 32 * i) * 4)" in src
    assert "st_shared4(fac + j * BN * 4, f.promote_bits[j]);" in src
    assert "const uint32_t fac = base + S::OFF_FACTOR + (slot * (4 * BN) + fold_r) * 4;" in src


# ---- the raw ring over tiles ----
RAW_STAGES = const("RAW_STAGES")
RING_SRC = [  # the lines raw_ring_conflicts follows
    "const uint32_t gs0 = gs;",
    "const uint32_t slot = ((gs0 + st) % RAW_STAGES) * RAW_BYTES;",
    "for (int st = 0; st < RAW_STAGES - 1; ++st) {\n        if (st < KT) copy_stage(st);",
    "const uint32_t slot_raw = raw + (gs % RAW_STAGES) * RAW_BYTES;  // gs = gs0 + it",
    "if (it + RAW_STAGES - 1 < KT) copy_stage(it + RAW_STAGES - 1);",
]


def raw_ring_conflicts(lengths, slot_of):
    """Copies that may land in a raw slot some producer warp may still read, over a CTA's busy
    tiles (items) of the given numbers of stages (KT each in the kernel): stage x is read
    between the producer barrier of x and that of x + 1. A copy issued right after the barrier of
    x (for stage x + RAW_STAGES - 1) may meet readers of x; an item's first copies (its stages
    0 .. RAW_STAGES - 2), issued by a warp done with the item before and ahead of the item's
    first barrier, may meet readers of the stage before the item. A copy's slot must differ from
    theirs, and each copy must not land before its slot's last stage was read by everyone.
    slot_of(item, stage in the item) -> raw slot."""
    bad = []
    for item, ns in enumerate(lengths):
        for st in range(min(RAW_STAGES - 1, ns)):  # the item's first copies
            if item and slot_of(item, st) == slot_of(item - 1, lengths[item - 1] - 1):
                bad.append((item, st, "first copies"))
        for it in range(ns):
            st = it + RAW_STAGES - 1
            if st < ns and slot_of(item, st) == slot_of(item, it):
                bad.append((item, st, "in the loop"))
    # every stage's slot holds it from its copy until its last reader: between the copy of stage
    # y and its reads, no other stage's copy lands in that slot
    order = [(item, st) for item, ns in enumerate(lengths) for st in range(ns)]
    for y, (item, st) in enumerate(order):
        for z in range(y + 1, min(y + RAW_STAGES, len(order))):  # copies issued before y is read
            if slot_of(*order[z]) == slot_of(item, st):
                bad.append((item, st, "overwritten before read"))
    return bad


@pytest.mark.parametrize("lengths", [[kt] * 5 for kt in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17)])
def test_raw_ring_keeps_each_stage_until_read_across_tiles(lengths):
    """Raw slots counted over all of a CTA's stages (gs0 + st) stay clear of every reader for
    any KT; counted within the tile (st alone) they would not wherever KT is no multiple of
    RAW_STAGES (the next tile's first copies land in the slot of the tile's last stage, which a
    lagging warp still reads)."""
    source_has(SRC, *RING_SRC)
    start = [sum(lengths[:i]) for i in range(len(lengths))]
    assert raw_ring_conflicts(lengths, lambda item, st: (start[item] + st) % RAW_STAGES) == []
    item_local = raw_ring_conflicts(lengths, lambda item, st: st % RAW_STAGES)
    assert bool(item_local) == any(ns % RAW_STAGES for ns in lengths[:-1])


# ---- the tokens-as-N form (grouped_swapped_kernel): tokens in shared memory, weights in registers ----
SW_TN = const("SW_TN")
assert "const int cs = lt & 3, cr = lt >> 2;" in SRC
assert "v[q] = e4m3x2_to_f16x2((u < 2 ? lo[q] : hi[q]) >> (16 * (u & 1)));" in SRC
assert "const uint32_t chunk = (4u * (cs & 1) + u) ^ (r & 7);" in SRC
assert "st_shared16(buf + (cs >> 1) * S::ATOM_BYTES + r * 128 + (chunk << 4), v);" in SRC


def token_store_address(r: int, cs: int, u: int, tq: int, tn: int = SW_TN) -> int:
    """Byte offset in a token stage of element tq (f16x2 word) of chunk u that the thread
    converting token row r, sub-block cs stores."""
    chunk = (4 * (cs & 1) + u) ^ (r & 7)
    return (cs >> 1) * tn * 128 + r * 128 + (chunk << 4) + 4 * tq


def test_token_stores_meet_the_weights_k_order():
    """Chunk u's word t' holds bytes 8 t' + 2 u, + 1 of the token row's 32-byte sub-block (lo words
    for u < 2, hi words above, shifted by 16 (u & 1)); each must land at the logical K where the
    weights' fragment puts the same actual k (consumer_logical_k), in the 128-byte swizzle the
    MMA's descriptor reads, and every element of the stage is written once."""
    seen = set()
    for r in range(SW_TN):
        for cs in range(4):
            for u in range(4):
                for tq in range(4):
                    for e in range(2):
                        actual = 8 * tq + 2 * u + e  # byte of the sub-block: lo word bytes 0-3, hi word 4-7
                        t, rest = actual // 8, actual % 8
                        h, q = rest // 4, rest % 4
                        logical = consumer_logical_k(cs, t, h, q)
                        addr = token_store_address(r, cs, u, tq) + 2 * e
                        assert addr == sw128_offset(r, logical, SW_TN)
                        seen.add(addr)
    assert len(seen) == SW_TN * 128


def test_weight_fragments_are_the_consumers_k_order():
    """Register j of step 2 s + h: {row g byte 2 h, row g + 8 byte 2 h, row g byte 2 h + 1, row
    g + 8 byte 2 h + 1} of word s (codes 8 t .. 8 t + 7 of sub-block s). wgmma's A fragment holds
    row g cols 2 t, + 1; row g + 8 the same; row g cols 8 + 2 t, + 1; row g + 8 the same, so byte
    b's two codes (8 t + 2 b, + 1) must sit at consumer_logical_k(s, t, h, q) for q = 2 b - 4 h, + 1."""
    assert "frag[2 * s + h][0] = d0[2 * h];" in SRC and "frag[2 * s + h][2] = d0[2 * h + 1];" in SRC
    for s in range(4):
        for t in range(4):
            for h in range(2):
                for reg, b in ((0, 2 * h), (2, 2 * h + 1)):
                    col0 = 2 * t if reg == 0 else 8 + 2 * t  # the fragment's column of this register's low half
                    for e in range(2):
                        code = 2 * b + e  # 0..7 within the word: actual k = 32 s + 8 t + code
                        assert consumer_logical_k(s, t, code // 4, code % 4) == 16 * (2 * s + h) + col0 + e


# ---- the tokens-as-N form on mma.sync (grouped_sync_kernel): both operands in registers ----
assert "wrow[mt][hf] = b_fp4 + r * (k / 2) + 4 * t;" in SRC
assert "__ldg(reinterpret_cast<const uint32_t*>(wrow[mt][hf] + kb * 64 + 16 * h))" in SRC
assert "__ldg(reinterpret_cast<const uint2*>(a_fp8 + (row0 + r) * k + kb * 128 + 32 * h + 8 * t))" in SRC
assert all(f"af[q][mt][{i}] = d{i & 1}[2 * q{' + 1' if i >= 2 else ''}];" in SRC for i in range(4))
assert "const uint32_t b00 = e4m3x2_to_f16x2(tv.x), b01 = e4m3x2_to_f16x2(tv.x >> 16);" in SRC
assert "const uint32_t b10 = e4m3x2_to_f16x2(tv.y), b11 = e4m3x2_to_f16x2(tv.y >> 16);" in SRC
assert "mma_m16n8k16<true>(sub, af[0][mt], b00, b01);" in SRC and "mma_m16n8k16<false>(sub, af[1][mt], b10, b11);" in SRC
assert "blk[mt][nt][e] = h == 0 ? sub[e] * s : fmaf(sub[e], s, blk[mt][nt][e]);" in SRC
assert "acc[mt][nt][e] = fmaf(blk[mt][nt][e], (e & 1) ? sa[i][nt].y : sa[i][nt].x, acc[mt][nt][e]);" in SRC


def mma_m16n8k16(a_regs, b_regs):
    """D [16, 8] of mma.sync m16n8k16 from the 32 lanes' f16x2 registers (PTX fragment layout):
    a[0] row g cols 2 t, + 1; a[1] row g + 8, same cols; a[2] row g cols 8 + 2 t, + 1; a[3] row
    g + 8, same; b[0] rows 2 t, + 1 of col g; b[1] rows 8 + 2 t, + 1."""
    a, b = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for reg, (row, col) in enumerate(((g, 2 * t), (g + 8, 2 * t), (g, 8 + 2 * t), (g + 8, 8 + 2 * t))):
            x = a_regs[lane][reg]
            a[row, col], a[row, col + 1] = h2f(x & 0xFFFF), h2f(x >> 16)
        for reg, row in enumerate((2 * t, 8 + 2 * t)):
            x = b_regs[lane][reg]
            b[row, g], b[row + 1, g] = h2f(x & 0xFFFF), h2f(x >> 16)
    return a @ b


def test_mma_sync_form_block_is_the_definitions_sum():
    """One 128-K block of one warp (16 weight rows, 8 tokens), every lane's loads, decodes and
    fragments as the kernel takes them: the sub-blocks' MMAs, each promoted by its weight row's
    scale, then the block by the token's a_scale, give the definition's sum; so each step pairs
    the same actual k on both operands and covers the block once."""
    gen = np.random.default_rng(3)
    codes = gen.integers(0, 16, size=(16, 128))                       # weight rows x k
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)                    # 64 bytes a row, low nibble = even k
    tokens = gen.integers(-8, 9, size=(8, 128)).astype(np.float64)     # small integers: exact in f16
    b_scale = 2.0 ** gen.integers(-4, 5, size=(16, 4))                 # a row's four per-32 scales
    a_scale = gen.uniform(0.5, 2.0, size=8)
    word = lambda row, h, t: int.from_bytes(bytes(int(x) for x in packed[row, 16 * h + 4 * t:16 * h + 4 * t + 4]), "little")
    tok2 = lambda tok, k0: f2h(tokens[tok, k0]) | (f2h(tokens[tok, k0 + 1]) << 16)  # e4m3x2_to_f16x2 of two bytes
    blk = np.zeros((16, 8))
    for h in range(4):
        sub = np.zeros((16, 8))
        for q in range(2):
            a_regs, b_regs = [], []
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                d0, d1 = e2m1x8_to_f16x2x4(word(g, h, t)), e2m1x8_to_f16x2x4(word(g + 8, h, t))
                a_regs.append((d0[2 * q], d1[2 * q], d0[2 * q + 1], d1[2 * q + 1]))
                k0 = 32 * h + 8 * t + 4 * q  # tv bytes 4 q .. 4 q + 3 of token row g
                b_regs.append((tok2(g, k0), tok2(g, k0 + 2)))
            sub += mma_m16n8k16(a_regs, b_regs)
        blk += sub * b_scale[:, h:h + 1]
    got = blk * a_scale[None, :]
    values = np.array(E2M1)[codes] * np.repeat(b_scale, 32, axis=1)
    want = values @ (tokens * a_scale[:, None]).T
    assert np.allclose(got, want, rtol=1e-12, atol=0)
