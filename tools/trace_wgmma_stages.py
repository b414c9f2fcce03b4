"""Where one CTA's pipeline stage spends its cycles: builds the CUDA grouped kernel with
-DLOWBIT_STAGE_TRACE (clock64 stamps of CTA 0's stages, grouped_wgmma.cu's top), runs one case
and prints, per stage, the stamps of the producer's steps (EVENTS below) and of consumer
warpgroup 0's (A converted, B there, MMA done, promoted) in cycles from the kernel's start, then
the median of each step's length over the steady stages (2 onwards). Tile 32x64, the
tokens-as-N form, stamps each warpgroup's own steps (SW_EVENTS), a row per warpgroup and stage;
tile 256x128, the register-weights GEMM, consumer warpgroup 1's steps of each 128-K block
(RW_EVENTS), then the call's own steps (RW_CALL: gate read, first fragments, epilogue, stores).
  python3 tools/trace_wgmma_stages.py [MAX_M ROWS_PER_GROUP [TILE (128x64) [grouped_wgmma.cu]]]"""

import ctypes
import hashlib
import statistics
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_grouped_wgmma as pg  # noqa: E402

TRACE_STAGES, TRACE_EVENTS = 64, 10
# in the kernel's order of events; the producer's steps between them: raw codes landed -> its
# fold and the slot wait -> slot free -> factors stored, named barrier -> met -> next copies ->
# copies issued -> decode and fp16 stores -> stored -> mode flags, proxy fence -> fenced
EVENTS = ("landed", "slot free", "met", "fenced", "A ready", "B there", "MMA done", "promoted", "copies issued",
          "stored")
STEPS = (("fold + slot wait", 0, 1), ("barrier", 1, 2), ("copies", 2, 8), ("decode + stores", 8, 9),
         ("flags + fence", 9, 3), ("fenced -> B there", 3, 5), ("consumer waits for B", 4, 5),
         ("MMA", 5, 6), ("promotion", 6, 7))
SW_EVENTS = ("start", "folded, loads issued", "tokens stored", "met", "decoded", "MMA done", "promoted")
SW_STEPS = (("fold + next loads", 0, 1), ("token stores + fold modes", 1, 2), ("fence + barrier", 2, 3),
            ("weight decode", 3, 4), ("MMA", 4, 5), ("promotion", 5, 6), ("stage", 0, 6))
RW_EVENTS = ("waits for tokens", "tokens there", "MMAs issued", "next decoded", "MMAs done", "rescaled")
RW_STEPS = (("token wait", 0, 1), ("MMA issue", 1, 2), ("decode + next loads", 2, 3), ("MMA wait", 3, 4),
            ("rescale + release", 4, 5), ("block", 0, 5))
RW_CALL = ("start", "gate read", "ring ready", "first fragments", "epilogue", "staged", "stores issued",
           "producer's first copies")


def main():
    max_m = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    tile = sys.argv[3] if len(sys.argv) > 3 else "128x64"
    src = sys.argv[4] if len(sys.argv) > 4 else str(pg.CU)
    # one build per source, so that traces of several revisions never share a library
    lib_path = f"/tmp/libgrouped_wgmma_trace_{hashlib.sha1(str(Path(src).resolve()).encode()).hexdigest()[:12]}.so"
    if not Path(lib_path).exists() or Path(lib_path).stat().st_mtime < Path(src).stat().st_mtime:
        subprocess.run(pg.nvcc_command(src, lib_path, "LOWBIT_STAGE_TRACE"), check=True)
    run = pg.watchdog_entry(lib_path)
    read = ctypes.CDLL(lib_path).lowbit_stage_trace
    inputs = pg.make(max_m, [rows] * pg.G)
    c = torch.empty(pg.G, max_m, pg.N, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        run(*inputs, c, tile=tile)
    torch.cuda.synchronize()
    buf = (ctypes.c_longlong * ((TRACE_STAGES + 1) * TRACE_EVENTS))()
    if read(buf):
        sys.exit("reading the trace failed")
    start = buf[TRACE_STAGES * TRACE_EVENTS]
    swapped = pg.parse_tile(tile)[0] < 128  # the tokens-as-N form's tiles hold fewer than 128 token rows
    regw = tile.startswith("256x128")
    events, steps = (SW_EVENTS, SW_STEPS) if swapped else (RW_EVENTS, RW_STEPS) if regw else (EVENTS, STEPS)
    stages = []
    for s in range(TRACE_STAGES):
        row = [buf[s * TRACE_EVENTS + e] for e in range(len(events))]
        if not any(row):
            break
        stages.append([x - start if x else None for x in row])
    print(f"{torch.cuda.get_device_name()}: max_m {max_m}, {rows} rows a group, tile {tile}; cycles from the kernel's start")
    print("| stage | " + " | ".join(events) + " |")
    print("|---" * (len(events) + 1) + "|")
    for s, row in enumerate(stages):
        print(f"| {s} | " + " | ".join("-" if x is None else str(x) for x in row) + " |")
    if regw:
        call = [buf[TRACE_STAGES * TRACE_EVENTS + e] for e in range(len(RW_CALL))]
        print("\nthe call: " + ", ".join(f"{name} {x - start}" for name, x in zip(RW_CALL, call) if x))
    # steady: past each warpgroup's first stage (the tokens-as-N form: rows 4.. of its 4 warpgroups)
    steady = [r for r in stages[4 if swapped else 2:] if None not in r]
    if steady:
        print("\nmedian over the steady stages: " + ", ".join(
            f"{name} {statistics.median(r[b] - r[a] for r in steady):.0f}" for name, a, b in steps))
        if not swapped and not regw:
            gaps = [b[3] - a[3] for a, b in zip(steady, steady[1:])]
            if gaps:
                print(f"stage to stage (fenced): median {statistics.median(gaps):.0f} cycles")

if __name__ == "__main__":
    main()
