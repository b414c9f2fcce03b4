"""The two-pass path's decode pass in Gluon: kernel.decode_b_kernel's work, fewer instructions.

Nineteenth session (docs/kernels/grouped_gemm.md, run 84). decode_b_kernel (Triton) takes
8.7 us of max_m 512 full's 32.7 (run 45) and compiles (Triton 3.6, sm_90a) to 424 SASS
instructions per thread for 8 packed words, 53 a word: Triton spreads a (row, 128-K block)
pair's four scales over four lanes and its decoded bytes over a layout of its own, so the fold
takes shuffles and the exponent addends reach the words through shared memory and barriers.
With all of a grid's programs resident at once, those instructions come as one burst
between the loads and the stores. Here the layouts are explicit, so that nothing moves
between threads:

- the packed words as [pair, 32-group, word]: a pair's four groups over two lanes, each lane
  two 8-byte halves (words 2l, 2l + 1 of groups l and l + 2), so that each load instruction
  reads whole 32-byte sectors and each store (16 bytes of e4m3 a lane) writes 64 contiguous
  bytes of a pair;
- the pair's four scales replicated in each of its four lanes, so that the fold (kernel's
  _block_bits, and _row_ref_bits / _fold_scales_row for ROW_REF) is in-thread arithmetic;
- each group's two byte tables made once per lane and group, then kernel's prmt lookup.

The output is decode_b_kernel's, bit for bit (bq and ref; scripts/gpu_decode_pass.py checks
it): same fold tests, same addends, same -1 for blocks that do not fold. Gluon has no
interpreter and no portable lowering: main.py launches this only on sm_90 with a Triton that
has Gluon, decode_b_kernel everywhere else (and in the CPU tests).
"""

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    HAVE_GLUON = True
except ImportError:  # Triton without Gluon: decode_b_kernel serves every call
    HAVE_GLUON = False

from .kernel import _PRMT_WORD_ASM_TEXT, FOLD_SPREAD, ROW_HEADROOM

