"""GPU check and timing of fused_ws_kernel (the grouped solution's warp-specialised Gluon kernel,
thirteenth and fourteenth sessions) launched directly, at bucket sizes inside and outside the
17-128 rows the heuristic gives it, against run() and against the Triton kernels' choice.

1. fused_ws against the float64 oracle on NaN-poisoned c: random, adversarial, non-power-of-two,
   spread and wide scales; masked_m negative / 0 / > max_m; max_m not a multiple of the tile.
2. GPU time (CUDA-graph replay, L2-cold rotating inputs, median): run(), the Triton kernels'
   choice (ws=False) and fused_ws launched directly. Prints a table last.
3. Host time: until a direct launch returns, and until run() returns, with FlashInfer-Bench's
   measurement replayed (scripts/gpu_host_time.py), at 16-64-row buckets.

--prev MODULE[,MODULE...]: also each MODULE (a copy of fused_ws.py in the solution's folder,
e.g. an earlier commit's, with the same launch() signature) in every check and timing.
--old DIR: also the host time of DIR's run() (a copy of the whole solution folder, e.g. an
earlier commit's), beside this one's. --no-host: skip the host times (part 3). --mid: the checks
plus four at 160-256 rows, and timings at the buckets past 128 rows (MID_WORKLOADS) instead.
--sweep: only run 101's timings of fused_ws against the two passes (SWEEP_WORKLOADS; --only NAME,...
for some of them). --wide: every kernel at 128-token tiles too past 64 rows (--mosts 128: only those).
--odd-k: also ODD_K_CHECKS (k = 384 and 640 through the library function's sizes).

A deadlocked pipeline would hang the GPU: the script exits once the checks have taken
CHECK_WATCHDOG_S seconds (120; the hang-prone cases run there first), or the timings WATCHDOG_S
(240, or the environment's values where many --prev modules need longer).
Run from the repository root: python3 scripts/gpu_fused_ws.py [--prev fused_ws_prev] [--old DIR]
(The many-row form of run 55 and its ablations: commit 71cc582; the few-token variants and
ablations of run 56: commits 462bfe0 to 07eab84, the script's --swap, --stages, --unroll and
--ablate options there; run 57's and 58's variants: docs/kernels/grouped_gemm.md says how
each --prev copy was made.)
"""

import faulthandler
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_grouped_gemm as gg  # noqa: E402  (inputs, oracle, workloads, run())
import gpu_host_time as ht  # noqa: E402  (host time: enqueue and the harness's measurement)

import torch  # noqa: E402

from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import check_accuracy  # noqa: E402
from lowbit_gemm.solutions import load_solution, load_solution_folder  # noqa: E402

FW = load_solution(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "fused_ws")
PREV = sys.argv[sys.argv.index("--prev") + 1].split(",") if "--prev" in sys.argv else []
KERNELS = {"fused_ws": FW}
for name in PREV:
    KERNELS[name] = load_solution(gg.DEF, "lowbit", "triton_fp4_to_fp8_wgmma", name)
# --wide (twenty-second session, run 103): every kernel also with 128-token tiles where the bucket
# has more than 64 rows (launch's most=128), as "<name>/<most>" (the checks and timings of
# 64-row buckets and below are the same launch, so those rows are not repeated).
WIDE = "--wide" in sys.argv
MOSTS = (64, 128) if WIDE else (64,)
if "--mosts" in sys.argv:  # e.g. --mosts 128: only those token-tile limits (run 105)
    MOSTS = tuple(int(x) for x in sys.argv[sys.argv.index("--mosts") + 1].split(","))
OLD = load_solution_folder(os.path.abspath(sys.argv[sys.argv.index("--old") + 1]), "old_grouped") \
    if "--old" in sys.argv else None
SMS = torch.cuda.get_device_properties(0).multi_processor_count
WATCHDOG_S = int(os.environ.get("WATCHDOG_S", "240"))  # longer for many --prev modules
CHECK_WATCHDOG_S = int(os.environ.get("CHECK_WATCHDOG_S", "120"))

