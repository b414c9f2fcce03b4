"""Splits a CUDA grouped kernel's time into a fixed part and a part per pipeline stage (BK = 128
of K): times each library at k = 256 .. 2048 on a decode-like bucket and on 512 full rows, and fits
time = fixed + stages x per-stage. A per-stage cost far above the MMA's (about 0.26 us for a
128 x 128 x 128 stage on an H200) says the pipeline, not the tensor cores, sets the pace; the
fixed part beside the floor (a 4-byte memset under the same timer) says what launch, prologue and
epilogue cost.
  python3 tools/k_sweep_wgmma.py variants/main/grouped_wgmma.cu lib.so [--tiles 128x128,128x64,32x64]"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_grouped_wgmma as pg  # noqa: E402
from time_wgmma_variants import build  # noqa: E402
from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.testing import grouped_inputs  # noqa: E402

KS = (256, 512, 1024, 2048)
SHAPES = (("max_m 64, 8-32", 64, [9, 32, 17, 24]), ("512 full", 512, [512] * 4))


def fit(ks, times):
    """Least-squares fixed + per-stage over stages = k / 128."""
    xs = [k / 128 for k in ks]
    mx, my = sum(xs) / len(xs), sum(times) / len(times)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, times)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libs", nargs="+")
    ap.add_argument("--tiles", default="128x128,128x64,32x64")
    args = ap.parse_args()
    tiny = torch.empty(1, dtype=torch.int32, device="cuda")
    floor = time_call(lambda t: t.zero_(), [tiny], l2_bytes=60 << 20, reps=10).median_us
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; floor (4-byte memset) {floor:.1f} us")
    print("| lib | tile | shape | " + " | ".join(f"k {k}" for k in KS) + " | fixed us | us / stage |")
    print("|---|---|---|" + "---|" * len(KS) + "---|---|")
    for lib in build(args.libs):
        run = pg.watchdog_entry(lib)
        for tile in args.tiles.split(","):
            for label, max_m, masked_m in SHAPES:
                times = []
                for k in KS:
                    inputs = tuple(t.cuda() for t in grouped_inputs(max_m, masked_m, pg.N, k, seed=1)[:5])
                    c = torch.empty(pg.G, max_m, pg.N, dtype=torch.bfloat16, device="cuda")
                    times.append(time_call(lambda *a, tile=tile: run(*a, tile=tile), [*inputs, c], l2_bytes=60 << 20,
                                           reps=10).median_us)
                fixed, per = fit(KS, times)
                print(f"| {Path(lib).stem} | {tile} | {label} | " + " | ".join(f"{t:.1f}" for t in times)
                      + f" | {fixed:.1f} | {per:.3f} |", flush=True)


if __name__ == "__main__":
    main()
