"""Where FlashInfer-Bench's figures go beyond GPU time: host time per call of both solutions.

The harness times each call from an idle GPU (clone the inputs, synchronize, start event,
call, end event), so the Python work and the launches before the last kernel starts are
inside its figure. Per case this prints:
- harness: that measurement, replayed here (mean over 100 calls, 256 MiB zeroed before each);
- gpu: the project's GPU time (CUDA-graph replay, L2 cold, median);
- enqueue: host time until run() returns (median, GPU idle before each call);
- python: the same with the kernel launches replaced by no-ops (checks, plan lookup,
  workspace allocation, TMA descriptor objects);
- one column per launch: that launch alone, same arguments, as run() makes it (the plan's
  compiled kernel through Triton's launcher, TMA descriptor encoding included).

Run from the repository root on the GPU machine: python3 scripts/gpu_host_time.py [--profile]
(--profile: also a cProfile of 300 calls per case, top functions by own time;
 --ab [grouped|sparse|fused]: instead, variants of the heuristic's configs, checked, then GPU
 and host time, and torch's memset of each case's output for scale; it replaced the fifth
 session's --tma-ab, TMA against pointer loads, which it includes; "fused": the one-pass kernel for few rows against the heuristic, seventh session;
 --old DIR with "fused": also DIR's copy of the grouped solution, e.g. an earlier commit's;
 --no-ws: the grouped solution without fused_ws_kernel, thirteenth session)
"""

import cProfile
import dataclasses
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import torch  # noqa: E402
import triton  # noqa: E402

from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle  # noqa: E402
from lowbit_gemm.solutions import load_solution, load_solution_folder  # noqa: E402

GROUPED = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
SPARSE = "sparse_gemm_fp4_fp8_n2048_k2048"
dev = torch.device("cuda")
L2 = torch.cuda.get_device_properties(0).L2_cache_size
N = K = 2048


