"""fp32 -> bf16 rounding for the kernels' stores.

Copied byte-identically into every lowbit solution (solutions are packed self-contained);
tests/test_copies.py fails when the copies drift.
"""

import triton
import triton.language as tl


@triton.jit
def to_bf16(x, INTERPRETER: tl.constexpr):
    """fp32 -> bf16, round to nearest even. The Triton interpreter truncates in its cast (and
    ignores fp_downcast_rounding), so it rounds with integer ops there (finite inputs); on
    GPUs the cast is used."""
    if INTERPRETER:
        bits = x.to(tl.int32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)
