"""Every Triton kernel launch of this project's Triton solutions (the lowbit folders without CUDA
sources) compiles for each GPU its solution.toml lists: sm_90a for H200 / H100, sm_100a for B200.

The B200 entries cannot run here, and Triton compiles for a GPU it is not running on (its wheel
carries ptxas), so this file catches, without any GPU, a kernel that would fail to compile on
the leaderboard's GPU, or that compiles to something other than the kernel meant.

For each GPU, the solutions' `run` entry points are called with the definitions' sizes
(n = k = 2048, g = 4; a range of max_m, expected_m and m) on fake CUDA tensors (torch's
FakeTensorMode: shapes and dtypes, no memory), with torch.cuda reporting that GPU's compute
capability, and with main.py's Triton kernels replaced by recorders. So the heuristics' tiles,
the constexprs and the arguments are the ones main.py itself derives on that GPU: nothing of
main.py is repeated here. Each distinct launch (kernel, constexprs, options, argument types and
the integer specializations Triton makes) is compiled once, down to a cubin, inline PTX
included, and its PTX is checked for what a successful compile can still hide (REQUIRED_PTX,
MIN_INSTRUCTIONS).

The compiles run in one subprocess per GPU, side by side, without TRITON_INTERPRET: on a machine
without a GPU the suite sets it (conftest.py) before Triton is imported, and Triton's own
library functions are then built for the interpreter, which cannot compile a kernel.
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
from unittest import mock

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from triton.runtime.jit import JITFunction

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

try:  # Triton internals this file binds launches with (the same in 3.6 and 3.9)
    from triton.runtime.jit import MockTensor, create_function_from_signature
except ImportError:  # another Triton: the test skips (see _missing_toolchain) rather than fail
    MockTensor = create_function_from_signature = None

from lowbit_gemm.packing import solution_folders
from lowbit_gemm.solutions import load_solution_folder, solution_dir

ROOT = Path(__file__).resolve().parents[1]
GROUPED_DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
SPARSE_DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
# every Triton solution of this project: a lowbit folder of either definition without CUDA sources
SOLUTIONS = tuple((folder.parent.name, folder.name)
                  for folder in solution_folders(ROOT / "solutions" / "lowbit")
                  if folder.parent.name in (GROUPED_DEF, SPARSE_DEF) and not any(folder.glob("*.cu")))
G, N, K = 4, 2048, 2048
GROUPED_MAX_M = (1, 16, 32, 64, 128, 200, 256, 512, 1024, 4096)
EXPECTED_M = (None, 1, 16, 32, 64, 128, 256, 512)
SPARSE_M = (1, 2, 3, 16, 64, 65, 128, 256, 1024, 8192)
# arch -> compute capability; the GPUs solution.toml names that compile for it
TARGETS = {90: (9, 0), 100: (10, 0)}
ARCH_OF = {"H200": 90, "H100": 90, "B200": 100}
# kernel name -> texts its PTX must hold one of, on every GPU: the tensor-core MMA its tl.dot is
# for (mma.sync, Hopper's wgmma or Blackwell's tcgen05), which Triton may otherwise replace by
# an emulation without failing. (arch, kernel name) -> the same, where one GPU needs more: the
# B200 entry's tl.dot_scaled must become the block-scaled MMA (without an explicit scale for A,
# Triton 3.6 and 3.9 emulated it through bf16 MMAs).
TENSOR_CORE_MMA = ("mma.sync.aligned", "wgmma.mma_async", "tcgen05.mma")
REQUIRED_PTX = {"grouped_one_pass_kernel": TENSOR_CORE_MMA, "gemm_bf16_kernel": TENSOR_CORE_MMA,
                "sparse_fp16_kernel": TENSOR_CORE_MMA, (100, "grouped_dot_scaled_kernel"): ("kind::mxf8f6f4",)}
# A kernel body of fewer instructions than this that traps is a kernel Triton gave up on: it
# compiled, for sm_100a, 128 x 128 tiles whose tensor-memory accumulators did not fit to a bare
# `trap;` (Triton 3.9).
MIN_INSTRUCTIONS = 32


def archs(definition, name):
    """The sm numbers the solution's target_hardware asks for."""
    toml = tomllib.loads((solution_dir(definition, "lowbit", name) / "solution.toml").read_text())
    return sorted({ARCH_OF[gpu] for gpu in toml["spec"]["target_hardware"]})


