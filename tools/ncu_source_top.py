"""Where a kernel's warps stall, from `ncu -i REPORT --page source --csv --print-source sass`.

Prints the warp-stall samples per code region (the SASS between two SETMAXREG or EXIT
instructions: in a warp-specialised kernel, roughly one region per partition, so the regions
say which partition waits and for how long) with the region's top stall reasons, then the N SASS lines (default 30) with the most
samples, each with its top stall reasons. On a GPU host, with any launcher:
  ncu -k regex:KERNEL --launch-count 1 --section SourceCounters --section WarpStateStats \\
      -o REPORT python -m pytest -q tests/gpu -k "max_m_1-"
  ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SRC.csv
  python tools/ncu_source_top.py SRC.csv [N]"""

import csv
import sys


def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    lines = open(sys.argv[1], newline="").read().splitlines()
    # The first line names the kernel; the header follows.
    rows = list(csv.DictReader(lines[1:] if lines and lines[0].startswith('"Kernel Name"') else lines))
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    if not rows:
        sys.exit("no rows")
    cols = list(rows[0])
    samp = next(c for c in cols if "Sampling (All" in c)
    src = next((c for c in cols if c.strip().lower() in ("source", "sass")), cols[1])
    reasons = [c for c in cols if c.startswith("stall_") and "Not Issued" not in c]


    total = sum(num(r[samp]) for r in rows)
    print(f"total samples {total:.0f}")
    print("regions (SASS rows between SETMAXREG/EXIT): samples, most executions of one line, wgmma / prmt / TMA lines")
    start = 0
    for end in [i + 1 for i, r in enumerate(rows) if "SETMAXREG" in r[src] or "EXIT" in r[src]] + [len(rows)]:
        part = rows[start:end]
        s = sum(num(r[samp]) for r in part)
        if s >= 0.01 * total:
            execs = max(num(r.get("Instructions Executed", 0)) for r in part)
            count = [sum(key in r[src] for r in part) for key in ("GMMA", "PRMT", "UTMALDG")]
            print(f"  rows {start:5d}-{end:5d} {s:7.0f} ({100 * s / total:4.1f}%) exec {execs:8.0f}  "
                  f"wgmma {count[0]} prmt {count[1]} tma {count[2]}")
            by_reason = sorted(((sum(num(r[c]) for r in part), c) for c in reasons), reverse=True)[:8]
            print("      " + ", ".join(f"{c.removeprefix('stall_')} {100 * v / s:.0f}%" for v, c in by_reason if v > 0))
        start = end
    print(f"top {n} lines: samples, share, SASS row, instruction, top reasons")
    for i in sorted(range(len(rows)), key=lambda i: -num(rows[i][samp]))[:n]:
        r = rows[i]
        top = sorted(((num(r[c]), c) for c in reasons), reverse=True)[:3]
        why = ", ".join(f"{c}={v:.0f}" for v, c in top if v > 0)
        print(f"{num(r[samp]):6.0f} {100 * num(r[samp]) / total:5.1f}%  {i:5d} {r[src][:64]:64s} {why}")


if __name__ == "__main__":
    main()
