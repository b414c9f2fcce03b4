"""GPU check and timing of the two-pass path's decode pass: decode_pass.py (Gluon) against
kernel.decode_b_kernel (Triton), nineteenth session, run 84 of docs/kernels/grouped_gemm.md.

1. Bit equality: both kernels decode the same b_fp4 / b_scale into poisoned bq and ref
   buffers, for every (rows, blocks, warps) config timed below, with and without ROW_REF, on
   scales that fold, that do not (wide, not powers of two, negative, zero, subnormal, huge),
   rows whose first block does not fold (ROW_REF's reference), n not a multiple of the rows per
   program, and groups with no rows (their buffers must stay poisoned in both).
2. GPU time (CUDA-graph replay, L2 cold, median) of the decode pass alone per kernel and
   config, with all four groups, one group, and none working.
3. GPU time of run() on the two-pass workloads with the Gluon decode pass and with
   decode_b_kernel (main.decode_pass_kernel set to None), the GEMM pass the same.
Prints a table last. Run from the repository root: python3 scripts/gpu_decode_pass.py
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from gpu_grouped_gemm import G, K, L2, N, WORKLOADS, dev, main, make  # noqa: E402
from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
KER = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "kernel")
DP = load_solution(DEF, "lowbit", "triton_fp4_to_fp8_wgmma", "decode_pass")
POISON = 0x7F7F7F7F  # e4m3 NaN bytes; as a float32 ref 3.39e38, which neither kernel writes

# name -> (kernel, (rows per program, 128-K blocks per program, warps), programs per group for
# the loop kernel, stores on). The heuristic's (16, 4, 4) first.
VARIANTS = {
    "triton 16x4w4": ("triton", (16, 4, 4), 0, True),
    "gluon 16x4w4": ("gluon", (16, 4, 4), 0, True),
    "gluon 16x4w4 nostore": ("gluon", (16, 4, 4), 0, False),
    "loop 16x4w4 p64": ("loop", (16, 4, 4), 64, True),
    "loop 16x4w4 p128": ("loop", (16, 4, 4), 128, True),
    "loop 16x4w4 p256": ("loop", (16, 4, 4), 256, True),
    "loop 32x4w8 p64": ("loop", (32, 4, 8), 64, True),
    "loop 32x4w8 p128": ("loop", (32, 4, 8), 128, True),
    "loop 16x4w4 p128 nostore": ("loop", (16, 4, 4), 128, False),
}


def decode(vname, b, b_s, mm, max_m, row_ref):
    """bq (int32 words) and ref from one decode pass into poisoned buffers."""
    g, n, kh = b.shape
    k = 2 * kh
    bq = torch.full((g, n, k // 4), POISON, dtype=torch.int32, device=dev)
    ref = torch.full((g, k // 128, n), POISON, dtype=torch.int32, device=dev).view(torch.float32)
    launch(vname, b, b_s, mm, bq, ref, max_m, row_ref)
    torch.cuda.synchronize()
    return bq, ref.view(torch.int32)


def launch(vname, b, b_s, mm, bq, ref, max_m, row_ref):
    kind, (br, kper, warps), ppg, store = VARIANTS[vname]
    g, n, kh = b.shape
    k = 2 * kh
    grid = (-(-n // br), k // (128 * kper), g)
    if kind == "gluon":
        DP.decode_pass_kernel[grid](b, b_s, mm, bq, ref, max_m, n, k, BR=br, KPER=kper, ROW_REF=row_ref, PDL=False,
                                    WARPS=warps, STORE=store, num_warps=warps)
    elif kind == "loop":
        DP.decode_loop_kernel[(ppg, 1, g)](b, b_s, mm, bq, ref, max_m, n, k, BR=br, KPER=kper, ROW_REF=row_ref,
                                           PDL=False, WARPS=warps, STORE=store, num_warps=warps)
    else:
        KER.decode_b_kernel[grid](b, b_s, mm, bq, ref, max_m, n, k, BR=br, USE_ASM=True, PDL=False, KPER=kper,
                                  ROW_REF=row_ref, num_warps=warps)


class LoopShim:
    """Stands in for main.decode_pass_kernel: launches decode_loop_kernel over (ppg, 1, g)
    with main's arguments; returns nothing, so main never caches it with its own grid."""
    def __init__(self, vname):
        _, (self.br, self.kper, self.warps), self.ppg, _ = VARIANTS[vname]
        self.arg_names = DP.decode_loop_kernel.arg_names

    def __getitem__(self, grid):
        def go(*args, **kw):
            kw = {**kw, "BR": self.br, "KPER": self.kper, "WARPS": self.warps, "num_warps": self.warps}
            DP.decode_loop_kernel[(self.ppg, 1, grid[2])](*args, **kw)
        return go


def scale_cases(n, k, gen):
    """{name: b_scale [G, n, k / 32]} on which the fold takes every branch."""
    ks = k // 32
    base = torch.exp2(torch.randint(-9, -5, (G, n, ks), device=dev, generator=gen).float())
    cases = {"ue8m0": base}
    x = base.clone()
    x[0, :, 4:8] *= 2.0 ** 20             # one block wider than the fold allows, every row
    x[1, 3, :4] = -x[1, 3, :4]            # negative
    x[1, 4, 8] = 0.0                      # zero
    x[1, 5, 12] = 1e-40                   # subnormal
    x[2, 6, 16] = 2.0 ** 120              # huge
    x[2, 7, 20] = 0.3                     # not a power of two
    x[3, 8:40, 0:4] *= 2.0 ** -15         # rows whose first block sets a low reference (ROW_REF)
    x[3, 40:60, 0:4] = 0.37               # rows whose first block folds nothing (ROW_REF: no block folds)
    x[3, 60:80, 40:44] *= 2.0 ** 13       # a later block above the row's reference
    cases["adversarial"] = x
    cases["wide"] = base * torch.exp2(torch.randint(-16, 17, base.shape, device=dev, generator=gen).float())
    cases["nonpow2"] = torch.rand(base.shape, device=dev, generator=gen) * 0.01 + 1e-4
    return cases


