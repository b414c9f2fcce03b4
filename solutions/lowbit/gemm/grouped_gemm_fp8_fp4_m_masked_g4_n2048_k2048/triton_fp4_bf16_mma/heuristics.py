"""Tile choice for the grouped GEMM's second pass (kernel.gemm_bf16_kernel): one table, first
matching rule wins, by the rows a group is expected to hold.

Rows expected come from the definition's hint expected_m (int(1.2 * expected rows)), capped
at the bucket size max_m; without a hint, from max_m. Tiles measured on an H200
(docs/kernels/grouped_gemm.md has the figures).
"""

from typing import NamedTuple, Optional


class Tile(NamedTuple):
    BM: int          # tokens per tile
    BN: int          # weight rows per tile
    num_warps: int
    num_stages: int
    GROUP_M: int = 8


DECODE_ROWS = 64     # weight rows per program of the first pass (kernel.decode_b_kernel)
DECODE_WARPS = 4

# (most rows expected a group, tile, why)
RULES = (
    (64, Tile(32, 64, 4, 3), "decode-like: the first pass dominates; small tiles fill the SMs"),
    (512, Tile(64, 256, 8, 3), "up to 512 rows: 64x256 tiles were the fastest measured at 512 full"),
    (None, Tile(64, 128, 4, 4), "more rows: 64x128, 4 stages, the fastest measured at 2048 ~75 %"),
)


def choose(max_m: int, expected_m: Optional[int]) -> Tile:
    rows = max_m if expected_m is None or expected_m <= 0 else min(max_m, expected_m)
    for most, tile, _ in RULES:
        if most is None or rows <= most:
            return tile
    raise AssertionError("RULES ends with a catch-all")