class _Recorder:
    """Stands in for a kernel in main.py: kernel[grid](*args, **kwargs) records the launch and
    returns None (a fast_launch.Launch then keeps no compiled kernel, so every call records)."""

    def __init__(self, kernel, log):
        self.kernel, self.log = kernel, log

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.log.append((self.kernel, tuple(map(_stand_in, args)), kwargs))


def _stand_in(arg):
    """A fake tensor as Triton's MockTensor (its dtype, a 16-byte aligned address, as the
    entries' real allocations have); anything else as it is."""
    return MockTensor(arg.dtype) if isinstance(arg, torch.Tensor) else arg


def _arg_fact(arg):
    """What Triton specializes an argument on: a pointer's dtype, an integer's being 1 or a
    multiple of 16."""
    if isinstance(arg, MockTensor):
        return str(arg.dtype).removeprefix("torch.")
    if isinstance(arg, int):
        return "1" if arg == 1 else "mult16" if arg % 16 == 0 else "int"
    return repr(arg)


def _call_entries(arch, mains):
    """The entry points of the solutions that list arch's GPU, at the definitions' sizes, on
    fake CUDA tensors."""
    def empty(*shape, dtype=torch.float32):
        return torch.empty(shape, dtype=dtype, device="cuda:0")

    fp8, bf16, i8 = torch.float8_e4m3fn, torch.bfloat16, torch.int8
    b_fp4, b_scale, masked_m = empty(G, N, K // 2, dtype=i8), empty(G, N, K // 32), empty(G, dtype=torch.int32)
    for (definition, name), main in mains.items():
        if definition == GROUPED_DEF:
            for max_m in GROUPED_MAX_M:
                a_fp8, a_scale = empty(G, max_m, K, dtype=fp8), empty(G, max_m, K // 128)
                c = empty(G, max_m, N, dtype=bf16)
                for expected_m in EXPECTED_M:
                    main.run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c)
            # masked_m as int64, which the definition also allows
            a_fp8, a_scale, c = empty(G, 64, K, dtype=fp8), empty(G, 64, K // 128), empty(G, 64, N, dtype=bf16)
            main.run(a_fp8, a_scale, b_fp4, b_scale, empty(G, dtype=torch.int64), 22, c)
        else:
            b_fp8 = empty(N, K, dtype=fp8)
            for m in SPARSE_M:
                main.run(empty(m, K // 4, dtype=i8), empty(m, K // 4, dtype=i8), b_fp8, empty(m, N, dtype=bf16))


@functools.cache
def distinct_launches(arch):
    """{launch id: (kernel, args, kwargs)}: the distinct launches the entry points make on
    arch's GPU, grouped by kernel, in the order first made."""
    log = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ))
        os.environ.pop("TRITON_INTERPRET", None)  # for main.py's import and its checks at run time
        # The only device query the Triton solutions make.
        stack.enter_context(mock.patch.object(torch.cuda, "get_device_capability", return_value=TARGETS[arch]))
        mains = {}
        for definition, name in SOLUTIONS:
            if arch in archs(definition, name):
                # a package of its own per GPU (each keeps its own plan caches), as load_solution imports it
                main = load_solution_folder(solution_dir(definition, "lowbit", name), f"compile_check_sm{arch}_{name}")
                mains[definition, name] = main
                for attr, obj in list(vars(main).items()):
                    if isinstance(obj, JITFunction):
                        stack.enter_context(mock.patch.object(main, attr, _Recorder(obj, log)))
        stack.enter_context(FakeTensorMode())
        # fast_launch reads data_ptr() for alignment: a fake tensor warns (deprecated) and answers 0.
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        _call_entries(arch, mains)

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
    """{launch id: None, or why it is not the kernel meant}, compiling each launch for
    sm_{arch}a the way JITFunction.run compiles a launch on that GPU (its binder and _pack_args
    are Triton internals, the same in 3.6 and 3.9)."""
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
            compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target,
                                      options=options.__dict__)
            required = REQUIRED_PTX.get((arch, kernel.__name__), REQUIRED_PTX.get(kernel.__name__))
            results[launch_id] = ptx_problem(compiled.asm["ptx"], required)
        except Exception as e:  # noqa: BLE001 - reported per launch
            lines = [line for line in str(e).splitlines() if line.strip()]
            results[launch_id] = f"{type(e).__name__}: {lines[-1] if lines else ''}"
    return results


def ptx_problem(ptx, required):
    """Why a kernel that compiled is still not the kernel meant (a bare trap; none of the
    required instructions, a tuple of alternatives), or None."""
    instructions = [line for line in ptx.splitlines()
                    if line.strip().endswith(";") and not line.lstrip().startswith((".", "//", "{", "}"))]
    if len(instructions) < MIN_INSTRUCTIONS and any(line.strip() == "trap;" for line in instructions):
        return f"compiled to a trap ({len(instructions)} instructions)"
    if required and not any(text in ptx for text in required):
        return f"compiled, but its PTX has none of {required!r}"
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
    """{arch: {launch id: problem or None}, or the worker's failure as a string}: one worker
    subprocess per GPU, run side by side, without TRITON_INTERPRET."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                      env.get("PYTHONPATH")]))
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
    params = [pytest.param(arch, launch_id, id=f"sm{arch}-{launch_id}")
              for arch in TARGETS for launch_id in distinct_launches(arch)]
    metafunc.parametrize("arch,launch_id", params)


def test_launch_compiles(arch, launch_id):
    if arch is None:
        pytest.skip(_missing_toolchain())
    results = _compile_results()[arch]
    if isinstance(results, str):
        pytest.fail(results)
    problem = results.get(launch_id, "not among the compile worker's launches")
    assert problem is None, f"sm_{arch}a, {launch_id}: {problem}"


def test_every_triton_solution_is_compiled_for_a_listed_gpu():
    names = {name for _, name in SOLUTIONS}
    assert {"triton_fp4_exact_mma", "triton_fp4_dot_scaled", "triton_sparse_fp4_exact"} <= names
    for definition, name in SOLUTIONS:
        assert archs(definition, name), name
    assert 100 in archs(GROUPED_DEF, "triton_fp4_dot_scaled")


def test_ptx_problem_flags_traps_and_missing_instructions():
    trap_only = ".version 8.7\n.target sm_100a\n.visible .entry k(\n)\n.reqntid 256\n{\n\t.loc 1 105 1\n\ttrap;\n}\n"
    assert "trap" in ptx_problem(trap_only, None)
    body = "".join(f"\tadd.s32 %r{i}, %r{i}, 1;\n" for i in range(MIN_INSTRUCTIONS))
    real = trap_only.replace("\ttrap;\n", body + "\ttcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale;\n")
    assert ptx_problem(real, ("kind::mxf8f6f4",)) is None
    assert ptx_problem(real, TENSOR_CORE_MMA) is None
    assert "none of" in ptx_problem(real.replace("mxf8f6f4", "f16"), ("kind::mxf8f6f4",))
    assert "none of" in ptx_problem(real.replace("tcgen05.mma", "fma.rn.f32"), TENSOR_CORE_MMA)


if __name__ == "__main__":
    # The compile worker (see _compile_results): python test_compile_targets.py ARCH OUT.json
    Path(sys.argv[2]).write_text(json.dumps(compile_launches(int(sys.argv[1]))))
