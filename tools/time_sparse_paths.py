"""Checks and times each path of the sparse CUDA solution (cuda_sparse_fp4_mma), forced, at
each m (and the few-rows kernel's tile where the rules choose it), for choosing heuristics.RULES: the output against the float64 oracle (B over e4m3's
full range, random meta bytes), then the GPU time (CUDA-graph replay median, cold L2) and a
host-inclusive mean (back-to-back calls, as FlashInfer-Bench times them), beside cuBLAS's dense
fp16 GEMM on pre-decoded operands. --regw-proxy adds, up to m 1024, the grouped CUDA solution's
register-weights form (weights decoded into dense wgmma's register operand, tokens' fp16 images
from a first pass, no pass over the weights) on as many groups of m rows as fill one wave of its
256 x 128 tiles: the time of a CTA's whole 256 x 128 x k tile in this data flow, which a sparse
form with no pass over B (sparse_gemm.md, next item 2) would split over smaller tiles. On a
Hopper host:
  PYTHONPATH=src python3 tools/time_sparse_paths.py [--ms 256,512,1024,2048,3072,4096,8192] [--paths wgmma_sp_128,dense] [--regw-proxy]"""

import argparse

import torch

from lowbit_gemm.bench.launch_floor import harness_mean_us
from lowbit_gemm.bench.timing import time_call
from lowbit_gemm.numerics import sparse_a_dense
from lowbit_gemm.oracle import check_accuracy, sparse_gemm_oracle
from lowbit_gemm.solutions import load_solution
from lowbit_gemm.testing import grouped_inputs, nan_output, sparse_random_inputs

DEF, SOL = "sparse_gemm_fp4_fp8_n2048_k2048", "cuda_sparse_fp4_mma"
N = K = 2048
L2 = 60 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="256,512,1024,2048,3072,4096,8192")
    ap.add_argument("--paths", default="", help="comma-separated paths to time (default: every path)")
    ap.add_argument("--regw-proxy", action="store_true", help="also time the grouped register-weights form, g 1")
    args = ap.parse_args()
    only = set(args.paths.split(",")) if args.paths else None  # the paths to time; None: all
    mod = load_solution(DEF, "lowbit", SOL)
    heur = load_solution(DEF, "lowbit", SOL, entry="heuristics")
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    print("| m | path | chosen | check | GPU us | host-inclusive us | cuBLAS fp16 dense GPU us |")
    print("|---|---|---|---|---|---|---|")
    for m in (int(x) for x in args.ms.split(",")):
        a_vals, a_meta, b = (t.cuda() for t in sparse_random_inputs(m, N, K, seed=m, full_range_b=True))
        oracle = sparse_gemm_oracle(a_vals, a_meta, b)
        a16, b16 = sparse_a_dense(a_vals, a_meta).half(), b.half()
        t_cublas = time_call(lambda x, y: torch.mm(x, y.t()), [a16, b16], l2_bytes=L2).median_us
        del a16, b16
        chosen = heur.choose(m, N)
        for path in (*heur.PATHS, *(() if chosen in heur.PATHS else (chosen,))):  # the few-rows tile where chosen
            if only and path not in only:
                continue
            c = nan_output((m, N), "cuda")
            mod.sparse_gemm_fp4_fp8(a_vals, a_meta, b, c, tile=path)
            torch.cuda.synchronize()
            st = check_accuracy(c, oracle, what=f"{path} m {m}")
            worst = f"{st['mismatches']} bad, rel norm {st['rel_norm']:.2g}"
            fn = lambda x, y, z, o, path=path: mod.sparse_gemm_fp4_fp8(x, y, z, o, tile=path)  # noqa: E731
            t_gpu = time_call(fn, [a_vals, a_meta, b, c], l2_bytes=L2).median_us
            t_host = harness_mean_us(lambda: fn(a_vals, a_meta, b, c), 50)
            print(f"| {m} | {path} | {'yes' if path == chosen else ''} | {worst} | {t_gpu:.1f} | {t_host:.1f} | "
                  f"{t_cublas:.1f} |", flush=True)
        if args.regw_proxy and m <= 1024:
            g = max(1, torch.cuda.get_device_properties(0).multi_processor_count // (-(-m // 256) * (N // 128)))
            print(f"| {m} | grouped register-weights, {g} groups of {m} rows (proxy) | | {regw_proxy(m, g)}",
                  flush=True)


def regw_proxy(m, g):
    """'check | GPU us | host-inclusive us |' of the grouped solution's 256 x 128 register-weights
    form on g groups of m token rows, all of them computed."""
    from lowbit_gemm.oracle import grouped_gemm_oracle

    grouped = load_solution("grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048", "lowbit", "cuda_fp4_wgmma")
    ins = [t.cuda() for t in grouped_inputs(m, [m] * g, N, K, seed=m)[:5]]
    c = nan_output((g, m, N), "cuda")
    fn = lambda a, a_s, b, b_s, mm, o: grouped.grouped_gemm_fp8_fp4_masked(  # noqa: E731
        a, a_s, b, b_s, mm, o, expected_m=m, tile=(256, 128, "register"))
    fn(*ins, c)
    torch.cuda.synchronize()
    st = check_accuracy(c.cpu(), grouped_gemm_oracle(*(t.cpu() for t in ins)), what=f"regw proxy m {m}")
    t_gpu = time_call(fn, [*ins, c], l2_bytes=L2).median_us
    t_host = harness_mean_us(lambda: fn(*ins, c), 50)
    return f"{st['mismatches']} bad | {t_gpu:.1f} | {t_host:.1f} |"


if __name__ == "__main__":
    main()
