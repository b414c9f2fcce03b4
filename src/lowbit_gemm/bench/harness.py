"""FlashInfer-Bench 0.1.2's own harness on a chosen subset, and our timing of the same cells.

The harness part is exactly what `flashinfer-bench run` does (Benchmark.run_all on a TraceSet),
restricted to the chosen definitions, solutions and workloads by handing Benchmark a TraceSet
that holds only those, rooted at the dataset root. run_all then appends its traces to
traces/<op_type>/<definition>.jsonl through TraceSet.add_traces, as the CLI would; each trace
names the hardware as the harness records it (torch.cuda.get_device_name, e.g. "NVIDIA H200").

Our own timing builds each solution with the harness's BuilderRegistry and feeds it the
harness's own inputs (gen_inputs + the workload's safetensors), then times it with
bench.timing (graph replay, cold L2, median).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from .results import Measurement, measurements_from_traces
from .roofline import size_axis

BENCH_LOGGER = "flashinfer_bench.bench.benchmark"


@dataclass
class Selection:
    definition: object  # flashinfer_bench Definition
    solutions: list  # [Solution]
    workloads: list  # [Trace] (workload traces)


def load_dataset(root: Path):
    from flashinfer_bench.data import TraceSet

    return TraceSet.from_path(str(root))


def _workload_matches(wl, patterns: Sequence[str]) -> bool:
    """A pattern is a uuid (or its prefix) or axis=value, e.g. max_m=512."""
    for p in patterns:
        if "=" in p:
            axis, value = p.split("=", 1)
            if str(wl.axes.get(axis.strip())) == value.strip():
                return True
        elif wl.uuid.startswith(p):
            return True
    return False


def _quick_pick(workloads: list, definition: str) -> list:
    """Smallest, middle and largest workload along the size axis: a spread, not a sample."""
    axis = size_axis(definition)
    ordered = sorted(workloads, key=lambda t: (t.workload.axes.get(axis, 0), t.workload.uuid))
    if len(ordered) <= 3:
        return ordered
    picks = [ordered[0], ordered[len(ordered) // 2], ordered[-1]]
    return list({id(t): t for t in picks}.values())


def targets(solution, gpu_name: str) -> bool:
    """Whether a solution's spec.target_hardware names this GPU ("H200" in "NVIDIA H200")."""
    return any(hw.lower() in gpu_name.lower() for hw in solution.spec.target_hardware)


def select(ts, definitions: Optional[Sequence[str]], solutions: Optional[Sequence[str]],
           workloads: Optional[Sequence[str]], quick: bool, gpu_name: Optional[str] = None) -> List[Selection]:
    """The definition x solution x workload cells to run; raises on a name that matches nothing.
    gpu_name: unless solutions are named, only those whose target_hardware names this GPU
    (the B200-only solution is not benchmarked on an H200, where Triton emulates its MMA)."""
    names = list(definitions) if definitions else sorted(ts.definitions)
    unknown = [d for d in names if d not in ts.definitions]
    if unknown:
        raise ValueError(f"unknown definition(s) {unknown}; known: {sorted(ts.definitions)}")
    known_solutions = {s.name for sols in ts.solutions.values() for s in sols}
    if solutions:
        missing = [s for s in solutions if s not in known_solutions]
        if missing:
            raise ValueError(f"unknown solution(s) {missing}; packed solutions are "
                             f"{sorted(known_solutions)} (run scripts/pack_solutions.py?)")
    out = []
    for d in names:
        if solutions:
            sols = [s for s in ts.solutions.get(d, []) if s.name in solutions]
        else:
            sols = [s for s in ts.solutions.get(d, []) if gpu_name is None or targets(s, gpu_name)]
        wls = list(ts.workloads.get(d, []))
        if workloads:
            wls = [t for t in wls if _workload_matches(t.workload, workloads)]
        elif quick:
            wls = _quick_pick(wls, d)
        if sols and wls:
            out.append(Selection(ts.definitions[d], sols, wls))
    if not out:
        raise ValueError("nothing to run: no definition has both a chosen solution and workload")
    return out


