"""Torch model of the data layouts of the sparse CUDA solution's sparse-MMA path
(solutions/lowbit/gemm/sparse_gemm_fp4_fp8_n2048_k2048/cuda_sparse_fp4_mma/sparse_wgmma_sp.cuh):
what its prep launch writes into the workspace (`prep_reference`), and what its MMA kernel's
producer copies into a stage and its consumers' descriptors and metadata loads read back from
it (`mma_view`). tests/test_sparse_wgmma_sp_model.py checks on the CPU that the kernel's
arithmetic writes `prep_reference` and that `mma_view` of it is the definition's dense A and B.
Works on any device."""

import torch

from lowbit_gemm.numerics import E2M1_VALUES

E2M1 = E2M1_VALUES.tolist()  # code -> value (bit 3 the sign)
M_ALIGN = 256   # m_pad's multiple (sp_wgmma::m_pad_of)
B_ROWS = 128    # weight rows a block of the prepared B (b16); a CTA tile's BN is 128 or 64
B_ATOM = B_ROWS * 128


def m_pad_of(m: int) -> int:
    return (m + M_ALIGN - 1) // M_ALIGN * M_ALIGN


def swizzle128(addr: torch.Tensor) -> torch.Tensor:
    """Byte address inside a 1024-aligned tile -> where the 128-byte swizzle keeps it: the
    16-byte chunk bits 4-6 XOR the row bits 7-9."""
    return addr ^ (((addr >> 7) & 7) << 4)


def canon(v: torch.Tensor, me: torch.Tensor):
    """Per group (int64 byte tensors): (value at i0, value at i1) as float32, nibble i0 | i1 << 2
    (i0 < i1), as the kernel's canon() makes them: distinct positions sorted; a repeated
    position p sums both values into the slot of p, the other slot +0 at position 3 (p < 3) or
    2 (p == 3)."""
    lut = torch.tensor(E2M1, dtype=torch.float32, device=v.device)
    f0, f1 = lut[v & 15], lut[(v >> 4) & 15]
    p0, p1 = me & 3, (me >> 2) & 3
    lt, gt, low = p0 < p1, p0 > p1, p0 < 3
    s = f0 + f1
    zero = torch.zeros_like(s)
    lo = torch.where(lt, f0, torch.where(gt, f1, torch.where(low, s, zero)))
    hi = torch.where(lt, f1, torch.where(gt, f0, torch.where(low, zero, s)))
    nib = torch.where(lt, p0 | (p1 << 2), torch.where(gt, p1 | (p0 << 2), torch.where(low, p0 | 12, torch.full_like(p0, 14))))
    return lo, hi, nib


