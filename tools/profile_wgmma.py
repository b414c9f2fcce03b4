"""Launches one case of a prebuilt CUDA grouped library a few times, for a profiler to catch:
  ncu -k regex:wgmma --launch-skip 1 --launch-count 1 --section WarpStateStats --section SourceCounters \
      -o REPORT python3 tools/profile_wgmma.py MAX_M ROWS_PER_GROUP [TILE (128x128) [LIB]]
LIB defaults to .build/libgrouped_wgmma.so (nvcc ... --shared -lineinfo of grouped_wgmma.cu)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_grouped_wgmma as pg  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main():
    max_m, rows = int(sys.argv[1]), int(sys.argv[2])
    tile = sys.argv[3] if len(sys.argv) > 3 else "128x128"
    lib = sys.argv[4] if len(sys.argv) > 4 else str(ROOT / ".build/libgrouped_wgmma.so")
    run = pg.watchdog_entry(lib)
    inputs = pg.make(max_m, [rows] * pg.G)
    c = torch.empty(pg.G, max_m, pg.N, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        run(*inputs, c, tile=tile)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
