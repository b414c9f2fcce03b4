"""Device probe for the CUDA grouped GEMM (solutions/.../cuda_fp4_wgmma/grouped_wgmma.cu): checks
it against the definition's reference and the float64 oracle through a watchdog build (a stuck
barrier traps instead of hanging the GPU), localises a wrong K or row mapping with one-nonzero
inputs, then times it (graph replay, cold L2) beside the Triton solution. On a GPU host:
    PYTHONPATH=src python3 tools/probe_grouped_wgmma.py
"""

import argparse
import ctypes
import subprocess
import sys
from pathlib import Path

import torch

from lowbit_gemm.bench.timing import time_call
from lowbit_gemm.oracle import grouped_gemm_oracle
from lowbit_gemm.references import load_reference
from lowbit_gemm.solutions import load_solution
from lowbit_gemm.testing import grouped_inputs, grouped_random_inputs, spread_a_scale, wide_b_scale

ROOT = Path(__file__).resolve().parents[1]
DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
CU = ROOT / "solutions/lowbit/gemm" / DEF / "cuda_fp4_wgmma/grouped_wgmma.cu"
G, N, K = 4, 2048, 2048


def nvcc_command(src, lib, *defines):
    """The nvcc line that builds grouped_wgmma.cu (or a variant of it) into a shared library
    for ctypes, as the solution's build does (sm_90a, -O3), with -D flags added."""
    return (["nvcc", *(f"-D{d}" for d in defines), "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17",
             "--shared", "-Xcompiler", "-fPIC", "-o", str(lib), str(src)])


def parse_tile(tile: str):
    """'32x64' -> (32, 64, False): token rows x weight rows of the kernel's tile and whether its
    form takes a workspace: 256 x 128 tiles are the register-weights form's, 128 x 256 the
    prepared form's."""
    bm, bn = (int(x) for x in tile.split("x"))
    return bm, bn, bn == 256 or bm == 256


