#!/usr/bin/env python
"""Write the workloads of both definitions, deterministically (lowbit_gemm.workloads says how).

  python scripts/gen_workloads.py [--root DIR] [--definition NAME ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's package, not another clone's

from lowbit_gemm.workloads import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
