"""GPU check and timing of the grouped FP8 x FP4 masked GEMM (triton_fp4_to_fp8_wgmma).

1. Correctness of every variant against a float64 oracle (computed on the GPU) on random and
   adversarial inputs (NaN-poisoned c, masked_m negative / 0 / > max_m, wide / non-pow2 scales).
2. Timing (CUDA-graph replay, L2-cold rotating inputs, median) of each variant on the issue's
   workloads, plus the PyTorch dequant -> bf16 bmm peer. Prints a table last.

Run from the repository root: python3 scripts/gpu_grouped_gemm.py [--quick]
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import torch  # noqa: E402
import triton  # noqa: E402

from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import check_accuracy  # noqa: E402
from lowbit_gemm.quantize import quantize_act_fp8_per128, quantize_weight_fp4_per32  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
main = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma")
H = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics")
dev = torch.device("cuda")
G, N, K = 4, 2048, 2048
L2 = torch.cuda.get_device_properties(0).L2_cache_size

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                    dtype=torch.float64, device=dev)


def oracle64(a, a_s, b, b_s, mm):
    g, max_m, k = a.shape
    A = a.double() * a_s.double().repeat_interleave(128, -1)
    by = b.view(torch.uint8).long()
    codes = torch.stack((by & 15, by >> 4), -1).reshape(g, b.shape[1], k)
    B = E2M1[codes] * b_s.double().repeat_interleave(32, -1)
    c = torch.bmm(A, B.transpose(1, 2))
    rows = mm.long().clamp(0, max_m)
    valid = torch.arange(max_m, device=dev)[None, :] < rows[:, None]
    return torch.where(valid[:, :, None], c, 0.0)


def make(max_m, masked, seed=0, scales="ue8m0"):
    gen = torch.Generator(device=dev).manual_seed(seed)
    a, a_s = quantize_act_fp8_per128(torch.randn(G, max_m, K, device=dev, generator=gen))
    b, b_s = quantize_weight_fp4_per32(torch.randn(G, N, K, device=dev, generator=gen) * 0.02)
    if scales == "adversarial":
        b_s = b_s.clone()
        b_s[0, 5, 3] *= 2.0 ** 31
        b_s[0, 5, 1] *= 2.0 ** -20
        b_s[1, 100, 10] = -0.37
        b_s[2, 7, 0] = 0.0
        b_s[3, 1000:1100, 32:40] = torch.rand(100, 8, device=dev, generator=gen) * 0.01 + 1e-4
        a_s = a_s * (torch.rand(a_s.shape, device=dev, generator=gen) * 3 - 1)
    elif scales == "spread":
        b_s = torch.exp2(torch.randint(-14, -3, b_s.shape, device=dev, generator=gen).float())
    mm = torch.tensor(masked, dtype=torch.int32, device=dev)
    return a, a_s, b, b_s, mm


def torch_peer(a, a_s, b, b_s, mm, c):
    """What a user without this project runs: dequantize to bf16, bmm, mask."""
    g, max_m, k = a.shape
    A = (a.float() * a_s.repeat_interleave(128, -1)).bfloat16()
    by = b.view(torch.uint8).long()
    codes = torch.stack((by & 15, by >> 4), -1).reshape(g, b.shape[1], k)
    B = (E2M1.float()[codes] * b_s.repeat_interleave(32, -1)).bfloat16()
    out = torch.bmm(A, B.transpose(1, 2))
    valid = torch.arange(max_m, device=a.device)[None, :] < mm.long().clamp(0, max_m)[:, None]
    c.copy_(torch.where(valid[:, :, None], out, 0))
    return c


def variant_fn(cfg):
    def fn(a, a_s, b, b_s, mm, exp, c):
        main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, expected_m=exp, config=cfg)
    return fn


def default_fn(a, a_s, b, b_s, mm, exp, c):
    main.run(a, a_s, b, b_s, mm, exp, c)


C = H.Config
VARIANTS = {
    "default": None,
    # tokens on the MMA's M side (n<BM>x<BN>): BN weight rows per CTA; F = [BN, 4] scale fold
    "n128x64w4F": C(128, 64, False, 4, 3, fold2d=True),
    "n128x64w4F_s4": C(128, 64, False, 4, 4, fold2d=True),
    "n128x128w8F": C(128, 128, False, 8, 3, fold2d=True),
    "n64x128w4F": C(64, 128, False, 4, 3, fold2d=True),
    "n128x256w8F": C(128, 256, False, 8, 3, fold2d=True),
    "n256x128w8F": C(256, 128, False, 8, 3, fold2d=True),
    "n128x32w4F": C(128, 32, False, 4, 3, fold2d=True),
    "n64x64w4F": C(64, 64, False, 4, 4, fold2d=True),
    "n64x32w4F": C(64, 32, False, 4, 4, fold2d=True),
    "n32x32w4F": C(32, 32, False, 4, 4, fold2d=True),
    # weights on the MMA's M side (s<tokens>x<weights>); no F = 1-D fold, prefetched
    "s64x64w4F": C(64, 64, True, 4, 4, fold2d=True),
    "s64x64w4": C(64, 64, True, 4, 4, fold2d=False),
    "s32x64w4": C(32, 64, True, 4, 4, fold2d=False),
    "s16x64w4F": C(16, 64, True, 4, 4, fold2d=True),
    "s128x64w4F": C(128, 64, True, 4, 3, fold2d=True),
    "s128x64w4": C(128, 64, True, 4, 3, fold2d=False),
    "s64x128w4": C(64, 128, True, 4, 3, fold2d=False),
    # timing-only ablations (wrong results): 1 = no FP4 decode, 3 = no decode and no scales
    "x_n128x64F_nodec": C(128, 64, False, 4, 3, fold2d=True, ablate=1),
    "x_n128x64F_none": C(128, 64, False, 4, 3, fold2d=True, ablate=3),
    "x_s64F_nodec": C(64, 64, True, 4, 4, fold2d=True, ablate=1),
    "x_s64F_none": C(64, 64, True, 4, 4, fold2d=True, ablate=3),
}


def rnd_masked(e, max_m, seed):
    g = torch.Generator().manual_seed(seed)
    return [int(e * (0.7 + 0.6 * torch.rand(1, generator=g).item())) for _ in range(G)]


WORKLOADS = [
    # name, max_m, masked, expected_m hint
    ("m512full", 512, [512] * 4, 614),
    ("m512mix", 512, [307, 410, 512, 205], 431),
    ("m64dec", 64, [8, 17, 32, 24], 22),
    ("m64peer", 64, [3, 17, 64, 0], 22),
    ("m128dec", 128, [12, 30, 25, 9], 25),
    ("m128peer", 128, [64, 90, 40, 128], 96),
    ("m1024_75", 1024, [700, 900, 1024, 500], 908),
    ("m2048_75", 2048, [1536] * 4, 1830),
    ("m2048full", 2048, [2048] * 4, 2458),
    ("m4096e20", 4096, rnd_masked(20, 4096, 1), 24),
    ("m4096e192", 4096, rnd_masked(192, 4096, 2), 230),
    ("m4096e1024", 4096, rnd_masked(1024, 4096, 3), 1228),
]


def main_():
    quick = "--quick" in sys.argv
    p = torch.cuda.get_device_properties(0)
    print(f"GPU {p.name} sms={p.multi_processor_count} cap={torch.cuda.get_device_capability()} "
          f"torch {torch.__version__} triton {triton.__version__} date {time.strftime('%Y-%m-%d')}",
          flush=True)
    # 1. correctness
    ok = {}
    cases = [(64, [40, -2, 64, 100], "ue8m0", 20), (300, [300, 0, 77, 1000], "spread", 200),
             (200, [150, 33, 200, 1], "adversarial", 120), (512, [512] * 4, "ue8m0", 512)]
    for vname, cfg in VARIANTS.items():
        fn = default_fn if cfg is None else variant_fn(cfg)
        good = True
        if vname.startswith("x_"):
            ok[vname] = True
            continue
        for i, (max_m, masked, sc, exp) in enumerate(cases):
            a, a_s, b, b_s, mm = make(max_m, masked, seed=i, scales=sc)
            c = torch.full((G, max_m, N), float("nan"), dtype=torch.bfloat16, device=dev)
            try:
                fn(a, a_s, b, b_s, mm, exp, c)
                torch.cuda.synchronize()
                check_accuracy(c.cpu(), oracle64(a, a_s, b, b_s, mm).cpu(), what=f"{vname}/{sc}/{max_m}")
            except Exception as e:  # noqa: BLE001
                print(f"FAIL {vname} case {i}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                good = False
                break
        ok[vname] = good
        print(f"correct {vname}: {good}", flush=True)

    # 2. timing
    table = {}
    wl = WORKLOADS[:4] if quick else WORKLOADS
    for wname, max_m, masked, exp in wl:
        a, a_s, b, b_s, mm = make(max_m, masked, seed=7)
        c = torch.empty(G, max_m, N, dtype=torch.bfloat16, device=dev)
        row = {}
        rows_used = sum(min(max(x, 0), max_m) for x in masked)
        flops = 2.0 * rows_used * N * K
        bytes_min = (G * N * K // 2 + G * N * K // 32 * 4 + rows_used * K + G * max_m * N * 2)
        for vname, cfg in VARIANTS.items():
            if not ok[vname]:
                continue
            if cfg is not None and max_m > 512 and ((cfg.swap and cfg.BM < 128) or cfg.BN < 64 or cfg.BM < 64):
                continue
            fn = default_fn if cfg is None else variant_fn(cfg)
            try:
                t = time_call(fn, [a, a_s, b, b_s, mm, exp, c], L2, reps=20)
                row[vname] = t.median_us
            except Exception as e:  # noqa: BLE001
                print(f"time FAIL {vname} {wname}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        try:
            row["torch_bf16"] = time_call(torch_peer, [a, a_s, b, b_s, mm, c], L2, reps=10).median_us
        except Exception as e:  # noqa: BLE001
            print(f"peer FAIL {wname}: {e}", flush=True)
        table[wname] = (row, flops, bytes_min)
        best = min((v for k, v in row.items() if k != "torch_bf16" and not k.startswith("x_")), default=float("nan"))
        print(f"{wname}: " + " ".join(f"{k}={v:.1f}" for k, v in row.items())
              + f" | best {best:.1f}us {flops / best / 1e6:.0f}TF/s floor {bytes_min / 4.25e6:.1f}us",
              flush=True)

    print("\n=== TABLE (median us, CUDA-graph replay, L2 cold); columns = workloads ===")
    wn = list(table)
    print("variant".ljust(18) + "".join(w[:10].rjust(11) for w in wn))
    for n in list(VARIANTS) + ["torch_bf16"]:
        print(n[:18].ljust(18) + "".join((f"{table[w][0][n]:.1f}" if n in table[w][0] else "-").rjust(11) for w in wn))
    print("\n=== SUMMARY ===")
    names = list(VARIANTS) + ["torch_bf16"]
    print("workload".ljust(12) + "".join(n[:12].rjust(13) for n in names) + "  best  TF/s  floor  xpeer")
    for wname, (row, flops, bytes_min) in table.items():
        best = min((v for k, v in row.items() if k != "torch_bf16" and not k.startswith("x_")), default=float("nan"))
        peer = row.get("torch_bf16", float("nan"))
        print(wname.ljust(12) + "".join((f"{row[n]:.1f}" if n in row else "-").rjust(13) for n in names)
              + f"  {best:.1f} {flops / best / 1e6:.0f} {bytes_min / 4.25e6:.1f} {peer / best:.1f}x")


if __name__ == "__main__":
    main_()
