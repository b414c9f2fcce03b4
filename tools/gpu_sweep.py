"""Tile sweep of the fp16-MMA kernels on a CUDA GPU: exactness (harness rule against the
definition's fp32 reference; float64 oracle) and GPU time (graph replay, cold L2) per tile,
beside cuBLAS / cuSPARSELt fp16 on the same data. Prints one table per definition.

  python tools/gpu_sweep.py [grouped] [sparse]
"""

import sys
import time

import torch

from lowbit_gemm.bench.timing import time_call
from lowbit_gemm.quantize import prune_2of4_fp4, quantize_act_fp8_per128, quantize_weight_fp4_per32
from lowbit_gemm.references import GROUPED, SPARSE, load_reference
from lowbit_gemm.solutions import load_solution

L2 = torch.cuda.get_device_properties(0).L2_cache_size if torch.cuda.is_available() else 0


def margin(out, ref):
    o, r = out.float(), ref.float()
    m = (o - r).abs() / (1e-2 + 1e-2 * r.abs())
    m = torch.where(torch.isnan(m), torch.full_like(m, float("inf")), m)
    return int((m > 1).sum()), float(m.max())


def grouped_inputs(max_m, masked, outliers, seed):
    g, n, k = 4, 2048, 2048
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(g, max_m, k, device="cuda", generator=gen)
    if outliers:
        ch = torch.randperm(k, device="cuda", generator=gen)[:16]
        x[..., ch] *= 50.0
    a, a_s = quantize_act_fp8_per128(x)
    sig = torch.exp2(torch.empty(g, n, 1, device="cuda").uniform_(-10, -4, generator=gen))
    w = torch.randn(g, n, k, device="cuda", generator=gen) * sig
    if outliers:
        hit = torch.rand(g, n, k, device="cuda", generator=gen) < 1e-3
        w = torch.where(hit, w * 30.0, w)
    b, b_s = quantize_weight_fp4_per32(w)
    return a, a_s, b, b_s, torch.tensor(masked, dtype=torch.int32, device="cuda")


def sparse_inputs(m, seed):
    n, k = 2048, 2048
    gen = torch.Generator(device="cuda").manual_seed(seed)
    v, meta = prune_2of4_fp4(torch.randn(m, k, device="cuda", generator=gen) * 2)
    bw = torch.randn(n, k, device="cuda", generator=gen)
    b = (bw * (448.0 / bw.abs().max())).to(torch.float8_e4m3fn)
    return v, meta, b


