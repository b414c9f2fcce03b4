"""CPU model of the CUDA grouped GEMM's data placement (cuda_fp4_wgmma/grouped_wgmma.cu).

The kernel multiplies in a permuted K order inside each 128-K stage, decodes packed E2M1 with
permutes, folds each block's scales into fp16 and writes B into 128-byte-swizzled shared memory.
This ports those pieces bit for bit (tables read from the .cu file) and checks: the decode on
every byte, the fold against the definition's dequantisation, that the producer's stores land
where the MMA's descriptor reads the logical K the consumers' A fragments hold, and one whole
stage of one warp against the definition's sum.
"""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from ptx_model import M32, f2h, h2f, prmt, sw128_offset

CU = (Path(__file__).resolve().parents[1] / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
      / "cuda_fp4_wgmma/grouped_wgmma.cu")
SRC = CU.read_text()
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def const(name: str) -> int:
    return int(re.search(rf"constexpr (?:uint32_t|int) {name} = (0x[0-9a-f]+|\d+)u?;", SRC).group(1), 0)


LO, HI, MAX_SPREAD = const("E2M1_F16_HI_0_3"), const("E2M1_F16_HI_4_7"), const("MAX_SPREAD")
BNS = sorted({int(x) for x in re.findall(r"launch<(\d+)>\(", SRC)})  # the tile widths the entry launches
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


def fold_row(bits):
    """(ok, f16 bits of 2^d for each sub-block, fp32 bits of ref) as fold_row computes them (the
    thread that folds a row hands sub-block s's factor to the warp that decodes it)."""
    es = [(b >> 23) & 0xFF for b in bits]
    ok = all((b & 0x807FFFFF) == 0 and 1 <= e <= 252 for b, e in zip(bits, es))
    ok = ok and max(es) - min(es) <= MAX_SPREAD
    facs = []
    for e in es:
        d = e - max(es)
        h = ((d + 15) << 10) if d >= -14 else (1 << max(d + 24, 0))
        facs.append(h if ok else 0x3C00)
    return ok, facs, max(es) << 23


