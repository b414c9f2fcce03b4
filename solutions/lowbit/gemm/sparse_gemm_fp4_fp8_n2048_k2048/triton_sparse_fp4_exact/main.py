"""2:4-sparse FP4 x FP8 GEMM (definition sparse_gemm_fp4_fp8_n2048_k2048), exact: fp16 or bf16
operands (every value is exact in either) with fp32 accumulation (kernel.py says why).

Entry points:
- ``run(a_vals, a_meta, b_fp8, c)``: the definition's entry (n=2048, k=2048), destination
  passing: writes c and returns it.
- ``sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c, tile=None)``: any m >= 0, n >= 1 and k a
  positive multiple of 128.

Up to heuristics.ONE_PASS_ROWS rows one launch; beyond, one launch writing both operands
dense in bf16 and one cuBLAS GEMM into c. Nothing is kept across calls but the plan of a
shape and the compiled kernels; the dense operands are fresh per call. Self-contained: only torch and triton, plus this folder's modules.
"""

from typing import NamedTuple

import torch

from .checks import check_tensor
from .dense_mm import mm_fp32_sums
from .fast_launch import INTERPRET, Launch
from .heuristics import DENSE_CHUNK, DENSE_ROWS, Tile, choose
from .kernel import dense_operands_kernel, sparse_fp16_kernel

DEF_N, DEF_K = 2048, 2048
_BYTES = (torch.int8, torch.uint8)


class _Plan(NamedTuple):
    empty: bool
    kernel: Launch = None   # the one pass, or the dense path's first pass
    dense: bool = False     # the dense-operands path
    m: int = 0
    n: int = 0
    groups: int = 0


_PLANS = {}


def _make_plan(a_vals, a_meta, b_fp8, c, tile, entry):
    """Validates every argument (ValueError naming it) and chooses the tile and grid."""
    if not isinstance(a_vals, torch.Tensor) or a_vals.dim() != 2:
        raise ValueError("a_vals: expected a 2-D tensor [m, k/4]")
    if not isinstance(b_fp8, torch.Tensor) or b_fp8.dim() != 2:
        raise ValueError("b_fp8: expected a 2-D tensor [n, k]")
    m, groups = a_vals.shape
    n, k = b_fp8.shape
    if entry and (n, k) != (DEF_N, DEF_K):
        raise ValueError(f"b_fp8: expected shape ({DEF_N}, {DEF_K}), got {tuple(b_fp8.shape)}")
    if k <= 0 or k % 128:
        raise ValueError(f"b_fp8: k (dimension 1) must be a positive multiple of 128, got {k}")
    dev = b_fp8.device
    check_tensor("a_vals", a_vals, _BYTES, (m, k // 4), dev)
    check_tensor("a_meta", a_meta, _BYTES, (m, k // 4), dev)
    check_tensor("b_fp8", b_fp8, (torch.float8_e4m3fn,), (n, k), dev)
    check_tensor("c", c, (torch.bfloat16,), (m, n), dev)
    if m == 0:
        return _Plan(True)
    tile = tile or choose(m)
    if tile == "dense" or tile is None:
        grid = (-(-m // DENSE_ROWS) + -(-n // DENSE_ROWS), -(-k // DENSE_CHUNK), 1)
        first = Launch(dense_operands_kernel, grid, (m, n, groups), dict(ROWS=DENSE_ROWS, CHUNK=DENSE_CHUNK, num_warps=4),
                       dev)
        return _Plan(False, first, True, m, n, groups)
    if not isinstance(tile, Tile):
        raise ValueError(f"tile: expected a heuristics.Tile or 'dense', got {type(tile).__name__}")
    grid = (-(-m // tile.BM) * -(-n // tile.BN), 1, 1)
    consts = dict(BM=tile.BM, BN=tile.BN, SWAP=tile.SWAP, GROUP_M=tile.GROUP_M, MANUAL_RNE=INTERPRET,
                  num_warps=tile.num_warps, num_stages=tile.num_stages)
    return _Plan(False, Launch(sparse_fp16_kernel, grid, (m, n, groups), consts, dev))


def sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c, tile=None, _entry=False):
    """c = bf16(A @ float(b_fp8)^T), A [m, k] from its 2:4 encoding: a_vals int8/uint8 [m, k/4]
    (two E2M1 codes a group, low nibble first), a_meta int8/uint8 [m, k/4] (bits 0-1 and 2-3:
    the two codes' positions in the group; equal positions sum; bits 4-7 ignored);
    b_fp8 float8_e4m3fn [n, k]; c bfloat16 [m, n]. All contiguous, on one device."""
    try:
        key = (a_vals.shape, a_meta.shape, b_fp8.shape, c.shape, a_vals.dtype, a_meta.dtype, b_fp8.dtype,
               c.dtype, a_vals.device, a_meta.device, b_fp8.device, c.device,
               a_vals.is_contiguous() and a_meta.is_contiguous() and b_fp8.is_contiguous() and c.is_contiguous(),
               tile, _entry)
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
    if not plan.dense:
        plan.kernel(a_vals, a_meta, b_fp8, c)
        return c
    a16 = torch.empty((plan.m, 4 * plan.groups), dtype=torch.bfloat16, device=c.device)
    b16 = torch.empty((plan.n, 4 * plan.groups), dtype=torch.bfloat16, device=c.device)
    plan.kernel(a_vals, a_meta, b_fp8, a16, b16)
    mm_fp32_sums(a16, b16, c)
    return c


def run(a_vals, a_meta, b_fp8, c):
    """Definition entry point (n=2048, k=2048); writes c and returns it."""
    return sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c, _entry=True)