CHECKS = [  # max_m, masked_m, scales[, masked_m's dtype (int32 otherwise)]
    (1, [1, 1, 0, -3], "ue8m0"),
    (3, [3, 2, 0, 7], "adversarial"),
    (7, [7, 1, 6, -1], "wide30"),
    (8, [8, 5, -2, 9], "adversarial"),
    (16, [16, 3, 0, 20], "ue8m0"),
    (32, [20, 32, 17, 25], "adversarial"),
    (48, [48, 17, 0, 60], "adversarial"),
    (64, [64, 10, 0, 33], "nonpow2"),
    (64, [8, 17, 32, 24], "wide30"),
    (100, [100, 37, 65, 0], "spread"),
    (128, [64, 90, 40, 128], "ue8m0"),
    (128, [20, 28, 16, 24], "wide30"),
    (128, [64, 3, -1, 65], "adversarial"),
    # A CTA's first tile without rows (its speculated stages passed round unused), then a tile
    # with rows (run 68); masked_m as int64 too.
    (128, [0, 90, -5, 128], "ue8m0"),
    (100, [0, 0, 0, 70], "ue8m0", torch.int64),
    # int64 masked_m beyond int32's range: clamped in its own width (max_m rows, then none).
    (100, [0, 2 ** 32 + 5, -(2 ** 33), 70], "ue8m0", torch.int64),
]
# m1gap: the harness's max_m 1, an empty group before the last (twentieth session, harness run
# AJ). m2, m4 and m32few (nineteenth session, run 89): buckets the heuristic gave the one-pass
# kernel until run 89 (under 8 rows; 17-32 rows with at most 16 expected); ws=False still times it.
WORKLOADS = [("m1", 1, [1, 1, 1, 1], 1), ("m1gap", 1, [1, 1, 0, 1], 1), ("m2", 2, [2, 1, 2, 0], 2),
             ("m4", 4, [4, 3, 1, 4], 3), ("m8", 8, [8, 5, 2, 7], 6), ("m16", 16, [8, 16, 3, 12], 10),
             ("m32few", 32, [10, 16, 5, 12], 11),
             ("m32", 32, [20, 32, 17, 25], 24), ("m48", 48, [30, 48, 12, 40], 32)] + \
    [w for w in gg.WORKLOADS if w[0] in ("m64dec", "m64peer", "m128dec")]
WIDE_WORKLOADS = [("m128wide30", 128, [20, 28, 16, 24], 26, "wide30"), ("m128wide", 128, [20, 28, 16, 24], 26, "wide")]
# --mid (twentieth session, runs 90-95): buckets past 128 rows, which the heuristic gave the
# two passes (or the one-pass kernel from 1024) until run 93 and still does where more than 64
# rows are expected, against fused_ws with 64-token tiles (a group's B tiles decoded once per
# token tile with rows): the harness's 200-4096-row workloads with their hints, and 192-256-row
# buckets with 28-128 rows in the groups.
MID = "--mid" in sys.argv
# --odd-k (twenty-third session): the library function's k = 384 and 640 (a multiple of 128,
# not of 256: one block a stage), at 64 and 128 tokens, where the 128-token tiles' decode ring
# is shallower than their copies' (max_m, masked_m, scales, k, token-tile limit).
ODD_K_CHECKS = [(512, [512, 80, 0, 100], "ue8m0", 384, 128), (512, [90, 3, -1, 512], "nonpow2", 640, 128),
                (256, [100, 256, 7, 0], "spread", 384, 128), (64, [64, 10, 0, 33], "nonpow2", 384, 64)]
# ("wide" scales here meet the known limit of docs/kernels/grouped_gemm.md's run 17, as in
# gpu_grouped_gemm.py's validate: 153 of 2 M outputs at 256 rows, k = 384, relative norm 2.3e-4.)
MID_CHECKS = [(256, [0, 256, 0, 0], "ue8m0"), (200, [200, 143, 67, 1], "adversarial"),
              (256, [-7, 300, 0, 100], "wide30"), (160, [160, 5, 0, 97], "nonpow2")]