def f32(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def mul_f16(a: int, b: int) -> int:  # mul.rn.f16 on one half
    return f2h(float(np.float16(h2f(a)) * np.float16(h2f(b))))


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
    p2 = lambda e: int(np.array([2.0 ** e], dtype=np.float32).view(np.uint32)[0])
    bits = lambda x: int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    yield [p2(0)] * 4, True
    yield [p2(-3), p2(-1), p2(-20), p2(-2)], True
    yield [p2(10), p2(-13), p2(0), p2(5)], True          # spread 23: folds
    yield [p2(10), p2(-14), p2(0), p2(5)], False         # spread 24
    yield [p2(-126), p2(-126), p2(-110), p2(-126)], True
    yield [p2(125), p2(120), p2(125), p2(110)], True
    yield [p2(126), 0, 0, 0], False                      # 2^126 and zeros
    yield [p2(0), bits(-1.0), p2(0), p2(0)], False
    yield [p2(0), bits(1.5), p2(0), p2(0)], False
    yield [p2(0), 1, p2(0), p2(0)], False                # subnormal
    yield [p2(0), bits(float("inf")), p2(0), p2(0)], False
    yield [p2(0), bits(float("nan")), p2(0), p2(0)], False


@pytest.mark.parametrize("case", range(12))
def test_fold_is_the_dequantisation(case):
    bits, want_ok = list(scale_sets())[case]
    for s in range(4):
        ok, facs, ref = fold_row(bits)
        fac = facs[s]
        assert ok == want_ok
        if ok:  # code * 2^d (fp16, exact for every code) * ref == code * scale, exactly
            for code in range(16):
                v = mul_f16(f2h(E2M1[code]), fac)
                assert h2f(v) * f32(ref) == E2M1[code] * f32(bits[s]), (case, s, code)
        else:
            assert fac == 0x3C00  # plain codes; the consumer multiplies by the actual scale


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


def test_one_stage_of_one_warp_is_the_definitions_sum():
    """Rows g, g + 8 of a warp, 8 B rows, one 128-K stage: fragments from A's e4m3 bytes the way
    the consumers read them, B from the producer's decoded, scaled, placed words, the MMA's
    sum over logical K, then the promotion by a_scale * ref; against sum_k A * code * scale
    (float64; the orders of addition differ, so equal to 1e-12)."""
    gen = torch.Generator().manual_seed(3)
    a_bytes = torch.randint(0, 256, (16, 128), generator=gen, dtype=torch.int64).to(torch.uint8)
    a_bytes[(a_bytes & 0x7F) == 0x7F] = 0x3C  # no NaN operands
    a = a_bytes.view(torch.float8_e4m3fn).double().numpy()
    codes = torch.randint(0, 16, (8, 128), generator=gen).numpy()
    exps = np.array([[-3, -1, -20, -2], [0, 0, 0, 0], [4, -9, 1, 2], [-30, -30, -30, -30],
                     [1, 2, 3, 4], [-5, -5, -27, -5], [9, 0, -1, -14], [2, 2, 2, 2]])
    scales = [[int(np.array([2.0 ** e], dtype=np.float32).view(np.uint32)[0]) for e in row] for row in exps]
    sa = np.array([0.37 + r for r in range(16)])
    want = (a * sa[:, None]) @ (np.array(E2M1)[codes] * (2.0 ** exps).repeat(32, axis=1)).T
    # producer: B' [8, 128 logical] and ref per row
    bq = np.zeros((8, 128))
    ref = np.zeros(8)
    for n in range(8):
        for s in range(4):
            ok, facs, rbits = fold_row(scales[n])
            fac = facs[s]
            assert ok
            ref[n] = f32(rbits)
            chunk = [sum(int(codes[n, 32 * s + 8 * t + 2 * i]) << (8 * i) | int(codes[n, 32 * s + 8 * t + 2 * i + 1]) << (8 * i + 4)
                         for i in range(4)) for t in range(4)]
            for t in range(4):
                out = e2m1x8_to_f16x2x4(chunk[t])
                for b in range(4):
                    h, qp = divmod(b, 2)
                    word = mul_f16(out[b] & 0xFFFF, fac) | (mul_f16(out[b] >> 16, fac) << 16)
                    for e in range(2):
                        bq[n, consumer_logical_k(s, t, h, 2 * qp + e)] = h2f(word >> (16 * e))
    a_logical = consumer_a_by_logical_k(a)
    blk = a_logical @ bq.T  # what the eight k16 MMAs sum
    got = blk * (sa[:, None] * ref[None, :])
    # the same products in another order of float64 additions: equal to rounding of the sum
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert not np.array_equal(np.sign(blk), np.zeros_like(blk))


def test_unfolded_stage_is_the_definitions_sum():
    """A stage holding a row that does not fold (scales 0.75 and 0 among powers of two): every
    row's B is plain codes times 2^d (d = 0 for the unfolded row), each 32-K sub-block is k16
    steps 2 s and 2 s + 1, promoted by its own factor (ref for folded rows, the actual scale for
    the unfolded one); against sum_k A * code * scale."""
    gen = torch.Generator().manual_seed(5)
    a_bytes = torch.randint(0, 256, (16, 128), generator=gen, dtype=torch.int64).to(torch.uint8)
    a_bytes[(a_bytes & 0x7F) == 0x7F] = 0x3C
    a = a_bytes.view(torch.float8_e4m3fn).double().numpy()
    codes = torch.randint(0, 16, (4, 128), generator=gen).numpy()
    scale = np.array([[1.0, 0.5, 0.25, 2.0], [0.75, 1.0, 1.0, 0.0], [2.0 ** -3] * 4, [8.0, 2.0 ** -30, 1.0, 1.0]])
    bits = [[int(np.array([x], dtype=np.float32).view(np.uint32)[0]) for x in row] for row in scale]
    sa = np.array([1.0 + r / 4 for r in range(16)])
    want = (a * sa[:, None]) @ (np.array(E2M1)[codes] * scale.repeat(32, axis=1)).T
    bq = np.zeros((4, 128))
    factor = np.zeros((4, 4))  # [row, sub-block]
    for n in range(4):
        for s in range(4):
            ok, facs, rbits = fold_row(bits[n])
            fac = facs[s]
            assert ok == (n in (0, 2))
            factor[n, s] = f32(rbits) if ok else scale[n, s]
            for t in range(4):
                for b in range(4):
                    h, qp = divmod(b, 2)
                    for e in range(2):
                        k = 32 * s + 8 * t + 2 * b + e
                        bq[n, consumer_logical_k(s, t, h, 2 * qp + e)] = h2f(mul_f16(f2h(E2M1[codes[n, k]]), fac))
    a_logical = consumer_a_by_logical_k(a)
    got = np.zeros((16, 4))
    for s in range(4):  # steps 2 s, 2 s + 1 = logical K 32 s .. 32 s + 31
        blk = a_logical[:, 32 * s: 32 * s + 32] @ bq[:, 32 * s: 32 * s + 32].T
        got += blk * (sa[:, None] * factor[None, :, s])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


# ---- the persistent walk: tiles with rows first, spread evenly over the CTAs ----
SCHED_GROUPS = const("SCHED_GROUPS")


def tile_list(masked_m, max_m: int, n: int, bn: int, bm: int = 128):
    """tile_of for every tile index, ported from the kernel (thread 0's counts, then the scan)."""
    groups, tiles_n, m_tiles = len(masked_m), n // bn, -(-max_m // bm)
    total = groups * m_tiles * tiles_n
    if groups > SCHED_GROUPS:  # the plain order
        return [(t // (m_tiles * tiles_n), (t % (m_tiles * tiles_n)) // tiles_n * bm, t % tiles_n * bn)
                for t in range(total)]
    rows = [min(max(int(v), 0), max_m) for v in masked_m]
    busy_pre, zero_pre, busy, zero = [], [], 0, 0
    for r in rows:
        busy_pre.append(busy)
        zero_pre.append(zero)
        busy += -(-r // bm) * tiles_n
        zero += (m_tiles - -(-r // bm)) * tiles_n
    busy_pre.append(busy)
    zero_pre.append(zero)
    out = []
    for tile in range(total):
        grp, first = 0, 0
        if tile < busy:
            while busy_pre[grp + 1] <= tile:
                grp += 1
            j = tile - busy_pre[grp]
        else:
            z = tile - busy
            while zero_pre[grp + 1] <= z:
                grp += 1
            j = z - zero_pre[grp]
            first = -(-rows[grp] // bm)
        out.append((grp, (first + j // tiles_n) * bm, j % tiles_n * bn))
    return out


@pytest.mark.parametrize("masked_m, max_m, bn", [
    ([141, 248, 152, 150], 4096, 128), ([0, 256, 0, 0], 256, 64), ([-7, 300, 0, 100], 256, 64),
    ([200, 143, 67, 1], 200, 64), ([512] * 4, 512, 128), ([0] * 4, 256, 128), ([1, 1, 0, 1], 1, 64),
    ([(37 * i) % 300 for i in range(SCHED_GROUPS)], 256, 64),  # exactly SCHED_GROUPS groups: still listed
    (list(range(0, 70 * 37, 37)), 2048, 128),  # 70 groups: more than SCHED_GROUPS, the plain order
])
def test_walk_hands_out_busy_tiles_first_and_evenly(masked_m, max_m, bn):
    n, sms = 2048, 132
    tiles = tile_list(masked_m, max_m, n, bn)
    m_tiles = -(-max_m // 128)
    everything = {(g, m * 128, c * bn) for g in range(len(masked_m)) for m in range(m_tiles) for c in range(n // bn)}
    assert len(tiles) == len(everything) and set(tiles) == everything
    rows = [min(max(v, 0), max_m) for v in masked_m]
    holds = [m0 < rows[g] for g, m0, _ in tiles]
    if len(masked_m) <= SCHED_GROUPS:
        busy = sum(holds)
        assert all(holds[:busy]) and not any(holds[busy:])
        grid = min(len(tiles), sms)
        per_cta = [sum(holds[c::grid]) for c in range(grid)]
        assert max(per_cta) - min(per_cta) <= 1


@pytest.mark.parametrize("bn", BNS)
def test_each_rows_fold_is_written_once_and_read_by_each_decoder(bn):
    """Producer thread (s, lane) folds row lane + 32 s where the tile has it and writes factor j of
    it at [j][row] (the consumers' factors and the exchange alike); thread (s, lane) decodes rows
    lane + 32 i, i < bn / 32, of sub-block s and reads [s][row]: each (sub-block, row) is written
    by one thread and read by exactly one."""
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
    assert "st_shared4(fac + j * BN * 4, f.ok ? f.ref_bits : scale[j]);" in src
