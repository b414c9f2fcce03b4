"""One PNG per definition under docs/img/: latency, roofline fraction, speedups.

Panels, left to right:
1. latency (µs, graph replay; harness mean dashed) against max_m or m, log-log, with the
   floor as a grey line and the published B200 figure as a hollow star labelled with its GPU;
2. achieved fraction of the floor (%, log-log, fractions span decades): the roofline view,
   100% = at the hardware limit;
3. speedup of each solution over the definition's PyTorch reference (harness latencies), log-log;
4. exactness: each solution's worst margin against the harness's check (log y; 1.0, the edge of
   failing, as a red line), failed cells included, since that is where it matters.
Headless: the Agg backend is forced, so this runs on CI machines without a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from .published import published_for
from .report import solution_order, workload_rows
from .results import RunResults
from .roofline import fraction_of, size_axis, speedup

MARKERS = {"own": "o", "peer": "s", "baseline": "^"}


def plot_definition(results: RunResults, definition: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = workload_rows(results, definition)
    sols = solution_order(rows)
    axis = size_axis(definition)
    fig, (ax_lat, ax_frac, ax_sp, ax_ex) = plt.subplots(1, 4, figsize=(24, 7))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    xs_floor = [(r.work.size, r.floors.floor_us) for r in rows if r.floors]
    if xs_floor:
        ax_lat.plot(*zip(*sorted(xs_floor)), color="grey", lw=3, alpha=0.5, marker="_",
                    ms=14, label="floor (this GPU)")
    for i, (name, kind) in enumerate(sols):
        color, marker = colors[i % len(colors)], MARKERS.get(kind, "x")
        pts = [(r.work.size, r.cells[name], r) for r in rows
               if name in r.cells and r.cells[name].passed]
        graph = sorted((x, m.graph_us) for x, m, _ in pts if m.graph_us)
        harness = sorted((x, m.harness_us) for x, m, _ in pts if m.harness_us)
        if graph:
            ax_lat.plot(*zip(*graph), marker=marker, color=color, label=f"{name} ({kind})")
        if harness:
            ax_lat.plot(*zip(*harness), ls="--", marker=marker, mfc="none", color=color,
                        alpha=0.6, label=f"{name}, harness mean")
        frac = sorted((x, 100 * fraction_of(r.floors.floor_us, m.graph_us))
                      for x, m, r in pts if m.graph_us and r.floors)
        if frac:
            ax_frac.plot(*zip(*frac), marker=marker, color=color, label=name)
        sp = sorted((x, speedup(r.reference_us, m.harness_us)) for x, m, r in pts
                    if speedup(r.reference_us, m.harness_us))
        if sp:
            ax_sp.plot(*zip(*sp), marker=marker, color=color, label=name)
        ex = sorted((r.work.size, max(r.cells[name].worst_margin, 1e-4)) for r in rows
                    if name in r.cells and r.cells[name].worst_margin is not None
                    and r.cells[name].worst_margin != float("inf"))
        if ex:
            ax_ex.plot(*zip(*ex), ls="", marker=marker, color=color, label=name)
    for p in published_for(definition):
        x = p.axes.get(axis)
        ax_lat.scatter([x], [p.latency_us], marker="*", s=250, facecolors="none",
                       edgecolors="black", zorder=5,
                       label=f"published {p.solution} ({p.hardware}, not this GPU)")

    gpu = results.ceilings.gpu if results.ceilings else "unknown GPU"
    ax_lat.set(xscale="log", yscale="log", xlabel=f"{axis} (rows)", ylabel="latency (µs)",
               title="Latency (solid: graph replay, cold L2)")
    ax_frac.set(xscale="log", yscale="log", xlabel=f"{axis} (rows)", ylabel="achieved fraction of floor (%)",
                title="Roofline view: floor / latency")
    ax_frac.axhline(100, color="grey", lw=1, ls=":")
    ax_sp.set(xscale="log", yscale="log", xlabel=f"{axis} (rows)",
              ylabel="speedup over reference (×, harness)", title="Speedup over the reference")
    ax_sp.axhline(1, color="grey", lw=1, ls=":")
    ax_ex.set(xscale="log", yscale="log", xlabel=f"{axis} (rows)",
              ylabel="worst margin (max |out-ref| / max(atol, rtol·|ref|))",
              title="Exactness (above 1.0 fails the check)")
    ax_ex.axhline(1, color="red", lw=1, ls="--")
    for ax in (ax_lat, ax_frac, ax_sp, ax_ex):
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            # Below the axes: inside, the legend would hide the points it names.
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1)
    fig.suptitle(f"{definition} on {gpu}, {results.date}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(results: RunResults, out_dir: Path) -> Dict[str, Path]:
    """definition -> PNG path for every definition in the results."""
    return {d: plot_definition(results, d, out_dir / f"{d}.png") for d in results.definitions()}
