"""Checks and times builds of the CUDA grouped kernel (graph replay, cold L2), for
comparing kernel variants side by side on one GPU. Each LIB is a shared library built from
grouped_wgmma.cu (with different -D flags, say), or a grouped_wgmma.cu that is built here first
(all in parallel; tools/export_wgmma_revisions.sh writes git revisions' sources as such), run at
each tile width; the checks are the probe's (reference and float64 oracle) on its edge and
serving-shaped cases.
  python3 tools/time_wgmma_variants.py a.so variants/main/grouped_wgmma.cu [--tiles 128x128,32x64] [--no-check]"""

import argparse
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_grouped_wgmma as pg  # noqa: E402
from lowbit_gemm.bench.timing import time_call  # noqa: E402
from lowbit_gemm.oracle import grouped_gemm_oracle  # noqa: E402
from lowbit_gemm.references import load_reference  # noqa: E402


def margin(c, o64):
    return float(((c.double() - o64.double()).abs() / torch.clamp(1e-2 * o64.double().abs(), min=1e-2)).max())


def check(c, ref, o64):
    bad = int((~torch.isclose(c.float(), ref.float(), atol=1e-2, rtol=1e-2)).sum())
    return bad, margin(c, o64)


def grouped(libs, tiles, check_results=True, only_shapes=None):
    ref_fn = load_reference(pg.DEF)
    checks = [("max_m_1", 1, [1, 1, 0, 1], "quantized"), ("rows_1_63_65_128", 128, [1, 63, 65, 128], "quantized"),
              ("out_of_range", 256, [-7, 300, 0, 100], "quantized"), ("odd_max_m_41", 41, [41, 17, -1, 30], "quantized"),
              ("outliers_1024", 1024, [1024, 600, 900, 1000], "outliers"), ("wide_b_scale", 128, [128, 100, 31, 77], "wide"),
              ("zero_scale", 1024, [1024, 1024, 1024, 3], "zero_scale"), ("int64_masked_m", 64, [64, 2, 0, 63], "int64"),
              ("harness_random", 96, [96, 5, 40, 0], "random"), ("a_scale_spread", 300, [300, 129, 0, 257], "a_scale_spread")]
    # each case's inputs, reference and float64 oracle made once, for every build and tile
    cases = []
    for cid, max_m, masked_m, how in checks if check_results else []:
        inputs = pg.make(max_m, masked_m, how)
        ref, o64 = ref_fn(*inputs[:5], None), grouped_gemm_oracle(*inputs).to(inputs[0].device)
        print(f"{cid}: the reference's margin against float64 {margin(ref, o64):.3f}", flush=True)
        cases.append((cid, max_m, inputs, ref, o64))
    shapes = [("max_m 1", 1, [1] * 4), ("max_m 16", 16, [16, 9, 12, 16]), ("max_m 64, 8-32", 64, [9, 32, 17, 24]),
              ("max_m 128", 128, [9, 32, 17, 24]),
              ("max_m 64, 12-64", 64, [64, 40, 12, 33]), ("256 ~76", 256, [76, 80, 70, 77]), ("512 ~260", 512, [255, 280, 233, 269]), ("200 uneven", 200, [200, 143, 67, 1]),
              ("256 out of range", 256, [-7, 300, 0, 100]), ("256 one group", 256, [0, 256, 0, 0]), ("512 full", 512, [512] * 4), ("1024 ~75 %", 1024, [768, 700, 812, 790]),
              ("2048 ~75 %", 2048, [1536, 1600, 1480, 1550]), ("4096 ~20", 4096, [20, 14, 26, 23]), ("4096 ~170", 4096, [141, 248, 152, 150]),
              ("4096 ~870", 4096, [870, 900, 850, 880]), ("4096 empty", 4096, [0] * 4), ("512 outliers", 512, [512] * 4),
              ("512 wide scales", 512, [512] * 4)]
    if only_shapes:
        shapes = [s for s in shapes if s[0] in only_shapes]
    table = []
    for lib, tile in [(lib, tile) for lib in libs for tile in tiles]:
        f = pg.watchdog_entry(str(lib))

        def run(*args, f=f, tile=tile):
            return f(*args, tile=tile)
        worst, bad_all = 0.0, 0
        for cid, max_m, inputs, ref, o64 in cases:
            c = torch.full((pg.G, max_m, pg.N), float("nan"), dtype=torch.bfloat16, device="cuda")
            run(*inputs, c)
            torch.cuda.synchronize()
            bad, mg = check(c, ref, o64)
            if bad:
                print(f"{Path(lib).stem} {cid}: bad {bad}", flush=True)
            bad_all += bad
            worst = max(worst, mg)
        times = []
        for label, max_m, masked_m in shapes:
            inputs = pg.make(max_m, masked_m, "outliers" if "outliers" in label else "wide" if "wide" in label else "quantized")
            c = torch.empty(pg.G, max_m, pg.N, dtype=torch.bfloat16, device="cuda")
            times.append(float("nan") if bad_all else time_call(run, [*inputs, c], l2_bytes=60 << 20, reps=10).median_us)
        table.append((f"{Path(lib).stem} {tile}", bad_all, worst, times))
        print(table[-1], flush=True)
    print("\n| lib | bad | margin | " + " | ".join(s[0] for s in shapes) + " |")
    for name, bad, mg, times in table:
        print(f"| {name} | {bad} | {mg:.3f} | " + " | ".join(f"{x:.1f}" for x in times) + " |")


def build(sources):
    """Each .cu among sources built with nvcc (sm_90a, -O3) into /tmp, in parallel; the library
    paths in order (a .so kept as given). The library is named after the source's folder."""
    libs, jobs = [], []
    for src in sources:
        if not src.endswith(".cu"):
            libs.append(src)
            continue
        lib = f"/tmp/{Path(src).resolve().parent.name}.so"
        cmd = pg.nvcc_command(src, lib)
        jobs.append((src, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        libs.append(lib)
    for src, job in jobs:
        out, _ = job.communicate()
        if job.returncode:
            sys.exit(f"nvcc failed on {src}:\n{out}")
    return libs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libs", nargs="+", help="shared libraries, or grouped_wgmma.cu files to build first")
    ap.add_argument("--tiles", default="128x128,128x64,32x64", help="tiles, token rows x weight rows")
    ap.add_argument("--no-check", action="store_true", help="time only (ablation builds whose results are wrong)")
    ap.add_argument("--shapes", default="", help="time only these shapes (labels, ';'-separated)")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    grouped(build(args.libs), args.tiles.split(","), check_results=not args.no_check,
            only_shapes=[x for x in args.shapes.split(";") if x])


if __name__ == "__main__":
    main()
