"""What vendor FP8 GEMMs take on the FLOPs of max_m 512 full (4 x [512 x 2048] x [2048 x 2048]),
with and without the fp32 promotion the issue requires every 128 along K (twentieth session).

The issue's target for that workload is 20 us. Our two-pass call takes ~32.5 (harness run AI):
a decode pass of ~10 us and a GEMM pass of ~24 that promotes every 128. The question here is
what the GEMM alone can take on this GPU when written by the vendor: if even cuBLAS / CUTLASS
with the same promotion need most of 20 us on already-decoded operands, the target leaves no
room for the FP4 decode.

Each row is GPU time by CUDA-graph replay over L2-cold rotating inputs, median
(lowbit_gemm.bench.timing.time_call, the method of every kernel figure in docs/). Rows:
- torch._scaled_mm e4m3, one [2048 x 2048] x [2048 x 2048] (B read once: a bound below any
  grouped kernel, which reads four B), per-tensor scales, with and without fast accumulation
  (use_fast_accum=True: no promotion; False: CUTLASS/cuBLAS promote the accumulator);
- torch._scaled_grouped_mm, the 4 groups in one launch (row-wise scales), both accumulations;
- torch.nn.functional.scaled_mm with 1x128 (A) and 128x128 (B) block scales, DeepGEMM's
  scheme, one [2048 x 2048] product, where this torch and cuBLAS support it on sm_90;
- our run() on the workload, and its decode pass alone.
A call that fails prints its error and is left out.
Run from the repository root: python3 scripts/gpu_gemm_ceilings.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_grouped_gemm as gg  # noqa: E402  (inputs, run(), the decode pass alone)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lowbit_gemm.bench.timing import time_call  # noqa: E402

G, M, N, K = 4, 512, 2048, 2048
FLOP = 2 * G * M * N * K


def fp8(*shape):
    return (torch.randn(*shape, device=gg.dev) * 0.5).to(torch.float8_e4m3fn)


def timed(rows, name, fn, args):
    try:
        fn(*args)
        torch.cuda.synchronize()
        us = time_call(fn, args, gg.L2, reps=20).median_us
    except Exception as exc:  # unsupported here: say so and go on
        print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        return
    rows.append((name, us))
    print(f"{name}: {us:.2f} us ({FLOP / us / 1e6:.0f} TFLOP/s)", flush=True)


def main():
    rows = []
    a1, b1 = fp8(G * M, K), fp8(N, K)
    one = torch.ones((), device=gg.dev)
    for fast in (False, True):
        timed(rows, f"cuBLAS one 2048^3, per-tensor, fast_accum={fast}",
              lambda a, b, fast=fast: torch._scaled_mm(a, b.T, scale_a=one, scale_b=one,
                                                       out_dtype=torch.bfloat16, use_fast_accum=fast), [a1, b1])
    ag, bg = fp8(G, M, K), fp8(G, N, K)
    sa, sb = torch.rand(G, M, device=gg.dev) + 0.5, torch.rand(G, N, device=gg.dev) + 0.5
    for fast in (False, True):
        timed(rows, f"grouped 4 x 512, row-wise, fast_accum={fast}",
              lambda a, b, sa, sb, fast=fast: torch._scaled_grouped_mm(
                  a, b.transpose(-2, -1), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast),
              [ag, bg, sa, sb])
    # Block scales: A 1x128 as [M, K/128] and B 128x128 as [N/128, K/128], both stored outer
    # dimension fastest (torch 2.11 asks for strides (1, M) and (1, N/128): run 90).
    sa_blk = (torch.rand(K // 128, G * M, device=gg.dev) + 0.5).t()
    sb_blk = (torch.rand(K // 128, N // 128, device=gg.dev) + 0.5).t()
    timed(rows, "cuBLAS one 2048^3, block 1x128 x 128x128",
          lambda a, b, s1, s2: F.scaled_mm(a, b.T, s1, F.ScalingType.BlockWise1x128, s2,
                                           F.ScalingType.BlockWise128x128, output_dtype=torch.bfloat16),
          [a1, b1, sa_blk, sb_blk])
    a, a_s, b, b_s, mm = gg.make(M, [M] * G, seed=7)
    c = torch.empty(G, M, N, dtype=torch.bfloat16, device=gg.dev)
    timed(rows, "ours: run() (decode pass + GEMM pass)", gg.default_fn, [a, a_s, b, b_s, mm, 614, c])
    timed(rows, "ours: decode pass alone", gg.decode_only, [a, a_s, b, b_s, mm, 614, c])
    print(f"\nH200, torch {torch.__version__}; max_m 512 full's FLOPs ({FLOP / 1e9:.1f} GFLOP); "
          "GPU us, graph replay, L2 cold, median")
    for name, us in rows:
        print(f"{name:62s} {us:7.2f} {FLOP / us / 1e6:6.0f} TFLOP/s")


if __name__ == "__main__":
    main()
