"""The exact peers' CPU-runnable parts against the float64 oracles: the fp16 bmm and dense mm
peers end to end (torch runs fp16 matmuls on the CPU), the cuSPARSELt fp16 peer's A-densify
helper alone (cuSPARSELt needs a GPU)."""

from __future__ import annotations

import pytest
import torch

from definition_cases import grouped_cases, sparse_cases
from lowbit_gemm.numerics import e2m1_decode, sparse_a_dense, unpack_fp4
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.references import GROUPED, SPARSE
from lowbit_gemm.solutions import load_solution

def _nan(shape):
    return torch.full(shape, float("nan"), dtype=torch.bfloat16)


@pytest.mark.parametrize("case_id,inputs", grouped_cases(), ids=[c[0] for c in grouped_cases()])
def test_cublas_fp16_bmm_is_exact_on_its_fp16_operands(case_id, inputs):
    """The product and the mask are exact up to the output's rounding; A's rounding to fp16 is
    the one inexact step (tested below), which is why the report measures this peer too."""
    mod = load_solution(GROUPED, "peers", "cublas_fp16_bmm")
    g, max_m, _ = inputs[0].shape
    c = _nan((g, max_m, inputs[2].shape[1]))
    mod.run(*inputs, c)
    a16, b16, masked_m = mod.prepare(*inputs[:5])
    want = a16.double() @ b16.double().transpose(1, 2)
    rows = masked_m.long().clamp(0, max_m)
    want[torch.arange(max_m).view(1, -1) >= rows.view(-1, 1)] = 0.0
    check_accuracy(c, want, what=case_id)
    if case_id == "all_empty":
        check_accuracy(c, grouped_gemm_oracle(*inputs[:5]), what=case_id)


def test_cublas_fp16_bmm_prepare_dequantizes():
    mod = load_solution(GROUPED, "peers", "cublas_fp16_bmm")
    a_fp8, a_scale, b_fp4, b_scale, masked_m, _ = grouped_cases()[0][1]
    a16, b16, mm = mod.prepare(a_fp8, a_scale, b_fp4, b_scale, masked_m)
    assert a16.dtype == b16.dtype == torch.float16 and mm is masked_m
    a64 = a_fp8.double() * a_scale.double().repeat_interleave(128, dim=-1)
    assert torch.equal(a16, a64.to(torch.float16))  # A rounded once, to nearest
    b64 = e2m1_decode(unpack_fp4(b_fp4)).double() * b_scale.double().repeat_interleave(32, dim=-1)
    assert torch.equal(b16.double(), b64)  # E2M1 x UE8M0 is exact in fp16


@pytest.mark.parametrize("case_id,inputs", sparse_cases(), ids=[c[0] for c in sparse_cases()])
def test_cublas_fp16_dense_matches_oracle(case_id, inputs):
    mod = load_solution(SPARSE, "peers", "cublas_fp16_dense")
    c = _nan((inputs[0].shape[0], inputs[2].shape[0]))
    mod.run(*inputs, c)
    check_accuracy(c, sparse_gemm_oracle(*inputs), what=case_id)
    a16, b16 = mod.prepare(*inputs)
    assert torch.equal(b16.double(), inputs[2].double())  # e4m3 -> fp16 is exact


@pytest.mark.parametrize("case_id,inputs", sparse_cases(), ids=[c[0] for c in sparse_cases()])
def test_cusparselt_fp16_densify_is_exact_2to4(case_id, inputs):
    mod = load_solution(SPARSE, "peers", "cusparselt_fp16_2to4")
    a_vals, a_meta, _ = inputs
    m, g = a_vals.shape
    a16 = mod.dense_a_fp16(a_vals, a_meta)
    assert a16.dtype == torch.float16 and a16.shape == (mod.padded_rows(m), 4 * g)
    assert a16.shape[0] % mod.ROW_ALIGN == 0 and not a16[m:].any()
    assert torch.equal(a16[:m].double(), sparse_a_dense(a_vals, a_meta, torch.float64))
    assert ((a16.view(-1, g, 4) != 0).sum(-1) <= 2).all(), "every group of 4 is 2:4"
