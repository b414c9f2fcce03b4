"""M-masked grouped FP8 x FP4 GEMM (definition grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048) on
Hopper's tensor cores with f16 operands and fp32 accumulation, exact (grouped_wgmma.cu says why
and how): for groups of few rows the weights decoded from FP4 straight into the MMA's register
operand (tokens-as-N forms, on mma.sync up to 16 rows and on wgmma up to 32), else into shared
memory by a producer warpgroup under the wgmmas (one launch each); for groups of 257-1024 rows,
and of more where n is no multiple of 256, a first pass converts the tokens to fp16 stage images
in a workspace and the weights are decoded into the MMA's register operand by the threads that
multiply them (register-weights form); for more, a first pass converts both operands to fp16
stage images, which the GEMM copies in whole (prepared form). The register-weights and prepared
forms fall back to the producer form, exact for any scale, where a scale needs it: inside the
prepared GEMM (two launches a call), as a third launch after the register-weights GEMM.

Entry points:
- ``run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c)``: the definition's entry
  (g=4, n=2048, k=2048), destination passing: writes c and returns it. expected_m (an int)
  only picks the tile (heuristics.py); tiles past masked_m only write zeros.
- ``grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None,
  tile=None)``: any g >= 0, max_m >= 0, n a multiple of 128 and k a positive multiple of 128;
  tile, one of TILES ((token rows, weight rows), + the form where it takes a workspace),
  overrides the heuristic.

Needs a Hopper GPU (sm_90a). masked_m is read on the device, never synchronised. Nothing is
kept across calls but the plan of a shape and the compiled library (build.py builds it on
first use); the workspace of the forms with a first pass is allocated per call.
"""

import ctypes
from pathlib import Path
from typing import NamedTuple

import torch

from .build import library
from .checks import check_grouped_inputs
from .heuristics import tile_shape

_HERE = Path(__file__).resolve().parent
DEF_G, DEF_N, DEF_K = 4, 2048, 2048
TILES = ((8, 32), (16, 32), (32, 64), (128, 64), (128, 128), (256, 128, "register"),
         (128, 256, "prepared"))  # the kernel's instantiations


class _Plan(NamedTuple):
    empty: bool
    g: int = 0
    max_m: int = 0
    n: int = 0
    k: int = 0
    masked_m_is_64: int = 0
    dev: int = 0
    bm: int = 128
    bn: int = 128
    workspace_bytes: int = 0  # > 0: the register-weights or the prepared form


_PLANS = {}
_ENTRY = None


def entry():
    """The built library (build.py) with its entries' argument types set:
    lowbit_grouped_wgmma(a_fp8, a_scale, b_fp4, b_scale, masked_m, masked_m_is_64, c, g, max_m,
    n, k, bm, bn, workspace, stream) -> cudaError_t code, and
    lowbit_grouped_workspace_bytes(g, max_m, n, k, bm, bn) -> the workspace size of the
    register-weights (256 x 128) or prepared (128 x 256) form."""
    global _ENTRY
    if _ENTRY is None:
        lib = library(_HERE / "grouped_wgmma.cu", sorted(_HERE.glob("*.cuh")))  # rebuilt when any header changes
        fn = lib.lowbit_grouped_wgmma
        fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int, ctypes.c_void_p] + [ctypes.c_int] * 6 + [ctypes.c_void_p] * 2
        fn.restype = ctypes.c_int
        lib.lowbit_grouped_workspace_bytes.argtypes = [ctypes.c_int] * 6
        lib.lowbit_grouped_workspace_bytes.restype = ctypes.c_longlong
        _ENTRY = lib
    return _ENTRY


def _is_hopper(dev: torch.device) -> bool:
    """The kernels are built for sm_90a: compute capability 9.0 on a CUDA (not ROCm) build."""
    return dev.type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability(dev) == (9, 0)


