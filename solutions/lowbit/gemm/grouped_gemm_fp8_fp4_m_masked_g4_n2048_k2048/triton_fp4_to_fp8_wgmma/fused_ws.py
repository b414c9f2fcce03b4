"""One launch where few rows per group are expected, on Hopper: B decoded by warps of its own, beside the MMA.

Written in Gluon (Triton's explicit-layout dialect), sm_90 only (thirteenth to twenty-third
sessions, runs 55-57, 65, 68, 76-82, 90-95, 100-107 and 111-116 in
docs/kernels/grouped_gemm.md). With at most 64 rows in a group (128 on 128-token tiles) its
tokens fit one MMA N tile, so every B tile is decoded exactly once, as in the two-pass path's
decode pass, but never written back to memory as e4m3; and the decode overlaps the MMA inside
each SM through warp specialisation instead of only across CTAs. A persistent CTA per SM has
three partitions, synchronised only through per-stage mbarriers. A stage holds SUB = 2 128-K
blocks (PLAN: 12, 10, 8 or 8 blocks in flight), so that every partition waits, fences, syncs and
arrives once per two blocks (0.8-1.2 us less than once per block, run 76). At 128 tokens the
decoded tiles have a ring of their own, shallower than the copies' (4 blocks against 8: run
116), with a ``freed`` barrier a slot; elsewhere a stage's decode slot is its copy slot:

- a loader (four warps): per 128-K block, by cp.async, A's tile (the group's BT token rows)
  and their a_scale, the packed FP4 words of 64 weight rows and their b_scale (barrier
  ``loaded[s]``; no TMA, as each TMA descriptor costs the host ~5-11 us to encode per launch,
  run 57; one warp could not issue a 64-token block's 28 copies per thread faster than one
  per ~0.5-0.8 us, run 65, and two held 128-token blocks back by 0.9-2.5 us a call, run 105);
  once its tiles' copies are out, it zero-fills the rows of c that no tile stores
  (_zero_fill);
- a decoder (four warps; a stage's two blocks seen as one tile of 128 rows, one thread a row
  and its 16 words, run 122): folds the row's four per-32 scales of the block
  (kernel._fold_scales_2d's test), decodes its words with kernel's prmt lookup into the
  block's swizzled e4m3 tile and writes the row's multiplier (-1 where the block does not
  fold: raw codes then), then the stage's flags, one per 32 rows (``decoded[s]``); its chain
  of dependent instructions paced the small buckets until each row's fold was made once
  instead of twice (run 122: 0.2-0.5 us less); now it takes 0.35-0.55 us a stage and waits for
  the loads (run 126) (with one thread per row of one block, two warps, ~0.4-0.5 us a block,
  run 65; 8 warps slower, run 78; two decoder partitions no faster, run 113);
- a consumer warpgroup: acc[64 weight rows, BT tokens] += wgmma(Bdec, A^T) * (ref x a_scale),
  one K = 128 wgmma per block, each promoted in fp32 while the next one runs; a stage with a
  row that does not fold takes four K = 32 wgmmas per block instead, each times that row's own
  per-32 scale (exact products), each promoted while the next one runs up to 64 tokens (run
  111: the harness's wide-scale workload 18.3 -> 13.7 us); then ``empty[s]``. c is stored
  transposed from the accumulator.

The kernel takes any max_m (token tiles of 16, 32, 64 or, where the caller asks, 128; a group
of more rows decodes its B tiles again per token tile); heuristics.choose_config says where it
is used and with which token tile (Config.BM: 128 where more than 64 rows a group are
expected, run 103). Only tiles
with rows go round the pipeline: every partition reads masked_m on the device (so nothing
waits on the host), counts them and walks them group by group, CTA i taking tiles i, i +
CTAs, ... (_tile), so a bucket's empty token tiles cost nothing there and the tiles with rows
are spread evenly however the groups hold them; the rows past each group's last token tile
with rows are zero-filled apart, by the loaders in 512-byte runs (twentieth session, runs
90-95: 256-row buckets with 28-56 rows a group 20-21 -> 11 us, max_m 4096 with ~24 rows 29 ->
25.5). The loader issues the first SPEC blocks of its guess of the CTA's first tile (group pid
// NT's first token tile: its first tile wherever that group has rows, see _tile) before
masked_m is back from memory (0.3-0.4 us less at 33-128-row buckets, run 68), masked_m itself
copied ahead of them (run 127); where the guess was wrong they go round the ring unused, so
the CTA starts its first tile only once they have landed. With few rows a call is bound by
the rate at which DRAM delivers its bytes after the harness's L2 flush (~2.4 TB/s; run 126).
Gluon has no interpreter and no portable lowering: main.py takes this path only on sm_90 with
a Triton that has Gluon (HAVE_GLUON) and 16-byte aligned tensors; the Triton kernels serve
every other call.
"""

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                                  warpgroup_mma_wait)

    HAVE_GLUON = True
except ImportError:  # Triton without Gluon: the Triton kernels serve every call
    HAVE_GLUON = False

# The Triton kernels' fold limit (a constexpr: kernel.FOLD_SPREAD says why 3 binades) and
# prmt decode, so that both paths fold and decode alike.
from .kernel import _PRMT_WORD_ASM_TEXT, FOLD_SPREAD

