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
    library: Path | None = None  # the shared library, where one was asked for and built


def nvcc() -> str | None:
    return shutil.which("nvcc")


def build_flags(folder: Path) -> list:
    """CUDA_FLAGS of the solution's build.py (imported as the solution's own module: it needs
    nothing but the standard library at import)."""
    build = load_solution_folder(folder, "lowbit_build_flags_" + re.sub(r"\W", "_", str(folder)), "build")
    return list(build.CUDA_FLAGS)


def cuda_solution_folders(root: Path) -> list:
    """The solution folders under root that build CUDA themselves: .cu sources and a build.py."""
    from .packing import solution_folders

    return [f for f in solution_folders(Path(root)) if any(f.glob("*.cu")) and (f / "build.py").is_file()]


def compile_solution(folder: Path, verbose: bool = False, library_dir: Path | None = None) -> list:
    """[Compiled] for each *.cu of the folder, host and device code with build.py's flags (and
    ptxas -v where verbose): to an object file that is thrown away, or, given library_dir, to the
    shared library build.py makes, kept at library_dir/lib<stem>.so. Its C entries load and run
    on a machine without a GPU: their argument checks answer, and their first CUDA call returns
    the runtime's no-driver or no-device code. Needs nvcc on PATH."""
    exe = nvcc()
    if exe is None:
        raise FileNotFoundError("nvcc is not on PATH")
    flags = build_flags(folder) + (["-Xptxas", "-v"] if verbose else [])
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for source in sorted(Path(folder).glob("*.cu")):
            if library_dir is None:
                target, kind = Path(tmp) / "k.o", ["-c"]
            else:
                target, kind = Path(library_dir) / f"lib{source.stem}.so", ["-shared", "-Xcompiler", "-fPIC"]
            done = subprocess.run([exe, *flags, *kind, str(source), "-o", str(target)], capture_output=True, text=True)
            ok = done.returncode == 0
            out.append(Compiled(source, ok, done.stderr, target if ok and library_dir is not None else None))
    return out


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
