"""Entry points for sparse_gemm_fp4_fp8_n2048_k2048: c = bf16(A @ float(b_fp8).T), A 2:4 FP4.

run(a_vals, a_meta, b_fp8, c) checks the definition's constants and calls
sparse_gemm_fp4_fp8, the generic launcher (any m >= 0, n, k with k % 32 == 0).
"""

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from .heuristics import DECODE_BLOCK, K_MULTIPLE, gemm_config, small_config, use_small_path
from .kernel import (decode_a_kernel, fp8_gemm_kernel, fp8_gemm_tma_kernel, fused_gemm_kernel,
                     small_m_fma_kernel)

DEF_N = 2048
DEF_K = 2048
_INT8_TYPES = (torch.int8, torch.uint8)


def _check_tensor(name, t, dtypes, ndim, device):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name}: expected dtype {' or '.join(map(str, dtypes))}, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    if device is not None and t.device != device:
        raise ValueError(f"{name}: expected device {device}, got {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor")


def sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c):
    """Write c[m, n] = bf16(A @ float(b_fp8).T) with fp32 accumulation; return c.

    a_vals, a_meta: int8 (or uint8) [m, k/4]; byte j of row i holds the two E2M1 codes
    (low nibble first) and their positions inside group j (meta bits 0-1 and 2-3; bits 4-7
    ignored; a repeated position sums both values). b_fp8: float8_e4m3fn [n, k]. c: bf16
    [m, n]. All on one device and contiguous; k must be a multiple of 32. m may be 0.
    """
    _check_tensor("b_fp8", b_fp8, (torch.float8_e4m3fn,), 2, None)
    device = b_fp8.device
    _check_tensor("a_vals", a_vals, _INT8_TYPES, 2, device)
    _check_tensor("a_meta", a_meta, _INT8_TYPES, 2, device)
    _check_tensor("c", c, (torch.bfloat16,), 2, device)
    n, k = b_fp8.shape
    m, groups = a_vals.shape
    if k % K_MULTIPLE:
        raise ValueError(f"b_fp8: k={k} must be a multiple of {K_MULTIPLE}")
    if groups * 4 != k:
        raise ValueError(f"a_vals: expected shape [m, {k // 4}] (k/4 groups), got {tuple(a_vals.shape)}")
    if tuple(a_meta.shape) != (m, groups):
        raise ValueError(f"a_meta: expected shape {(m, groups)} like a_vals, got {tuple(a_meta.shape)}")
    if tuple(c.shape) != (m, n):
        raise ValueError(f"c: expected shape {(m, n)}, got {tuple(c.shape)}")
    if m == 0 or n == 0:
        return c
    if use_small_path(m):
        return launch_small(a_vals, a_meta, b_fp8, c, small_config(m, n, k))
    cap = torch.cuda.get_device_capability(device) if device.type == "cuda" else (9, 0)
    return launch_gemm(a_vals, a_meta, b_fp8, c, gemm_config(m, n, k, cap))


def launch_small(a_vals, a_meta, b_fp8, c, cfg):
    """Fused FP32-unit path with an explicit SmallConfig (inputs already validated)."""
    (m, groups), n = a_vals.shape, b_fp8.shape[0]
    grid = (triton.cdiv(n, cfg.BN), triton.cdiv(m, cfg.BM))
    small_m_fma_kernel[grid](a_vals, a_meta, b_fp8, c, m, n, 4 * groups, groups, 4 * groups, n,
                             **cfg.as_kwargs())
    return c


def launch_gemm(a_vals, a_meta, b_fp8, c, cfg):
    """Tensor-core path with an explicit GemmConfig (inputs already validated)."""
    (m, groups), n = a_vals.shape, b_fp8.shape[0]
    k = 4 * groups
    grid = (triton.cdiv(m, cfg.BM) * triton.cdiv(n, cfg.BN),)
    if cfg.path == "fused":
        fused_gemm_kernel[grid](a_vals, a_meta, b_fp8, c, m, n, k, groups, k, n, **cfg.as_kwargs())
        return c
    # Per-call workspace: dense e4m3 A (scaled by 2^-6), written as one int32 per group.
    dense_a = torch.empty((m, k), dtype=torch.uint8, device=a_vals.device)
    total = m * groups
    decode_a_kernel[(triton.cdiv(total, DECODE_BLOCK),)](
        a_vals, a_meta, dense_a.view(torch.int32), total, BLOCK=DECODE_BLOCK, num_warps=4)
    a8 = dense_a.view(torch.float8_e4m3fn)
    if cfg.path == "tma" and _tma_ok(b_fp8, c):
        a_desc = TensorDescriptor.from_tensor(a8, [cfg.BM, cfg.BK])
        b_desc = TensorDescriptor.from_tensor(b_fp8, [cfg.BN, cfg.BK])
        c_desc = TensorDescriptor.from_tensor(c, [cfg.BM, cfg.BN])
        fp8_gemm_tma_kernel[grid](a_desc, b_desc, c_desc, m, n, k, **cfg.as_kwargs())
    else:
        kwargs = cfg.as_kwargs()
        kwargs.pop("WS", None)  # a TMA config falling back to pointers (unaligned c or n)
        fp8_gemm_kernel[grid](a8, b_fp8, c, m, n, k, k, k, n, **kwargs)
    return c


def _tma_ok(b_fp8, c):
    """Descriptors need 16-byte aligned bases and row strides (host-side facts, no sync)."""
    return (b_fp8.data_ptr() % 16 == 0 and c.data_ptr() % 16 == 0 and c.shape[1] % 8 == 0)


def run(a_vals, a_meta, b_fp8, c):
    """FlashInfer-Bench entry (destination passing): n = k = 2048, 512 groups per row."""
    _check_tensor("b_fp8", b_fp8, (torch.float8_e4m3fn,), 2, None)
    _check_tensor("a_vals", a_vals, _INT8_TYPES, 2, b_fp8.device)
    if tuple(b_fp8.shape) != (DEF_N, DEF_K):
        raise ValueError(f"b_fp8: expected shape ({DEF_N}, {DEF_K}), got {tuple(b_fp8.shape)}")
    if a_vals.shape[1] != DEF_K // 4:
        raise ValueError(f"a_vals: expected shape [m, {DEF_K // 4}], got {tuple(a_vals.shape)}")
    return sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c)
