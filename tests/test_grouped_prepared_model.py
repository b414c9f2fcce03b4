"""CPU model of the CUDA grouped GEMM's prepared form (cuda_fp4_wgmma/grouped_prepared.cuh).

The first pass writes A as fp16 (a block whose a_scale is 0 as A x 0) and B' = E2M1 code x its
per-32 scale as fp16, each as 128-byte-swizzled 64-K stage images, and sets a gate where a scale
needs the exact fallback; the GEMM reads the images through the MMA's K-major 128-byte-swizzle
descriptor and keeps one accumulator set, multiplied by the ratio of consecutive token scales
after each 128-K block. This ports the image offsets, the gate, the descriptor's reads and the
rescale (in fp32, as the kernel computes it) and checks: the offsets are a bijection onto each
stage that the descriptor reads back at the same logical (row, k); the gate's verdicts, and that
the GEMMs' read of the gate (16-byte loads, then the last words one at a time) reads every word
once; and whole calls against the definition's float64 oracle with the harness's rule, on
quantized inputs, on token scales far apart with zero blocks, and at masked_m's edges.
"""

import re
from pathlib import Path

import pytest
import torch

from lowbit_gemm.numerics import e2m1_decode, unpack_fp4
from lowbit_gemm.oracle import grouped_gemm_oracle
from lowbit_gemm.testing import grouped_inputs, spread_a_scale
from ptx_model import source_has, sw128_offset

HDR = (Path(__file__).resolve().parents[1] / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
       / "cuda_fp4_wgmma/grouped_prepared.cuh").read_text()
TM, TN = (int(x) for x in re.search(r"constexpr int TM = (\d+), TN = (\d+);", HDR).groups())
SCALE_MIN, SCALE_MAX = (2.0 ** int(x) for x in re.search(
    r"constexpr float SCALE_MIN = 0x1p(-?\d+)f, SCALE_MAX = 0x1p(-?\d+)f;", HDR).groups())
WHOLE_E_MIN, WHOLE_E_MAX = 127 - 23, 127 + 13  # decode_fold.cuh's whole fold (test_grouped_wgmma_model checks them)
assert (TM, TN) == (128, 256)


