"""The public library functions call the leaderboard solutions' generic launchers: on Hopper the
CUDA one where it takes the tensors, else the Triton one, unless a solution is named."""

import pytest
import torch
import triton

import lowbit_gemm as lg
import lowbit_gemm.ops as ops
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
    c = lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, kernel="triton_fp4_dot_scaled")
    check_accuracy(c, grouped_gemm_oracle(a, a_scale, b, b_scale, masked_m))


def test_sparse_gemm_writes_into_out():
    a_vals, a_meta, b = sparse_pruned_inputs(7, n=64, k=256)
    out = nan_output((7, 64))
    assert lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, out=out) is out
    check_accuracy(out, sparse_gemm_oracle(a_vals, a_meta, b))


def test_a_kernel_that_is_no_solution_is_refused():
    a_vals, a_meta, b = sparse_pruned_inputs(3, n=64, k=256)
    with pytest.raises(ValueError, match="kernel: expected 'auto' or one of"):
        lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, kernel="cuda_naive")


class _Chosen:
    """Stands in for a loaded solution: records which one the call chose, computes nothing."""

    def __init__(self, name):
        self.name = name

    def grouped_gemm_fp8_fp4_masked(self, *args, **kwargs):
        pass

    def sparse_gemm_fp4_fp8(self, *args):
        pass


@pytest.mark.parametrize("hopper, n, offset, chosen", [
    (False, 128, 0, "triton_fp4_exact_mma"),
    (True, 128, 0, "cuda_fp4_wgmma"),
    (True, 64, 0, "triton_fp4_exact_mma"),  # n no multiple of the CUDA kernel's 128-row tiles
    (True, 128, 1, "triton_fp4_exact_mma"),  # a_fp8 not 16-byte aligned
])
def test_auto_takes_the_cuda_grouped_kernel_on_hopper_where_it_takes_the_tensors(monkeypatch, hopper, n, offset,
                                                                                  chosen):
    names = []
    monkeypatch.setattr(ops, "_on_hopper", lambda t: hopper)
    monkeypatch.setattr(ops, "_cuda_toolkit", lambda: True)
    monkeypatch.setattr(ops, "_solution", lambda d, name: names.append(name) or _Chosen(name))
    a, a_scale, b, b_scale, masked_m, _ = grouped_inputs(4, [3, 2], n=n, k=256)
    if offset:
        a = torch.empty(a.numel() + 16, dtype=torch.uint8)[offset:offset + a.numel()].view(a.dtype).view(a.shape)
    lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m)
    assert names == [chosen]


@pytest.mark.parametrize("hopper, offset, chosen", [
    (False, 0, "triton_sparse_fp4_exact"),
    (True, 0, "cuda_sparse_fp4_mma"),
    (True, 1, "triton_sparse_fp4_exact"),  # out not 16-byte aligned
])
def test_auto_takes_the_cuda_sparse_kernel_on_hopper_where_it_takes_the_tensors(monkeypatch, hopper, offset, chosen):
    names = []
    monkeypatch.setattr(ops, "_on_hopper", lambda t: hopper)
    monkeypatch.setattr(ops, "_cuda_toolkit", lambda: True)
    monkeypatch.setattr(ops, "_solution", lambda d, name: names.append(name) or _Chosen(name))
    a_vals, a_meta, b = sparse_pruned_inputs(5, n=64, k=256)
    out = torch.empty(5 * 64 + 8, dtype=torch.bfloat16)[offset:offset + 5 * 64].view(5, 64)
    lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, out=out)
    assert names == [chosen]


def test_a_named_kernel_never_asks_the_device(monkeypatch):
    def asked(t):
        raise AssertionError("'auto' checks ran for a named kernel")

    monkeypatch.setattr(ops, "_on_hopper", asked)
    a_vals, a_meta, b = sparse_pruned_inputs(3, n=64, k=256)
    out = lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, kernel="triton_sparse_fp4_exact")
    check_accuracy(out, sparse_gemm_oracle(a_vals, a_meta, b))


