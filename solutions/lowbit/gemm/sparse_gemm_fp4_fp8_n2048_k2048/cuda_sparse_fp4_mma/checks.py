"""Argument checks of the entry points: a ValueError naming the argument and what was expected.

Copied byte-identically into every lowbit solution that checks tensors this way (solutions
are packed self-contained); tests/test_copies.py fails when the copies drift.
"""

import numbers

import torch


def check_tensor(name, t, dtypes, shape, device):
    """t is a contiguous torch.Tensor of one of dtypes, of this shape, on this device."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name}: expected dtype {' or '.join(map(str, dtypes))}, got {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: expected device {device}, got {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor")


def check_grouped_inputs(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m, entry_shape=None):
    """The grouped definition's operands on a_fp8's device: a_fp8 e4m3 [g, max_m, k] (k a positive
    multiple of 128), a_scale fp32 [g, max_m, k/128], b_fp4 int8/uint8 [g, n, k/2], b_scale fp32
    [g, n, k/32], masked_m int32/int64 [g], c bf16 [g, max_m, n], all contiguous; expected_m an
    int or None; with entry_shape (g, n, k), the definition's fixed sizes. Returns (g, max_m, n, k)."""
    if not isinstance(a_fp8, torch.Tensor) or a_fp8.dim() != 3:
        raise ValueError("a_fp8: expected a 3-D tensor [g, max_m, k]")
    if not isinstance(b_fp4, torch.Tensor) or b_fp4.dim() != 3:
        raise ValueError("b_fp4: expected a 3-D tensor [g, n, k/2]")
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    if entry_shape is not None:
        eg, en, ek = entry_shape
        if (g, k) != (eg, ek):
            raise ValueError(f"a_fp8: expected shape [{eg}, max_m, {ek}], got {tuple(a_fp8.shape)}")
        if tuple(b_fp4.shape) != (eg, en, ek // 2):
            raise ValueError(f"b_fp4: expected shape ({eg}, {en}, {ek // 2}), got {tuple(b_fp4.shape)}")
    if k <= 0 or k % 128:
        raise ValueError(f"a_fp8: k (last dimension) must be a positive multiple of 128, got {k}")
    if n < 1:
        raise ValueError(f"b_fp4: n (dimension 1) must be >= 1, got {n}")
    dev = a_fp8.device
    check_tensor("a_fp8", a_fp8, (torch.float8_e4m3fn,), (g, max_m, k), dev)
    check_tensor("a_scale", a_scale, (torch.float32,), (g, max_m, k // 128), dev)
    check_tensor("b_fp4", b_fp4, (torch.int8, torch.uint8), (g, n, k // 2), dev)
    check_tensor("b_scale", b_scale, (torch.float32,), (g, n, k // 32), dev)
    check_tensor("masked_m", masked_m, (torch.int32, torch.int64), (g,), dev)
    check_tensor("c", c, (torch.bfloat16,), (g, max_m, n), dev)
    if expected_m is not None and not isinstance(expected_m, numbers.Integral):
        raise ValueError(f"expected_m: expected an int or None, got {type(expected_m).__name__}")
    return g, max_m, n, k
