"""M-masked grouped FP8 x FP4 GEMM (definition grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048) on
Blackwell's block-scaled MMA, through ``tl.dot_scaled`` (kernel.py says how).

For the B200 leaderboard, beside ``triton_fp4_exact_mma`` (the measured solution, exact on
bf16 MMAs, for Hopper, which has no FP4 tensor core). **Not run on a B200**: its kernels
compile for sm_100a to the block-scaled MMA under Triton 3.6 and 3.9, its results are checked
under the Triton interpreter and, through Triton's emulation of ``tl.dot_scaled``, on an
H200; its tiles are a guess. The accumulation precision of Blackwell's block-scaled MMA is
unmeasured here: Hopper's FP8 MMA keeps about 14 bits, which fails FlashInfer-Bench's
elementwise check on activations with outlier channels, and this kernel may do the same.

Entry points:
- ``run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c)``: the definition's entry
  (g=4, n=2048, k=2048), destination passing: writes c and returns it.
- ``grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None,
  tile=None)``: any g >= 0, max_m >= 0, n >= 1 and k a positive multiple of 128.

Self-contained: only torch and triton, plus this folder's modules.
"""

import os
from typing import NamedTuple

import torch

from .checks import check_grouped_inputs
from .kernel import grouped_dot_scaled_kernel

DEF_G, DEF_N, DEF_K = 4, 2048, 2048
# The interpreter's fp32->bf16 cast truncates; the kernel rounds by hand there.
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class Tile(NamedTuple):
    BM: int          # tokens per tile
    BN: int          # weight rows per tile
    swap: bool       # weight rows on the MMA's M side (few tokens)
    num_warps: int
    num_stages: int


def choose_tile(max_m, expected_m, capability) -> Tile:
    """Not measured (no B200 here): on sm_100, the block-scaled MMA's M side is 128 rows, so
    up to 64 expected rows per group the weights take it (BN = 128) and the tokens the N side
    (16-64); more rows take 128 x 128 tiles. Elsewhere dot_scaled is emulated, and only 64 x 64
    tiles in the plain orientation compiled for sm_90 under Triton 3.6 (the check's GPU)."""
    rows = max_m if expected_m is None else max(1, min(int(expected_m), max_m))
    if capability[0] != 10:
        return Tile(64, 64, False, 4, 3)
    if rows <= 64:
        return Tile(max(16, 1 << (rows - 1).bit_length()), 128, True, 4, 3)
    return Tile(128, 128, False, 4, 3)


def grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None, tile: Tile = None):
    """c[g, :rows] = (A_g * a_scale)[:rows] @ (E2M1(B_g) * b_scale)^T in bf16, c[g, rows:] = 0,
    rows = clamp(masked_m[g], 0, max_m); masked_m is read on the device (no host sync).
    a_fp8 float8_e4m3fn [g, max_m, k]; a_scale float32 [g, max_m, k/128]; b_fp4 int8/uint8
    [g, n, k/2] (low nibble = even k); b_scale float32 [g, n, k/32]; masked_m int32/int64 [g];
    c bfloat16 [g, max_m, n] (written in full). expected_m: a tile-choice hint only."""
    g, max_m, n, k = check_grouped_inputs(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m)
    dev = a_fp8.device
    if g == 0 or max_m == 0:
        return c
    if tile is None:
        cap = torch.cuda.get_device_capability(dev) if dev.type == "cuda" else (10, 0)
        tile = choose_tile(max_m, expected_m, cap)
    grid = (-(-max_m // tile.BM) * -(-n // tile.BN), g)
    grouped_dot_scaled_kernel[grid](a_fp8, a_scale, b_fp4, b_scale, masked_m, c, max_m, n, k,
                                    BM=tile.BM, BN=tile.BN, SWAP=tile.swap, MANUAL_RNE=_INTERPRET,
                                    num_warps=tile.num_warps, num_stages=tile.num_stages)
    return c


def run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c):
    """Definition entry point (g=4, n=2048, k=2048); writes c and returns it."""
    if not isinstance(a_fp8, torch.Tensor) or a_fp8.dim() != 3 or a_fp8.shape[0] != DEF_G or a_fp8.shape[2] != DEF_K:
        raise ValueError(f"a_fp8: expected shape [{DEF_G}, max_m, {DEF_K}], got "
                         f"{tuple(a_fp8.shape) if isinstance(a_fp8, torch.Tensor) else type(a_fp8).__name__}")
    if not isinstance(b_fp4, torch.Tensor) or tuple(b_fp4.shape) != (DEF_G, DEF_N, DEF_K // 2):
        raise ValueError(f"b_fp4: expected shape ({DEF_G}, {DEF_N}, {DEF_K // 2}), got "
                         f"{tuple(b_fp4.shape) if isinstance(b_fp4, torch.Tensor) else type(b_fp4).__name__}")
    if isinstance(expected_m, torch.Tensor):
        # A 0-d tensor hint would need a host read; only take it when it lives on the host.
        expected_m = int(expected_m) if expected_m.device.type == "cpu" else None
    return grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m)
