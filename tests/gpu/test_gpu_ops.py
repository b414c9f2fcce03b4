"""The library functions (lowbit_gemm.ops) on a CUDA GPU: the kernel "auto" takes for the
tensors (the CUDA solutions on Hopper, the Triton ones elsewhere), into a NaN-poisoned output,
checked against the float64 oracle, at sizes off the definitions' own."""

import pytest
import torch

from gpu_solutions import needs_cuda
import lowbit_gemm as lg
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.testing import grouped_inputs, nan_output, sparse_pruned_inputs

pytestmark = needs_cuda
pytest.importorskip("triton")


def test_grouped_auto_is_exact():
    a, a_scale, b, b_scale, masked_m, _ = grouped_inputs(64, [64, 40, -3, 33], n=256, k=512, outliers=True,
                                                         device="cuda")
    out = nan_output((4, 64, 256), device="cuda")
    assert lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, expected_m=40, out=out) is out
    torch.cuda.synchronize()
    check_accuracy(out.cpu(), grouped_gemm_oracle(*(t.cpu() for t in (a, a_scale, b, b_scale, masked_m))))


@pytest.mark.parametrize("m", [5, 300])  # the few-rows kernel and the sparse MMAs on Hopper
def test_sparse_auto_is_exact(m):
    a_vals, a_meta, b = sparse_pruned_inputs(m, n=256, k=512, device="cuda")
    out = nan_output((m, 256), device="cuda")
    assert lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, out=out) is out
    torch.cuda.synchronize()
    check_accuracy(out.cpu(), sparse_gemm_oracle(a_vals.cpu(), a_meta.cpu(), b.cpu()))


def test_custom_operators_in_a_compiled_function_are_exact():
    a, a_scale, b, b_scale, masked_m, _ = grouped_inputs(64, [64, 40, -3, 33], n=256, k=512, device="cuda")
    a_vals, a_meta, b8 = sparse_pruned_inputs(300, n=256, k=512, device="cuda")

    def layer():
        return (torch.ops.lowbit.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, 40),
                torch.ops.lowbit.sparse_gemm_fp4_fp8(a_vals, a_meta, b8))

    grouped, sparse = torch.compile(layer, backend="aot_eager", fullgraph=True)()
    torch.cuda.synchronize()
    check_accuracy(grouped.cpu(), grouped_gemm_oracle(*(t.cpu() for t in (a, a_scale, b, b_scale, masked_m))))
    check_accuracy(sparse.cpu(), sparse_gemm_oracle(a_vals.cpu(), a_meta.cpu(), b8.cpu()))