def _swizzle_chunks(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """t [..., R, 8 chunks, 8 halves] in natural chunk order -> chunk c of row r stored at c ^ (r & 7)."""
    pos = torch.arange(8, device=t.device)
    src = pos.view(1, 8) ^ (rows.view(-1, 1) & 7)  # stored position p holds chunk p ^ (r & 7)
    idx = src.view(*([1] * (t.dim() - 3)), -1, 8, 1).expand(*t.shape)
    return torch.gather(t, t.dim() - 2, idx)


def prep_reference(a_vals: torch.Tensor, a_meta: torch.Tensor, b_fp8: torch.Tensor):
    """The prep launch's three arrays, as flat uint8 tensors (a_c, meta, b16), for m_pad rows:
      a_c  [KT][m_pad][128 B], meta [KT][m_pad / 64][64 u][4 j] uint32, b16 [n / 128][KT][2][128][128 B]."""
    dev = a_vals.device
    m, g = a_vals.shape
    k, n = 4 * g, b_fp8.shape[0]
    kt, mp = k // 128, m_pad_of(m)
    v = torch.zeros(mp, g, dtype=torch.int64, device=dev)
    me = torch.zeros(mp, g, dtype=torch.int64, device=dev)
    v[:m] = a_vals.view(torch.uint8).to(torch.int64)
    me[:m] = a_meta.view(torch.uint8).to(torch.int64)
    lo, hi, nib = canon(v, me)
    comp = torch.stack([lo, hi], dim=-1).to(torch.float16).reshape(mp, kt, 8, 8)   # [row, ks, chunk, 8 halves]
    rows = torch.arange(mp, device=dev)
    a_c = _swizzle_chunks(comp.permute(1, 0, 2, 3), rows)                          # [ks, row, chunk, 8]
    # nibble of (row 64 mb + 16 w + 8 half + lq, group 32 ks + 8 j + 4 hb + e)
    nb = nib.reshape(mp // 64, 4, 2, 8, kt, 4, 2, 4)
    nib16 = (nb << (4 * torch.arange(4, device=dev))).sum(-1)                     # [mb, w, half, lq, ks, j, hb]
    word = nib16[:, :, 0] | (nib16[:, :, 1] << 16)                                 # [mb, w, lq, ks, j, hb]
    meta = word.permute(3, 0, 1, 2, 5, 4).reshape(kt, mp // 64, 64, 4).to(torch.int64)
    meta_bytes = torch.stack([(meta >> (8 * i)) & 255 for i in range(4)], dim=-1).to(torch.uint8)
    b16 = b_fp8.to(torch.float16).reshape(n // 128, 128, kt, 2, 8, 8).permute(0, 2, 3, 1, 4, 5)  # [nt, ks, atom, r, c, 8]
    b16 = _swizzle_chunks(b16, torch.arange(128, device=dev))
    flat = lambda t: t.contiguous().view(torch.uint8).reshape(-1)  # noqa: E731
    return flat(a_c), meta_bytes.reshape(-1), flat(b16)


def stage_image(a_c, meta, b16, m_pad, n, k, mw, m0, nt, ks, bn=128):
    """The bytes of one pipeline stage in shared memory after the producer's bulk copies (A,
    metadata, and B: one copy of b16's block for BN 128, one a 64-K atom for BN 64):
    [A BM x 128][B 2 atoms x BN rows x 128][meta BM x 16]; nt: the tile's column of BN rows."""
    bm, kt = 128 * mw, k // 128
    a = a_c[(ks * m_pad + m0) * 128:][:bm * 128]
    md = meta[(ks * (m_pad // 64) + m0 // 64) * 1024:][:bm * 16]
    block = ((nt * bn // B_ROWS) * kt + ks) * 2 * B_ATOM
    row0 = (nt * bn) % B_ROWS
    b = [b16[block + atom * B_ATOM + row0 * 128:][:bn * 128] for atom in range(2)]
    return torch.cat([a, *b, md])


def mma_view(stage: torch.Tensor, mw: int, bn: int = 128):
    """What the consumers' MMAs of one stage multiply: dense A [128 mw, 128] (from the compressed
    values their A descriptors address and the metadata words their threads load, read as the
    .cu's header says the MMA reads them) and B [bn, 128] (from the B descriptors), float64."""
    dev = stage.device
    bm = 128 * mw
    a_bytes = bm * 128
    halves = lambda addr: stage[addr].to(torch.int64) | (stage[addr + 1].to(torch.int64) << 8)  # noqa: E731
    to_f = lambda h: h.to(torch.int16).view(torch.float16).to(torch.float64)  # noqa: E731
    # A: block b = cw * mw + i (m64) at b * 8192 (descriptor start), step j at + 32 j, K-major rows of 128 B
    r = torch.arange(bm, device=dev).view(bm, 1, 1)
    j = torch.arange(4, device=dev).view(1, 4, 1)
    kc = torch.arange(16, device=dev).view(1, 1, 16)
    blk, rr = r // 64, r % 64
    addr = swizzle128(blk * 8192 + rr * 128 + 32 * j + 2 * kc)
    comp = to_f(halves(addr))                                                         # [row, step, 16]
    # metadata: thread (w, l) of block b loads 16 bytes at meta + (b * 64 + u) * 16, word j for step j;
    # with selector 0 the MMA reads lanes l % 4 < 2: bits 16 half + 4 e are row 16 w + l / 4 + 8 half,
    # group 4 (l % 2) + e of the step
    nb = bm // 64
    B_, W_, L_, J_, H_, E_ = (torch.arange(x, device=dev) for x in (nb, 4, 32, 4, 2, 4))
    L_ = L_[L_ % 4 < 2]
    sh = lambda t, d: t.view(*[-1 if i == d else 1 for i in range(6)])  # noqa: E731
    b_, w_, l_, jj, h_, e_ = sh(B_, 0), sh(W_, 1), sh(L_, 2), sh(J_, 3), sh(H_, 4), sh(E_, 5)
    u = 16 * w_ + 2 * (l_ // 4) + l_ % 2
    a0 = a_bytes + 2 * bn * 128 + (b_ * 64 + u) * 16 + 4 * jj
    word = sum(stage[a0 + i].to(torch.int64) << (8 * i) for i in range(4))
    nib = (word >> (16 * h_ + 4 * e_)) & 15
    row = (b_ * 64 + 16 * w_ + l_ // 4 + 8 * h_).expand(nib.shape)
    grp = (4 * (l_ % 2) + e_).expand(nib.shape)
    jx = jj.expand(nib.shape)
    i0, i1 = nib & 3, nib >> 2
    if not bool((i0 < i1).all()):
        raise ValueError("a metadata nibble without two increasing positions")
    seen = torch.zeros(bm, 4, 8, dtype=torch.int64, device=dev)
    seen.index_put_((row, jx, grp), torch.ones_like(row), accumulate=True)
    if not bool((seen == 1).all()):
        raise ValueError("the threads' metadata do not cover each (row, step, group) once")
    dense = torch.zeros(bm, 128, dtype=torch.float64, device=dev)
    for slot, pos in ((0, i0), (1, i1)):
        dense.index_put_((row, 32 * jx + 4 * grp + pos), comp[row, jx, 2 * grp + slot], accumulate=True)
    # B: step j at atom j // 2, + 64 bytes for j odd; rows of 128 B
    nr = torch.arange(bn, device=dev).view(bn, 1, 1)
    kk = torch.arange(32, device=dev).view(1, 1, 32)
    baddr = a_bytes + swizzle128((j // 2) * bn * 128 + nr * 128 + (j % 2) * 64 + 2 * kk)
    bm_ = to_f(halves(baddr)).reshape(bn, 128)                                        # [n row, 32 j + kk]
    return dense, bm_


def tile_schedule(m, n, mw, grid, kt=16, splits=1, bn=128):
    """(cta, m0, n0, k0, stages) of every work item the kernel's loop visits, in order: item t is
    tile t // splits (n fastest), K stages (t % splits) * kt / splits onward; kt: k / 128."""
    bm, nt_count, ks = 128 * mw, n // bn, kt // splits
    items = (m + bm - 1) // bm * nt_count * splits
    out = []
    for cta in range(grid):
        for t in range(cta, items, grid):
            tile = t // splits
            out.append((cta, (tile // nt_count) * bm, (tile % nt_count) * bn, (t % splits) * ks, ks))
    return out


def split_rows(bm, splits, rank):
    """The tile rows cluster rank `rank` sums over the splits' partial tiles and stores."""
    per = bm // splits
    return range(rank * per, (rank + 1) * per)