BW = 64        # weight rows per tile (the MMA's M)
# (128-K blocks per stage, stages, decode stages) by token tile. Every partition waits, fences,
# syncs and arrives once per stage, and that synchronisation lies on each block's path (runs
# 71-75): two blocks a stage took 0.8-1.2 us off 8-128-row buckets (run 76), four gained at most
# 0.3 more at 16 tokens and lost at 64 (run 77). Shared memory holds 12, 10 and 8 blocks (189,
# 179 and 177 KB). 128 tokens (run 103): 16 KB of A a block, so three stages (183 KB) until run
# 116 gave the decoded tiles a ring of their own there: four stages of copies, two of decoded
# tiles (210 KB), 0.4-1.2 us less on the buckets the heuristic gives 128-token tiles. Below 128
# tokens the same took 0.3-0.4 us more (the decoder's wait on a `freed` barrier a stage) and
# deeper rings of copies up to 0.8 more (a CTA's first blocks land later when all its blocks go
# out at once: runs 114-115).
PLAN = {16: (2, 6, 6), 32: (2, 5, 5), 64: (2, 4, 4), 128: (2, 4, 2)}
SPEC = 8       # blocks of a CTA's first tile issued before masked_m is back (run 68), at most the ring
assert all(SPEC % sub == 0 and min(SPEC, sub * stages) % sub == 0 and sub in (1, 2) and dstages <= stages
           for sub, stages, dstages in PLAN.values()), \
    "the speculated blocks must fill whole stages and fit the ring without waiting on a release; " \
    "a stage holds one or two blocks (the decoder takes them as one tile)"
# One decoder thread per row of a stage's two blocks (two threads per weight row where a stage
# holds one block; 8 decoder warps were slower: run 78). Four loader warps, the launch's third
# warpgroup (two until run 106, the other two idle): at 128 tokens 0.9-2.5 us faster a call
# (run 105), at 16-64 tokens within -0.8..+0.2 (run 106).
DECODER_WARPS, LOADER_WARPS = 2 * BW // 32, 4
# Registers: the launch's cap (4 + 4 + 4 warps), what setmaxnreg gives the
# decoder and the loader; the consumer (Gluon's default partition) gets the rest (its code uses
# registers up to R252 at 128 tokens: ptxas allocates it past the launch's cap). ptxas (Triton
# 3.6, sm_90a) reports no spill at 16, 32, 64 or 128 tokens with two blocks a stage; with one
# (k an odd multiple of 128, the library function's only) two values are spilled before the
# partitions split and reloaded once (with two loader warps their [128, 128] copy addresses
# spilled at 80 registers).
MAXNREG, DECODER_REGS, LOADER_REGS = 160, 112, 80

