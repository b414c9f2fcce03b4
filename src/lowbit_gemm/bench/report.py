"""docs/results.md from one run's RunResults: dated, GPU and versions named, tables per definition.

Every number in the report comes from the run: harness latencies straight from its traces,
graph-replay latencies from bench.timing, floors from bench.roofline with the ceilings measured
at the start of the run. Ratios only ever compare numbers from this run on this GPU; the
published B200 figures sit in their own column and enter no ratio.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .published import matches, published_for
from .results import Measurement, RunResults
from .roofline import SPARSE, Floors, Work, floors, fraction_of, size_axis, speedup, work_for

KIND_ORDER = {"own": 0, "peer": 1, "baseline": 2}


@dataclass
class WorkloadRow:
    """One workload of one definition: its cost, floors and every solution measured on it."""
    uuid: str
    axes: Dict[str, int]
    masked_m: Optional[List[int]]
    work: Work
    floors: Optional[Floors]
    cells: Dict[str, Measurement]  # solution name -> measurement

    @property
    def reference_us(self) -> Optional[float]:
        """The harness's reference latency (the definition's PyTorch reference), mean over cells."""
        refs = [m.reference_us for m in self.cells.values() if m.passed and m.reference_us]
        return sum(refs) / len(refs) if refs else None

    def best(self, kind: str, field: str = "harness_us") -> Tuple[Optional[str], Optional[float]]:
        """Fastest passing solution of a kind on this workload by the given latency field."""
        cands = [(getattr(m, field), n) for n, m in self.cells.items()
                 if m.kind == kind and m.passed and getattr(m, field)]
        if not cands:
            return None, None
        t, n = min(cands)
        return n, t


def workload_rows(results: RunResults, definition: str) -> List[WorkloadRow]:
    by_wl: Dict[str, List[Measurement]] = defaultdict(list)
    for m in results.for_definition(definition):
        by_wl[m.workload_uuid].append(m)
    rows = []
    for uuid, ms in by_wl.items():
        first = ms[0]
        work = work_for(definition, first.axes, first.masked_m)
        fl = (floors(work, results.ceilings.copy_bytes_per_s,
                     results.ceilings.compute_flops_per_s(sparse=definition == SPARSE))
              if results.ceilings else None)
        rows.append(WorkloadRow(uuid, first.axes, first.masked_m, work, fl,
                                {m.solution: m for m in ms}))
    rows.sort(key=lambda r: (r.work.size, r.work.rows or 0, r.uuid))
    return rows


def solution_order(rows: List[WorkloadRow]) -> List[Tuple[str, str]]:
    """(name, kind) of every solution seen, this project's first, then peers, then baselines."""
    seen = {}
    for r in rows:
        for n, m in r.cells.items():
            seen[n] = m.kind
    return sorted(seen.items(), key=lambda nk: (KIND_ORDER.get(nk[1], 9), nk[0]))


def workload_label(definition: str, r: WorkloadRow) -> str:
    """Axis value, masked_m where pinned, and the uuid's first 8 characters (two workloads
    can share sizes, and the uuid is how --workload and the traces name them)."""
    axis = size_axis(definition)
    label = f"{axis}={r.axes.get(axis)}"
    if r.masked_m is not None:
        label += " masked=" + ",".join(str(v) for v in r.masked_m)
    return f"{label} ({r.uuid[:8]})"


def _us(x: Optional[float]) -> str:
    if x is None:
        return "–"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _x(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.2f}×"


def _pct(x: Optional[float]) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.2g}%"


