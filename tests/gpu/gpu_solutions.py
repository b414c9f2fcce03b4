"""The project's own solutions as the harness calls them, and the two checks every output passes.

A solution is called through the entry point its solution.toml names (`main.py::run`), with
the definition's inputs in order and the output last, so these tests hold for any kernel
behind that entry point. Each output is checked twice: against the float64 oracle
(lowbit_gemm.oracle, every element within atol = rtol = 1e-2 of the oracle rounded to bf16,
and a small relative norm error), and against the definition's reference by the harness's
own rule (every element within atol = rtol = 1e-2).
"""

from __future__ import annotations

from typing import Callable, List

import pytest
import torch

from lowbit_gemm.oracle import ATOL, RTOL, check_accuracy
from lowbit_gemm.packing import solution_folders
from lowbit_gemm.references import load_reference
from lowbit_gemm.solutions import SOLUTIONS_ROOT, load_solution
from lowbit_gemm.testing import nan_output

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

OWN_AUTHOR = "lowbit"

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def own_solutions(definition: str) -> List:
    """This project's solutions for a definition (read from disk, nothing imported), as pytest
    parameters named by folder; one whose solution.toml's target_hardware does not name this
    GPU is skipped, saying so (the CUDA grouped kernel needs Hopper, the dot_scaled entry a B200)."""
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    params = []
    for f in solution_folders(SOLUTIONS_ROOT):
        if f.parent.name != definition or f.parts[-4] != OWN_AUTHOR:
            continue
        targets = tomllib.loads((f / "solution.toml").read_text())["spec"]["target_hardware"]
        other = bool(gpu) and not any(t in gpu for t in targets)
        params.append(pytest.param(f.name, id=f.name, marks=pytest.mark.skipif(
            other, reason=f"{f.name} targets {', '.join(targets)}, not {gpu}")))
    return params


def entry_point(definition: str, name: str) -> Callable:
    """The function solution.toml's entry point names, loaded the way the harness builds it."""
    folder = SOLUTIONS_ROOT / OWN_AUTHOR / "gemm" / definition / name
    meta = tomllib.loads((folder / "solution.toml").read_text())
    path, function = meta["spec"]["entry_point"].split("::")
    return getattr(load_solution(definition, OWN_AUTHOR, name, entry=path.removesuffix(".py")), function)


def call(run: Callable, inputs, out_shape):
    """run(*inputs, c) into a NaN-poisoned c (a skipped element stays NaN and fails the check)."""
    c = nan_output(out_shape, device="cuda")
    ret = run(*inputs, c)
    torch.cuda.synchronize()
    return c if ret is None else ret


def check(out: torch.Tensor, inputs, oracle64: torch.Tensor, definition: str, what: str) -> None:
    check_accuracy(out, oracle64, what=what)
    ref = load_reference(definition)(*inputs)
    bad = ~torch.isclose(out.float(), ref.float(), atol=ATOL, rtol=RTOL)
    assert not bad.any(), f"{what}: {int(bad.sum())} elements outside the harness's tolerance of the reference"


def check_calls(run: Callable, inputs, out_shape, oracle64: torch.Tensor, definition: str, what: str) -> None:
    """Two calls, each checked: the second may take a cached launch path the first set up."""
    for attempt in ("first call", "second call"):
        check(call(run, inputs, out_shape), inputs, oracle64, definition, f"{what}, {attempt}")


def capture(run: Callable, inputs, c: torch.Tensor) -> torch.cuda.CUDAGraph:
    """One call run(*inputs, c) captured in a CUDA graph, after two calls outside it on the
    capture's stream (compilation and any launch cache must not happen inside the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run(*inputs, c)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run(*inputs, c)
    return graph


def replay_on(graph: torch.cuda.CUDAGraph, inputs, new_inputs, c: torch.Tensor) -> None:
    """Overwrite the captured inputs in place with new_inputs, poison c, replay the graph."""
    for dst, src in zip(inputs, new_inputs):
        if isinstance(dst, torch.Tensor):
            dst.copy_(src)
    c.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
