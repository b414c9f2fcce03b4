"""The public library functions call the leaderboard solutions' generic launchers."""

import pytest
import torch
import triton

import lowbit_gemm as lg
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.quantize import prune_2of4_fp4, quantize_act_fp8_per128, quantize_weight_fp4_per32


def test_grouped_gemm_allocates_and_masks():
    torch.manual_seed(0)
    a, a_scale = quantize_act_fp8_per128(torch.randn(2, 5, 256))
    b, b_scale = quantize_weight_fp4_per32(torch.randn(2, 64, 256) * 0.02)
    masked_m = torch.tensor([3, 9], dtype=torch.int32)
    c = lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, expected_m=4)
    assert c.shape == (2, 5, 64) and c.dtype == torch.bfloat16
    check_accuracy(c, grouped_gemm_oracle(a, a_scale, b, b_scale, masked_m))


@pytest.mark.skipif(tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 7),
                    reason="Triton 3.6's interpreter cannot run tl.dot_scaled")
def test_grouped_gemm_on_the_block_scaled_mma_kernel():
    torch.manual_seed(1)
    a, a_scale = quantize_act_fp8_per128(torch.randn(2, 5, 256))
    b, b_scale = quantize_weight_fp4_per32(torch.randn(2, 64, 256) * 0.02)
    masked_m = torch.tensor([5, -1], dtype=torch.int32)
    c = lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, block_scaled_mma=True)
    check_accuracy(c, grouped_gemm_oracle(a, a_scale, b, b_scale, masked_m))


def test_sparse_gemm_writes_into_out():
    torch.manual_seed(0)
    a_vals, a_meta = prune_2of4_fp4(torch.randn(7, 256) * 3)
    b = torch.randn(64, 256).clamp(-2, 2).to(torch.float8_e4m3fn)
    out = torch.full((7, 64), float("nan"), dtype=torch.bfloat16)
    assert lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, out=out) is out
    check_accuracy(out, sparse_gemm_oracle(a_vals, a_meta, b))
