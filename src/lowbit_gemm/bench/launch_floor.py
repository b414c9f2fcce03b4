"""The launch floor: what the harness's timing charges the cheapest possible calls on this host.

FlashInfer-Bench times each call between two CUDA events after a synchronize, with a 256 MiB
zero_() before each (flashinfer_bench.bench.timing.do_bench, mean). A call's harness mean is
therefore its host time (Python, launches) plus its GPU time; this measures, the same way,
calls that do next to nothing, so that each solution's host overhead (harness mean minus
graph-replay GPU time) reads against what this host allows:

- triton_compiled: an empty Triton kernel launched through its CompiledKernel (the launcher
  call JITFunction.run ends in, made directly, as a solution with a cached compiled kernel does);
- triton_grid: the same kernel through kernel[grid] (argument binding, cache lookup, launch);
- torch_zero: torch's smallest op, zero_() of a 64-byte tensor.
Without a CUDA GPU measure() returns None.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

ITERS = 100
WARMUP = 10


def harness_mean_us(fn: Callable[[], object], iters: int) -> float:
    from flashinfer_bench.bench.timing import do_bench

    return float(do_bench(fn, warmup=WARMUP, rep=iters, return_mode="mean")) * 1e3


def _empty_kernel():
    import triton

    @triton.jit
    def empty(x_ptr):
        pass

    return empty


def _compiled_launcher(kernel, x) -> Optional[Callable[[], None]]:
    """A call of kernel's CompiledKernel with grid (1,1,1), or None where this Triton has no
    such path (then only kernel[grid] is measured)."""
    import torch
    import triton

    ck = kernel[(1,)](x)
    if hasattr(ck, "result"):  # an asynchronous compile's future
        ck = ck.result()
    if not (hasattr(ck, "run") and hasattr(triton, "knobs")):
        return None
    dev = x.device.index or 0
    hooks = triton.knobs.runtime

    def launch():
        stream = torch._C._cuda_getCurrentRawStream(dev)
        enter = hooks.launch_enter_hook
        meta = None if enter is None else ck.launch_metadata((1, 1, 1), stream, x)
        ck.run(1, 1, 1, stream, ck.function, ck.packed_metadata, meta, enter,
               hooks.launch_exit_hook, x)

    return launch


def measure(iters: int = ITERS) -> Optional[Dict[str, float]]:
    """{name: harness-style mean µs} for the launches above; None without a CUDA GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    x = torch.zeros(16, dtype=torch.float32, device="cuda")  # 64 bytes
    out: Dict[str, float] = {}
    try:
        kernel = _empty_kernel()
        fast = _compiled_launcher(kernel, x)
        if fast is not None:
            out["triton_compiled"] = harness_mean_us(fast, iters)
        out["triton_grid"] = harness_mean_us(lambda: kernel[(1,)](x), iters)
    except Exception as e:  # no working Triton here: torch's floor still stands
        print(f"launch floor: Triton launch not measured ({type(e).__name__}: {e})")
    out["torch_zero"] = harness_mean_us(x.zero_, iters)
    torch.cuda.synchronize()
    return out


LABELS = {
    "triton_compiled": "empty Triton kernel, CompiledKernel launch",
    "triton_grid": "empty Triton kernel, kernel[grid]",
    "torch_zero": "torch zero_() of 64 bytes",
}
