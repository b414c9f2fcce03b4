"""Tile and grid choice, apart from the kernels.

Inputs: max_m (the bucket size), expected_m (the caller's hint of rows per group, may be None),
n, and the device's compute capability. masked_m itself stays on the device: tiles past it are
skipped inside the kernel, so the choice here only sizes the token tile.
"""

from dataclasses import dataclass


# decode_b_kernel as the heuristic launches it: weight rows, adjacent 128-K blocks and warps
# per program. Eighth session, H200 GPU us against the 64 rows x 1 block x 4 warps of before
# (run 37, the harness's workloads and hints): max_m 4096 with ~870 rows 70.1 -> 69.1, ~170
# rows 48.8 -> 47.7, 2048 81.5 -> 80.7, 512 full 36.4 -> 36.0, 128 17.7 -> 16.9, one group
# of four with rows 12.9 -> 13.0. 64 rows x 4 blocks on 8 warps (run 36, harness run R) was
# 0.4-1.0 us faster on the many-row shapes but 12.9 -> 16.9 with one group: only that
# group's programs work, and 4x fewer of them left one per SM.
DECODE_ROWS, DECODE_KB, DECODE_WARPS = 16, 4, 4
# Pass 2 (the one-tile kernel) as a programmatic dependent launch on sm_90+ (see
# choose_config). Off in the fifth session (the sparse solution's same pairing was suspected
# of one harness failure, which `gpu_sparse_gemm.py pdlcheck` did not reproduce); on again
# since run 23 (sixth session), checked against the oracle in every run since.
PDL = True
# Few rows per group in a bucket of at most 32 rows or of at least 1024: one pass (B decoded
# inside the GEMM loop, no decode pass) instead of two; see choose_config. On sm_90 these
# buckets go to fused_ws first (WS), so the one-pass kernel serves them elsewhere only. False
# restores the sixth session's two passes everywhere (for A/B runs).
ONE_PASS = True
# fused_ws_kernel wherever at most ws_max_rows(max_m) rows are expected per group, sm_90 only
# (wgmma): since the twentieth session (runs 90-93) it walks only the tiles with rows and
# zero-fills the rest apart; before, buckets of 1-128 rows (from 8 until run 89). See
# choose_config. False keeps the Triton kernels everywhere (for A/B runs).
WS = True
# (smallest bucket, most rows expected per group), largest bucket first: one 64-token tile a
# group in a bucket of any size (run 93); past 64 rows 128-token tiles (WS_WIDE_TILE): one a
# group with 10% to spare from 129 rows (116), any hint in 65-128-row buckets (no group can
# pass one tile there), up to two from 2048 and 4096 with 10% to spare (runs 101-103 and 107;
# 65-2047-row buckets since run 130, measured up to 1024; from 512 rows with at most 96
# before), where the two passes' decode pass and zero tiles cost more than decoding a group's
# B tiles again per token tile.
WS_MAX_ROWS = ((4096, 232), (2048, 192), (129, 116), (65, 128), (1, 64))
WS_WIDE_TILE = 128


def ws_max_rows(max_m: int) -> int:
    """Most rows expected per group for which fused_ws_kernel takes a bucket of max_m rows."""
    return next(rows for bucket, rows in WS_MAX_ROWS if max_m >= bucket)


# SMs assumed when the caller does not say (the H200's).
DEFAULT_SMS = 132


