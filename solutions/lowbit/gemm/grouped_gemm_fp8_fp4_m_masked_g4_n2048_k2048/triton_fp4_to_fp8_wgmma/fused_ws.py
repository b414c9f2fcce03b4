"""One launch for many-row buckets on Hopper: B decoded by warps of its own, beside the MMA.

Written in Gluon (Triton's explicit-layout dialect), sm_90 only. Why: the two-pass path
(decode_b_kernel, then grouped_tile_gemm_kernel) writes the whole of B as e4m3 (16 MiB) and
reads it back, and its GEMM pass is latency-bound (run 45: 38% of L2's throughput, 33% of
the SMs'), because Triton waits on every wgmma before the fp32 promotion. Here a persistent
CTA per SM has four partitions, synchronised only through per-stage mbarriers:

- a loader warp: TMA boxes of A (64 rows per consumer), of the packed FP4 words of B and of
  b_scale into stage s (barrier ``loaded[s]``);
- a decoder warpgroup: one weight row per thread, folds the row's four per-32 scales of the
  block (as kernel._fold_scales_2d), decodes its 16 words with the prmt lookup of
  kernel._decode_words into the stage's e4m3 B tile and writes the row's multiplier
  (``decoded[s]``); -1 where the block does not fold (raw codes then);
- two consumer warpgroups, 64 rows of the 128-row tile each: one K = 128 wgmma per stage,
  promoted in fp32 as ``acc += t * (a_scale x ref)``; a stage with a row that does not fold
  takes four K = 32 wgmmas instead, each scaled by that row's own per-32 scale (exact
  products, the definition's result within fp32 rounding); then ``empty[s]``.

Tiles are (group, 128 rows, BN columns) in group-major order; a tile whose rows all lie at or
past clamp(masked_m[g], 0, max_m) only stores zeros (every partition reads masked_m on the
device and skips it alike). Gluon has no interpreter: callers take this path only on sm_90
with a Triton that has Gluon (HAVE_GLUON); the two-pass kernels serve everything else.
"""

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                                  warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    HAVE_GLUON = True
except ImportError:  # Triton without Gluon: the two-pass kernels serve every call
    HAVE_GLUON = False

import torch

from .kernel import _PRMT_WORD_ASM_TEXT

# Widest spread (binades) of a block's four scales folded into the e4m3 exponents
# (kernel.FOLD_SPREAD, which says why 3).
FOLD_SPREAD = 3
# Registers per thread: the launch's cap (13 warps, counted as 16), then what setmaxnreg gives
# each consumer warpgroup (acc and MMA result, 64 each), the decoder and the loader warp.
MAXNREG, CONSUMER_REGS, DECODER_REGS, LOADER_REGS = 128, 184, 112, 24
# SWAP (few tokens): the decoder's threads per weight row, the launch's cap (4 + 2 TPR + 1
# warps), what setmaxnreg gives the decoder; the consumer (Gluon's default partition) gets
# the rest.
SWAP_TPR = 1  # 4 was 0.3-1 us slower (run 56b)
SWAP_MAXNREG, SWAP_DECODER_REGS = 168, 128
BM_PER_CONSUMER = 64
CONSUMERS = 2

