"""Round 13 (eleventh session): the sparse solution's warp-specialised Gluon GEMM (ws_gemm.py)
against the Triton FP8 GEMM the heuristic picks, on the H200.

For each m: the harness's pruned inputs (and random bytes at odd m), every variant's output
NaN-poisoned, compared element for element with the chosen path's (both promote every 32
products in the same order, so they should agree bit for bit) and with the float64 oracle;
then GPU time with rotating input sets and after a 128 MiB memset (scripts/gpu_sparse_gemm.py's
methods). A table is printed last.

Usage: cd /work/main; PYTHONUNBUFFERED=1 python3 scripts/gpu_ws_gemm.py   (WS_M: comma list of m)
"""

import dataclasses
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_sparse_gemm as g  # noqa: E402  (inputs, oracle, checks and timing of the sparse script)

H, sol = g.H, g.sol
WS_M = tuple(int(x) for x in os.environ.get("WS_M", "2048,8192").split(","))


def ws(bm, bn, stages, pp=False, group_m=8):
    """bm / 64 consumer warpgroups on a bm x bn tile, `stages` 128-K stages."""
    return H.GemmConfig(bm, bn, 128, 4, stages, group_m=group_m, acc_k=32, path="ws", ws=pp)


# Round 13a (first run): 2 consumers on 128x128 lost to the chosen GEMM from m = 512 (8192:
# 104.0 us with 6 stages against 95.0), PP (two 64x128 temporaries, which spilled) lost more
# (139-140); 4 stages or GROUP_M 16 no better. Round 13b: 3 consumers (192x128) and 4
# (256x64) lost too (8192: 106.5 and 113.0 against 94.1). Round 13c: PP as column halves
# (two 64x64 temporaries, no spill): no change (8192 105.1). Round 13d (diagnostic): what
# the promotion costs, with fewer promotions than the check allows (64 and 128 products),
# in both GEMMs, and the A decode alone.
VARIANTS = {"ws128x128s6": ws(128, 128, 6), "ws_acc64": dataclasses.replace(ws(128, 128, 6), acc_k=64),
            "ws_acc128": dataclasses.replace(ws(128, 128, 6), acc_k=128)}


def triton_acc(m, acc_k):
    return dataclasses.replace(H.choose(m, g.N, g.K, (9, 0)), acc_k=acc_k)


def decode_only(a_vals, a_meta, b, c):
    m, groups = a_vals.shape
    a_op = torch.empty((m, 4 * groups), dtype=torch.float8_e4m3fn, device=b.device)
    sol.decode_a_kernel[(-(-m * groups // H.DECODE_BLOCK),)](a_vals, a_meta, a_op, m * groups,
                                                            BLOCK=H.DECODE_BLOCK, num_warps=4)


def main():
    table = []
    for m in WS_M:
        a_vals, a_meta, b = (g.make_pruned(m, 1) if m % 128 == 0 else g.make_harness_like(m, 7))
        ref = g.dense_a64(a_vals, a_meta) @ b.double().T
        chosen = torch.full((m, g.N), float("nan"), dtype=torch.bfloat16, device=g.DEV)
        sol.sparse_gemm_fp4_fp8(a_vals, a_meta, b, chosen)
        rows = {"chosen": H.choose(m, g.N, g.K, (9, 0)), "triton_acc128": triton_acc(m, 128),
                "decode_only": "decode"}
        rows.update(VARIANTS)
        for name, cfg in rows.items():
            fn = decode_only if cfg == "decode" else g.launcher(cfg)
            try:
                c = torch.full((m, g.N), float("nan"), dtype=torch.bfloat16, device=g.DEV)
                fn(a_vals, a_meta, b, c)
                torch.cuda.synchronize()
                differ = int((c.view(torch.int16) != chosen.view(torch.int16)).sum())
                bad, rel, mx = g.accuracy(c, ref)
                ok = bad == 0 and rel <= 2e-3
                rot = g.time_call(fn, [a_vals, a_meta, b, c], g.L2_BYTES).median_us
                mem = g.bench_graph(lambda: fn(a_vals, a_meta, b, c))
            except Exception as exc:  # a variant that fails to compile or run is reported
                print(f"m={m} {name}: ERROR {type(exc).__name__}: {str(exc)[:300]}")
                table.append((m, name, None, None, None, False))
                continue
            g.log(kind="ws", m=m, variant=name, us_rotating=rot, us_memset=mem, differ=differ, ok=ok, rel=rel)
            print(f"m={m:5d} {name:10s} rotating {rot:8.2f} after memset {mem:8.2f} us  differ={differ} "
                  f"rel={rel:.2e} max_abs={mx:.3g} {'ok' if ok else 'BAD'}")
            table.append((m, name, rot, mem, differ, ok))
    print("\n| m | variant | rotating us | after memset us | elements differing from chosen | check |")
    print("|---|---|---|---|---|---|")
    for m, name, rot, mem, differ, ok in table:
        f = (lambda x: "-" if x is None else f"{x:.2f}")
        print(f"| {m} | {name} | {f(rot)} | {f(mem)} | {differ} | {'pass' if ok else 'FAIL'} |")


if __name__ == "__main__":
    main()
