"""The definition JSONs: schema-valid, up to date with their sources, and references that agree
with the independent float64 oracles on random and adversarial inputs."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch
from flashinfer_bench.bench.utils import gen_inputs
from flashinfer_bench.compile import BuilderRegistry
from flashinfer_bench.data import Definition, Workload

from definition_cases import grouped_cases, sparse_cases
from lowbit_gemm.oracle import check_accuracy, grouped_gemm_oracle, sparse_gemm_oracle
from lowbit_gemm.references import GROUPED, NAMES, SPARSE, definition_json, load_reference, reference_source

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> Definition:
    return Definition.model_validate_json((ROOT / "definitions" / "gemm" / f"{name}.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_definition_json_valid_and_up_to_date(name):
    path = ROOT / "definitions" / "gemm" / f"{name}.json"
    assert path.read_text(encoding="utf-8") == definition_json(name), (
        f"{path} is out of date: run python scripts/make_definitions.py")
    d = _load(name)
    assert d.name == name and d.op_type == "gemm"
    assert d.reference == reference_source(name)


def test_no_other_definition_files():
    found = sorted(p.name for p in (ROOT / "definitions").rglob("*.json"))
    assert found == sorted(f"{n}.json" for n in NAMES)


def test_grouped_signature():
    d = _load(GROUPED)
    assert list(d.inputs) == ["a_fp8", "a_scale", "b_fp4", "b_scale", "masked_m", "expected_m"]
    assert [d.inputs[i].dtype.value for i in d.inputs] == [
        "float8_e4m3fn", "float32", "int8", "float32", "int32", "int32"]
    assert d.inputs["expected_m"].shape is None
    assert d.var_axes == ["max_m"]
    assert d.const_axes == {"g": 4, "n": 2048, "k": 2048, "k_half": 1024, "k_a_blocks": 16, "k_b_blocks": 64}
    assert d.outputs["c"].shape == ["g", "max_m", "n"] and d.outputs["c"].dtype.value == "bfloat16"
    assert d.constraints == ["k == 2 * k_half", "k == 128 * k_a_blocks", "k == 32 * k_b_blocks"]
    for constraint in d.constraints:
        assert eval(constraint, {}, dict(d.const_axes))


def test_sparse_signature():
    d = _load(SPARSE)
    assert list(d.inputs) == ["a_vals", "a_meta", "b_fp8"]
    assert [d.inputs[i].dtype.value for i in d.inputs] == ["int8", "int8", "float8_e4m3fn"]
    assert d.var_axes == ["m"] and d.const_axes == {"n": 2048, "k": 2048, "g": 512}
    assert d.outputs["c"].shape == ["m", "n"] and d.outputs["c"].dtype.value == "bfloat16"
    assert d.constraints == ["k == 4 * g"]
    assert eval(d.constraints[0], {}, dict(d.const_axes))


@pytest.mark.parametrize("name", NAMES)
def test_reference_imports_only_torch(name):
    tree = ast.parse(reference_source(name))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or ".").split(".")[0])
    assert imported == {"torch"}


@pytest.mark.parametrize("case_id,inputs", grouped_cases(), ids=[c[0] for c in grouped_cases()])
def test_grouped_reference_matches_oracle(case_id, inputs):
    out = load_reference(GROUPED)(*inputs)
    assert out.dtype == torch.bfloat16 and out.shape == inputs[0].shape[:2] + (inputs[2].shape[1],)
    check_accuracy(out, grouped_gemm_oracle(*inputs[:5]), what=case_id)


@pytest.mark.parametrize("case_id,inputs", sparse_cases(), ids=[c[0] for c in sparse_cases()])
def test_sparse_reference_matches_oracle(case_id, inputs):
    out = load_reference(SPARSE)(*inputs)
    assert out.dtype == torch.bfloat16 and out.shape == (inputs[0].shape[0], inputs[2].shape[0])
    check_accuracy(out, sparse_gemm_oracle(*inputs), what=case_id)


def test_expected_m_never_changes_the_result():
    _, inputs = grouped_cases()[0]
    run = load_reference(GROUPED)
    first = run(*inputs[:5], 1)
    for hint in (0, -7, 4096, 2**31 - 1):
        assert torch.equal(run(*inputs[:5], hint), first)


@pytest.mark.parametrize("name,axes", [(GROUPED, {"max_m": 3}), (SPARSE, {"m": 5})])
def test_reference_as_the_harness_builds_and_feeds_it(name, axes):
    """Full definition sizes, inputs drawn the way the harness draws `random` inputs (negative
    scales, any masked_m and bytes): the reference built by FlashInfer-Bench runs on the CPU,
    returns bf16 of the right shape, and has no NaN or inf."""
    d = _load(name)
    torch.manual_seed(0)
    workload = Workload(axes=axes, inputs={}, uuid="test")
    inputs = gen_inputs(d, workload, device="cpu")
    out = BuilderRegistry.get_instance().build_reference(d)(*inputs)
    assert out.dtype == torch.bfloat16
    assert list(out.shape) == d.get_output_shapes(axes)[0]
    assert torch.isfinite(out).all()
    if name == SPARSE:
        check_accuracy(out, sparse_gemm_oracle(*inputs))
    else:
        check_accuracy(out, grouped_gemm_oracle(*inputs[:5]))


def test_descriptions_state_the_meaning():
    a = json.loads(definition_json(GROUPED))["description"]
    for phrase in ("low nibble is element 2j", "clamp(masked_m[g], 0, max_m)", "k//128", "k//32",
                   "never changes the result", "bit 3 is the sign"):
        assert phrase in a
    b = json.loads(definition_json(SPARSE))["description"]
    for phrase in ("p0 = meta & 3", "(meta >> 2) & 3", "bits 4 to 7", "repeated position sums", "p0 < p1"):
        assert phrase in b
