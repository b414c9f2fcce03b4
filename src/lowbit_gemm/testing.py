"""Inputs for both definitions, for tests and checks: one builder for each kind of input.

The tests, the CPU check of the main job and the GPU tests all build their inputs here, so an
input means the same thing wherever it is used. Real-valued data goes through the quantizers
of lowbit_gemm.quantize (as a serving stack would make it); raw bytes stand for what the
harness's `random` inputs look like. Sizes are free: the references, oracles and kernels read
them from the tensors, so small n and k exercise the same code as the definitions' 2048.

Every builder takes a seed (or a torch.Generator) and is deterministic on the CPU; pass
`device` to get the tensors elsewhere (they are made on the CPU first, so a seed gives the
same values on every device).

Definition A (grouped): inputs in order (a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m).
Definition B (sparse):  inputs in order (a_vals, a_meta, b_fp8).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch

from .numerics import E2M1_VALUES, E4M3_MAX
from .quantize import prune_2of4_fp4, quantize_act_fp8_per128, quantize_weight_fp4_per32

Seed = Union[int, torch.Generator]


def generator(seed: Seed) -> torch.Generator:
    """A CPU generator from a seed (a generator passes through, so callers can chain draws)."""
    return seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(int(seed))


def _to(tensors, device):
    return tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in tensors)


# --- building blocks -----------------------------------------------------------------------

def fp8_random(shape, seed: Seed = 0, clamp: float = 2.0) -> torch.Tensor:
    """e4m3 from a clamped Gaussian, as FlashInfer-Bench draws a `random` FP8 input."""
    return torch.randn(shape, generator=generator(seed)).clamp(-clamp, clamp).to(torch.float8_e4m3fn)


def e4m3_full_range(shape, seed: Seed = 0) -> torch.Tensor:
    """e4m3 from a Gaussian scaled so that its largest magnitude is exactly 448 (e4m3's max):
    every binade of the format is used, as in weights quantized per tensor to full range."""
    x = torch.randn(shape, generator=generator(seed))
    return (x * (E4M3_MAX / x.abs().max())).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def random_bytes(shape, seed: Seed = 0) -> torch.Tensor:
    """Uniform int8 bytes: every bit pattern (for packed FP4 and 2:4 metadata, all have a meaning)."""
    return torch.randint(-128, 128, shape, generator=generator(seed), dtype=torch.int8)


def e2m1_grid(shape, seed: Seed = 0) -> torch.Tensor:
    """float32 values drawn uniformly from the 16 E2M1 values: data the FP4 quantizers and
    the 2:4 pruner take without rounding."""
    codes = torch.randint(0, 16, shape, generator=generator(seed))
    return E2M1_VALUES[codes]


def outlier_activations(shape, seed: Seed = 0, channels: int = 4, factor: float = 50.0) -> torch.Tensor:
    """Gaussian activations [..., k] with `channels` channels along k `factor` times the rest,
    the shape of real LLM activations that per-128 FP8 scales must absorb."""
    gen = generator(seed)
    x = torch.randn(shape, generator=gen)
    k = shape[-1]
    hot = torch.randperm(k, generator=gen)[:channels]
    x[..., hot] *= factor
    return x


def nan_output(shape, device="cpu") -> torch.Tensor:
    """A bf16 output filled with NaN, so a kernel that skips an element is caught."""
    return torch.full(tuple(shape), float("nan"), dtype=torch.bfloat16, device=device)


# --- definition A: grouped FP8 x FP4, M-masked ----------------------------------------------

def expected_m_hint(masked_m: Sequence[int], max_m: int) -> int:
    """The definitions' scheduling hint: int(1.2 * mean rows per group), rows clamped to max_m."""
    rows = [min(max(int(r), 0), max_m) for r in masked_m]
    return int(1.2 * sum(rows) / max(len(rows), 1))


def grouped_operands(g: int, max_m: int, n: int, k: int, seed: Seed = 0, weight_std: float = 0.05,
                     outliers: bool = False) -> Tuple[torch.Tensor, ...]:
    """(a_fp8, a_scale, b_fp4, b_scale) quantized from Gaussian data: activations per token per
    128, weights (std `weight_std`) per 32 with UE8M0 scales. `outliers`: a few activation
    channels 50x the rest (outlier_activations)."""
    gen = generator(seed)
    x = outlier_activations((g, max_m, k), gen) if outliers else torch.randn(g, max_m, k, generator=gen)
    a, a_s = quantize_act_fp8_per128(x)
    b, b_s = quantize_weight_fp4_per32(torch.randn(g, n, k, generator=gen) * weight_std)
    return a, a_s, b, b_s


def grouped_inputs(max_m: int, masked_m: Sequence[int], n: int = 2048, k: int = 2048, seed: Seed = 0,
                   expected_m: Optional[int] = None, weight_std: float = 0.05, outliers: bool = False,
                   device="cpu") -> Tuple:
    """Definition A's inputs from quantized Gaussian data; one group per entry of masked_m
    (any int32, out of range included). expected_m defaults to expected_m_hint."""
    ops = grouped_operands(len(masked_m), max_m, n, k, seed, weight_std, outliers)
    mm = torch.tensor(list(masked_m), dtype=torch.int32)
    hint = expected_m_hint(masked_m, max_m) if expected_m is None else expected_m
    return _to((*ops, mm, hint), device)


def grouped_random_inputs(max_m: int, masked_m: Sequence[int], n: int = 2048, k: int = 2048,
                          seed: Seed = 0, expected_m: int = 1, device="cpu") -> Tuple:
    """Definition A's inputs as the harness's `random` draws them: FP8 from a clamped Gaussian,
    every FP4 byte pattern, Gaussian float32 scales (negative and not powers of two)."""
    gen = generator(seed)
    g = len(masked_m)
    return _to((fp8_random((g, max_m, k), gen), torch.randn(g, max_m, k // 128, generator=gen),
                random_bytes((g, n, k // 2), gen), torch.randn(g, n, k // 32, generator=gen),
                torch.tensor(list(masked_m), dtype=torch.int32), expected_m), device)


def wide_b_scale(g: int, n: int, k: int, seed: Seed = 0) -> torch.Tensor:
    """Power-of-two b_scale spanning >= 30 binades inside every block of 4 scales (128 k
    values): largest where real weights sit (2^-6..2^-4), smallest 30 or more binades below."""
    gen = generator(seed)
    exps = torch.randint(-40, -3, (g, n, k // 32), generator=gen)
    exps[..., 0::4] = torch.randint(-40, -35, exps[..., 0::4].shape, generator=gen)
    exps[..., 2::4] = torch.randint(-6, -3, exps[..., 2::4].shape, generator=gen)
    return torch.exp2(exps.to(torch.float32))


def spread_a_scale(a_scale: torch.Tensor, seed: Seed = 0, row_binades: int = 2, block_binades: int = 6) -> torch.Tensor:
    """a_scale times 2^U(-row_binades, row_binades) per token row and 2^U(-block_binades,
    block_binades) per block, with about 1 block in 8 set to 0 (block 0 of every row 5 mod 8
    among them, and all of row 3 of every group): token rows far apart in scale, blocks of a row
    several binades apart (outlier channels), and blocks quantized from all-zero activations.
    (With rows scaled over 2^-30 .. 2^30 instead, sums that cancel leave the check in fp32
    however they are ordered: cuda_fp4_wgmma at 128 x 128, predecoded and prepared had 6-8
    elements of 1.2 M outside the check against the definition's reference there, H200,
    2026-12-04.)"""
    gen = generator(seed)
    g, rows, blocks = a_scale.shape
    row_e = torch.randint(-row_binades, row_binades + 1, (g, rows, 1), generator=gen)
    block_e = torch.randint(-block_binades, block_binades + 1, a_scale.shape, generator=gen)
    out = a_scale * torch.exp2((row_e + block_e).to(torch.float32))
    out[torch.rand(a_scale.shape, generator=gen) < 0.125] = 0.0
    out[:, 5::8, 0] = 0.0
    out[:, 3] = 0.0
    return out


# --- definition B: 2:4 sparse FP4 x FP8 -----------------------------------------------------

def sparse_pruned_inputs(m: int, n: int = 2048, k: int = 2048, seed: Seed = 0, full_range_b: bool = False,
                         device="cpu") -> Tuple:
    """Definition B's inputs with well-formed A: magnitude-pruned Gaussian weights (2 of each 4
    kept, p0 < p1). B from a clamped Gaussian, or at e4m3's full range (e4m3_full_range)."""
    gen = generator(seed)
    a_vals, a_meta = prune_2of4_fp4(torch.randn(m, k, generator=gen) * 2)
    b = e4m3_full_range((n, k), gen) if full_range_b else fp8_random((n, k), gen)
    return _to((a_vals, a_meta, b), device)


def sparse_random_inputs(m: int, n: int = 2048, k: int = 2048, seed: Seed = 0, pruned_meta: bool = False,
                         full_range_b: bool = False, device="cpu") -> Tuple:
    """Definition B's inputs with random a_vals (every byte) and a_meta either random too
    (repeated positions, high bits set) or `pruned_meta` (well-formed, as the large
    workloads have it)."""
    gen = generator(seed)
    a_vals = random_bytes((m, k // 4), gen)
    a_meta = prune_2of4_fp4(e2m1_grid((m, k), gen))[1] if pruned_meta else random_bytes((m, k // 4), gen)
    b = e4m3_full_range((n, k), gen) if full_range_b else fp8_random((n, k), gen)
    return _to((a_vals, a_meta, b), device)


def sparse_all_meta_bytes(n: int = 48, seed: Seed = 0, device="cpu") -> Tuple:
    """Definition B's inputs in which the 256 a_meta bytes each appear once (4 rows, k = 256)."""
    gen = generator(seed)
    meta = torch.arange(256, dtype=torch.int64).reshape(4, 64).to(torch.uint8).view(torch.int8)
    return _to((random_bytes((4, 64), gen), meta, fp8_random((n, 256), gen)), device)
