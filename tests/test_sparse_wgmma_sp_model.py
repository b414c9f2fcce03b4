"""CPU model of the sparse CUDA solution's sparse-MMA path (cuda_sparse_fp4_mma/sparse_wgmma_sp.cuh;
its layouts modelled in tests/sparse_wgmma_sp_layout.py):
- canon(): for every a_vals byte and every a_meta byte, the kernel's bit operations (prmt
  table, sign bits, f16x2 add, selects) give the canonical pair the layout model gives, and it
  expands to the group the definition means (repeated positions summed, bits 4-7 ignored);
- the prep launch's thread arithmetic (A: 64-row block, stage, thread -> swizzled chunk and
  metadata half-word; B: output chunk -> its 8 input bytes) writes the layout model's arrays;
- the MMA kernel's producer copies and consumers' descriptors and metadata loads read back the
  definition's dense A and B for every stage of every tile, for both tiles (128 / 256 tokens),
  and the persistent schedule visits every tile once;
- the ring protocol (full / empty mbarriers, per-warp releases, wait_group 1, the two metadata
  register sets) under random interleavings (and wait_group 0, as a reference): no slot is
  overwritten under unretired MMAs and no metadata register set is rewritten before the
  wait_group that retires the MMAs reading it (the metadata is a register operand of the
  asynchronous MMA, read while it runs)."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import sparse_wgmma_sp_layout as lay  # noqa: E402
import ptx_model  # noqa: E402
from ptx_model import f2h, h2f, source_has  # noqa: E402

CU = ROOT / "solutions/lowbit/gemm/sparse_gemm_fp4_fp8_n2048_k2048/cuda_sparse_fp4_mma/sparse_wgmma_sp.cuh"
SRC = CU.read_text()
E2M1 = lay.E2M1
VALID_NIBBLES = {i0 | (i1 << 2) for i0 in range(4) for i1 in range(4) if i0 < i1}


def has(*lines):
    source_has(SRC, *lines)


# ---------------------------------------------------------------- canon

def prmt(a, b, sel):
    """ptx_model.prmt, with canon's selectors checked to pick bytes only (no sign replicate)."""
    assert all((sel >> (4 * i)) & 8 == 0 for i in range(4))
    return ptx_model.prmt(a, b, sel)


def hadd2(a, b):
    lo = np.float16(h2f(a & 0xFFFF)) + np.float16(h2f(b & 0xFFFF))
    hi = np.float16(h2f(a >> 16)) + np.float16(h2f(b >> 16))
    return f2h(lo) | (f2h(hi) << 16)


def canon_bits(v, me):
    """The .cuh's canon() on integers: (f16x2 bits, nibble)."""
    sel = ((v & 7) << 4) | ((v & 0x70) << 8)
    x = prmt(0x3E3C3800, 0x46444240, sel) | ((v & 8) << 12) | ((v & 0x80) << 24)
    y = prmt(x, x, 0x1032)
    s = hadd2(x, y)
    p0, p1 = me & 3, (me >> 2) & 3
    same = (s & 0xFFFF) if p0 < 3 else (s & 0xFFFF0000)
    same_nib = (p0 | (3 << 2)) if p0 < 3 else (2 | (3 << 2))
    nib = (p0 | (p1 << 2)) if p0 < p1 else (p1 | (p0 << 2)) if p0 > p1 else same_nib
    return (x if p0 < p1 else y if p0 > p1 else same), nib


def test_canon_model_follows_the_source():
    has("const uint32_t sel = ((v & 7u) << 4) | ((v & 0x70u) << 8);",
        "const uint32_t x = prmt(0x3e3c3800u, 0x46444240u, sel) | ((v & 8u) << 12) | ((v & 0x80u) << 24);",
        "const uint32_t y = prmt(x, x, 0x1032u);",
        "const uint32_t s = hadd2_u(x, y);",
        "const uint32_t same = p0 < 3u ? (s & 0xffffu) : (s & 0xffff0000u), same_nib = p0 < 3u ? (p0 | (3u << 2)) : (2u | (3u << 2));",
        "nib = p0 < p1 ? (p0 | (p1 << 2)) : p0 > p1 ? (p1 | (p0 << 2)) : same_nib;",
        "return p0 < p1 ? x : p0 > p1 ? y : same;")


