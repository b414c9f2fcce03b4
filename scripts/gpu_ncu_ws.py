"""One launch each of the grouped solution's Gluon kernels, for ncu to profile (fifteenth
session, run 59c): bres_ws_kernel at one 256-row group and at 512 full, fused_ws_kernel at
max_m 64 with ~20 rows. Each is launched once to compile, then once more (the launch to profile:
ncu --launch-skip 1 --launch-count 1 per kernel name).
Run from the repository root: ncu -k regex:KERNEL --launch-skip 1 --launch-count 1 \\
    --section SourceCounters --section WarpStateStats python3 scripts/gpu_ncu_ws.py WHICH
WHICH: bres256one | bres512 | fused64"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_grouped_gemm as gg  # noqa: E402

import torch  # noqa: E402

from lowbit_gemm.solutions import load_solution  # noqa: E402

CASES = {"bres256one": ("bres_ws", 256, [0, 256, 0, 0]), "bres512": ("bres_ws", 512, [512] * 4),
         "fused64": ("fused_ws", 64, [8, 17, 32, 24])}
mod_name, max_m, masked = CASES[sys.argv[1]]
mod = load_solution(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", mod_name)
a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7)
c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
for _ in range(2):
    mod.launch(a, a_s, b, b_s, mm, c, torch.cuda.get_device_properties(0).multi_processor_count)
torch.cuda.synchronize()
print("done", sys.argv[1])
