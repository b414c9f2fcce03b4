"""Published figures from another GPU, kept apart from every ratio.

These numbers were measured by someone else on an NVIDIA B200, with the FlashInfer-Bench
protocol (mean latency). They appear in the report in their own column, labelled with their
hardware, and never enter a ratio with numbers measured here: a B200 and an H200 differ in
bandwidth, clocks and FP4 support, so such a ratio would say nothing about the kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from .roofline import GROUPED, SPARSE

SOURCE = "FlashInfer-Bench baselines"
OBSERVED = "2026-06-06"


@dataclass(frozen=True)
class Published:
    definition: str
    axes: Dict[str, int]  # the workload axes the figure was measured at
    solution: str
    latency_us: float
    hardware: str
    statistic: str = "mean"
    source: str = SOURCE
    observed: str = OBSERVED

    @property
    def label(self) -> str:
        return f"{self.solution} ({self.hardware}, {self.source}, observed {self.observed})"


PUBLISHED: List[Published] = [
    Published(GROUPED, {"max_m": 512}, "deepgemm_m_grouped_fp8_fp4_masked_g4_n2048_k2048",
              147.3, "B200"),
    Published(SPARSE, {"m": 64}, "cuda_sparse_fp4_fp8_naive_n2048_k2048", 889.9, "B200"),
]


def published_for(definition: str) -> List[Published]:
    return [p for p in PUBLISHED if p.definition == definition]


def matches(p: Published, axes: Dict[str, int]) -> bool:
    return all(int(axes.get(k, -1)) == v for k, v in p.axes.items())
