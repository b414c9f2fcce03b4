"""One launch for many rows on Hopper: each CTA decodes its 64 weight rows once and keeps them.

Written in Gluon, sm_90 only (fifteenth session, run 59 in docs/kernels/grouped_gemm.md). Run 55
found the one-launch form slower than the two passes for many rows because every B tile was
decoded again for each 128-row token tile. Here a CTA owns one group's 64 weight rows for all
of K: their decoded e4m3 tile (64 x 2048 bytes = 128 KiB) stays in shared memory, and the
group's token tiles stream past it. So B is read once from memory as FP4, decoded once, never
written back, and the grid is one CTA per (weight tile, group): 128 CTAs for the definition's
n = 2048 and 4 groups, one wave on 132 SMs. Four partitions, synchronised through mbarriers:

- a loader warp: per (token tile, 128-K block) a TMA box of A [128 tokens, 128] (into wgmma's
  128-byte swizzle) and, by cp.async, the tokens' a_scale (barrier ``a_ready[s]``: the TMA's
  bytes and the 32 threads' cp.async arrivals);
- a decoder (two or four warps): brings the rows' packed words and b_scale block by block
  through a small cp.async ring of its own, folds each row's four per-32 scales and decodes
  with kernel's prmt lookup (as fused_ws does) into block kb's slot of the resident tile, its
  multiplier (-1 where the block does not fold) and the block's flag (``decoded[kb]``, each
  completed once);
- two consumer warpgroups, taking the token tiles in turn (0, 2, ... and 1, 3, ...):
  acc[64 weight rows, 128 tokens] += wgmma(Bdec[kb], A^T) * (ref x a_scale) per block, a
  flagged block as four K = 32 wgmmas each times the row's own per-32 scale; ``a_empty[s]``.
  While one warpgroup promotes, the other's wgmma runs. c is stored transposed.

Token tiles at or past clamp(masked_m[g], 0, max_m) store zeros without loads or MMA; a
group with no rows decodes nothing. Every partition reads masked_m on the device.
"""

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                                  warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    HAVE_GLUON = True
except ImportError:  # Triton without Gluon: the Triton kernels serve every call
    HAVE_GLUON = False

from .kernel import _PRMT_WORD_ASM_TEXT, FOLD_SPREAD

BW = 64          # weight rows per CTA (the MMA's M)
BT = 128         # tokens per consumer tile (the MMA's N)
MAX_K = 2048     # the resident tile is BW x K bytes of shared memory
A_STAGES = 4     # A boxes in flight, shared by the two consumers
DEC_WARPS = 2
# Registers per decoder width: the launch's cap (4 + 4 + DEC_WARPS + 1 warps, rounded up to
# whole warpgroups: 12 or 16), then what setmaxnreg gives the second consumer, the decoder and
# the loader (each rounded up to a warpgroup); the first consumer (Gluon's default partition)
# gets the rest: 200 or 208 per thread, enough for the accumulator, the MMA result and the
# tile's 32 a_scale values without spills inside the K loop.
REGS = {2: (168, 208, 96, 40), 4: (128, 200, 80, 24)}  # MAXNREG, CONSUMER, DECODER, LOADER

