"""Argument checks of the entry points: a ValueError naming the argument and what was expected.

Copied byte-identically into every lowbit solution that checks tensors this way (solutions
are packed self-contained); tests/test_copies.py fails when the copies drift.
"""

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
