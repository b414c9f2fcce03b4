"""Tile of the grouped kernel (token rows x weight rows): one table, first matching rule wins.

8 x 32 and 16 x 32 are the mma.sync tokens-as-N form and 32 x 64 the wgmma one: the weights are
decoded straight into the MMA's register operand by the threads that multiply them, the warps of
a CTA splitting K, for groups of few token rows. 128 x 64 and 128 x 128 are the producer form: a
persistent CTA an SM walks tiles of 128 token rows by BN weight rows, and its producer
warpgroup's decode of BN rows a stage is the critical path; 64-wide tiles halve it where
128-wide ones would leave SMs idle. 256 x 128 is the register-weights form: a first pass converts
the tokens to fp16 once a call, and the weights are decoded into the MMA's register operand by
the threads that multiply them. 128 x 256 is the prepared form: a first pass converts both
operands to fp16 stage images once a call, and the GEMM copies them in whole, where each weight
row is read by enough tiles to repay the pass; where n is no multiple of 256, the register-weights
form serves those groups too. A rule applies only where n is a multiple of its tile's weight
rows; the last has 128 of them, so every n that is a multiple of 128 gets a tile. Rows are
counted from expected_m when the caller gives it (a hint: a wrong one costs time, never
correctness), else from max_m.
The figures are GPU time on an H200 (graph replay, L2 cold, tools/time_wgmma_variants.py,
2026-12-04), those marked H100 on an H100 80GB HBM3 (same tool, the forms compared in one run, 2026-12-07;
the register-weights and prepared forms' own figures of the code as built).
"""

# (most max_m, most rows a group, most 128 x 128 tiles holding rows, (BM, BN[, form]), why)
RULES = (
    (8, None, None, (8, 32), "one round of 8 tokens a CTA, 256 CTAs on the weights' loads: 7.8 us at max_m 1 "
                             "(16 x 32: 9.5, 32 x 64: 12.4)"),
    (None, 16, None, (16, 32), "a round of 16 tokens: 10.2 us at max_m 16 (8 x 32: 13.8, 32 x 64: 12.8)"),
    (None, 32, None, (32, 64), "17-32 rows: one wgmma m64n32 a step, K split over 4 warpgroups: 13.0 us "
                               "(16 x 32: 16.2, its second round a second wave)"),
    (None, None, 66, (128, 64), "128 x 64 tiles still fit one wave of 132 SMs and halve the decode a stage"),
    (None, 256, None, (128, 128), "each decoded B stage feeds 128 token rows and 128 columns; the prepared "
                                  "form's first pass does not pay back: ~76 rows 33.2 us (prepared 44.1), "
                                  "4096 ~170 42.7 (prepared 65.5)"),
    (None, 1024, None, (256, 128, "register"), "tokens fp16 once a call, weights decoded into the MMA's registers "
                                               "under the MMAs: H100 512 ~260 39.5 us, 512 full 41.0, 1024 ~75 % "
                                               "72.1, 4096 ~870 89.7 (prepared 48.5, 50.5, 76.9, 95.7; 128 x 128 at "
                                               "512 full, measured apart: 62.2)"),
    (None, None, None, (128, 256, "prepared"), "both operands fp16 once a call, then copied in whole stages: "
                                               "2048 ~75 % 131.6 us (predecoded 157.0; H100: register-weights "
                                               "137.9 against 128.2, persistent)"),
    (None, None, None, (256, 128, "register"), "n no multiple of 256: the register-weights form, which beat the "
                                               "predecoded form it replaces (H100, 2048 ~75 %: n 1152 82.5 against "
                                               "110.7 us, n 1920 116.0 against 170.2)"),
)


def tile_shape(g: int, rows: int, n: int, max_m: int) -> tuple:
    """The first rule whose limits hold for max_m, rows (the hint's count, at most max_m) and the
    128 x 128 tiles those rows fill, and whose tile's weight rows divide n."""
    tiles = g * -(-rows // 128) * (n // 128)
    for most_max_m, most_rows, most_tiles, tile, _ in RULES:
        if ((most_max_m is None or max_m <= most_max_m) and (most_rows is None or rows <= most_rows)
                and (most_tiles is None or tiles <= most_tiles) and n % tile[1] == 0):
            return tile
    raise AssertionError("RULES ends with a catch-all")
