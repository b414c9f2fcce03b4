"""Inputs for both definitions at reduced sizes, random and adversarial, shared by
test_definitions.py (references) and test_baselines.py (baseline solutions), and the grouped
kernels' operands (test_grouped_gemm_kernel.py, test_grouped_dot_scaled.py).

Every case is (id, inputs tuple in definition order). References and baselines read all sizes
from the tensors, so small n and k exercise exactly the same code as the full definition.
"""

from __future__ import annotations

import torch

from lowbit_gemm.quantize import prune_2of4_fp4, quantize_act_fp8_per128, quantize_weight_fp4_per32


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _fp8(shape, gen) -> torch.Tensor:
    return torch.randn(shape, generator=gen).clamp(-2, 2).to(torch.float8_e4m3fn)


def _bytes(shape, gen) -> torch.Tensor:
    return torch.randint(-128, 128, shape, generator=gen, dtype=torch.int8)


def grouped_operands(g: int, max_m: int, n: int, k: int, seed: int = 0):
    """(a_fp8, a_scale, b_fp4, b_scale) quantized from random data, for the grouped kernels'
    tests (sizes free: the kernels are generic over them)."""
    gen = _gen(seed)
    a, a_s = quantize_act_fp8_per128(torch.randn(g, max_m, k, generator=gen))
    b, b_s = quantize_weight_fp4_per32(torch.randn(g, n, k, generator=gen) * 0.05)
    return a, a_s, b, b_s


def grouped_cases(g: int = 4, n: int = 64, k: int = 256):
    """(id, (a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m)) for definition A."""
    cases = []

    gen = _gen(1)  # real quantized data, UE8M0 scales, ordinary masked_m
    max_m = 24
    a_fp8, a_scale = quantize_act_fp8_per128(torch.randn(g, max_m, k, generator=gen))
    w = torch.randn(g, n, k, generator=gen) * torch.exp2(torch.randint(-4, 4, (g, n, 1), generator=gen).float())
    b_fp4, b_scale = quantize_weight_fp4_per32(w)
    cases.append(("quantized", (a_fp8, a_scale, b_fp4, b_scale, torch.tensor([24, 5, 0, 17][:g], dtype=torch.int32), 20)))

    gen = _gen(2)  # harness-style random: negative, non-power-of-two scales; out-of-range masked_m
    max_m = 13
    cases.append(("random_scales_out_of_range_masked_m", (
        _fp8((g, max_m, k), gen), torch.randn(g, max_m, k // 128, generator=gen), _bytes((g, n, k // 2), gen),
        torch.randn(g, n, k // 32, generator=gen), torch.tensor([-5, 13, 1000, 6][:g], dtype=torch.int32), -3)))

    gen = _gen(3)  # masked_m at int32 extremes, max_m 1
    cases.append(("int32_extremes_max_m_1", (
        _fp8((g, 1, k), gen), torch.rand(g, 1, k // 128, generator=gen) + 0.5, _bytes((g, n, k // 2), gen),
        torch.rand(g, n, k // 32, generator=gen) * 3, torch.tensor([2**31 - 1, -2**31, 1, 0][:g], dtype=torch.int32), 0)))

    gen = _gen(4)  # all groups empty
    cases.append(("all_empty", (
        _fp8((g, 8, k), gen), torch.randn(g, 8, k // 128, generator=gen), _bytes((g, n, k // 2), gen),
        torch.randn(g, n, k // 32, generator=gen), torch.zeros(g, dtype=torch.int32), 1)))
    return cases


def sparse_cases(n: int = 48, k: int = 256):
    """(id, (a_vals, a_meta, b_fp8)) for definition B."""
    cases = []
    gen = _gen(11)  # well-formed: magnitude-pruned Gaussian
    a_vals, a_meta = prune_2of4_fp4(torch.randn(9, k, generator=gen) * 2)
    cases.append(("pruned", (a_vals, a_meta, _fp8((n, k), gen))))

    gen = _gen(12)  # every byte pattern: repeated positions, high bits of meta set
    cases.append(("random_bytes", (_bytes((7, k // 4), gen), _bytes((7, k // 4), gen), _fp8((n, k), gen))))

    gen = _gen(13)  # every meta byte 0..255 in turn (all repeated-position and high-bit patterns)
    meta = torch.arange(256, dtype=torch.int64).reshape(4, 64).to(torch.uint8).view(torch.int8)
    cases.append(("all_meta_bytes", (_bytes((4, 64), gen), meta, _fp8((n, 256), gen))))

    gen = _gen(14)  # m = 1
    cases.append(("m_1", (_bytes((1, k // 4), gen), _bytes((1, k // 4), gen), _fp8((n, k), gen))))
    return cases