def b_image_offset(grp, row, ks, c, n, ks_count):
    """prepare_kernel's B part: staged at r * 128 + ((c ^ (r % 8)) << 4) for r = row % 128, then
    bulk-copied to the image's ((grp * n / TN + row / TN) * KS + ks) * TN + (128-row slab % TN)."""
    return (((grp * (n // TN) + row // TN) * ks_count + ks) * TN + row % TN) * 128 + ((c ^ (row & 7)) << 4)


def a_image_offset(grp, mb, ks, ri, c, m_tiles, ks_count):
    """prepare_kernel's A part: row ri of m-tile mb (ri = half * 64 + r, r % 8 = ri % 8)."""
    return (((grp * m_tiles + mb) * ks_count + ks) * TM + ri) * 128 + ((c ^ (ri & 7)) << 4)


def clamp_rows(masked_m, max_m):
    return [min(max(int(v), 0), max_m) for v in masked_m]


def prepare(a_fp8, a_scale, b_fp4, b_scale, masked_m):
    """(a_img, b_img) as fp16 element arrays (byte offset / 2) and the gate, as the first pass
    writes them; groups without rows and m-tiles past masked_m are left unwritten (NaN here)."""
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    ks_count, m_tiles = k // 64, -(-max_m // TM)
    rows = clamp_rows(masked_m, max_m)
    a_img = torch.full((g * m_tiles * ks_count * TM * 64,), float("nan"), dtype=torch.float16)
    b_img = torch.full((g * n * k,), float("nan"), dtype=torch.float16)
    gate = False
    codes = unpack_fp4(b_fp4)  # [g, n, k]
    for grp in range(g):
        if rows[grp] == 0:
            continue
        bs = b_scale[grp]  # [n, k / 32]
        bits = bs.view(torch.int32)
        e = (bits >> 23) & 0xFF
        ok = ((bits & 0x807FFFFF) == 0) & (e >= WHOLE_E_MIN) & (e <= WHOLE_E_MAX)
        gate = gate or not bool(ok.all())
        factor = torch.where(ok, bs, torch.ones_like(bs)).repeat_interleave(32, dim=1)
        vals = (e2m1_decode(codes[grp]) * factor).to(torch.float16)  # exact where ok
        for row in range(n):
            for ks in range(ks_count):
                for c in range(8):
                    off = b_image_offset(grp, row, ks, c, n, ks_count) // 2
                    b_img[off:off + 8] = vals[row, ks * 64 + 8 * c: ks * 64 + 8 * c + 8]
        for mb in range(-(-rows[grp] // TM)):
            for ri in range(TM):
                row = mb * TM + ri
                valid = row < rows[grp]
                for kb in range(k // 128):
                    s = float(a_scale[grp, row, kb]) if valid else 1.0
                    if valid and not (s == 0.0 or SCALE_MIN <= abs(s) <= SCALE_MAX):
                        gate = True
                    for st in range(2):
                        ks = 2 * kb + st
                        x = (a_fp8[grp, row, ks * 64:(ks + 1) * 64].to(torch.float16) if valid
                             else torch.zeros(64, dtype=torch.float16))
                        if s == 0.0:
                            x = x * 0  # keeps NaN
                        for c in range(8):
                            off = a_image_offset(grp, mb, ks, ri, c, m_tiles, ks_count) // 2
                            a_img[off:off + 8] = x[8 * c: 8 * c + 8]
    return a_img, b_img, gate


def stage_through_descriptor(img, base_elems, rows):
    """[rows, 64] logical elements of one stage image, as the K-major 128-byte-swizzle descriptor
    reads them (ptx_model.sw128_offset)."""
    idx = torch.tensor([[base_elems + sw128_offset(r, kk, rows) // 2 for kk in range(64)] for r in range(rows)])
    return img[idx]


def prepared_gemm(a_img, b_img, a_scale, masked_m, n):
    """c as prepared_gemm computes it: per 128-K block T = A B'^T (exact products, fp32 sums), one
    accumulator a tile multiplied by e_kb / e_kb+1 between blocks (a zero scale keeps e), times
    e_last at the end, in fp32; rows past masked_m zero."""
    g, max_m, kb_count = a_scale.shape
    ks_count, m_tiles = 2 * kb_count, -(-max_m // TM)
    rows = clamp_rows(masked_m, max_m)
    c = torch.zeros(g, max_m, n, dtype=torch.bfloat16)
    for grp in range(g):
        for mb in range(-(-rows[grp] // TM)):
            for nb in range(n // TN):
                def block(kb):
                    t = torch.zeros(TM, TN, dtype=torch.float64)
                    for ks in (2 * kb, 2 * kb + 1):
                        a = stage_through_descriptor(a_img, (((grp * m_tiles + mb) * ks_count + ks) * TM) * 64, TM)
                        b = stage_through_descriptor(b_img, ((grp * (n // TN) + nb) * ks_count + ks) * TN * 64, TN)
                        t += a.double() @ b.double().T
                    return t.float()
                r = torch.arange(mb * TM, mb * TM + TM)
                valid = r < rows[grp]
                s = torch.where(valid[:, None], a_scale[grp, r.clamp(max=max_m - 1)], torch.zeros(()))
                e = torch.where(s[:, 0] != 0, s[:, 0], torch.ones(()))
                acc = block(0)
                for kb in range(1, kb_count):
                    f = torch.where(s[:, kb] != 0, s[:, kb], e)
                    acc = acc * (e / f)[:, None] + block(kb)
                    e = f
                out = (acc * e[:, None]).to(torch.bfloat16)
                lo, hi = mb * TM, min(mb * TM + TM, rows[grp])
                c[grp, lo:hi, nb * TN:(nb + 1) * TN] = out[:hi - lo]
    return c


def test_image_offsets_are_what_the_descriptor_reads():
    """Every logical (row, k) of a stage has its own 2 bytes, where sw128_offset reads it."""
    for rows, offset in ((TN, lambda r, c: b_image_offset(0, r, 0, c, TN, 1)),
                         (TM, lambda r, c: a_image_offset(0, 0, 0, r, c, 1, 1))):
        seen = set()
        for r in range(rows):
            for kk in range(64):
                off = offset(r, kk // 8) + 2 * (kk % 8)
                assert off == sw128_offset(r, kk, rows)
                seen.add(off)
        assert seen == set(range(0, rows * 128, 2))


def small_inputs(max_m, masked_m, seed=0, how="quantized"):
    a, a_s, b, b_s, mm = grouped_inputs(max_m, masked_m, n=TN, k=256, seed=seed)[:5]
    if how == "a_scale_spread":
        a_s = spread_a_scale(a_s, seed=seed)
    return a, a_s, b, b_s, mm


# whole calls of a form with a first pass (this one and the register-weights form's model) against
# the float64 oracle: max_m, masked_m, how the inputs are drawn (small_inputs)
FORM_CASES = pytest.mark.parametrize("max_m, masked_m, how", [
    (130, [130, 1, 0, 129], "quantized"),
    (130, [130, 77, 128, 6], "a_scale_spread"),
    (5, [5, -3, 9, 2], "quantized"),
], ids=["quantized", "a_scale_spread", "odd_max_m"])


@FORM_CASES
def test_prepared_form_is_the_definitions_sum(max_m, masked_m, how):
    inputs = small_inputs(max_m, masked_m, seed=3, how=how)
    a_img, b_img, gate = prepare(*inputs)
    assert not gate
    c = prepared_gemm(a_img, b_img, inputs[1], inputs[4], TN)
    o64 = grouped_gemm_oracle(*inputs)
    assert torch.isclose(c.double(), o64, atol=1e-2, rtol=1e-2).all()


@pytest.mark.parametrize("what", ["b_scale_not_whole", "b_scale_not_power_of_two", "a_scale_past_rescale",
                                  "a_scale_nan"])
def test_gate_sends_scales_the_rescale_cannot_take_to_the_fallback(what):
    a, a_s, b, b_s, mm = small_inputs(5, [5, 1, 0, 2], seed=4)
    if what == "b_scale_not_whole":
        b_s[1, 7, 3] = 2.0 ** 14
    if what == "b_scale_not_power_of_two":
        b_s[0, 200, 0] = 0.75
    if what == "a_scale_past_rescale":
        a_s[3, 1, 1] = SCALE_MAX * 2
    if what == "a_scale_nan":
        a_s[0, 4, 0] = float("nan")
    assert prepare(a, a_s, b, b_s, mm)[2]


def test_gate_ignores_rows_past_masked_m_and_groups_without_rows():
    a, a_s, b, b_s, mm = small_inputs(5, [5, 1, 0, 2], seed=4)
    a_s[1, 3, 0] = float("nan")  # row 3 of group 1: past masked_m
    b_s[2, 5, 1] = 0.75          # group 2 holds no rows
    assert not prepare(a, a_s, b, b_s, mm)[2]


def gate_words_read(words, threads):
    """The gate words each thread of a CTA reads in gate_set (ported): 16-byte loads i = tid,
    tid + threads, ... of the words / 4 whole ones, then the last words % 4 words one at a time."""
    body = re.search(r"bool gate_set\(.*?\n}\n", HDR, re.S).group(0)
    assert "i < words / 4; i += threads" in body and "i = words / 4 * 4 + tid; i < words; i += threads" in body
    reads = []
    for tid in range(threads):
        mine = [4 * i + j for i in range(tid, words // 4, threads) for j in range(4)]
        mine += list(range(words // 4 * 4 + tid, words, threads))
        reads.append(mine)
    return reads


@pytest.mark.parametrize("words", [0, 1, 3, 4, 5, 383, 384, 385, 1538, 3072, 4099])
def test_gate_read_covers_every_word_once(words):
    reads = [w for mine in gate_words_read(words, 384) for w in mine]
    assert sorted(reads) == list(range(words))


def prepared_tile_of(tile, rows, max_m, nb, tm):
    """tile_of (ported): the tiles with rows first (group-major, m-tiles, column blocks fastest),
    then those wholly past masked_m; (group, m-tile, column block, rows)."""
    mt = -(-max_m // tm)
    busy = sum(-(-r // tm) * nb for r in rows)
    zero = tile >= busy
    j = tile - busy if zero else tile
    for gi, r in enumerate(rows):
        full = -(-r // tm)
        here = (mt - full if zero else full) * nb
        if j < here:
            return gi, (full if zero else 0) + j // nb, j % nb, r
        j -= here
    raise AssertionError("tile past the list")


STAGES = int(re.search(r"constexpr int STAGES = (\d+);", HDR).group(1))


@pytest.mark.parametrize("max_m, masked_m, grid, k", [
    (2048, [1416, 1616, 1382, 1688], 132, 2048), (512, [512] * 4, 132, 2048), (4096, [870, 900, 850, 880], 132, 2048),
    (1024, [-7, 1100, 0, 300], 132, 2048), (300, [0, 0, 0, 0], 132, 2048), (2048, [2048] * 4, 7, 2048),
    (2048, [2048, 1500, 0, 1900], 132, 384), (2048, [2048, 1500, 0, 1900], 132, 128)])
def test_persistent_walk_fills_each_tile_once_and_its_last_block_holds_two_adjacent_slots(max_m, masked_m, grid, k):
    """prepared_gemm's walk (ported): CTA b takes tiles b, b + grid, ...; the producer issues KS
    stages a tile with rows and stops at the first tile without, the consumers take the same
    stages in order and store zeros for the rest; the epilogue stages its rows in the last
    block's two slots, which must be adjacent."""
    body = re.search(r"prepared_gemm\(.*?\n}\n", HDR, re.S).group(0)
    source_has(body, "for (int tl = blockIdx.x; tl < tiles; tl += gridDim.x) {",
               "if (tile.y * TM >= tile.w) break;", "const int s = it % STAGES;",
               "const uint32_t out = base + slot[0] * STAGE + cw * 64 * OUT_PITCH;",
               "mbar_arrive(bars + STAGES + slot[1]);")
    n = 2048
    nb, ks_count, rows = n // TN, k // 64, clamp_rows(masked_m, max_m)
    tiles = len(masked_m) * -(-max_m // TM) * nb
    seen = []
    for cta in range(min(grid, tiles)):
        produced = []  # the producer: stages of the tiles with rows, stopping at the first without
        for tl in range(cta, tiles, grid):
            g, mb, c, r = prepared_tile_of(tl, rows, max_m, nb, TM)
            if mb * TM >= r:
                break
            produced += [(tl, ks) for ks in range(ks_count)]
        consumed, it = [], 0  # the consumers: every tile, zeros stored for those without rows
        for tl in range(cta, tiles, grid):
            g, mb, c, r = prepared_tile_of(tl, rows, max_m, nb, TM)
            seen.append((g, mb, c))
            if mb * TM >= r:
                continue
            consumed += [(tl, ks) for ks in range(ks_count)]
            slots = [(it + ks) % STAGES for ks in range(ks_count)]
            it += ks_count
            assert slots[-1] == slots[-2] + 1  # the last block's two slots, adjacent
        assert produced == consumed  # the producer's break skips no tile with rows the consumers take
    assert sorted(seen) == sorted({(g, m, c) for g in range(len(masked_m))
                                   for m in range(-(-max_m // TM)) for c in range(nb)})
