"""One call of the grouped kernel at max_m 1 (for ncu)."""
import sys
import torch
sys.path.insert(0, "tools")
from gpu_sweep import grouped_inputs
from lowbit_gemm.references import GROUPED
from lowbit_gemm.solutions import load_solution
K = load_solution(GROUPED, "lowbit", "triton_fp4_fp16_mma", "kernel")
a, a_s, b, b_s, mm = grouped_inputs(1, [1, 1, 0, 1], False, 1)
c = torch.empty(4, 1, 2048, dtype=torch.bfloat16, device="cuda")
for _ in range(2):
    K.grouped_fp16_kernel[(32, 4, 1)](a, a_s, b, b_s, mm, c, 1, 2048, K=2048, BM=16, BN=64, SWAP=True, GROUP_M=8,
                                      MANUAL_RNE=False, EXACT=False, num_warps=4, num_stages=1)
torch.cuda.synchronize()
