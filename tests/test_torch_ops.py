"""torch.ops.lowbit.*: the library functions as torch custom operators. torch's own opcheck (schema,
fake implementation, dispatch), their results against the float64 oracle, and a torch.compile'd
function that calls both in one graph (fullgraph: no break around them)."""

import pytest
import torch

import lowbit_gemm  # noqa: F401  (registers the operators)
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.testing import grouped_inputs, sparse_pruned_inputs


def grouped_case():
    a, a_scale, b, b_scale, masked_m, _ = grouped_inputs(6, [5, 0, 9], n=64, k=256, weight_std=0.02)
    return a, a_scale, b, b_scale, masked_m


# opcheck's test_schema cannot run on e4m3 CPU tensors (its own arithmetic on them is not
# implemented in torch's CPU kernels); what it checks, that no input is written, is checked below.
OPCHECKS = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def test_operators_pass_torch_opcheck():
    torch.library.opcheck(torch.ops.lowbit.grouped_gemm_fp8_fp4_masked.default, grouped_case(),
                          {"expected_m": 4, "kernel": "triton_fp4_exact_mma"}, test_utils=OPCHECKS)
    torch.library.opcheck(torch.ops.lowbit.sparse_gemm_fp4_fp8.default, sparse_pruned_inputs(5, n=64, k=256),
                          test_utils=OPCHECKS)


def test_operators_write_no_input():
    for op, args in [(torch.ops.lowbit.grouped_gemm_fp8_fp4_masked, grouped_case()),
                     (torch.ops.lowbit.sparse_gemm_fp4_fp8, sparse_pruned_inputs(5, n=64, k=256))]:
        before = [t.clone() for t in args]
        op(*args)
        assert all(torch.equal(x.view(torch.uint8), y.view(torch.uint8)) for x, y in zip(args, before))


def test_operators_match_the_oracle():
    args = grouped_case()
    check_accuracy(torch.ops.lowbit.grouped_gemm_fp8_fp4_masked(*args), grouped_gemm_oracle(*args))
    sparse = sparse_pruned_inputs(7, n=64, k=256)
    check_accuracy(torch.ops.lowbit.sparse_gemm_fp4_fp8(*sparse), sparse_gemm_oracle(*sparse))


def test_a_compiled_function_holds_both_in_one_graph():
    def layer(grouped, sparse):
        return (torch.ops.lowbit.grouped_gemm_fp8_fp4_masked(*grouped, expected_m=8).float().sum(),
                torch.ops.lowbit.sparse_gemm_fp4_fp8(*sparse).float() * 2)

    grouped, sparse = grouped_case(), sparse_pruned_inputs(5, n=64, k=256)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    total, doubled = compiled(grouped, sparse)
    ref_total, ref_doubled = layer(grouped, sparse)
    assert torch.equal(doubled, ref_doubled) and torch.equal(total, ref_total)


def test_bad_input_is_named_through_the_operator():
    a_vals, a_meta, b = sparse_pruned_inputs(3, n=64, k=256)
    with pytest.raises(ValueError, match="a_meta"):
        torch.ops.lowbit.sparse_gemm_fp4_fp8(a_vals, a_meta[:, :10].contiguous(), b)
