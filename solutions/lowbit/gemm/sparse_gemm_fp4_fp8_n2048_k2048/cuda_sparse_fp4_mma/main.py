"""2:4-sparse FP4 x FP8 GEMM (definition sparse_gemm_fp4_fp8_n2048_k2048) in CUDA, exact: fp16 /
bf16 operands with fp32 accumulation (sparse_mma.cu says why and how).

Entry points:
- ``run(a_vals, a_meta, b_fp8, c)``: the definition's entry (n=2048, k=2048), destination
  passing: writes c and returns it.
- ``sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c, tile=None)``: any m >= 0, n >= 1 and k a
  positive multiple of 128; tile one of heuristics.TILES or heuristics.PATHS overrides the
  heuristic (the sparse-MMA paths need n % 128 == 0).

By rows (heuristics.py): one launch of the few-rows kernel; or one launch writing both operands
dense in bf16, then one cuBLAS GEMM into c; or, for many rows, one call into the library that
prepares both operands for the sparse tensor cores and runs the sparse-MMA kernel on them.
Needs a Hopper GPU (the library is built for sm_90a on first use, build.py). Nothing is kept
across calls but the plan of a shape and the library; the dense or prepared operands are fresh
per call (one allocation from torch's stream-ordered allocator).
"""

import ctypes
from pathlib import Path
from typing import NamedTuple

import torch

from .build import library
from .checks import check_tensor
from .dense_mm import mm_fp32_sums
from .heuristics import PATHS, SPARSE_MMA, TILES, choose

_HERE = Path(__file__).resolve().parent
DEF_N, DEF_K = 2048, 2048
_BYTES = (torch.int8, torch.uint8)


class _Plan(NamedTuple):
    empty: bool
    path: str = "small"  # "small", "dense" or "sparse_mma"
    m: int = 0
    n: int = 0
    k: int = 0
    mt: int = 0
    nt: int = 0
    ysplit: int = 0
    mw: int = 0          # sparse_mma: m64 blocks a consumer warpgroup
    bn: int = 0          # sparse_mma: weight rows a tile
    splits: int = 1      # sparse_mma: K splits (CTAs a tile)
    work: int = 0        # sparse_mma: workspace bytes
    dev: int = 0


_PLANS = {}
_LIB = None


def entry():
    """The built library (built on first use, build.py) with its entries' argument types set:
    lowbit_sparse_small_m(a_vals, a_meta, b_fp8, c, m, n, k, mt, nt, ysplit, stream),
    lowbit_sparse_dense_operands(a_vals, a_meta, b_fp8, a16, b16, m, n, k, stream) and
    lowbit_sparse_wgmma_sp(a_vals, a_meta, b_fp8, c, work, m, n, k, mw, bn, splits, stream) -> cudaError_t
    code; lowbit_sparse_wgmma_sp_workspace(m, n, k) -> bytes."""
    global _LIB
    if _LIB is None:
        lib = library(_HERE / "sparse_mma.cu", sorted(_HERE.glob("*.cuh")))  # rebuilt when any header changes
        lib.lowbit_sparse_small_m.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 6 + [ctypes.c_void_p]
        lib.lowbit_sparse_dense_operands.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
        lib.lowbit_sparse_wgmma_sp.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 6 + [ctypes.c_void_p]
        lib.lowbit_sparse_wgmma_sp_workspace.argtypes = [ctypes.c_int] * 3
        lib.lowbit_sparse_wgmma_sp_workspace.restype = ctypes.c_longlong
        lib.lowbit_sparse_small_m.restype = lib.lowbit_sparse_dense_operands.restype = ctypes.c_int
        lib.lowbit_sparse_wgmma_sp.restype = ctypes.c_int
        _LIB = lib
    return _LIB


def _is_hopper(dev: torch.device) -> bool:
    """The kernels are built for sm_90a: compute capability 9.0 on a CUDA (not ROCm) build."""
    return dev.type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability(dev) == (9, 0)


