"""Every solution folder is packed, its JSON is up to date and schema-valid, and packing takes
exactly the source files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from flashinfer_bench.data import Solution, TraceSet

from lowbit_gemm.packing import main as pack_main
from lowbit_gemm.packing import pack, pack_all, solution_folders, source_files, stray_jsons

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
FOLDERS = solution_folders(SOLUTIONS)


def test_there_are_solutions_for_both_definitions():
    definitions = {json.loads(pack(f).text)["definition"] for f in FOLDERS}
    assert definitions == {p.stem for p in (ROOT / "definitions").rglob("*.json")}


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.relative_to(SOLUTIONS).as_posix() for f in FOLDERS])
def test_packed_json_up_to_date_and_valid(folder):
    packed = pack(folder)
    assert packed.up_to_date, (
        f"{packed.json_path.relative_to(ROOT)} is missing or stale: run python scripts/pack_solutions.py")
    sol = Solution.model_validate_json(packed.json_path.read_text())
    # canonical layout: solutions/<author>/gemm/<definition>/<folder>
    author, op_type, definition = folder.relative_to(SOLUTIONS).parts[:3]
    assert (sol.author, op_type, sol.definition) == (author, "gemm", definition)
    assert sol.spec.entry_point.split("::")[0] in {s.path for s in sol.sources}
    assert [s.path for s in sol.sources] == sorted(s.path for s in sol.sources)
    for source in sol.sources:
        assert (folder / source.path).read_text() == source.content


def test_no_stray_json_and_trace_set_loads_every_solution():
    packed = pack_all(SOLUTIONS)
    assert stray_jsons(SOLUTIONS, packed) == []
    ts = TraceSet.from_path(str(ROOT))
    loaded = sorted(s.name for sols in ts.solutions.values() for s in sols)
    assert loaded == sorted(json.loads(p.text)["name"] for p in packed)
    for sols in ts.solutions.values():
        for s in sols:
            assert s.definition in ts.definitions


def test_baselines_exist_for_both_definitions():
    ts = TraceSet.from_path(str(ROOT))
    for name in ts.definitions:
        assert any(s.author == "baseline" and s.spec.language.value == "python" for s in ts.solutions[name])


def _write(folder: Path, files: dict) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)


TOML = """name = "demo_v1"
definition = "sparse_gemm_fp4_fp8_n2048_k2048"
author = "someone"
description = "demo"

[spec]
language = "triton"
target_hardware = ["H200"]
entry_point = "main.py::run"
dependencies = []
destination_passing_style = true
"""


def test_packing_takes_sources_only(tmp_path):
    folder = tmp_path / "solutions" / "someone" / "gemm" / "sparse_gemm_fp4_fp8_n2048_k2048" / "demo"
    _write(folder, {
        "solution.toml": TOML, "main.py": "from .kernel import run\n", "kernel.py": "def run(*a): pass\n",
        "csrc/x.cuh": "// x\n", "__init__.py": "", "test_kernel.py": "x = 1\n", "kernel_test.py": "x = 1\n",
        "tests/helper.py": "x = 1\n", "README.md": "doc\n", "__pycache__/main.cpython-311.pyc": "x",
    })
    assert [p.as_posix() for p in source_files(folder)] == [
        "__init__.py", "csrc/x.cuh", "kernel.py", "main.py"]
    data = json.loads(pack(folder).text)
    assert [s["path"] for s in data["sources"]] == ["csrc/x.cuh", "kernel.py", "main.py"]  # empty file dropped
    assert list(data) == ["name", "definition", "author", "spec", "sources", "description"]
    assert data["spec"] == {"language": "triton", "target_hardware": ["H200"], "entry_point": "main.py::run",
                            "dependencies": [], "destination_passing_style": True}


def test_pack_command_check_mode(tmp_path, capsys):
    main = pack_main  # what scripts/pack_solutions.py runs
    folder = tmp_path / "solutions" / "someone" / "gemm" / "d" / "demo"
    _write(folder, {"solution.toml": TOML, "main.py": "def run(*a): pass\n"})
    root = ["--root", str(tmp_path)]

    def check():
        code = main(root + ["--check"])
        return code, capsys.readouterr().out

    code, out = check()
    assert code == 1 and "missing" in out
    assert main(root) == 0 and (folder / "demo_v1.json").is_file()
    assert check()[0] == 0
    (folder / "main.py").write_text("def run(*a):\n    return None\n")
    code, out = check()
    assert code == 1 and "stale" in out
    main(root)
    (tmp_path / "solutions" / "notes.json").write_text("{}")
    code, out = check()
    assert code == 1 and "stray" in out and "notes.json" in out


def test_pack_command_packs_its_own_checkout(tmp_path):
    # a second checkout (its own src/, scripts/ and solutions/), run while this checkout's package
    # is the one importable: the script must read the second checkout's solutions
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "src", clone / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "scripts", clone / "scripts")
    demo = clone / "solutions" / "someone" / "gemm" / "d" / "demo"
    _write(demo, {"solution.toml": TOML, "main.py": "def run(*a): pass\n"})
    done = subprocess.run([sys.executable, str(clone / "scripts" / "pack_solutions.py"), "--check"], cwd=tmp_path,
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert done.returncode == 1 and "missing" in done.stdout and "someone/gemm/d/demo" in done.stdout, (
        done.stdout + done.stderr)


def test_bad_toml_is_rejected(tmp_path):
    folder = tmp_path / "demo"
    _write(folder, {"solution.toml": TOML.replace('entry_point = "main.py::run"', 'entry_point = "nope.py::run"'),
                    "main.py": "def run(*a): pass\n"})
    with pytest.raises(ValueError, match="Entry source file"):
        pack(folder)
