"""The repository loads as a FlashInfer-Bench TraceSet, its workloads cover the cases the issue
lists, every safetensors input matches the definition, blob/ stays small, and the generator
reproduces every file byte for byte."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
import torch
from flashinfer_bench.bench.utils import load_safetensors
from flashinfer_bench.data import TraceSet

from lowbit_gemm.numerics import is_power_of_two
from lowbit_gemm.references import GROUPED, SPARSE

ROOT = Path(__file__).resolve().parents[1]
BLOB_LIMIT = 20 * 1024 * 1024


@lru_cache(maxsize=None)
def trace_set() -> TraceSet:
    return TraceSet.from_path(str(ROOT))


@lru_cache(maxsize=None)
def loaded(name: str):
    """[(workload, {input: tensor from safetensors})] in file order."""
    ts = trace_set()
    d = ts.definitions[name]
    return [(t.workload, load_safetensors(d, t.workload, ts.root)) for t in ts.workloads[name]]


def _gen_module():
    spec = importlib.util.spec_from_file_location("gen_workloads", ROOT / "scripts" / "gen_workloads.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_trace_set_loads():
    ts = trace_set()
    assert set(ts.definitions) == {GROUPED, SPARSE}
    assert len(ts.workloads[GROUPED]) >= 16 and len(ts.workloads[SPARSE]) >= 14
    uuids = [t.workload.uuid for ws in ts.workloads.values() for t in ws]
    assert len(uuids) == len(set(uuids))


@pytest.mark.parametrize("name", [GROUPED, SPARSE])
def test_every_input_is_declared_and_safetensors_match_the_definition(name):
    d = trace_set().definitions[name]
    for workload, tensors in loaded(name):  # load_safetensors checks shape and dtype
        assert set(workload.inputs) == set(d.inputs), workload.uuid
        assert set(workload.axes) == set(d.var_axes)
        for spec in workload.inputs.values():
            if spec.type == "safetensors":
                assert spec.path.startswith("./blob/workloads/gemm/")
                assert spec.path.endswith(".safetensors") and (ROOT / spec.path).is_file()


def test_grouped_cases_present():
    rows = []
    for workload, t in loaded(GROUPED):
        assert workload.inputs["masked_m"].type == "safetensors"
        assert workload.inputs["b_scale"].type == "safetensors"
        assert workload.inputs["expected_m"].type == "scalar"
        b_scale = t["b_scale"]
        assert is_power_of_two(b_scale).all(), "b_scale must be UE8M0 (positive powers of two)"
        exps = torch.log2(b_scale).reshape(*b_scale.shape[:2], -1, 4)  # 4 scales = one 128-k block
        spread = int((exps.amax(-1) - exps.amin(-1)).min())
        rows.append((workload.axes["max_m"], t["masked_m"].tolist(), workload.inputs["expected_m"].value, spread))

    max_ms = {r[0] for r in rows}
    assert {1, 64, 128, 512, 1024, 2048, 4096} <= max_ms and min(max_ms) == 1 and max(max_ms) == 4096
    assert any(m % 16 for m in max_ms if m > 16), "a max_m that is no multiple of 16"
    # decode-like: max_m 64 and 128 with about 8-32 rows per group
    for max_m in (64, 128):
        assert any(r[0] == max_m and all(8 <= x <= 32 for x in r[1]) for r in rows)
    # DeepGEMM's pattern at max_m 4096
    for e in (20, 192, 1024):
        assert any(r[0] == 4096 and r[2] == int(1.2 * e) and all(int(0.7 * e) <= x <= int(1.3 * e) for x in r[1])
                   for r in rows), f"DeepGEMM pattern e={e}"
    assert any(r[0] == 512 and r[1] == [512] * 4 for r in rows), "max_m 512 fully used"
    assert any(r[0] == 512 and 0.4 <= sum(r[1]) / 2048 <= 0.6 for r in rows), "max_m 512 about half used"
    for max_m in (1024, 2048):
        assert any(r[0] == max_m and 0.65 <= sum(r[1]) / (4 * max_m) <= 0.85 for r in rows), f"{max_m} ~75%"
    assert any(r[1] == [0, 0, 0, 0] for r in rows), "every masked_m 0"
    assert any(sorted(r[1]) == [0, 0, 0, r[0]] and r[0] > 1 for r in rows), "one group full, others empty"
    assert any(r[3] >= 30 for r in rows), "a b_scale spread over >= 30 binades inside a 128-value block"


def test_grouped_b_scale_from_real_quantization_is_shared():
    paths = Counter(w.inputs["b_scale"].path for w, _ in loaded(GROUPED))
    shared, count = paths.most_common(1)[0]
    assert count >= len(loaded(GROUPED)) - 1
    b_scale = next(t["b_scale"] for w, t in loaded(GROUPED) if w.inputs["b_scale"].path == shared)
    row_max = b_scale.amax(-1)
    assert row_max.max() / row_max.min() >= 2**6, "rows of different magnitude"


def test_sparse_cases_present():
    ms_pruned, random_meta = set(), set()
    for workload, t in loaded(SPARSE):
        if workload.inputs["a_meta"].type == "random":
            random_meta.add(workload.axes["m"])
            continue
        meta = t["a_meta"].view(torch.uint8).long()
        assert ((meta >> 4) == 0).all() and ((meta & 3) < ((meta >> 2) & 3)).all(), "well-formed 2:4 metadata"
        ms_pruned.add(workload.axes["m"])
    assert {1, 2, 7, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192} <= ms_pruned
    assert len(random_meta) >= 2 and {64, 1000} <= random_meta


def test_blob_under_budget():
    total = sum(p.stat().st_size for p in (ROOT / "blob").rglob("*") if p.is_file())
    assert total < BLOB_LIMIT, f"blob/ is {total / 2**20:.2f} MiB"
    referenced = {(ROOT / spec.path).resolve() for ws in trace_set().workloads.values() for t in ws
                  for spec in t.workload.inputs.values() if spec.type == "safetensors"}
    on_disk = {p.resolve() for p in (ROOT / "blob").rglob("*.safetensors")}
    assert on_disk == referenced, "every blob is used by a workload"


def test_generator_is_deterministic(tmp_path):
    _gen_module().generate(tmp_path)
    produced = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(ROOT) for d in ("workloads", "blob") for p in (ROOT / d).rglob("*") if p.is_file())
    assert produced == committed
    for rel in produced:
        assert (tmp_path / rel).read_bytes() == (ROOT / rel).read_bytes(), f"{rel} differs on regeneration"
