"""What a workload costs at least: FLOPs, minimum bytes moved, and the floors they imply.

A floor is the time below which no exact kernel can go on this GPU: max(min_bytes / copy
bandwidth, flops / compute rate), both ceilings measured on the same GPU at the start of the
run (bench.ceilings says which rate and why). The achieved fraction of a floor is floor / latency (1.0 = at the limit).

Byte counts follow the definitions: every input byte a kernel must read once and every output
byte it must write once, nothing more; rows beyond masked_m[g] are not read, but all of c is
written (rows >= masked_m[g] must be zeroed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

GROUPED = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
SPARSE = "sparse_gemm_fp4_fp8_n2048_k2048"

# Constant axes of the two definitions (also in definitions/gemm/*.json).
GROUPED_G, GROUPED_N, GROUPED_K = 4, 2048, 2048
SPARSE_N, SPARSE_K = 2048, 2048


@dataclass(frozen=True)
class Work:
    flops: float
    min_bytes: float
    # The size the plots and tables sort by: max_m for the grouped GEMM, m for the sparse one.
    size: int
    # Rows actually computed (sum of clamped masked_m), or m; None when unknown.
    rows: Optional[int] = None


@dataclass(frozen=True)
class Floors:
    memory_us: float
    compute_us: float

    @property
    def floor_us(self) -> float:
        return max(self.memory_us, self.compute_us)

    @property
    def bound(self) -> str:
        return "memory" if self.memory_us >= self.compute_us else "compute"


def grouped_work(max_m: int, masked_m: Optional[Sequence[int]] = None,
                 g: int = GROUPED_G, n: int = GROUPED_N, k: int = GROUPED_K) -> Work:
    """Grouped FP8 x FP4 GEMM. masked_m=None means every row is used (an upper bound)."""
    if masked_m is None:
        masked_m = [max_m] * g
    if len(masked_m) != g:
        raise ValueError(f"masked_m: expected {g} values, got {len(masked_m)}")
    rows = sum(min(max(int(v), 0), max_m) for v in masked_m)
    flops = 2.0 * rows * n * k
    b_fp4 = g * n * k // 2
    b_scale = g * n * (k // 32) * 4
    a_used = rows * k + rows * (k // 128) * 4
    c = g * max_m * n * 2
    masked = g * 4
    return Work(flops=flops, min_bytes=float(b_fp4 + b_scale + a_used + c + masked),
                size=max_m, rows=rows)


def sparse_work(m: int, n: int = SPARSE_N, k: int = SPARSE_K) -> Work:
    """2:4 sparse FP4 x dense FP8 GEMM; FLOPs counted dense (2*m*n*k) as the published figures do."""
    a = 2 * m * (k // 4)  # a_vals + a_meta, one byte each per group of 4
    b = n * k
    c = m * n * 2
    return Work(flops=2.0 * m * n * k, min_bytes=float(a + b + c), size=m, rows=m)


def work_for(definition: str, axes: dict, masked_m: Optional[Sequence[int]] = None) -> Work:
    """Work of one workload, from the definition name and the workload's axes."""
    if definition == GROUPED:
        return grouped_work(int(axes["max_m"]), masked_m)
    if definition == SPARSE:
        return sparse_work(int(axes["m"]))
    raise KeyError(f"no roofline model for definition {definition!r}")


def size_axis(definition: str) -> str:
    """Name of the axis a definition's workloads vary along (x axis of the plots)."""
    return {GROUPED: "max_m", SPARSE: "m"}[definition]


def floors(work: Work, copy_bytes_per_s: float, flops_per_s: float) -> Floors:
    if copy_bytes_per_s <= 0 or flops_per_s <= 0:
        raise ValueError("ceilings must be positive")
    return Floors(memory_us=work.min_bytes / copy_bytes_per_s * 1e6,
                  compute_us=work.flops / flops_per_s * 1e6)


def fraction_of(floor_us: float, latency_us: Optional[float]) -> Optional[float]:
    """Achieved fraction of a floor: floor / latency (None when there is no latency)."""
    if latency_us is None or latency_us <= 0:
        return None
    return floor_us / latency_us


def speedup(other_us: Optional[float], ours_us: Optional[float]) -> Optional[float]:
    """How many times faster `ours` is than `other` (other / ours); None if either is missing."""
    if other_us is None or ours_us is None or ours_us <= 0 or other_us <= 0:
        return None
    return other_us / ours_us