def watchdog_entry(path: str):
    """A -DLOWBIT_WATCHDOG build: the given one if it loads here, else built with nvcc."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        path = "/tmp/libgrouped_wgmma_watchdog.so"
        cmd = nvcc_command(CU, path, "LOWBIT_WATCHDOG")
        print("building:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        lib = ctypes.CDLL(path)
    f = lib.lowbit_grouped_wgmma
    f.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int, ctypes.c_void_p] + [ctypes.c_int] * 6 + [ctypes.c_void_p] * 2
    f.restype = ctypes.c_int
    ws_bytes = lib.lowbit_grouped_workspace_bytes
    ws_bytes.argtypes = [ctypes.c_int] * 6
    ws_bytes.restype = ctypes.c_longlong

    def run(a, a_s, b, b_s, mm, c, tile="128x128"):
        bm, bn, has_ws = parse_tile(tile)
        g, n, k = a.shape[0], b.shape[1], a.shape[2]
        ws = torch.empty(ws_bytes(g, a.shape[1], n, k, bm, bn), dtype=torch.uint8, device=a.device) if has_ws else None
        err = f(a.data_ptr(), a_s.data_ptr(), b.data_ptr(), b_s.data_ptr(), mm.data_ptr(), int(mm.dtype == torch.int64),
                c.data_ptr(), g, a.shape[1], n, k, bm, bn, None if ws is None else ws.data_ptr(),
                torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"CUDA error {err}")
        return c
    return run


def make(max_m, masked_m, how="quantized", seed=0):
    if how == "random":  # the harness's draw: every FP4 byte, Gaussian scales (negative, not powers of two)
        return tuple(t.cuda() for t in grouped_random_inputs(max_m, masked_m, N, K, seed=seed)[:5])
    inputs = grouped_inputs(max_m, masked_m, N, K, seed=seed, outliers=how == "outliers")[:5]
    if how == "wide":
        inputs = (*inputs[:3], wide_b_scale(G, N, K, seed=seed), inputs[4])
    if how == "zero_scale":  # one block of one row that cannot fold
        bs = inputs[3].clone()
        bs[1, 77, 5] = 0.0
        bs[2, 1000, 40] = 0.75
        inputs = (*inputs[:3], bs, inputs[4])
    if how == "a_scale_spread":  # token scales over 60 binades and zero blocks: the prepared form's rescale
        inputs = (inputs[0], spread_a_scale(inputs[1], seed=seed), *inputs[2:])
    if how == "int64":
        inputs = (*inputs[:4], inputs[4].to(torch.int64))
    return tuple(t.cuda() for t in inputs)


def diagnose(run):
    """A single nonzero A element: which output row and which B column (by code) does it reach?"""
    max_m = 128
    a = torch.zeros(G, max_m, K, dtype=torch.float8_e4m3fn, device="cuda")
    a_s = torch.ones(G, max_m, K // 128, device="cuda")
    codes = torch.randint(0, 16, (G, N, K), device="cuda")
    b = (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8).view(torch.int8)
    b_s = torch.ones(G, N, K // 32, device="cuda")
    mm = torch.full((G,), max_m, dtype=torch.int32, device="cuda")
    lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], device="cuda")
    bval = lut[codes[0]]  # [N, K]
    for r, k in [(0, 0), (0, 1), (0, 2), (0, 8), (0, 9), (0, 31), (0, 32), (0, 100), (1, 0), (8, 0), (17, 5), (64, 3)]:
        a.zero_()
        a[0, r, k] = 1.0
        c = torch.full((G, max_m, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        run(a, a_s, b, b_s, mm, c)
        torch.cuda.synchronize()
        cf = c[0].float()
        rows = (cf.abs().sum(1) > 0).nonzero().flatten().tolist()
        found = []
        for rr in rows[:2]:
            err = (cf[rr][None, :] - bval.t()).abs().amax(1)
            kk = int(err.argmin())
            found.append((rr, kk, float(err[kk])))
        print(f"  A[0, {r}, {k}] = 1 -> rows {rows[:4]}, nan {int(torch.isnan(cf).sum())}; best B column {found}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-lib", default=str(ROOT / ".build/libgrouped_wgmma_watchdog.so"),
                    help="a -DLOWBIT_WATCHDOG build for the checks (built here with nvcc when it does not load)")
    ap.add_argument("--no-time", action="store_true")
    args = ap.parse_args()
    run = watchdog_entry(args.check_lib)
    ref_fn = load_reference(DEF)
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    ok_all = True
    for cid, max_m, masked_m, how in [
            ("max_m_1", 1, [1, 1, 0, 1], "quantized"), ("rows_1_63_65_128", 128, [1, 63, 65, 128], "quantized"),
            ("out_of_range", 256, [-7, 300, 0, 100], "quantized"), ("odd_max_m_41", 41, [41, 17, -1, 30], "quantized"),
            ("outliers_1024", 1024, [1024, 600, 900, 1000], "outliers"), ("full_512", 512, [512] * 4, "quantized"),
            ("wide_b_scale", 128, [128, 100, 31, 77], "wide"), ("zero_scale", 1024, [1024, 1024, 1024, 3], "zero_scale"),
            ("int64_masked_m", 64, [64, 2, 0, 63], "int64")]:
        inputs = make(max_m, masked_m, how)
        c = torch.full((G, max_m, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        run(*inputs, c)
        torch.cuda.synchronize()
        ref = ref_fn(*inputs[:5], None)
        o64 = grouped_gemm_oracle(*inputs).to(c.device)
        bad = ~torch.isclose(c.float(), ref.float(), atol=1e-2, rtol=1e-2)
        margin = float(((c.double() - o64.double()).abs() / torch.clamp(1e-2 * o64.double().abs(), min=1e-2)).max())
        print(f"{cid:18s}: bad {int(bad.sum())}, nan {int(torch.isnan(c).sum())}, worst margin vs oracle {margin:.3f}",
              flush=True)
        ok_all &= int(bad.sum()) == 0
    if not ok_all:
        print("diagnosing", flush=True)
        diagnose(run)
        return 1
    if args.no_time:
        return 0
    own = load_solution(DEF, "lowbit", "cuda_fp4_wgmma").run
    tri = load_solution(DEF, "lowbit", "triton_fp4_exact_mma").run
    rows = []
    for label, max_m, masked_m, hint in [
            ("max_m 1", 1, [1, 1, 1, 1], 1), ("max_m 16", 16, [16, 9, 12, 16], 16), ("max_m 64, 8-32", 64, [9, 32, 17, 24], 38),
            ("max_m 128", 128, [9, 32, 17, 24], 38), ("512 full", 512, [512] * 4, 614),
            ("1024 ~75 %", 1024, [768, 700, 812, 790], 921), ("2048 ~75 %", 2048, [1536, 1600, 1480, 1550], 1900),
            ("4096 ~20", 4096, [20, 14, 26, 23], 27), ("4096 ~870", 4096, [870, 900, 850, 880], 1060)]:
        inputs = make(max_m, masked_m)
        c = torch.empty(G, max_m, N, dtype=torch.bfloat16, device="cuda")
        t_own = time_call(own, [*inputs, hint, c], l2_bytes=60 << 20, reps=10).median_us
        t_tri = time_call(tri, [*inputs, hint, c], l2_bytes=60 << 20, reps=10).median_us
        rows.append((label, t_own, t_tri))
        print(f"{label}: {t_own:.1f} {t_tri:.1f}", flush=True)
    print("\n| workload | cuda_fp4_wgmma | triton_fp4_exact_mma |\n|---|---|---|")
    for label, a, b in rows:
        print(f"| {label} | {a:.1f} | {b:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
