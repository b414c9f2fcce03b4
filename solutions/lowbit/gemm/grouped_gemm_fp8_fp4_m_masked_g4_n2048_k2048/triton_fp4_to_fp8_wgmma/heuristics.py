"""Tile and grid choice, apart from the kernels.

Inputs: max_m (the bucket size), expected_m (the caller's hint of rows per group, may be None),
n, and the device's compute capability. masked_m itself stays on the device: tiles past it are
skipped inside the kernel, so the choice here only sizes the token tile.
"""

from dataclasses import dataclass


DECODE_ROWS = 64   # decode_b_kernel: weight rows per program (one 128-K block each)


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
    decode_rows: int = DECODE_ROWS  # decode_b_kernel (predec): weight rows per program
    decode_warps: int = 4  # decode_b_kernel: warps per program
    tiles: bool = False    # predec only: pass 2 is grouped_tile_gemm_kernel (one output tile
                           # per program, zeros included) instead of grouped_gemm_kernel
    tma: bool = False      # tiles only: A and decoded B through TMA tensor descriptors (sm_90+)

    def as_kwargs(self):
        return dict(BM=self.BM, BN=self.BN, SWAP=self.swap, USE_ASM=self.use_asm, FOLD2D=self.fold2d, ABLATE=self.ablate,
                    PREDEC=self.predec, SPLIT_K=self.split_k,
                    num_warps=self.num_warps, num_stages=self.num_stages,
                    **({"maxnreg": self.maxnreg} if self.maxnreg else {}))

    def tile_kwargs(self):
        """grouped_tile_gemm_kernel's constexprs and compile options."""
        return dict(BM=self.BM, BN=self.BN, TMA=self.tma, USE_ASM=self.use_asm, PLAIN=self.ablate != 0,
                    num_warps=self.num_warps, num_stages=self.num_stages,
                    **({"maxnreg": self.maxnreg} if self.maxnreg else {}))


def _expected_rows(max_m: int, expected_m) -> int:
    """Rows per group to plan for: the hint clamped to [1, max_m], or max_m without one."""
    return max_m if expected_m is None else max(1, min(int(expected_m), max_m))


def choose_config(max_m: int, expected_m, n: int, capability=(9, 0)) -> Config:
    """Pick the tile config. expected_m is a hint of rows per group (None: assume max_m).

    From measurements on an H200 (docs/kernels/grouped_gemm.md, runs 4-14, 2026-11-30): every
    shape is fastest with two passes (decode B to e4m3 once per call, then a plain pipelined
    FP8 GEMM), 1.2-1.5x faster than decoding inside the GEMM loop (the fused path, still
    selectable through Config for experiments and tests). Few rows (hint up to 32): one
    warpgroup on 64x32 tiles with 8 stages; up to 255: 64x64 with 4 stages, both in
    grouped_gemm_kernel (weight tiles walking the token tiles, more CTAs to hide each K
    step's serial wgmma wait). From 256 rows: grouped_tile_gemm_kernel, one 64x128 tile per
    program, one warpgroup, 3 stages, TMA loads on sm_90+ (runs 13-14: 37.4 us at max_m 512
    full against 46.8, 114.5 at 2048 full against 153.3; two or three CTAs per SM overlap
    one CTA's fp32 promotion with another's MMA, where 128x128 tiles with two warpgroups
    run one CTA per SM). The same choice is made for sm_100 (untested).
    """
    rows = _expected_rows(max_m, expected_m)
    if rows <= 32:
        # Decode-like: narrower weight tiles (twice the CTAs) and 8 stages measured 1-2.6 us
        # faster (run 8: 18.2 against 20.0 us at max_m 64), but 5 us slower at ~96 rows.
        return Config(BM=64, BN=32, swap=False, num_warps=4, num_stages=8, predec=True)
    if rows < 256:
        return Config(BM=64, BN=64, swap=False, num_warps=4, num_stages=4, predec=True)
    return Config(BM=64, BN=128, swap=False, num_warps=4, num_stages=3, predec=True, tiles=True,
                  tma=capability[0] >= 9)

ZR, ZN = 16, 256   # zero programs: rows each, columns per store


def grid_split(config: Config, max_m: int, expected_m) -> int:
    """GEMM programs per weight tile: enough to cover the expected token tiles, never more
    than the token tiles of max_m."""
    if config.m_split:
        return max(1, config.m_split)
    num_m_max = -(-max_m // config.BM)
    want = -(-_expected_rows(max_m, expected_m) // config.BM)
    return max(1, min(num_m_max, want))