if HAVE_GLUON:
    _PRMT = gl.constexpr(_PRMT_WORD_ASM_TEXT)
    _partition_sync = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier
    _cp_async = async_copy.async_load if hasattr(async_copy, "async_load") else async_copy.async_copy_global_to_shared
    # A TMA box into shared memory (Triton 3.6 async_copy_global_to_shared, 3.7+ async_load).
    _tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared

    if hasattr(gl.shared_memory_descriptor, "reinterpret"):  # Triton 3.7+
        @gluon.jit
        def _view(buf, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
            return buf.reinterpret(dtype, shape, layout)
    else:  # Triton 3.6
        @gluon.jit
        def _view(buf, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
            return buf._reinterpret(dtype, shape, layout)

    @gluon.jit
    def _group_rows(mm_ptr, MAX_M):
        """This CTA's group and its rows: clamp(masked_m[g], 0, max_m)."""
        g = gl.program_id(1)
        return g, gl.minimum(gl.maximum(gl.load(mm_ptr + g).to(gl.int32), 0), MAX_M)

    @gluon.jit
    def _loader(a_desc, as_ptr, a_bufs, as_bufs, a_ready, a_empty, mm_ptr, MAX_M, K: gl.constexpr):
        A_STAGES: gl.constexpr = a_bufs.type.shape[0]
        BT: gl.constexpr = a_bufs.type.shape[1]
        KB: gl.constexpr = K // 128
        g, rows = _group_rows(mm_ptr, MAX_M)
        n_work = gl.cdiv(rows, BT)
        tok = gl.arange(0, BT, layout=gl.BlockedLayout([1], [32], [1], [0]))
        it = 0
        # The order the consumers count in: per pair of token tiles, per block, tile 2p then 2p + 1.
        for p in range(0, n_work, 2):
            nw = gl.minimum(n_work - p, 2)
            for kb in range(KB):
                for w in range(nw):
                    mt = p + w
                    s = it % A_STAGES
                    # A fresh barrier counts as having completed the phase before 0.
                    mbarrier.wait(a_empty.index(s), ((it // A_STAGES) & 1) ^ 1)
                    bar = a_ready.index(s)
                    mbarrier.expect(bar, a_desc.block_type.nbytes)
                    # Rows past the bucket read the next group's (or zeros past the tensor);
                    # their columns of c are masked.
                    _tma_load(a_desc, [g * MAX_M + mt * BT, kb * 128], bar, a_bufs.index(s))
                    as_src = as_ptr + (g * MAX_M + mt * BT + tok).to(gl.int64) * KB + kb
                    _cp_async(as_bufs.index(s), as_src, mask=mt * BT + tok < MAX_M)
                    # One arrival per loader thread once its copies have landed (the barrier
                    # counts 32 of them and the expect).
                    async_copy.mbarrier_arrive(bar, increment_count=False)
                    it += 1

    @gluon.jit
    def _decoder(w_ptr, bs_ptr, raw_w, raw_s, qw_bufs, ref_bufs, flag_bufs, raw_ready, decoded, mm_ptr, MAX_M, N,
                 K: gl.constexpr, DEC_WARPS: gl.constexpr, ABLATE: gl.constexpr):
        BW: gl.constexpr = qw_bufs.type.shape[1]
        KB: gl.constexpr = K // 128
        # One weight row per thread (two warps), or half a row's words per thread (four): each
        # thread holds all four scales of its row, so the fold needs no shuffles.
        rowl: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [BW // 32, DEC_WARPS * 32 // BW], [1, 0])
        flagl: gl.constexpr = gl.BlockedLayout([1], [32], [DEC_WARPS], [0])
        g, rows = _group_rows(mm_ptr, MAX_M)
        r = gl.arange(0, BW, layout=gl.SliceLayout(1, rowl))[:, None]
        c16 = gl.arange(0, 16, layout=gl.SliceLayout(0, rowl))[None, :]
        c4 = gl.arange(0, 4, layout=gl.SliceLayout(0, rowl))[None, :]
        group_of_word = c16 // 4
        b_row = g * N + gl.program_id(0) * BW
        w_words = w_ptr.to(gl.pointer_type(gl.int32), bitcast=True)
        w_src = w_words + (b_row + r).to(gl.int64) * (KB * 16) + c16
        s_src = bs_ptr + (b_row + r).to(gl.int64) * (KB * 4) + c4
        if rows > 0:
            # Every block's packed words and scales at once, each into the first 5 KB of the
            # slot its decoded tile will take (run 59: a 3-block ring of its own kept ~8 KB per
            # SM in flight and paced the first token tiles at ~1 us a block). Each thread
            # arrives on the block's barrier once its copies have landed.
            for kb in range(KB):
                _cp_async(raw_w.index(2 * kb), w_src + kb * 16)
                _cp_async(raw_s.index(8 * kb + 4), s_src + kb * 4)
                async_copy.mbarrier_arrive(raw_ready.index(kb), increment_count=False)
            for kb in range(KB):
                mbarrier.wait(raw_ready.index(kb), 0)
                w = raw_w.index(2 * kb).load(rowl)                              # words of 8 codes
                sb = raw_s.index(8 * kb + 4).load(rowl).to(gl.int32, bitcast=True)  # the row's 4 scale bits
                # The decoded tile overwrites the slot: every thread has read it first.
                _partition_sync()
                # kernel._block_bits: positive, normal powers of two within FOLD_SPREAD binades.
                bmax = gl.max(sb, axis=1)
                bmin = gl.min(sb, axis=1)
                mant = gl.max(sb & 0x7FFFFF, axis=1)
                ok = (bmin > 0) & (mant == 0) & (bmax < 0x7F800000) & (bmax - bmin <= FOLD_SPREAD * 0x800000)
                # (e_j - e_max + 6) * 8: the exponent-field addend of group j; 0 keeps raw codes.
                dexp = gl.where(ok[:, None], (sb >> 20) - (bmax >> 20)[:, None] + 48, 0)
                d0 = gl.sum(gl.where(c4 == 0, dexp, 0), axis=1)[:, None]
                d1 = gl.sum(gl.where(c4 == 1, dexp, 0), axis=1)[:, None]
                d2 = gl.sum(gl.where(c4 == 2, dexp, 0), axis=1)[:, None]
                d3 = gl.sum(gl.where(c4 == 3, dexp, 0), axis=1)[:, None]
                d = gl.where(group_of_word == 0, d0,
                             gl.where(group_of_word == 1, d1, gl.where(group_of_word == 2, d2, d3)))
                if ABLATE != 1:
                    lo, hi = gl.inline_asm_elementwise(
                        _PRMT, "=r,=r,r,r,r", [w, 0x3C383000 + d * 0x01010100, 0x4C484440 + d * 0x01010101],
                        dtype=(gl.int32, gl.int32), is_pure=True, pack=1)
                    qw_bufs.index(kb).store(gl.reshape(gl.join(lo, hi), [BW, 32]))
                ref_bufs.index(kb).store(gl.where(ok, bmax.to(gl.float32, bitcast=True) * 0.015625, -1.0))
                bad = gl.max(gl.where(ok, 0, 1), axis=0)
                flag_bufs.index(kb).store(gl.full([32], bad, gl.int32, layout=flagl))
                # The consumers' wgmma reads the tile through the async proxy.
                fence_async_shared()
                _partition_sync()
                mbarrier.arrive(decoded.index(kb), count=1)

    @gluon.jit
    def _consumer(a_bufs, as_bufs, q_bufs, ref_bufs, flag_bufs, a_ready, a_empty, decoded, bs_ptr, mm_ptr, c_ptr,
                  MAX_M, N, K: gl.constexpr, WG: gl.constexpr, ABLATE: gl.constexpr):
        A_STAGES: gl.constexpr = a_bufs.type.shape[0]
        BT: gl.constexpr = a_bufs.type.shape[1]
        BW: gl.constexpr = q_bufs.type.shape[1]
        KB: gl.constexpr = K // 128
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BT, 32])
        flagl: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        g, rows = _group_rows(mm_ptr, MAX_M)
        n_work = gl.cdiv(rows, BT)
        offs_w = gl.program_id(0) * BW + gl.arange(0, BW, layout=gl.SliceLayout(1, mma))
        bs_rows = bs_ptr + (g * N + offs_w).to(gl.int64) * (KB * 4)
        base = 0
        for p in range(0, gl.cdiv(MAX_M, BT), 2):
            mt = p + WG
            nw = gl.minimum(n_work - p, 2)
            offs_t = mt * BT + gl.arange(0, BT, layout=gl.SliceLayout(0, mma))
            acc = gl.zeros([BW, BT], gl.float32, mma)
            if mt < n_work:
                t_mma = gl.zeros([BW, BT], gl.float32, mma)
                for kb in range(KB):
                    it = base + kb * nw + WG
                    s = it % A_STAGES
                    mbarrier.wait(decoded.index(kb), 0)
                    mbarrier.wait(a_ready.index(s), (it // A_STAGES) & 1)
                    a_s = as_bufs.index(s).load(gl.SliceLayout(0, mma))
                    a_tile = a_bufs.index(s)
                    q_tile = q_bufs.index(kb)
                    if ABLATE == 2:  # timing only: no promotion (wrong results)
                        acc = warpgroup_mma(q_tile, a_tile.permute((1, 0)), acc, is_async=True)
                        acc = warpgroup_mma_wait(0, deps=(acc,))
                    elif ABLATE == 3:  # timing only: the fp32 add alone, no scales, no flag
                        t_mma = warpgroup_mma(q_tile, a_tile.permute((1, 0)), t_mma, use_acc=False, is_async=True)
                        t_mma = warpgroup_mma_wait(0, deps=(t_mma,))
                        acc = acc + t_mma
                    elif ABLATE == 4:  # timing only: the promotion without the flag's test
                        t_mma = warpgroup_mma(q_tile, a_tile.permute((1, 0)), t_mma, use_acc=False, is_async=True)
                        t_mma = warpgroup_mma_wait(0, deps=(t_mma,))
                        ref = ref_bufs.index(kb).load(gl.SliceLayout(1, mma))
                        acc = acc + t_mma * (ref[:, None] * a_s[None, :])
                    elif gl.max(flag_bufs.index(kb).load(flagl), axis=0) == 0:  # every row folds
                        t_mma = warpgroup_mma(q_tile, a_tile.permute((1, 0)), t_mma, use_acc=False, is_async=True)
                        t_mma = warpgroup_mma_wait(0, deps=(t_mma,))
                        ref = ref_bufs.index(kb).load(gl.SliceLayout(1, mma))
                        acc = acc + t_mma * (ref[:, None] * a_s[None, :])
                    else:
                        # Rows that do not fold hold raw codes: their 32-groups one at a time,
                        # each times its own scale (read from memory: the rare path); rows
                        # that fold keep ref.
                        ref = ref_bufs.index(kb).load(gl.SliceLayout(1, mma))
                        for j in gl.static_range(4):
                            t_mma = warpgroup_mma(q_tile.slice(32 * j, 32, dim=1),
                                                  a_tile.slice(32 * j, 32, dim=1).permute((1, 0)), t_mma,
                                                  use_acc=False, is_async=True)
                            t_mma = warpgroup_mma_wait(0, deps=(t_mma,))
                            mult = gl.where(ref >= 0.0, ref, gl.load(bs_rows + kb * 4 + j))
                            acc = acc + t_mma * (mult[:, None] * a_s[None, :])
                    mbarrier.arrive(a_empty.index(s), count=1)
                acc = gl.where((offs_t < rows)[None, :], acc, 0.0)
            # The loader's count: the pair's working tiles (the other warpgroup's included).
            base += KB * gl.maximum(nw, 0)
            if mt * BT < MAX_M:
                c_cols = c_ptr + (g * MAX_M + offs_t).to(gl.int64) * N
                gl.store(c_cols[None, :] + offs_w[:, None], acc.to(gl.bfloat16), mask=(offs_t < MAX_M)[None, :])

    @gluon.jit
    def bres_ws_kernel(a_desc, w_ptr, bs_ptr, as_ptr, mm_ptr, c_ptr, MAX_M, N, K: gl.constexpr,
                       A_STAGES: gl.constexpr, DEC_WARPS: gl.constexpr,
                       CONSUMER_REGS: gl.constexpr, DECODER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr,
                       ABLATE: gl.constexpr = 0):
        """Grid (n / 64, g); see the module's doc. num_warps = 4 (the first consumer, Gluon's
        default partition). ABLATE (timing only, wrong results): 1 no decode, 2 no promotion,
        3 the promotion's add alone, 4 the promotion without the flag's test."""
        BT: gl.constexpr = a_desc.block_type.shape[0]
        BW: gl.constexpr = 64
        KB: gl.constexpr = K // 128
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [A_STAGES, BT, 128], a_desc.layout)
        as_bufs = gl.allocate_shared_memory(gl.float32, [A_STAGES, BT], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        # The resident decoded tile, one slot per 128-K block: written as int32 words, read by
        # wgmma as e4m3 (the same bytes and the same 128-byte swizzle).
        qw_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
        q_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
        qw_bufs = gl.allocate_shared_memory(gl.int32, [KB, BW, 32], qw_layout)
        q_bufs = _view(qw_bufs, gl.float8e4nv, [KB, BW, 128], q_layout)
        # The same slots as the decoder's landing place for each block's packed words (the
        # first 4 KB, [BW, 16] words) and scales (the fifth KB, [BW, 4]).
        plain: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
        raw_w = _view(qw_bufs, gl.int32, [KB * 2, BW, 16], plain)
        raw_s = _view(qw_bufs, gl.float32, [KB * 8, BW, 4], plain)
        ref_bufs = gl.allocate_shared_memory(gl.float32, [KB, BW], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        flag_bufs = gl.allocate_shared_memory(gl.int32, [KB, 32], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        a_ready = gl.allocate_shared_memory(gl.int64, [A_STAGES, 1], mbarrier.MBarrierLayout())
        a_empty = gl.allocate_shared_memory(gl.int64, [A_STAGES, 1], mbarrier.MBarrierLayout())
        decoded = gl.allocate_shared_memory(gl.int64, [KB, 1], mbarrier.MBarrierLayout())
        raw_ready = gl.allocate_shared_memory(gl.int64, [KB, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(A_STAGES):
            mbarrier.init(a_ready.index(i), count=33)  # the expect and the loader's 32 threads
            mbarrier.init(a_empty.index(i), count=1)
        for i in gl.static_range(KB):
            mbarrier.init(decoded.index(i), count=1)
            mbarrier.init(raw_ready.index(i), count=DEC_WARPS * 32)  # the decoder's threads
        gl.warp_specialize([
            (_consumer, (a_bufs, as_bufs, q_bufs, ref_bufs, flag_bufs, a_ready, a_empty, decoded, bs_ptr, mm_ptr,
                         c_ptr, MAX_M, N, K, 0, ABLATE)),
            (_consumer, (a_bufs, as_bufs, q_bufs, ref_bufs, flag_bufs, a_ready, a_empty, decoded, bs_ptr, mm_ptr,
                         c_ptr, MAX_M, N, K, 1, ABLATE)),
            (_decoder, (w_ptr, bs_ptr, raw_w, raw_s, qw_bufs, ref_bufs, flag_bufs, raw_ready, decoded, mm_ptr, MAX_M,
                        N, K, DEC_WARPS, ABLATE)),
            (_loader, (a_desc, as_ptr, a_bufs, as_bufs, a_ready, a_empty, mm_ptr, MAX_M, K)),
        ], [4, DEC_WARPS, 1], [CONSUMER_REGS, DECODER_REGS, LOADER_REGS])


def supported(g, max_m, n, k) -> bool:
    """Shapes the kernel takes (the caller also needs sm_90 and 16-byte aligned tensors):
    whole 64-row weight tiles, k a multiple of 128 whose decoded tile fits shared memory."""
    return HAVE_GLUON and g > 0 and max_m > 0 and n % BW == 0 and k % 128 == 0 and 0 < k <= MAX_K


def a_descriptor(a_fp8):
    """The TMA descriptor of A as [g * max_m, k] e4m3 in [BT, 128] boxes (128-byte swizzle)."""
    g, max_m, k = a_fp8.shape
    return TensorDescriptor.from_tensor(a_fp8.view(g * max_m, k), [BT, 128],
                                        gl.NVMMASharedLayout.get_default_for([BT, 128], gl.float8e4nv))


def consts(k, a_stages=A_STAGES, dec_warps=DEC_WARPS, ablate=0):
    """bres_ws_kernel's constexprs and compile options."""
    maxnreg, consumer, decoder, loader = REGS[dec_warps]
    return dict(K=k, A_STAGES=a_stages, DEC_WARPS=dec_warps, CONSUMER_REGS=consumer,
                DECODER_REGS=decoder, LOADER_REGS=loader, ABLATE=ablate, num_warps=4, maxnreg=maxnreg)


def launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms=None, **variant):
    """bres_ws_kernel through Triton's own launcher (checks and tools). num_sms is unused (one
    CTA per weight tile and group); variant: consts()' keywords."""
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    bres_ws_kernel[(n // BW, g)](a_descriptor(a_fp8), b_fp4, b_scale, a_scale, masked_m, c, max_m, n,
                                 **consts(k, **variant))
    return c