def _make_plan(a_vals, a_meta, b_fp8, c, tile, definition_entry):
    """Validates every argument (ValueError naming it) and chooses the path and tile."""
    if tile is not None and tile not in PATHS and (not isinstance(tile, (tuple, list)) or tuple(tile) not in TILES):
        raise ValueError(f"tile: expected None, one of {PATHS} or one of {TILES}, got {tile!r}")
    if not isinstance(a_vals, torch.Tensor) or a_vals.dim() != 2:
        raise ValueError("a_vals: expected a 2-D tensor [m, k/4]")
    if not isinstance(b_fp8, torch.Tensor) or b_fp8.dim() != 2:
        raise ValueError("b_fp8: expected a 2-D tensor [n, k]")
    m = a_vals.shape[0]
    n, k = b_fp8.shape
    if definition_entry and (n, k) != (DEF_N, DEF_K):
        raise ValueError(f"b_fp8: expected shape ({DEF_N}, {DEF_K}), got {tuple(b_fp8.shape)}")
    if k <= 0 or k % 128:
        raise ValueError(f"b_fp8: k (dimension 1) must be a positive multiple of 128, got {k}")
    dev = b_fp8.device
    check_tensor("a_vals", a_vals, _BYTES, (m, k // 4), dev)
    check_tensor("a_meta", a_meta, _BYTES, (m, k // 4), dev)
    check_tensor("b_fp8", b_fp8, (torch.float8_e4m3fn,), (n, k), dev)
    check_tensor("c", c, (torch.bfloat16,), (m, n), dev)
    if not _is_hopper(dev):
        raise ValueError(f"b_fp8: expected a tensor on a Hopper GPU (sm_90a, compute capability 9.0), got {dev}")
    if m == 0:
        return _Plan(True)
    tile = tile or choose(m, n, torch.cuda.get_device_properties(dev).multi_processor_count, k)
    if tile in SPARSE_MMA and n % 128:
        raise ValueError(f"tile: {tile!r} needs n (b_fp8 dimension 0) a multiple of 128, got {n}")
    if tile == "dense":
        return _Plan(False, "dense", m, n, k, dev=dev.index)
    if tile in SPARSE_MMA:
        work = (_LIB or entry()).lowbit_sparse_wgmma_sp_workspace(m, n, k)
        mw, bn, splits = SPARSE_MMA[tile]
        if (k // 128) % splits:
            raise ValueError(f"tile: {tile!r} splits K into {splits}, needs k / 128 a multiple of it, got k {k}")
        return _Plan(False, "sparse_mma", m, n, k, mw=mw, bn=bn, splits=splits, work=work, dev=dev.index)
    mt, nt = tile
    return _Plan(False, "small", m, n, k, mt, nt, min(-(-m // (8 * nt)), 65535), dev=dev.index)


def sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c, tile=None, _entry=False):
    """c = bf16(A @ float(b_fp8)^T), A [m, k] from its 2:4 encoding: a_vals int8/uint8 [m, k/4]
    (two E2M1 codes a group, low nibble first), a_meta int8/uint8 [m, k/4] (bits 0-1 and 2-3:
    the two codes' positions in the group; equal positions sum; bits 4-7 ignored);
    b_fp8 float8_e4m3fn [n, k]; c bfloat16 [m, n]. All contiguous and 16-byte aligned, on one
    Hopper GPU."""
    try:
        key = (a_vals.shape, a_meta.shape, b_fp8.shape, c.shape, a_vals.dtype, a_meta.dtype, b_fp8.dtype,
               c.dtype, a_vals.device, a_meta.device, b_fp8.device, c.device,
               a_vals.is_contiguous() and a_meta.is_contiguous() and b_fp8.is_contiguous() and c.is_contiguous(),
               tile if tile is None or isinstance(tile, (str, tuple)) else "bad", _entry)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors: validate below
        key = plan = None
    if plan is None:
        plan = _make_plan(a_vals, a_meta, b_fp8, c, tile, _entry)
        if key is not None:
            if len(_PLANS) > 1024:
                _PLANS.clear()
            _PLANS[key] = plan
    if plan.empty:
        return c
    ptrs = (a_vals.data_ptr(), a_meta.data_ptr(), b_fp8.data_ptr(), c.data_ptr())
    if (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3]) % 16:  # the kernels move 16-byte vectors
        bad = next(nm for nm, p in zip(("a_vals", "a_meta", "b_fp8", "c"), ptrs) if p % 16)
        raise ValueError(f"{bad}: expected a 16-byte aligned tensor")
    lib = _LIB or entry()
    if torch.cuda.current_device() != plan.dev:  # launches go to the current device
        with torch.cuda.device(plan.dev):
            return _launch(lib, plan, ptrs, c)
    return _launch(lib, plan, ptrs, c)


def _launch(lib, plan, ptrs, c):
    stream = torch._C._cuda_getCurrentRawStream(plan.dev)
    if plan.path == "small":
        err = lib.lowbit_sparse_small_m(*ptrs, plan.m, plan.n, plan.k, plan.mt, plan.nt, plan.ysplit, stream)
        if err:
            raise RuntimeError(f"sparse few-rows kernel launch failed: CUDA error {err}")
        return c
    if plan.path == "sparse_mma":
        work = torch.empty(plan.work, dtype=torch.uint8, device=c.device)  # this call's prepared operands
        err = lib.lowbit_sparse_wgmma_sp(*ptrs, work.data_ptr(), plan.m, plan.n, plan.k, plan.mw, plan.bn, plan.splits,
                                         stream)
        if err:
            raise RuntimeError(f"sparse-MMA launch failed: CUDA error {err}")
        return c
    ab16 = torch.empty((plan.m + plan.n, plan.k), dtype=torch.bfloat16, device=c.device)  # one allocation
    a16, b16 = ab16[:plan.m], ab16[plan.m:]  # b16 starts m k 2 bytes in: 16-byte aligned as k % 128 == 0
    err = lib.lowbit_sparse_dense_operands(*ptrs[:3], a16.data_ptr(), b16.data_ptr(), plan.m, plan.n, plan.k, stream)
    if err:
        raise RuntimeError(f"sparse dense-operands launch failed: CUDA error {err}")
    mm_fp32_sums(a16, b16, c)
    return c


def run(a_vals, a_meta, b_fp8, c):
    """Definition entry point (n=2048, k=2048); writes c and returns it."""
    return sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c, _entry=True)
