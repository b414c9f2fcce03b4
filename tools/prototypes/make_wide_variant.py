"""Writes variants/<name>/grouped_wgmma.cu: the CUDA grouped kernel with a prototype kernel
(grouped_wide_kernel.inc: the tokens-as-N form on 128 x 128 tiles; _b_ring.inc: the same with the
weights' codes copied by the producer) taking the 128 x 128 tile of the producer form, for
tools/time_wgmma_variants.py --tiles 128x128. WD_ABL 1: the producer only hands slots on;
2: the consumers skip MMA and promotion (timing only).
  python3 tools/prototypes/make_wide_variant.py wide 0 tools/prototypes/grouped_wide_kernel.inc"""
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/cuda_fp4_wgmma"
name, abl, inc = sys.argv[1], sys.argv[2], Path(sys.argv[3]).read_text()
cu = (SRC / "grouped_wgmma.cu").read_text()
anchor = "constexpr int MAX_DEVICES = 64;"
cu = cu.replace(anchor, inc + anchor)
old = "  return launch<grouped_wgmma_kernel<128, false>, THREADS, Smem<128>::BYTES>(tiles, s, a8, as, b4, bs, masked_m,"
cu = cu.replace(old, "  return launch<grouped_wide_kernel, 384, WdSmem::BYTES>(tiles, s, a8, as, b4, bs, masked_m, masked_m_is_64, cc, "
                "g, max_m, n, k);\n" + old)
d = ROOT / "variants" / name
d.mkdir(parents=True, exist_ok=True)
for h in ("hopper_ptx.cuh", "wgmma_dense.cuh"):
    shutil.copy(SRC / h, d / h)
(d / "grouped_wgmma.cu").write_text(f"#define WD_ABL {abl}\n" + cu)
