"""Without a CUDA GPU, run every Triton kernel under the interpreter on the CPU.

TRITON_INTERPRET is read when a kernel is decorated, so it is set here, before any test
module imports triton or a solution. Also: the CUDA solutions' libraries, built once a session.
"""

import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def cuda_libraries(tmp_path_factory):
    """{folder name: [Compiled]} for each CUDA solution of this project that builds itself: its
    shared libraries, built once a session by nvcc with the solution's flags and ptxas -v
    (lowbit_gemm.cuda_compile), for the spill budget (test_cuda_builds.py) and the real C
    entries (test_cuda_entries.py) alike."""
    from lowbit_gemm.cuda_compile import compile_solution, cuda_solution_folders

    root = Path(__file__).resolve().parents[1] / "solutions" / "lowbit"
    return {folder.name: compile_solution(folder, verbose=True, library_dir=tmp_path_factory.mktemp(folder.name))
            for folder in cuda_solution_folders(root)}
