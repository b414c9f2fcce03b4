"""How far a solution's output is from failing FlashInfer-Bench's check, element by element.

The harness (flashinfer_bench.bench.utils.compute_error_stats) fails an element when
|out - ref| > atol AND |out - ref| / (|ref| + 1e-8) > rtol, against the definition's own
float32 reference on the same inputs. Here:

- bad elements: how many elements that rule fails, with an output element that is not finite
  (where ref is) counted as bad, since the output is poisoned with NaN before the call and a
  NaN compares False in the harness's rule;
- worst margin: max over elements of |out - ref| / max(atol, rtol * (|ref| + 1e-8)). An element
  fails exactly when its margin exceeds 1.0, so a worst margin of 0.6 is a pass with room, 0.98
  a near miss, and anything above 1.0 a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

ATOL = 1e-2
RTOL = 1e-2
_EPS = 1e-8  # the harness's guard in |ref| + eps


@dataclass
class Exactness:
    bad_elements: int
    worst_margin: float
    elements: int


def exactness(out, ref, atol: float = ATOL, rtol: float = RTOL) -> Exactness:
    """Exactness of out against ref (same shape; any float dtypes; any device)."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"out: expected shape {tuple(ref.shape)}, got {tuple(out.shape)}")
    x, y = out.to(torch.float32), ref.to(torch.float32)
    err = (x - y).abs()
    bad = (err > atol) & (err / (y.abs() + _EPS) > rtol)
    unwritten = ~torch.isfinite(x) & torch.isfinite(y)
    bad |= unwritten
    margin = err / torch.clamp(rtol * (y.abs() + _EPS), min=atol)
    margin = torch.where(unwritten, torch.full_like(margin, float("inf")), margin)
    worst = float(margin.nan_to_num(nan=0.0, posinf=float("inf")).max()) if margin.numel() else 0.0
    return Exactness(int(bad.sum()), worst, int(x.numel()))


def poisoned(outputs):
    """Fill every output with NaN (in place) so that an element a solution leaves unwritten
    shows as bad; returns outputs."""
    for t in outputs:
        if t.is_floating_point():
            t.fill_(float("nan"))
    return outputs