def masked_m_of(ts, workload) -> Optional[List[int]]:
    """masked_m values of a workload when its inputs pin them (safetensors), else None."""
    spec = workload.inputs.get("masked_m")
    if spec is None or spec.type != "safetensors":
        return None
    import safetensors.torch as st

    path = Path(spec.path)
    path = path if path.is_absolute() else Path(ts.root) / path
    return [int(v) for v in st.load_file(str(path))[spec.tensor_key].tolist()]


class _Progress(logging.Handler):
    """Turns the harness's per-solution log lines into progress-bar steps."""

    _DONE = re.compile(r"^Solution '.*' for workload ")
    _FAILED = re.compile(r"^Failed to run workload ")

    def __init__(self, bar, n_solutions: int, echo: Callable[[str], None]):
        super().__init__(logging.INFO)
        self.bar, self.n_solutions, self.echo = bar, n_solutions, echo

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if self._DONE.match(msg):
            self.bar.update(1)
        elif self._FAILED.match(msg):
            self.bar.update(self.n_solutions)
        if record.levelno >= logging.WARNING:
            self.echo(f"[harness] {msg}")


def make_bar(total: int, desc: str):
    """A tqdm bar, or a plain line printer where tqdm is not installed (bare GPU hosts)."""
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="run", dynamic_ncols=True)
    except ImportError:
        class _Plain:
            def __init__(self):
                self.n = 0

            def update(self, k=1):
                self.n += k
                print(f"{desc}: {self.n}/{total}", flush=True)

            @staticmethod
            def write(s):
                print(s, flush=True)

            def close(self):
                pass

        return _Plain()


def run_harness(ts, sel: Selection, config, bar) -> list:
    """Benchmark.run_all on one definition's chosen cells; returns this run's traces."""
    from flashinfer_bench.bench import Benchmark
    from flashinfer_bench.data import TraceSet

    d = sel.definition.name
    sub = TraceSet(root=ts.root, definitions={d: sel.definition},
                   solutions={d: list(sel.solutions)}, workloads={d: list(sel.workloads)})
    log = logging.getLogger(BENCH_LOGGER)
    handler = _Progress(bar, len(sel.solutions), bar.write)
    log.addHandler(handler)
    old_level, old_propagate = log.level, log.propagate
    log.setLevel(logging.INFO)
    log.propagate = False
    bench = Benchmark(sub, config)
    try:
        result = bench.run_all(dump_traces=True)
    finally:
        bench.close()
        log.removeHandler(handler)
        log.setLevel(old_level)
        log.propagate = old_propagate
    return list(result.traces.get(d, []))


def harness_measurements(ts, sel: Selection, traces: list) -> List[Measurement]:
    """This run's traces as Measurements; a cell without a trace is recorded as NOT_RUN."""
    authors = {s.name: s.author for s in sel.solutions}
    masked = {t.workload.uuid: masked_m_of(ts, t.workload) for t in sel.workloads}
    got = measurements_from_traces(traces, authors, masked)
    seen = {(m.workload_uuid, m.solution) for m in got}
    d = sel.definition.name
    for t in sel.workloads:
        for s in sel.solutions:
            if (t.workload.uuid, s.name) not in seen:
                got.append(Measurement(
                    definition=d, workload_uuid=t.workload.uuid, axes=dict(t.workload.axes),
                    solution=s.name, author=s.author, status="NOT_RUN",
                    masked_m=masked[t.workload.uuid], note="the harness returned no trace"))
    return got


def _ran(m: Measurement) -> bool:
    """The harness ran the solution to the end (its output exists to be measured)."""
    return m.status in ("PASSED", "INCORRECT_NUMERICAL")


