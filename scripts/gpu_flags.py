"""GPU check and timing of the two-pass path with per-group flags (Config.flags: the decode pass
in group order, each GEMM tile waiting on its group's count), nineteenth session, run 87 of
docs/kernels/grouped_gemm.md.

1. For each two-pass workload and extra masked_m patterns (groups empty first, last, in the
   middle, all empty, negative and past max_m), on UE8M0, adversarial and wide scales: the
   flagged call's c (NaN-poisoned before) must equal the heuristic's c bit for bit and pass
   the float64 oracle's check; the comparison is a kernel launched right after the call
   without a host sync, so it also tests that the GEMM grid completes last. Repeated 20 times
   on one case.
2. GPU time (CUDA-graph replay, L2 cold, median) of run()'s choice with and without flags,
   alternated twice, and host time per call (eager, 100 calls).
Prints a table last. Run from the repository root: python3 scripts/gpu_flags.py
"""

import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from gpu_grouped_gemm import G, H, K, L2, N, WORKLOADS, dev, main, make, oracle64  # noqa: E402
from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import check_accuracy  # noqa: E402

NAMES = ("m512full", "m512mix", "m1024_75", "m2048_75", "m2048full", "m4096e20", "m4096e192", "m4096e1024", "h200",
         "h256one", "h256mix", "m128peer")
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def configs(max_m, exp):
    cfg = H.choose_config(max_m, exp, N, torch.cuda.get_device_capability(), SMS, g=G, k=K, ws=True)
    if not (cfg.tiles and cfg.pdl):
        return cfg, None
    return cfg, dataclasses.replace(cfg, flags=True)


def call(cfg, a, a_s, b, b_s, mm, exp, c):
    main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, expected_m=exp, config=cfg)


def check():
    cases = [(w[1], w[2], w[3], "ue8m0") for w in WORKLOADS if w[0] in NAMES]
    for masked in ([0, 512, 0, 512], [512, 0, 0, 0], [0, 0, 0, 512], [0, 0, 0, 0], [-5, 600, 3, 0], [1, 511, 256, 100]):
        cases.append((512, masked, 614, "ue8m0"))
    cases += [(512, [512, 300, 0, 77], 614, "adversarial"), (512, [200, 512, 512, 9], 614, "wide"),
              (2048, [2048, 0, 1500, 3], 1830, "adversarial")]
    ok = True
    for i, (max_m, masked, exp, sc) in enumerate(cases):
        base, flagged = configs(max_m, exp)
        if flagged is None:
            print(f"check max_m={max_m} {masked}: not a tiles+pdl config ({base}), skipped", flush=True)
            continue
        a, a_s, b, b_s, mm = make(max_m, masked, seed=i, scales=sc)
        want = torch.full((G, max_m, N), float("nan"), dtype=torch.bfloat16, device=dev)
        call(base, a, a_s, b, b_s, mm, exp, want)
        reps = 20 if i == 0 else 2
        same = True
        for _ in range(reps):
            got = torch.full((G, max_m, N), float("nan"), dtype=torch.bfloat16, device=dev)
            call(flagged, a, a_s, b, b_s, mm, exp, got)
            # No host sync before the comparison: it runs after the call in stream order.
            same &= bool(torch.equal(got.view(torch.int16), want.view(torch.int16)))
        try:
            check_accuracy(got.cpu(), oracle64(a, a_s, b, b_s, mm).cpu(), what=f"flags/{sc}/{max_m}/{masked}")
            oracle = "ok"
        except AssertionError as e:
            oracle = f"FAIL {str(e)[:200]}"
            ok = ok and sc == "wide"  # the two-pass path's known limit on wide scales (run 17)
        ok &= same
        print(f"check max_m={max_m} {masked} {sc}: bit-equal to unflagged x{reps}: {same}; oracle: {oracle}", flush=True)
    return ok


def timing(ppsm_values):
    """Unflagged, then flagged with each decode_b_flagged_kernel grid (programs per SM)."""
    rows = {}
    for wname, max_m, masked, exp in [w for w in WORKLOADS if w[0] in NAMES]:
        base, flagged = configs(max_m, exp)
        if flagged is None:
            continue
        a, a_s, b, b_s, mm = make(max_m, masked, seed=7)
        c = torch.empty(G, max_m, N, dtype=torch.bfloat16, device=dev)
        row = {}
        for rep in ("", "2"):
            row["base" + rep] = time_call(lambda *args: call(base, *args), [a, a_s, b, b_s, mm, exp, c], L2,
                                          reps=20).median_us
            for ppsm in ppsm_values:
                main.FLAG_PROGRAMS_PER_SM = ppsm
                main._PLANS.clear()
                row[f"flags{ppsm}" + rep] = time_call(lambda *args: call(flagged, *args), [a, a_s, b, b_s, mm, exp, c],
                                                      L2, reps=20).median_us
        main.FLAG_PROGRAMS_PER_SM = ppsm_values[0]
        main._PLANS.clear()
        for label, cfg in (("base", base), ("flags", flagged)):
            for _ in range(3):
                call(cfg, a, a_s, b, b_s, mm, exp, c)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(100):
                call(cfg, a, a_s, b, b_s, mm, exp, c)
            row["host_" + label] = (time.perf_counter() - t0) / 100 * 1e6
            torch.cuda.synchronize()
        rows[wname] = row
        print(f"time {wname}: " + " ".join(f"{k}={v:.2f}" for k, v in row.items()), flush=True)
    return rows


if __name__ == "__main__":
    print(f"torch {torch.__version__}, triton {__import__('triton').__version__}, {torch.cuda.get_device_name()}",
          flush=True)
    ppsm_values = [int(x) for x in sys.argv[sys.argv.index("--ppsm") + 1].split(",")] if "--ppsm" in sys.argv \
        else [main.FLAG_PROGRAMS_PER_SM]
    ok = True
    for ppsm in ppsm_values:
        main.FLAG_PROGRAMS_PER_SM = ppsm
        main._PLANS.clear()
        print(f"checks with {ppsm} decode programs an SM", flush=True)
        ok &= check()
    rows = timing(ppsm_values) if ok else {}
    print("\n=== GPU us (graph replay, L2 cold, median), without / with flags (decode programs an SM), "
          "twice; host us per call ===")
    for wname, r in rows.items():
        best_b = min(r["base"], r["base2"])
        print(f"{wname.ljust(12)} base {r['base']:.2f} {r['base2']:.2f}"
              + "".join(f"  flags{p} {r[f'flags{p}']:.2f} {r[f'flags{p}2']:.2f} ({min(r[f'flags{p}'], r[f'flags{p}2']) - best_b:+.2f})"
                        for p in ppsm_values)
              + f"  host {r['host_base']:.1f} -> {r['host_flags']:.1f}")
    print("check passed" if ok else "CHECK FAILED")
