"""Checks and times the wgmma.sp prototype (tools/proto_sparse_wgmma_sp.cu): 2:4-sparse A on
Hopper's sparse tensor cores, f16 operands, fp32 accumulation. Per m: its bad elements (first 1024 rows) against
the float64 oracle on random a_vals / a_meta bytes (repeated positions, high bits set) with B over
e4m3's full range, then GPU µs (graph replay, cold L2) of the MMA kernel alone, of the whole
three-launch call, and of cuBLAS on the same problem dense in fp16 (A decoded outside the timed
call), beside the sparse solution's dense path. On a GPU host, from the repository root:
  PYTHONPATH=src python3 tools/proto_sparse_wgmma_sp.py [--ms 1024,4096,8192]"""

import argparse
import ctypes
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_grouped_wgmma import nvcc_command  # noqa: E402
from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import accuracy_stats, sparse_gemm_oracle  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402
from lowbit_gemm.testing import sparse_random_inputs  # noqa: E402

HERE = Path(__file__).resolve().parent
DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
HEADERS = HERE.parent / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/cuda_fp4_wgmma"
N = K = 2048


def build():
    lib = "/tmp/proto_sparse_wgmma_sp.so"
    cmd = nvcc_command(HERE / "proto_sparse_wgmma_sp.cu", lib)
    subprocess.run(cmd[:1] + [f"-I{HEADERS}"] + cmd[1:], check=True)
    lib = ctypes.CDLL(lib)
    for name, n_ptr, n_int in (("proto_prep_a", 4, 2), ("proto_prep_b", 2, 2), ("proto_sp_gemm", 4, 3)):
        f = getattr(lib, name)
        f.argtypes = [ctypes.c_void_p] * n_ptr + [ctypes.c_int] * n_int + [ctypes.c_void_p]
        f.restype = ctypes.c_int
    return lib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="128,1024,4096,8192")
    args = ap.parse_args()
    lib = build()
    sol = load_solution(DEF, "lowbit", "cuda_sparse_fp4_mma")
    stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    print(torch.cuda.get_device_name(), torch.__version__)
    print("| m | bad | max abs err | MMA kernel µs | whole call µs | cuBLAS fp16 dense µs | solution (dense path) µs |")
    print("|---|---|---|---|---|---|---|")
    for m in (int(x) for x in args.ms.split(",")):
        a_vals, a_meta, b = (t.cuda() for t in sparse_random_inputs(m, N, K, seed=3, full_range_b=True))
        a_c = torch.empty(m, K // 2, dtype=torch.float16, device="cuda")
        meta = torch.empty(m // 64 * (K // 32) * 128, dtype=torch.int32, device="cuda")
        b16 = torch.empty(N, K, dtype=torch.float16, device="cuda")
        c = torch.full((m, N), float("nan"), dtype=torch.bfloat16, device="cuda")

        def prep(a_vals, a_meta, b, a_c, meta, b16):
            assert not lib.proto_prep_a(a_vals.data_ptr(), a_meta.data_ptr(), a_c.data_ptr(), meta.data_ptr(), m, K, stream())
            assert not lib.proto_prep_b(b.data_ptr(), b16.data_ptr(), N, K, stream())

        def mma(a_c, meta, b16, c):
            assert not lib.proto_sp_gemm(a_c.data_ptr(), meta.data_ptr(), b16.data_ptr(), c.data_ptr(), m, N, K, stream())

        def whole(a_vals, a_meta, b, a_c, meta, b16, c):
            prep(a_vals, a_meta, b, a_c, meta, b16)
            mma(a_c, meta, b16, c)

        whole(a_vals, a_meta, b, a_c, meta, b16, c)
        torch.cuda.synchronize()
        rows = min(m, 1024)  # the oracle's float64 product on the first rows only (CPU time)
        st = accuracy_stats(c[:rows], sparse_gemm_oracle(a_vals[:rows].cpu(), a_meta[:rows].cpu(), b.cpu()))
        a16 = torch.empty(m, K, dtype=torch.bfloat16, device="cuda")
        b_16 = torch.empty(N, K, dtype=torch.bfloat16, device="cuda")
        sol.entry().lowbit_sparse_dense_operands(a_vals.data_ptr(), a_meta.data_ptr(), b.data_ptr(), a16.data_ptr(),
                                                 b_16.data_ptr(), m, N, K, stream())
        a16, b_16 = a16.half(), b_16.half()
        t_mma = time_call(mma, [a_c, meta, b16, c], l2_bytes=60 << 20, reps=20).median_us
        t_whole = time_call(whole, [a_vals, a_meta, b, a_c, meta, b16, c], l2_bytes=60 << 20, reps=20).median_us
        t_cublas = time_call(lambda x, y: torch.mm(x, y.t()), [a16, b_16], l2_bytes=60 << 20, reps=20).median_us
        c2 = torch.empty(m, N, dtype=torch.bfloat16, device="cuda")
        t_sol = time_call(sol.run, [a_vals, a_meta, b, c2], l2_bytes=60 << 20, reps=20).median_us
        print(f"| {m} | {st['mismatches']} | {st['max_abs']:.3g} | {t_mma:.1f} | {t_whole:.1f} | {t_cublas:.1f} | {t_sol:.1f} |", flush=True)


if __name__ == "__main__":
    main()
