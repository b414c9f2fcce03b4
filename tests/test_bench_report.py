"""The report's arithmetic, writer and plots on recorded fixture traces (tests/data, not measurements)."""

from pathlib import Path

import pytest

from lowbit_gemm.bench import report
from lowbit_gemm.bench.ceilings import Ceilings
from lowbit_gemm.bench.published import PUBLISHED
from lowbit_gemm.bench.results import Measurement, RunResults, failure_reason, measurements_from_traces
from lowbit_gemm.bench.roofline import GROUPED, SPARSE, grouped_work, sparse_work

FIXTURE = Path(__file__).parent / "data" / "fixture_traces.jsonl"
AUTHORS = {"own_sparse": "lowbit", "own_grouped": "lowbit", "peer_naive": "peers",
           "peer_fast": "peers", "peer_bmm": "peers", "peer_deepgemm": "peers",
           "base_sparse": "baseline", "base_grouped": "baseline"}
# Round ceilings so that floors are easy to check by hand: 4 TB/s and 1000 TFLOP/s.
CEIL = Ceilings(gpu="TEST-FIXTURE-GPU", sms=1, l2_bytes=60 << 20, copy_bytes_per_s=4e12,
                fp8_flops_per_s=1e15, versions={"torch": "fixture"})


def _traces():
    from flashinfer_bench.data import Trace

    return [Trace.model_validate_json(line) for line in FIXTURE.read_text().splitlines()]


@pytest.fixture
def results():
    ms = measurements_from_traces(_traces(), AUTHORS, {"fixture-g512": [512, 256, 0, 600]})
    # Our own graph-replay times, as the run would add them.
    graph = {("fixture-s64", "own_sparse"): 5.0, ("fixture-s64", "peer_naive"): 550.0,
             ("fixture-s64", "peer_fast"): 4.0, ("fixture-g512", "own_grouped"): 40.0,
             ("fixture-g512", "peer_bmm"): 280.0}
    for m in ms:
        m.graph_us = graph.get((m.workload_uuid, m.solution))
    return RunResults(date="2026-01-01T00:00:00+00:00", ceilings=CEIL, measurements=ms,
                      command="fixture")


def test_traces_become_measurements(results):
    own = [m for m in results.measurements if m.solution == "own_sparse"]
    assert sorted(m.harness_us for m in own) == pytest.approx([10.0, 40.0])
    assert all(m.kind == "own" for m in own)
    dg = next(m for m in results.measurements if m.solution == "peer_deepgemm")
    assert dg.status == "RUNTIME_ERROR" and dg.note == "RuntimeError: deepgemm cannot run: fixture"
    fast = next(m for m in results.measurements if m.solution == "peer_fast")
    assert fast.note == "max abs err 1, max rel err 3" and fast.timeable and not fast.passed
    assert {m.hardware for m in results.measurements} == {"TEST-FIXTURE-GPU"}


def test_floors_and_fractions(results):
    rows = {r.uuid: r for r in report.workload_rows(results, SPARSE)}
    r = rows["fixture-s64"]
    w = sparse_work(64)
    assert r.work == w
    assert r.floors.memory_us == pytest.approx(w.min_bytes / 4e12 * 1e6)
    assert r.floors.compute_us == pytest.approx(2 * 64 * 2048 * 2048 / 1e15 * 1e6)
    assert r.floors.bound == "memory"
    # 2 * 64 * 512 + 2048 * 2048 + 64 * 2048 * 2 bytes over 4 TB/s
    assert r.floors.floor_us == pytest.approx((65536 + 4194304 + 262144) / 4e6)
    g = {r.uuid: r for r in report.workload_rows(results, GROUPED)}["fixture-g512"]
    assert g.work == grouped_work(512, [512, 256, 0, 600])
    assert g.work.rows == 512 + 256 + 0 + 512


