"""Float64 oracles for both definitions, and the accuracy check every kernel must pass.

The oracles are written apart from the definitions' PyTorch references on purpose: they
decode E2M1 from its bit fields rather than a table, expand the 2:4 encoding with explicit
loops over the two slots, and accumulate in float64 on the CPU. A reference and an oracle
that agree were therefore not wrong in the same way.
"""

from __future__ import annotations

import torch

ATOL = 1e-2
RTOL = 1e-2
MAX_REL_NORM = 2e-3


# Not numerics.E2M1_VALUES on purpose: a decoder independent of the table everything else uses.
def _e2m1_from_bits(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes -> float64 from sign, exponent and mantissa bits."""
    c = codes.to(torch.int64)
    sign = torch.where(c & 8 != 0, -1.0, 1.0).to(torch.float64)
    exp = (c >> 1) & 3
    man = (c & 1).to(torch.float64)
    normal = torch.exp2((exp - 1).to(torch.float64)) * (1.0 + man / 2)
    return sign * torch.where(exp == 0, man / 2, normal)


def _nibbles(packed: torch.Tensor) -> torch.Tensor:
    b = packed.view(torch.uint8).to(torch.int64)
    return torch.stack((b & 0xF, b >> 4), dim=-1).flatten(-2)


def grouped_gemm_oracle(a_fp8, a_scale, b_fp4, b_scale, masked_m) -> torch.Tensor:
    """c[g, max_m, n] in float64; rows at or past clamp(masked_m[g], 0, max_m) are zero."""
    a = a_fp8.cpu().to(torch.float64)
    g, max_m, k = a.shape
    a = a * a_scale.cpu().to(torch.float64).repeat_interleave(128, dim=-1)[..., :k]
    b = _e2m1_from_bits(_nibbles(b_fp4.cpu()))
    b = b * b_scale.cpu().to(torch.float64).repeat_interleave(32, dim=-1)[..., :k]
    c = torch.zeros(g, max_m, b.shape[1], dtype=torch.float64)
    for grp in range(g):
        rows = min(max(int(masked_m[grp]), 0), max_m)
        c[grp, :rows] = a[grp, :rows] @ b[grp].T
    return c


def sparse_gemm_oracle(a_vals, a_meta, b_fp8) -> torch.Tensor:
    """c[m, n] in float64 from the 2:4 encoding; a repeated position sums both values."""
    v = a_vals.cpu().view(torch.uint8).to(torch.int64)
    meta = a_meta.cpu().view(torch.uint8).to(torch.int64)
    m, groups = v.shape
    dense = torch.zeros(m, groups, 4, dtype=torch.float64)
    for slot in range(2):
        value = _e2m1_from_bits((v >> (4 * slot)) & 0xF)
        position = (meta >> (2 * slot)) & 3
        dense.scatter_add_(2, position.unsqueeze(-1), value.unsqueeze(-1))
    return dense.reshape(m, 4 * groups) @ b_fp8.cpu().to(torch.float64).T


def accuracy_stats(out: torch.Tensor, ref64: torch.Tensor, atol: float = ATOL, rtol: float = RTOL) -> dict:
    """Errors of a bf16 output against a float64 oracle rounded to bf16, as the checks see them."""
    if out.shape != ref64.shape:
        raise ValueError(f"out: expected shape {tuple(ref64.shape)}, got {tuple(out.shape)}")
    got = out.detach().cpu().to(torch.float64)
    want = ref64.to(torch.bfloat16).to(torch.float64)
    err = (got - want).abs()
    bad = ~(err <= atol + rtol * want.abs())  # NaN compares False, so it counts as bad
    norm = want.norm().item()
    rel_norm = (got - want).norm().item() / norm if norm > 0 else (0.0 if got.norm() == 0 else float("inf"))
    return {
        "max_abs": err.max().item() if err.numel() else 0.0,
        "mismatches": int(bad.sum()),
        "numel": got.numel(),
        "rel_norm": rel_norm,
    }


def check_accuracy(out: torch.Tensor, ref64: torch.Tensor, atol: float = ATOL, rtol: float = RTOL,
                   max_rel_norm: float = MAX_REL_NORM, what: str = "output") -> dict:
    """Raise AssertionError unless every element is within atol + rtol*|ref| and the
    relative norm of the error is at most max_rel_norm; return the stats otherwise."""
    s = accuracy_stats(out, ref64, atol, rtol)
    if s["mismatches"] or not s["rel_norm"] <= max_rel_norm:
        raise AssertionError(
            f"{what}: {s['mismatches']}/{s['numel']} elements outside atol={atol} rtol={rtol} "
            f"(max abs err {s['max_abs']:.3g}); relative norm error {s['rel_norm']:.3g} "
            f"(limit {max_rel_norm})"
        )
    return s
