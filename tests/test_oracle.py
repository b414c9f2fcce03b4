"""The float64 oracles against hand-built cases and the numerics module's own decoders."""

import pytest
import torch

from lowbit_gemm import numerics as nx
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.testing import fp8_random, sparse_random_inputs


def test_grouped_oracle_masks_rows_and_applies_scales():
    g, max_m, n, k = 3, 5, 4, 128
    a = fp8_random((g, max_m, k), seed=0)
    a_scale = torch.randn(g, max_m, 1)
    codes = torch.randint(0, 16, (g, n, k))
    b_scale = torch.randn(g, n, 4)
    masked = torch.tensor([-3, 2, 99], dtype=torch.int32)
    c = grouped_gemm_oracle(a, a_scale, nx.pack_fp4(codes), b_scale, masked)
    A = a.double() * a_scale.double()
    B = nx.e2m1_decode(codes).double() * b_scale.double().repeat_interleave(32, -1)
    assert (c[0] == 0).all() and (c[1, 2:] == 0).all()
    torch.testing.assert_close(c[1, :2], A[1, :2] @ B[1].T)
    torch.testing.assert_close(c[2], A[2] @ B[2].T)


def test_sparse_oracle_matches_dense_expansion():
    vals, meta, b = sparse_random_inputs(7, n=5, k=64)
    want = nx.sparse_a_dense(vals, meta, torch.float64) @ b.double().T
    torch.testing.assert_close(sparse_gemm_oracle(vals, meta, b), want)


def test_check_accuracy_rejects_nan_and_large_error():
    ref = torch.randn(8, 8, dtype=torch.float64)
    check_accuracy(ref.to(torch.bfloat16), ref)
    bad = ref.to(torch.bfloat16).clone()
    bad[0, 0] = float("nan")
    with pytest.raises(AssertionError, match="1/64 elements"):
        check_accuracy(bad, ref)
    with pytest.raises(AssertionError, match="relative norm"):
        check_accuracy((ref * 1.004).to(torch.bfloat16), ref, atol=1, rtol=1)
