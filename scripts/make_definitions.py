#!/usr/bin/env python
"""Write definitions/gemm/<name>.json from src/lowbit_gemm/references/ (metadata + reference
source). ``--check`` writes nothing and exits 1 when a JSON is missing or out of date."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's package, not another clone's

from lowbit_gemm.references import NAMES, definition_json  # noqa: E402


def definition_file(root: Path, name: str) -> Path:
    return root / "definitions" / "gemm" / f"{name}.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report stale JSON files")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)

    stale = []
    for name in NAMES:
        path = definition_file(args.root, name)
        text = definition_json(name)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(args.root)}")
    if stale:
        print("out of date (run scripts/make_definitions.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
