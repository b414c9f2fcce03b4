"""GPU check and timing of the warp-specialised one-launch kernel (fused_ws.py, thirteenth
session) against the heuristic's choice (run()).

1. fused_ws against the float64 oracle on NaN-poisoned c: random, adversarial, non-power-of-two
   and wide scales; masked_m negative / 0 / > max_m; max_m not a multiple of 128.
2. GPU time (CUDA-graph replay, L2-cold rotating inputs, median) of run() and of fused_ws at
   several stage counts on the many-row workloads. Prints a table last.

A deadlocked pipeline would hang the GPU: the whole script exits after WATCHDOG_S seconds.
Run from the repository root: python3 scripts/gpu_fused_ws.py [--stages 3,4,5]
"""

import argparse
import faulthandler
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_grouped_gemm as gg  # noqa: E402  (inputs, oracle, workloads, run())

import torch  # noqa: E402

from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import check_accuracy  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

FW = load_solution(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "fused_ws")
SMS = torch.cuda.get_device_properties(0).multi_processor_count
WATCHDOG_S = 240

CHECKS = [
    # max_m, masked_m, scales
    (512, [512] * 4, "ue8m0"),
    (512, [307, 410, 512, 205], "ue8m0"),
    (300, [300, -5, 1000, 129], "ue8m0"),
    (256, [0, 256, 0, 0], "ue8m0"),
    (64, [64, 10, 0, 33], "ue8m0"),
    (512, [512, 500, 3, 260], "adversarial"),
    (256, [200, 256, 100, 3], "nonpow2"),
    (256, [256, 256, 256, 256], "wide"),
    (384, [384, 1, 130, 0], "spread"),
    (1024, [700, 900, 1024, 500], "ue8m0"),
]


SWAP_CHECKS = [
    (1, [1, 1, 0, -3], "ue8m0"),
    (16, [16, 3, 0, 20], "ue8m0"),
    (32, [20, 32, 17, 25], "adversarial"),
    (64, [64, 10, 0, 33], "nonpow2"),
    (128, [64, 90, 40, 128], "ue8m0"),
    (100, [100, 37, 65, 0], "spread"),
    (64, [8, 17, 32, 24], "wide30"),
]
SWAP_WORKLOADS = [
    ("m1", 1, [1, 1, 1, 1], 1),
    ("m16", 16, [8, 16, 3, 12], 10),
    ("m32", 32, [20, 32, 17, 25], 24),
]


def fused_fn(stages, ablate=0, swap=False, unroll=2):
    def fn(a, a_s, b, b_s, mm, exp, c):
        FW.launch(a, a_s, b, b_s, mm, c, SMS, stages=stages, ablate=ablate, swap=swap, unroll=unroll)
    return fn


def check(stages, swap, unroll=2):
    bad = 0
    for i, (max_m, masked, sc) in enumerate(SWAP_CHECKS if swap else CHECKS):
        if swap and unroll == 4 and max_m > 32:
            continue  # 64-token tiles spill at U = 4
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=50 + i, scales=sc)
        want = gg.oracle64(a, a_s, b, b_s, mm).cpu()
        c = torch.full((gg.G, max_m, gg.N), float("nan"), dtype=torch.bfloat16, device=gg.dev)
        fused_fn(stages, swap=swap, unroll=unroll)(a, a_s, b, b_s, mm, None, c)
        torch.cuda.synchronize()
        try:
            check_accuracy(c.cpu(), want, what=f"fused_ws s{stages}/{sc}/{max_m}/{masked}")
            print(f"check s{stages} u{unroll} max_m={max_m} masked={masked} {sc}: ok", flush=True)
        except AssertionError as exc:
            bad += 1
            print(f"check s{stages} u{unroll} max_m={max_m} masked={masked} {sc}: FAIL {str(exc)[:400]}", flush=True)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", default="3,4")
    ap.add_argument("--ablate", default="", help="timing only: fused_ws ablations at the last stage count "
                                                 "(1 no decode, 2 no promotion, 3 neither)")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--swap", action="store_true", help="the few-token kernel (weights on the MMA's M side)")
    ap.add_argument("--unroll", default="2", help="SWAP: blocks per consumer iteration (2, 4); checks use the first")
    ap.add_argument("--workloads", default="m512full,m512mix,m1024_75,m2048_75,m2048full,m4096e192,m4096e1024,"
                                           "h200,h256mix,m128peer")
    args = ap.parse_args()
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    stages = [int(s) for s in args.stages.split(",")]
    unrolls = [int(u) for u in args.unroll.split(",")]
    failures = {} if args.no_check else {(s, u): check(s, args.swap, u) for s in stages for u in unrolls}
    ablations = [int(x) for x in args.ablate.split(",") if x]
    rows = []
    names = args.workloads.split(",")
    for wname, max_m, masked, exp in SWAP_WORKLOADS + gg.WORKLOADS:
        if wname not in names:
            continue
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7)
        c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
        row = {"run()": time_call(gg.default_fn, [a, a_s, b, b_s, mm, exp, c], gg.L2, reps=20).median_us}
        for s in stages:
            for u in unrolls:
                row[f"ws s{s}u{u}"] = time_call(fused_fn(s, swap=args.swap, unroll=u), [a, a_s, b, b_s, mm, exp, c],
                                                gg.L2, reps=20).median_us
        for x in ablations:
            row[f"abl{x}"] = time_call(fused_fn(stages[-1], x, args.swap, unrolls[0]), [a, a_s, b, b_s, mm, exp, c], gg.L2, reps=20).median_us
        rows.append((wname, row))
        print(f"time {wname}: " + " ".join(f"{k}={v:.1f}" for k, v in row.items()), flush=True)
    faulthandler.cancel_dump_traceback_later()
    print(f"\nH200, {torch.__version__}, triton {gg.triton.__version__}; GPU us, graph replay, L2 cold, median")
    print(f"checks failed per stage count: {failures}")
    cols = list(rows[0][1]) if rows else []
    print(f"{'workload':12s} " + " ".join(f"{c:>8s}" for c in cols))
    for wname, row in rows:
        print(f"{wname:12s} " + " ".join(f"{row[c]:8.1f}" for c in cols))


if __name__ == "__main__":
    main()
