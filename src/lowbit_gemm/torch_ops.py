"""The library functions as torch custom operators, for models that torch.compile traces:
``torch.ops.lowbit.grouped_gemm_fp8_fp4_masked`` and ``torch.ops.lowbit.sparse_gemm_fp4_fp8``.

Each calls lowbit_gemm.ops (same kernels, same "auto" choice) and returns a new bf16 tensor;
its fake implementation gives the output's shape, dtype and device, so that a compiled graph
holds the call as one opaque node instead of breaking around it. The dispatcher adds host time
to each call; a caller that does not compile calls lowbit_gemm.ops directly. Registered when
lowbit_gemm is imported.
"""

from typing import Optional  # no postponed annotations: custom_op reads these to make the schema

import torch

from . import ops


@torch.library.custom_op("lowbit::grouped_gemm_fp8_fp4_masked", mutates_args=())
def grouped_gemm_fp8_fp4_masked(a_fp8: torch.Tensor, a_scale: torch.Tensor, b_fp4: torch.Tensor,
                                b_scale: torch.Tensor, masked_m: torch.Tensor, expected_m: Optional[int] = None,
                                kernel: str = "auto") -> torch.Tensor:
    """lowbit_gemm.ops.grouped_gemm_fp8_fp4_masked: c [g, max_m, n] bf16, rows past masked_m zero."""
    return ops.grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, kernel=kernel)


@grouped_gemm_fp8_fp4_masked.register_fake
def _(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m=None, kernel="auto"):
    return a_fp8.new_empty((a_fp8.shape[0], a_fp8.shape[1], b_fp4.shape[1]), dtype=torch.bfloat16)


@torch.library.custom_op("lowbit::sparse_gemm_fp4_fp8", mutates_args=())
def sparse_gemm_fp4_fp8(a_vals: torch.Tensor, a_meta: torch.Tensor, b_fp8: torch.Tensor,
                        kernel: str = "auto") -> torch.Tensor:
    """lowbit_gemm.ops.sparse_gemm_fp4_fp8: c [m, n] bf16 from A's 2:4 encoding and B in e4m3."""
    return ops.sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, kernel=kernel)


@sparse_gemm_fp4_fp8.register_fake
def _(a_vals, a_meta, b_fp8, kernel="auto"):
    return b_fp8.new_empty((a_vals.shape[0], b_fp8.shape[0]), dtype=torch.bfloat16)
