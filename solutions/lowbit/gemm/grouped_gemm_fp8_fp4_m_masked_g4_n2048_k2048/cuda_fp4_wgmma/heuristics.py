"""Tile of the grouped wgmma kernel (token rows x weight rows): one table, first matching rule wins.

A persistent CTA an SM walks tiles of BM token rows by BN weight rows, all of K. Its producer
warpgroup decodes BN rows of FP4 a stage, and that decode is the critical path of a stage: 64-wide
tiles halve it, and 256-row tiles feed each decoded stage to twice the MMA. Rows are counted from
expected_m when the caller gives it (a hint: a wrong one costs time, never correctness), else
from max_m.
"""

# (most 128 x 128 tiles holding rows, (BM, BN), why)
RULES = (
    (66, (128, 64), "128 x 64 tiles still fit one wave of 132 SMs and halve the decode a stage"),
    (None, (256, 64), "enough tiles: each decoded 64-row B stage feeds 256 token rows"),
)


def tile_shape(g: int, rows: int, n: int) -> tuple:
    tiles = g * -(-rows // 128) * (n // 128)
    for most, tile, _ in RULES:
        if most is None or tiles <= most:
            return tile
    raise AssertionError("RULES ends with a catch-all")
