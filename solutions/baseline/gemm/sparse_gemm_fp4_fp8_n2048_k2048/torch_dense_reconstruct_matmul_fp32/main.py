"""Plain PyTorch baseline: rebuild the dense float32 A from the 2:4 encoding, then one matmul.

What a user writes first; it runs anywhere PyTorch runs (CPU or GPU).

Its E2M1 decode is its own on purpose: a baseline is the plain PyTorch FlashInfer-Bench ranks
against, and shares no code with the kernels it is compared against.
"""

import torch

# E2M1 code -> value: bits 0..2 index the magnitude, bit 3 is the sign.
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _dense_a(a_vals: torch.Tensor, a_meta: torch.Tensor) -> torch.Tensor:
    """[m, g] values and metadata -> float32 [m, 4g]; a repeated position sums both values."""
    m, g = a_vals.shape
    v = a_vals.view(torch.uint8).long()
    meta = a_meta.view(torch.uint8).long()
    lut = torch.tensor(_E2M1, dtype=torch.float32, device=a_vals.device)
    values = torch.stack((lut[v & 0xF], lut[v >> 4]), dim=-1)
    positions = torch.stack((meta & 3, (meta >> 2) & 3), dim=-1)
    dense = torch.zeros(m, g, 4, dtype=torch.float32, device=a_vals.device)
    dense.scatter_add_(2, positions, values)
    return dense.view(m, 4 * g)


@torch.no_grad()
def run(a_vals, a_meta, b_fp8, c):
    c.copy_(_dense_a(a_vals, a_meta) @ b_fp8.float().T)
    return c
