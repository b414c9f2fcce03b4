#!/usr/bin/env python
"""Pack every solution folder under solutions/ (a folder holding solution.toml) into
<folder>/<name>.json, the Solution JSON that FlashInfer-Bench loads and the leaderboard takes.

  python scripts/pack_solutions.py            # (re)write every packed JSON
  python scripts/pack_solutions.py --check    # write nothing; exit 1 on a stale, missing or stray JSON
  python scripts/pack_solutions.py DIR ...    # only these solution folders
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lowbit_gemm.packing import pack, pack_all, stray_jsons

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, help="solution folders (default: all)")
    parser.add_argument("--check", action="store_true", help="report stale/missing/stray JSONs, write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
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


if __name__ == "__main__":
    sys.exit(main())
