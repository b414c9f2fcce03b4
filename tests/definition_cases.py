"""Inputs for both definitions at reduced sizes, random and adversarial, shared by
test_definitions.py (references) and test_baselines.py (baseline solutions), and the grouped
kernels' operands (test_grouped_gemm_kernel.py, test_grouped_dot_scaled.py).

Every case is (id, inputs tuple in definition order), built with lowbit_gemm.testing.
References and baselines read all sizes from the tensors, so small n and k exercise exactly
the same code as the full definition.
"""

from __future__ import annotations

import torch

from lowbit_gemm.quantize import quantize_act_fp8_per128, quantize_weight_fp4_per32
from lowbit_gemm.testing import (
    fp8_random,
    generator,
    grouped_operands,
    grouped_random_inputs,
    random_bytes,
    sparse_all_meta_bytes,
    sparse_pruned_inputs,
    sparse_random_inputs,
)

__all__ = ["grouped_cases", "grouped_operands", "sparse_cases"]


def grouped_cases(g: int = 4, n: int = 64, k: int = 256):
    """(id, (a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m)) for definition A."""
    cases = []

    # Real quantized data, weight rows of different magnitude (UE8M0 scales), ordinary masked_m.
    gen = generator(1)
    a_fp8, a_scale = quantize_act_fp8_per128(torch.randn(g, 24, k, generator=gen))
    w = torch.randn(g, n, k, generator=gen) * torch.exp2(torch.randint(-4, 4, (g, n, 1), generator=gen).float())
    b_fp4, b_scale = quantize_weight_fp4_per32(w)
    cases.append(("quantized", (a_fp8, a_scale, b_fp4, b_scale, torch.tensor([24, 5, 0, 17][:g], dtype=torch.int32), 20)))

    # Harness-style random: negative, non-power-of-two scales; out-of-range masked_m.
    cases.append(("random_scales_out_of_range_masked_m",
                  grouped_random_inputs(13, [-5, 13, 1000, 6][:g], n, k, seed=2, expected_m=-3)))

    # masked_m at int32 extremes, max_m 1, positive scales.
    gen = generator(3)
    cases.append(("int32_extremes_max_m_1", (
        fp8_random((g, 1, k), gen), torch.rand(g, 1, k // 128, generator=gen) + 0.5, random_bytes((g, n, k // 2), gen),
        torch.rand(g, n, k // 32, generator=gen) * 3, torch.tensor([2**31 - 1, -2**31, 1, 0][:g], dtype=torch.int32), 0)))

    cases.append(("all_empty", grouped_random_inputs(8, [0] * g, n, k, seed=4, expected_m=1)))
    return cases


def sparse_cases(n: int = 48, k: int = 256):
    """(id, (a_vals, a_meta, b_fp8)) for definition B."""
    return [
        ("pruned", sparse_pruned_inputs(9, n, k, seed=11)),                # well-formed 2:4
        ("random_bytes", sparse_random_inputs(7, n, k, seed=12)),          # repeated positions, high meta bits
        ("all_meta_bytes", sparse_all_meta_bytes(n, seed=13)),             # every meta byte 0..255 once
        ("m_1", sparse_random_inputs(1, n, k, seed=14)),
        ("full_range_b", sparse_pruned_inputs(5, n, k, seed=15, full_range_b=True)),  # e4m3 B at amax 448
    ]
