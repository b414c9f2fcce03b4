"""Launch a Triton kernel through its compiled kernel, skipping JITFunction.run's host work.

Triton's ``kernel[grid](...)`` binds arguments, builds a specialization key and looks up its
cache on every call: 20-45 us of host time on an H200 host (Triton 3.6), which
FlashInfer-Bench's latency includes. A ``Launch`` belongs to one shape's plan, which fixes
the grid, the integer arguments, the constexprs, the tensors' dtypes and the device. The one
fact Triton specializes on that a plan does not fix is each tensor's 16-byte alignment, so a
call reads only that, and launches the CompiledKernel kept for it with the call
JITFunction.run makes. Off under the interpreter and off the GPU.

This file is copied byte-identically into every solution that launches Triton kernels
(solutions are packed self-contained); tests/test_copies.py fails when the copies drift.
"""

import os

import torch
import triton

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class Launch:
    """``kernel[grid](*tensors, *ints, **consts)`` for one plan; ``launch(*tensors)`` runs it."""

    __slots__ = ("kernel", "grid", "ints", "consts", "_dev", "_direct", "_compiled")

    def __init__(self, kernel, grid, ints, consts, device):
        self.kernel, self.grid, self.ints, self.consts = kernel, tuple(grid), tuple(ints), dict(consts)
        self._direct = not INTERPRET and device.type == "cuda"
        self._dev = device.index if device.index is not None or not self._direct else torch.cuda.current_device()
        self._compiled = {}  # alignment bits of the tensors -> (CompiledKernel, trailing constexprs) or None

    def __call__(self, *tensors):
        if not self._direct:
            self.kernel[self.grid](*tensors, *self.ints, **self.consts)
            return
        aligned = 0
        for i, t in enumerate(tensors):
            if t.data_ptr() % 16 == 0:
                aligned |= 1 << i
        hit = self._compiled.get(aligned, False)
        if not hit:
            self._first(tensors, aligned, hit)
            return
        ck, tail = hit
        args = (*tensors, *self.ints, *tail)
        stream = torch._C._cuda_getCurrentRawStream(self._dev)
        hooks = triton.knobs.runtime
        enter = hooks.launch_enter_hook
        # launch_metadata is None without an enter hook; skip building it then.
        ck.run(self.grid[0], self.grid[1], self.grid[2], stream, ck.function, ck.packed_metadata,
               None if enter is None else ck.launch_metadata(self.grid, stream, *args), enter,
               hooks.launch_exit_hook, *args)

    def _first(self, tensors, aligned, hit):
        """Through kernel[grid] (compiling on first sight); keeps its CompiledKernel when the
        Triton in use exposes the launch call (None: always this way)."""
        ck = self.kernel[self.grid](*tensors, *self.ints, **self.consts)
        if hit is None:
            return
        if hasattr(ck, "result"):  # an asynchronous compile's future
            ck = ck.result()
        if not (hasattr(ck, "run") and hasattr(ck, "launch_metadata") and hasattr(triton, "knobs")):
            self._compiled[aligned] = None
            return
        # The constexprs after the positional arguments, a defaulted one at its default.
        n_args = len(tensors) + len(self.ints)
        tail = tuple(self.consts[p.name] if p.name in self.consts else p.default for p in self.kernel.params[n_args:])
        self._compiled[aligned] = (ck, tail)