if HAVE_GLUON:
    _PRMT = gl.constexpr(_PRMT_WORD_ASM_TEXT)

    @gluon.jit
    def _launch_dependents():
        """griddepcontrol.launch_dependents (kernel's gdc_launch_dependents, for Gluon)."""
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // dummy $0", "=r", [], dtype=gl.int32,
                                  is_pure=False, pack=1)

    @gluon.jit
    def _fold(sb, sb0, ROW_REF: gl.constexpr):
        """A pair's four scale bit patterns [P, 4] (and, ROW_REF, its row's first block's, sb0)
        -> (whether the block folds [P], exponent addends [P, 4], 0 where it does not, the
        row multiplier [P]): kernel._block_bits, then _fold_scales_2d or _fold_scales_row, as
        the decode pass applies them."""
        bmax = gl.max(sb, axis=1)
        bmin = gl.min(sb, axis=1)
        mant = gl.max(sb & 0x7FFFFF, axis=1)
        ok = (bmin > 0) & (mant == 0) & (bmax < 0x7F800000) & (bmax - bmin <= FOLD_SPREAD * 0x800000)
        if ROW_REF:
            # kernel._row_ref_bits: the largest positive normal power of two of the row's
            # first block, ROW_HEADROOM binades up (0: no block of the row folds).
            pow2 = ((sb0 & 0x7FFFFF) == 0) & (sb0 > 0) & (((sb0 >> 23) & 0xFF) < 255)
            e0 = gl.max(gl.where(pow2, sb0, 0), axis=1)
            rbits = gl.where((e0 > 0) & (e0 < 0x7F800000 - ROW_HEADROOM * 0x800000),
                             e0 + ROW_HEADROOM * 0x800000, 0)
            ok = ok & (rbits > 0) & (bmax <= rbits) & (bmin >= rbits - 11 * 0x800000)
            dexp = gl.where(ok[:, None], (sb >> 20) - (rbits >> 20)[:, None] + 48, 0)
            ref = gl.where(ok, rbits.to(gl.float32, bitcast=True) * 0.015625, -1.0)
        else:
            dexp = gl.where(ok[:, None], (sb >> 20) - (bmax >> 20)[:, None] + 48, 0)
            ref = gl.where(ok, bmax.to(gl.float32, bitcast=True) * 0.015625, -1.0)
        return dexp, ref

    @gluon.jit
    def _chunk_load(bw_ptr, bs_ptr, grp, rt, kt, live, N, K, BR: gl.constexpr, KPER: gl.constexpr,
                    ROW_REF: gl.constexpr, WARPS: gl.constexpr):
        """The words and scales of one chunk (row tile rt: BR rows; K tile kt: KPER 128-K
        blocks) of group grp, all masked off where live is false. -> (scale bits [P, 4], the
        rows' first-block scale bits (ROW_REF) or the same, words [P, 4, 4])."""
        P: gl.constexpr = BR * KPER
        # [pair, 32-group, word]: 16 pairs a warp, 2 lanes a pair, each lane all 4 groups'
        # scales and 2 words of each group (words 2l, 2l + 1): the fold is in-thread, each
        # load reads 8 bytes and each store writes 16 (one 32-byte sector a pair).
        L3: gl.constexpr = gl.BlockedLayout([1, 4, 2], [16, 1, 2], [WARPS, 1, 1], [2, 1, 0])
        LS: gl.constexpr = gl.SliceLayout(2, L3)  # [pair, group]
        # Offsets from the chunk's first (row, block): int32 within it, its start once in 64
        # bits. Row strides as multiples of KB = K / 128, so that the compiler sees 16-byte
        # aligned rows and vectorises.
        KB = K // 128
        row0 = grp.to(gl.int64) * N + rt * BR
        kb0 = kt * KPER
        ps = gl.arange(0, P, layout=gl.SliceLayout(1, LS))
        r = ps // KPER
        b = ps % KPER
        ok = ((rt * BR + r < N) & live)[:, None]
        c4 = gl.arange(0, 4, layout=gl.SliceLayout(0, LS))[None, :]
        s_rows = bs_ptr + row0 * (KB * 4) + (r * (KB * 4))[:, None] + c4
        sb = gl.load(s_rows + (kb0 + b)[:, None] * 4, mask=ok, other=1.0).to(gl.int32, bitcast=True)
        if ROW_REF:
            sb0 = gl.load(s_rows, mask=ok, other=1.0).to(gl.int32, bitcast=True)
        else:
            sb0 = sb
        w_in = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))[None, None, :]
        w_ptrs = bw_ptr.to(gl.pointer_type(gl.int32), bitcast=True) + row0 * (KB * 16) + kb0 * 16 \
            + (r * (KB * 16) + b * 16)[:, None, None] + c4[:, :, None] * 4 + w_in
        w = gl.load(w_ptrs, mask=ok[:, :, None], other=0)
        return sb, sb0, w

    @gluon.jit
    def _chunk_decode(qw_ptr, ref_ptr, grp, rt, kt, live, sb, sb0, w, N, K, BR: gl.constexpr, KPER: gl.constexpr,
                      ROW_REF: gl.constexpr, WARPS: gl.constexpr, STORE: gl.constexpr):
        """Fold, decode and store one chunk loaded by _chunk_load. STORE False: timing only,
        the stores masked by the data (nothing written, nothing optimised away)."""
        P: gl.constexpr = BR * KPER
        L3: gl.constexpr = gl.BlockedLayout([1, 4, 2], [16, 1, 2], [WARPS, 1, 1], [2, 1, 0])
        LS: gl.constexpr = gl.SliceLayout(2, L3)
        # The decoded bytes [pair, group, 8 words]: a lane's 4 words from its 2 packed words.
        LQ: gl.constexpr = gl.BlockedLayout([1, 4, 4], [16, 1, 2], [WARPS, 1, 1], [2, 1, 0])
        KB = K // 128
        row0 = grp.to(gl.int64) * N + rt * BR
        kb0 = kt * KPER
        dexp, ref = _fold(sb, sb0, ROW_REF)
        ps = gl.arange(0, P, layout=gl.SliceLayout(1, LS))
        r = ps // KPER
        b = ps % KPER
        ref_ok = (rt * BR + r < N) & live
        if not STORE:
            ref_ok = ref_ok & (ref == 1.2345)
        gl.store(ref_ptr + (grp.to(gl.int64) * KB + kb0 + b) * N + rt * BR + r, ref, mask=ref_ok)
        d = dexp[:, :, None]
        zero = gl.zeros_like(w)
        lo, hi = gl.inline_asm_elementwise(_PRMT, "=r,=r,r,r,r",
                                           [w, zero + (0x3C383000 + d * 0x01010100),
                                            zero + (0x4C484440 + d * 0x01010101)],
                                           dtype=(gl.int32, gl.int32), is_pure=True, pack=1)
        q = gl.convert_layout(gl.reshape(gl.join(lo, hi), [P, 4, 8]), LQ)
        rq = gl.convert_layout(r, gl.SliceLayout(1, gl.SliceLayout(2, LQ)))
        bq = gl.convert_layout(b, gl.SliceLayout(1, gl.SliceLayout(2, LQ)))
        gq = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, LQ)))[None, :, None]
        jq = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, LQ)))[None, None, :]
        q_off = (rq * (KB * 32) + bq * 32)[:, None, None] + gq * 8 + jq
        q_ok = ((rt * BR + rq < N) & live)[:, None, None]
        if not STORE:
            q_ok = q_ok & (q == 0x13579BDF)
        gl.store(qw_ptr.to(gl.pointer_type(gl.int32), bitcast=True) + row0 * (KB * 32) + kb0 * 32 + q_off, q,
                 mask=q_ok)

    @gluon.jit
    def decode_pass_kernel(bw_ptr, bs_ptr, mm_ptr, qw_ptr, ref_ptr, MAX_M, N, K, BR: gl.constexpr,
                           KPER: gl.constexpr, ROW_REF: gl.constexpr, PDL: gl.constexpr, WARPS: gl.constexpr,
                           STORE: gl.constexpr = True):
        """decode_b_kernel's grid (cdiv(N, BR), K / (128 KPER), g) and arguments: b_fp4 (as
        int32 words), b_scale, masked_m, bq (written as int32 words), ref [g, K / 128, N]: one
        chunk of BR rows x KPER blocks a program; num_warps = WARPS."""
        if PDL:
            _launch_dependents()
        grp = gl.program_id(2)
        if gl.minimum(gl.load(mm_ptr + grp), MAX_M) > 0:  # groups without rows: pass 2 reads no B
            sb, sb0, w = _chunk_load(bw_ptr, bs_ptr, grp, gl.program_id(0), gl.program_id(1), True, N, K, BR, KPER,
                                     ROW_REF, WARPS)
            _chunk_decode(qw_ptr, ref_ptr, grp, gl.program_id(0), gl.program_id(1), True, sb, sb0, w, N, K, BR,
                          KPER, ROW_REF, WARPS, STORE)

    @gluon.jit
    def decode_loop_kernel(bw_ptr, bs_ptr, mm_ptr, qw_ptr, ref_ptr, MAX_M, N, K, BR: gl.constexpr,
                           KPER: gl.constexpr, ROW_REF: gl.constexpr, PDL: gl.constexpr, WARPS: gl.constexpr,
                           STORE: gl.constexpr = True):
        """The same pass over a grid (programs per group, 1, g): each program takes its group's
        chunks c = pid, pid + programs, ... and loads chunk c + programs before it decodes and
        stores chunk c, so that a program's loads overlap its own decode and stores."""
        if PDL:
            _launch_dependents()
        grp = gl.program_id(2)
        if gl.minimum(gl.load(mm_ptr + grp), MAX_M) > 0:
            KT = K // (128 * KPER)
            chunks = gl.cdiv(N, BR) * KT
            step = gl.num_programs(0)
            c = gl.program_id(0)
            sb, sb0, w = _chunk_load(bw_ptr, bs_ptr, grp, c // KT, c % KT, c < chunks, N, K, BR, KPER, ROW_REF, WARPS)
            for c in range(gl.program_id(0), chunks, step):
                nxt = c + step
                sb_n, sb0_n, w_n = _chunk_load(bw_ptr, bs_ptr, grp, nxt // KT, nxt % KT, nxt < chunks, N, K, BR,
                                               KPER, ROW_REF, WARPS)
                _chunk_decode(qw_ptr, ref_ptr, grp, c // KT, c % KT, True, sb, sb0, w, N, K, BR, KPER, ROW_REF,
                              WARPS, STORE)
                sb, sb0, w = sb_n, sb0_n, w_n


def supported(k, decode_rows, decode_kb, decode_warps):
    """Shapes and configs the Gluon decode pass takes (main.py also needs sm_90 and aligned
    tensors): whole warps of 16 (row, block) pairs."""
    return HAVE_GLUON and k % 128 == 0 and (decode_rows * decode_kb) % (16 * decode_warps) == 0
