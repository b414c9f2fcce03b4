"""A CUDA solution's sources compiled by nvcc with the solution's own flags, without a GPU.

The CUDA solutions build themselves on first use on the GPU host (their build.py, through
torch's cpp_extension). nvcc needs no GPU, so a machine without one can still tell whether the
sources compile for the arch they name (sm_90a) and what ptxas reports per kernel: the CPU check
of scripts/run_benchmark.py and tests/test_cuda_builds.py do.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .solutions import load_solution_folder


@dataclass
class Compiled:
    source: Path
    ok: bool
    log: str  # nvcc's stderr (ptxas -v's report with verbose)


def nvcc() -> str | None:
    return shutil.which("nvcc")


def build_flags(folder: Path) -> list:
    """CUDA_FLAGS of the solution's build.py (imported as the solution's own module: it needs
    nothing but the standard library at import)."""
    build = load_solution_folder(folder, "lowbit_build_flags_" + re.sub(r"\W", "_", str(folder)), "build")
    return list(build.CUDA_FLAGS)


def compile_solution(folder: Path, verbose: bool = False) -> list:
    """[Compiled] for each *.cu of the folder: host and device code to an object file that is
    thrown away, with build.py's flags (and ptxas -v where verbose). Needs nvcc on PATH."""
    exe = nvcc()
    if exe is None:
        raise FileNotFoundError("nvcc is not on PATH")
    flags = build_flags(folder) + (["-Xptxas", "-v"] if verbose else [])
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for source in sorted(Path(folder).glob("*.cu")):
            done = subprocess.run([exe, *flags, "-c", str(source), "-o", str(Path(tmp) / "k.o")],
                                  capture_output=True, text=True)
            out.append(Compiled(source, done.returncode == 0, done.stderr))
    return out


def build_shared_library(folder: Path, directory: Path) -> Path:
    """The folder's one .cu built as the shared library its build.py makes (with its flags), at
    directory/lib<stem>.so. Its C entries load and run on a machine without a GPU: their argument
    checks answer, and their first CUDA call returns the runtime's no-driver or no-device code."""
    exe = nvcc()
    if exe is None:
        raise FileNotFoundError("nvcc is not on PATH")
    (source,) = sorted(Path(folder).glob("*.cu"))
    lib = Path(directory) / f"lib{source.stem}.so"
    done = subprocess.run([exe, *build_flags(folder), "-shared", "-Xcompiler", "-fPIC", str(source), "-o", str(lib)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nvcc failed on {source}:\n{done.stderr[-4000:]}")
    return lib


def _kernel_name(mangled: str) -> str:
    """'void (anonymous namespace)::regw::regw_gemm(unsigned char const*, ...)' -> 'regw::regw_gemm'."""
    name = mangled
    if shutil.which("c++filt"):
        name = subprocess.run(["c++filt"], input=mangled, capture_output=True, text=True, check=True).stdout.strip()
    return name.replace("(anonymous namespace)::", "").removeprefix("void ").split("(")[0]


def spill_stores(log: str) -> dict:
    """ptxas -v's report -> {kernel (demangled where c++filt is on PATH): spill-store bytes}."""
    found = re.findall(r"Compiling entry function '(\w+)'.*\n.*\n\s*\d+ bytes stack frame, (\d+) bytes spill stores", log)
    return {_kernel_name(mangled): int(stores) for mangled, stores in found}
