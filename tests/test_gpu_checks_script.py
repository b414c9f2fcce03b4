"""tools/gpu_checks.sh names what a GPU call runs: every pytest selection it passes with -k picks
GPU tests that exist (collected on this CPU), every tool it runs exists, and the sparse paths and
grouped shapes it names are ones those tools know. A wrong name otherwise costs a device call."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lowbit_gemm.solutions import load_solution

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (ROOT / "tools" / "gpu_checks.sh").read_text()


def selections():
    """Every -k selection in the script, its $SMALL / $SPARSE expanded."""
    variables = dict(re.findall(r'^(\w+)="([^"]*)"$', SCRIPT, re.M))
    out = []
    for sel in re.findall(r'-k "([^"]*)"', SCRIPT):
        for name, value in variables.items():
            sel = sel.replace(f"${name}", value)
        out.append(sel)
    return out


@pytest.mark.parametrize("selection", selections())
def test_each_selection_picks_gpu_tests(selection):
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "gpu"), "-k", selection], capture_output=True, text=True, cwd=ROOT)
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert collected, f"-k {selection!r} selects no GPU test:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"


def test_every_tool_it_runs_exists():
    tools = set(re.findall(r"tools/([\w.]+\.(?:py|sh))", SCRIPT))
    assert tools and all((ROOT / "tools" / t).is_file() for t in tools), tools


def test_the_paths_and_shapes_it_names_exist():
    heur = load_solution("sparse_gemm_fp4_fp8_n2048_k2048", "lowbit", "cuda_sparse_fp4_mma", entry="heuristics")
    for paths in re.findall(r"--paths ([\w,]+)", SCRIPT):
        assert set(paths.split(",")) <= set(heur.PATHS), paths
    labels = set(re.findall(r'\("([^"]+)", \d+, \[', (ROOT / "tools" / "time_wgmma_variants.py").read_text()))
    for shapes in re.findall(r'--shapes \\?\s*"([^"]+)"', SCRIPT):
        assert set(s.strip() for s in shapes.split(";")) <= labels, shapes
