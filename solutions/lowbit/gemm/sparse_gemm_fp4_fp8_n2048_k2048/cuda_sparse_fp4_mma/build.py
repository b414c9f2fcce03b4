"""Builds a solution's CUDA source on first use, for sm_90a (wgmma and setmaxnreg need the
arch-specific target, named explicitly), through torch's cpp_extension as a plain shared
library (no Python module), and loads it with ctypes. Cached by a hash of the sources and flags
under TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions): a second process reuses the
build, concurrent builds wait on cpp_extension's lock.

Copied byte-identically into every lowbit solution built this way; tests/test_copies.py fails
when the copies drift.
"""

import ctypes
import hashlib
import os
from pathlib import Path

CUDA_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17"]

_LIBS = {}


def library(source: Path, headers=()) -> ctypes.CDLL:
    """The shared library built from source (which includes headers, beside it)."""
    key = str(source)
    if key not in _LIBS:
        from torch.utils.cpp_extension import load

        text = source.read_bytes() + b"".join(Path(h).read_bytes() for h in headers)
        tag = hashlib.sha256(text + " ".join(CUDA_FLAGS).encode()).hexdigest()[:16]
        name = f"lowbit_{source.stem}_{tag}"
        root = Path(os.environ.get("TORCH_EXTENSIONS_DIR", Path.home() / ".cache" / "torch_extensions"))
        build_dir = root / name
        build_dir.mkdir(parents=True, exist_ok=True)
        # An 'arch' flag among the CUDA flags keeps cpp_extension from adding its own targets.
        load(name=name, sources=[str(source)], extra_cuda_cflags=CUDA_FLAGS, build_directory=str(build_dir),
             is_python_module=False, with_cuda=True, verbose=False)
        _LIBS[key] = ctypes.CDLL(str(build_dir / f"{name}.so"))
    return _LIBS[key]
