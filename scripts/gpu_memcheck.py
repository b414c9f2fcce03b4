"""Out-of-bounds check of both solutions' newer paths on odd shapes, for compute-sanitizer.

The ninth session removed the masks from the one-pass loop's loads (row pointers clamped to
valid rows instead) and added the paired loop and the row-referenced 128-wide tiles; this
runs each of them once on shapes that are no multiple of the tiles (max_m 5 and 41, n 200),
with every tensor allocated at its exact size, so that memcheck sees any read past an end:

    compute-sanitizer --tool memcheck python3 scripts/gpu_memcheck.py

It also compares each result with the float64 oracle (a wrong result exits non-zero).
Tenth session: the sparse solution's entry on m = 1..3, 37 and 64 with n = 202 and k = 512
(the FP32-unit kernel on 2x4xK tiles, the few-row GEMM with 5 stages).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import torch  # noqa: E402

from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle  # noqa: E402
from lowbit_gemm.quantize import quantize_act_fp8_per128, quantize_weight_fp4_per32  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
main = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma")
sparse = load_solution("sparse_gemm_fp4_fp8_n2048_k2048", "lowbit", "triton_sparse_fp4_decode_wgmma")
heur = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics")


def case(max_m, n, k, masked, config, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a, a_s = quantize_act_fp8_per128(torch.randn(4, max_m, k, generator=gen))
    b, b_s = quantize_weight_fp4_per32(torch.randn(4, n, k, generator=gen) * 0.05)
    mm = torch.tensor(masked, dtype=torch.int32)
    want = grouped_gemm_oracle(a, a_s, b, b_s, mm)
    args = [t.cuda() for t in (a, a_s, b, b_s, mm)]
    c = torch.full((4, max_m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    main.grouped_gemm_fp8_fp4_masked(*args, c, config=config)
    torch.cuda.synchronize()
    check_accuracy(c.cpu(), want, what=f"max_m {max_m} n {n} {config}")


C = heur.Config
for max_m, n, masked, cfg in (
        (5, 200, [5, 3, 0, 9], C(BM=16, BN=64, swap=True, num_warps=4, num_stages=3, kperm=True, unroll=2)),
        (5, 200, [5, 3, 0, 9], C(BM=16, BN=64, swap=True, num_warps=4, num_stages=3, kperm=True)),
        (41, 200, [41, 17, -1, 30], C(BM=32, BN=64, swap=True, num_warps=4, num_stages=3, kperm=True, split_k=2)),
        (41, 200, [41, 17, -1, 30], C(BM=32, BN=64, swap=True, num_warps=4, num_stages=3, kperm=True, unroll=2)),
        (41, 200, [41, 17, -1, 30], C(BM=64, BN=128, swap=False, num_warps=4, num_stages=3, predec=True,
                                      tiles=True, tma=True, pdl=True, row_ref=True, decode_rows=16, decode_kb=4)),
        (41, 200, [41, 17, -1, 30], C(BM=64, BN=128, swap=False, num_warps=4, num_stages=3, predec=True,
                                      tiles=True, row_ref=True, maxnreg=168, decode_rows=16, decode_kb=4)),
        (41, 200, [41, 17, -1, 30], C(BM=64, BN=64, swap=False, num_warps=4, num_stages=4, predec=True,
                                      tiles=True, tma=True, row_ref=True, decode_rows=16, decode_kb=4))):
    case(max_m, n, 2048, masked, cfg)
    print("ok", max_m, n, cfg)

for m in (1, 2, 3, 37, 64):
    gen = torch.Generator().manual_seed(m)
    n, k = 202, 512
    a_vals = torch.randint(-128, 128, (m, k // 4), dtype=torch.int8, generator=gen)
    a_meta = torch.randint(-128, 128, (m, k // 4), dtype=torch.int8, generator=gen)
    b = torch.randn(n, k, generator=gen).clamp(-2, 2).to(torch.float8_e4m3fn)
    want = sparse_gemm_oracle(a_vals, a_meta, b)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    sparse.sparse_gemm_fp4_fp8(a_vals.cuda(), a_meta.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    check_accuracy(c.cpu(), want, what=f"sparse m {m} n {n} k {k}")
    print("ok sparse", m, n, k)
