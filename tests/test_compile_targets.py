"""Every Triton kernel launch of the three solutions compiles for sm_90a (H200) and sm_100a (B200).

We measure on an H200, but the leaderboard runs on B200s, which we cannot run. Triton compiles
for a GPU it is not running on (its wheel carries ptxas), so this file catches a kernel that
would fail to compile on either GPU, without a GPU.

For each GPU, the solutions' `run` entry points are called with the definitions' sizes
(n = k = 2048, g = 4; a range of max_m, expected_m and m) on fake CUDA tensors (torch's
FakeTensorMode: shapes and dtypes, no memory), with torch.cuda reporting that GPU's compute
capability and SM count, and with main.py's Triton kernels replaced by recorders. So the
heuristics' configs, the constexprs, compile options (PDL, maxnreg), TMA descriptors and
arguments are the ones main.py itself derives on that GPU: nothing of main.py is repeated
here. Each distinct launch (kernel, constexprs, options, argument types and the integer
specializations Triton makes) is compiled once, down to a cubin, inline PTX included, and
its PTX is checked for what a successful compile can still hide (REQUIRED_PTX, MIN_INSTRUCTIONS).

The compiles run in one subprocess per GPU, side by side, without TRITON_INTERPRET: on a
machine without a GPU the suite sets it (conftest.py) before Triton is imported, and Triton's
own library functions are then built for the interpreter, which cannot compile a kernel.
About 40 s on two CPU cores with an empty Triton cache, 10 s with a warm one.
"""

import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

try:  # Triton internals this file binds launches with (the same in 3.6 and 3.9)
    from triton.runtime.jit import MockTensor, create_function_from_signature
except ImportError:  # another Triton: the test skips (see _missing_toolchain) rather than fail
    MockTensor = create_function_from_signature = None
try:  # Gluon kernels (the grouped solution's fused_ws_kernel) compile from their own AST source
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
except ImportError:
    GluonASTSource = GluonDescriptor = None

import lowbit_gemm
from lowbit_gemm.solutions import load_solution_folder, solution_dir

GROUPED = ("grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048", "triton_fp4_to_fp8_wgmma")
GROUPED_B200 = ("grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048", "triton_fp4_dot_scaled")
SPARSE = ("sparse_gemm_fp4_fp8_n2048_k2048", "triton_sparse_fp4_decode_wgmma")
G, N, K = 4, 2048, 2048
GROUPED_MAX_M = (1, 16, 32, 64, 128, 200, 256, 512, 1024, 4096)
EXPECTED_M = (None, 1, 16, 32, 64, 128, 256, 512)
SPARSE_M = (1, 2, 3, 16, 64, 128, 256, 512, 1024, 4096, 8192)
# arch -> (compute capability, SMs). The SM count matters: the heuristics cap registers
# where a third CTA per SM saves a wave.
TARGETS = {90: ((9, 0), 132), 100: ((10, 0), 148)}
# (arch, launch id) -> reason (the compile error's last line), for launches known not to
# compile; they are marked xfail(strict=True), so a fix shows up. None so far (Triton 3.6, 3.9).
KNOWN_FAILURES = {}
# (arch, kernel name) -> text its PTX must hold: the instruction the kernel exists for, which
# Triton may otherwise replace by an emulation without failing. The B200 solution's
# tl.dot_scaled must become the block-scaled MMA (without an explicit scale for A, Triton 3.6
# and 3.9 emulated it through bf16 MMAs, twelfth session).
REQUIRED_PTX = {(100, "grouped_dot_scaled_kernel"): "kind::mxf8f6f4", (90, "fused_ws_kernel"): "wgmma.mma_async"}
# A kernel body of fewer instructions than this that traps is a kernel Triton gave up on: it
# compiled, for sm_100a, 128x128 tiles whose tensor-memory accumulators did not fit, to a
# bare `trap;` (Triton 3.9, twelfth session).
MIN_INSTRUCTIONS = 32


