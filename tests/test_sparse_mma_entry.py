"""The sparse CUDA solution without a GPU: every bad argument is refused by name before anything
is built, a CPU tensor is refused as not on a Hopper GPU, the path table covers every m, and
a model of the few-rows kernel's group decode and K order (sparse_mma.cu) holds for every
a_vals and a_meta byte, and a model of its word decode (word_f16 with lut_entry's selector table)
gives group_f16's values for every a_vals and a_meta byte at every group slot of a word."""

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from lowbit_gemm.solutions import load_solution
from ptx_model import M32, f2h, h2f, prmt, prmt_np, source_has

DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
main = load_solution(DEF, "lowbit", "cuda_sparse_fp4_mma")
heuristics = load_solution(DEF, "lowbit", "cuda_sparse_fp4_mma", entry="heuristics")

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
CU = Path(__file__).resolve().parents[1] / "solutions/lowbit/gemm" / DEF / "cuda_sparse_fp4_mma/sparse_mma.cu"
SRC = CU.read_text()


def has(*lines):
    source_has(SRC, *lines)


def inputs(m=8, n=2048, k=2048):
    return (torch.zeros(m, k // 4, dtype=torch.uint8), torch.zeros(m, k // 4, dtype=torch.uint8),
            torch.zeros(n, k, dtype=torch.float8_e4m3fn), torch.empty(m, n, dtype=torch.bfloat16))


@pytest.mark.parametrize("position, bad, match", [
    (0, torch.zeros(8, 512, dtype=torch.float16), "a_vals"),
    (0, torch.zeros(8, 500, dtype=torch.uint8), "a_vals"),
    (1, torch.zeros(8, 512, dtype=torch.int32), "a_meta"),
    (2, torch.zeros(2048, 1000, dtype=torch.float8_e4m3fn), "b_fp8"),
    (2, torch.zeros(1024, 2048, dtype=torch.float8_e4m3fn), "b_fp8"),
    (3, torch.empty(8, 2048, dtype=torch.float32), "c"),
    (3, torch.empty(8, 2048, dtype=torch.bfloat16).t().contiguous().t(), "c"),
])
def test_bad_arguments_are_named(position, bad, match):
    args = list(inputs())
    args[position] = bad
    with pytest.raises(ValueError, match=match):
        main.run(*args)


def test_cpu_tensors_are_refused_as_not_hopper():
    with pytest.raises(ValueError, match="Hopper"):
        main.run(*inputs())


@pytest.mark.parametrize("tile", [(3, 2), (1, 16), "1x2", 4])
def test_a_tile_the_kernel_lacks_is_named(tile):
    with pytest.raises(ValueError, match="tile"):
        main.sparse_gemm_fp4_fp8(*inputs(), tile=tile)


def test_every_m_has_a_path():
    for m in itertools.chain(range(1, 300), (1000, 2048, 4096, 8192, 1 << 20)):
        tile = heuristics.choose(m, 2048)
        assert tile in heuristics.PATHS or tile in heuristics.TILES, (m, tile)
        # the sparse-MMA kernel's tiles need n % 128 == 0: other n take the dense path
        assert heuristics.choose(m, 2000) not in heuristics.SPARSE_MMA, m
        # the K split takes k / 128 stages in two halves: an odd count keeps the whole tile a CTA
        assert heuristics.SPARSE_MMA.get(heuristics.choose(m, 2048, 132, 384), (1, 128, 1))[2] == 1, m


def test_k_split_only_where_its_tiles_fit_one_wave():
    for m in (193, 256):  # 2 token tiles x 32 tiles of 64 weight rows x 2 halves of K: 128 CTAs
        assert heuristics.choose(m, 2048, 132) == "wgmma_sp_128_n64_k2", m
    for m in (257, 512):
        assert heuristics.choose(m, 2048, 132) == "wgmma_sp_128_k2", m
    assert heuristics.choose(513, 2048, 132) == "wgmma_sp_128"
    assert heuristics.choose(256, 2048, 60) == "wgmma_sp_128"  # 64 split tiles, 60 SMs


def group_f16_model(v: int, meta: int):
    """group_f16 in sparse_mma.cu, on integers: (lo, hi) f16x2 words of the group's values at
    positions 0, 1 and 2, 3."""
    h0 = ((v & 7) << 9) | ((v & 8) << 12)
    h1 = ((v & 0x70) << 5) | ((v & 0x80) << 8)
    s0 = h0 << (16 * (meta & 3))
    s1 = h1 << (4 * (meta & 12))
    halves = []
    for shift in (0, 16, 32, 48):
        a, b = (s0 >> shift) & 0xFFFF, (s1 >> shift) & 0xFFFF
        halves.append(np.float16(np.float16(h2f(a)) + np.float16(h2f(b))) * np.float16(16384.0))
    return [float(x) for x in halves]


def test_group_decode_for_every_vals_and_meta_byte():
    # the definition: value of code c is sign * E2M1[c & 7]; slot p holds the sum of the codes
    # whose position is p; bits 4-7 of a_meta are ignored
    for v, meta in itertools.product(range(256), range(256)):
        want = [0.0] * 4
        for code, pos in ((v & 15, meta & 3), (v >> 4, (meta >> 2) & 3)):
            want[pos] += (-1.0 if code & 8 else 1.0) * E2M1[code & 7]
        assert group_f16_model(v, meta) == want, (v, meta)


def test_fragment_k_order_covers_each_chunk_once():
    # thread t's fragment columns 2t, 2t+1, 2t+8, 2t+9 of k16 step s stand for K 16t + 4s + 0..3
    # of a 64-wide chunk: for both operands, every K of the chunk exactly once
    seen = sorted(16 * t + 4 * s + j for t in range(4) for s in range(4) for j in range(4))
    assert seen == list(range(64))


def test_few_rows_tiles_by_rows():
    # 17-24 rows: 16 B rows and 8 tokens a CTA; 25-32: 16 tokens; from 33: 64 B rows a CTA
    assert [heuristics.choose(m, 2048) for m in (16, 17, 24, 25, 32, 33, 128)] == [
        (1, 2), (1, 1), (1, 1), (1, 2), (1, 2), (4, 2), (4, 2)]


# ---------------------------------------------------------------- word_f16 (few-rows kernel's A decode)

def lut_entry_model(i: int):
    """lut_entry(i) in sparse_mma.cu: (sel_lo, sel_hi), the uint2's x and y."""
    p0, p1 = i & 3, i >> 2
    code = [0x54 if p0 == j and p1 == j else 0x10 if p0 == j else 0x32 if p1 == j else 0x00 for j in range(4)]
    return code[0] | (code[1] << 8), code[2] | (code[3] << 8)


def shared_lut(lut: int):
    """Shared memory bytes 0 .. lut + 127 after `lut[threadIdx.x] = lut_entry(threadIdx.x)` for
    threadIdx.x < 16 (uint2 lut[16] at byte address lut, little-endian); every other byte 0xa5."""
    smem = np.full(lut + 128, 0xA5, dtype=np.int64)
    for i in range(16):
        for w, word in enumerate(lut_entry_model(i)):
            smem[lut + 8 * i + 4 * w: lut + 8 * i + 4 * w + 4] = [(word >> (8 * b)) & 0xFF for b in range(4)]
    return smem


def ld_shared_v2(smem, at):
    """ld.shared.v2.u32 {lo, hi}, [at] (an 8-byte aligned address)."""
    assert (at % 8 == 0).all()
    word = [sum(smem[at + 4 * w + b] << (8 * b) for b in range(4)) for w in range(2)]
    return word[0], word[1]


def add_halves_f16(x):
    """mov.b32 {a, b}, x; add.rn.f16 c, a, b; mov.b32 y, {c, c} (numpy fp16 add: exact here)."""
    h = np.stack([x & 0xFFFF, x >> 16]).astype(np.uint16).view(np.float16)
    c = (h[0] + h[1]).view(np.uint16).astype(np.int64)
    return c | (c << 16)


def word_f16_model(tv, tm, smem, lut, k_t=0xBEBCB880, k_one=0x01010101):
    """word_f16 in sparse_mma.cu on numpy arrays of words tv (a_vals), tm (a_meta): lo[s], hi[s]
    for the 4 groups s, and each group's lut entry address at[s]."""
    mag = tv & 0x77777777
    off = (tm << 3) & 0x78787878
    p = []
    for h in range(2):
        t = prmt_np(k_t, 0xC6C4C2C0, (mag >> 16) if h else mag)
        sg = prmt_np(k_one, 0x01010101, (tv >> 16) if h else tv)
        p.append((t - (sg << 7)) & M32)
    lo, hi, ats = [], [], []
    for s in range(4):
        x = prmt_np(p[s >> 1], 0, 0x3424 if s & 1 else 0x1404)
        y = add_halves_f16(x)
        at = prmt_np(off, lut, 0x7650 + s)
        sel_lo, sel_hi = ld_shared_v2(smem, at)
        lo.append(prmt_np(x, y, sel_lo))
        hi.append(prmt_np(x, y, sel_hi))
        ats.append(at)
    return np.stack(lo), np.stack(hi), np.stack(ats)


def test_prmt_np_matches_prmt():
    """ptx_model's vectorised prmt equals its prmt for every 16-bit selector (so every nibble,
    sign-replicate mode included) on random pools, upper selector bits random (ignored)."""
    rng = np.random.default_rng(1)
    a, b = (rng.integers(0, 1 << 32, 1 << 16, dtype=np.int64) for _ in range(2))
    sel = np.arange(1 << 16, dtype=np.int64) | (rng.integers(0, 1 << 16, 1 << 16, dtype=np.int64) << 16)
    got = prmt_np(a, b, sel)
    assert all(int(g) == prmt(int(x), int(y), int(z)) for g, x, y, z in zip(got, a, b, sel))


def test_word_f16_model_follows_the_source():
    has("const uint32_t mag = tv & 0x77777777u;",
        "const uint32_t off = (tm << 3) & 0x78787878u;",
        "for (int h = 0; h < 2; ++h) {",
        "const uint32_t t = hopper::prmt(k_t, 0xc6c4c2c0u, h ? mag >> 16 : mag);",
        "const uint32_t sg = hopper::prmt(k_one, 0x01010101u, h ? tv >> 16 : tv);",
        "p[h] = t - (sg << 7);",
        "for (int s = 0; s < 4; ++s) {",
        "const uint32_t x = hopper::prmt(p[s >> 1], 0u, (s & 1) ? 0x3424u : 0x1404u);",
        r'asm("{\n.reg .b16 a, b, c;\nmov.b32 {a, b}, %1;\nadd.rn.f16 c, a, b;\nmov.b32 %0, {c, c};\n}\n" : "=r"(y) : "r"(x));',
        "const uint32_t at = hopper::prmt(off, lut, 0x7650u + s);",
        'asm("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(sel_lo), "=r"(sel_hi) : "r"(at));',
        "lo[s] = hopper::prmt(x, y, sel_lo);",
        "hi[s] = hopper::prmt(x, y, sel_hi);",
        # lut_entry
        "const int p0 = i & 3, p1 = i >> 2;",
        "for (int j = 0; j < 4; ++j) code[j] = (p0 == j && p1 == j) ? 0x54u : p0 == j ? 0x10u : p1 == j ? 0x32u : 0x00u;",
        "return make_uint2(code[0] | (code[1] << 8), code[2] | (code[3] << 8));",
        # the kernel: table, pools, and group s of the word feeding k16 step s
        "__shared__ __align__(256) uint2 lut[16];",
        "if (threadIdx.x < 16) lut[threadIdx.x] = lut_entry(threadIdx.x);",
        "const uint32_t lut_at = hopper::smem_addr(lut);",
        "uint32_t k_t = 0xbebcb880u, k_one = 0x01010101u;",
        "word_f16(tv[i][nt], tm[i][nt], lut_at, k_t, k_one, blo[nt], bhi[nt]);",
        "hopper::mma_m16n8k16(acc[mt][nt], af[mt], blo[nt][s], bhi[nt][s]);")
    assert "__launch_bounds__(KW * 32)" in SRC  # at least 32 threads: all 16 entries written


def test_word_f16_lut_address():
    """For every a_meta byte at every slot s (other bytes random) and 256-byte aligned lut bases:
    at = prmt(off, lut, 0x7650 + s) is lut + 8 * (meta & 15), the entry lut_entry(meta & 15)."""
    rng = np.random.default_rng(2)
    for lut in (0x0, 0x100, 0x2300, 0x37F00):
        smem = shared_lut(lut)
        for s in range(4):
            tm = (rng.integers(0, 1 << 32, 256, dtype=np.int64) & ~(0xFF << (8 * s))) | (np.arange(256) << (8 * s))
            tv = rng.integers(0, 1 << 32, 256, dtype=np.int64)
            _, _, at = word_f16_model(tv, tm, smem, lut)
            for s2 in range(4):
                assert (at[s2] == lut + 8 * ((tm >> (8 * s2)) & 15)).all(), (lut, s, s2)


def test_word_f16_for_every_vals_and_meta_byte_at_every_slot():
    """For every (a_vals byte, a_meta byte) at every group slot s of a word (other bytes random),
    word_f16's lo[s], hi[s] equal group_f16_model of that group, half by half and bit for bit,
    except one +0 / -0 difference, allowed only where it is the whole difference: word_f16 gives
    -0 (0x8000) where group_f16 gives +0 (0x0000), exactly at a position holding one code, code 8
    (-0), which word_f16 copies while group_f16 adds +0 to it (asserted to happen there and only
    there). Harmless: a product with -0 is +-0 and adds nothing to an fp32 sum that starts from
    +0. Clearing bits 4-7 of every a_meta byte changes no output bit."""
    want = np.zeros((2, 256, 256), dtype=np.int64)  # [lo / hi, a_vals byte, a_meta byte] bits
    for v, meta in itertools.product(range(256), range(256)):
        h = [f2h(x) for x in group_f16_model(v, meta)]
        want[:, v, meta] = h[0] | (h[1] << 16), h[2] | (h[3] << 16)
    rng = np.random.default_rng(3)
    pair = np.arange(1 << 16, dtype=np.int64)
    tv, tm = [], []
    for s in range(4):  # slot s of block s: every (v, meta) pair once
        keep = ~(0xFF << (8 * s))
        tv.append((rng.integers(0, 1 << 32, 1 << 16, dtype=np.int64) & keep) | ((pair >> 8) << (8 * s)))
        tm.append((rng.integers(0, 1 << 32, 1 << 16, dtype=np.int64) & keep) | ((pair & 0xFF) << (8 * s)))
    tv, tm = np.concatenate(tv), np.concatenate(tm)
    lut = 0x2300
    smem = shared_lut(lut)
    lo, hi, _ = word_f16_model(tv, tm, smem, lut)
    lo15, hi15, _ = word_f16_model(tv, tm & 0x0F0F0F0F, smem, lut)
    assert (lo == lo15).all() and (hi == hi15).all()
    for s in range(4):  # every slot of every word (the chosen pairs and the random bytes)
        v, meta = (tv >> (8 * s)) & 0xFF, (tm >> (8 * s)) & 0xFF
        for got, exp, half_pos in ((lo[s], want[0, v, meta], (0, 1)), (hi[s], want[1, v, meta], (2, 3))):
            for k, pos in enumerate(half_pos):
                g, w = (got >> (16 * k)) & 0xFFFF, (exp >> (16 * k)) & 0xFFFF
                # the position's codes: the low nibble's at meta & 3, the high nibble's at meta >> 2 & 3
                c0 = np.where((meta & 3) == pos, v & 15, -1)
                c1 = np.where(((meta >> 2) & 3) == pos, v >> 4, -1)
                lone_neg_zero = ((c0 == 8) & (c1 == -1)) | ((c1 == 8) & (c0 == -1))
                bad = np.flatnonzero((g != w) & ~(lone_neg_zero & (w == 0) & (g == 0x8000)))
                assert bad.size == 0, [(s, pos, int(v[i]), int(meta[i]), hex(g[i]), hex(w[i])) for i in bad[:5]]
                # where a lone code 8 sits, the difference does occur (word_f16 -0, group_f16 +0)
                assert (g[lone_neg_zero] == 0x8000).all() and (w[lone_neg_zero] == 0).all()
