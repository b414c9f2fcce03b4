"""Checks and times the sparse CUDA kernel for few rows (cuda_sparse_fp4_mma/sparse_mma.cu) over
its tiles and a range of m, beside the Triton solution in the same run, and splits the Triton
solution's host time (harness-style mean) into its parts. Each (tile, m) is checked against the
float64 oracle on random a_vals and a_meta bytes (repeated positions, high bits set) with B over
e4m3's full range, then timed (graph replay, cold L2). On a GPU host, from the repository root:
  PYTHONPATH=src python3 tools/probe_sparse_mma.py [--ms 1,16,64,256] [--tiles 1x1,1x8,2x8] [--no-host]
--src a/sparse_mma.cu,b/sparse_mma.cu times builds of other sparse_mma.cu copies side by side (each named
after its folder)."""

import argparse
import ctypes
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_grouped_wgmma import nvcc_command  # noqa: E402
from lowbit_gemm.bench.launch_floor import ITERS, harness_mean_us  # noqa: E402
from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import accuracy_stats, sparse_gemm_oracle  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402
from lowbit_gemm.testing import sparse_pruned_inputs, sparse_random_inputs  # noqa: E402

DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
SRC = Path(__file__).resolve().parents[1] / "solutions/lowbit/gemm" / DEF / "cuda_sparse_fp4_mma/sparse_mma.cu"
N = K = 2048


def margin(c, o64):
    """Worst |c - oracle| / (atol + rtol |oracle|) over the elements: 1.0 is the check's edge."""
    o = o64.to(c.device).double()
    return float(((c.double() - o).abs() / (1e-2 + 1e-2 * o.abs())).max())


def small_m_entry(lib):
    fn = ctypes.CDLL(lib).lowbit_sparse_small_m
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 6 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def run(a_vals, a_meta, b_fp8, c, tile):
        """tile (mt, nt): every round of 8 nt tokens its own CTAs (ysplit = the rounds)."""
        m, n = c.shape
        mt, nt = tile
        err = fn(a_vals.data_ptr(), a_meta.data_ptr(), b_fp8.data_ptr(), c.data_ptr(), m, n, b_fp8.shape[1], mt, nt,
                 -(-m // (8 * nt)), torch._C._cuda_getCurrentRawStream(c.device.index))
        if err:
            raise RuntimeError(f"CUDA error {err}")
        return c
    return run


def host_split(triton_mod, ms):
    """Harness-style means of the Triton solution's call and of each piece of its dense path."""
    print("\n| m | whole call | first pass only | 2 x torch.empty | torch.mm only | flag get+set x2 |")
    print("|---|---|---|---|---|---|")
    flags = torch.backends.cuda.matmul
    for m in ms:
        a_vals, a_meta, b = (t.cuda() for t in sparse_pruned_inputs(m, N, K, seed=1, full_range_b=True))
        c = torch.empty(m, N, dtype=torch.bfloat16, device="cuda")
        whole = harness_mean_us(lambda: triton_mod.run(a_vals, a_meta, b, c), ITERS)
        plan = next(iter(triton_mod._PLANS.values()))
        row = [m, whole]
        if plan.dense:
            a16 = torch.empty(m, K, dtype=torch.bfloat16, device="cuda")
            b16 = torch.empty(N, K, dtype=torch.bfloat16, device="cuda")
            row.append(harness_mean_us(lambda: plan.kernel(a_vals, a_meta, b, a16, b16), ITERS))
            row.append(harness_mean_us(lambda: (torch.empty((m, K), dtype=torch.bfloat16, device="cuda"),
                                                 torch.empty((N, K), dtype=torch.bfloat16, device="cuda")), ITERS))
            row.append(harness_mean_us(lambda: torch.mm(a16, b16.t(), out=c), ITERS))

            def toggle():
                was = flags.allow_bf16_reduced_precision_reduction
                flags.allow_bf16_reduced_precision_reduction = False
                flags.allow_bf16_reduced_precision_reduction = was
            row.append(harness_mean_us(toggle, ITERS))
        triton_mod._PLANS.clear()
        print("| " + " | ".join(f"{x:.1f}" if isinstance(x, float) else str(x) for x in row) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="1,7,16,33,64,100,128,256,512,1024,2048")
    ap.add_argument("--tiles", default="1x1,1x2,1x4,1x8,2x2,2x4,2x8,4x1,4x2,4x4", help="mt x nt")
    ap.add_argument("--no-host", action="store_true")
    ap.add_argument("--src", default=str(SRC), help="sparse_mma.cu files, ','-separated")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    srcs = [Path(x) for x in args.src.split(",")]
    builds = {}
    for src in srcs:
        lib = f"/tmp/sparse_mma_{src.resolve().parent.name}.so"
        subprocess.run(nvcc_command(src, lib), check=True)
        builds["cuda" if len(srcs) == 1 else src.resolve().parent.name] = small_m_entry(lib)
    small = next(iter(builds.values()))
    tri = load_solution(DEF, "lowbit", "triton_sparse_fp4_exact")
    tiles = [tuple(int(x) for x in s.split("x")) for s in args.tiles.split(",")]
    ms = [int(x) for x in args.ms.split(",")]
    results = {}
    for m in ms:
        cases = [sparse_random_inputs(m, N, K, seed=m, full_range_b=True),
                 sparse_pruned_inputs(m, N, K, seed=m + 1, full_range_b=True)]
        cases = [(tuple(t.cuda() for t in x), sparse_gemm_oracle(*x)) for x in cases]
        for name, fn in [("triton", lambda *a: tri.run(*a))] + [
                (f"{b} {mt}x{nt}", lambda *a, tile=(mt, nt), f=f: f(*a, tile)) for b, f in builds.items() for mt, nt in tiles]:
            worst, bad = 0.0, 0
            for inputs, o64 in cases:
                c = torch.full((m, N), float("nan"), dtype=torch.bfloat16, device="cuda")
                fn(*inputs, c)
                torch.cuda.synchronize()
                mg = margin(c, o64)
                worst = max(worst, mg)
                bad += accuracy_stats(c, o64)["mismatches"]
            us = time_call(fn, [*cases[0][0], torch.empty(m, N, dtype=torch.bfloat16, device="cuda")],
                           l2_bytes=60 << 20, reps=10).median_us
            results[(name, m)] = (bad, worst, us)
            print(f"m {m:5d} {name:12s} bad {bad} margin {worst:.3f} {us:7.1f} us", flush=True)
    names = ["triton"] + [f"{b} {mt}x{nt}" for b in builds for mt, nt in tiles]
    print("\n| m | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for m in ms:
        cells = []
        for nm in names:
            bad, mg, us = results[(nm, m)]
            cells.append(f"{us:.1f}" + ("" if bad == 0 else f" BAD {bad}"))
        print(f"| {m} | " + " | ".join(cells) + " |")
    print("worst margin:", max(v[1] for v in results.values()))
    if not args.no_host:
        host_split(tri, [1, 64, 128, 256, 1024])
        print("\n| m | cuda 1x8 harness mean |")
        for m in [1, 64]:
            a_vals, a_meta, b = (t.cuda() for t in sparse_pruned_inputs(m, N, K, seed=1, full_range_b=True))
            c = torch.empty(m, N, dtype=torch.bfloat16, device="cuda")
            print(f"| {m} | {harness_mean_us(lambda: small(a_vals, a_meta, b, c, (1, 8)), ITERS):.1f} |", flush=True)


if __name__ == "__main__":
    main()
