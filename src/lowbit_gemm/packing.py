"""Pack solution folders into the Solution JSON that FlashInfer-Bench loads and the leaderboard takes.

A solution folder is any folder under ``solutions/`` holding a ``solution.toml``. Its source files
(``*.py *.cu *.cuh *.cpp *.h``, tests excluded) are the source of truth; packing embeds them,
sorted by path, into ``<folder>/<name>.json`` next to them. TraceSet loads every ``*.json`` under
``solutions/`` as a Solution, so no other JSON may live there.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

from .solutions import REPO_ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h")
SPEC_KEYS = ("language", "target_hardware", "entry_point", "dependencies",
             "destination_passing_style", "binding")


def is_test_file(rel: Path) -> bool:
    """Tests live beside a kernel but are no part of the solution."""
    name = rel.name
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or any(part in ("tests", "test") for part in rel.parts[:-1])
    )


def source_files(folder: Path) -> List[Path]:
    """The folder's source files (relative paths, sorted), tests and caches excluded."""
    out = []
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
            continue
        if "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
            continue
        if is_test_file(rel):
            continue
        out.append(rel)
    return sorted(out, key=lambda p: p.as_posix())


def solution_dict(folder: Path) -> Dict[str, Any]:
    """The Solution of ``folder`` as a plain dict in the starter kit's key order."""
    with open(folder / "solution.toml", "rb") as f:
        meta = tomllib.load(f)
    for key in ("name", "definition", "author", "spec"):
        if key not in meta:
            raise ValueError(f"{folder / 'solution.toml'}: missing '{key}'")
    unknown = set(meta["spec"]) - set(SPEC_KEYS)
    if unknown:
        raise ValueError(f"{folder / 'solution.toml'}: unknown spec keys {sorted(unknown)}")
    spec = {key: meta["spec"][key] for key in SPEC_KEYS if key in meta["spec"]}
    spec.setdefault("dependencies", [])
    sources = []
    for rel in source_files(folder):
        content = (folder / rel).read_text(encoding="utf-8")
        if not content.strip():  # the schema forbids empty sources; an empty file adds nothing
            continue
        sources.append({"path": rel.as_posix(), "content": content})
    out = {
        "name": meta["name"],
        "definition": meta["definition"],
        "author": meta["author"],
        "spec": spec,
        "sources": sources,
    }
    if "description" in meta:
        out["description"] = meta["description"]
    return out


def solution_json(folder: Path) -> str:
    """The exact packed JSON text of ``folder``, validated as a flashinfer_bench Solution."""
    from flashinfer_bench.data import Solution

    data = solution_dict(folder)
    Solution.model_validate(data)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Packed:
    folder: Path
    json_path: Path
    text: str

    @property
    def up_to_date(self) -> bool:
        return self.json_path.is_file() and self.json_path.read_text(encoding="utf-8") == self.text


def solution_folders(solutions_root: Path) -> List[Path]:
    return sorted(p.parent for p in solutions_root.rglob("solution.toml") if "__pycache__" not in p.parts)


def pack(folder: Path) -> Packed:
    text = solution_json(folder)
    name = json.loads(text)["name"]
    return Packed(folder, folder / f"{name}.json", text)


def pack_all(solutions_root: Path) -> List[Packed]:
    return [pack(folder) for folder in solution_folders(solutions_root)]


def stray_jsons(solutions_root: Path, packed: List[Packed]) -> List[Path]:
    """JSON files under ``solutions_root`` that are no packed solution (TraceSet would load them)."""
    expected = {p.json_path.resolve() for p in packed}
    return sorted(p for p in solutions_root.rglob("*.json") if p.resolve() not in expected)


def main(argv=None) -> int:
    """The command line of scripts/pack_solutions.py (its docstring says how it is used)."""
    parser = argparse.ArgumentParser(description="Pack solution folders into their Solution JSON.")
    parser.add_argument("folders", nargs="*", type=Path, help="solution folders (default: all)")
    parser.add_argument("--check", action="store_true", help="report stale/missing/stray JSONs, write nothing")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root")
    args = parser.parse_args(argv)

    solutions_root = args.root / "solutions"
    packed = [pack(f.resolve()) for f in args.folders] if args.folders else pack_all(solutions_root)
    problems = []
    for p in packed:
        rel = p.json_path.relative_to(args.root.resolve()) if p.json_path.is_relative_to(args.root.resolve()) else p.json_path
        if p.up_to_date:
            print(f"up to date  {rel}")
        elif args.check:
            problems.append(f"{'stale' if p.json_path.exists() else 'missing'}  {rel}")
        else:
            p.json_path.write_text(p.text, encoding="utf-8")
            print(f"wrote       {rel}")
    if not args.folders:
        problems += [f"stray       {s} (not a packed solution; TraceSet would load it)" for s in stray_jsons(solutions_root, packed)]
    if problems:
        print("\n".join(problems))
        if args.check:
            print("run: python scripts/pack_solutions.py")
        return 1
    return 0

