"""Peer: rebuild dense A in FP8, then one FP8 GEMM through torch._scaled_mm (cuBLASLt).

Every E2M1 value, and every sum of two (a repeated 2:4 position), is exact in e4m3, so the
dense FP8 A is the definition's A without rounding; the GEMM runs on the FP8 tensor cores
with fp32 accumulation and bf16 output. Rows are padded to a multiple of 16, which
_scaled_mm requires. Self-contained: torch only.

Its E2M1 decode is its own on purpose: a peer stands for what a user would run without this
project, and shares no code with the kernels it is compared against.
"""

import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_CACHE = {}


def _lut(device):
    if device not in _CACHE:
        _CACHE[device] = torch.tensor(_E2M1, dtype=torch.float32, device=device)
    return _CACHE[device]


def dense_a(a_vals, a_meta, rows: int):
    """[m, k/4] 2:4 encoding -> dense float32 A [rows, k] (rows >= m; extra rows are zero)."""
    m, g = a_vals.shape
    v = a_vals.view(torch.uint8).long()
    meta = a_meta.view(torch.uint8).long()
    x = _lut(a_vals.device)[torch.stack((v & 0xF, v >> 4), dim=-1)]
    pos = torch.stack((meta & 3, (meta >> 2) & 3), dim=-1)
    a = torch.zeros(rows, g, 4, dtype=torch.float32, device=a_vals.device)
    a[:m].scatter_add_(2, pos, x)
    return a.view(rows, 4 * g)


@torch.no_grad()
def run(a_vals, a_meta, b_fp8, c):
    m = a_vals.shape[0]
    rows = max(16, -(-m // 16) * 16)
    a = dense_a(a_vals, a_meta, rows).to(torch.float8_e4m3fn)
    one = torch.ones((), dtype=torch.float32, device=c.device)
    # b_fp8 is [n, k] row-major; its transpose is the column-major [k, n] operand cuBLASLt wants.
    out = torch._scaled_mm(a, b_fp8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    c.copy_(out[:m])
    return c