def check():
    gen = torch.Generator(device=dev).manual_seed(84)
    failures, checked = [], 0
    for n in (N, 200):
        b = torch.randint(-128, 128, (G, n, K // 2), dtype=torch.int8, device=dev, generator=gen)
        for sname, b_s in scale_cases(n, K, gen).items():
            for masked in ([5, 1, 3, 7], [0, 9, -3, 2 ** 31 - 1]):
                mm = torch.tensor(masked, dtype=torch.int32, device=dev)
                for vname, (kind, cfg, _, store) in VARIANTS.items():
                    if kind == "triton" or not store:
                        continue
                    for row_ref in (False, True):
                        want = decode("triton 16x4w4", b, b_s, mm, 8, row_ref)
                        got = decode(vname, b, b_s, mm, 8, row_ref)
                        checked += 1
                        for what, x, y in (("bq", got[0], want[0]), ("ref", got[1], want[1])):
                            if not torch.equal(x, y):
                                bad = int((x != y).sum())
                                failures.append(f"n={n} {sname} masked={masked} {vname} row_ref={row_ref}: "
                                                f"{what} differs in {bad} words")
                        # Groups without rows stay untouched (poisoned) in both.
                        for gi, m in enumerate(masked):
                            if min(m, 8) <= 0 and not bool((got[0][gi] == POISON).all()):
                                failures.append(f"n={n} {sname} masked={masked} {vname}: group {gi} written")
    for f in failures[:20]:
        print("FAIL", f, flush=True)
    print(f"check: {checked - len(failures)} of {checked} comparisons bit-equal ({len(failures)} failures)", flush=True)
    return not failures


def time_decode():
    rows = {}
    gen = torch.Generator(device=dev).manual_seed(1)
    b = torch.randint(-128, 128, (G, N, K // 2), dtype=torch.int8, device=dev, generator=gen)
    b_s = torch.exp2(torch.randint(-9, -5, (G, N, K // 32), device=dev, generator=gen).float())
    bq = torch.empty((G, N, K // 4), dtype=torch.int32, device=dev)
    ref = torch.empty((G, K // 128, N), dtype=torch.float32, device=dev)
    for label, masked in (("all4", [512] * 4), ("one", [0, 256, 0, 0]), ("none", [0] * 4)):
        mm = torch.tensor(masked, dtype=torch.int32, device=dev)
        for vname in VARIANTS:
            for row_ref in (True, False):
                def fn(b, b_s, mm, bq, ref, vname=vname, row_ref=row_ref):
                    launch(vname, b, b_s, mm, bq, ref, 512, row_ref)
                t = time_call(fn, [b, b_s, mm, bq, ref], L2, reps=20).median_us
                key = f"{vname}{' rr' if row_ref else ''}"
                rows.setdefault(key, {})[label] = t
                print(f"decode {label} {key}: {t:.2f} us", flush=True)
    return rows


def time_run(best_loop):
    names = ("m512full", "m512mix", "m1024_75", "m2048full", "m4096e20", "m4096e192", "m4096e1024", "h200",
             "h256one", "h256mix")
    out = {}
    gluon_kernel = main.decode_pass_kernel
    kinds = (("gluon", gluon_kernel), ("loop", LoopShim(best_loop)), ("triton", None))
    for wname, max_m, masked, exp in [w for w in WORKLOADS if w[0] in names]:
        a, a_s, b, b_s, mm = make(max_m, masked, seed=7)
        c = torch.empty(G, max_m, N, dtype=torch.bfloat16, device=dev)
        row = {}
        for rep in ("", "2"):
            for label, kern in kinds:
                main.decode_pass_kernel = kern
                main._PLANS.clear()
                row[label + rep] = time_call(lambda *args: main.run(*args), [a, a_s, b, b_s, mm, exp, c], L2,
                                             reps=20).median_us
        main.decode_pass_kernel = gluon_kernel
        main._PLANS.clear()
        out[wname] = row
        print(f"run {wname}: " + " ".join(f"{k}={v:.2f}" for k, v in row.items()), flush=True)
    return out


if __name__ == "__main__":
    print(f"torch {torch.__version__}, triton {__import__('triton').__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    ok = check()
    dec = time_decode()
    loops = [v for v in VARIANTS if VARIANTS[v][0] == "loop" and VARIANTS[v][3]]
    best_loop = min(loops, key=lambda v: dec[v + " rr"]["all4"] + dec[v]["all4"])
    print(f"best loop variant (all four groups): {best_loop}", flush=True)
    runs = time_run(best_loop) if ok else {}
    print("\n=== decode pass alone, GPU us (graph replay, L2 cold, median) ===")
    print("variant".ljust(30) + "".join(c.rjust(9) for c in ("all4", "one", "none")))
    for key, r in dec.items():
        print(key.ljust(30) + "".join(f"{r[c]:.2f}".rjust(9) for c in ("all4", "one", "none")))
    print(f"\n=== run(), GPU us: Gluon one-shot / {best_loop} / decode_b_kernel (each timed twice) ===")
    for wname, r in runs.items():
        best = lambda k: min(r[k], r[k + "2"])  # noqa: E731
        print(wname.ljust(12) + " ".join(f"{k}={v:.2f}" for k, v in r.items())
              + f"  gluon-triton={best('gluon') - best('triton'):+.2f} loop-triton={best('loop') - best('triton'):+.2f}")
    print("check passed" if ok else "CHECK FAILED")
