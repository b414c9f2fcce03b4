"""The dense path's GEMM: c = a16 @ b16^T on cuBLAS with fp32 sums, for solutions that first write
both operands dense in bf16.

cuBLAS accumulates in fp32; a reduction in bf16 (which torch allows by default for split-K)
would round partial sums, so it is disallowed for the call and the caller's setting restored.

Copied byte-identically into every lowbit solution with such a path (solutions are packed
self-contained); tests/test_copies.py fails when the copies drift.
"""

import torch


def mm_fp32_sums(a16, b16, c):
    """torch.mm(a16, b16.t(), out=c) without bf16 split-K reductions."""
    flags = torch.backends.cuda.matmul
    allowed = flags.allow_bf16_reduced_precision_reduction
    flags.allow_bf16_reduced_precision_reduction = False
    try:
        torch.mm(a16, b16.t(), out=c)
    finally:
        flags.allow_bf16_reduced_precision_reduction = allowed