def _make_plan(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m, tile, entry_point):
    """Validates every argument (ValueError naming it)."""
    if tile is not None and (not isinstance(tile, (tuple, list)) or tuple(tile) not in TILES):
        raise ValueError(f"tile: expected None or one of {TILES}, got {tile!r}")
    g, max_m, n, k = check_grouped_inputs(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m,
                                          (DEF_G, DEF_N, DEF_K) if entry_point else None)
    if n % 128:
        raise ValueError(f"b_fp4: n (dimension 1) must be a multiple of 128, got {n}")
    if tile is not None and n % tile[1]:
        raise ValueError(f"tile: {tuple(tile)} needs n (b_fp4's dimension 1) a multiple of {tile[1]}, got {n}")
    dev = a_fp8.device
    if not _is_hopper(dev):
        raise ValueError(f"a_fp8: expected a tensor on a Hopper GPU (sm_90a, compute capability 9.0), got {dev}")
    if g * -(-max_m // 128) * (n // 128) >= 2 ** 30:
        raise ValueError(f"a_fp8: at most 2^30 - 1 tiles of 128 x 128 in all groups, got shape {tuple(a_fp8.shape)}")
    if g == 0 or max_m == 0:
        return _Plan(True)
    rows = max_m if expected_m is None else min(max(int(expected_m), 1), max_m)
    bm, bn, *form = tile_shape(g, rows, n, max_m) if tile is None else tuple(tile)
    ws = entry().lowbit_grouped_workspace_bytes(g, max_m, n, k, bm, bn) if form else 0
    return _Plan(False, g, max_m, n, k, int(masked_m.dtype == torch.int64), dev.index, bm, bn, ws)


def grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None, tile=None,
                                _entry=False):
    """c[g, :rows] = (A_g * a_scale)[:rows] @ (E2M1(B_g) * b_scale)^T in bf16, c[g, rows:] = 0,
    rows = clamp(masked_m[g], 0, max_m).

    a_fp8 float8_e4m3fn [g, max_m, k]; a_scale float32 [g, max_m, k/128]; b_fp4 int8/uint8
    [g, n, k/2] (two E2M1 codes a byte, low nibble = even k); b_scale float32 [g, n, k/32];
    masked_m int32/int64 [g]; c bfloat16 [g, max_m, n] (written in full). All contiguous,
    16-byte aligned, on one Hopper GPU. expected_m (int or None) is a hint for the tile only;
    tile (token rows, weight rows) in TILES, or None for heuristics.py's choice.
    """
    try:
        key = (a_fp8.shape, a_scale.shape, b_fp4.shape, b_scale.shape, masked_m.shape, c.shape,
               a_fp8.dtype, a_scale.dtype, b_fp4.dtype, b_scale.dtype, masked_m.dtype, c.dtype,
               a_fp8.device, a_scale.device, b_fp4.device, b_scale.device, masked_m.device, c.device,
               a_fp8.is_contiguous() and a_scale.is_contiguous() and b_fp4.is_contiguous()
               and b_scale.is_contiguous() and masked_m.is_contiguous() and c.is_contiguous(),
               type(expected_m), expected_m, tile, _entry)  # 4.0 == 4: a float hint must not take 4's plan
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors: validate below
        key = plan = None
    if plan is None:
        plan = _make_plan(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m, tile, _entry)
        if key is not None:
            if len(_PLANS) > 1024:
                _PLANS.clear()
            _PLANS[key] = plan
    if plan.empty:
        return c
    ptrs = (a_fp8.data_ptr(), a_scale.data_ptr(), b_fp4.data_ptr(), b_scale.data_ptr(), masked_m.data_ptr(),
            c.data_ptr())
    if (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3] | ptrs[5]) % 16:  # the kernel moves 16-byte vectors
        names = ("a_fp8", "a_scale", "b_fp4", "b_scale", "masked_m", "c")
        bad = next(nm for nm, p in zip(names, ptrs) if nm != "masked_m" and p % 16)
        raise ValueError(f"{bad}: expected a 16-byte aligned tensor")
    # a fresh workspace a call (the caching allocator's): calls on other streams never share one
    ws = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=c.device) if plan.workspace_bytes else None
    args = (*ptrs[:5], plan.masked_m_is_64, ptrs[5], plan.g, plan.max_m, plan.n, plan.k, plan.bm, plan.bn,
            None if ws is None else ws.data_ptr())
    fn = (_ENTRY or entry()).lowbit_grouped_wgmma
    if torch.cuda.current_device() != plan.dev:  # the launch goes to the current device
        with torch.cuda.device(plan.dev):
            err = fn(*args, torch._C._cuda_getCurrentRawStream(plan.dev))
    else:
        err = fn(*args, torch._C._cuda_getCurrentRawStream(plan.dev))
    if err:
        raise RuntimeError(f"grouped_wgmma launch failed: CUDA error {err}")
    return c


def run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c):
    """Definition entry point (g=4, n=2048, k=2048); writes c and returns it."""
    if isinstance(expected_m, torch.Tensor):
        expected_m = None  # a hint only: reading a device tensor would synchronise
    return grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m, None, True)
