"""Peer: cuSPARSELt FP8 2:4 sparse GEMM through torch._cslt_compress / torch._cslt_sparse_mm.

The definition's A is already 2:4 sparse along K, which is exactly the structure the sparse
tensor cores take; what cuSPARSELt cannot take is the definition's encoding (FP4 codes plus
2-bit positions), so A is rebuilt dense in e4m3 (exact) and compressed into cuSPARSELt's own
format. run() does that on every call: what a user pays when A changes each call, as it does
here. prepare()/run_prepared() split the compression off, for the report's column without
it (bench.timing times run_prepared with prepared operands rotating like any input).
Rows are padded to a multiple of 64 for cuSPARSELt's tile constraints. The algorithm is chosen
once per shape by cuSPARSELt's own search (torch._cslt_sparse_mm_search) inside prepare() and
kept in a module dict (a per-shape plan, not cached results). Self-contained: torch only.

Its E2M1 decode is its own on purpose: a peer stands for what a user would run without this
project, and shares no code with the kernels it is compared against.
"""

import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_CACHE = {}
_ALG = {}  # (padded rows, k, n, device) -> alg_id chosen by cuSPARSELt's search
ROW_ALIGN = 64


def _lut(device):
    if device not in _CACHE:
        _CACHE[device] = torch.tensor(_E2M1, dtype=torch.float32, device=device)
    return _CACHE[device]


def _dense_fp8(a_vals, a_meta):
    m, g = a_vals.shape
    rows = max(ROW_ALIGN, -(-m // ROW_ALIGN) * ROW_ALIGN)
    v = a_vals.view(torch.uint8).long()
    meta = a_meta.view(torch.uint8).long()
    x = _lut(a_vals.device)[torch.stack((v & 0xF, v >> 4), dim=-1)]
    pos = torch.stack((meta & 3, (meta >> 2) & 3), dim=-1)
    a = torch.zeros(rows, g, 4, dtype=torch.float32, device=a_vals.device)
    a[:m].scatter_add_(2, pos, x)  # a repeated position leaves one nonzero: still 2:4
    return a.view(rows, 4 * g).to(torch.float8_e4m3fn)


def prepare(a_vals, a_meta, b_fp8):
    """The one-time part: A compressed by cuSPARSELt, and the algorithm searched on a new shape.
    Returns the operands of run_prepared (alg_id as a 0-d int64 tensor)."""
    a8 = _dense_fp8(a_vals, a_meta)
    compressed = torch._cslt_compress(a8)
    key = (a8.shape[0], a8.shape[1], b_fp8.shape[0], str(a8.device))
    if key not in _ALG:
        _ALG[key] = int(torch._cslt_sparse_mm_search(compressed, b_fp8.t(), out_dtype=torch.bfloat16))
    return compressed, b_fp8, torch.tensor(_ALG[key])


def run_prepared(state, c):
    a_compressed, b_fp8, alg = state
    out = torch._cslt_sparse_mm(a_compressed, b_fp8.t(), out_dtype=torch.bfloat16, alg_id=int(alg))
    c.copy_(out[: c.shape[0]])
    return c


@torch.no_grad()
def run(a_vals, a_meta, b_fp8, c):
    return run_prepared(prepare(a_vals, a_meta, b_fp8), c)
