"""Top SASS lines by warp-stall samples from `ncu -i REPORT --page source --csv --print-source sass`
(fifteenth session, run 59c): python3 scripts/ncu_source_top.py FILE.csv [N]."""

import csv
import sys

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


def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


total = sum(num(r[samp]) for r in rows)
print(f"columns: {len(cols)}; total samples {total:.0f}; reason columns: {reasons[:12]}")
for r in sorted(rows, key=lambda r: -num(r[samp]))[:n]:
    top = sorted(((num(r[c]), c) for c in reasons), reverse=True)[:3]
    why = ", ".join(f"{c}={v:.0f}" for v, c in top if v > 0)
    print(f"{num(r[samp]):6.0f} {100 * num(r[samp]) / total:5.1f}%  {r.get('Address', '')[:8]:8s} {r[src][:70]:70s} {why}")
