"""Tile of the grouped kernel (token rows x weight rows): one table, first matching rule wins.

8 x 32 and 16 x 32 are the mma.sync tokens-as-N form and 32 x 64 the wgmma one: the weights are
decoded straight into the MMA's register operand by the threads that multiply them, the warps of
a CTA splitting K, for groups of few token rows. The others are the producer form: a persistent
CTA an SM walks tiles of 128 token rows by BN weight rows, and its producer warpgroup's decode of
BN rows a stage is the critical path; 64-wide tiles halve it where 128-wide ones would leave SMs
idle. The predecoded form is the producer form fed by a first pass that decodes each weight once
into a workspace: the producer only copies, where each weight row is read by enough tiles. Rows
are counted from expected_m when the caller gives it (a hint: a wrong one costs time, never
correctness), else from max_m. The figures are GPU time on an H200 (graph replay, L2 cold,
tools/time_wgmma_variants.py, 2026-12-04).
"""

# (most max_m, most rows a group, most 128 x 128 tiles holding rows, (BM, BN), why)
RULES = (
    (8, None, None, (8, 32), "one round of 8 tokens a CTA, 256 CTAs on the weights' loads: 7.8 us at max_m 1 "
                             "(16 x 32: 9.5, 32 x 64: 12.4)"),
    (None, 16, None, (16, 32), "a round of 16 tokens: 10.2 us at max_m 16 (8 x 32: 13.8, 32 x 64: 12.8)"),
    (None, 32, None, (32, 64), "17-32 rows: one wgmma m64n32 a step, K split over 4 warpgroups: 13.0 us "
                               "(16 x 32: 16.2, its second round a second wave)"),
    (None, None, 66, (128, 64), "128 x 64 tiles still fit one wave of 132 SMs and halve the decode a stage"),
    (None, 512, None, (128, 128), "enough tiles: each decoded B stage feeds 128 token rows and 128 columns"),
    (None, None, None, (128, 128, "predecoded"), "each weight row read by 5+ tiles: decoding it once in a "
                                                 "first pass (~10 us) pays back; the consumers' A latency then "
                                                 "sets the pace"),
)


def tile_shape(g: int, rows: int, n: int, max_m: int) -> tuple:
    """The first rule whose limits hold for max_m, rows (the hint's count, at most max_m) and the
    128 x 128 tiles those rows fill."""
    tiles = g * -(-rows // 128) * (n // 128)
    for most_max_m, most_rows, most_tiles, tile, _ in RULES:
        if ((most_max_m is None or max_m <= most_max_m) and (most_rows is None or rows <= most_rows)
                and (most_tiles is None or tiles <= most_tiles)):
            return tile
    raise AssertionError("RULES ends with a catch-all")
