"""Write fused_ws_tlb.py beside the grouped solution's fused_ws.py: the same kernel with %clock64
stamps per block and partition, for scripts/gpu_ws_timeline.py (TIMELINE_BLOCKS, READY, CLOCK;
twenty-third session, run 120). A text substitution of the submitted file: each replaced passage
must occur as written, so a change to fused_ws.py that moves one fails here with that passage.
Delete fused_ws_tlb.py after the run: the solution's packed JSON holds every file of its folder
(tests/test_packing.py fails on a folder that differs from its pack).
Run from the repository root: python3 scripts/make_ws_timeline_probe.py
"""
import os

S = os.path.join("solutions", "lowbit", "gemm", "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048",
                 "triton_fp4_to_fp8_wgmma", "")
s = open(S + "fused_ws.py").read()

# (passage of fused_ws.py, its stamped form): the stamp helpers before the decoder's hand-on, the
# loader's stamps (slots 0-15 and 64), the decoder's (16-31, 32-47), the consumer's (48-63,
# 65-66, 80-95, 96-97), and the stamps' buffer through the kernel's arguments and launch().
REPLACEMENTS = [
    ("""
    @gluon.jit
    def _hand_on_decoded(""",
     '''
    @gluon.jit
    def _stamp(tl_ptr, slot, W: gl.constexpr, GLOBAL: gl.constexpr = False):
        """%clock64 (or %globaltimer) into tl_ptr[program, slot], from one thread of W warps."""
        lay: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
        i = gl.arange(0, 32 * W, layout=lay)
        if GLOBAL:
            ts = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [i], dtype=gl.int64, is_pure=False,
                                           pack=1)
        else:
            ts = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [i], dtype=gl.int64, is_pure=False,
                                           pack=1)
        gl.store(tl_ptr + gl.program_id(0) * 128 + slot + i * 0, ts, mask=i == 0)

    @gluon.jit
    def _stamp_blocks(tl_ptr, base, stage, SUB: gl.constexpr, W: gl.constexpr):
        """One stamp per block of ring position `stage` among a CTA's first 16 blocks."""
        for h in gl.static_range(SUB):
            if SUB * stage + h < 16:
                _stamp(tl_ptr, base + SUB * stage + h, W)

    @gluon.jit
    def _hand_on_decoded('''),
    ("""\
    def _loader(a_ptr, w_ptr, bs_ptr, as_ptr, c_ptr, a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, empty, mm_ptr, mm_buf,
                MAX_M, N, K, NT, G, STAGES: gl.constexpr, SUB: gl.constexpr, G_P2: gl.constexpr):""",
     """\
    def _loader(a_ptr, w_ptr, bs_ptr, as_ptr, c_ptr, a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, empty, mm_ptr, mm_buf,
                MAX_M, N, K, NT, G, tl_ptr, STAGES: gl.constexpr, SUB: gl.constexpr, G_P2: gl.constexpr):"""),
    ("""\
            _copy_stage(a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, ks % STAGES, ks, a_src, a_in, w_src, s_src, as_src,
                        in_bucket, SUB)
""",
     """\
            _copy_stage(a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, ks % STAGES, ks, a_src, a_in, w_src, s_src, as_src,
                        in_bucket, SUB)
            _stamp_blocks(tl_ptr, 0, ks, SUB, _LW)
"""),
    ("""\
        rows = _rows(mm_buf.load(gi.type.layout), MAX_M)
        resume""",
     """\
        rows = _rows(mm_buf.load(gi.type.layout), MAX_M)
        _stamp(tl_ptr, 64, _LW)
        resume"""),
    ("""\
                _copy_stage(a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, s, ks, a_src, a_in, w_src, s_src, as_src,
                            in_bucket, SUB)
                it += 1""",
     """\
                _copy_stage(a_bufs, bw_bufs, bs_bufs, as_bufs, loaded, s, ks, a_src, a_in, w_src, s_src, as_src,
                            in_bucket, SUB)
                _stamp_blocks(tl_ptr, 0, it, SUB, _LW)
                it += 1"""),
    ("""\
    def _decoder(bw_bufs, bs_bufs, qw_bufs, ref_bufs, flag_bufs, loaded, decoded, freed, mm_ptr, MAX_M, K, NT, G,
                 STAGES: gl.constexpr,""",
     """\
    def _decoder(bw_bufs, bs_bufs, qw_bufs, ref_bufs, flag_bufs, loaded, decoded, freed, mm_ptr, MAX_M, K, NT, G,
                 tl_ptr, STAGES: gl.constexpr,"""),
    ("""\
                _decoder_acquire(loaded, freed, s, d, it, STAGES, DSTAGES)
""",
     """\
                _decoder_acquire(loaded, freed, s, d, it, STAGES, DSTAGES)
                _stamp_blocks(tl_ptr, 16, it, SUB, DW)
"""),
    ("""\
                mbarrier.arrive(decoded.index(d), count=1)
                it += 1""",
     """\
                mbarrier.arrive(decoded.index(d), count=1)
                _stamp_blocks(tl_ptr, 32, it, SUB, DW)
                it += 1"""),
    ("""\
    def _consumer(a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, as_bufs, loaded, decoded, empty, freed, mm_ptr, c_ptr,
                  MAX_M, N, K, NT, G, STAGES: gl.constexpr, DSTAGES: gl.constexpr, SUB: gl.constexpr,
                  G_P2: gl.constexpr):
""",
     """\
    def _consumer(a_bufs, q_bufs, ref_bufs, flag_bufs, bs_bufs, as_bufs, loaded, decoded, empty, freed, mm_ptr, c_ptr,
                  MAX_M, N, K, NT, G, tl_ptr, STAGES: gl.constexpr, DSTAGES: gl.constexpr, SUB: gl.constexpr,
                  G_P2: gl.constexpr):
        _stamp(tl_ptr, 66, 4)
        _stamp(tl_ptr, 96, 4, True)
"""),
    ("""\
                mbarrier.wait(decoded.index(d), (it // DSTAGES) & 1)
""",
     """\
                mbarrier.wait(decoded.index(d), (it // DSTAGES) & 1)
                _stamp_blocks(tl_ptr, 80, it, SUB, 4)
"""),
    ("""\
                _consumer_release(empty, freed, it, STAGES, DSTAGES)
                it += 1""",
     """\
                _consumer_release(empty, freed, it, STAGES, DSTAGES)
                _stamp_blocks(tl_ptr, 48, it, SUB, 4)
                it += 1"""),
    ("""\
                     mask=(has_tile & (offs_t < MAX_M))[None, :])
""",
     """\
                     mask=(has_tile & (offs_t < MAX_M))[None, :])
            if t == gl.program_id(0):
                _stamp(tl_ptr, 65, 4)
                _stamp(tl_ptr, 97, 4, True)
"""),
    ("""\
    def fused_ws_kernel(a_ptr, w_ptr, bs_ptr, as_ptr, mm_ptr, c_ptr, MAX_M, N, K, NT, G,
""",
     """\
    def fused_ws_kernel(a_ptr, w_ptr, bs_ptr, as_ptr, mm_ptr, c_ptr, MAX_M, N, K, NT, G, tl_ptr,
"""),
    ("""\
                         mm_ptr, c_ptr, MAX_M, N, K, NT, G, STAGES, DSTAGES, SUB, G_P2)),""",
     """\
                         mm_ptr, c_ptr, MAX_M, N, K, NT, G, tl_ptr, STAGES, DSTAGES, SUB, G_P2)),"""),
    ("""\
                        G, STAGES, DSTAGES, BT, SUB, G_P2)),""",
     """\
                        G, tl_ptr, STAGES, DSTAGES, BT, SUB, G_P2)),"""),
    ("""\
                       mm_buf, MAX_M, N, K, NT, G, STAGES, SUB, G_P2)),""",
     """\
                       mm_buf, MAX_M, N, K, NT, G, tl_ptr, STAGES, SUB, G_P2)),"""),
    ("""\
def launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, plan=None, most=64):""",
     """\
def launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, tl_buf=None, plan=None, most=64):"""),
    ("""\
    fused_ws_kernel[grid](a_fp8, b_fp4, b_scale, a_scale, masked_m, c, max_m, n, k, nt, g,""",
     """\
    fused_ws_kernel[grid](a_fp8, b_fp4, b_scale, a_scale, masked_m, c, max_m, n, k, nt, g, tl_buf,"""),
]
for old, new in REPLACEMENTS:
    assert s.count(old) == 1, f"fused_ws.py no longer holds, once, the passage: {old[:200]}"
    s = s.replace(old, new)
s += '''

TIMELINE_BLOCKS = True  # scripts/gpu_ws_timeline.py: 128 slots per CTA, one stamp per block and event
TIMELINE_READY = True   # and slots 80-95: when the consumer found each block decoded
TIMELINE_CLOCK = True   # stamps are %clock64 cycles; slots 96-97 %globaltimer at 66 and 65
'''
open(S + "fused_ws_tlb.py", "w").write(s)
print(f"wrote {S}fused_ws_tlb.py; delete it after the run")
