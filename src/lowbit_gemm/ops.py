"""Public library functions: the project's Triton kernels, callable without the harness.

Each allocates the output and calls the generic launcher of the solution the leaderboard
entry uses, so the library and the entry can never drift apart.
"""

from __future__ import annotations

import torch

from .solutions import load_solution

GROUPED_DEFINITION = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
GROUPED_SOLUTION = ("lowbit", "triton_fp4_exact_mma")
# The B200 entry (tl.dot_scaled on Blackwell's block-scaled MMA; not run on a B200, emulated
# by Triton elsewhere): docs/kernels/grouped_gemm_b200.md.
GROUPED_B200_SOLUTION = ("lowbit", "triton_fp4_dot_scaled")
SPARSE_DEFINITION = "sparse_gemm_fp4_fp8_n2048_k2048"
SPARSE_SOLUTION = ("lowbit", "triton_sparse_fp4_exact")


def grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m=None,
                                out: torch.Tensor | None = None, block_scaled_mma: bool = False) -> torch.Tensor:
    """c[g, max_m, n] (bf16): per group, A_g[:masked_m[g]] @ B_g.T, other rows zero.

    Sizes are read from the tensors (k a multiple of 128); see the definition for the formats.
    block_scaled_mma: the B200 solution's kernel (tl.dot_scaled) instead of the measured one.
    """
    g, max_m, _ = a_fp8.shape
    if out is None:
        out = torch.empty(g, max_m, b_fp4.shape[1], dtype=torch.bfloat16, device=a_fp8.device)
    kernel = load_solution(GROUPED_DEFINITION, *(GROUPED_B200_SOLUTION if block_scaled_mma else GROUPED_SOLUTION))
    kernel.grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, out, expected_m=expected_m)
    return out


def sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, out: torch.Tensor | None = None) -> torch.Tensor:
    """c[m, n] (bf16) = dense(A) @ B.T with A in the 2:4 FP4 encoding and B in FP8 e4m3."""
    if out is None:
        out = torch.empty(a_vals.shape[0], b_fp8.shape[0], dtype=torch.bfloat16, device=b_fp8.device)
    kernel = load_solution(SPARSE_DEFINITION, *SPARSE_SOLUTION)
    kernel.sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, out)
    return out
