"""Our own GPU time of a kernel, apart from the harness: CUDA-graph replay, cold L2, median.

Why not just the harness number: FlashInfer-Bench times each call with CUDA events around an
eager launch, after zeroing a 256 MB buffer; that includes Python and launch overhead, which
for a 10 us kernel can be most of the figure. Here:

- The inputs are copied into N independent sets whose total size is at least 3x the L2, and
  one CUDA graph launches the kernel once per set in turn. By the time a set comes round
  again, at least 2x L2 of other data has passed through, so every call starts L2-cold, as
  it would inside a model where weights do not stay resident.
- The graph removes the launch overhead, leaving GPU time.
- A sample is one graph replay divided by N; the result is the median over replays.

A callable that cannot be captured (host syncs, allocations outside the graph pool) falls back
to CUDA-event timing of eager calls over the same rotating sets; the method is recorded.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, List, Sequence

MAX_SETS = 64


@dataclass
class Timing:
    median_us: float
    p20_us: float
    p80_us: float
    n_sets: int
    samples: int
    method: str  # "graph" or "events (...)"


def _nbytes(args: Sequence[Any]) -> int:
    import torch

    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


def n_sets_for(bytes_per_set: int, l2_bytes: int, factor: int = 3) -> int:
    """How many independent input sets make the rotation at least factor x the L2."""
    if bytes_per_set <= 0:
        return 2
    return max(2, min(MAX_SETS, math.ceil(factor * max(l2_bytes, 1) / bytes_per_set) + 1))


def rotating_sets(args: List[Any], l2_bytes: int) -> List[List[Any]]:
    """The given argument list plus deep copies of its tensors (scalars shared)."""
    import torch

    n = n_sets_for(_nbytes(args), l2_bytes)
    sets = [list(args)]
    for _ in range(n - 1):
        sets.append([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    return sets


def _summarize(samples_us: List[float], n_sets: int, method: str) -> Timing:
    qs = statistics.quantiles(samples_us, n=5) if len(samples_us) >= 2 else samples_us * 4
    return Timing(median_us=statistics.median(samples_us), p20_us=qs[0], p80_us=qs[-1],
                  n_sets=n_sets, samples=len(samples_us), method=method)


def _graph_time(fn: Callable[..., Any], sets: List[List[Any]], reps: int) -> Timing:
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (JIT compiles, autotuning) off the capture
        for args in sets:
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for args in sets:
            fn(*args)
    for _ in range(2):
        graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / len(sets))
    del graph
    return _summarize(samples, len(sets), "graph")


def _event_time(fn: Callable[..., Any], sets: List[List[Any]], reps: int, why: str) -> Timing:
    import torch

    for args in sets:
        fn(*args)
    torch.cuda.synchronize()
    samples = []
    for r in range(reps):
        for args in sets:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
    return _summarize(samples, len(sets), f"events ({why})")


def time_call(fn: Callable[..., Any], args: List[Any], l2_bytes: int, reps: int = 30) -> Timing:
    """Median GPU time per call of fn(*args) in microseconds, L2 cold (see module doc)."""
    import torch

    sets = rotating_sets(args, l2_bytes)
    try:
        return _graph_time(fn, sets, reps)
    except Exception as e:  # capture refused: measure eagerly, and say so
        torch.cuda.synchronize()
        reason = f"graph capture failed: {type(e).__name__}"
        return _event_time(fn, sets, max(3, reps // 5), reason)


def time_after_memset(fn: Callable[[], Any], flush_bytes: int = 128 << 20, reps: int = 20,
                      rounds: int = 5) -> float:
    """GPU us per call of fn() the way FlashInfer-Bench flushes: one CUDA graph of reps x
    (memset of flush_bytes, fn) minus a graph of reps memsets (median of rounds each), so
    launch gaps and host time drop out; L2 starts each call full of the memset's dirty lines."""
    import torch

    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
    fn()
    torch.cuda.synchronize()
    graphs = []
    for with_fn in (True, False):
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
            for _ in range(reps):
                flush.zero_()
                if with_fn:
                    fn()
        torch.cuda.current_stream().wait_stream(s)
        graphs.append(g)
    times = {True: [], False: []}
    for _ in range(rounds):
        for with_fn, g in zip((True, False), graphs):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            g.replay()
            e1.record()
            torch.cuda.synchronize()
            times[with_fn].append(e0.elapsed_time(e1))
    return (statistics.median(times[True]) - statistics.median(times[False])) / reps * 1e3
