"""Tile choice for grouped_fp16_kernel: one table, first matching rule wins.

Rows a group is expected to hold come from the definition's hint expected_m
(int(1.2 * expected rows)); without one, from the bucket size max_m.
"""

from typing import NamedTuple, Optional


class Tile(NamedTuple):
    BM: int          # tokens per tile
    BN: int          # weight rows per tile
    SWAP: bool       # weight rows on the MMA's M side
    num_warps: int
    num_stages: int
    GROUP_M: int = 8


# (most rows expected a group, tile, why)
RULES = (
    (16, Tile(16, 64, True, 4, 3), "decode: 16-token tiles on 64 weight rows fill 128 CTAs"),
    (32, Tile(32, 64, True, 4, 3), "decode: 32-token tiles on 64 weight rows"),
    (64, Tile(64, 128, True, 4, 3), "64 tokens: one warpgroup, weights on M"),
    (None, Tile(128, 128, False, 8, 3), "many rows: 128x128 tiles, two warpgroups"),
)


def choose(max_m: int, expected_m: Optional[int]) -> Tile:
    rows = max_m if expected_m is None or expected_m <= 0 else min(max_m, expected_m)
    for most, tile, _ in RULES:
        if most is None or rows <= most:
            return tile
    raise AssertionError("RULES ends with a catch-all")
