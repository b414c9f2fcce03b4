"""Where the few-row kernels' time goes: fixed cost against cost per K step (diagnostic).

Eighth session (run 34): ncu counted ~370 warp instructions per 128-K step in the grouped
one-pass kernel at max_m 1, issued at ~2.6 cycles each by one warp per scheduler, yet K
split in two (twice the warps per SM, half the steps each) gained only 5%. This times the
same launches with K cut to 1024, 512 and 256 (fewer steps, same grid), so the slope is the
cost of a step and the intercept what no step count changes (launch, prologue, first loads,
epilogue), with K split over 1, 2 or 4 programs, and at k = 2048 once more with the inputs
resident in L2 (the same inputs replayed: does a step wait on memory?); beside it the sparse
few-row path at m = 16 and 64 over the same Ks. Every variant is checked against the float64
oracle first.

Usage (GPU machine, repository root): python3 scripts/gpu_few_rows_probe.py
"""

import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import torch  # noqa: E402
import triton  # noqa: E402

from lowbit_gemm.bench.timing import _graph_time, time_call  # noqa: E402
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_host_time import grouped_inputs, sparse_inputs  # noqa: E402

GROUPED = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
SPARSE = "sparse_gemm_fp4_fp8_n2048_k2048"
L2 = torch.cuda.get_device_properties(0).L2_cache_size
N = 2048
KS = (256, 512, 1024, 2048)


def checked(fn, args, want, what):
    out = [a.clone() for a in args[:-1]] + [torch.full_like(args[-1], float("nan"))]
    fn(*out)
    torch.cuda.synchronize()
    check_accuracy(out[-1], want, what=what)


def fit(ks, us):
    """Least-squares line us = a + b * steps (steps = k / 128)."""
    ks, us = zip(*[(k, u) for k, u in zip(ks, us) if u == u])
    xs = [k / 128 for k in ks]
    mx, my = sum(xs) / len(xs), sum(us) / len(us)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, us)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main():
    g = load_solution(GROUPED, "lowbit", "triton_fp4_to_fp8_wgmma")
    gh = load_solution(GROUPED, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics")
    s = load_solution(SPARSE, "lowbit", "triton_sparse_fp4_decode_wgmma")
    sh = load_solution(SPARSE, "lowbit", "triton_sparse_fp4_decode_wgmma", "heuristics")
    print(f"GPU {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}", flush=True)
    rep = dataclasses.replace
    rows = []
    for max_m, masked, hint in ((1, [1, 1, 0, 1], 1), (16, [8, 16, 3, 11], 8), (1, [0, 0, 0, 0], 1)):
        base = gh.choose_config(max_m, hint, N, (9, 0))
        # The split variants keep one block per iteration (the paired loop needs an even
        # number of blocks per split, which k = 256 split in two does not have).
        variants = {"now": base, "split2": rep(base, split_k=2, unroll=1), "split4": rep(base, split_k=4, unroll=1)}
        if not any(masked):
            variants = {"now": base}
        for name, cfg in variants.items():
            us = []
            for k in KS:
                if (k // 128) % cfg.split_k:
                    us.append(float("nan"))  # K does not split that many ways
                    continue
                *args, _, c = grouped_inputs(max_m, masked, hint, k=k)
                args.append(c)  # [a, a_s, b, b_s, masked_m, c]: the hint is bound below
                fn = (lambda c2: lambda a, a_s, b, b_s, mm, c: g.grouped_gemm_fp8_fp4_masked(
                    a, a_s, b, b_s, mm, c, hint, config=c2))(cfg)
                checked(fn, args, grouped_gemm_oracle(*args[:5]), f"max_m {max_m} {name} k {k}")
                us.append(time_call(fn, args, L2, reps=20).median_us)
            warm = _graph_time(fn, [args] * 8, 20).median_us  # k = 2048, inputs L2-resident
            rows.append((f"grouped max_m={max_m} rows={max(masked)} {name}", us + [warm]))
            print(rows[-1], flush=True)
    for m in (16, 64):
        us = []
        fn = s.sparse_gemm_fp4_fp8
        for k in KS:
            args = sparse_inputs(m, k=k)
            checked(fn, args, sparse_gemm_oracle(*args[:3]), f"sparse m {m} k {k}")
            us.append(time_call(fn, args, L2, reps=20).median_us)
        warm = _graph_time(fn, [args] * 8, 20).median_us
        rows.append((f"sparse m={m} ({sh.choose(m, N, 2048, (9, 0)).path})", us + [warm]))
        print(rows[-1], flush=True)
    print("\nGPU us (CUDA-graph replay, cold L2, median); fixed + per 128-K step from a line fit")
    print("| case | " + " | ".join(f"k={k}" for k in KS) + " | k=2048 L2 warm | fixed us | us per 128-K step |")
    print("|---|" + "---|" * (len(KS) + 3))
    for name, us in rows:
        a, b = fit(KS, us[:len(KS)])
        print(f"| {name} | " + " | ".join(f"{u:.2f}" for u in us) + f" | {a:.2f} | {b:.3f} |")


if __name__ == "__main__":
    main()
