"""The tests use the package of the checkout they sit in (pyproject's pytest pythonpath), not one
installed from another clone: an editable install points at whichever clone ran
scripts/install.sh. The scripts do the same (test_packing's pack-command test)."""

from pathlib import Path

import lowbit_gemm

ROOT = Path(__file__).resolve().parents[1]


def test_tests_import_this_checkouts_package():
    assert Path(lowbit_gemm.__file__).resolve().parent == ROOT / "src" / "lowbit_gemm"
