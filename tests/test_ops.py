"""The public library functions call the leaderboard solutions' generic launchers."""

import pytest
import torch
import triton

import lowbit_gemm as lg
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.testing import grouped_inputs, nan_output, sparse_pruned_inputs


def test_grouped_gemm_allocates_and_masks():
    a, a_scale, b, b_scale, masked_m, _ = grouped_inputs(5, [3, 9], n=64, k=256, weight_std=0.02)
    c = lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, expected_m=4)
    assert c.shape == (2, 5, 64) and c.dtype == torch.bfloat16
    check_accuracy(c, grouped_gemm_oracle(a, a_scale, b, b_scale, masked_m))


@pytest.mark.skipif(tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 7),
                    reason="Triton 3.6's interpreter cannot run tl.dot_scaled")
def test_grouped_gemm_on_the_block_scaled_mma_kernel():
    a, a_scale, b, b_scale, masked_m, _ = grouped_inputs(5, [5, -1], n=64, k=256, seed=1, weight_std=0.02)
    c = lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, block_scaled_mma=True)
    check_accuracy(c, grouped_gemm_oracle(a, a_scale, b, b_scale, masked_m))


def test_sparse_gemm_writes_into_out():
    a_vals, a_meta, b = sparse_pruned_inputs(7, n=64, k=256)
    out = nan_output((7, 64))
    assert lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, out=out) is out
    check_accuracy(out, sparse_gemm_oracle(a_vals, a_meta, b))