class _Recorder:
    """Stands in for a kernel in main.py: kernel[grid](*args, **kwargs) records the launch and
    returns None (main.py then keeps no compiled kernel, so every call records)."""

    def __init__(self, kernel, log):
        self.kernel, self.log = kernel, log

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.log.append((self.kernel, tuple(map(_stand_in, args)), kwargs))


def _stand_in(arg):
    """A fake tensor as Triton's MockTensor (its dtype, a 16-byte aligned address, as the
    entries' real allocations have); a descriptor over one; anything else as it is."""
    if isinstance(arg, torch.Tensor):
        return MockTensor(arg.dtype)
    if isinstance(arg, TensorDescriptor):
        return TensorDescriptor(MockTensor(arg.base.dtype), list(arg.shape), list(arg.strides),
                                list(arg.block_shape), arg.padding)
    if GluonDescriptor is not None and isinstance(arg, GluonDescriptor):
        return GluonDescriptor(MockTensor(arg.base.dtype), list(arg.shape), list(arg.strides),
                               list(arg.block_shape), arg.layout, arg.padding)
    return arg


def _arg_fact(arg):
    """What Triton specializes an argument on: a pointer's dtype, a descriptor's dtype and
    block, an integer's being 1 or a multiple of 16."""
    if isinstance(arg, MockTensor):
        return str(arg.dtype).removeprefix("torch.")
    if isinstance(arg, TensorDescriptor) or (GluonDescriptor is not None and isinstance(arg, GluonDescriptor)):
        return f"{str(arg.base.dtype).removeprefix('torch.')}_desc{'x'.join(map(str, arg.block_shape))}"
    if isinstance(arg, int):
        return "1" if arg == 1 else "mult16" if arg % 16 == 0 else "int"
    return repr(arg)


def _load_main(definition, name, arch):
    """The solution's main.py, imported as load_solution does but as a package of its own per
    GPU (each keeps its own plan caches) and with the interpreter off: its kernels are then
    compilable JITFunctions and main.py takes its CUDA paths (it reads TRITON_INTERPRET at
    import). load_solution's copy is the one the suite's interpreter tests share."""
    return load_solution_folder(solution_dir(definition, "lowbit", name), f"compile_check_sm{arch}_{name}")


