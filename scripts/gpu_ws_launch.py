"""Launch one copy of fused_ws_kernel once, for ncu (seventeenth session, run 72): the module
(`fused_ws.py` or a copy beside it in the solution's folder) at one bucket, the timeline's
inputs. Usage (H200):
  ncu --clock-control none -k regex:fused_ws_kernel --launch-count 1 --section SourceCounters \\
      --section WarpStateStats -o REPORT python3 scripts/gpu_ws_launch.py MODULE MAX_M MASKED
  ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SRC.csv
  python3 scripts/ncu_source_top.py SRC.csv
MASKED: masked_m as comma-separated rows per group, e.g. 1,1,0,1."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_ir_probe as p  # noqa: E402  (inputs)

import torch  # noqa: E402

from lowbit_gemm.solutions import load_solution  # noqa: E402

mod = load_solution(p.GR, "lowbit", "triton_fp4_to_fp8_wgmma", sys.argv[1])
a, a_s, b, b_s, mm, c = p.grouped_inputs(int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")])
mod.launch(a, a_s, b, b_s, mm, c, torch.cuda.get_device_properties(0).multi_processor_count)
torch.cuda.synchronize()
