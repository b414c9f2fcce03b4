"""Tile width of the grouped wgmma kernel: one table, first matching rule wins.

A persistent CTA an SM walks tiles of 128 token rows by BN weight rows, all of K. Its producer
warpgroup decodes BN rows of FP4 a stage; where the tiles that hold rows are too few to fill
the SMs, that decode is the critical path, and 64-wide tiles halve it while doubling the tiles.
Rows are counted from expected_m when the caller gives it (a hint: a wrong one costs time,
never correctness), else from max_m.
"""

# (most 128-wide tiles holding rows, BN, why)
RULES = (
    (66, 64, "64-wide tiles still fit one wave of 132 SMs and halve the decode a stage"),
    (None, 128, "enough tiles: 128-wide ones decode each B stage once for 128 token rows and 128 columns"),
)


def tile_width(g: int, rows: int, n: int) -> int:
    tiles = g * -(-rows // 128) * (n // 128)
    for most, bn, _ in RULES:
        if most is None or tiles <= most:
            return bn
    raise AssertionError("RULES ends with a catch-all")