MID_WORKLOADS = [("h200", 200, [200, 143, 67, 1], 123), ("h256empty", 256, [0, 0, 0, 0], 1),
                 ("h256one", 256, [0, 256, 0, 0], 76), ("h256mix", 256, [0, 256, 0, 100], 106),
                 ("b256r32", 256, [32, 20, 28, 32], 28), ("b256r64", 256, [64, 50, 60, 40], 54),
                 ("b256r96", 256, [96, 80, 70, 90], 84), ("b256r128", 256, [128, 110, 100, 120], 115),
                 ("b192r64", 192, [64, 40, 55, 64], 56), ("h512mix", 512, [255, 280, 233, 269], 311),
                 ("h4096e24", 4096, [21, 23, 18, 24], 24), ("h4096e230", 4096, [141, 248, 152, 150], 230),
                 # twenty-second session (run 100): large buckets with more than 64 rows a group,
                 # mostly empty, where fused_ws's zero fill from the start might beat the two passes
                 ("h4096e1228", 4096, [820, 889, 1037, 721], 1228), ("b4096r400", 4096, [400, 380, 420, 350], 390),
                 ("b2048r200", 2048, [200, 180, 220, 150], 190), ("b1024r120", 1024, [120, 100, 128, 90], 110),
                 ("b2048r24", 2048, [24, 20, 16, 22], 21)]
if MID:
    CHECKS = CHECKS + MID_CHECKS
# --sweep (twenty-second session, run 101): where fused_ws beats the two passes in buckets of
# 512-4096 rows with 65-256 rows expected a group (the groups' rows near the hint: 0.8, 1.1,
# 0.9 and 1.0 x), and where a hint understates the rows. Timings only (no checks: fused_ws
# ignores the hint, and the checks above cover these shapes); fused_ws and the two passes
# (ws=False) each timed twice, interleaved.
SWEEP = "--sweep" in sys.argv
ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None  # sweep workloads
SWEEP_WORKLOADS = [(f"b{m}h{h}", m, [min(m, int(h * f)) for f in (0.8, 1.1, 0.9, 1.0)], h)
                   for m in (512, 1024, 2048, 4096) for h in (80, 128, 160, 192, 256) if 2 * h <= m] + \
                  [("b1024h128r400", 1024, [400, 380, 420, 350], 128),
                   ("b2048h192r600", 2048, [600, 640, 560, 620], 192),
                   ("b4096h128r300", 4096, [300, 280, 320, 260], 128),
                   ("b4096h256r700", 4096, [700, 650, 720, 680], 256)] + \
                  [w for w in MID_WORKLOADS
                   if w[0] in ("h200", "h256one", "h256mix", "h512mix", "h4096e230", "b256r128")] + \
                  [("h512full", 512, [512] * 4, 614), ("h1024", 1024, [703, 785, 697, 842], 908),
                   ("b128r96", 128, [96, 80, 128, 70], 90)] + \
                  [w for w in WORKLOADS if w[0] in ("m1gap", "m16", "m64dec", "m128dec")] + \
                  [w for w in MID_WORKLOADS if w[0] in ("h4096e24",)] + \
                  [("h256one0", 256, [256, 0, 0, 0], 76), ("b256h76r76", 256, [76, 70, 80, 72], 76),
                   ("b256h96r96", 256, [96, 88, 100, 90], 96), ("b192h80", 192, [80, 70, 85, 75], 80),
                   ("b128gap", 128, [0, 100, 0, 120], 60), ("b256gap", 256, [0, 0, 200, 0], 60)] + \
                  [(f"b{m}h116", m, [int(116 * f) for f in (0.8, 1.1, 0.9, 1.0)], 116) for m in (256, 512, 1024)] + \
                  [("b96h80", 96, [64, 88, 72, 80], 80), ("b160h100", 160, [80, 110, 90, 100], 100),
                   ("b128one", 128, [128, 0, 0, 0], 70), ("b256full96", 256, [256] * 4, 96),
                   ("b128full", 128, [128] * 4, 128)]
