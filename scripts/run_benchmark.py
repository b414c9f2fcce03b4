#!/usr/bin/env python
"""The main job: run every solution on this GPU, beside its peers and the published figures.

  python scripts/run_benchmark.py                      # everything
  python scripts/run_benchmark.py --quick              # 3 workloads per definition, fewer reps
  python scripts/run_benchmark.py --definition sparse_gemm_fp4_fp8_n2048_k2048 \
      --solution cuda_naive --workload m=64

Steps on a CUDA GPU:
 1. pack solutions/ into Solution JSON (so the harness runs what is in the folders now);
 2. measure this GPU's ceilings (copy bandwidth, bf16 and FP8 GEMM rates) and the launch floor (the
    harness-style latency of an empty Triton launch and of torch's smallest op);
 3. per definition: FlashInfer-Bench's Benchmark on every chosen solution x workload
    (progress bar), traces appended under traces/; then our own exactness check (bad
    elements, worst margin, on the harness's inputs) and graph-replay timing;
 4. write docs/results.md, docs/results.json and docs/img/<definition>.png.
Exit status 1 when any of this project's own (author "lowbit") solutions fails a workload.

Without a CUDA GPU it says so and checks every solution's kernels on the CPU instead
(Triton interpreter, reduced sizes, float64 oracles); exit 1 on a wrong result.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's package, not another clone's

# The Triton interpreter is chosen when triton is first imported, so decide before any import
# that could pull triton in (torch does not; the solutions and flashinfer_bench may).
def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


HAS_CUDA = _has_cuda()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import shlex  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--definition", action="append", help="definition name (repeatable; default all)")
    p.add_argument("--solution", action="append",
                   help="solution name (repeatable; default: all whose target_hardware names this GPU)")
    p.add_argument("--workload", action="append",
                   help="workload uuid or prefix, or axis=value such as max_m=512 (repeatable)")
    p.add_argument("--quick", action="store_true",
                   help="smallest/middle/largest workload only, fewer harness iterations and reps")
    p.add_argument("--root", type=Path, default=ROOT, help="dataset root (default: this repo)")
    p.add_argument("--docs", type=Path, default=None, help="where results.md and img/ go (default ROOT/docs)")
    p.add_argument("--no-own-timing", action="store_true", help="harness only")
    return p.parse_args(argv)


def pack(root: Path) -> None:
    from lowbit_gemm.packing import pack_all

    for packed in pack_all(root / "solutions"):
        if not packed.up_to_date:
            packed.json_path.write_text(packed.text, encoding="utf-8")
            print(f"packed {packed.json_path.relative_to(root)}")


def write_report(results, docs: Path) -> None:
    from lowbit_gemm.bench import plots, report

    docs.mkdir(parents=True, exist_ok=True)
    results.save(docs / "results.json")
    try:
        pngs = plots.plot_all(results, docs / "img")
        rel = {d: os.path.relpath(p, docs) for d, p in pngs.items()}
    except ImportError as e:  # matplotlib absent on a bare GPU host: the tables still stand
        print(f"plots skipped: {e}")
        rel = {}
    (docs / "results.md").write_text(report.render(results, rel), encoding="utf-8")
    print(f"wrote {docs / 'results.md'}, {docs / 'results.json'}" + (f", {len(rel)} plots" if rel else ""))


def run_gpu(args) -> int:
    from flashinfer_bench.bench import BenchmarkConfig

    from lowbit_gemm.bench import ceilings, harness, launch_floor, report
    from lowbit_gemm.bench.results import RunResults

    docs = args.docs or args.root / "docs"
    pack(args.root)
    ts = harness.load_dataset(args.root)
    import torch

    # Solutions for other GPUs only where named (--solution): see harness.select.
    selections = harness.select(ts, args.definition, args.solution, args.workload, args.quick,
                                gpu_name=torch.cuda.get_device_name())

    harness.prebuild_cuda(selections)
    print("measuring this GPU's ceilings ...", flush=True)
    ceil = ceilings.measure(quick=args.quick)
    print(f"{ceil.gpu}: copy {ceil.copy_bytes_per_s / 1e12:.2f} TB/s, "
          f"bf16 GEMM {ceil.bf16_flops_per_s / 1e12:.0f} TFLOP/s, FP8 GEMM {ceil.fp8_flops_per_s / 1e12:.0f} TFLOP/s, "
          f"L2 {ceil.l2_bytes / 2**20:.0f} MiB")
    floor = launch_floor.measure()
    if floor:
        print("launch floor (harness-style mean): "
              + ", ".join(f"{launch_floor.LABELS.get(k, k)} {v:.1f} us" for k, v in floor.items()))
    config = (BenchmarkConfig(warmup_runs=3, iterations=20, num_trials=1) if args.quick
              else BenchmarkConfig())
    reps = 5 if args.quick else 30
    results = RunResults(date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                         ceilings=ceil, launch_floor=floor,
                         command="python scripts/run_benchmark.py " + " ".join(map(shlex.quote, sys.argv[1:])))
    for sel in selections:
        d = sel.definition.name
        n = len(sel.solutions) * len(sel.workloads)
        bar = harness.make_bar(n, f"{d} harness")
        traces = harness.run_harness(ts, sel, config, bar)
        bar.close()
        ms = harness.harness_measurements(ts, sel, traces)
        if not args.no_own_timing:
            bar = harness.make_bar(len(ms), f"{d} graph replay")
            harness.time_solutions(ts, sel, ms, ceil.l2_bytes, reps, bar)
            bar.close()
        results.measurements += ms
        # Written after every definition, so a run cut short still leaves what it measured.
        write_report(results, docs)

    for m in report.failures(results):
        print(f"{'FAIL' if m.kind == 'own' else 'note'}: {m.definition} {m.workload_uuid[:8]} "
              f"{m.solution} ({m.author}): {m.status} {m.note}")
    own_bad = report.own_failures(results)
    if own_bad:
        print(f"{len(own_bad)} workload(s) failed for this project's own solutions")
        return 1
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if not HAS_CUDA:
        from lowbit_gemm.bench import cpu_check

        print("No CUDA GPU found: the harness and the timings need one. Checking every "
              "solution's kernels on the CPU instead (TRITON_INTERPRET=1, reduced sizes, "
              "float64 oracles).", flush=True)
        return cpu_check.main(args.root / "solutions", args.definition, args.solution)
    return run_gpu(args)


if __name__ == "__main__":  # the harness spawns worker processes: keep the guard
    sys.exit(main())
