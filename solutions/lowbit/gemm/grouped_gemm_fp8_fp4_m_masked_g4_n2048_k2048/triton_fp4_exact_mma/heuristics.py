"""Form and tile choice for the grouped GEMM: one table, first matching rule wins, by the rows
a group is expected to hold. One pass (one_pass.grouped_one_pass_kernel) for the fewest rows,
two passes (kernel.decode_b_kernel, then kernel.gemm_bf16_kernel) otherwise.

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
    one_pass: bool = False   # one_pass.grouped_one_pass_kernel instead of the two passes
    SWAP: bool = False       # (one pass) weight rows on the MMA's M side


DECODE_ROWS = 64     # weight rows per program of the first pass (kernel.decode_b_kernel)
DECODE_WARPS = 4

# (most rows expected a group, tile, why)
RULES = (
    (16, Tile(16, 32, 2, 1, one_pass=True), "one pass, 16-token tiles on 2 warps: 24.2 us at max_m 1 (two passes 37.7)"),
    (32, Tile(32, 64, 4, 1, one_pass=True, SWAP=True),
     "one pass, weights on M: 43.0 us at max_m 128 with 8-32 rows (two passes 56.3), even at 4096 (71.6 / 71.8)"),
    (64, Tile(32, 64, 4, 3), "two passes: the first pass dominates; small tiles fill the SMs"),
    (512, Tile(64, 256, 8, 3), "up to 512 rows: 64x256 tiles were the fastest measured at 512 full"),
    (None, Tile(64, 128, 4, 4), "more rows: 64x128, 4 stages, the fastest measured at 2048 ~75 %"),
)


def choose(max_m: int, expected_m: Optional[int]) -> Tile:
    rows = max_m if expected_m is None or expected_m <= 0 else min(max_m, expected_m)
    for most, tile, _ in RULES:
        if most is None or rows <= most:
            return tile
    raise AssertionError("RULES ends with a catch-all")