def grouped(sweep_all):
    main = load_solution(GROUPED, "lowbit", "triton_fp4_fp16_mma")
    H = load_solution(GROUPED, "lowbit", "triton_fp4_fp16_mma", "heuristics")
    ref_fn = load_reference(GROUPED)
    T = H.Tile
    small = [T(16, 64, True, 4, 4), T(32, 64, True, 4, 2), T(32, 64, True, 4, 3), T(32, 128, True, 8, 2),
             T(64, 128, True, 8, 2), T(16, 128, True, 8, 3), T(32, 128, True, 4, 2)]
    big = [T(128, 128, False, 8, 2), T(128, 128, False, 8, 1), T(128, 128, False, 8, 3), T(64, 128, False, 4, 2),
           T(128, 64, False, 4, 2), T(64, 128, True, 8, 2), T(128, 128, True, 8, 2)]
    cases = [("max_m 1", 1, [1, 1, 0, 1], 1, small[:2], False),
             ("64 ~24", 64, [20, 27, 24, 22], 28, small, False),
             ("128 8-32", 128, [27, 9, 32, 18], 25, small, False),
             ("512 full", 512, [512] * 4, 512, big, False),
             ("512 full outl", 512, [512] * 4, 512, big[:4], True),
             ("2048 75%", 2048, [1500, 1600, 1450, 1550], 1844, big, False),
             ("4096 e20", 4096, [15, 24, 19, 22], 24, small[:3], False),
             ("64 ~24 outl", 64, [20, 27, 24, 22], 28, small[:3], True)]
    rows = []
    for name, max_m, masked, em, tiles, outl in cases:
        a, a_s, b, b_s, mm = grouped_inputs(max_m, masked, outl, 1)
        ref = ref_fn(a, a_s, b, b_s, mm, em)
        for t in tiles:
            c = torch.full((4, max_m, 2048), float("nan"), dtype=torch.bfloat16, device="cuda")
            t0 = time.time()
            try:
                main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, em, tile=t)
                torch.cuda.synchronize()
                bad, worst = margin(c, ref)
                us = time_call(lambda *x: main.grouped_gemm_fp8_fp4_masked(*x[:5], x[5], em, tile=t),
                               [a, a_s, b, b_s, mm, c], L2).median_us
            except Exception as e:
                print(name, t, "FAILED", repr(e)[:300], flush=True)
                continue
            rows.append((name, f"{t.BM}x{t.BN}{'s' if t.SWAP else ''} w{t.num_warps} s{t.num_stages}", bad, worst, us))
            print(*rows[-1], f"({time.time() - t0:.0f}s)", flush=True)
        # cuBLAS fp16 bmm on pre-dequantized operands (the exact anchor).
        a16 = (a.float() * a_s.repeat_interleave(128, -1)).half()
        lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], device="cuda")
        by = b.view(torch.uint8).long()
        b16 = (lut[torch.stack((by & 15, by >> 4), -1).flatten(-2)] * b_s.repeat_interleave(32, -1)).half()
        us = time_call(lambda x, y: torch.bmm(x, y.transpose(1, 2)), [a16, b16], L2).median_us
        rows.append((name, "cublas fp16 bmm", "", "", us))
        print(*rows[-1], flush=True)
    print("\n| grouped case | tile | bad | worst margin | GPU us |\n|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(f"{x:.3g}" if isinstance(x, float) else str(x) for x in r) + " |")


def sparse(sweep_all):
    main = load_solution(SPARSE, "lowbit", "triton_sparse_fp4_fp16_mma")
    H = load_solution(SPARSE, "lowbit", "triton_sparse_fp4_fp16_mma", "heuristics")
    ref_fn = load_reference(SPARSE)
    T = H.Tile
    small = [T(16, 64, True, 4, 4), T(16, 32, False, 4, 4), T(32, 64, True, 4, 4), T(16, 128, True, 8, 4),
             T(64, 64, True, 4, 4)]
    big = [T(128, 128, False, 8, 2), T(128, 128, False, 8, 1), T(128, 256, False, 8, 2), T(64, 128, False, 4, 2),
           T(128, 64, False, 4, 2), T(128, 128, True, 8, 2)]
    cases = [(1, small), (16, small), (64, small), (129, big[:4] + small[3:]), (256, big + small[3:]),
             (1024, big), (4096, big), (8192, big)]
    rows = []
    for m, tiles in cases:
        v, meta, b = sparse_inputs(m, 2)
        ref = ref_fn(v, meta, b)
        for t in tiles:
            c = torch.full((m, 2048), float("nan"), dtype=torch.bfloat16, device="cuda")
            t0 = time.time()
            try:
                main.sparse_gemm_fp4_fp8(v, meta, b, c, tile=t)
                torch.cuda.synchronize()
                bad, worst = margin(c, ref)
                us = time_call(lambda *x: main.sparse_gemm_fp4_fp8(*x, tile=t), [v, meta, b, c], L2).median_us
            except Exception as e:
                print(m, t, "FAILED", repr(e)[:300], flush=True)
                continue
            rows.append((m, f"{t.BM}x{t.BN}{'s' if t.SWAP else ''} w{t.num_warps} s{t.num_stages}", bad, worst, us))
            print(*rows[-1], f"({time.time() - t0:.0f}s)", flush=True)
        dense = ref.float()  # placeholder shape; the dense A is decoded below
        lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], device="cuda")
        vv, mt = v.view(torch.uint8).long(), meta.view(torch.uint8).long()
        a = torch.zeros(max(64, -(-m // 64) * 64), 512, 4, device="cuda")
        a[:m].scatter_add_(2, torch.stack((mt & 3, (mt >> 2) & 3), -1), lut[torch.stack((vv & 15, vv >> 4), -1)])
        a16 = a.view(a.shape[0], 2048).half()
        b16 = b.half()
        us = time_call(lambda x, y: torch.mm(x, y.t()), [a16, b16], L2).median_us
        rows.append((m, "cublas fp16 dense", "", "", us))
        print(*rows[-1], flush=True)
        try:
            comp = torch._cslt_compress(a16)
            alg = torch._cslt_sparse_mm_search(comp, b16.t())
            us = time_call(lambda x, y: torch._cslt_sparse_mm(x, y.t(), alg_id=alg), [comp, b16], L2).median_us
            rows.append((m, f"cusparselt fp16 alg {alg}", "", "", us))
            print(*rows[-1], flush=True)
        except Exception as e:
            print(m, "cusparselt FAILED", repr(e)[:300], flush=True)
    print("\n| sparse m | tile | bad | worst margin | GPU us |\n|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(f"{x:.3g}" if isinstance(x, float) else str(x) for x in r) + " |")


if __name__ == "__main__":
    which = sys.argv[1:] or ["grouped", "sparse"]
    print(torch.cuda.get_device_name(), torch.__version__, __import__("triton").__version__, flush=True)
    for w in which:
        {"grouped": grouped, "sparse": sparse}[w](True)
