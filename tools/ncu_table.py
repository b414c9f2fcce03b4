"""One line per profiled kernel from `ncu --csv --metrics ...` output.

The stall metrics are smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio:
warps stalled for that reason per issued instruction; the largest few say what a kernel
waits on (long_scoreboard: global memory; barrier: __syncthreads; wait: fixed-latency
dependencies; math_pipe_throttle / mio_throttle: a busy pipe).

Usage, on a GPU host, with any launcher (here the GPU tests of one case):
  ncu --csv --metrics "$(python tools/ncu_table.py --metrics)" \\
      python -m pytest -q tests/gpu -k "max_m_1-" > ncu.csv
  python tools/ncu_table.py ncu.csv
"""

import csv
import sys
from collections import OrderedDict

STALL = "smsp__average_warps_issue_stalled_"
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__warps_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
           "launch__registers_per_thread", "launch__grid_size",
           "sm__cycles_elapsed.avg.per_second", "smsp__cycles_active.avg", "sm__cycles_elapsed.avg"]
STALLS = ["long_scoreboard", "barrier", "wait", "short_scoreboard", "mio_throttle", "lg_throttle",
          "math_pipe_throttle", "not_selected", "selected", "no_instruction", "dispatch_stall",
          "membar", "sleeping", "branch_resolving", "drain", "imc_miss", "tex_throttle", "misc"]
ALL = METRICS + [f"{STALL}{s}_per_issue_active.ratio" for s in STALLS]


def main(path):
    rows = OrderedDict()
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        key = (r["ID"], r["Kernel Name"][:40])
        rows.setdefault(key, {})[r["Metric Name"]] = r["Metric Value"]
    for (kid, name), m in rows.items():
        def f(k):
            try:
                return float(m.get(k, "nan").replace(",", ""))
            except ValueError:
                return float("nan")
        stalls = sorted(((f(f"{STALL}{s}_per_issue_active.ratio"), s) for s in STALLS), reverse=True)[:4]
        print(f"{kid:>3} {name:40s} {f(METRICS[0]) / 1e3:7.2f}us rd={f(METRICS[1]) / 2**20:6.2f}MiB "
              f"wr={f(METRICS[2]) / 2**20:6.2f}MiB dram={f(METRICS[3]):4.1f}% sm={f(METRICS[4]):4.1f}% "
              f"occ={f(METRICS[5]):4.1f}% inst={f(METRICS[6]) / 1e6:6.2f}M regs={f(METRICS[7]):.0f} "
              f"grid={f(METRICS[8]):.0f} clk={f(METRICS[9]) / 1e9:.2f}GHz "
              f"active={f(METRICS[10]) / max(f(METRICS[11]), 1) * 100:.0f}% stalls/issue: " + " ".join(f"{s}={v:.1f}" for v, s in stalls))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--metrics"]:
        print(",".join(ALL))
    else:
        main(sys.argv[1])
