"""Path and tile of the sparse CUDA solution: one table, first matching rule wins, by rows m of A.

A tile (mt, nt) is sparse_mma.cu's few-rows kernel: 16 * mt rows of B a CTA, 8 * nt tokens a
CTA (the tokens split over blockIdx.y so that every round of them has its own CTAs). "dense" is
one launch writing A and B dense in bf16, then one cuBLAS GEMM. The "wgmma_sp_*" names are the
sparse tensor cores (sparse_wgmma_sp.cuh: a prep launch, then the sparse-MMA kernel on 128 or
256 tokens x 128 weight rows a tile, "_n64": 64 weight rows, "_k2": each tile's K split over a
cluster of 2 CTAs; n a multiple of 128). H200 figures in docs/kernels/sparse_gemm.md; the rules' own from
tools/time_sparse_paths.py and, for the few-rows tiles up to 128 rows,
tools/probe_sparse_mma.py --ms 17,24,32,48,64,96,128 --no-host (H200, 2026-12-04).
"""

TILES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 2), (2, 4), (2, 8), (4, 1), (4, 2), (4, 4))  # the kernel's instantiations
# name -> (m64 blocks a consumer warpgroup, weight rows a tile, K splits: a cluster of that many CTAs a tile)
SPARSE_MMA = {"wgmma_sp_128": (1, 128, 1), "wgmma_sp_256": (2, 128, 1), "wgmma_sp_128_k2": (1, 128, 2),
              "wgmma_sp_128_n64_k2": (1, 64, 2)}
PATHS = ("dense", *SPARSE_MMA)

# (most rows m, tile, why)
RULES = (
    (16, (1, 2), "128 CTAs of 16 B rows: B's 4 MiB streams through every SM, the tokens cost little"),
    (24, (1, 1), "128 CTAs of 16 B rows, 8 tokens a round over up to 3 rounds' CTAs: 6.0 / 6.2 us at 17 / 24 rows "
                 "against 7.3 for (4, 2)"),
    (32, (1, 2), "16 tokens a round, two rounds' CTAs: 6.8 us at 32 rows against 7.4 for (4, 2)"),
    (128, (4, 2), "64 B rows and 16 tokens a CTA: a token's decode is repeated once per 64 B rows, not 16 "
                  "(fastest from 48 rows: 7.5 us at 48, 7.7 at 64)"),
    (192, (4, 2), "one launch: the sparse MMAs on 64-weight-row split tiles are faster on the GPU (11.2 against "
                  "13.4 / 14.7 us at 129 / 192 rows, H200) but add more host time than that (host-inclusive "
                  "36.7 / 47.0 against 27.2 / 35.0 us): under FlashInfer-Bench's mean the one launch wins"),
    (None, "sparse_mma", "the sparse tensor cores: ahead of the dense path (its conversion launch and cuBLAS) "
                         "on the GPU at every m measured from 129 rows (11.2 against 12.2 us at 129, 11.2 against "
                         "12.7 at 256, 14.5 against 15.4 at 512, 18.6 against 20.5 at 1024, 96.4 against 108.5 at 8192) and "
                         "~20-90 us less host time (one C call, no cuBLAS call: 43.8 against 61.7 host-inclusive "
                         "at 256); ahead of the few-rows kernel from 193 rows (17.4 at 256)"),
)
# A persistent round of 256-token tiles against one of 128-token tiles (same CTA count):
# 28.9 against 18.6 us (m 2048 and 1024, one round each, prep included), H200.
ROUND_COST_256 = 1.55


def sparse_mma_tile(m: int, n: int, sms: int, k: int = 2048) -> str:
    """128-token tiles with K split over a cluster of 2 CTAs where the split tiles still fit one
    wave: a CTA there runs one tile and is bound by its SM's reads of the tile's operands from
    L2, which the split halves (m 256 / 384 / 512: 14.0 / 14.5 / 15.0 us against 16.1 / 15.9 /
    16.3 unsplit; m 768, two waves split: 23.5 against 17.1), and tiles of 64 weight rows cut
    by another third where their twice as many CTAs still fit (m 224 / 256: 11.1 / 11.2 against
    13.0 / 12.7 at 128 weight rows; m 320-512, two waves: 17.4-18.3 against 13.9-14.5; H200,
    2026-12-07, tools/time_sparse_paths.py). Otherwise the tile that needs
    fewer round-weighted waves of the persistent grid: 256
    tokens halve B's reads a token but cost ROUND_COST_256 a round, and a wave part-filled
    costs a whole round (m 3072 on 132 SMs: 3 rounds of 128 against 2 of 256)."""
    def rounds(bm):
        return -(-(-(-m // bm) * (n // 128)) // sms)
    if 2 * -(-m // 128) * (n // 64) <= sms and k % 256 == 0:
        return "wgmma_sp_128_n64_k2"
    if 2 * -(-m // 128) * (n // 128) <= sms and k % 256 == 0:
        return "wgmma_sp_128_k2"
    return "wgmma_sp_256" if ROUND_COST_256 * rounds(256) < rounds(128) else "wgmma_sp_128"


def choose(m: int, n: int, sms: int = 132, k: int = 2048):
    """(mt, nt) of the few-rows kernel, "dense" (n % 128 != 0), or a key of SPARSE_MMA; sms:
    the GPU's multiprocessors (132 on an H200 or H100 SXM)."""
    for most, tile, _ in RULES:
        if most is None or m <= most:
            if tile != "sparse_mma":
                return tile
            return "dense" if n % 128 else sparse_mma_tile(m, n, sms, k)
    raise AssertionError("RULES ends with a catch-all")
