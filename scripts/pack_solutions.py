#!/usr/bin/env python
"""Pack every solution folder under solutions/ (a folder holding solution.toml) into
<folder>/<name>.json, the Solution JSON that FlashInfer-Bench loads and the leaderboard takes.

  python scripts/pack_solutions.py            # (re)write every packed JSON
  python scripts/pack_solutions.py --check    # write nothing; exit 1 on a stale, missing or stray JSON
  python scripts/pack_solutions.py DIR ...    # only these solution folders
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's package, not another clone's

from lowbit_gemm.packing import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
