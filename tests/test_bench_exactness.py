"""Exactness (bad elements, worst margin), the launch floor and the report's new columns, on CPU."""

from __future__ import annotations

import json
import math

import pytest
import torch

from lowbit_gemm.bench import launch_floor, report
from lowbit_gemm.bench.exactness import exactness, poisoned
from lowbit_gemm.bench.results import Measurement, RunResults
from lowbit_gemm.bench.roofline import GROUPED, SPARSE


def test_exactness_follows_the_harness_rule():
    ref = torch.tensor([0.0, 1.0, 100.0, 100.0, 0.005])
    out = torch.tensor([0.009, 1.011, 100.9, 102.0, -0.02])
    e = exactness(out.to(torch.bfloat16).float(), ref)  # bf16 like the outputs
    # element 3: |err| 2 > 1e-2 and > 1e-2 * 100: bad; element 4: 0.025 > 1e-2 and > rel: bad
    assert e.bad_elements == 2 and e.elements == 5
    assert e.worst_margin == pytest.approx(2.5, rel=1e-2)  # element 4: 0.025 / atol
    exact = exactness(ref, ref)
    assert exact.bad_elements == 0 and exact.worst_margin == 0.0


def test_margin_one_is_the_edge():
    ref = torch.full((4,), 10.0)
    below = exactness(ref + 0.099, ref)
    above = exactness(ref + 0.101, ref)
    assert below.bad_elements == 0 and below.worst_margin < 1.0
    assert above.bad_elements == 4 and above.worst_margin > 1.0


def test_unwritten_output_is_bad():
    ref = torch.ones(3, 2)
    out = poisoned([torch.empty(3, 2, dtype=torch.bfloat16)])[0]
    assert torch.isnan(out).all()
    out[0] = 1.0
    e = exactness(out, ref)
    assert e.bad_elements == 4 and math.isinf(e.worst_margin)
    with pytest.raises(ValueError, match="expected shape"):
        exactness(out, torch.ones(2, 3))


def test_launch_floor_skips_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert launch_floor.measure() is None


def _results(with_new: bool) -> RunResults:
    ms = []
    for sol, author, bad, margin, status in (("own", "lowbit", 14165, 7.5, "INCORRECT_NUMERICAL"),
                                             ("anchor", "peers", 0, 0.42, "PASSED")):
        m = Measurement(definition=GROUPED, workload_uuid="wl-512-full", axes={"max_m": 512},
                        solution=sol, author=author, status=status, masked_m=[512] * 4,
                        harness_us=60.0 if status == "PASSED" else None, graph_us=28.0)
        if with_new:
            m.bad_elements, m.worst_margin, m.checked_elements = bad, margin, 4 * 512 * 2048
        ms.append(m)
    floor = {"triton_compiled": 28.5, "triton_grid": 41.1, "torch_zero": 22.4} if with_new else None
    return RunResults(date="2026-01-01", ceilings=None, measurements=ms, command="fixture",
                      launch_floor=floor)


def test_report_shows_exactness_host_overhead_and_launch_floor():
    md = report.render(_results(True))
    assert "## Launch floor measured in this run" in md
    assert "| empty Triton kernel, CompiledKernel launch | 28.5 |" in md
    assert "| torch zero_() of 64 bytes | 22.4 |" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| max_m=512") and "4,194,304" in ln)
    assert "14,165 / 7.5 ✗" in row and "0 / 0.42 |" in row
    host = [ln for ln in md.splitlines() if ln.startswith("| max_m=512") and "| 22.4 |" in ln]
    assert host and "| 32.0 |" in host[0]  # 60 - 28 beside the floor (the smallest launch)


def test_old_json_without_the_new_fields_loads_and_renders():
    d = json.loads(_results(True).to_json())
    d.pop("launch_floor")
    for m in d["measurements"]:
        for k in ("bad_elements", "worst_margin", "checked_elements"):
            m.pop(k)
    back = RunResults.from_json(json.dumps(d))
    assert back.launch_floor is None and back.measurements[0].bad_elements is None
    md = report.render(back)
    assert "Launch floor measured" not in md and "### Exactness" in md


def test_json_round_trip_keeps_new_fields_and_infinite_margin(tmp_path):
    r = _results(True)
    r.measurements[0].worst_margin = float("inf")
    r.save(tmp_path / "r.json")
    back = RunResults.from_json((tmp_path / "r.json").read_text())
    assert back.measurements == r.measurements and back.launch_floor == r.launch_floor
    assert "/ inf ✗" in report.render(back)


def test_plots_have_the_exactness_panel(tmp_path):
    pytest.importorskip("matplotlib")
    from lowbit_gemm.bench import plots

    out = plots.plot_all(_results(True), tmp_path)
    assert set(out) == {GROUPED} and out[GROUPED].stat().st_size > 10_000
    assert SPARSE not in out