if HAVE_GLUON:
    _FOLD_SPREAD = gl.constexpr(FOLD_SPREAD)
    _CONSUMER_REGS, _DECODER_REGS, _LOADER_REGS, _SWAP_DECODER_REGS, _SWAP_TPR = (
        gl.constexpr(r) for r in (CONSUMER_REGS, DECODER_REGS, LOADER_REGS, SWAP_DECODER_REGS, SWAP_TPR))
    _partition_sync = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier
    _PRMT = gl.constexpr(_PRMT_WORD_ASM_TEXT)

    if hasattr(gl.shared_memory_descriptor, "reinterpret"):  # Triton 3.7+
        @gluon.jit
        def _as_fp8(words, shape: gl.constexpr, layout: gl.constexpr):
            return words.reinterpret(gl.float8e4nv, shape, layout)
    else:  # Triton 3.6
        @gluon.jit
        def _as_fp8(words, shape: gl.constexpr, layout: gl.constexpr):
            return words._reinterpret(gl.float8e4nv, shape, layout)

    @gluon.jit
    def _tile(t, mm_ptr, MAX_M, NUM_MT, NT):
        """Tile t -> (group, row tile, column tile, rows of the group: clamp(masked_m, 0, max_m))."""
        per_group = NUM_MT * NT
        g = t // per_group
        r = t % per_group
        rows = gl.minimum(gl.maximum(gl.load(mm_ptr + g).to(gl.int32), 0), MAX_M)
        return g, r // NT, r % NT, rows

    @gluon.jit
    def _loader(a_desc, bw_desc, bs_desc, a_bufs, bw_bufs, bs_bufs, loaded, empty, mm_ptr, MAX_M, N, K,
                NUM_MT, NT, TILES, STAGES: gl.constexpr, C: gl.constexpr, ABLATE: gl.constexpr = 0):
        BN: gl.constexpr = bw_desc.block_type.shape[0]
        AR: gl.constexpr = a_desc.block_type.shape[0]  # A rows per box (one box per consumer)
        BM: gl.constexpr = AR * C
        KB = K // 128
        # ABLATE & 4 / & 8 (timing only): no b_scale / no B boxes.
        LOAD_BS: gl.constexpr = (ABLATE // 4) % 2 == 0
        LOAD_BW: gl.constexpr = (ABLATE // 8) % 2 == 0
        nbytes: gl.constexpr = (C * a_desc.block_type.nbytes + (bw_desc.block_type.nbytes if LOAD_BW else 0)
                                + (bs_desc.block_type.nbytes if LOAD_BS else 0))
        it = 0
        for t in range(gl.program_id(0), TILES, gl.num_programs(0)):
            g, mt, nt, rows = _tile(t, mm_ptr, MAX_M, NUM_MT, NT)
            if mt * BM < rows:
                a_row = g * MAX_M + mt * BM
                b_row = g * N + nt * BN
                for kb in range(KB):
                    s = it % STAGES
                    # A fresh barrier counts as having completed the phase before 0.
                    mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                    bar = loaded.index(s)
                    mbarrier.expect(bar, nbytes)
                    for w in gl.static_range(C):
                        tma.async_copy_global_to_shared(a_desc, [a_row + AR * w, kb * 128], bar, a_bufs.index(s * C + w))
                    if LOAD_BW:
                        tma.async_copy_global_to_shared(bw_desc, [b_row, kb * 16], bar, bw_bufs.index(s))
                    if LOAD_BS:
                        tma.async_copy_global_to_shared(bs_desc, [b_row, kb * 4], bar, bs_bufs.index(s))
                    it += 1

    @gluon.jit
    def _decoder(bw_bufs, bs_bufs, qw_bufs, ref_bufs, flag_bufs, loaded, decoded, mm_ptr, MAX_M, K, NUM_MT, NT, TILES,
                 STAGES: gl.constexpr, BM: gl.constexpr, USE_ASM: gl.constexpr, ABLATE: gl.constexpr,
                 TPR: gl.constexpr = 1):
        BN: gl.constexpr = bw_bufs.type.shape[1]
        DW: gl.constexpr = BN * TPR // 32
        # TPR threads per weight row (DW warps for BN rows), each with 16 / TPR of its words
        # and all four of its scales (the same layout on [BN, 4] repeats them), so the fold
        # needs no shuffles: TPR = 1 (BN = 128) one row per thread; TPR = 4 (SWAP, BN = 64)
        # one 32-group per thread, so that a CTA's one decoder decodes a block 4x sooner.
        rowl: gl.constexpr = gl.BlockedLayout([1, 4], [32 // TPR, TPR], [DW, 1], [1, 0])
        flagl: gl.constexpr = gl.BlockedLayout([1], [32], [DW], [0])
        KB = K // 128
        col16 = gl.arange(0, 16, layout=gl.SliceLayout(0, rowl))[None, :] // 4
        col4 = gl.arange(0, 4, layout=gl.SliceLayout(0, rowl))[None, :]
        it = 0
        for t in range(gl.program_id(0), TILES, gl.num_programs(0)):
            g, mt, nt, rows = _tile(t, mm_ptr, MAX_M, NUM_MT, NT)
            if mt * BM < rows:
                for kb in range(KB):
                    s = it % STAGES
                    mbarrier.wait(loaded.index(s), (it // STAGES) & 1)
                    if ABLATE % 2 == 0:
                        w = bw_bufs.index(s).load(rowl)                      # [BN, 16] words of 8 codes
                        sb = bs_bufs.index(s).load(rowl).to(gl.int32, bitcast=True)  # [BN, 4] scale bits
                        bmax = gl.max(sb, axis=1)
                        bmin = gl.min(sb, axis=1)
                        mant = gl.max(sb & 0x7FFFFF, axis=1)
                        ok = (bmin > 0) & (mant == 0) & (bmax < 0x7F800000) & (bmax - bmin <= _FOLD_SPREAD * 0x800000)
                        # (e_j - e_max + 6) * 8: the exponent-field addend of group j; 0 keeps raw codes.
                        dexp = gl.where(ok[:, None], (sb >> 20) - (bmax >> 20)[:, None] + 48, 0)
                        d0 = gl.sum(gl.where(col4 == 0, dexp, 0), axis=1)[:, None]
                        d1 = gl.sum(gl.where(col4 == 1, dexp, 0), axis=1)[:, None]
                        d2 = gl.sum(gl.where(col4 == 2, dexp, 0), axis=1)[:, None]
                        d3 = gl.sum(gl.where(col4 == 3, dexp, 0), axis=1)[:, None]
                        d = gl.where(col16 == 0, d0, gl.where(col16 == 1, d1, gl.where(col16 == 2, d2, d3)))
                        if USE_ASM:
                            lo, hi = gl.inline_asm_elementwise(
                                _PRMT, "=r,=r,r,r,r", [w, 0x3C383000 + d * 0x01010100, 0x4C484440 + d * 0x01010101],
                                dtype=(gl.int32, gl.int32), is_pure=True, pack=1)
                        else:
                            lo = gl.zeros_like(w)
                            hi = gl.zeros_like(w)
                            for i in gl.static_range(4):
                                lo |= (_e2m1_to_e4m3((w >> (4 * i)) & 15, d) & 0xFF) << (8 * i)
                                hi |= (_e2m1_to_e4m3((w >> (4 * i + 16)) & 15, d) & 0xFF) << (8 * i)
                        qw_bufs.index(s).store(gl.reshape(gl.join(lo, hi), [BN, 32]))
                        ref = gl.where(ok, bmax.to(gl.float32, bitcast=True) * 0.015625, -1.0)
                        ref_bufs.index(s).store(ref)
                        bad = gl.max(gl.where(ok, 0, 1), axis=0)
                        flag_bufs.index(s).store(gl.full([32], bad, gl.int32, layout=flagl))
                    else:  # timing only: no decode (wrong results)
                        flag_bufs.index(s).store(gl.full([32], 0, gl.int32, layout=flagl))
                    # The consumers' wgmma reads the tile through the async proxy.
                    fence_async_shared()
                    _partition_sync()
                    mbarrier.arrive(decoded.index(s), count=1)
                    it += 1

    @gluon.jit
    def _e2m1_to_e4m3(code, dexp):
        """kernel._e2m1_to_e4m3 (the portable decode of one code)."""
        mag = code & 7
        base = gl.where(mag == 1, 0x30, (mag << 2) + 0x30) + dexp
        val = gl.where(mag == 0, 0, base)
        return val | ((code & 8) << 4)

    @gluon.jit
    def _consumer(a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, loaded, decoded, empty, as_ptr, mm_ptr, c_ptr,
                  MAX_M, N, K, NUM_MT, NT, TILES, WG: gl.constexpr, STAGES: gl.constexpr, C: gl.constexpr,
                  ABLATE: gl.constexpr):
        BN: gl.constexpr = q_bufs.type.shape[1]
        BM: gl.constexpr = 64 * C
        KB = K // 128
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32])
        rowl: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [4, 1], [1, 0])
        flagl: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        col4 = gl.arange(0, 4, layout=gl.SliceLayout(0, rowl))[None, :]
        it = 0
        for t in range(gl.program_id(0), TILES, gl.num_programs(0)):
            g, mt, nt, rows = _tile(t, mm_ptr, MAX_M, NUM_MT, NT)
            offs_m = mt * BM + WG * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, mma))
            offs_n = nt * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
            acc = gl.zeros([64, BN], gl.float32, mma)
            if mt * BM < rows:
                in_bucket = offs_m < MAX_M
                as_rows = as_ptr + (g * MAX_M + offs_m).to(gl.int64) * KB
                a_s_next = gl.load(as_rows, mask=in_bucket, other=0.0)
                t_mma = gl.zeros([64, BN], gl.float32, mma)
                for kb in range(KB):
                    s = it % STAGES
                    phase = (it // STAGES) & 1
                    a_s = a_s_next
                    a_s_next = gl.load(as_rows + (kb + 1), mask=in_bucket & (kb + 1 < KB), other=0.0)
                    mbarrier.wait(loaded.index(s), phase)
                    mbarrier.wait(decoded.index(s), phase)
                    a_tile = a_bufs.index(s * C + WG)
                    b_tile = q_bufs.index(s)
                    # The decoder's flag (the same in every entry): some weight row of the
                    # block did not fold.
                    if ABLATE >= 2:  # timing only: no promotion (wrong results)
                        t_mma = warpgroup_mma(a_tile, b_tile.permute((1, 0)), t_mma, use_acc=False, is_async=True)
                        t_mma = warpgroup_mma_wait(0, deps=(t_mma,))
                        acc = acc + t_mma
                    elif gl.max(flag_bufs.index(s).load(flagl), axis=0) == 0:
                        t_mma = warpgroup_mma(a_tile, b_tile.permute((1, 0)), t_mma, use_acc=False, is_async=True)
                        t_mma = warpgroup_mma_wait(0, deps=(t_mma,))
                        ref = ref_bufs.index(s).load(gl.SliceLayout(0, mma))
                        acc = acc + t_mma * (a_s[:, None] * ref[None, :])
                    else:
                        # Rows that do not fold hold raw codes: their 32-groups one at a time,
                        # each times its own scale; rows that fold keep ref.
                        for j in gl.static_range(4):
                            t_mma = warpgroup_mma(a_tile.slice(32 * j, 32, dim=1),
                                                  b_tile.slice(32 * j, 32, dim=1).permute((1, 0)), t_mma,
                                                  use_acc=False, is_async=True)
                            t_mma = warpgroup_mma_wait(0, deps=(t_mma,))
                            sc = bs_bufs.index(s).load(rowl)
                            s_j = gl.convert_layout(gl.sum(gl.where(col4 == j, sc, 0.0), axis=1), gl.SliceLayout(0, mma))
                            ref = ref_bufs.index(s).load(gl.SliceLayout(0, mma))
                            mult = gl.where(ref >= 0.0, ref, s_j)
                            acc = acc + t_mma * (a_s[:, None] * mult[None, :])
                    mbarrier.arrive(empty.index(s), count=1)
                    it += 1
                acc = gl.where((offs_m < rows)[:, None], acc, 0.0)
            c_rows = c_ptr + (g * MAX_M + offs_m).to(gl.int64) * N
            gl.store(c_rows[:, None] + offs_n[None, :], acc.to(gl.bfloat16), mask=(offs_m < MAX_M)[:, None])

    @gluon.jit
    def _swap_issue(q_bufs, a_bufs, loaded, decoded, t_init, it, STAGES: gl.constexpr):
        """Wait for stage it's A and decoded B, start its K = 128 wgmma (not waited for)."""
        s = it % STAGES
        phase = (it // STAGES) & 1
        mbarrier.wait(loaded.index(s), phase)
        mbarrier.wait(decoded.index(s), phase)
        return warpgroup_mma(q_bufs.index(s), a_bufs.index(s).permute((1, 0)), t_init, use_acc=False, is_async=True)

    @gluon.jit
    def _swap_retire(acc, t_done, a_s, q_bufs, a_bufs, ref_bufs, flag_bufs, bs_bufs, empty, t_init, it,
                     STAGES: gl.constexpr, ABLATE: gl.constexpr):
        """Promote stage it's finished wgmma (t_done) into acc and release the stage. A block
        with a weight row that does not fold is recomputed exactly instead: four K = 32
        wgmmas, each times that row's own per-32 scale (rows that fold keep ref)."""
        mma: gl.constexpr = t_init.type.layout
        rowl: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [4, 1], [1, 0])
        flagl: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        s = it % STAGES
        if (ABLATE // 2) % 2 == 1:  # timing only: no promotion (wrong results)
            acc = acc + t_done
        elif gl.max(flag_bufs.index(s).load(flagl), axis=0) == 0:
            ref = ref_bufs.index(s).load(gl.SliceLayout(1, mma))
            acc = acc + t_done * (ref[:, None] * a_s[None, :])
        else:
            col4 = gl.arange(0, 4, layout=gl.SliceLayout(0, rowl))[None, :]
            q_tile = q_bufs.index(s)
            a_tile = a_bufs.index(s)
            for j in gl.static_range(4):
                t_j = warpgroup_mma(q_tile.slice(32 * j, 32, dim=1), a_tile.slice(32 * j, 32, dim=1).permute((1, 0)),
                                    t_init, use_acc=False, is_async=True)
                t_j = warpgroup_mma_wait(0, deps=(t_j,))
                sc = bs_bufs.index(s).load(rowl)
                s_j = gl.convert_layout(gl.sum(gl.where(col4 == j, sc, 0.0), axis=1), gl.SliceLayout(1, mma))
                ref = ref_bufs.index(s).load(gl.SliceLayout(1, mma))
                mult = gl.where(ref >= 0.0, ref, s_j)
                acc = acc + t_j * (mult[:, None] * a_s[None, :])
        mbarrier.arrive(empty.index(s), count=1)
        return acc

    @gluon.jit
    def _consumer_swap(a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, loaded, decoded, empty, as_ptr, mm_ptr, c_ptr,
                       MAX_M, N, K, NUM_MT, NT, TILES, STAGES: gl.constexpr, U: gl.constexpr,
                       ABLATE: gl.constexpr = 0):
        """Few tokens: acc[BW weight rows, BT tokens] = Bdec @ A^T, the weights on the MMA's M
        side (64) and the tokens on its N side (16-64), one warpgroup; c is stored transposed.
        U (2 or 4) blocks per iteration: their wgmmas are all started before the first is
        waited for, so the tensor core's latency is paid once per U blocks, not per block
        (an unfinished wgmma can't be carried from one loop iteration to the next). K / 128
        must be a multiple of U."""
        BW: gl.constexpr = q_bufs.type.shape[1]
        BT: gl.constexpr = a_bufs.type.shape[1]
        KB = K // 128
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BT, 32])
        t_init = gl.zeros([BW, BT], gl.float32, mma)
        it = 0
        for t in range(gl.program_id(0), TILES, gl.num_programs(0)):
            g, mt, nt, rows = _tile(t, mm_ptr, MAX_M, NUM_MT, NT)
            offs_w = nt * BW + gl.arange(0, BW, layout=gl.SliceLayout(1, mma))
            offs_t = mt * BT + gl.arange(0, BT, layout=gl.SliceLayout(0, mma))
            acc = gl.zeros([BW, BT], gl.float32, mma)
            if mt * BT < rows:
                in_bucket = offs_t < MAX_M
                as_rows = as_ptr + (g * MAX_M + offs_t).to(gl.int64) * KB
                for kb in range(0, KB, U):
                    # a_scale of the U blocks: loaded before the wgmmas start, used after.
                    a_s0 = gl.load(as_rows + kb, mask=in_bucket, other=0.0)
                    a_s1 = gl.load(as_rows + (kb + 1), mask=in_bucket, other=0.0)
                    t0 = _swap_issue(q_bufs, a_bufs, loaded, decoded, t_init, it, STAGES)
                    t1 = _swap_issue(q_bufs, a_bufs, loaded, decoded, t_init, it + 1, STAGES)
                    if U == 4:
                        a_s2 = gl.load(as_rows + (kb + 2), mask=in_bucket, other=0.0)
                        a_s3 = gl.load(as_rows + (kb + 3), mask=in_bucket, other=0.0)
                        t2 = _swap_issue(q_bufs, a_bufs, loaded, decoded, t_init, it + 2, STAGES)
                        t3 = _swap_issue(q_bufs, a_bufs, loaded, decoded, t_init, it + 3, STAGES)
                        t0 = warpgroup_mma_wait(3, deps=(t0,))
                        acc = _swap_retire(acc, t0, a_s0, q_bufs, a_bufs, ref_bufs, flag_bufs, bs_bufs, empty, t_init,
                                           it, STAGES, ABLATE)
                        t1 = warpgroup_mma_wait(2, deps=(t1,))
                        acc = _swap_retire(acc, t1, a_s1, q_bufs, a_bufs, ref_bufs, flag_bufs, bs_bufs, empty, t_init,
                                           it + 1, STAGES, ABLATE)
                        t2 = warpgroup_mma_wait(1, deps=(t2,))
                        acc = _swap_retire(acc, t2, a_s2, q_bufs, a_bufs, ref_bufs, flag_bufs, bs_bufs, empty, t_init,
                                           it + 2, STAGES, ABLATE)
                        t3 = warpgroup_mma_wait(0, deps=(t3,))
                        acc = _swap_retire(acc, t3, a_s3, q_bufs, a_bufs, ref_bufs, flag_bufs, bs_bufs, empty, t_init,
                                           it + 3, STAGES, ABLATE)
                    else:
                        gl.static_assert(U == 2, "2 or 4 blocks per iteration")
                        t0 = warpgroup_mma_wait(1, deps=(t0,))
                        acc = _swap_retire(acc, t0, a_s0, q_bufs, a_bufs, ref_bufs, flag_bufs, bs_bufs, empty, t_init,
                                           it, STAGES, ABLATE)
                        t1 = warpgroup_mma_wait(0, deps=(t1,))
                        acc = _swap_retire(acc, t1, a_s1, q_bufs, a_bufs, ref_bufs, flag_bufs, bs_bufs, empty, t_init,
                                           it + 1, STAGES, ABLATE)
                    it += U
                acc = gl.where((offs_t < rows)[None, :], acc, 0.0)
            c_cols = c_ptr + (g * MAX_M + offs_t).to(gl.int64) * N
            gl.store(c_cols[None, :] + offs_w[:, None], acc.to(gl.bfloat16), mask=(offs_t < MAX_M)[None, :])

    @gluon.jit
    def fused_ws_kernel(a_desc, bw_desc, bs_desc, as_ptr, mm_ptr, c_ptr, MAX_M, N, K, NUM_MT, NT, TILES,
                        STAGES: gl.constexpr, USE_ASM: gl.constexpr, SWAP: gl.constexpr, U: gl.constexpr = 2,
                        ABLATE: gl.constexpr = 0):
        """Persistent: grid min(tiles, SMs); see the module's doc. num_warps = 4 (consumer 0,
        Gluon's default partition). SWAP: one consumer, the weights on the MMA's M side
        (64-row weight tiles, a_desc's box rows are the token tile); else two consumers of
        64 token rows by 128 weight rows."""
        C: gl.constexpr = 1 if SWAP else 2
        BN: gl.constexpr = bw_desc.block_type.shape[0]
        AR: gl.constexpr = a_desc.block_type.shape[0]
        gl.static_assert(BN == (64 if SWAP else 128), "one weight row per decoder thread")
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * C, AR, 128], a_desc.layout)
        bw_bufs = gl.allocate_shared_memory(bw_desc.dtype, [STAGES, BN, 16], bw_desc.layout)
        bs_bufs = gl.allocate_shared_memory(bs_desc.dtype, [STAGES, BN, 4], bs_desc.layout)
        # The decoded tile: written as int32 words, read by wgmma as e4m3 (the same bytes and
        # the same 128-byte swizzle).
        qw_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
        q_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
        qw_bufs = gl.allocate_shared_memory(gl.int32, [STAGES, BN, 32], qw_layout)
        q_bufs = _as_fp8(qw_bufs, [STAGES, BN, 128], q_layout)
        ref_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, BN], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        flag_bufs = gl.allocate_shared_memory(gl.int32, [STAGES, 32], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        loaded = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        decoded = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(loaded.index(i), count=1)
            mbarrier.init(decoded.index(i), count=1)
            mbarrier.init(empty.index(i), count=C)  # each consumer releases the stage
        if SWAP:
            gl.warp_specialize([
                (_consumer_swap, (a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, loaded, decoded, empty, as_ptr, mm_ptr,
                                  c_ptr, MAX_M, N, K, NUM_MT, NT, TILES, STAGES, U, ABLATE)),
                (_decoder, (bw_bufs, bs_bufs, qw_bufs, ref_bufs, flag_bufs, loaded, decoded, mm_ptr, MAX_M, K, NUM_MT,
                            NT, TILES, STAGES, AR, USE_ASM, ABLATE, _SWAP_TPR)),
                (_loader, (a_desc, bw_desc, bs_desc, a_bufs, bw_bufs, bs_bufs, loaded, empty, mm_ptr, MAX_M, N, K,
                           NUM_MT, NT, TILES, STAGES, C, ABLATE)),
            ], [2 * _SWAP_TPR, 1], [_SWAP_DECODER_REGS, _LOADER_REGS])
        else:
            gl.warp_specialize([
                (_consumer, (a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, loaded, decoded, empty, as_ptr, mm_ptr,
                             c_ptr, MAX_M, N, K, NUM_MT, NT, TILES, 0, STAGES, C, ABLATE)),
                (_consumer, (a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, loaded, decoded, empty, as_ptr, mm_ptr,
                             c_ptr, MAX_M, N, K, NUM_MT, NT, TILES, 1, STAGES, C, ABLATE)),
                (_decoder, (bw_bufs, bs_bufs, qw_bufs, ref_bufs, flag_bufs, loaded, decoded, mm_ptr, MAX_M, K, NUM_MT,
                            NT, TILES, STAGES, AR * C, USE_ASM, ABLATE)),
                (_loader, (a_desc, bw_desc, bs_desc, a_bufs, bw_bufs, bs_bufs, loaded, empty, mm_ptr, MAX_M, N, K,
                           NUM_MT, NT, TILES, STAGES, C)),
            ], [4, 4, 1], [_CONSUMER_REGS, _DECODER_REGS, _LOADER_REGS])


def token_tile(max_m) -> int:
    """SWAP: tokens per tile (the MMA's N), the bucket's rows up to 64."""
    return 16 if max_m <= 16 else 32 if max_m <= 32 else 64


def supported(g, max_m, n, k) -> bool:
    """Shapes the kernel takes (the caller also needs sm_90, HAVE_GLUON and 16-byte aligned
    tensors for TMA): whole 128-wide weight tiles, k a multiple of 128."""
    return HAVE_GLUON and g > 0 and max_m > 0 and n % 128 == 0 and k % 128 == 0


def descriptors(a_fp8, b_fp4, b_scale, a_rows, bn):
    """TMA descriptors over the 2-D views: A [g * max_m, k] e4m3 in [a_rows, 128] boxes, B's
    packed codes as int32 words [g * n, k / 8] in [bn, 16] boxes, b_scale [g * n, k / 32] in
    [bn, 4]."""
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    words = b_fp4.view(g * n, k // 2).view(torch.int32)
    return (
        GluonDescriptor.from_tensor(a_fp8.view(g * max_m, k), [a_rows, 128],
                                    gl.NVMMASharedLayout.get_default_for([a_rows, 128], gl.float8e4nv)),
        GluonDescriptor.from_tensor(words, [bn, 16], gl.NVMMASharedLayout.get_default_for([bn, 16], gl.int32)),
        GluonDescriptor.from_tensor(b_scale.view(g * n, k // 32), [bn, 4],
                                    gl.NVMMASharedLayout.get_default_for([bn, 4], gl.float32)),
    )


def launch_args(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, stages=4, use_asm=True, ablate=0, swap=False,
                unroll=2):
    """(grid, positional args, constexprs and options) of one fused_ws_kernel launch."""
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    if swap:
        a_rows, bn, bm, maxnreg = token_tile(max_m), 64, token_tile(max_m), SWAP_MAXNREG
    else:
        a_rows, bn, bm, maxnreg = 64, 128, 128, MAXNREG
    num_mt, nt = -(-max_m // bm), n // bn
    tiles = g * num_mt * nt
    a_desc, bw_desc, bs_desc = descriptors(a_fp8, b_fp4, b_scale, a_rows, bn)
    return ((min(tiles, num_sms),),
            (a_desc, bw_desc, bs_desc, a_scale, masked_m, c, max_m, n, k, num_mt, nt, tiles),
            dict(STAGES=stages, USE_ASM=use_asm, SWAP=swap, U=unroll, ABLATE=ablate, num_warps=4, maxnreg=maxnreg))


def launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, stages=4, use_asm=True, ablate=0, swap=False,
           unroll=2):
    """ablate (timing only, wrong results), bits: 1 no decode, 2 no promotion (SWAP: no MMA),
    4 no b_scale loads, 8 no B loads (both SWAP only)."""
    grid, args, consts = launch_args(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, stages, use_asm, ablate,
                                     swap, unroll)
    fused_ws_kernel[grid](*args, **consts)
    return c