def test_canon_every_byte_pair():
    """All 256 x 256 (a_vals byte, a_meta byte): the kernel's bits equal the layout model's
    canon (bit for bit, signs of zeros included), and the pair expands to the definition's group."""
    v = torch.arange(256).repeat_interleave(256)
    me = torch.arange(256).repeat(256)
    lo, hi, nib = lay.canon(v, me)
    lo_bits = lo.to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF
    hi_bits = hi.to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF
    for idx in range(v.numel()):
        vi, mi = int(v[idx]), int(me[idx])
        bits, nb = canon_bits(vi, mi)
        assert nb in VALID_NIBBLES
        assert (bits & 0xFFFF, bits >> 16, nb) == (int(lo_bits[idx]), int(hi_bits[idx]), int(nib[idx])), (vi, mi)
        dense = [0.0] * 4
        dense[mi & 3] += E2M1[vi & 15]
        dense[(mi >> 2) & 3] += E2M1[(vi >> 4) & 15]
        got = [0.0] * 4
        got[nb & 3] += h2f(bits & 0xFFFF)
        got[nb >> 2] += h2f(bits >> 16)
        assert got == dense, (vi, mi)


# ---------------------------------------------------------------- prep thread arithmetic

def small_inputs(m, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    a_vals = torch.randint(-128, 128, (m, k // 4), generator=g, dtype=torch.int8)
    a_meta = torch.randint(-128, 128, (m, k // 4), generator=g, dtype=torch.int8)
    x = torch.randn(n, k, generator=g)
    b = (x * (448.0 / x.abs().max())).clamp(-448, 448).to(torch.float8_e4m3fn)
    return a_vals, a_meta, b


def prep_emulated(a_vals, a_meta, b, m_pad):
    """The prep kernel's index arithmetic, thread by thread (vectorised over threads), writing
    the canonical values and nibbles the layout model's canon gives."""
    m, g = a_vals.shape
    k, n = 4 * g, b.shape[0]
    kt = k // 128
    a_c = torch.zeros(kt * m_pad * 128, dtype=torch.uint8)
    meta = torch.zeros(kt * (m_pad // 64) * 1024, dtype=torch.uint8)
    v_all = a_vals.view(torch.uint8).to(torch.int64)
    me_all = a_meta.view(torch.uint8).to(torch.int64)
    t = torch.arange(128)
    for blk in range((m_pad // 64) * kt):
        mb, ks = blk // kt, blk % kt                     # const int mb = blockIdx.x / KT, ks = blockIdx.x % KT;
        rr, hs = t >> 1, t & 1
        row = mb * 64 + rr
        grp = ks * 32 + hs.view(-1, 1) * 16 + torch.arange(16).view(1, -1)   # off = row * (k / 4) + ks * 32 + hs * 16
        ok = (row < m).view(-1, 1)
        v = torch.where(ok, v_all[row.clamp(max=m - 1)].gather(1, grp), torch.zeros_like(grp))
        me = torch.where(ok, me_all[row.clamp(max=m - 1)].gather(1, grp), torch.zeros_like(grp))
        lo, hi, nib = lay.canon(v, me)                   # [thread, 16 groups]: group 4 q + e of the half
        halves = torch.stack([lo, hi], -1).to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF
        sa = torch.zeros(64 * 128, dtype=torch.uint8)
        sm = torch.zeros(64 * 4 * 2, dtype=torch.int64)
        w, lq, half = rr >> 4, rr & 7, (rr >> 3) & 1
        for q in range(4):
            c = 4 * hs + q
            chunk = halves[:, 4 * q:4 * q + 4].reshape(128, 8)
            dst = rr * 128 + ((c ^ (rr & 7)) << 4)       # st_shared16(sa + rr * 128 + ((c ^ (rr & 7)) << 4), out)
            for b_ in range(16):
                sa[dst + b_] = ((chunk[:, b_ // 2] >> (8 * (b_ % 2))) & 255).to(torch.uint8)
            nib16 = sum(nib[:, 4 * q + e] << (4 * e) for e in range(4))
            u, j = 16 * w + 2 * lq + (c & 1), c >> 1
            sm[(u * 4 + j) * 2 + half] = nib16
        a_c[(ks * m_pad + mb * 64) * 128:][:8192] = sa
        words = sm.view(-1, 2)
        wb = words[:, 0] | (words[:, 1] << 16)
        meta[(ks * (m_pad // 64) + mb) * 1024:][:1024] = torch.stack([(wb >> (8 * i)) & 255 for i in range(4)], -1).reshape(-1).to(torch.uint8)
    # B: output chunk o -> j = o & 7, r = (o >> 3) & 127, atom = (o >> 10) & 1, ks = (o >> 11) % KT, nb = (o >> 11) / KT;
    # its 8 halves are K 64 atom + 8 (j ^ (r & 7)) .. + 7 of stage ks, weight row 128 nb + r
    bh = b.to(torch.float16).view(torch.uint8).reshape(-1)   # row-major [n, k] halves as bytes
    o = torch.arange(n * k // 8)
    j, r, atom, ks, nb = o & 7, (o >> 3) & 127, (o >> 10) & 1, (o >> 11) % kt, (o >> 11) // kt
    src = ((nb * 128 + r) * k + ks * 128 + atom * 64 + 8 * (j ^ (r & 7))) * 2   # 8 input bytes = 16 bytes of halves
    b16 = bh[src.view(-1, 1) + torch.arange(16).view(1, -1)].reshape(-1)      # chunk o at bytes 16 o ..
    return a_c, meta, b16


def test_prep_emulation_follows_the_source():
    has("const int mb = blockIdx.x / KT, ks = blockIdx.x % KT;",
        "const int rr = t >> 1, hs = t & 1, row = mb * 64 + rr;",
        "const size_t off = static_cast<size_t>(row) * (k / 4) + ks * 32 + hs * 16;",
        "out[e] = canon((vw[q] >> (8 * e)) & 0xffu, (mw[q] >> (8 * e)) & 0xffu, nib);",
        "const int c = 4 * hs + q;",
        "st_shared16(smem_addr(sa) + rr * 128 + ((c ^ (rr & 7)) << 4), out);",
        "const int u = 16 * w + 2 * lq + (c & 1), j = c >> 1;",
        "sm[(u * 4 + j) * 2 + half] = static_cast<uint16_t>(nib16);",
        "const int w = rr >> 4, lq = rr & 7, half = (rr >> 3) & 1;",
        "uint4* dst = reinterpret_cast<uint4*>(a_c + (static_cast<size_t>(ks) * m_pad + mb * 64) * 128);",
        "reinterpret_cast<uint4*>(meta + (static_cast<size_t>(ks) * (m_pad / 64) + mb) * 1024)[t] = ld_shared16(smem_addr(sm) + t * 16);",
        "const int j = o & 7, r = (o >> 3) & 127, atom = (o >> 10) & 1, ks = (o >> 11) % KT, nb = (o >> 11) / KT;",
        "const size_t src = static_cast<size_t>(nb * 128 + r) * k + ks * 128 + atom * 64 + 8 * (j ^ (r & 7));",
        "reinterpret_cast<uint4*>(b16)[o] = make_uint4(e4m3x2_to_f16x2(in[it].x), e4m3x2_hi_to_f16x2(in[it].x),",
        "constexpr int M_ALIGN = 256;")


def test_prep_kernel_writes_the_layout_model():
    m, n, k = 100, 256, 256
    a_vals, a_meta, b = small_inputs(m, n, k, seed=1)
    mp = lay.m_pad_of(m)
    want = lay.prep_reference(a_vals, a_meta, b)
    got = prep_emulated(a_vals, a_meta, b, mp)
    for name, x, y in zip(("a_c", "meta", "b16"), got, want):
        assert x.shape == y.shape, name
        bad = (x != y).nonzero()
        assert bad.numel() == 0, (name, bad[:8].flatten().tolist())


# ---------------------------------------------------------------- MMA kernel's reads

def dense_a(a_vals, a_meta, m_pad):
    v = a_vals.view(torch.uint8).to(torch.int64)
    me = a_meta.view(torch.uint8).to(torch.int64)
    m, g = v.shape
    lut = torch.tensor(E2M1, dtype=torch.float64)
    d = torch.zeros(m_pad, g, 4, dtype=torch.float64)
    for slot in range(2):
        d[:m].scatter_add_(2, ((me >> (2 * slot)) & 3).unsqueeze(-1), lut[(v >> (4 * slot)) & 15].unsqueeze(-1))
    return d.reshape(m_pad, 4 * g)


def test_mma_model_follows_the_source():
    has("constexpr int B_ROWS = 128;", "constexpr int B_ATOM = B_ROWS * 128;",
        "static constexpr int B_TILE_ATOM = BN * 128;", "static constexpr int B_STAGE = 2 * B_TILE_ATOM;",
        "static constexpr int BM = 128 * MW;",
        "static constexpr int STAGE = A_BYTES + B_STAGE + M_BYTES;",
        "bulk_g2s(sb, a_c + (static_cast<size_t>(ks) * m_pad + m0) * 128, C::A_BYTES, fb);",
        "bulk_g2s(sb + C::A_BYTES + C::B_STAGE, meta + (static_cast<size_t>(ks) * (m_pad / 64) + m0 / 64) * 1024, C::M_BYTES, fb);",
        "const uint8_t* bsrc = b16 + ((static_cast<size_t>(nt * BN / B_ROWS) * KT + ks) * 2 * B_ROWS + (nt * BN) % B_ROWS) * 128;",
        "bulk_g2s(sb + C::A_BYTES, bsrc, C::B_STAGE, fb);",
        "bulk_g2s(sb + C::A_BYTES, bsrc, C::B_TILE_ATOM, fb);",
        "bulk_g2s(sb + C::A_BYTES + C::B_TILE_ATOM, bsrc + B_ATOM, C::B_TILE_ATOM, fb);",
        "const int u = 16 * w + 2 * g + (l & 1);",
        "const uint64_t da0 = b_desc(base + cw * MW * 64 * 128), db0 = b_desc(base + C::A_BYTES);",
        "mt[i] = ld_shared16(sb + C::A_BYTES + C::B_STAGE + ((cw * MW + i) * 64 + u) * 16);",
        "const uint64_t db = db0 + off + (((j >> 1) * C::B_TILE_ATOM + (j & 1) * 64) >> 4);",
        "wgmma_sp(acc[i], da0 + off + ((i * 64 * 128 + 32 * j) >> 4), db, mj, (kk | j) != 0);",
        "const int row = m0 + (cw * MW + i) * 64 + 16 * w + g + 8 * h;",
        "const int tile = t / splits, m0 = (tile / NT) * C::BM, n0 = (tile % NT) * BN;",
        "const int tile = t / splits, m0 = (tile / NT) * C::BM, nt = tile % NT, k0 = (t % splits) * KS;",
        "for (int t = blockIdx.x; t < items; t += gridDim.x) {",
        "const int items = (m + C::BM - 1) / C::BM * NT * splits;",
        "const int per = C::BM / splits, r0 = static_cast<int>(cluster_rank()) * per, tt = tid - 128;",
        "float4 sum = ld_cluster_f4(at, 0);",
        "for (int p = 1; p < splits; ++p) {",
        "attr[1].val.clusterDim.x = static_cast<unsigned>(splits);",
        "cfg.gridDim = dim3(static_cast<unsigned>(splits > 1 || items < sms[dev] ? items : sms[dev]));")
    # the A descriptor's m64 blocks: consumer cw, block i at (cw * MW + i) * 8192, as mma_view reads them
    assert re.search(r"cw \* MW \* 64 \* 128", SRC) and "i * 64 * 128" in SRC


@pytest.mark.parametrize("mw,splits,bn", [(1, 1, 128), (2, 1, 128), (1, 2, 128), (1, 2, 64)])
def test_stages_read_back_dense_operands(mw, splits, bn):
    m, n, k = 300, 256, 512
    a_vals, a_meta, b = small_inputs(m, n, k, seed=2)
    mp = lay.m_pad_of(m)
    a_c, meta, b16 = lay.prep_reference(a_vals, a_meta, b)
    ad = dense_a(a_vals, a_meta, mp)
    bd = b.to(torch.float64)
    bm = 128 * mw
    grid = 4 if splits == 1 else -(-m // bm) * (n // bn) * splits  # split: one item a CTA
    sched = lay.tile_schedule(m, n, mw, grid, k // 128, splits, bn)
    partial = {}  # (m0, n0) -> each rank's partial tile, as the ring holds it before the cluster barrier
    for cta, m0, n0, k0, stages in sched:
        assert m0 + bm <= mp  # the producer's copies stay inside the prepared rows
        rank = cta % splits   # the cluster's CTAs are consecutive, one a split
        acc = torch.zeros(bm, bn, dtype=torch.float64)
        for ks in range(k0, k0 + stages):
            st = lay.stage_image(a_c, meta, b16, mp, n, k, mw, m0, n0 // bn, ks, bn)
            assert st.numel() == bm * 128 + 2 * bn * 128 + bm * 16
            av, bv = lay.mma_view(st, mw, bn)
            assert torch.equal(av, ad[m0:m0 + bm, ks * 128:(ks + 1) * 128]), (m0, ks)
            assert torch.equal(bv, bd[n0:n0 + bn, ks * 128:(ks + 1) * 128]), (n0, ks)
            acc += av @ bv.T
        assert (m0, n0, rank) not in partial
        partial[m0, n0, rank] = acc
    c = torch.full((mp, n), float("nan"), dtype=torch.float64)
    for (m0, n0, rank) in partial:  # each rank stores its rows, the partials summed in rank order
        rows = lay.split_rows(bm, splits, rank)
        total = sum(partial[m0, n0, p][rows.start:rows.stop] for p in range(splits))
        c[m0 + rows.start:m0 + rows.stop, n0:n0 + bn] = total
    assert torch.equal(c[:m], ad[:m] @ bd.T)


@pytest.mark.parametrize("m,mw,grid", [(1000, 1, 132), (1000, 2, 132), (4100, 2, 132), (8192, 2, 132), (8192, 1, 130),
                                       (257, 1, 114), (64, 2, 4), (1, 1, 1)])
def test_schedule_visits_every_tile_once(m, mw, grid):
    n, bm = 2048, 128 * mw
    seen = [(m0, n0) for _, m0, n0, k0, stages in lay.tile_schedule(m, n, mw, grid)]
    assert all((k0, stages) == (0, 16) for *_, k0, stages in lay.tile_schedule(m, n, mw, grid))
    mtiles = -(-m // bm)
    want = {(mt * bm, nt * 128) for mt in range(mtiles) for nt in range(n // 128)}
    assert sorted(seen) == sorted(want)
    assert all(m0 + bm <= lay.m_pad_of(m) for m0, _ in seen)


# ---------------------------------------------------------------- pipeline protocol

def test_pipeline_protocol_follows_the_source():
    # every consumer thread arrives (the ring below models a warp's 32 arrivals as one step)
    has("static constexpr int EMPTY_ARRIVALS = 256;",
        "mbar_init(bars + C::STAGES + s, C::EMPTY_ARRIVALS);",
        "auto release = [&](int sl) { mbar_arrive(bars + C::STAGES + sl); };",
        "      wgmma_wait<0>();",
        "        wgmma_wait<1>();",
        "        for (int i = 0; i < MW; ++i) hold(other[i], base, never);",
        "        release(prev);",
        "        stage(kk, mt0, mt1);",
        "        if (kk + 1 < KS) stage(kk + 1, mt1, mt0);",
        "      release(prev);",
        "expect_tx(fb, C::STAGE);",
        "mbar_wait(bars + C::STAGES + s, ph ^ 1u);",
        "mbar_wait(bars + s, ph);")


def simulate_ring(pipe, stages, kt, tiles, warps=8, seed=0, meta_sets=2):
    """The producer and the consumer warps of one CTA as the .cuh runs them (pipe 1; pipe 0 waits
    each stage out, as a reference), under a random interleaving: returns the hazards seen: a slot written while a warp's MMAs that read it
    are unretired or before every warp released it; a metadata register set loaded while an
    unretired MMA group of that warp reads it; a stage read before it landed. meta_sets: the
    metadata register sets pipe 1 alternates between (the .cuh: 2; 1 only to show the check fires)."""
    import random
    rnd = random.Random(seed)
    total = tiles * kt
    full_done = [0] * stages          # completed phases of full[s]
    empty_arr = [0] * stages          # arrivals on empty[s] in its current phase
    empty_done = [0] * stages
    landed = {}                       # slot -> global stage index whose data it holds
    hazards = []
    prod = {"i": 0}
    # per warp: position (global stage i), pending groups [(stage, slot, set)], prev slot, step
    ws = [{"i": 0, "pend": [], "prev": None, "phase": "wait"} for _ in range(warps)]

    def set_of(i):
        return (i % kt) % meta_sets if pipe == 1 else 0

    def retire(w, keep):
        while len(w["pend"]) > keep:
            w["pend"].pop(0)

    def release(slot):
        empty_arr[slot] += 1
        if empty_arr[slot] == warps:
            empty_arr[slot] = 0
            empty_done[slot] += 1

    def step_producer():
        i = prod["i"]
        if i >= total:
            return False
        s, rnd_ = i % stages, i // stages
        if empty_done[s] < rnd_:       # wait_bar(empty, ph ^ 1): round r needs r completed phases
            return False
        for w in ws:
            if any(sl == s for _, sl, _ in w["pend"]):
                hazards.append(("slot overwritten under unretired MMAs", i))
        landed[s] = i
        full_done[s] += 1
        prod["i"] += 1
        return True

    def step_warp(w):
        i = w["i"]
        if i >= total:
            if w["pend"]:               # end: wait_group 0 (tile end already did it)
                retire(w, 0)
            return False
        s, ks = i % stages, i % kt
        if full_done[s] <= i // stages:
            return False
        if landed.get(s) != i:
            hazards.append(("stage read before it landed", i))
        st = set_of(i)
        if any(ps == st for _, _, ps in w["pend"]):
            hazards.append(("metadata set reloaded under unretired MMAs", i))
        w["pend"].append((i, s, st))
        if pipe == 0:
            retire(w, 0)
            release(s)
        elif ks > 0:
            retire(w, 1)
            release(w["prev"])
        w["prev"] = s
        if ks == kt - 1:                # tile end: wait_group 0, release the last slot (PIPE 1)
            retire(w, 0)
            if pipe != 0:
                release(s)
        w["i"] += 1
        return True

    agents = [("p", None)] + [("w", w) for w in ws]
    for _ in range(100000):
        if prod["i"] >= total and all(w["i"] >= total for w in ws):
            break
        rnd.shuffle(agents)
        for kind, w in agents:
            if (step_producer() if kind == "p" else step_warp(w)):
                break
        else:
            raise AssertionError("deadlock")
    return hazards


@pytest.mark.parametrize("stages,kt,tiles", [(4, 16, 3), (3, 16, 3), (4, 3, 5), (3, 1, 4), (4, 2, 1)])
def test_ring_protocol_is_race_free(stages, kt, tiles):
    for pipe in (0, 1):
        for seed in range(3):
            assert simulate_ring(pipe, stages, kt, tiles, seed=seed) == [], (pipe, seed)
    # the check is not vacuous: one set with a stage's MMAs in flight is rewritten under them
    if kt > 1:
        assert any(h[0].startswith("metadata") for h in simulate_ring(1, stages, kt, tiles, seed=0, meta_sets=1))