if HAVE_GLUON:
    _BW, _DECODER_REGS = gl.constexpr(BW), gl.constexpr(DECODER_REGS)
    _LOADER_REGS = gl.constexpr(LOADER_REGS)
    _DW, _LW = gl.constexpr(DECODER_WARPS), gl.constexpr(LOADER_WARPS)
    _SPEC = gl.constexpr(SPEC)
    # Shared-memory layouts of a stage's packed words [BW, 16] and scales [BW, 4] (what TMA
    # boxes of those shapes would use: rows of 16-byte chunks, swizzled where rows allow).
    _W_LAYOUT = gl.constexpr(gl.NVMMASharedLayout.get_default_for([BW, 16], gl.int32))
    _S_LAYOUT = gl.constexpr(gl.NVMMASharedLayout.get_default_for([BW, 4], gl.float32))
    _PRMT = gl.constexpr(_PRMT_WORD_ASM_TEXT)
    # A barrier among one partition's warps (Triton 3.6 names it thread_barrier, 3.7+ barrier).
    _partition_sync = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier
    # A cp.async copy into shared memory (Triton 3.6 async_copy_global_to_shared, 3.7+ async_load).
    _cp_async = async_copy.async_load if hasattr(async_copy, "async_load") else async_copy.async_copy_global_to_shared

    if hasattr(gl.shared_memory_descriptor, "reinterpret"):  # Triton 3.7+
        @gluon.jit
        def _view(bufs, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
            return bufs.reinterpret(dtype, shape, layout)
    else:  # Triton 3.6
        @gluon.jit
        def _view(bufs, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
            return bufs._reinterpret(dtype, shape, layout)

    @gluon.jit
    def _as_fp8(words, shape: gl.constexpr, layout: gl.constexpr):
        return _view(words, gl.float8e4nv, shape, layout)

    @gluon.jit
    def _stage_view(bufs, SUB: gl.constexpr):
        """A ring of SUB blocks a stage, [SUB * stages, rows, ...], seen as [stages, SUB * rows,
        ...]: a stage's blocks one after the other (the same bytes; the swizzle repeats within
        a block's rows)."""
        DT: gl.constexpr = bufs.dtype
        LAYOUT: gl.constexpr = bufs.layout
        D0: gl.constexpr = bufs.shape[0] // SUB
        D1: gl.constexpr = SUB * bufs.shape[1]
        if len(bufs.shape) == 3:
            D2: gl.constexpr = bufs.shape[2]
            return _view(bufs, DT, [D0, D1, D2], LAYOUT)
        else:
            return _view(bufs, DT, [D0, D1], LAYOUT)

    @gluon.jit
    def _groups(mm_ptr, G, MAX_M, G_P2: gl.constexpr, WARPS: gl.constexpr):
        """(group number, rows) of every group as [G_P2] vectors that every thread of a
        partition (WARPS warps) holds whole, from one load of masked_m. With a load per group,
        again for every tile (serial, each waiting on the last), 48-64-row buckets took up to
        0.7 us longer (runs 91-92)."""
        gi = _group_numbers(G_P2, WARPS)
        return gi, _rows(gl.load(mm_ptr + gi, mask=gi < G, other=0), MAX_M)

    @gluon.jit
    def _group_numbers(G_P2: gl.constexpr, WARPS: gl.constexpr):
        """0 .. G_P2 - 1, a vector that every thread of a partition (WARPS warps) holds whole."""
        return gl.arange(0, G_P2, layout=gl.BlockedLayout([G_P2], [32], [WARPS], [0]))

    @gluon.jit
    def _before(gi, v):
        """Exclusive prefix sum of v over the groups (all in every thread's registers)."""
        acc = gl.zeros_like(v)
        for h in gl.static_range(gi.shape[0] - 1):
            acc += gl.where(gi > h, gl.sum(gl.where(gi == h, v, 0), axis=0), 0)
        return acc

    @gluon.jit
    def _extra(gi, rows, G, BT: gl.constexpr):
        """Per group: token tiles with rows past the first, and whether it has none; with
        their exclusive prefix sums and totals: (extra, before, holes before, E, Z)."""
        wt = gl.cdiv(rows, BT)
        extra = gl.maximum(wt - 1, 0)
        hole = ((wt == 0) & (gi < G)).to(gl.int32)
        return extra, _before(gi, extra), _before(gi, hole), gl.sum(extra, axis=0), gl.sum(hole, axis=0)

    @gluon.jit
    def _positions(NT, G, gi, rows, BT: gl.constexpr):
        """How many tile positions the CTAs walk (see _tile): G x NT, plus NT for every token
        tile past a group's first that no empty group's positions take."""
        extra, e_before, h_before, E, Z = _extra(gi, rows, G, BT)
        return (G + gl.maximum(E - Z, 0)) * NT

    @gluon.jit
    def _tile(t, NT, G, gi, rows, BT: gl.constexpr):
        """Tile position t -> (whether it holds a tile, group, token tile, weight tile, rows
        of the group). Position g x NT + n is group g's first token tile by weight tile n
        wherever group g has rows, so that it is the tile the loader guessed before masked_m
        was back (_speculated); the positions of groups without rows, then those from G x NT,
        take the groups' further token tiles in order, so that CTA i's k-th tile is position
        i + k x CTAs and the tiles spread evenly however the groups hold their rows (one group
        of 256 rows in a bucket of 256: 128 tiles on 128 CTAs, where numbering every token
        tile, empty ones included, gave a few CTAs four each: run 90, 30 us against 13 for
        the two passes). Only empty groups' positions beyond the further tiles hold none.
        Numbering the tiles with rows densely instead cost max_m 1 with an empty group 1 us
        (the CTAs after it guessed wrong: harness run AJ)."""
        q = t // NT
        extra, e_before, h_before, E, Z = _extra(gi, rows, G, BT)
        own = _has_rows(q, G, gi, rows)
        e = gl.where(q < G, gl.sum(gl.where(gi == q, h_before, 0), axis=0), Z + q - G)
        hit = (e >= e_before) & (e < e_before + extra)
        g = gl.where(own, q, gl.sum(gl.where(hit, gi, 0), axis=0))
        mt = gl.where(own, 0, 1 + e - gl.sum(gl.where(hit, e_before, 0), axis=0))
        return own | (e < E), g, mt, t % NT, gl.sum(gl.where(gi == g, rows, 0), axis=0)

    @gluon.jit
    def _first_tile_guessed(NT, G, gi, rows):
        """Whether position pid holds the tile the loader guessed before masked_m was back
        (_speculated: group pid // NT's first token tile): then the guessed stages belong to
        the CTA's first tile; otherwise every partition passes them round the ring unused."""
        return _has_rows(gl.program_id(0) // NT, G, gi, rows)

    @gluon.jit
    def _has_rows(q, G, gi, rows):
        """Whether q is a group (q < G) with rows."""
        return (q < G) & (gl.sum(gl.where(gi == q, rows, 0), axis=0) > 0)

    @gluon.jit
    def _rows(masked, MAX_M):
        """Rows of a group: clamp(masked_m, 0, max_m), clamped in masked_m's own width before
        narrowing (as kernel.py's kernels do), so that an int64 masked_m past 2^31 still means
        max_m rows, not its low 32 bits."""
        return gl.minimum(gl.maximum(masked, 0), MAX_M).to(gl.int32)

    @gluon.jit
    def _speculated(G, NT, KS, SUB: gl.constexpr, STAGES: gl.constexpr):
        """Stages the loader issues before masked_m is back, for its guess of the CTA's first
        tile (group pid // NT's first token tile by weight tile pid % NT: its first tile
        wherever that group has rows, see _tile): the first min(SPEC / SUB, KS), or none where
        pid // NT is no group."""
        return gl.where(gl.program_id(0) < G * NT, gl.minimum(KS, min(_SPEC, SUB * STAGES) // SUB), 0)

    @gluon.jit
    def _decoder_acquire(loaded, freed, s, d, it, STAGES: gl.constexpr, DSTAGES: gl.constexpr):
        """The decoder's wait before ring position it (copy slot s = it % STAGES, decode slot
        d = it % DSTAGES): its copies landed (loaded) and, where the decode ring is the
        shallower, its decode slot released by the consumer (freed; a fresh barrier counts as
        having completed the phase before 0). Where the rings are alike the slot's reuse is
        already ordered by the loader's wait on `empty`, and `freed` is neither set up nor
        used."""
        mbarrier.wait(loaded.index(s), (it // STAGES) & 1)
        if DSTAGES != STAGES:
            mbarrier.wait(freed.index(d), ((it // DSTAGES) & 1) ^ 1)

    @gluon.jit
    def _consumer_release(empty, freed, it, STAGES: gl.constexpr, DSTAGES: gl.constexpr):
        """The consumer's release of ring position it: its copy slot, and its decode slot where
        that has a barrier of its own (_decoder_acquire)."""
        mbarrier.arrive(empty.index(it % STAGES), count=1)
        if DSTAGES != STAGES:
            mbarrier.arrive(freed.index(it % DSTAGES), count=1)

    @gluon.jit
    def _hand_on_decoded(loaded, decoded, freed, it, n, STAGES: gl.constexpr, DSTAGES: gl.constexpr):
        """The decoder's side of stages it .. it + n - 1 passed on untouched: acquire each, then
        arrive on decoded, so that no partition skips a phase (a wait for a phase after one not
        yet completed would return at once: the parity aliases, run 68). Returns the ring
        position after them."""
        for i in range(n):
            _decoder_acquire(loaded, freed, it % STAGES, it % DSTAGES, it, STAGES, DSTAGES)
            mbarrier.arrive(decoded.index(it % DSTAGES), count=1)
            it += 1
        return it

    @gluon.jit
    def _hand_on_consumed(decoded, empty, freed, it, n, STAGES: gl.constexpr, DSTAGES: gl.constexpr):
        """The consumer's side of the same: wait for decoded, then release both slots."""
        for i in range(n):
            mbarrier.wait(decoded.index(it % DSTAGES), (it // DSTAGES) & 1)
            _consumer_release(empty, freed, it, STAGES, DSTAGES)
            it += 1
        return it

    @gluon.jit
    def _copy_stage(a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, s, ks, a_src, a_in, w_src, s_src, as_src, in_bucket,
                    SUB: gl.constexpr):
        """The copies of stage ks's SUB 128-K blocks into ring stage s (A's rows in the bucket,
        B's words, b_scale, a_scale), then one arrival on loaded[s] per loader thread once they
        have landed (the barrier counts all the loader's threads)."""
        for h in gl.static_range(SUB):
            b = SUB * s + h
            kb = SUB * ks + h
            _cp_async(a_bufs.index(b), a_src + kb * 128, mask=a_in)
            _cp_async(bw_bufs.index(b), w_src + kb * 16)
            _cp_async(bs_bufs.index(b), s_src + kb * 4)
            _cp_async(as_bufs.index(b), as_src + kb, mask=in_bucket)
        async_copy.mbarrier_arrive(loaded.index(s), increment_count=False)

    @gluon.jit
    def _tile_sources(a_ptr, w_words, bs_ptr, as_ptr, g, mt, nt, MAX_M, N, K, a_tok, a_col, w_row, w_col, s_row, s_col,
                      tok, BW: gl.constexpr):
        """The loader's copy sources for token tile mt by weight tile nt of group g, at K block 0
        (_copy_stage adds each block's offset): A's rows and whether each is in the bucket (rows
        past it are copied as zeros by the copies' masks; their columns of c are not stored),
        B's packed words and b_scale of the tile's weight rows, a_scale's column and its mask.
        Row strides as 16 and 4 x KB words: the compiler then sees 16-byte aligned rows (b_fp4's
        bytes read as int32 words). The index vectors are the loader's layouts (_loader)."""
        BT: gl.constexpr = a_tok.shape[0]
        KB = K // 128
        a_row = g * MAX_M + mt * BT
        b_row = g * N + nt * BW
        return (a_ptr + (a_row + a_tok).to(gl.int64) * K + a_col, mt * BT + a_tok < MAX_M,
                w_words + (b_row + w_row).to(gl.int64) * (KB * 16) + w_col,
                bs_ptr + (b_row + s_row).to(gl.int64) * (KB * 4) + s_col,
                as_ptr + (a_row + tok).to(gl.int64) * KB, mt * BT + tok < MAX_M)

    @gluon.jit
    def _zero_fill(c_ptr, G, MAX_M, N, gi, rows, BT: gl.constexpr, WARPS: gl.constexpr):
        """The loader's last task: zeros to the rows of c that no tile stores. In each group
        they run from its last token tile with rows (whose rows past masked_m the consumer
        zeroes) to max_m: one contiguous range of c (gi, rows: _groups'). Each range is cut in
        16-byte pieces dealt round the grid's loaders, so that every warp stores whole
        512-byte runs; zero tiles stored by the
        consumer from the MMA's layout, one tile at a time, took ~50 us for max_m 4096's 64
        MiB (run 90). The loader is done with its copies a few stages before the consumer
        with its tiles, and waits on nothing here. Shared with the decoder, the fill cost
        0.3-0.9 us at 1-128-row buckets even where there was nothing to store (run 93: the
        values it needs, live across the decoder's loop)."""
        piece: gl.constexpr = gl.BlockedLayout([8], [32], [WARPS], [0])
        lane = gl.arange(0, WARPS * 256, layout=piece)
        zeros = gl.zeros([WARPS * 256], gl.bfloat16, piece)
        step = gl.num_programs(0).to(gl.int64) * (WARPS * 256)
        start = gl.program_id(0).to(gl.int64) * (WARPS * 256)
        for gg in range(G):
            z0 = gl.minimum(gl.cdiv(gl.sum(gl.where(gi == gg, rows, 0), axis=0), BT) * BT, MAX_M)
            base = c_ptr + (gg * MAX_M + z0).to(gl.int64) * N
            count = (MAX_M - z0).to(gl.int64) * N
            for r in range(0, gl.cdiv(count - start, step)):
                offs = start + r * step + lane
                gl.store(base + offs, zeros, mask=offs < count)

    @gluon.jit
    def _loader(a_ptr, w_ptr, bs_ptr, as_ptr, c_ptr, a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, empty, mm_ptr, mm_buf,
                MAX_M, N, K, NT, G, STAGES: gl.constexpr, SUB: gl.constexpr, G_P2: gl.constexpr):
        BT: gl.constexpr = a_bufs.type.shape[1]
        BW: gl.constexpr = bw_bufs.type.shape[1]
        KB = K // 128
        KS = KB // SUB  # stages per tile
        # Everything by cp.async, no TMA: a TMA descriptor costs the host ~5-11 us to encode
        # per launch (run 57). Per thread and block (four warps): BT / 16 16-byte copies of A,
        # 2 of B's packed words, 1 of its scales (each row's copied by two threads: the same
        # 16 bytes twice), a 4-byte copy of a_scale per token.
        al: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [_LW, 1], [1, 0])
        wl: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [_LW, 1], [1, 0])
        sl: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [_LW, 1], [1, 0])
        w_row = gl.arange(0, BW, layout=gl.SliceLayout(1, wl))[:, None]
        w_col = gl.arange(0, 16, layout=gl.SliceLayout(0, wl))[None, :]
        s_row = gl.arange(0, BW, layout=gl.SliceLayout(1, sl))[:, None]
        s_col = gl.arange(0, 4, layout=gl.SliceLayout(0, sl))[None, :]
        a_tok = gl.arange(0, BT, layout=gl.SliceLayout(1, al))[:, None]
        a_col = gl.arange(0, 128, layout=gl.SliceLayout(0, al))[None, :]
        # a_scale of the tile's BT tokens for one block: a 4-byte copy per token (a column of
        # a_scale [g * max_m, KB]), so that the consumer's promotion reads shared memory
        # instead of waiting on a global load one block ahead (~1.6 us at 64 tokens, run 56d).
        tok = gl.arange(0, BT, layout=gl.BlockedLayout([1], [32], [_LW], [0]))
        w_words = w_ptr.to(gl.pointer_type(gl.int32), bitcast=True)
        pid = gl.program_id(0)
        # The first stages of the guessed first tile go out before masked_m is back (~1 us into
        # the kernel after the harness's L2 flush, run 74): none of their addresses depends on
        # it. masked_m is copied to shared memory ahead of them (a cp.async group of its own),
        # as a load whose result is waited for only after them: loaded after them, it queued
        # behind every CTA's copies and came back up to ~3 us into the call, holding the next
        # stages' copies back (run 126); a plain load before them, ptxas waits for at once.
        gi = _group_numbers(G_P2, _LW)
        _cp_async(mm_buf, mm_ptr + gi, mask=gi < G)
        async_copy.commit_group()
        spec = _speculated(G, NT, KS, SUB, STAGES)
        a_src, a_in, w_src, s_src, as_src, in_bucket = _tile_sources(
            a_ptr, w_words, bs_ptr, as_ptr, pid // NT, 0, pid % NT, MAX_M, N, K, a_tok, a_col, w_row, w_col, s_row,
            s_col, tok, BW)
        for ks in range(spec):
            mbarrier.wait(empty.index(ks % STAGES), ((ks // STAGES) & 1) ^ 1)
            _copy_stage(a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, ks % STAGES, ks, a_src, a_in, w_src, s_src, as_src,
                        in_bucket, SUB)
        # Where the guess was wrong, its stages go round the ring all the same (the decoder and
        # the consumer hand them on undecoded), so that every partition waits for every phase
        # of every barrier: a wait for a phase after one that has not yet completed would
        # return at once (the parity aliases; run 68's first attempts hung).
        async_copy.wait_group(0)
        _partition_sync()  # every loader thread's copy of masked_m landed
        rows = _rows(mm_buf.load(gi.type.layout), MAX_M)
        resume = gl.where(_first_tile_guessed(NT, G, gi, rows), spec, 0)
        it = spec
        for t in range(pid, _positions(NT, G, gi, rows, BT), gl.num_programs(0)):
            has_tile, g, mt, nt, g_rows = _tile(t, NT, G, gi, rows, BT)
            a_src, a_in, w_src, s_src, as_src, in_bucket = _tile_sources(
                a_ptr, w_words, bs_ptr, as_ptr, g, mt, nt, MAX_M, N, K, a_tok, a_col, w_row, w_col, s_row, s_col, tok,
                BW)
            for ks in range(gl.where(t == pid, resume, 0), gl.where(has_tile, KS, 0)):
                s = it % STAGES
                # A fresh barrier counts as having completed the phase before 0.
                mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                _copy_stage(a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, s, ks, a_src, a_in, w_src, s_src, as_src,
                            in_bucket, SUB)
                it += 1
        _zero_fill(c_ptr, G, MAX_M, N, gi, rows, BT, _LW)

    @gluon.jit
    def _block_buf(bufs, s, h: gl.constexpr, SUB: gl.constexpr):
        """Block h of ring slot s in a per-block buffer (decoded tiles, row multipliers)."""
        return bufs.index(SUB * s + h)

    @gluon.jit
    def _decode_block(w, sb, qw_buf, ref_buf, col16, col4):
        """Rows of 128-K blocks (a stage's blocks one after the other), their packed words w [R,
        16] (8 codes each) and scale bits sb [R, 4] read by the caller: fold each row's four
        per-32 scales (kernel._fold_scales_2d's test), decode its words into the swizzled e4m3
        tiles, write the row's multiplier (-1 where the row does not fold: raw codes then).
        Returns whether each row folds."""
        BW: gl.constexpr = w.shape[0]
        # kernel._block_bits: positive, normal powers of two within FOLD_SPREAD binades.
        bmax = gl.max(sb, axis=1)
        bmin = gl.min(sb, axis=1)
        mant = gl.max(sb & 0x7FFFFF, axis=1)
        ok = (bmin > 0) & (mant == 0) & (bmax < 0x7F800000) & (bmax - bmin <= FOLD_SPREAD * 0x800000)
        # (e_j - e_max + 6) * 8: the exponent-field addend of group j; 0 keeps raw codes.
        dexp = gl.where(ok[:, None], (sb >> 20) - (bmax >> 20)[:, None] + 48, 0)
        d0 = gl.sum(gl.where(col4 == 0, dexp, 0), axis=1)[:, None]
        d1 = gl.sum(gl.where(col4 == 1, dexp, 0), axis=1)[:, None]
        d2 = gl.sum(gl.where(col4 == 2, dexp, 0), axis=1)[:, None]
        d3 = gl.sum(gl.where(col4 == 3, dexp, 0), axis=1)[:, None]
        # The two byte tables per 32-group, made once per group and then placed by column (the
        # selects fold: each register's column is known), not per word.
        lut0 = gl.where(col16 == 0, 0x3C383000 + d0 * 0x01010100,
                        gl.where(col16 == 1, 0x3C383000 + d1 * 0x01010100,
                                 gl.where(col16 == 2, 0x3C383000 + d2 * 0x01010100, 0x3C383000 + d3 * 0x01010100)))
        lut1 = gl.where(col16 == 0, 0x4C484440 + d0 * 0x01010101,
                        gl.where(col16 == 1, 0x4C484440 + d1 * 0x01010101,
                                 gl.where(col16 == 2, 0x4C484440 + d2 * 0x01010101, 0x4C484440 + d3 * 0x01010101)))
        # The prmt lookup (inline PTX: this kernel runs on NVIDIA GPUs only).
        lo, hi = gl.inline_asm_elementwise(_PRMT, "=r,=r,r,r,r", [w, lut0, lut1], dtype=(gl.int32, gl.int32),
                                           is_pure=True, pack=1)
        qw_buf.store(gl.reshape(gl.join(lo, hi), [BW, 32]))
        ref_buf.store(gl.where(ok, bmax.to(gl.float32, bitcast=True) * 0.015625, -1.0))
        return ok

    @gluon.jit
    def _decoder(bw_bufs, bs_bufs, qw_bufs, ref_bufs, flag_bufs, loaded, decoded, freed, mm_ptr, MAX_M, K, NT, G,
                 STAGES: gl.constexpr, DSTAGES: gl.constexpr, BT: gl.constexpr, SUB: gl.constexpr,
                 G_P2: gl.constexpr):
        """Decodes ring stage it % STAGES into decode slot it % DSTAGES (_decoder_acquire): the
        stage's SUB blocks as one tile of SUB x BW rows, read and stored in one piece (two
        blocks stored apart took a barrier between them, and their folds were made by two
        threads a row: run 122)."""
        BW: gl.constexpr = bw_bufs.type.shape[1]
        SB: gl.constexpr = SUB * BW
        DW: gl.constexpr = _DW
        # DW / (SB / 32) threads per row of the stage's tile (one where a stage holds two
        # blocks): each a share of its 16 words and all 4 of its scales (the same layout on
        # [SB, 4], replicated), so the fold needs no shuffles, and each row's fold is made once.
        TPR: gl.constexpr = DW // (SB // 32)
        rowl: gl.constexpr = gl.BlockedLayout([1, 16 // TPR], [32, 1], [SB // 32, TPR], [1, 0])
        col16 = gl.arange(0, 16, layout=gl.SliceLayout(0, rowl))[None, :] // 4
        col4 = gl.arange(0, 4, layout=gl.SliceLayout(0, rowl))[None, :]
        bw_st = _stage_view(bw_bufs, SUB)
        bs_st = _stage_view(bs_bufs, SUB)
        qw_st = _stage_view(qw_bufs, SUB)
        ref_st = _stage_view(ref_bufs, SUB)
        KS = K // (128 * SUB)
        gi, rows = _groups(mm_ptr, G, MAX_M, G_P2, DW)
        it = gl.to_tensor(0)
        if not _first_tile_guessed(NT, G, gi, rows):
            # The loader's guessed stages: passed on undecoded.
            it = _hand_on_decoded(loaded, decoded, freed, it, _speculated(G, NT, KS, SUB, STAGES), STAGES, DSTAGES)
        # The ring slots as counters of their own, not it % STAGES, which ptxas strength-reduces
        # into three instructions for each of the stage's 13 shared-memory addresses (268 -> 234
        # instructions a stage; no faster, run 123, but no slower).
        s = it % STAGES
        d = it % DSTAGES
        for t in range(gl.program_id(0), _positions(NT, G, gi, rows, BT), gl.num_programs(0)):
            has_tile, g, mt, nt, g_rows = _tile(t, NT, G, gi, rows, BT)
            for ks in range(gl.where(has_tile, KS, 0)):
                _decoder_acquire(loaded, freed, s, d, it, STAGES, DSTAGES)
                w = bw_st.index(s).load(rowl)
                sb = bs_st.index(s).load(rowl).to(gl.int32, bitcast=True)
                ok = _decode_block(w, sb, qw_st.index(d), ref_st.index(d), col16, col4)
                # The stage's flags, one per 32 rows of its tile (a warp's rows): some row did
                # not fold. Reduced within each warp only, no barrier (a reduction across the
                # warps through shared memory cost two a stage: run 79).
                bad = gl.max(gl.reshape(gl.where(ok, 0, 1), [SB // 32, 32]), axis=1)
                flag_bufs.index(d).store(bad)
                # The consumer's wgmma reads the tiles through the async proxy.
                fence_async_shared()
                _partition_sync()
                mbarrier.arrive(decoded.index(d), count=1)
                it += 1
                s = gl.where(s == STAGES - 1, 0, s + 1)
                d = gl.where(d == DSTAGES - 1, 0, d + 1)

    @gluon.jit
    def _promote(acc, t_mma, ref_buf, as_buf, mma: gl.constexpr):
        """acc + one block's wgmma result times (row multiplier x token a_scale), in fp32."""
        ref = ref_buf.load(gl.SliceLayout(1, mma))
        a_s = as_buf.load(gl.SliceLayout(0, mma))
        return acc + t_mma * (ref[:, None] * a_s[None, :])

    @gluon.jit
    def _promote_32(acc, t_mma, ref_bufs, bs_bufs, as_bufs, s, d, p: gl.constexpr, SUB: gl.constexpr,
                    mma: gl.constexpr):
        """acc + the wgmma result of 32-group p of ring stage s (decode slot d; block p // 4,
        its group p % 4) times (its multiplier x token a_scale), in fp32: the row multiplier
        where the row folds, its own per-32 scale where it does not. The scale column is read
        from shared memory straight into the accumulator's row layout, as a [BW, 1] tensor in
        that layout (no layout conversion through shared memory and its barrier, as a [BW, 4]
        load in a blocked layout took)."""
        b = SUB * s + p // 4
        # The narrowest wgmma layout of the same rows: its row vectors are the accumulator's.
        col: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=mma.warps_per_cta,
                                                      instr_shape=[16, 8, 32])
        ref = _block_buf(ref_bufs, d, p // 4, SUB).load(gl.SliceLayout(1, mma))
        s_j = gl.convert_layout(gl.sum(bs_bufs.index(b).slice(p % 4, 1, dim=1).load(col), axis=1),
                                gl.SliceLayout(1, mma))
        a_s = as_bufs.index(b).load(gl.SliceLayout(0, mma))
        return acc + t_mma * (gl.where(ref >= 0.0, ref, s_j)[:, None] * a_s[None, :])

    @gluon.jit
    def _wgmma_32(q_bufs, a_bufs, s, d, p: gl.constexpr, SUB: gl.constexpr, donor):
        """The K = 32 wgmma of 32-group p of ring stage s (decode slot d; block p // 4, its group
        p % 4), issued async; donor gives the result's shape and layout (use_acc=False: its
        values are not read)."""
        return warpgroup_mma(_block_buf(q_bufs, d, p // 4, SUB).slice(32 * (p % 4), 32, dim=1),
                             a_bufs.index(SUB * s + p // 4).slice(32 * (p % 4), 32, dim=1).permute((1, 0)), donor,
                             use_acc=False, is_async=True)

    @gluon.jit
    def _consumer(a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, as_bufs, loaded, decoded, empty, freed, mm_ptr, c_ptr,
                  MAX_M, N, K, NT, G, STAGES: gl.constexpr, DSTAGES: gl.constexpr, SUB: gl.constexpr,
                  G_P2: gl.constexpr):
        BW: gl.constexpr = q_bufs.type.shape[1]
        BT: gl.constexpr = a_bufs.type.shape[1]
        KS = K // (128 * SUB)
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BT, 32])
        flagl: gl.constexpr = gl.BlockedLayout([SUB * BW // 32], [32], [4], [0])  # every thread all flags
        gi, g_rows = _groups(mm_ptr, G, MAX_M, G_P2, 4)
        it = gl.to_tensor(0)
        if not _first_tile_guessed(NT, G, gi, g_rows):
            # The loader's guessed stages: handed back unused.
            it = _hand_on_consumed(decoded, empty, freed, it, _speculated(G, NT, KS, SUB, STAGES), STAGES, DSTAGES)
        for t in range(gl.program_id(0), _positions(NT, G, gi, g_rows, BT), gl.num_programs(0)):
            has_tile, g, mt, nt, rows = _tile(t, NT, G, gi, g_rows, BT)
            offs_w = nt * BW + gl.arange(0, BW, layout=gl.SliceLayout(1, mma))
            offs_t = mt * BT + gl.arange(0, BT, layout=gl.SliceLayout(0, mma))
            acc = gl.zeros([BW, BT], gl.float32, mma)
            t_mma = gl.zeros([BW, BT], gl.float32, mma)
            for ks in range(gl.where(has_tile, KS, 0)):
                s = it % STAGES
                d = it % DSTAGES
                mbarrier.wait(loaded.index(s), (it // STAGES) & 1)
                mbarrier.wait(decoded.index(d), (it // DSTAGES) & 1)
                # A landed through cp.async (the generic proxy); wgmma reads it through the
                # async proxy.
                fence_async_shared()
                if gl.max(flag_bufs.index(d).load(flagl), axis=0) == 0:  # every row folds
                    # One K = 128 wgmma per block, each promoted as soon as it is done while
                    # the next one runs (at 128 tokens too: up to 2.7 us faster than promoting
                    # each block once its own wgmma is done, run 103).
                    t_prev = warpgroup_mma(_block_buf(q_bufs, d, 0, SUB),
                                           a_bufs.index(SUB * s).permute((1, 0)), t_mma, use_acc=False,
                                           is_async=True)
                    for h in gl.static_range(1, SUB):
                        t_next = warpgroup_mma(_block_buf(q_bufs, d, h, SUB),
                                               a_bufs.index(SUB * s + h).permute((1, 0)), t_mma, use_acc=False,
                                               is_async=True)
                        t_prev = warpgroup_mma_wait(1, deps=(t_prev,))
                        acc = _promote(acc, t_prev, _block_buf(ref_bufs, d, h - 1, SUB),
                                       as_bufs.index(SUB * s + h - 1), mma)
                        t_prev = t_next
                    t_prev = warpgroup_mma_wait(0, deps=(t_prev,))
                    acc = _promote(acc, t_prev, _block_buf(ref_bufs, d, SUB - 1, SUB),
                                   as_bufs.index(SUB * s + SUB - 1), mma)
                else:
                    # Rows that do not fold hold raw codes: their 32-groups one K = 32 wgmma at
                    # a time, each times that row's own scale (rows that fold keep ref), each
                    # promoted while the next one runs, as above.
                    # At 128 tokens two [64, 128] products beside the accumulator spill 320
                    # bytes (ptxas, Triton 3.6): there each wgmma is waited for before its
                    # promotion, and its product's registers take the next one's result (with
                    # a fresh result each, 28 bytes of the tile's set-up spilled and 128-token
                    # calls took up to 1.3 us longer, run 111).
                    IN_FLIGHT: gl.constexpr = 1 if BT <= 64 else 0
                    t_prev = _wgmma_32(q_bufs, a_bufs, s, d, 0, SUB, t_mma)
                    for i in gl.static_range(1, 4 * SUB):
                        donor = t_mma
                        if IN_FLIGHT == 0:
                            t_prev = warpgroup_mma_wait(0, deps=(t_prev,))
                            acc = _promote_32(acc, t_prev, ref_bufs, bs_bufs, as_bufs, s, d, i - 1, SUB, mma)
                            donor = t_prev
                        t_next = _wgmma_32(q_bufs, a_bufs, s, d, i, SUB, donor)
                        if IN_FLIGHT == 1:
                            t_prev = warpgroup_mma_wait(1, deps=(t_prev,))
                            acc = _promote_32(acc, t_prev, ref_bufs, bs_bufs, as_bufs, s, d, i - 1, SUB, mma)
                        t_prev = t_next
                    t_prev = warpgroup_mma_wait(0, deps=(t_prev,))
                    acc = _promote_32(acc, t_prev, ref_bufs, bs_bufs, as_bufs, s, d, 4 * SUB - 1, SUB, mma)
                _consumer_release(empty, freed, it, STAGES, DSTAGES)
                it += 1
            acc = gl.where((offs_t < rows)[None, :], acc, 0.0)
            c_cols = c_ptr + (g * MAX_M + offs_t).to(gl.int64) * N
            gl.store(c_cols[None, :] + offs_w[:, None], acc.to(gl.bfloat16),
                     mask=(has_tile & (offs_t < MAX_M))[None, :])

    @gluon.jit
    def fused_ws_kernel(a_ptr, w_ptr, bs_ptr, as_ptr, mm_ptr, c_ptr, MAX_M, N, K, NT, G,
                        STAGES: gl.constexpr, DSTAGES: gl.constexpr, BT: gl.constexpr, SUB: gl.constexpr,
                        G_P2: gl.constexpr):
        """Persistent: grid min(tiles, SMs); see the module's doc. BT: tokens per tile
        (token_tile); STAGES, DSTAGES: stages of copies and of decoded tiles (DSTAGES <= STAGES);
        SUB: 128-K blocks per stage (each with buffers of its own, so every layout is a block's;
        the decoder sees a stage's as one tile, _stage_view); G: the groups, G_P2 a power of two
        >= G (_groups' vectors). num_warps = 4 (the consumer, Gluon's default partition)."""
        BW: gl.constexpr = _BW
        # A's tile in wgmma's 128-byte swizzle (rows of 128 e4m3 bytes), like the decoded tile.
        a_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
        a_bufs = gl.allocate_shared_memory(gl.float8e4nv, [SUB * STAGES, BT, 128], a_layout)
        bw_bufs = gl.allocate_shared_memory(gl.int32, [SUB * STAGES, BW, 16], _W_LAYOUT)
        bs_bufs = gl.allocate_shared_memory(gl.float32, [SUB * STAGES, BW, 4], _S_LAYOUT)
        as_bufs = gl.allocate_shared_memory(gl.float32, [SUB * STAGES, BT], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        # The decoded tile: written as int32 words, read by wgmma as e4m3 (the same bytes and
        # the same 128-byte swizzle).
        qw_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
        q_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
        qw_bufs = gl.allocate_shared_memory(gl.int32, [SUB * DSTAGES, BW, 32], qw_layout)
        q_bufs = _as_fp8(qw_bufs, [SUB * DSTAGES, BW, 128], q_layout)
        ref_bufs = gl.allocate_shared_memory(gl.float32, [SUB * DSTAGES, BW],
                                             gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        flag_bufs = gl.allocate_shared_memory(gl.int32, [DSTAGES, SUB * BW // 32],
                                              gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        # masked_m as the loader copies it (_loader).
        mm_buf = gl.allocate_shared_memory(mm_ptr.dtype.element_ty, [G_P2], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        loaded = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        decoded = gl.allocate_shared_memory(gl.int64, [DSTAGES, 1], mbarrier.MBarrierLayout())
        if DSTAGES != STAGES:
            freed = gl.allocate_shared_memory(gl.int64, [DSTAGES, 1], mbarrier.MBarrierLayout())
        else:  # not used: each decode slot is its copy slot (see _decoder_acquire)
            freed = empty
        # In the order of the coupled rings' set-up where they are alike (with more barriers
        # set up first, 1-128-row buckets took 0.1-0.2 us longer, run 116).
        for i in gl.static_range(STAGES):
            mbarrier.init(loaded.index(i), count=32 * _LW)  # the loader warps' threads
            if i < DSTAGES:
                mbarrier.init(decoded.index(i), count=1)
                if DSTAGES != STAGES:
                    mbarrier.init(freed.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        gl.warp_specialize([
            (_consumer, (a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, as_bufs, loaded, decoded, empty, freed,
                         mm_ptr, c_ptr, MAX_M, N, K, NT, G, STAGES, DSTAGES, SUB, G_P2)),
            (_decoder, (bw_bufs, bs_bufs, qw_bufs, ref_bufs, flag_bufs, loaded, decoded, freed, mm_ptr, MAX_M, K, NT,
                        G, STAGES, DSTAGES, BT, SUB, G_P2)),
            (_loader, (a_ptr, w_ptr, bs_ptr, as_ptr, c_ptr, a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, empty, mm_ptr,
                       mm_buf, MAX_M, N, K, NT, G, STAGES, SUB, G_P2)),
        ], [_DW, _LW], [_DECODER_REGS, _LOADER_REGS])


def token_tile(max_m, most=64) -> int:
    """Tokens per tile (the MMA's N): the bucket's rows, rounded up to 16, 32 or 64, or to 128
    where most (the heuristic's choice, Config.BM) allows it."""
    return 16 if max_m <= 16 else 32 if max_m <= 32 else 64 if max_m <= 64 or most <= 64 else 128


def supported(g, max_m, n, k) -> bool:
    """Shapes the kernel takes (the caller also needs sm_90 and 16-byte aligned tensors for
    the 16-byte cp.async copies): whole 64-row weight tiles, k a multiple of 128 (one block a
    stage where k is no multiple of 256)."""
    return HAVE_GLUON and g > 0 and 0 < max_m and n % BW == 0 and k % 128 == 0


def grid_and_sizes(g, max_m, n, num_sms, most=64):
    """(grid, NT): one persistent CTA per SM at most, over g x token tiles x weight tiles (the
    tiles with rows are known on the device only; the rest of the grid zero-fills)."""
    nt = n // BW
    tiles = g * -(-max_m // token_tile(max_m, most)) * nt
    return (min(tiles, num_sms), 1, 1), nt


def consts(g, max_m, k, plan=None, most=64):
    """fused_ws_kernel's constexprs and compile options; plan: PLAN's form, for experiments."""
    bt = token_tile(max_m, most)
    sub, stages, dstages = (plan or PLAN)[bt]
    if (k // 128) % sub:  # one block a stage, in as many stages as blocks
        sub, stages, dstages = 1, sub * stages, sub * dstages
    return dict(STAGES=stages, DSTAGES=dstages, BT=bt, SUB=sub, G_P2=1 << max(g - 1, 0).bit_length(),
                num_warps=4, maxnreg=MAXNREG)


def launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, plan=None, most=64):
    """fused_ws_kernel through Triton's own launcher (checks and tools; main.py launches it
    through its plan)."""
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    grid, nt = grid_and_sizes(g, max_m, n, num_sms, most)
    fused_ws_kernel[grid](a_fp8, b_fp4, b_scale, a_scale, masked_m, c, max_m, n, k, nt, g,
                          **consts(g, max_m, k, plan, most))
    return c