# (The last sixteen, twenty-fifth session: run 129, the cost of a guess that is kept for a CTA's
# first tile and of one that is not (groups without rows beside groups of several token tiles),
# and 129-256-row buckets with 65-96 rows expected, which the two passes took; run 130, where
# 128-token tiles take 65-116 rows expected below and at 512 rows, a hint that understates
# every group, and a full 128-row bucket.)


def sweep():
    cap = torch.cuda.get_device_capability()
    rows = []
    for wname, max_m, masked, exp in [w for w in SWEEP_WORKLOADS if ONLY is None or w[0] in ONLY]:
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7)
        c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
        args = [a, a_s, b, b_s, mm, exp, c]
        fns = launches(max_m) + [("two passes", gg.variant_fn(gg.H.choose_config(max_m, exp, gg.N, cap)))]
        t = [time_call(fn, args, gg.L2, reps=20).median_us for _, fn in fns * 2]
        row = {name: min(t[i], t[i + len(fns)]) for i, (name, _) in enumerate(fns)}
        rows.append((wname, row))
        print(f"sweep {wname} {masked} hint {exp}: " + " ".join(f"{x:.1f}" for x in t), flush=True)
    print(f"\nH200, torch {torch.__version__}, triton {gg.triton.__version__}; GPU us, graph replay, L2 cold, "
          "min of two medians")
    print_table(rows, 14, 16)


def fused_fn_of(mod, most=64):
    def fused_fn(a, a_s, b, b_s, mm, exp, c):
        mod.launch(a, a_s, b, b_s, mm, c, SMS, most=most)
    return fused_fn


def launches(max_m):
    """(column name, fused_fn) of every kernel at every token-tile limit that differs at max_m."""
    return [(kname if most == 64 else f"{kname}/{most}", fused_fn_of(mod, most))
            for most in MOSTS if most == 64 or max_m > 64 for kname, mod in KERNELS.items()]


def check_one(what, max_m, want, launch):
    """launch(c) into a NaN-poisoned c, then c against the oracle's want; prints the outcome and
    returns 1 where it fails, 0 where it passes."""
    c = torch.full((gg.G, max_m, gg.N), float("nan"), dtype=torch.bfloat16, device=gg.dev)
    launch(c)
    torch.cuda.synchronize()
    try:
        check_accuracy(c.cpu(), want, what=what)
    except AssertionError as exc:
        print(f"check {what}: FAIL {str(exc)[:400]}", flush=True)
        return 1
    print(f"check {what}: ok", flush=True)
    return 0


def host_times():
    """Host time: enqueue of each kernel's direct launch (Triton's launcher, any TMA
    descriptors encoded per launch), then of run() with the heuristic's choice (and --old's run()):
    enqueue and the harness's mean."""
    out = []
    for wname, max_m, masked, exp in [w for w in WORKLOADS if w[0] in ("m16", "m32", "m48", "m64dec")]:
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7)
        c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
        args = [a, a_s, b, b_s, mm, exp, c]
        row = {}
        for kname, fn in launches(max_m):
            fn(*args)
            row[f"{kname} launch"] = ht.enqueue_us(lambda fn=fn: fn(*args))
        gg.default_fn(*args)
        row["run() enq"] = ht.enqueue_us(lambda: gg.default_fn(*args))
        row["run() harness"] = ht.harness_like(gg.default_fn, args)
        row["run() gpu"] = time_call(gg.default_fn, args, gg.L2, reps=20).median_us
        if OLD is not None:
            OLD.run(*args)
            row["old run() enq"] = ht.enqueue_us(lambda: OLD.run(*args))
            row["old run() harness"] = ht.harness_like(OLD.run, args)
        out.append((wname, row))
        print(f"host {wname}: " + " ".join(f"{k}={v:.1f}" for k, v in row.items()), flush=True)
    return out


