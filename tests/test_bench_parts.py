"""Roofline arithmetic, workload selection, rotation sizing, the CPU-runnable peers and the CPU
check's nvcc compile of CUDA solutions."""

import shutil
from types import SimpleNamespace

import pytest
import torch

from lowbit_gemm.bench import harness, roofline, timing
from lowbit_gemm.bench.roofline import GROUPED, SPARSE


def test_grouped_work_counts_used_rows_and_all_of_c():
    w = roofline.grouped_work(128, [64, 0, -3, 500])  # clamp: 64 + 0 + 0 + 128
    assert w.rows == 192
    assert w.flops == 2 * 192 * 2048 * 2048
    b = 4 * 2048 * 1024 + 4 * 2048 * 64 * 4  # b_fp4 + b_scale
    a = 192 * 2048 + 192 * 16 * 4  # used rows of a_fp8 and a_scale
    c = 4 * 128 * 2048 * 2  # every row of c is written
    assert w.min_bytes == b + a + c + 16
    assert roofline.grouped_work(128).rows == 4 * 128  # unknown masked_m: all rows
    with pytest.raises(ValueError, match="4 values"):
        roofline.grouped_work(128, [1, 2])


def test_sparse_work_counts_flops_dense():
    w = roofline.sparse_work(64)
    assert w.flops == 2 * 64 * 2048 * 2048
    assert w.min_bytes == 64 * 512 * 2 + 2048 * 2048 + 64 * 2048 * 2


def test_floors_fractions_speedups():
    f = roofline.floors(roofline.Work(flops=2e12, min_bytes=4e9, size=1), 4e12, 1e15)
    assert (f.memory_us, f.compute_us, f.floor_us, f.bound) == (1000.0, 2000.0, 2000.0, "compute")
    assert roofline.fraction_of(2000.0, 4000.0) == 0.5
    assert roofline.fraction_of(2000.0, None) is None
    assert roofline.speedup(300.0, 100.0) == 3.0
    assert roofline.speedup(None, 100.0) is None and roofline.speedup(1.0, 0.0) is None
    with pytest.raises(ValueError):
        roofline.floors(f and roofline.sparse_work(1), 0.0, 1.0)
    with pytest.raises(KeyError):
        roofline.work_for("nope", {})


def _wl(uuid, **axes):
    return SimpleNamespace(workload=SimpleNamespace(uuid=uuid, axes=axes))


def test_workload_patterns_and_quick_pick():
    w = _wl("abc123", max_m=512).workload
    assert harness._workload_matches(w, ["abc"]) and harness._workload_matches(w, ["max_m=512"])
    assert not harness._workload_matches(w, ["max_m=64", "zzz"])
    wls = [_wl(str(i), m=m) for i, m in enumerate([64, 1, 4096, 256, 16])]
    picked = [t.workload.axes["m"] for t in harness._quick_pick(wls, SPARSE)]
    assert picked == [1, 64, 4096]


def test_rotation_exceeds_l2():
    l2 = 60 << 20
    n = timing.n_sets_for(4 << 20, l2)
    assert n * (4 << 20) >= 3 * l2 and n <= timing.MAX_SETS
    assert timing.n_sets_for(1 << 30, l2) == 2
    sets = timing.rotating_sets([torch.zeros(1 << 20, dtype=torch.uint8), 7], 1 << 20)
    assert len(sets) == timing.n_sets_for(1 << 20, 1 << 20)
    assert sets[1][1] == 7 and sets[1][0].data_ptr() != sets[0][0].data_ptr()


@pytest.mark.parametrize("name,definition", [("torch_dequant_bf16_bmm", GROUPED),
                                             ("torch_dense_fp8_scaled_mm", SPARSE)])
def test_cpu_peers_match_oracle(name, definition):
    from lowbit_gemm.bench import cpu_check
    from lowbit_gemm.solutions import solution_dir

    ch = cpu_check.check_solution(solution_dir(definition, "peers", name))
    if ch.outcome == "skipped":
        pytest.skip(ch.detail)
    assert ch.outcome == "ok", ch.detail


def test_gpu_only_peers_say_why_on_cpu():
    from lowbit_gemm.bench import cpu_check
    from lowbit_gemm.solutions import solution_dir

    dg = cpu_check.check_solution(solution_dir(GROUPED, "peers", "deepgemm_m_grouped_fp8_fp4_masked"))
    assert dg.outcome == "skipped" and "cannot run" in dg.detail
    if not torch.cuda.is_available():
        folder = solution_dir(SPARSE, "peers", "torch_dense_fp8_scaled_mm").parent / "cuda_naive"
        naive = cpu_check.check_solution(folder)
        assert naive.outcome == "skipped" and "CUDA" in naive.detail


def _tiny_cuda_solution(tmp_path, author, kernel_body):
    """A solution folder as the CUDA solutions lay theirs out: build.py's CUDA_FLAGS, one .cu."""
    folder = tmp_path / author / "cuda_tiny"
    folder.mkdir(parents=True)
    (folder / "solution.toml").write_text(f'name = "cuda_tiny"\ndefinition = "{SPARSE}"\nauthor = "{author}"\n'
                                          '[spec]\nlanguage = "python"\n')
    (folder / "build.py").write_text('CUDA_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17"]\n')
    (folder / "k.cu").write_text(f"__global__ void k(float* x) {{ {kernel_body} }}\n")
    (folder / "main.py").write_text("def run(*args):\n    raise RuntimeError('needs a GPU')\n")
    return folder


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("author, body, outcome, says", [
    ("lowbit", "x[threadIdx.x] = 1.0f;", "skipped", "compiled by nvcc (k.cu, its build flags); running it needs"),
    ("lowbit", "x[threadIdx.x] = ;", "FAILED", "nvcc failed on k.cu"),  # our own: a compile error fails
    ("peers", "x[threadIdx.x] = ;", "skipped", "nvcc failed on k.cu"),
])
def test_cpu_check_compiles_cuda_solutions_with_their_build_flags(tmp_path, author, body, outcome, says):
    from lowbit_gemm.bench import cpu_check

    ch = cpu_check.check_solution(_tiny_cuda_solution(tmp_path, author, body))
    assert ch.outcome == outcome and says in ch.detail, ch.detail


def test_prebuild_builds_only_solutions_with_cuda_sources(monkeypatch):
    from types import SimpleNamespace

    import lowbit_gemm.solutions as solutions
    from lowbit_gemm.bench import harness

    built = []
    monkeypatch.setattr(solutions, "load_solution",
                        lambda d, a, n: SimpleNamespace(entry=lambda: built.append(n)))
    sel = harness.Selection(SimpleNamespace(name="grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"),
                            [SimpleNamespace(author="lowbit", name="cuda_fp4_wgmma"),
                             SimpleNamespace(author="lowbit", name="triton_fp4_exact_mma")], [])
    harness.prebuild_cuda([sel], echo=lambda *_: None)
    assert built == ["cuda_fp4_wgmma"]
