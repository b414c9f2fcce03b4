"""Low-bit GEMM kernels for FlashInfer-Bench: shared numerics, quantizers, oracles, library API."""

from .ops import grouped_gemm_fp8_fp4_masked, sparse_gemm_fp4_fp8

__all__ = ["grouped_gemm_fp8_fp4_masked", "sparse_gemm_fp4_fp8"]
