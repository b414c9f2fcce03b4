"""The CUDA solutions' real C entries on a CPU: each library built by nvcc with its build.py's
flags (conftest's cuda_libraries), called through main.py (tools/host_path.py's patches take the CPU for a Hopper GPU). Every
tile and path a plan can take passes the entry's own argument checks and reaches the CUDA runtime,
which answers that there is no driver or no device; what the entries document as invalid gets
cudaErrorInvalidValue without reaching it. So main.py and the entries agree on the arguments'
order and meaning, which the stub tests (test_host_path.py) check only on main.py's side."""

import ctypes
import importlib.util
from pathlib import Path

import pytest
import torch

from lowbit_gemm.cuda_compile import nvcc

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("host_path", ROOT / "tools" / "host_path.py")
host_path = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host_path)

# Where a GPU is visible the entries would launch their kernels on these host pointers: there the
# GPU tests (tests/gpu) call the same entries on real device tensors instead.
pytestmark = [pytest.mark.skipif(nvcc() is None, reason="nvcc not on PATH"),
              pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: tests/gpu call the entries")]

NO_GPU = r"CUDA error (35|100)\b"  # cudaErrorInsufficientDriver, cudaErrorNoDevice
INVALID = 1  # cudaErrorInvalidValue


def library(cuda_libraries, solution):
    (compiled,) = cuda_libraries[solution[1]]  # one .cu a solution
    assert compiled.ok, compiled.log[-4000:]
    return ctypes.CDLL(str(compiled.library))


@pytest.fixture(scope="module")
def grouped_lib(cuda_libraries):
    return library(cuda_libraries, host_path.GROUPED)


@pytest.fixture(scope="module")
def sparse_lib(cuda_libraries):
    return library(cuda_libraries, host_path.SPARSE)


def test_every_grouped_tile_passes_the_entrys_checks(grouped_lib):
    with host_path.stubbed(host_path.GROUPED, grouped_lib, stream=0) as main:
        for tile in main.TILES:
            for max_m in (1, 300):
                a, a_s, b, b_s, mm, _, c = host_path.grouped_args(max_m, None)
                with pytest.raises(RuntimeError, match=NO_GPU):
                    main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm.long(), c, tile=tile)
        for max_m, hint in [(1, None), (16, 16), (64, 32), (128, 60), (256, 200), (512, 512), (4096, 2048)]:
            with pytest.raises(RuntimeError, match=NO_GPU):
                main.run(*host_path.grouped_args(max_m, hint))


def test_grouped_entry_refuses_what_it_documents_as_invalid(grouped_lib):
    fn = grouped_lib.lowbit_grouped_wgmma
    fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int, ctypes.c_void_p] + [ctypes.c_int] * 6 + [ctypes.c_void_p] * 2
    fn.restype = ctypes.c_int
    p = 1 << 40

    def call(g=4, max_m=64, n=2048, k=2048, bm=32, bn=64, ws=None):
        return fn(p, p, p, p, p, 0, p, g, max_m, n, k, bm, bn, ws, None)

    assert call() in (35, 100)
    assert call(g=0) == 0 and call(max_m=0) == 0  # nothing to do
    assert call(bm=32, bn=32) == INVALID  # no such tile
    assert call(n=2048 + 32) == INVALID  # n no multiple of the tile's weight rows
    assert call(k=2048 + 64) == INVALID  # k no multiple of 128
    assert call(bm=256, bn=128) == INVALID  # the register-weights form without its workspace
    assert call(bm=128, bn=128, ws=p) == INVALID  # a workspace where the form takes none


def test_every_sparse_path_passes_the_entrys_checks(sparse_lib):
    with host_path.stubbed(host_path.SPARSE, sparse_lib, stream=0) as main:
        for tile in (*main.TILES, *main.SPARSE_MMA, "dense"):
            vals, meta, b, c = host_path.sparse_args(300)
            with pytest.raises(RuntimeError, match=NO_GPU):
                main.sparse_gemm_fp4_fp8(vals, meta, b, c, tile=tile)
        for m in (1, 16, 64, 192, 256, 1024, 8192):
            with pytest.raises(RuntimeError, match=NO_GPU):
                main.run(*host_path.sparse_args(m))


def test_sparse_entries_refuse_what_they_document_as_invalid(sparse_lib):
    small = sparse_lib.lowbit_sparse_small_m
    small.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 6 + [ctypes.c_void_p]
    small.restype = ctypes.c_int
    sp = sparse_lib.lowbit_sparse_wgmma_sp
    sp.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 6 + [ctypes.c_void_p]
    sp.restype = ctypes.c_int
    p = 1 << 40
    assert small(p, p, p, p, 64, 2048, 2048, 4, 2, 4, None) in (35, 100)
    assert small(p, p, p, p, 0, 2048, 2048, 4, 2, 4, None) == 0
    assert small(p, p, p, p, 64, 2048, 2048 + 32, 4, 2, 4, None) == INVALID  # k no multiple of 64
    assert small(p, p, p, p, 64, 2048, 2048, 4, 2, 0, None) == INVALID  # no token split
    assert sp(p, p, p, p, p, 1024, 2048, 2048, 1, 128, 1, None) in (35, 100)
    assert sp(p, p, p, p, p, 1024, 2048 + 64, 2048, 1, 128, 1, None) == INVALID  # n no multiple of 128
    assert sp(p, p, p, p, p, 1024, 2048, 2048 + 64, 1, 128, 1, None) == INVALID  # k no multiple of 128
