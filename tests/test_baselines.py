"""The plain PyTorch baselines (author `baseline`) against the float64 oracles, on reduced
sizes from the folder and at full size through FlashInfer-Bench's own builder."""

from __future__ import annotations

import pytest
import torch
from flashinfer_bench.bench.utils import gen_inputs
from flashinfer_bench.compile import BuilderRegistry
from flashinfer_bench.data import TraceSet, Workload

from definition_cases import grouped_cases, sparse_cases
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.references import GROUPED, SPARSE
from lowbit_gemm.solutions import REPO_ROOT, load_solution

GROUPED_BASELINE = "torch_dequant_matmul_fp32"
SPARSE_BASELINE = "torch_dense_reconstruct_matmul_fp32"


def _garbage(shape) -> torch.Tensor:
    """A destination full of NaN: every element the baseline leaves alone shows up."""
    return torch.full(shape, float("nan"), dtype=torch.bfloat16)


@pytest.mark.parametrize("case_id,inputs", grouped_cases(), ids=[c[0] for c in grouped_cases()])
def test_grouped_baseline_matches_oracle(case_id, inputs):
    run = load_solution(GROUPED, "baseline", GROUPED_BASELINE).run
    g, max_m, _ = inputs[0].shape
    c = _garbage((g, max_m, inputs[2].shape[1]))
    run(*inputs, c)
    check_accuracy(c, grouped_gemm_oracle(*inputs[:5]), what=case_id)


@pytest.mark.parametrize("case_id,inputs", sparse_cases(), ids=[c[0] for c in sparse_cases()])
def test_sparse_baseline_matches_oracle(case_id, inputs):
    run = load_solution(SPARSE, "baseline", SPARSE_BASELINE).run
    c = _garbage((inputs[0].shape[0], inputs[2].shape[0]))
    run(*inputs, c)
    check_accuracy(c, sparse_gemm_oracle(*inputs), what=case_id)


@pytest.mark.parametrize("name,solution,axes", [
    (GROUPED, GROUPED_BASELINE, {"max_m": 3}), (SPARSE, SPARSE_BASELINE, {"m": 5})])
def test_packed_baseline_runs_in_the_harness_builder(name, solution, axes):
    """The packed JSON, built as FlashInfer-Bench builds it, matches the definition's reference
    at full definition size on harness-style random inputs."""
    ts = TraceSet.from_path(str(REPO_ROOT))
    d, sol = ts.definitions[name], ts.get_solution(solution)
    assert sol is not None and sol.author == "baseline" and sol.spec.destination_passing_style
    registry = BuilderRegistry.get_instance()
    torch.manual_seed(1)
    inputs = gen_inputs(d, Workload(axes=axes, inputs={}, uuid="test"), device="cpu")
    c = _garbage(d.get_output_shapes(axes)[0])
    registry.build(d, sol)(*inputs, c)
    ref = registry.build_reference(d)(*inputs)
    torch.testing.assert_close(c, ref, atol=1e-2, rtol=1e-2)
