"""Quantizers that turn real-valued tensors into the definitions' input formats.

They make the workloads and the test inputs, so they follow what a serving stack does:
activations per token per 128 along K in FP8 e4m3 with a float32 scale, weights per 32
along K in FP4 E2M1 with a UE8M0 (power-of-two) scale, and 2:4 pruning by magnitude.
"""

from __future__ import annotations

import torch

from .numerics import E2M1_MAX, E4M3_MAX, e2m1_encode, pack_fp4, pack_sparse_a, ue8m0_ceil


def _blocks(x: torch.Tensor, size: int, name: str) -> torch.Tensor:
    if x.shape[-1] % size:
        raise ValueError(f"{name}: last dimension {x.shape[-1]} is not a multiple of {size}")
    return x.reshape(*x.shape[:-1], x.shape[-1] // size, size)


def quantize_act_fp8_per128(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., k] -> (a_fp8 e4m3 [..., k], a_scale float32 [..., k/128]), amax/448 per block.

    All-zero blocks get scale 1 so that no scale is zero or NaN.
    """
    blocks = _blocks(x.to(torch.float32), 128, "x")
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (blocks / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.reshape(x.shape), scale.squeeze(-1)


def quantize_weight_fp4_per32(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [..., n, k] -> (b_fp4 int8 [..., n, k/2], b_scale float32 [..., n, k/32]).

    The scale is amax/6 rounded up to a power of two (UE8M0), so no value saturates.
    """
    blocks = _blocks(w.to(torch.float32), 32, "w")
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = ue8m0_ceil(amax / E2M1_MAX)
    codes = e2m1_encode(blocks / scale).reshape(w.shape)
    return pack_fp4(codes), scale.squeeze(-1)


def prune_2of4_fp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [m, k] (already in E2M1 range) -> (a_vals, a_meta), keeping the 2 largest |w| of each 4.

    Kept positions are stored in ascending order (p0 < p1), the well-formed 2:4 layout.
    """
    if w.dim() != 2:
        raise ValueError(f"w: expected a 2-D tensor [m, k], got shape {tuple(w.shape)}")
    groups = _blocks(w.to(torch.float32), 4, "w")
    keep = groups.abs().topk(2, dim=-1).indices.sort(dim=-1).values
    kept = groups.gather(-1, keep)
    return pack_sparse_a(e2m1_encode(kept), keep)