def grouped_inputs(max_m, masked, hint, seed=0, wide=False, k=K):
    """[a, a_s, b, b_s, masked_m, hint, c] on the GPU. wide: b_scale powers of two over
    2^-20..2^19, so nearly every 128-K block spreads wider than the fold allows (the exact
    correction path), like the harness's wide-scale workload."""
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(4, max_m, k, device=dev, generator=gen).to(torch.float8_e4m3fn)
    a_s = torch.rand(4, max_m, k // 128, device=dev, generator=gen) + 0.5
    b = torch.randint(0, 256, (4, N, k // 2), device=dev, generator=gen, dtype=torch.uint8)
    lo, hi = (-20, 20) if wide else (-8, -5)
    b_s = torch.exp2(torch.randint(lo, hi, (4, N, k // 32), device=dev, generator=gen).float())
    mm = torch.tensor(masked, dtype=torch.int32, device=dev)
    c = torch.empty(4, max_m, N, dtype=torch.bfloat16, device=dev)
    return [a, a_s, b, b_s, mm, hint, c]


def sparse_inputs(m, seed=0, k=K):
    """[a_vals, a_meta, b_fp8, c] on the GPU: random bytes for A, B as the harness draws it."""
    gen = torch.Generator(device=dev).manual_seed(seed)
    vals = torch.randint(-128, 128, (m, k // 4), device=dev, generator=gen, dtype=torch.int8)
    meta = torch.randint(0, 256, (m, k // 4), device=dev, generator=gen, dtype=torch.uint8)
    b = torch.randn(N, k, device=dev, generator=gen).clamp(-2, 2).to(torch.float8_e4m3fn)
    c = torch.empty(m, N, dtype=torch.bfloat16, device=dev)
    return [vals, meta, b, c]


def harness_like(fn, args, reps=100):
    """FlashInfer-Bench 0.1.2's do_bench with setup (bench/timing.py), mean in us."""
    cache = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    times = []
    for i in range(reps + 10):
        cache.zero_()
        cloned = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*cloned)
        e.record()
        torch.cuda.synchronize()
        if i >= 10:
            times.append(s.elapsed_time(e) * 1e3)
    return statistics.mean(times)


def enqueue_us(fn, reps=300):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def breakdown(mod, args):
    """(python us, [per-launch us], [kernel names]) for one solution module whose run()
    launches through mod._plan_launch (the plan's compiled kernels; its first call goes
    through mod._launch)."""
    real = mod._plan_launch
    recs = []
    try:
        mod._plan_launch = lambda *a: recs.append(a)
        mod.run(*args)
        mod._plan_launch = lambda *a: None  # keeps no workspace alive (else every call allocates anew)
        py = enqueue_us(lambda: mod.run(*args))
    finally:
        mod._plan_launch = real
    names = [r[2].fn.__name__ if hasattr(r[2], "fn") else getattr(r[2], "__name__", "?") for r in recs]
    return py, [enqueue_us(lambda r=r: real(*r)) for r in recs], names


def main():
    p = torch.cuda.get_device_properties(0)
    print(f"GPU {p.name} torch {torch.__version__} triton {triton.__version__} "
          f"python {sys.version.split()[0]} date {time.strftime('%Y-%m-%d')}", flush=True)
    g = load_solution(GROUPED, "lowbit", "triton_fp4_to_fp8_wgmma")
    s = load_solution(SPARSE, "lowbit", "triton_sparse_fp4_decode_wgmma")
    if "--no-ws" in sys.argv:  # the Triton kernels where the heuristic would take fused_ws_kernel
        load_solution(GROUPED, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics").WS = False
    cases = [
        ("grouped max_m=32", g, grouped_inputs(32, [8, 32, 17, 25], 21)),
        ("grouped max_m=64", g, grouped_inputs(64, [8, 21, 32, 13], 19)),
        ("grouped max_m=512", g, grouped_inputs(512, [512] * 4, 512)),
        ("sparse m=64", s, sparse_inputs(64)),
        ("sparse m=1024", s, sparse_inputs(1024)),
        ("sparse m=4096", s, sparse_inputs(4096)),
    ]
    if "--ab" in sys.argv:
        return variants_ab(g, s)
    rows = []
    for name, mod, args in cases:
        mod.run(*args)  # compile
        torch.cuda.synchronize()
        gpu = time_call(lambda *a: mod.run(*a), args, L2, reps=20).median_us
        harness = harness_like(mod.run, args)
        enq = enqueue_us(lambda: mod.run(*args))
        py, launches, names = breakdown(mod, args)
        rows.append((name, harness, gpu, enq, py, launches, names))
        if "--profile" in sys.argv:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(300):
                mod.run(*args)
            prof.disable()
            torch.cuda.synchronize()
            print(f"--- cProfile of 300 run() calls, {name} (tottime, top 22)")
            pstats.Stats(prof).sort_stats("tottime").print_stats(22)
        print(f"{name}: harness {harness:.1f} gpu {gpu:.1f} enqueue {enq:.1f} python {py:.1f} "
              f"launches {' '.join(f'{n}={t:.1f}' for n, t in zip(names, launches))}", flush=True)
    empties = enqueue_us(lambda: (torch.empty(16 << 20, dtype=torch.uint8, device=dev),
                                  torch.empty(1 << 18, dtype=torch.uint8, device=dev)))
    print(f"two torch.empty (16 MiB, 256 KiB): {empties:.1f} us")
    print("\n| case | harness us | gpu us | enqueue us | python us (no launches) | launches us |")
    print("|---|---|---|---|---|---|")
    for name, harness, gpu, enq, py, launches, names in rows:
        print(f"| {name} | {harness:.1f} | {gpu:.1f} | {enq:.1f} | {py:.1f} | "
              f"{', '.join(f'{n} {t:.1f}' for n, t in zip(names, launches))} |")


def _grouped_variants(cfg):
    """Two-pass shapes. Sixth session: run 22 (device-made TMA descriptors: dropped), runs
    22-23 (pointer loads, register caps on 64x128, PDL: the cap of 168 and PDL taken, now the
    heuristic's), run 25 (stages on 64x128); those variants are in git history (commit
    e22804f). Eighth session: runs 34, 36, 37 (the decode pass's shape; commit 8652f7a).
    Ninth and tenth sessions: runs 42-44 (row_ref on the 64- and 128-wide tiles, register
    caps, more stages; commit cfe773d). Eleventh session, run 46: the dependent launch (PDL)
    switched the other way (no rule found: PDL stays on; commit 72fdbe4). Twelfth session,
    run 48: the launch order of the one-tile kernel's programs (tiles with rows first: taken
    for mostly-empty buckets of 1024 rows and more; zero tiles first: slower everywhere, in
    git history, commit f1771fc); run 49: the zeros from a kernel of their own, ahead of the
    decode pass as its PDL primary (slower everywhere; commit 4b5305e)."""
    rep = dataclasses.replace
    return {"now": cfg, "order0": rep(cfg, order=0), "order1": rep(cfg, order=1)}


def _fused_variants(cfg):
    """Seventh session: the one-pass kernel for few rows (grouped_gemm_kernel, weights on the
    MMA's M side, no decode pass) against two passes. Runs 26-28 compared its decode with the
    shuffle to kperm (B kept in the prmt lookup's k order, A loaded in that order) and the
    two scale folds; runs 29-30 a program for every token tile (+14 us at max_m 4096); runs
    31-32 K split over 2 or 4 programs; eighth session, runs 34-35: 8 warps on the same
    tiles, a fourth stage, and K's two halves on two warpgroups of one program (all slower or
    no change; commit dd4b88c). Ninth session (runs 40-41): two 128-K blocks per loop
    iteration (unroll=2), 2- and 4-stage variants; eleventh session (run 47): split K with
    two blocks per iteration, tickets without a memset (not taken); those variants, and
    "two_pass" (the sixth session's choice), are in git history (commit 72fdbe4).
    Twelfth session, run 48: the launch order with every group's GEMM programs ahead of the
    zero programs (order1; taken from max_m 1024), and zero programs of 64 rows instead of 16
    (zr64; in git history, commit 5491354); run 49: the zeros from a kernel of their own
    beside the GEMM (slower; commit 4b5305e); run 53: 4 and 5 pipeline stages with order 1."""
    rep = dataclasses.replace
    if not cfg.kperm:
        return {"now": cfg}
    # Run 53: more pipeline stages where the GEMM runs beside the zero stores (order 1).
    return {"now": cfg, "order0": rep(cfg, order=0), "order1": rep(cfg, order=1),
            "order1_s4": rep(cfg, order=1, num_stages=4), "order1_s5": rep(cfg, order=1, num_stages=5)}


def _sparse_variants(cfg):
    """The FP8 GEMM's tiles as the heuristic picks them (64x128 from m = 513, 64x64 at 512):
    pointer or TMA loads, 4 stages (64x128: 96 KiB, 2 CTAs per SM) or 3 (72 KiB: 3 CTAs with
    pointers; TMA takes 194 registers, so 3 CTAs need a cap of 168).
    Run 22 also had descriptors made on the device: +1..23 us of GPU time, dropped; round
    8's choice, which three_ctas_pay now makes, is "now"."""
    rep = dataclasses.replace
    return {"now": cfg, "ptr_s4": rep(cfg, path="ptr", num_stages=4), "ptr_s3": rep(cfg, path="ptr", num_stages=3),
            "tma_s4": rep(cfg, path="tma", num_stages=4),
            "tma_s3_r168": rep(cfg, path="tma", num_stages=3, maxnreg=168),
            "ptr_s3_pdl": rep(cfg, path="ptr", num_stages=3, pdl=True)}


def variants_ab(g, s):
    """Variants of the heuristic's configs (_grouped_variants, _sparse_variants): each first
    checked against the float64 oracle on NaN-poisoned outputs (a failing one is reported and
    dropped), then GPU time, host time until return (enqueue) and the harness's measure,
    medians of 5 interleaved repeats of each measure so host noise hits all alike."""
    gh = load_solution(GROUPED, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics")
    sh = load_solution(SPARSE, "lowbit", "triton_sparse_fp4_decode_wgmma", "heuristics")
    argv = sys.argv[1:]
    old = None
    if "--old" in argv:  # a copy of the grouped solution's folder (e.g. from git), timed beside
        old = load_solution_folder(Path(argv.pop(argv.index("--old") + 1)).resolve(), "old_grouped")
    only = [a for a in argv if not a.startswith("--")]  # "grouped", "sparse" or "fused": those only
    cases = []
    # The one-pass shapes (the seventh session's 33-128-row buckets, where one pass was not
    # taken, are in git history, commit cfe773d).
    for max_m, masked, hint, wide in ((1, [1, 1, 0, 1], 1, False), (32, [8, 32, 17, 25], 21, False),
                                      (2048, [20, 30, 12, 25], 24, False), (4096, [21, 23, 18, 24], 20, False)):
        if "fused" not in only:
            break
        args = grouped_inputs(max_m, masked, hint, wide=wide)
        fns = {name: (lambda c2: lambda *a: g.grouped_gemm_fp8_fp4_masked(
            a[0], a[1], a[2], a[3], a[4], a[6], a[5], config=c2))(c2)
            for name, c2 in _fused_variants(gh.choose_config(max_m, hint, N, (9, 0))).items()}
        if old is not None:  # --old DIR: that copy of the solution's run(), as its heuristic picks
            fns["old"] = old.run
        cases.append((f"grouped max_m={max_m} hint={hint}{' wide' if wide else ''} rows={max(masked)}", args, fns,
                      grouped_gemm_oracle(*args[:5])))
    # The harness's two-pass workloads, with its hints (workloads/gemm/*.jsonl).
    for max_m, masked, hint in ((64, [8, 21, 32, 13], 22), (128, [27, 9, 32, 18], 25), (128, [64, 90, 40, 128], 96),
                                (200, [200, 143, 67, 1], 123), (256, [0, 256, 0, 0], 1), (256, [-7, 300, 0, 100], 106),
                                (512, [512] * 4, 614), (512, [307, 410, 512, 205], 311),
                                (1024, [700, 900, 1024, 500], 908), (2048, [1536] * 4, 1830),
                                (4096, [141, 248, 152, 150], 230), (4096, [1100, 950, 1300, 870], 1228)):
        if only and "grouped" not in only:
            break
        args = grouped_inputs(max_m, masked, hint)
        fns = {name: (lambda c2: lambda *a: g.grouped_gemm_fp8_fp4_masked(
            a[0], a[1], a[2], a[3], a[4], a[6], a[5], config=c2))(c2)
            for name, c2 in _grouped_variants(gh.choose_config(max_m, hint, N, (9, 0))).items()}
        fns["run"] = g.run
        cases.append((f"grouped max_m={max_m} hint={hint}", args, fns, grouped_gemm_oracle(*args[:5])))
    for m in (512, 1024, 2048, 3072, 4096, 8192):
        if only and "sparse" not in only:
            break
        args = sparse_inputs(m)
        fns = {name: (lambda c2, plan: lambda *a: s.launch_gemm(*a, c2, plan, True))(c2, s._Plan(c2))
               for name, c2 in _sparse_variants(sh.choose(m, N, K, (9, 0))).items()}
        fns["run"] = s.run
        cases.append((f"sparse m={m}", args, fns, sparse_gemm_oracle(*args[:3])))
    print("| case | variant | gpu us | enqueue us | harness us |\n|---|---|---|---|---|", flush=True)
    for name, args, fns, want in cases:
        for v, fn in list(fns.items()):
            try:
                for _ in range(2):  # the first call compiles and plans, the second relaunches
                    out = [a.clone() if isinstance(a, torch.Tensor) else a for a in args[:-1]] + [
                        torch.full_like(args[-1], float("nan"))]
                    fn(*out)
                    torch.cuda.synchronize()
                    check_accuracy(out[-1], want, what=f"{name} {v}")
            except Exception as exc:  # reported, not timed
                print(f"| {name} | {v} | FAILED: {type(exc).__name__}: {str(exc)[:240]} | | |", flush=True)
                del fns[v]
        res = {v: {"gpu": [], "enq": [], "harness": []} for v in fns}
        for _ in range(5):
            for v, fn in fns.items():
                res[v]["gpu"].append(time_call(fn, args, L2, reps=10).median_us)
                res[v]["enq"].append(enqueue_us(lambda: fn(*args), reps=100))
                res[v]["harness"].append(harness_like(fn, args, reps=40))
        for v in fns:
            med = {k: statistics.median(x) for k, x in res[v].items()}
            print(f"| {name} | {v} | {med['gpu']:.1f} | {med['enq']:.1f} | {med['harness']:.1f} |", flush=True)
        # torch's memset of the output, same timing, for scale in mostly-empty buckets (not a
        # floor: the kernels' own zero stores write faster, run 52).
        memset = time_call(lambda *a: a[-1].zero_(), args, L2, reps=10).median_us
        print(f"| {name} | c.zero_() alone (reference, not a variant) | {memset:.1f} | | |", flush=True)


if __name__ == "__main__":
    main()
