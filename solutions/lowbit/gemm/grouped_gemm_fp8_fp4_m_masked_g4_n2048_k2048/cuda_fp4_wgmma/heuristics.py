"""Tile of the grouped wgmma kernel (token rows x weight rows): one table, first matching rule wins.

32 x 64 is the tokens-as-N form: the weights are decoded straight into the MMA's register
operand by the threads that multiply them, four warpgroups a CTA splitting K, for groups of few
token rows. The others are the producer form: a persistent CTA an SM walks tiles of 128 token
rows by BN weight rows, and its producer warpgroup's decode of BN rows a stage is the critical
path; 64-wide tiles halve it where 128-wide ones would leave SMs idle. The predecoded form is
the producer form fed by a first pass that decodes each weight once into a workspace: the
producer only copies, where each weight row is read by enough tiles. Rows are counted from
expected_m when the caller gives it (a hint: a wrong one costs time, never correctness), else
from max_m.
"""

# (most rows a group, most 128 x 128 tiles holding rows, (BM, BN), why)
RULES = (
    (32, None, (32, 64), "few rows: no producer handoff, the decode spread over 16 warps"),
    (None, 66, (128, 64), "128 x 64 tiles still fit one wave of 132 SMs and halve the decode a stage"),
    (512, None, (128, 128), "enough tiles: each decoded B stage feeds 128 token rows and 128 columns"),
    (None, None, (128, 128, "predecoded"), "each weight row read by 5+ tiles: decoding it once in a first pass "
                                           "(~10 us) pays back; the consumers' A latency then sets the pace"),
)


def tile_shape(g: int, rows: int, n: int) -> tuple:
    tiles = g * -(-rows // 128) * (n // 128)
    for most_rows, most_tiles, tile, _ in RULES:
        if (most_rows is None or rows <= most_rows) and (most_tiles is None or tiles <= most_tiles):
            return tile
    raise AssertionError("RULES ends with a catch-all")
