"""The CUDA solutions' Python call path, from run() to their C entry, on a CPU: the built library
replaced by a stub with the same C entries, each recording its arguments and returning 0.

FlashInfer-Bench's latency includes the host time of a call, and on the H200 host the CUDA
solutions' harness means sit ~5-10 us above a 64-byte torch zero_(), which launches one kernel
too: what is left between them is mostly this Python path (torch's own is ~0.5 us on a CPU).
The path needs no GPU to time, so it is timed here: the plan lookup, the argument checks a call
makes, the ctypes call. The CUDA queries are patched (current device, stream, capability 9.0).
tests/test_host_path.py uses the same stub to check the arguments each entry receives.

  python3 tools/host_path.py            # µs a call, grouped run() and sparse run(), median of 7
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from lowbit_gemm.solutions import load_solution  # noqa: E402

GROUPED = ("grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048", "cuda_fp4_wgmma")
SPARSE = ("sparse_gemm_fp4_fp8_n2048_k2048", "cuda_sparse_fp4_mma")
STREAM = 0x5EED  # what the patched torch._C._cuda_getCurrentRawStream returns

# Every C entry main.py calls, its parameters as declared in the .cu (p: a pointer, i: an int);
# each stub records its arguments as 64-bit integers and returns stub_err.
ENTRIES = {"lowbit_grouped_wgmma": "pppppipiiiiiipp", "lowbit_grouped_workspace_bytes": "iiiiii",
           "lowbit_sparse_small_m": "ppppiiiiiip", "lowbit_sparse_dense_operands": "pppppiiip",
           "lowbit_sparse_wgmma_sp": "pppppiiiiiip", "lowbit_sparse_wgmma_sp_workspace": "iii"}
WORKSPACE_BYTES = 1 << 16  # what the stubs' *_workspace_bytes return


def stub_source() -> str:
    out = ["long long stub_args[16];", "int stub_calls, stub_err;", "const char* stub_last;"]
    for name, kinds in ENTRIES.items():
        params = ", ".join(f"{'const void*' if kind == 'p' else 'int'} a{i}" for i, kind in enumerate(kinds))
        record = " ".join(f"stub_args[{i}] = (long long)a{i};" for i in range(len(kinds)))
        if name.endswith(("_bytes", "_workspace")):
            out.append(f"long long {name}({params}) {{ return {WORKSPACE_BYTES}; }}")
        else:
            out.append(f'int {name}({params}) {{ {record} ++stub_calls; stub_last = "{name}"; return stub_err; }}')
    return "\n".join(out) + "\n"


def build_stub(directory: Path) -> ctypes.CDLL:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise FileNotFoundError("no C compiler (cc or gcc) on PATH")
    src, lib = Path(directory) / "stub.c", Path(directory) / "libstub.so"
    src.write_text(stub_source())
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return ctypes.CDLL(str(lib))


def recorded(lib: ctypes.CDLL) -> SimpleNamespace:
    """The last recorded call: its entry's name and its arguments as Python ints."""
    n_args = len(ENTRIES[ctypes.c_char_p.in_dll(lib, "stub_last").value.decode()])
    args = (ctypes.c_longlong * 16).in_dll(lib, "stub_args")
    return SimpleNamespace(entry=ctypes.c_char_p.in_dll(lib, "stub_last").value.decode(),
                           args=[args[i] for i in range(n_args)], calls=ctypes.c_int.in_dll(lib, "stub_calls").value)


@contextlib.contextmanager
def stubbed(solution, lib: ctypes.CDLL, sms: int = 132, stream: int = STREAM):
    """main.py of the solution calling lib (the stub, or a real build), with the CPU taken for a
    Hopper GPU whose current stream is `stream`."""
    main = load_solution(*solution[:1], "lowbit", solution[1])
    mod = sys.modules[main.run.__module__]
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(mod, "library", lambda source, headers=(): lib))
        for name in ("_ENTRY", "_LIB"):
            if hasattr(mod, name):
                stack.enter_context(mock.patch.object(mod, name, None))
        stack.enter_context(mock.patch.object(mod, "_PLANS", {}))
        stack.enter_context(mock.patch.object(mod, "_is_hopper", lambda dev: True))
        # CPU tensors' device index is None: the plan's too, so the launch takes the same-device branch
        stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: None))
        stack.enter_context(mock.patch.object(torch.cuda, "get_device_properties",
                                              lambda dev: SimpleNamespace(multi_processor_count=sms)))
        stack.enter_context(mock.patch.object(torch._C, "_cuda_getCurrentRawStream", lambda dev: stream, create=True))
        yield mod


def grouped_args(max_m: int = 64, expected_m=32, g: int = 4, n: int = 2048, k: int = 2048):
    return (torch.empty(g, max_m, k, dtype=torch.float8_e4m3fn), torch.empty(g, max_m, k // 128),
            torch.empty(g, n, k // 2, dtype=torch.uint8), torch.empty(g, n, k // 32),
            torch.zeros(g, dtype=torch.int32), expected_m, torch.empty(g, max_m, n, dtype=torch.bfloat16))


def sparse_args(m: int = 64, n: int = 2048, k: int = 2048):
    return (torch.empty(m, k // 4, dtype=torch.uint8), torch.empty(m, k // 4, dtype=torch.uint8),
            torch.empty(n, k, dtype=torch.float8_e4m3fn), torch.empty(m, n, dtype=torch.bfloat16))


def per_call_us(fn, number: int = 20000, repeat: int = 7) -> float:
    fn()
    return statistics.median(timeit.timeit(fn, number=number) / number * 1e6 for _ in range(repeat))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_stub(Path(tmp))
        rows = []
        for label, solution, args in [("grouped max_m 64, hint 32 (32 x 64)", GROUPED, grouped_args(64, 32)),
                                      ("grouped max_m 512 (256 x 128, workspace)", GROUPED, grouped_args(512, 512)),
                                      ("sparse m 64 (few rows)", SPARSE, sparse_args(64)),
                                      ("sparse m 1024 (sparse MMA, workspace)", SPARSE, sparse_args(1024))]:
            with stubbed(solution, lib) as mod:
                rows.append((label, per_call_us(lambda: mod.run(*args))))
        zero = torch.empty(16)
        rows.append(("torch zero_() of 64 bytes (CPU kernel)", per_call_us(zero.zero_)))
    print("| call | µs (this CPU, Python path to a no-op C entry) |\n|---|---|")
    for label, us in rows:
        print(f"| {label} | {us:.2f} |")


if __name__ == "__main__":
    main()