def test_compute_floor_divides_by_the_bf16_rate(results):
    """With a measured bf16 rate: the grouped floor divides by it, the 2:4 sparse one by twice it;
    results recorded without one (the fixture above) divide by the FP8 rate."""
    results.ceilings = Ceilings.from_dict({**CEIL.to_dict(), "bf16_flops_per_s": 4e14})
    s = {r.uuid: r for r in report.workload_rows(results, SPARSE)}["fixture-s64"]
    assert s.floors.compute_us == pytest.approx(2 * 64 * 2048 * 2048 / 8e14 * 1e6)
    g = {r.uuid: r for r in report.workload_rows(results, GROUPED)}["fixture-g512"]
    assert g.floors.compute_us == pytest.approx(g.work.flops / 4e14 * 1e6)
    old = {k: v for k, v in CEIL.to_dict().items() if k != "bf16_flops_per_s"}
    assert Ceilings.from_dict(old).compute_flops_per_s(sparse=True) == CEIL.fp8_flops_per_s


def test_best_and_speedups(results):
    r = {r.uuid: r for r in report.workload_rows(results, SPARSE)}["fixture-s64"]
    assert r.reference_us == pytest.approx(500.0)
    assert r.best("peer") == ("peer_naive", pytest.approx(600.0))  # the incorrect peer is out
    assert r.best("baseline") == ("base_sparse", pytest.approx(250.0))
    lines = "\n".join(report.speedup_table(SPARSE, [r], report.solution_order([r])))
    # own 10 us: 500/10 = 50x reference, 250/10 = 25x baseline, 600/10 = 60x peer,
    # graph replay 550/5 = 110x peer.
    assert "50.00×" in lines and "25.00× (base_sparse)" in lines
    assert "60.00× (peer_naive)" in lines and "110.00× (peer_naive)" in lines


def test_render_names_gpu_date_published_and_failures(results):
    md = report.render(results, {SPARSE: "img/x.png"})
    assert "2026-01-01" in md and "TEST-FIXTURE-GPU" in md and "![" in md
    assert "4.00 TB/s" in md and "1000 TFLOP/s" in md
    sparse_pub = next(p for p in PUBLISHED if p.definition == SPARSE)
    row64 = next(ln for ln in md.splitlines() if ln.startswith("| m=64 ") and "GFLOP" not in ln
                 and "0.54" in ln)
    assert f"{sparse_pub.latency_us:.1f}" in row64 and "B200" in md
    row1024 = next(ln for ln in md.splitlines() if ln.startswith("| m=1024 ") and "0.54" not in ln
                   and "8.59" in ln)
    assert f"{sparse_pub.latency_us:.1f}" not in row1024
    assert "INCORRECT_NUMERICAL (– / 4.00)" in md
    assert "ValueError: fixture failure" in md
    assert [m.solution for m in report.own_failures(results)] == ["own_grouped"]


def test_published_never_in_a_ratio(results):
    """No ratio in the report may use a published figure: changing them changes no ratio."""
    import lowbit_gemm.bench.published as pub

    before = report.render(results)
    saved = list(pub.PUBLISHED)
    try:
        pub.PUBLISHED[:] = [type(p)(**{**p.__dict__, "latency_us": p.latency_us * 7}) for p in saved]
        after = report.render(results)
    finally:
        pub.PUBLISHED[:] = saved
    ratio_lines = lambda md: [ln for ln in md.splitlines() if "×" in ln]  # noqa: E731
    assert ratio_lines(before) == ratio_lines(after)


def test_json_round_trip(results, tmp_path):
    path = tmp_path / "results.json"
    results.save(path)
    back = RunResults.from_json(path.read_text())
    assert back.measurements == results.measurements and back.ceilings == results.ceilings


def test_plots_written_headless(results, tmp_path):
    from lowbit_gemm.bench import plots

    out = plots.plot_all(results, tmp_path)
    assert set(out) == {GROUPED, SPARSE}
    for p in out.values():
        assert p.stat().st_size > 10_000 and p.read_bytes()[:4] == b"\x89PNG"


def test_failure_reason_picks_last_exception_line():
    log = "noise\nTraceback (most recent call last):\n  File x\nRuntimeError: boom\n\n"
    assert failure_reason(log) == "RuntimeError: boom"
    assert failure_reason("") == ""


def test_missing_trace_is_not_run():
    m = Measurement(definition=SPARSE, workload_uuid="u", axes={"m": 1}, solution="s",
                    author="lowbit", status="NOT_RUN")
    r = RunResults(date="d", ceilings=None, measurements=[m])
    assert report.own_failures(r) == [m]
    assert "NOT_RUN" in report.render(r)
