"""Path and tile choice for the sparse GEMM: one table, first matching rule wins, by rows m of A.

Up to ONE_PASS_ROWS rows: one launch of kernel.sparse_fp16_kernel (B streams through fp16
MMAs, A decoded in registers). Beyond: kernel.dense_operands_kernel writes A and B dense in
bf16 and cuBLAS multiplies them, faster than the one-pass kernel from 129 rows on (H200
figures in docs/kernels/sparse_gemm.md).
"""

from typing import NamedTuple


class Tile(NamedTuple):
    BM: int          # rows of A per tile
    BN: int          # rows of B (columns of c) per tile
    SWAP: bool       # B's rows on the MMA's M side
    num_warps: int
    num_stages: int
    GROUP_M: int = 8


ONE_PASS_ROWS = 64
DENSE_ROWS = 16      # rows of A or B per program of kernel.dense_operands_kernel
DENSE_CHUNK = 256    # K columns per program (many small programs: the pass is latency-bound)

# (largest m, tile, why)
RULES = (
    (ONE_PASS_ROWS, Tile(16, 64, True, 4, 4), "B's rows on the MMA's M side, 16-row A tiles: 11.8-12.0 us at m 1-64"),
)


def choose(m: int):
    """The one-pass kernel's tile, or None for the dense-operands path."""
    for most, tile, _ in RULES:
        if m <= most:
            return tile
    return None
