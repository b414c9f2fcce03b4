"""Launch a Triton kernel through its compiled kernel, skipping JITFunction.run's host work.

Triton's ``kernel[grid](...)`` binds arguments, builds a specialization key and looks up its
cache on every call: 20-45 us of host time on an H200 host (Triton 3.6), which
FlashInfer-Bench's latency includes. After the first launch of a (kernel, constexprs,
argument facts) combination its CompiledKernel is kept and launched directly, with the call
JITFunction.run makes. The key holds every fact Triton specializes on: tensor dtypes and
16-byte alignment, integer values. Off under the interpreter.

This file is copied byte-identically into every solution that launches Triton kernels
(solutions are packed self-contained); tests/test_copies.py fails when the copies drift.
"""

import os

import torch
import triton

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
_COMPILED = {}


def _arg_key(a):
    if isinstance(a, torch.Tensor):
        return a.dtype, a.data_ptr() % 16 == 0
    return a


def launch(kernel, grid, args, consts):
    """kernel[grid](*args, **consts) with args positional (tensors, ints) and consts the
    constexprs and compile options; through the kept CompiledKernel after the first call."""
    if INTERPRET or not args or not isinstance(args[0], torch.Tensor) or args[0].device.type != "cuda":
        kernel[grid](*args, **consts)
        return
    dev = args[0].device.index
    if dev is None:
        dev = torch.cuda.current_device()
    key = (kernel, tuple(consts.items()), dev, tuple(_arg_key(a) for a in args))
    hit = _COMPILED.get(key)
    if hit is None:
        ck = kernel[grid](*args, **consts)
        if hasattr(ck, "result"):  # an asynchronous compile's future
            ck = ck.result()
        if not (hasattr(ck, "run") and hasattr(ck, "launch_metadata") and hasattr(triton, "knobs")):
            return
        # The constexprs after the positional arguments, a defaulted one at its default.
        tail = tuple(consts[p.name] if p.name in consts else p.default for p in kernel.params[len(args):])
        if len(_COMPILED) > 4096:
            _COMPILED.clear()
        _COMPILED[key] = (ck, tail)
        return
    ck, tail = hit
    all_args = (*args, *tail)
    stream = torch._C._cuda_getCurrentRawStream(dev)
    hooks = triton.knobs.runtime
    enter = hooks.launch_enter_hook
    # launch_metadata is None without an enter hook; skip building it then.
    ck.run(grid[0], grid[1], grid[2], stream, ck.function, ck.packed_metadata,
           None if enter is None else ck.launch_metadata(grid, stream, *all_args), enter,
           hooks.launch_exit_hook, *all_args)