def time_solutions(ts, sel: Selection, measurements: List[Measurement], l2_bytes: int,
                   reps: int, bar=None) -> None:
    """Fill the exactness fields of every measurement whose solution ran, and graph_us (and
    prepared_us) of every timeable one, for this selection.

    Exactness: one draw of the harness's own inputs per workload (gen_inputs + the workload's
    safetensors), the definition's reference run on it (as the harness builds it), and each
    solution run on the same draw into NaN-poisoned outputs (bench.exactness)."""
    import sys

    import torch
    from flashinfer_bench.bench.evaluators.utils import allocate_outputs, normalize_result
    from flashinfer_bench.bench.utils import gen_inputs, load_safetensors
    from flashinfer_bench.compile import BuilderRegistry

    from .exactness import exactness, poisoned
    from .timing import time_call

    definition = sel.definition
    registry = BuilderRegistry.get_instance()
    sols = {s.name: s for s in sel.solutions}
    wls = {t.workload.uuid: t.workload for t in sel.workloads}
    drawn = {}  # workload uuid -> (inputs, reference outputs)

    def inputs_and_reference(uuid):
        if uuid not in drawn:
            wl = wls[uuid]
            safe = (load_safetensors(definition, wl, Path(ts.root))
                    if any(s.type == "safetensors" for s in wl.inputs.values()) else {})
            inputs = gen_inputs(definition, wl, device="cuda:0", safe_tensors=safe)
            with torch.no_grad():
                ref = registry.build_reference(definition)(*inputs)
            drawn[uuid] = (inputs, normalize_result(definition, ref, "cuda:0"))
        return drawn[uuid]

    for m in measurements:
        if bar is not None:
            bar.update(1)
        if not _ran(m) or m.definition != definition.name:
            continue
        try:
            runnable = registry.build(definition, sols[m.solution])
            inputs, ref = inputs_and_reference(m.workload_uuid)
            outputs = allocate_outputs(definition, inputs, "cuda:0")
            with torch.no_grad():
                if sols[m.solution].spec.destination_passing_style:
                    runnable(*inputs, *poisoned(outputs))
                    got = outputs
                else:
                    got = normalize_result(definition, runnable(*inputs), "cuda:0")
            checks = [exactness(o, r) for o, r in zip(got, ref)]
            m.bad_elements = sum(c.bad_elements for c in checks)
            m.worst_margin = max(c.worst_margin for c in checks)
            m.checked_elements = sum(c.elements for c in checks)
            if not m.timeable:
                continue
            t = time_call(lambda *a: runnable(*a), inputs + outputs, l2_bytes, reps)
            m.graph_us, m.graph_method = t.median_us, t.method
            # A solution may split one-time preparation (e.g. cuSPARSELt compression of A)
            # from the per-call work; time the per-call part alone as well.
            mod = sys.modules.get(runnable.metadata.misc.get("module_name", ""))
            # prepare(*inputs) returns a tuple of tensors; they rotate like inputs do.
            if mod is not None and hasattr(mod, "prepare") and hasattr(mod, "run_prepared"):
                state = list(mod.prepare(*inputs))
                k = len(state)
                tp = time_call(lambda *a: mod.run_prepared(tuple(a[:k]), *a[k:]),
                               state + outputs, l2_bytes, reps)
                m.prepared_us = tp.median_us
        except Exception as e:  # a timing failure is reported, never fatal to the run
            m.note = (m.note + "; " if m.note else "") + f"own timing failed: {e}"[:300]
        finally:
            torch.cuda.synchronize()
    drawn.clear()


def prebuild_cuda(selections: Sequence[Selection], echo=print) -> None:
    """Build, before anything is timed, the CUDA sources of the selected solutions that compile
    them on first use (a Python entry with an ``entry()`` that builds and loads the library):
    the harness's warm-up would otherwise spend the build, tens of seconds, inside a call."""
    import time

    from lowbit_gemm.solutions import SOLUTIONS_ROOT, load_solution

    for sel in selections:
        for sol in sel.solutions:
            folder = SOLUTIONS_ROOT / sol.author / "gemm" / sel.definition.name / sol.name
            if not any(folder.glob("*.cu")) or not (folder / "main.py").exists():
                continue  # no CUDA, or CUDA the harness builds itself (language "cuda")
            t0 = time.perf_counter()
            load_solution(sel.definition.name, sol.author, sol.name).entry()
            echo(f"built {sol.name} in {time.perf_counter() - t0:.1f} s")

