"""Without a CUDA GPU: check every solution's kernels on the CPU, on reduced sizes.

Triton kernels run under the Triton interpreter, which must be switched on (TRITON_INTERPRET=1)
before triton is first imported; scripts/run_benchmark.py does that. Each solution is called
through its generic launcher when it has one (grouped_gemm_fp8_fp4_masked /
sparse_gemm_fp4_fp8: any size), else through run(), on inputs made by lowbit_gemm.testing, and
compared with the float64 oracles of lowbit_gemm.oracle. A solution that cannot run on a CPU
at all (CUDA sources, cuSPARSELt, DeepGEMM) is reported as skipped with the reason; CUDA
sources that build themselves are compiled by nvcc where it is on PATH (lowbit_gemm.cuda_compile).
Only a wrong result, or one of this project's own solutions failing to run or to compile, counts
as a failure.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

from .results import OWN_AUTHOR
from .roofline import GROUPED, SPARSE

# Reduced sizes: small enough for the interpreter, awkward enough to hit edges (a group with
# no rows, masked_m past max_m, n and m not multiples of a tile).
GROUPED_SMALL = dict(max_m=24, n=80, k=256, masked_m=(17, 0, 30), expected_m=16)
SPARSE_SMALL = dict(m=20, n=72, k=256)
LAUNCHERS = {GROUPED: "grouped_gemm_fp8_fp4_masked", SPARSE: "sparse_gemm_fp4_fp8"}


@dataclass
class Check:
    definition: str
    author: str
    name: str
    outcome: str  # "ok", "skipped" or "FAILED"
    detail: str = ""


def _grouped_case(seed: int = 0):
    from lowbit_gemm.testing import grouped_inputs, nan_output

    s = GROUPED_SMALL
    *inputs, _ = grouped_inputs(s["max_m"], s["masked_m"], s["n"], s["k"], seed=seed, weight_std=1.0)
    return tuple(inputs), s["expected_m"], nan_output((len(s["masked_m"]), s["max_m"], s["n"]))


def _sparse_case(seed: int = 0):
    from lowbit_gemm.testing import nan_output, sparse_pruned_inputs

    s = SPARSE_SMALL
    return sparse_pruned_inputs(s["m"], s["n"], s["k"], seed=seed), None, nan_output((s["m"], s["n"]))


def _caller(definition: str, mod) -> tuple[Callable, str]:
    """(call(inputs, expected_m, c), how) for a solution module."""
    launcher = getattr(mod, LAUNCHERS[definition], None)
    if definition == GROUPED:
        if launcher is not None:
            return (lambda i, e, c: launcher(*i, c, expected_m=e)), LAUNCHERS[definition]
        return (lambda i, e, c: mod.run(*i, e, c)), "run"
    if launcher is not None:
        return (lambda i, e, c: launcher(*i, c)), LAUNCHERS[definition]
    return (lambda i, e, c: mod.run(*i, c)), "run"


def check_solution(folder: Path) -> Check:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
    from lowbit_gemm.solutions import load_solution

    meta = tomllib.loads((folder / "solution.toml").read_text())
    d, author, name = meta["definition"], meta["author"], meta["name"]
    lang = meta["spec"]["language"]
    if lang not in ("python", "triton"):
        return Check(d, author, name, "skipped", f"{lang} sources need a CUDA GPU to build")
    if any(folder.glob("*.cu")):  # a Python entry over CUDA it compiles itself
        return _compile_only(d, author, name, folder)
    if d not in LAUNCHERS:
        return Check(d, author, name, "skipped", "no reduced-size case for this definition")
    inputs, expected_m, c = (_grouped_case() if d == GROUPED else _sparse_case())
    ref = grouped_gemm_oracle(*inputs) if d == GROUPED else sparse_gemm_oracle(*inputs)
    try:
        mod = load_solution(d, author, folder.name)
        call, how = _caller(d, mod)
        out = call(inputs, expected_m, c)
        out = c if out is None else out
    except Exception as e:
        # the first sentence: torch's "operator not for this backend" runs on for lines
        why = f"{type(e).__name__}: {e}".splitlines()[0].split(". ")[0][:300]
        if author == OWN_AUTHOR:
            return Check(d, author, name, "FAILED", f"raised {why}\n{traceback.format_exc()}")
        return Check(d, author, name, "skipped", f"cannot run on CPU: {why}")
    try:
        s = check_accuracy(out, ref, what=f"{name} via {how}")
    except AssertionError as e:
        return Check(d, author, name, "FAILED", str(e))
    return Check(d, author, name, "ok",
                 f"via {how}: max abs err {s['max_abs']:.3g}, rel norm err {s['rel_norm']:.2g}")


def _compile_only(d: str, author: str, name: str, folder: Path) -> Check:
    """A CUDA solution cannot run here, but nvcc can still compile it for its arch: a compile
    error in one of this project's own solutions is a failure."""
    from lowbit_gemm.cuda_compile import compile_solution, nvcc

    if nvcc() is None or not (folder / "build.py").is_file():
        return Check(d, author, name, "skipped", "CUDA sources (built on first use) need a CUDA GPU")
    compiled = compile_solution(folder)
    bad = [c for c in compiled if not c.ok]
    if bad:
        log = "\n".join(f"{c.source.name}:\n{c.log[-3000:]}" for c in bad)
        outcome = "FAILED" if author == OWN_AUTHOR else "skipped"
        return Check(d, author, name, outcome, f"nvcc failed on {', '.join(c.source.name for c in bad)}\n{log}")
    return Check(d, author, name, "skipped", f"compiled by nvcc ({', '.join(c.source.name for c in compiled)}, "
                                             "its build flags); running it needs a Hopper GPU")


def check_all(solutions_root: Path, definitions: Optional[List[str]] = None,
              solutions: Optional[List[str]] = None) -> List[Check]:
    from lowbit_gemm.packing import solution_folders

    out = []
    for folder in solution_folders(solutions_root):
        if solutions and folder.name not in solutions:
            continue
        if definitions and folder.parent.name not in definitions:
            continue
        out.append(check_solution(folder))
    return out


def main(solutions_root: Path, definitions=None, solutions=None, echo=print) -> int:
    """Print one line per solution; 0 when nothing FAILED."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        echo("warning: TRITON_INTERPRET is not 1; Triton kernels cannot run on the CPU")
    checks = check_all(solutions_root, definitions, solutions)
    for ch in checks:
        echo(f"[{ch.outcome:>7}] {ch.definition} / {ch.author} / {ch.name}: "
             f"{ch.detail.splitlines()[0] if ch.detail else ''}")
        if ch.outcome == "FAILED" and len(ch.detail.splitlines()) > 1:
            echo(ch.detail)
    failed = [ch for ch in checks if ch.outcome == "FAILED"]
    echo(f"CPU check: {sum(ch.outcome == 'ok' for ch in checks)} ok, "
         f"{sum(ch.outcome == 'skipped' for ch in checks)} skipped, {len(failed)} failed")
    return 1 if failed or not checks else 0
