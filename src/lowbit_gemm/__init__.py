"""Low-bit GEMM kernels for FlashInfer-Bench: shared numerics, quantizers, oracles, library API
(lowbit_gemm.ops; the same functions as torch custom operators, torch.ops.lowbit.*, in torch_ops)."""

from . import torch_ops  # noqa: F401  (registers torch.ops.lowbit.*)
from .ops import grouped_gemm_fp8_fp4_masked, sparse_gemm_fp4_fp8

__all__ = ["grouped_gemm_fp8_fp4_masked", "sparse_gemm_fp4_fp8"]
