"""One launch of the grouped solution's Gluon kernel, for ncu to profile (fifteenth session,
run 59c): fused_ws_kernel at max_m 64 with ~20 rows, or at max_m 128 with ~25. It is launched
once to compile, then once more (the launch to profile). Then summarise the stalls per SASS line:
  ncu -k regex:fused_ws_kernel --launch-skip 1 --launch-count 1 --section SourceCounters \\
      --section WarpStateStats -o REPORT python3 scripts/gpu_ncu_ws.py fused64
  ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SRC.csv
  python3 scripts/ncu_source_top.py SRC.csv
(Run 59c's B-resident cases, bres256one and bres512: this script at commit 44ccc47.)"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_grouped_gemm as gg  # noqa: E402

import torch  # noqa: E402

from lowbit_gemm.solutions import load_solution  # noqa: E402

CASES = {"fused64": ("fused_ws", 64, [8, 17, 32, 24]), "fused128": ("fused_ws", 128, [12, 30, 25, 9])}
mod_name, max_m, masked = CASES[sys.argv[1]]
mod = load_solution(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", mod_name)
a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7)
c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
for _ in range(2):
    mod.launch(a, a_s, b, b_s, mm, c, torch.cuda.get_device_properties(0).multi_processor_count)
torch.cuda.synchronize()
print("done", sys.argv[1])
