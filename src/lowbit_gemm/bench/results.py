"""One run's results as plain data: what the report, the plots and docs/results.json share.

A Measurement is one (definition, workload, solution) cell: the harness's trace fields
(status, latency, reference latency, hardware) beside our own graph-replay time. Keeping it
plain (no torch, no flashinfer_bench objects) lets the report be rebuilt and tested on CPU
from recorded traces.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from .ceilings import Ceilings

OWN_AUTHOR = "lowbit"
PEER_AUTHOR = "peers"


def kind_of(author: str) -> str:
    """'own' (this project's kernels), 'peer' (what a user would otherwise run), or 'baseline'."""
    if author == OWN_AUTHOR:
        return "own"
    if author == PEER_AUTHOR:
        return "peer"
    return "baseline"


@dataclass
class Measurement:
    definition: str
    workload_uuid: str
    axes: Dict[str, int]
    solution: str
    author: str
    status: str  # the harness's EvaluationStatus, or NOT_RUN when the harness gave no trace
    masked_m: Optional[List[int]] = None
    harness_us: Optional[float] = None  # trace performance.latency_ms * 1000 (harness mean)
    reference_us: Optional[float] = None  # trace performance.reference_latency_ms * 1000
    hardware: str = ""  # trace evaluation.environment.hardware
    graph_us: Optional[float] = None  # bench.timing median, cold L2
    graph_method: str = ""
    prepared_us: Optional[float] = None  # same, one-time preparation (e.g. compression) excluded
    note: str = ""
    # bench.exactness on the harness's own inputs against the definition's reference:
    bad_elements: Optional[int] = None  # elements failing the harness's check
    worst_margin: Optional[float] = None  # max |out-ref| / max(atol, rtol*|ref|); > 1.0 fails
    checked_elements: Optional[int] = None  # elements compared

    @property
    def host_us(self) -> Optional[float]:
        """Host overhead: harness mean minus graph-replay GPU time (None unless both exist)."""
        if self.harness_us is None or self.graph_us is None:
            return None
        return self.harness_us - self.graph_us

    @property
    def kind(self) -> str:
        return kind_of(self.author)

    @property
    def passed(self) -> bool:
        return self.status == "PASSED"

    @property
    def timeable(self) -> bool:
        """Worth our own timing: passed, or a peer/baseline that ran but missed the tolerance
        (its speed is still informative; it is shown marked and enters no ratio)."""
        return self.passed or (self.status == "INCORRECT_NUMERICAL" and self.kind != "own")


@dataclass
class RunResults:
    date: str
    ceilings: Optional[Ceilings]
    measurements: List[Measurement] = field(default_factory=list)
    command: str = ""
    # bench.launch_floor: harness-style latency of the cheapest launches, µs, by name
    launch_floor: Optional[Dict[str, float]] = None

    def definitions(self) -> List[str]:
        return sorted({m.definition for m in self.measurements})

    def for_definition(self, definition: str) -> List[Measurement]:
        return [m for m in self.measurements if m.definition == definition]

    def to_json(self) -> str:
        d = {"date": self.date, "command": self.command,
             "ceilings": self.ceilings.to_dict() if self.ceilings else None,
             "launch_floor": self.launch_floor,
             "measurements": [asdict(m) for m in self.measurements]}
        return json.dumps(d, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "RunResults":
        d = json.loads(text)
        c = Ceilings.from_dict(d["ceilings"]) if d.get("ceilings") else None
        return cls(date=d["date"], ceilings=c, command=d.get("command", ""),
                   measurements=[Measurement(**m) for m in d["measurements"]],
                   launch_floor=d.get("launch_floor"))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())


def measurements_from_traces(traces: Iterable, authors: Dict[str, str],
                             masked_m: Optional[Dict[str, List[int]]] = None) -> List[Measurement]:
    """Harness traces (flashinfer_bench Trace objects) -> Measurements.

    authors maps solution name -> author; masked_m maps workload uuid -> masked_m values.
    """
    masked_m = masked_m or {}
    out = []
    for t in traces:
        if t.solution is None or t.evaluation is None:
            continue  # a workload-only trace, not a measurement
        ev = t.evaluation
        perf = ev.performance
        out.append(Measurement(
            definition=t.definition, workload_uuid=t.workload.uuid, axes=dict(t.workload.axes),
            solution=t.solution, author=authors.get(t.solution, "unknown"),
            status=ev.status.value, masked_m=masked_m.get(t.workload.uuid),
            harness_us=perf.latency_ms * 1e3 if perf else None,
            reference_us=perf.reference_latency_ms * 1e3 if perf else None,
            hardware=ev.environment.hardware,
            note=_note(ev)))
    return out


def _note(ev) -> str:
    if ev.status.value == "PASSED":
        return ""
    if ev.correctness is not None:  # INCORRECT_NUMERICAL: how far off is what matters
        c = ev.correctness
        return f"max abs err {c.max_absolute_error:.3g}, max rel err {c.max_relative_error:.3g}"
    return failure_reason(ev.log)


def failure_reason(log: str) -> str:
    """The last exception line of a harness log, the part a reader needs first."""
    lines = [ln.strip() for ln in (log or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""
