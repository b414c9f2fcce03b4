"""Peer: cuSPARSELt fp16 2:4 sparse GEMM with exact operands and a searched algorithm.

The sparse tensor cores take A's 2:4 structure directly; what cuSPARSELt cannot take is the
definition's encoding, so A is rebuilt dense in fp16 (exact: E2M1 values, a repeated position
summing two of them into one nonzero, which is still 2:4) with rows padded to a multiple of 64
for cuSPARSELt's tiles, and compressed into cuSPARSELt's format. B converts exactly to fp16.
cuSPARSELt accumulates fp16 products in fp32 and writes fp16 (torch takes no out_dtype for
fp16 inputs); the copy into c rounds that to bf16.

The algorithm is chosen once per shape by cuSPARSELt's own search
(torch._cslt_sparse_mm_search) inside prepare() and kept in a module dict: a per-shape plan,
not cached results. prepare() (decode, compress, search on a new shape) is the one-time part,
outside the timed region of the report's column without it; run() does everything per call.
Self-contained: torch only.

Its E2M1 decode is its own on purpose: a peer stands for what a user would run without this
project, and shares no code with the kernels it is compared against.
"""

import torch

# E2M1 code -> value; bit 3 is the sign (code 8 is -0.0).
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_LUT = {}
_ALG = {}  # (padded rows, k, n, device) -> alg_id chosen by cuSPARSELt's search
ROW_ALIGN = 64


def padded_rows(m):
    return max(ROW_ALIGN, -(-m // ROW_ALIGN) * ROW_ALIGN)


def dense_a_fp16(a_vals, a_meta):
    """Dense A [padded_rows(m), 4g] in fp16; rows past m are zero. A[i, 4j + p] sums the
    values whose position in group j is p."""
    m, g = a_vals.shape
    dev = a_vals.device
    if dev not in _LUT:
        _LUT[dev] = torch.tensor(_E2M1, dtype=torch.float16, device=dev)
    byte, meta = a_vals.view(torch.uint8).long(), a_meta.view(torch.uint8).long()
    pairs = _LUT[dev][torch.stack((byte & 0xF, byte >> 4), dim=-1)]
    where = torch.stack((meta & 3, (meta >> 2) & 3), dim=-1)
    dense = torch.zeros(padded_rows(m), g, 4, dtype=torch.float16, device=dev)
    dense[:m].scatter_add_(2, where, pairs)
    return dense.view(-1, 4 * g)


@torch.no_grad()
def prepare(a_vals, a_meta, b_fp8):
    """(A compressed by cuSPARSELt, B as fp16 [n, k], alg_id as a 0-d int64 tensor)."""
    a16 = dense_a_fp16(a_vals, a_meta)
    b16 = b_fp8.to(torch.float16)
    compressed = torch._cslt_compress(a16)
    key = (a16.shape[0], a16.shape[1], b16.shape[0], str(a16.device))
    if key not in _ALG:
        _ALG[key] = int(torch._cslt_sparse_mm_search(compressed, b16.t()))
    return compressed, b16, torch.tensor(_ALG[key])


@torch.no_grad()
def run_prepared(state, c):
    compressed, b16, alg = state
    out = torch._cslt_sparse_mm(compressed, b16.t(), alg_id=int(alg))
    c.copy_(out[: c.shape[0]])
    return c


def run(a_vals, a_meta, b_fp8, c):
    return run_prepared(prepare(a_vals, a_meta, b_fp8), c)
