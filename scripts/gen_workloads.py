#!/usr/bin/env python
"""Write the workloads of both definitions, deterministically (lowbit_gemm.workloads says how).

  python scripts/gen_workloads.py [--root DIR] [--definition NAME ...]
"""

import sys

from lowbit_gemm.workloads import main

if __name__ == "__main__":
    sys.exit(main())
