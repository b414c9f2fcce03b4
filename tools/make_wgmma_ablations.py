"""Writes timing-only ablation copies of the CUDA grouped kernel (cuda_fp4_wgmma) into
variants/abl_<name>/, for tools/time_wgmma_variants.py --no-check --tiles 128x128: each takes
parts of the producer form's consumer work away (its results are wrong on purpose), so that the
times say what each part costs beside the producer's decode:
  base                  the kernel as it is
  noa                   no loads of A (constant fragments)
  noa_noprom            and no promotion (the block sums added once, at the end)
  mma_only              and no wait for the MMAs a stage (only the MMAs and the ring's handoff)
  python3 tools/make_wgmma_ablations.py && python3 tools/time_wgmma_variants.py variants/abl_*/grouped_wgmma.cu --tiles 128x128 --no-check"""

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/cuda_fp4_wgmma"
# name -> parts taken away: A loads, P promotion, W the wait for each stage's MMAs
VARIANTS = {"base": "", "noa": "A", "noa_noprom": "AP", "mma_only": "APW"}
FLAGS = (("A", "NOA"), ("P", "NOPROM"), ("W", "NOWAIT"))

# (text in grouped_wgmma.cu, its ablation form): each must occur exactly once
EDITS = (
    ("""        a_nxt0[q] = __ldg(reinterpret_cast<const uint2*>(pa0 + 32 * q));
        a_nxt1[q] = __ldg(reinterpret_cast<const uint2*>(pa1 + 32 * q));""",
     """        if (ABL_NOA) { a_nxt0[q] = make_uint2(0x38383838u + q, 0x38383838u); a_nxt1[q] = a_nxt0[q]; } else {
        a_nxt0[q] = __ldg(reinterpret_cast<const uint2*>(pa0 + 32 * q));
        a_nxt1[q] = __ldg(reinterpret_cast<const uint2*>(pa1 + 32 * q)); }"""),
    ("""        wgmma_commit();
        wgmma_wait<0>();
        STAGE_TRACE(gs, 6, tid == 0);  // MMA done""",
     """        wgmma_commit();
        if (!ABL_NOWAIT) wgmma_wait<0>();
        STAGE_TRACE(gs, 6, tid == 0);  // MMA done"""),
    ("""        if (mode == 0u) {
          promote_rows(acc, blk, sa0, sa1);""",
     """        if (ABL_NOPROM) {
        } else if (mode == 0u) {
          promote_rows(acc, blk, sa0, sa1);"""),
    ("    // the epilogue's tile, read again rather than kept",
     "    wgmma_wait<0>();\n    if (ABL_NOPROM) { for (int i = 0; i < BN / 2; ++i) acc[i] += blk[i]; }\n"
     "    // the epilogue's tile, read again rather than kept"),
)


def main():
    cu = (SRC / "grouped_wgmma.cu").read_text()
    for old, new in EDITS:
        if cu.count(old) != 1:
            raise SystemExit(f"grouped_wgmma.cu changed; update EDITS for:\n{old}")
        cu = cu.replace(old, new)
    for name, taken in VARIANTS.items():
        d = ROOT / "variants" / f"abl_{name}"
        d.mkdir(parents=True, exist_ok=True)
        for h in ("hopper_ptx.cuh", "wgmma_dense.cuh", "grouped_prepared.cuh", "grouped_regw.cuh"):
            shutil.copy(SRC / h, d / h)
        defs = "".join(f"#define ABL_{flag} {int(c in taken)}\n" for c, flag in FLAGS)
        (d / "grouped_wgmma.cu").write_text(defs + cu)
        print(d)


if __name__ == "__main__":
    main()
