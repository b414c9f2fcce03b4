"""Path and tile of the sparse CUDA solution: one table, first matching rule wins, by rows m of A.

A tile (mt, nt) is sparse_mma.cu's few-rows kernel: 16 * mt rows of B a CTA, 8 * nt tokens a
CTA (the tokens split over blockIdx.y so that every round of them has its own CTAs). "dense" is
the many-rows path: one launch writes A and B dense in bf16, then one cuBLAS GEMM. H200 figures
in docs/kernels/sparse_gemm.md.
"""

TILES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 2), (2, 4), (2, 8), (4, 1), (4, 2), (4, 4))  # the kernel's instantiations

# (most rows m, tile, why)
RULES = (
    (16, (1, 2), "128 CTAs of 16 B rows: B's 4 MiB streams through every SM, the tokens cost little"),
    (128, (4, 2), "64 B rows and 16 tokens a CTA: a token's decode is repeated once per 64 B rows, not 16"),
    (256, (4, 2), "slower on the GPU than the dense path (17-21 against 11 us) but one launch, where the "
                  "dense path's two launches, two allocations and cuBLAS call add ~50 us of host time"),
    (None, "dense", "past 256 rows cuBLAS on dense bf16 operands, fp32 accumulation"),
)


def choose(m: int):
    """(mt, nt) of the few-rows kernel, or "dense"."""
    for most, tile, _ in RULES:
        if most is None or m <= most:
            return tile
    raise AssertionError("RULES ends with a catch-all")