def _table(header: List[str], rows: List[List[str]]) -> List[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _cell_latency(m: Optional[Measurement]) -> str:
    if m is None:
        return "not run"
    if not m.passed:
        return m.status + (f" (– / {_us(m.graph_us)})" if m.graph_us else "")
    return f"{_us(m.harness_us)} / {_us(m.graph_us)}"


def floors_table(definition: str, rows: List[WorkloadRow]) -> List[str]:
    pubs = published_for(definition)
    header = ["workload", "rows", "GFLOP", "min MB", "memory floor µs", "compute floor µs",
              "bound", "reference (harness) µs"]
    header += [f"published {p.solution} ({p.hardware}) µs" for p in pubs]
    body = []
    for r in rows:
        f = r.floors
        line = [workload_label(definition, r), str(r.work.rows), f"{r.work.flops / 1e9:.2f}",
                f"{r.work.min_bytes / 1e6:.2f}", _us(f.memory_us if f else None),
                _us(f.compute_us if f else None), f.bound if f else "–", _us(r.reference_us)]
        line += [_us(p.latency_us) if matches(p, r.axes) else "" for p in pubs]
        body.append(line)
    return _table(header, body)


def latency_table(definition: str, rows: List[WorkloadRow], sols) -> List[str]:
    prepared = [n for n, _ in sols if any(r.cells.get(n) and r.cells[n].prepared_us
                                          for r in rows)]
    header = ["workload"] + [f"{n} ({k})" for n, k in sols]
    header += [f"{n} without one-time prep (graph) " for n in prepared]
    body = []
    for r in rows:
        line = [workload_label(definition, r)] + [_cell_latency(r.cells.get(n)) for n, _ in sols]
        line += [_us(r.cells[n].prepared_us) if r.cells.get(n) else "–" for n in prepared]
        body.append(line)
    return _table(header, body)


def fraction_table(definition: str, rows: List[WorkloadRow], sols) -> List[str]:
    header = ["workload", "floor µs"] + [n for n, _ in sols]
    body = []
    for r in rows:
        fl = r.floors.floor_us if r.floors else None
        line = [workload_label(definition, r), _us(fl)]
        for n, _ in sols:
            m = r.cells.get(n)
            ok = m is not None and m.passed and fl is not None
            line.append(_pct(fraction_of(fl, m.graph_us)) if ok else "–")
        body.append(line)
    return _table(header, body)


def speedup_table(definition: str, rows: List[WorkloadRow], sols) -> List[str]:
    own = [n for n, k in sols if k == "own"] or [n for n, _ in sols]
    header = ["workload", "solution", "vs reference", "vs best baseline", "vs best peer",
              "vs best peer (graph replay)"]
    body = []
    for r in rows:
        for n in own:
            m = r.cells.get(n)
            if m is None or not m.passed:
                continue
            bn, bt = r.best("baseline")
            pn, pt = r.best("peer")
            gn, gt = r.best("peer", "graph_us")
            body.append([workload_label(definition, r), n, _x(speedup(r.reference_us, m.harness_us)),
                         f"{_x(speedup(bt, m.harness_us))} ({bn})" if bn else "–",
                         f"{_x(speedup(pt, m.harness_us))} ({pn})" if pn else "–",
                         f"{_x(speedup(gt, m.graph_us))} ({gn})" if gn else "–"])
    return _table(header, body)


def _margin(x: Optional[float]) -> str:
    if x is None:
        return "–"
    return "inf" if x == float("inf") else (f"{x:.3g}")


def _cell_exactness(m: Optional[Measurement]) -> str:
    if m is None or m.bad_elements is None:
        return "–"
    mark = "" if m.bad_elements == 0 and (m.worst_margin or 0) <= 1 else " ✗"
    return f"{m.bad_elements:,} / {_margin(m.worst_margin)}{mark}"


def exactness_table(definition: str, rows: List[WorkloadRow], sols) -> List[str]:
    header = ["workload", "elements"] + [n for n, _ in sols]
    body = []
    for r in rows:
        sizes = [m.checked_elements for m in r.cells.values() if m.checked_elements]
        line = [workload_label(definition, r), f"{max(sizes):,}" if sizes else "–"]
        line += [_cell_exactness(r.cells.get(n)) for n, _ in sols]
        body.append(line)
    return _table(header, body)


def launch_floor_table(floor: Optional[Dict[str, float]]) -> List[str]:
    from .launch_floor import LABELS

    if not floor:
        return []
    return _table(["launch", "harness-style mean µs"],
                  [[LABELS.get(k, k), _us(v)] for k, v in floor.items()])


def host_table(definition: str, rows: List[WorkloadRow], sols,
               floor: Optional[Dict[str, float]]) -> List[str]:
    fl = min(floor.values()) if floor else None
    header = ["workload", "launch floor µs"] + [n for n, _ in sols]
    body = []
    for r in rows:
        line = [workload_label(definition, r), _us(fl)]
        for n, _ in sols:
            m = r.cells.get(n)
            line.append(_us(m.host_us) if m is not None and m.host_us is not None else "–")
        body.append(line)
    return _table(header, body)


def failures(results: RunResults) -> List[Measurement]:
    return [m for m in results.measurements if not m.passed]


def own_failures(results: RunResults) -> List[Measurement]:
    return [m for m in failures(results) if m.kind == "own"]


def render(results: RunResults, plots: Optional[Dict[str, str]] = None) -> str:
    c = results.ceilings
    lines = ["# Results", "",
             f"Generated {results.date} by `{results.command or 'scripts/run_benchmark.py'}`. "
             "Regenerated by every run: do not edit by hand (docs/benchmark.md says what each "
             "column means).", ""]
    if c:
        v = ", ".join(f"{k} {val}" for k, val in sorted(c.versions.items()))
        lines += [f"**GPU:** {c.gpu} ({c.sms} SMs, L2 {c.l2_bytes / 2**20:.0f} MiB). "
                  f"**Versions:** {v}.", "",
                  "## Ceilings measured at the start of this run", ""]
        lines += _table(["ceiling", "value", "how"], [
            ["copy bandwidth", f"{c.copy_bytes_per_s / 1e12:.2f} TB/s",
             "device-to-device copy of 2 GiB, read + write bytes, median"],
            ["bf16 dense GEMM", f"{c.bf16_flops_per_s / 1e12:.0f} TFLOP/s" if c.bf16_flops_per_s > 0
             else "not measured", "torch.mm bf16 8192³, median; the compute floors' divisor (x 2 for "
             "the 2:4 sparse definition)"],
            ["FP8 dense GEMM", f"{c.fp8_flops_per_s / 1e12:.0f} TFLOP/s",
             "torch._scaled_mm e4m3 8192³ → bf16, median" + ("" if c.bf16_flops_per_s > 0 else
                                                              "; the compute floors' divisor")]])
    if results.launch_floor:
        lines += ["## Launch floor measured in this run", "",
                  "Harness-style latency (synchronize, event, call, event; 256 MiB zero_() before "
                  "each; mean of 100) of calls that do next to nothing: what this host charges any "
                  "call before its GPU work.", ""]
        lines += launch_floor_table(results.launch_floor)
    hw = sorted({m.hardware for m in results.measurements if m.hardware})
    if hw:
        lines += [f"Harness traces name the hardware as: {', '.join(hw)}.", ""]
    for d in results.definitions():
        rows = workload_rows(results, d)
        sols = solution_order(rows)
        lines += [f"## {d}", ""]
        if plots and d in plots:
            lines += [f"![{d}]({plots[d]})", ""]
        lines += ["### Cost and floors", ""] + floors_table(d, rows)
        lines += ["Published figures were measured on another GPU (named in the header) and "
                  "enter no ratio here.", ""]
        lines += ["### Latency, µs: harness mean / our graph-replay median (cold L2)", ""]
        lines += latency_table(d, rows, sols)
        lines += ["### Exactness on the harness's inputs: elements failing the check / worst "
                  "margin (1.0 is the edge; ✗ fails)", ""]
        lines += exactness_table(d, rows, sols)
        lines += ["### Host overhead, µs: harness mean − graph-replay GPU time", ""]
        lines += host_table(d, rows, sols, results.launch_floor)
        lines += ["### Achieved fraction of the floor (graph replay)", ""]
        lines += fraction_table(d, rows, sols)
        lines += ["### Speedups (same run, same GPU)", ""] + speedup_table(d, rows, sols)
    bad = failures(results)
    if bad:
        lines += ["## Solutions that did not pass", ""]
        lines += _table(["definition", "workload", "solution", "author", "status", "why"],
                        [[m.definition, m.workload_uuid[:8], m.solution, m.author, m.status,
                          m.note.replace("|", "/")] for m in bad])
    timing_notes = sorted({(m.solution, m.graph_method) for m in results.measurements
                           if m.graph_method and m.graph_method != "graph"})
    if timing_notes:
        lines += ["Own timing fell back to eager CUDA events for: "
                  + "; ".join(f"{s} ({how})" for s, how in timing_notes) + ".", ""]
    return "\n".join(lines)
