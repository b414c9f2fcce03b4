"""GPU check and timing of tile_ws_kernel (the grouped solution's Gluon GEMM pass for many rows,
twenty-first session) launched directly after the row-referenced decode pass, against run().

1. tile_ws against the float64 oracle on NaN-poisoned c: random, adversarial, non-power-of-two
   and wide scales (the exact loop); masked_m negative / 0 / > max_m; max_m no multiple of 128.
2. GPU time (CUDA-graph replay, L2-cold rotating inputs, median): run(), tile_ws at each of
   STAGES_TIMED, and the decode pass alone (ROW_REF), on the many-row workloads. Table last.
A deadlocked pipeline would hang the GPU: the script exits after WATCHDOG_S seconds.
--ablate: also timing-only copies of tile_ws (wrong numerics) on three workloads: the
promotion without a_scale, and no promotion at all (run 98).
Run from the repository root: python3 scripts/gpu_tile_ws.py [--ablate]
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

TW = load_solution(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "tile_ws")
SMS = torch.cuda.get_device_properties(0).multi_processor_count
WATCHDOG_S = int(os.environ.get("WATCHDOG_S", "300"))
STAGES_TIMED = (6, 4)
ABLATIONS = "--ablate" in sys.argv  # run 98: where tile_ws's time goes
ABLATED = ("m512full", "m1024_75", "m2048full")

CHECKS = [  # max_m, masked_m, scales
    (512, [512, 512, 512, 512], "ue8m0"),
    (300, [300, 129, 0, 257], "adversarial"),
    (200, [200, 143, -5, 1], "nonpow2"),
    (256, [-7, 300, 0, 100], "wide30"),
    (640, [640, 1, 500, 333], "spread"),
    (130, [130, 128, 127, 129], "wide"),
]
TIMED = ["m512full", "m512mix", "m1024_75", "m2048_75", "m2048full", "m4096e192", "m4096e1024", "h200", "m128peer"]


def tw_fn(stages, ablate=0):
    def fn(a, a_s, b, b_s, mm, exp, c):
        TW.launch(a, a_s, b, b_s, mm, c, SMS, stages=stages, ablate=ablate)
    return fn


def decode_fn(a, a_s, b, b_s, mm, exp, c):
    """The decode pass alone, as tile_ws's launch makes it (ROW_REF)."""
    from lowbit_gemm.solutions import load_solution as ls
    H = ls(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics")
    g, n, kh = b.shape
    k = 2 * kh
    bq = torch.empty((g, n, k), dtype=torch.float8_e4m3fn, device=gg.dev)
    ref = torch.empty((g, k // 128, n), dtype=torch.float32, device=gg.dev)
    gg.main.decode_b_kernel[(-(-n // H.DECODE_ROWS), k // 128 // H.DECODE_KB, g)](
        b, b_s, mm, bq, ref, a.shape[1], n, k, BR=H.DECODE_ROWS, USE_ASM=True, KPER=H.DECODE_KB, ROW_REF=True,
        num_warps=H.DECODE_WARPS)


def main():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    bad = 0
    for i, (max_m, masked, sc) in enumerate(CHECKS):
        a, a_s, b, b_s, mm = gg.make(max_m, [max(min(x, max_m), -1) for x in masked], seed=70 + i, scales=sc)
        mm = torch.tensor(masked, dtype=torch.int32, device=gg.dev)
        want = gg.oracle64(a, a_s, b, b_s, mm).cpu()
        for stages in STAGES_TIMED:
            c = torch.full((gg.G, max_m, gg.N), float("nan"), dtype=torch.bfloat16, device=gg.dev)
            tw_fn(stages)(a, a_s, b, b_s, mm, None, c)
            torch.cuda.synchronize()
            try:
                check_accuracy(c.cpu(), want, what=f"tile_ws{stages}/{sc}/{max_m}/{masked}")
                print(f"check tile_ws s{stages} max_m={max_m} masked={masked} {sc}: ok", flush=True)
            except AssertionError as exc:
                bad += 1
                print(f"check tile_ws s{stages} max_m={max_m} masked={masked} {sc}: FAIL {str(exc)[:400]}", flush=True)
    rows = []
    for wname, max_m, masked, exp in [w for w in gg.WORKLOADS if w[0] in TIMED]:
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7)
        c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
        args = [a, a_s, b, b_s, mm, exp, c]
        row = {"run()": time_call(gg.default_fn, args, gg.L2, reps=20).median_us}
        for stages in STAGES_TIMED:
            row[f"tile_ws s{stages}"] = time_call(tw_fn(stages), args, gg.L2, reps=20).median_us
        if ABLATIONS and wname in ABLATED:
            # Run 98: timing-only copies (wrong numerics): 1 the promotion without a_scale, 2
            # no promotion at all (one wgmma chain a tile: the TMA + wgmma skeleton).
            for ab in (1, 2):
                row[f"s4 ablate{ab}"] = time_call(tw_fn(4, ab), args, gg.L2, reps=20).median_us
        row["decode pass"] = time_call(decode_fn, args, gg.L2, reps=20).median_us
        rows.append((wname, row))
        print(f"time {wname}: " + " ".join(f"{k}={v:.1f}" for k, v in row.items()), flush=True)
    faulthandler.cancel_dump_traceback_later()
    print(f"\nH200, torch {torch.__version__}, triton {gg.triton.__version__}; GPU us, graph replay, L2 cold, median")
    print(f"checks failed: {bad} of {len(CHECKS) * len(STAGES_TIMED)}")
    cols = list(dict.fromkeys(c for _, row in rows for c in row))
    print(f"{'workload':12s} " + " ".join(f"{c:>12s}" for c in cols))
    for wname, row in rows:
        print(f"{wname:12s} " + " ".join(f"{row.get(c, float('nan')):12.1f}" for c in cols))


if __name__ == "__main__":
    main()
