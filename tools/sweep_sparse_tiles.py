"""Checks and times the sparse solution's one-pass kernel (triton_sparse_fp4_exact) over a grid
of tiles at small m, beside the dense-operands path, for choosing heuristics.RULES: each
(tile, m) is checked against the float64 oracle (every element within the harness's
tolerance, FP8 B over e4m3's full range) and then timed (graph replay, cold L2). On a GPU host:
  PYTHONPATH=src python3 tools/sweep_sparse_tiles.py [--ms 1,16,64,128,256] [--quick]"""

import argparse
import itertools

import torch

from lowbit_gemm.bench.timing import time_call
from lowbit_gemm.oracle import check_accuracy, sparse_gemm_oracle
from lowbit_gemm.solutions import load_solution
from lowbit_gemm.testing import nan_output, sparse_pruned_inputs

DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
N = K = 2048


def tiles(quick: bool):
    """Tiles of the one-pass kernel worth timing: B's rows on the MMA's M side (SWAP) when A's
    tile is narrow, more programs (smaller BN) for the bandwidth of more SMs."""
    if quick:
        grid = itertools.product([16], [16, 32, 64], [True], [4], [4])
    else:
        grid = itertools.product([16, 32], [16, 32, 64], [True, False], [4], [3, 4, 6])
    yield from grid  # every BM and BN at least 16: the MMA's M side holds 16 rows at least


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="1,16,64,128,256", help="rows of A")
    ap.add_argument("--quick", action="store_true", help="a small grid")
    args = ap.parse_args()
    mod = load_solution(DEF, "lowbit", "triton_sparse_fp4_exact")
    Tile = load_solution(DEF, "lowbit", "triton_sparse_fp4_exact", entry="heuristics").Tile
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    results = []
    for m in (int(x) for x in args.ms.split(",")):
        inputs = tuple(t.cuda() for t in sparse_pruned_inputs(m, N, K, seed=m, full_range_b=True)[:3])
        oracle = sparse_gemm_oracle(*inputs).cuda()
        for spec in [None, "dense", *tiles(args.quick)]:
            tile = spec if spec in (None, "dense") else Tile(*spec)
            name = "heuristics" if spec is None else "dense path" if spec == "dense" else "BM %d BN %d SWAP %d w%d s%d" % spec

            def run(a_vals, a_meta, b_fp8, c, tile=tile):
                return mod.sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, c, tile=tile)
            c = nan_output((m, N), device="cuda")
            try:
                run(*inputs, c)
                torch.cuda.synchronize()
                check_accuracy(c, oracle, what=f"m {m} {name}")
            except Exception as e:  # a tile the kernel cannot take, or a wrong result: say which
                print(f"m {m} {name}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                continue
            us = time_call(run, [*inputs, torch.empty(m, N, dtype=torch.bfloat16, device="cuda")],
                           l2_bytes=60 << 20, reps=10).median_us
            results.append((m, name, us))
            print(f"m {m:5d}  {name:28s} {us:7.1f} us", flush=True)
    print("\nbest a m:")
    for m in sorted({r[0] for r in results}):
        best = sorted((r for r in results if r[0] == m), key=lambda r: r[2])[:3]
        print(f"  m {m}: " + "; ".join(f"{name} {us:.1f}" for _, name, us in best))


if __name__ == "__main__":
    main()
