"""GPU check and timing of bres_ws_kernel (the grouped solution's B-resident Gluon kernel for
many rows, fifteenth session, run 59 in docs/kernels/grouped_gemm.md), launched directly,
against run() on the many-row workloads.

1. Each variant against the float64 oracle on NaN-poisoned c: random, adversarial,
   non-power-of-two, spread and wide scales; masked_m negative / 0 / > max_m; max_m not a
   multiple of the 128-token tile; an odd number of token tiles.
2. GPU time (CUDA-graph replay, L2-cold rotating inputs, median): run() and each variant,
   plus timing-only ablations (no decode; no promotion). Prints a table last.

A deadlocked pipeline would hang the GPU: the script exits after WATCHDOG_S seconds.
Run from the repository root: python3 scripts/gpu_bres_ws.py [--quick]
"""

import faulthandler
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_grouped_gemm as gg  # noqa: E402  (inputs, oracle, workloads, run())

import torch  # noqa: E402

from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import check_accuracy  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

BR = load_solution(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "bres_ws")
WATCHDOG_S = 500
VARIANTS = {  # name: consts() keywords
    "a4d2": {},
    "a4d4": dict(dec_warps=4),
    "a5d4": dict(a_stages=5, dec_warps=4),
}
ABLATIONS = {"nodecode": dict(ablate=1), "nopromo": dict(ablate=2), "addonly": dict(ablate=3),
             "noflag": dict(ablate=4)}
CHECKS = [  # max_m, masked_m, scales
    (512, [512, 512, 512, 512], "ue8m0"),
    (512, [307, 410, 512, 205], "adversarial"),
    (200, [200, 143, 67, 1], "nonpow2"),
    (256, [-7, 300, 0, 100], "spread"),
    (384, [384, 129, 0, 255], "wide30"),
    (130, [130, 1, 129, 64], "ue8m0"),
    (256, [0, 0, 0, 0], "ue8m0"),
    (1024, [700, 900, 1024, 500], "adversarial"),
    (512, [512, 300, 17, 400], "wide"),
]
TIMED = ["m512full", "m512mix", "h200", "h256mix", "h256one", "m1024_75", "m2048full", "m4096e192", "m4096e1024",
         "m128peer"]


def fn_of(kw):
    def fn(a, a_s, b, b_s, mm, exp, c):
        BR.launch(a, a_s, b, b_s, mm, c, **kw)
    return fn


def main():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    quick = "--quick" in sys.argv
    bad, results = 0, []
    for i, (max_m, masked, sc) in enumerate(CHECKS):
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=70 + i, scales=sc)
        want = gg.oracle64(a, a_s, b, b_s, mm).cpu()
        for vname, kw in VARIANTS.items():
            c = torch.full((gg.G, max_m, gg.N), float("nan"), dtype=torch.bfloat16, device=gg.dev)
            fn_of(kw)(a, a_s, b, b_s, mm, None, c)
            torch.cuda.synchronize()
            try:
                check_accuracy(c.cpu(), want, what=f"{vname}/{sc}/{max_m}/{masked}")
                msg = "ok"
            except AssertionError as exc:
                bad += 1
                msg = f"FAIL {str(exc)[:300]}"
            print(f"check {vname} max_m={max_m} masked={masked} {sc}: {msg}", flush=True)
    rows = []
    kernels = dict(VARIANTS, **({} if quick else ABLATIONS))
    for wname, max_m, masked, exp in [w for w in gg.WORKLOADS if w[0] in TIMED]:
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7)
        c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
        args = [a, a_s, b, b_s, mm, exp, c]
        row = {"run()": time_call(gg.default_fn, args, gg.L2, reps=20).median_us}
        for vname, kw in kernels.items():
            row[vname] = time_call(fn_of(kw), args, gg.L2, reps=20).median_us
        rows.append((wname, row))
        print(f"time {wname}: " + " ".join(f"{k}={v:.1f}" for k, v in row.items()), flush=True)
    faulthandler.cancel_dump_traceback_later()
    print(f"\nH200, torch {torch.__version__}, triton {gg.triton.__version__}; GPU us, graph replay, L2 cold, median")
    print(f"checks failed: {bad} of {len(CHECKS) * len(VARIANTS)}")
    cols = list(rows[0][1])
    print(f"{'workload':10s} " + " ".join(f"{c:>9s}" for c in cols))
    for wname, row in rows:
        print(f"{wname:10s} " + " ".join(f"{row[c]:9.1f}" for c in cols))


if __name__ == "__main__":
    main()