def three_ctas_pay(tiles: int, num_sms: int) -> bool:
    """Whether a third CTA per SM (a register cap of 168 on 64x128 tiles) pays: when it
    takes fewer waves of tiles than two CTAs per SM. Run 23 (H200): max_m 1024 / 2048 / 4096
    (768 / 1536 / 1024 tiles) 3.7 / 9.0 / 9.7 us faster with the cap; max_m 512 full (512
    tiles, two waves either way, the third CTA's wave a quarter full) 3.5 us slower."""
    return -(-tiles // (3 * num_sms)) < -(-tiles // (2 * num_sms))


@dataclass(frozen=True)
class Config:
    BM: int          # token tile (rows of A)
    BN: int          # weight tile (rows of B, columns of C)
    swap: bool       # True: weight rows on the MMA's M side (C^T = Bdec @ A^T)
    num_warps: int
    num_stages: int
    m_split: int = 0       # GEMM programs per weight tile (0: from the hint, see grid_split)
    use_asm: bool = True   # PTX prmt decode (ignored where inline PTX can't run)
    fold2d: bool = True    # fold the scales on a [BN, 4] tile (True) or on 4 [BN] vectors
    ablate: int = 0        # timing experiments only (1: no decode, 2: no scales); wrong results
    maxnreg: int = 0       # register cap per thread (0: compiler's choice)
    predec: bool = False   # two passes: decode B to e4m3 first (decode_b_kernel), then the GEMM
    split_k: int = 1       # K slices per tile (fp32 partials summed by the last program)
    decode_rows: int = 64  # decode_b_kernel (predec): weight rows per program
    decode_warps: int = 4  # decode_b_kernel: warps per program
    decode_kb: int = 1     # decode_b_kernel: 128-K blocks per program (adjacent along K)
    tiles: bool = False    # predec only: pass 2 is grouped_tile_gemm_kernel (one output tile
                           # per program, zeros included) instead of grouped_gemm_kernel
    tma: bool = False      # tiles only: A and decoded B through TMA tensor descriptors (sm_90+)
    pdl: bool = False      # tiles only: pass 2 as a programmatic dependent launch of pass 1 (sm_90+)
    kperm: bool = False    # one pass, swap: B decoded in the prmt lookup's own k order (no
                           # shuffle before wgmma), A loaded in that order
    unroll: int = 1        # kperm: 128-K blocks per loop iteration (2: two independent chains)
    row_ref: bool = False  # tiles, BN 64 or 128: decode each weight row against one multiplier,
                           # and the GEMM's lean loop that applies it after the loop (_row_scaled_tile)
    order: int = 0         # launch order of the programs: 0 as the grid lays them out; 1 every
                           # group's GEMM programs (tiles with rows) first, then the zeros
                           # (kernel._tile_of_program for the tile kernel)
    zero_rows: int = 16    # one pass (not tiles): rows of c per zero program (a power of two)
    ws: bool = False       # fused_ws_kernel (Gluon, sm_90): the warp-specialised one-launch kernel
                           # for few rows a group; its tiles and stages follow from max_m, k and
                           # BM, the most tokens a tile (64 or 128: fused_ws.token_tile,
                           # fused_ws.BW, fused_ws.PLAN); BN records BW, num_stages is not read

    def as_kwargs(self):
        return dict(BM=self.BM, BN=self.BN, SWAP=self.swap, USE_ASM=self.use_asm, FOLD2D=self.fold2d, ABLATE=self.ablate,
                    PREDEC=self.predec, SPLIT_K=self.split_k, KPERM=self.kperm, UNROLL=self.unroll,
                    ORDER=self.order, ZR=self.zero_rows,
                    num_warps=self.num_warps, num_stages=self.num_stages,
                    **({"maxnreg": self.maxnreg} if self.maxnreg else {}))

    def tile_kwargs(self):
        """grouped_tile_gemm_kernel's constexprs and compile options."""
        return dict(BM=self.BM, BN=self.BN, TMA=self.tma, USE_ASM=self.use_asm, PLAIN=self.ablate != 0,
                    PDL=self.pdl, ROW_REF=self.row_ref, ORDER=self.order, num_warps=self.num_warps, num_stages=self.num_stages,
                    **({"launch_pdl": True} if self.pdl else {}),
                    **({"maxnreg": self.maxnreg} if self.maxnreg else {}))


def _decode_kb(k) -> int:
    """DECODE_KB, or the largest power of two below it dividing k / 128 (k None: 2048)."""
    kb, dkb = (2048 if k is None else k) // 128, DECODE_KB
    while kb % dkb:
        dkb //= 2
    return dkb


def _expected_rows(max_m: int, expected_m) -> int:
    """Rows per group to plan for: the hint clamped to [1, max_m], or max_m without one."""
    return max_m if expected_m is None else max(1, min(int(expected_m), max_m))


def choose_config(max_m: int, expected_m, n: int, capability=(9, 0), num_sms: int = DEFAULT_SMS,
                  g: int = 4, one_pass: bool = None, k: int = None, ws: bool = False) -> Config:
    """Pick the tile config. expected_m is a hint of rows per group (None: assume max_m);
    k (None: the definition's 2048) only decides how K splits: in two for the one-pass
    kernel, in blocks per program for the decode pass (_decode_kb). ws: the caller can run
    fused_ws_kernel (Gluon present, a CUDA device, TMA-aligned inputs, n a multiple of 64).

    Twenty-fifth session (runs 129-130, H200 GPU us, fused_ws with 128-token tiles / with 64
    / the two passes, the groups' rows 0.8-1.1 x the hint): buckets of 65-1024 rows with
    65-116 rows expected gain 7.5-8.8 us on 128-token tiles: 96 rows with ~80 12.4 / 16.7 / 21.1,
    128 with ~90 12.8 / 17.2 / 21.5, 160 with ~100 12.6 / 17.1 / 21.2, 256 with ~76 and ~116
    13.2 / 17.5 / 21.5 and 13.1 / 17.5 / 21.5, 512 and 1024 with ~116 13.4 / 17.9 / 22.2 and
    15.1 / 19.4 / 23.9; the harness's 256 mixed (0, 256, 0, 100 behind 106) 14.7 / 18.8 / 18.9,
    four full groups of 256 behind 96 21.3 / 29.8 / 31.2 (the two passes' tile width follows
    the hint too), one group of 128 behind 70 12.7 / 11.8 / 12.7. The class's cost: a hint
    that hides one group holding every row, as the harness's one group of 256 behind 76, 14.6
    / 12.6 / 13.1 (64 tiles with rows on 132 SMs), and below 65 rows expected 64-token tiles
    stay. Hints of 123 as 200 mixed (21.3 / 23.4 / 21.6) are past the class.
    Twenty-second session (runs 101-103, H200 GPU us, fused_ws with 128-token tiles / with 64
    / the two passes, each group's rows 0.8-1.1 x the hint): hints of 80 in buckets of 512,
    1024, 2048 and 4096 rows 15.1 / 18.4 / 21.7, 17.3 / 20.4 / 23.2, 20.9 / 22.9 / 27.7, 29.4 /
    30.1 / 37.5; at 2048 hints of 128, 160 and 192 28.5 / 28.7 / 29.5, 29.8 / 29.0 / 31.1, 30.1
    / 34.6 / 35.5; at 4096 34.9 / 35.8 / 39.1, 35.5 / 36.6 / 41.6, 38.6 / 41.4 / 44.5, and the
    harness's ~170 rows behind a hint of 230 38.0 / 40.8 / 44.2. Not taken: hints of 128-160
    at 512 and 1024 rows (two rounds of 128-token tiles where a group passes 128 rows: 24.3 /
    21.9 at 512), of 256 anywhere (2 of 4 groups past 256 rows: 45.0 / 43.3 at 4096), and, until
    run 130, of 65-128 below 512 rows, where the harness's groups pass their hints by far (256
    with one group of 256 behind 76: 16.3 / 13.1; 200 mixed behind 123: 24.5 / 21.4; though
    256 with ~115 rows a group 14.4 / 21.1). A hint that understates the rows costs 128-token tiles
    less than 64-token ones (1024 with ~390 rows behind 128: 44.4 / 52.2 / 45.6; 4096 with
    ~690 behind 256: 74.6 / 89.7 / 61.5).
    Thirteenth to twentieth sessions (runs 56-57, 65, 89, 90-93): on sm_90, buckets with at
    most 64 rows expected per group take fused_ws_kernel, one warp-specialised launch
    (cp.async loader warps, decoder warps, one wgmma consumer; each B tile decoded once per
    token tile with rows, never written back). Buckets past 128 rows since run 93, when it
    walked only the tiles with rows and zero-filled the rest apart; H200 GPU us, run() (two
    passes, or the one-pass kernel at 4096) / fused_ws: 256-row bucket with ~28 rows a group
    20.2 / 11.3, ~54 rows 21.2 / 11.3, 192-row bucket with ~56 rows 21.1 / 11.1, 4096 with ~24
    rows 31.2 / 25.5, all 256 empty 7.3 / 7.2; and where the hint understates the rows, one
    group of 256 behind a hint of 76 (two passes) 13.0 / 13.3. With 65-128 rows expected below
    512 rows it was not taken on 64-token tiles (128-token tiles take them since run 130):
    96-128 rows a group 21.3 / 19.6, but 256 with one group of 256 and one of 100 18.4 / 19.6,
    200 mixed 21.2 / 25.9, 512 mixed 25.4 / 38.7 (each B tile decoded again for every token
    tile). A hint far below the rows costs time here (max_m / 64 token tiles per
    group, each decoding B again), as in the one-pass kernel, not correctness.
    Run 89 (H200 GPU us, run() with the one-pass kernel / fused_ws, after the kernel's gains
    of runs 68-81): max_m 1 10.4 / 8.9, 2 11.0 / 9.2, 4 11.2 / 9.1, 32 with ~11 rows
    (16-token one-pass tiles) 15.4 / 9.6, so buckets under 8 rows and 17-32-row buckets with
    at most 16 rows expected, which the one-pass kernel kept until then, go to fused_ws too.
    Run 65c (its 4-warp decoder, 2 loader warps, 8 stages), H200 GPU us, run() before /
    fused_ws: max_m 16 with ~10 rows (the one-pass kernel) 11.5 / 10.7, 32 12.1 / 11.6, 64
    with ~20 rows 13.6 / 13.2, 128 with ~25 rows 14.4 / 13.9; run 65d: max_m 8 with ~6 rows
    11.4 (the one-pass kernel) / 10.5, max_m 1 10.0-10.4 / 10.3, so buckets under 8 rows (not
    measured between 1 and 8) kept the one-pass kernel.
    Before run 65: H200 GPU us, the Triton kernels / fused_ws (run 57d):
    max_m 32 with ~24 rows 15.0 / 11.9, 48 with 12-48 rows 20.4 / 13.2, 64 with ~20 rows
    16.5 / 13.4, 128 with ~25 rows 16.7 / 14.0, the harness's wide scales at 128 47.1 / 19.1
    (four K = 32 wgmmas per block that does not fold, against the exact loop). Host time
    until run() returns: fused_ws encodes no TMA descriptor, 13.1-14.1 us at 32-64 rows, the
    one-pass kernel 13.9 at 16 (run 57d; at 32 the split one-pass kernel's memset made it
    44.2 against fused_ws's 31.4 with one descriptor, run 57b). Not at max_m 1 (GPU 10.2 /
    11.0); at 16 fused_ws was 0.3 us faster (11.5 / 11.2) with equal host time in run 57d.
    Not where a group is expected past 64 rows (a second token tile decodes B again: above).

    From measurements on an H200 (docs/kernels/grouped_gemm.md, runs 4-17 and harness runs
    G-H, 2026-11-30): most shapes are fastest with two passes (decode B to e4m3 once per
    call, then a plain pipelined FP8 GEMM), 1.2-1.5x faster than the sixth session's
    decoding inside the GEMM loop (for few rows, see the seventh session below). Pass 2 is
    grouped_tile_gemm_kernel from max_m 33: one output tile per program over all of max_m (tiles
    past masked_m only store zeros), so a hint that understates the rows costs nothing (run
    16: max_m 256 with one full group and hint 1, 34.2 us through the hint-sized
    grouped_gemm_kernel, 18.3 here). One warpgroup per tile; the tile width follows the hint:
    - from 256 rows: 64x128, 3 stages (runs 13-14: 37.4 us at max_m 512 full against 46.8
      with 128x128 and two warpgroups; two or three CTAs per SM overlap one CTA's fp32
      promotion with another's MMA), its registers (210 with row_ref, Triton 3.6) capped at
      168 (3 CTAs per SM instead of 2) when the hint's tiles then take fewer waves on
      num_sms SMs (three_ctas_pay);
    - up to 32 rows with max_m <= 512: 64x32, 6 stages (twice the CTAs of 64x64 for the few
      rows; beyond max_m 512 its zero tiles cost more: 49.4 against 44.2 us at max_m 4096),
      with pointer loads (TMA's per-launch host cost buys no GPU time there, run 20);
    - otherwise 64x64, 4 stages;
    - buckets of at most 32 rows (max_m <= 32) took grouped_gemm_kernel's 64x32 walking
      tiles (harness runs G and H, below); since the seventh session they take one pass,
      and the walking tiles only with one_pass=False.
    grouped_gemm_kernel (weight tiles walking the token tiles, hint-sized grid) is otherwise
    selectable through Config(tiles=False). The same choice is made for sm_100 (untested).

    Seventh session (runs 26-32): up to 32 rows (the hint) in a bucket of at most 32 rows or
    of at least 1024 take one pass instead: grouped_gemm_kernel with the weights on the MMA's
    M side and B decoded in the prmt lookup's k order (kperm), 64 weight rows by 16 or 32
    tokens, 3 stages; with 17-32 rows in a small bucket, K is split over two programs per
    tile (twice the programs, half the serial K chain each). GPU us, two passes / one pass
    (runs 31-32): max_m 1 15.2 / 14.1, 16 with 8 rows 17.6 / 14.4, 32 with ~20 rows 17.8 /
    16.1 (split; 21.2 without), 1024 with ~20 rows 24.6 / 24.4, 2048 32.1 / 28.8, 4096 42.4 /
    36.5. One launch instead of two also halves the host time (enqueue 14-27 against 31-73
    us); the split's zeroed tickets add ~13 us of it back, so it is taken only where it
    saves 5 us of GPU time. Kept on two passes:
    - buckets of 33-128 rows, where split one pass was 1-1.5 us faster (run 32) but failed
      the tolerance on 3 of 1 M outputs with b_scale powers of two spread over 2^-20..2^19
      (FP8 blocks that fold, summed across blocks 2^30 apart) that two passes' 32-wide
      tiles passed, and took 51.8 against 24.8 us with a hint of 21 for 128 rows;
    - split K from 1024 rows: its fp32 partials are sized by max_m's token tiles (134 MB
      per call at max_m 2048), not worth 3-4 us.
    The one-pass kernel's programs cover the hint's token tiles and walk the rest: a hint
    far below the rows costs time there (not correctness), which the two-pass kernel's
    one-program-per-tile grid does not. one_pass=False (or ONE_PASS) gives the two passes.
    Ninth session (run 40): where K is not split, the one-pass loop takes two 128-K blocks
    per iteration (unroll=2; k / 128 must be even).
    """
    rows = _expected_rows(max_m, expected_m)
    sm90 = capability[0] >= 9
    maxnreg = 0
    if ws and WS and tuple(capability) == (9, 0) and rows <= ws_max_rows(max_m):
        return Config(BM=64 if rows <= 64 else WS_WIDE_TILE, BN=64, swap=True, num_warps=4, num_stages=8, ws=True)
    if (ONE_PASS if one_pass is None else one_pass) and rows <= 32 and (max_m <= 32 or max_m >= 1024):
        small_bucket = max_m <= 32
        bm = 16 if small_bucket and rows <= 16 else 32
        even = k is None or (k // 128) % 2 == 0
        split = small_bucket and bm == 32 and even
        # Unsplit, two 128-K blocks per loop iteration (ninth session, run 40, H200 GPU us):
        # max_m 1 11.6 -> 10.0, 16 12.3 -> 11.2, 4096 with ~20 rows 36.1 -> 35.5; with the
        # split (255 registers a thread) 15.1 -> 15.6 at max_m 32, so not there.
        unroll = 2 if even and not split else 1
        # In a bucket of 1024 rows or more, every group's GEMM programs are launched ahead of
        # all zero programs (twelfth session, run 48, H200 GPU us: max_m 4096 with ~20 rows
        # 34.2 -> 29.3, 2048 26.1 -> 23.9); in a small one that cost 1.3 us at max_m 1.
        return Config(BM=bm, BN=64, swap=True, num_warps=4, num_stages=3, kperm=True, split_k=2 if split else 1,
                      unroll=unroll, order=0 if small_bucket else 1)
    # The decode pass as measured (eighth session, runs 36-37), for both two-pass kernels.
    decode = dict(decode_rows=DECODE_ROWS, decode_kb=_decode_kb(k), decode_warps=DECODE_WARPS)
    if max_m <= 32:  # reached with one_pass=False only
        # A bucket of at most 32 rows: grouped_gemm_kernel's 64x32 tiles with 8 stages took
        # 17.3 / 18.0 / 17.8 us at max_m 1 / 16 / 32 in harness run G, the one-tile kernel
        # 21.5 / 20.4 / 18.4 in run H (same GPU, graph replay).
        return Config(BM=64, BN=32, swap=False, num_warps=4, num_stages=8, predec=True, **decode)
    if rows >= 256:
        bn, stages = 128, 3
        if three_ctas_pay(-(-rows // 64) * -(-n // bn) * g, num_sms):
            maxnreg = 168
    elif rows <= 32 and max_m <= 512:
        bn, stages = 32, 6
    else:
        bn, stages = 64, 4
    # The dependent launch: 0.4-4.1 us faster on nearly every shape in the `--validate` runs
    # of the fifth and sixth sessions (runs 21-23); slower in two: all groups empty (+1.2 us:
    # nothing to overlap) and max_m 128 with 40-128 rows (+1.9..2.2 us, not understood).
    # TMA except on the 64x32 tiles: Triton 3.6's launcher encodes the two descriptors at every
    # launch, 10-13 us of host time on the H200 host, which FlashInfer-Bench's timing adds to
    # the GPU time. On 64x32 tiles pointer loads cost no GPU time (run 20: 0.2-0.7 us faster at
    # max_m 64-256); on 64x64 tiles they cost 6-13 us (harness run I: max_m 200 33.2 against
    # 22.3, max_m 4096 e = 192 61.3 against 48.7), on 64x128 3-8 us (run 20).
    # 128-wide tiles decode each weight row against one multiplier and apply it after the
    # GEMM's loop (row_ref; ninth session, run 42, H200 GPU us with the same register caps):
    # max_m 512 full 35.2 -> 33.4, ~260 rows 27.4 -> 25.7, 1024 46.3 -> 43.8, 2048 80.8 ->
    # 74.5, 4096 with ~870 rows 68.5 -> 64.0. On the 64-wide tiles it moved -1.2..+0.4 (run
    # 43), so they keep the per-block decode.
    # The tiles with rows ahead of the zero tiles where they are few in a large bucket (run 48,
    # H200 GPU us: max_m 4096 with ~170 rows 48.0 -> 44.9); where most tiles have rows the
    # grid's order, which spreads the zero stores among them, was 4-6 us faster (1024 with
    # ~900 rows, 2048 with 75%, 4096 with ~1050), and 0.5-1 us at 128-256 rows.
    order = 1 if max_m >= 1024 and 8 * rows <= max_m else 0
    return Config(BM=64, BN=bn, swap=False, num_warps=4, num_stages=stages, predec=True, tiles=True, **decode,
                  tma=sm90 and bn >= 64, pdl=sm90 and PDL, maxnreg=maxnreg if sm90 else 0, row_ref=bn == 128,
                  order=order)

ZN = 256   # zero programs (one pass): columns per store


def grid_split(config: Config, max_m: int, expected_m) -> int:
    """GEMM programs per weight tile: enough to cover the expected token tiles, never more
    than the token tiles of max_m."""
    if config.m_split:
        return max(1, config.m_split)
    num_m_max = -(-max_m // config.BM)
    want = -(-_expected_rows(max_m, expected_m) // config.BM)
    return max(1, min(num_m_max, want))
