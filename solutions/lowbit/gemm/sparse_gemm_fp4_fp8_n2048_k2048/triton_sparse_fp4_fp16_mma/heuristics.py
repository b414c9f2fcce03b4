"""Tile choice for sparse_fp16_kernel: one table, first matching rule wins, by rows m of A."""

from typing import NamedTuple


class Tile(NamedTuple):
    BM: int          # rows of A per tile
    BN: int          # rows of B (columns of c) per tile
    SWAP: bool       # B's rows on the MMA's M side
    num_warps: int
    num_stages: int
    GROUP_M: int = 8


# (largest m, tile, why)
RULES = (
    (16, Tile(16, 64, True, 4, 4), "few rows: B streams through 32 CTAs"),
    (64, Tile(64, 64, True, 4, 4), "up to 64 rows"),
    (None, Tile(128, 128, False, 8, 3), "many rows: 128x128 tiles, two warpgroups"),
)


def choose(m: int) -> Tile:
    for most, tile, _ in RULES:
        if most is None or m <= most:
            return tile
    raise AssertionError("RULES ends with a catch-all")