def _call_entries(grouped, grouped_b200, sparse):
    """The solutions' entry points at the definitions' real sizes, on fake CUDA tensors."""
    def empty(*shape, dtype=torch.float32):
        return torch.empty(shape, dtype=dtype, device="cuda:0")

    fp8, bf16, i8 = torch.float8_e4m3fn, torch.bfloat16, torch.int8
    b_fp4, b_scale, masked_m = empty(G, N, K // 2, dtype=i8), empty(G, N, K // 32), empty(G, dtype=torch.int32)
    for max_m in GROUPED_MAX_M:
        a_fp8, a_scale, c = empty(G, max_m, K, dtype=fp8), empty(G, max_m, K // 128), empty(G, max_m, N, dtype=bf16)
        for expected_m in EXPECTED_M:
            grouped.run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c)
            grouped_b200.run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c)
    # masked_m as int64, which the definition also allows, in a bucket fused_ws takes on sm_90:
    # its loader reads masked_m through a move of the loaded width (seventeenth session).
    a_fp8, a_scale, c = empty(G, 64, K, dtype=fp8), empty(G, 64, K // 128), empty(G, 64, N, dtype=bf16)
    grouped.run(a_fp8, a_scale, b_fp4, b_scale, empty(G, dtype=torch.int64), 22, c)
    # k a multiple of 128 but not of 256 (the library function allows it, the definition's
    # entry does not): fused_ws then holds one 128-K block a stage instead of two (eighteenth
    # session).
    k = 3 * 128
    grouped.grouped_gemm_fp8_fp4_masked(empty(G, 64, k, dtype=fp8), empty(G, 64, k // 128),
                                        empty(G, N, k // 2, dtype=i8), empty(G, N, k // 32), masked_m, c, 22)
    # The same on 128-token tiles, whose decoded tiles have a ring of their own, shallower than
    # the copies' (twenty-third session).
    c512 = empty(G, 512, N, dtype=bf16)
    grouped.grouped_gemm_fp8_fp4_masked(empty(G, 512, k, dtype=fp8), empty(G, 512, k // 128),
                                        empty(G, N, k // 2, dtype=i8), empty(G, N, k // 32), masked_m, c512, 80)
    b_fp8 = empty(N, K, dtype=fp8)
    for m in SPARSE_M:
        sparse.run(empty(m, K // 4, dtype=i8), empty(m, K // 4, dtype=i8), b_fp8, empty(m, N, dtype=bf16))


@functools.cache
def distinct_launches(arch):
    """{launch id: (kernel, args, kwargs)}: the distinct launches the entry points make on
    arch's GPU, grouped by kernel, in the order first made."""
    capability, sms = TARGETS[arch]
    log = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ))
        os.environ.pop("TRITON_INTERPRET", None)  # for main.py's import and its checks at run time
        # The only device queries the solutions make.
        stack.enter_context(mock.patch.object(torch.cuda, "get_device_capability", return_value=capability))
        stack.enter_context(mock.patch.object(torch.cuda, "get_device_properties",
                                              return_value=SimpleNamespace(multi_processor_count=sms)))
        mains = [_load_main(*solution, arch) for solution in (GROUPED, GROUPED_B200, SPARSE)]
        for main in mains:
            for name, obj in list(vars(main).items()):
                if isinstance(obj, JITFunction):
                    stack.enter_context(mock.patch.object(main, name, _Recorder(obj, log)))
        stack.enter_context(FakeTensorMode())
        # main.py reads data_ptr() for alignment: a fake tensor warns (deprecated) and answers 0.
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        _call_entries(*mains)

    by_kernel = {}  # kernel name -> {facts: launch}; facts: (name, value) of kwargs and arguments
    for kernel, args, kwargs in log:
        facts = {**{k: repr(v) for k, v in kwargs.items()},
                 **{name: _arg_fact(a) for name, a in zip(kernel.arg_names, args)}}
        by_kernel.setdefault(kernel.__name__, {}).setdefault(tuple(sorted(facts.items())), (kernel, args, kwargs))
    # Ids: the kernel's name and the facts that differ between its launches.
    ids = {}
    for name, launches in by_kernel.items():
        facts = [dict(key) for key in launches]
        varying = [k for k in dict.fromkeys(k for f in facts for k in f) if len({f.get(k) for f in facts}) > 1]
        for f, launch in zip(facts, launches.values()):
            ids[name + "".join(f"-{k}={f[k]}" for k in varying if k in f)] = launch
    assert len(ids) == sum(map(len, by_kernel.values())), "two launches got the same id"
    return ids


def compile_launches(arch):
    """{launch id: None, or the last line of its compile error}, compiling each launch for
    sm_{arch}a the way JITFunction.run compiles a launch on that GPU (its binder and
    _pack_args are Triton internals, the same in 3.6 and 3.9)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    results = {}
    for launch_id, (kernel, args, kwargs) in distinct_launches(arch).items():
        try:
            # Triton's own binding: signature, constexprs, divisibility attributes, options.
            bind = create_function_from_signature(kernel.signature, kernel.params, backend)
            bound, specialization, options = bind(*args, **kwargs)
            options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound, specialization, options)
            source = GluonASTSource if getattr(kernel, "is_gluon", lambda: False)() else ASTSource
            compiled = triton.compile(source(kernel, signature, constexprs, attrs), target=target,
                                      options=options.__dict__)
            results[launch_id] = _ptx_problem(compiled.asm["ptx"], REQUIRED_PTX.get((arch, kernel.__name__)))
        except Exception as e:  # noqa: BLE001 - reported per launch
            lines = [line for line in str(e).splitlines() if line.strip()]
            results[launch_id] = f"{type(e).__name__}: {lines[-1] if lines else ''}"
    return results


def _ptx_problem(ptx, required):
    """Why a kernel that compiled is still not the kernel meant (a bare trap; a required
    instruction missing), or None."""
    instructions = [line for line in ptx.splitlines()
                    if line.strip().endswith(";") and not line.lstrip().startswith((".", "//", "{", "}"))]
    if len(instructions) < MIN_INSTRUCTIONS and any(line.strip() == "trap;" for line in instructions):
        return f"compiled to a trap ({len(instructions)} instructions)"
    if required and required not in ptx:
        return f"compiled, but its PTX lacks {required!r}"
    return None


@functools.cache
def _missing_toolchain():
    """Why this Triton cannot compile for the CUDA targets here, or None."""
    import triton.backends

    if "nvidia" not in triton.backends.backends:
        return "this Triton has no CUDA backend"
    if MockTensor is None or not hasattr(JITFunction, "_pack_args"):
        return f"Triton {triton.__version__} binds launches with other internals than 3.6 / 3.9 (update this file)"
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        for arch in TARGETS:
            get_ptxas(arch).path
    except Exception as e:  # noqa: BLE001
        return f"this Triton finds no ptxas: {e}"
    return None


@functools.cache
def _compile_results():
    """{arch: {launch id: error or None}, or the worker's failure as a string}: one worker
    subprocess per GPU, run side by side, without TRITON_INTERPRET."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    src = str(Path(lowbit_gemm.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    worker = str(Path(__file__).resolve())
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        procs = {}
        try:
            for arch in TARGETS:
                with open(tmp / f"{arch}.log", "w") as log:
                    procs[arch] = subprocess.Popen([sys.executable, worker, str(arch), str(tmp / f"{arch}.json")],
                                                   env=env, stdout=log, stderr=subprocess.STDOUT)
            for arch, proc in procs.items():
                try:
                    proc.wait(timeout=900)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                # A failure is kept as a string too: every test reads this one result.
                if proc.returncode == 0:
                    results[arch] = json.loads((tmp / f"{arch}.json").read_text())
                else:
                    log = (tmp / f"{arch}.log").read_text()[-4000:]
                    results[arch] = f"sm_{arch}a compile worker exited {proc.returncode}:\n{log}"
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return results


def pytest_generate_tests(metafunc):
    if "launch_id" not in metafunc.fixturenames:
        return
    if _missing_toolchain():
        metafunc.parametrize("arch,launch_id", [(None, None)], ids=["no-cuda-toolchain"])
        return
    params = []
    for arch in TARGETS:
        for launch_id in distinct_launches(arch):
            reason = KNOWN_FAILURES.get((arch, launch_id))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(arch, launch_id, id=f"sm{arch}-{launch_id}", marks=marks))
    metafunc.parametrize("arch,launch_id", params)


def test_launch_compiles(arch, launch_id):
    if arch is None:
        pytest.skip(_missing_toolchain())
    results = _compile_results()[arch]
    if isinstance(results, str):
        pytest.fail(results)
    error = results.get(launch_id, "not among the compile worker's launches")
    assert error is None, f"sm_{arch}a, {launch_id}: {error}"


def test_ptx_problem_flags_traps_and_missing_instructions():
    trap_only = ".version 8.7\n.target sm_100a\n.visible .entry k(\n)\n.reqntid 256\n{\n\t.loc 1 105 1\n\ttrap;\n}\n"
    assert "trap" in _ptx_problem(trap_only, None)
    body = "".join(f"\tadd.s32 %r{i}, %r{i}, 1;\n" for i in range(MIN_INSTRUCTIONS))
    real = trap_only.replace("\ttrap;\n", body + "\ttcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale;\n")
    assert _ptx_problem(real, "kind::mxf8f6f4") is None
    assert "lacks" in _ptx_problem(real.replace("mxf8f6f4", "f16"), "kind::mxf8f6f4")


if __name__ == "__main__":
    # The compile worker (see _compile_results): python test_compile_targets.py ARCH OUT.json
    Path(sys.argv[2]).write_text(json.dumps(compile_launches(int(sys.argv[1]))))