def main():
    if SWEEP:
        faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
        sweep()
        faulthandler.cancel_dump_traceback_later()
        return
    faulthandler.dump_traceback_later(CHECK_WATCHDOG_S, exit=True)
    cap = torch.cuda.get_device_capability()
    bad = 0
    for i, (max_m, masked, sc, *mm_dtype) in enumerate(CHECKS):
        a, a_s, b, b_s, mm = gg.make(max_m, [max(min(x, max_m), -1) for x in masked], seed=50 + i, scales=sc)
        mm = torch.tensor(masked, dtype=mm_dtype[0], device=mm.device) if mm_dtype else mm
        want = gg.oracle64(a, a_s, b, b_s, mm).cpu()
        for kname, fn in launches(max_m):
            bad += check_one(f"{kname} max_m={max_m} masked={masked} {sc}", max_m, want,
                             lambda c, fn=fn: fn(a, a_s, b, b_s, mm, None, c))
    if "--odd-k" in sys.argv:
        for i, (max_m, masked, sc, k, most) in enumerate(ODD_K_CHECKS):
            a, a_s, b, b_s, mm = gg.make(max_m, [max(min(x, max_m), -1) for x in masked], seed=80 + i, scales=sc, k=k)
            mm = torch.tensor(masked, dtype=torch.int32, device=gg.dev)
            want = gg.oracle64(a, a_s, b, b_s, mm).cpu()
            for kname, mod in KERNELS.items():
                bad += check_one(f"{kname}/{most} max_m={max_m} masked={masked} {sc} k={k}", max_m, want,
                                 lambda c, mod=mod: mod.launch(a, a_s, b, b_s, mm, c, SMS, most=most))
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)  # re-armed for the timings
    rows = []
    timed = MID_WORKLOADS if MID else WORKLOADS
    for wname, max_m, masked, exp, sc in [(*w, "ue8m0") for w in timed] + ([] if MID else WIDE_WORKLOADS):
        a, a_s, b, b_s, mm = gg.make(max_m, masked, seed=7, scales=sc)
        c = torch.empty(gg.G, max_m, gg.N, dtype=torch.bfloat16, device=gg.dev)
        args = [a, a_s, b, b_s, mm, exp, c]
        triton_cfg = gg.H.choose_config(max_m, exp, gg.N, cap)
        row = {"run()": time_call(gg.default_fn, args, gg.L2, reps=20).median_us,
               "ws=False": time_call(gg.variant_fn(triton_cfg), args, gg.L2, reps=20).median_us}
        for kname, fn in launches(max_m):
            row[kname] = time_call(fn, args, gg.L2, reps=20).median_us
        rows.append((wname, row))
        print(f"time {wname}: " + " ".join(f"{k}={v:.1f}" for k, v in row.items()), flush=True)
    hosts = host_times() if "--no-host" not in sys.argv else []
    faulthandler.cancel_dump_traceback_later()
    print(f"\nH200, torch {torch.__version__}, triton {gg.triton.__version__}; GPU us, graph replay, L2 cold, median")
    odd = len(ODD_K_CHECKS) * len(KERNELS) if "--odd-k" in sys.argv else 0
    print(f"checks failed: {bad} of {sum(len(launches(c[0])) for c in CHECKS) + odd}")
    for table in [t for t in (rows, hosts) if t]:
        print_table(table, 10, 22)


def print_table(table, name_width, width):
    """(workload, {column: us}) rows as a table, every row's columns (blank where a row has none)."""
    cols = list(dict.fromkeys(c for _, row in table for c in row))
    print(f"{'workload':{name_width}s} " + " ".join(f"{c:>{width}s}" for c in cols))
    for wname, row in table:
        print(f"{wname:{name_width}s} " + " ".join(f"{row[c]:{width}.1f}" if c in row else " " * width for c in cols))


if __name__ == "__main__":
    main()
