"""Plain PyTorch baseline: dequantize each group to float32, matmul its valid rows, zero the rest.

What a user writes first; it runs anywhere PyTorch runs (CPU or GPU).

Its E2M1 decode is its own on purpose: a baseline is the plain PyTorch FlashInfer-Bench ranks
against, and shares no code with the kernels it is compared against.
"""

import torch

# E2M1 code -> value: bits 0..2 index the magnitude, bit 3 is the sign.
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _dequant_fp4(b_fp4: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    """[n, k/2] packed E2M1 (low nibble first) and [n, k/32] scales -> float32 [n, k]."""
    byte = b_fp4.view(torch.uint8).long()
    codes = torch.stack((byte & 0xF, byte >> 4), dim=-1).flatten(-2)
    lut = torch.tensor(_E2M1, dtype=torch.float32, device=b_fp4.device)
    return lut[codes] * b_scale.float().repeat_interleave(32, dim=-1)


@torch.no_grad()
def run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c):
    num_groups, max_m, _ = a_fp8.shape
    c.zero_()
    for i, m in enumerate(masked_m.tolist()):
        rows = min(max(m, 0), max_m)
        if rows == 0:
            continue
        a = a_fp8[i, :rows].float() * a_scale[i, :rows].float().repeat_interleave(128, dim=-1)
        b = _dequant_fp4(b_fp4[i], b_scale[i])
        c[i, :rows] = (a @ b.T).to(torch.bfloat16)
    return c