@pytest.mark.parametrize("call, match", [
    (lambda a, b: lg.grouped_gemm_fp8_fp4_masked(a[0][0], *a[1:5]), r"a_fp8: expected a 3-D tensor \[g, max_m, k\]"),
    (lambda a, b: lg.grouped_gemm_fp8_fp4_masked(a[0], a[1], [1, 2], *a[3:5]), "b_fp4: expected a 3-D tensor.*got list"),
    (lambda a, b: lg.sparse_gemm_fp4_fp8(b[0][0], b[1], b[2]), r"a_vals: expected a 2-D tensor \[m, k/4\]"),
    (lambda a, b: lg.sparse_gemm_fp4_fp8(b[0], b[1], b[2][None]), r"b_fp8: expected a 2-D tensor \[n, k\]"),
])
def test_a_wrong_rank_is_named_before_the_output_is_allocated(call, match):
    grouped = grouped_inputs(4, [3, 2], n=64, k=256)
    sparse = sparse_pruned_inputs(3, n=64, k=256)
    with pytest.raises(ValueError, match=match):
        call(grouped, sparse)


def test_auto_on_hopper_without_a_cuda_toolkit_takes_triton_and_says_so(monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    names = []
    monkeypatch.setattr(ops, "_on_hopper", lambda t: True)
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    monkeypatch.setattr(ops, "_solution", lambda d, name: names.append(name) or _Chosen(name))
    ops._cuda_toolkit.cache_clear()
    try:
        a_vals, a_meta, b = sparse_pruned_inputs(5, n=64, k=256)
        with pytest.warns(RuntimeWarning, match="no CUDA toolkit"):
            lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b)
        lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b)  # asked once a process
        assert names == ["triton_sparse_fp4_exact"] * 2
    finally:
        ops._cuda_toolkit.cache_clear()


@pytest.mark.parametrize("definition, out, match", [
    ("sparse", torch.empty(3, 64), r"out: expected dtype torch.bfloat16, got torch.float32"),
    ("grouped", torch.empty(2, 4, 63, dtype=torch.bfloat16), r"out: expected shape \(2, 4, 64\)"),
])
def test_a_wrong_out_is_named_out(definition, out, match):
    with pytest.raises(ValueError, match=match):
        if definition == "sparse":
            lg.sparse_gemm_fp4_fp8(*sparse_pruned_inputs(3, n=64, k=256), out=out)
        else:
            a, a_scale, b, b_scale, masked_m, _ = grouped_inputs(4, [3, 2], n=64, k=256)
            lg.grouped_gemm_fp8_fp4_masked(a, a_scale, b, b_scale, masked_m, out=out)


def test_cpu_tensors_without_the_interpreter_are_named(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="b_fp8: a cpu tensor; the Triton kernels run off the GPU only under"):
        lg.sparse_gemm_fp4_fp8(*sparse_pruned_inputs(3, n=64, k=256))


def test_the_capability_is_asked_once_a_device(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: asked.append(index) or (9, 0))
    ops._capability.cache_clear()
    try:
        with FakeTensorMode():
            t = torch.empty(4, device="cuda:0")
            assert ops._on_hopper(t) and ops._on_hopper(t)
        assert asked == [0]
    finally:
        ops._capability.cache_clear()


def test_a_solution_is_loaded_once_a_process(monkeypatch):
    loads = []
    monkeypatch.setattr(ops, "load_solution", lambda d, author, name: loads.append(name) or _Chosen(name))
    ops._solution.cache_clear()
    try:
        a_vals, a_meta, b = sparse_pruned_inputs(3, n=64, k=256)
        for _ in range(3):
            lg.sparse_gemm_fp4_fp8(a_vals, a_meta, b, kernel="triton_sparse_fp4_exact")
        assert loads == ["triton_sparse_fp4_exact"]
    finally:
        ops._solution.cache_clear()


def test_a_tensor_that_is_no_tensor_is_named_with_out_given():
    a_vals, a_meta, b = sparse_pruned_inputs(3, n=64, k=256)
    with pytest.raises(ValueError, match="b_fp8: expected a 2-D tensor .* got list"):
        lg.sparse_gemm_fp4_fp8(a_vals, a_meta, [1, 2], out=torch.empty(3, 64, dtype=torch.bfloat16))
