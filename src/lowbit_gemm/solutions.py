"""Load a solution folder as a Python package, the way FlashInfer-Bench's builder does.

Solutions are self-contained folders (relative imports only) so the same files run on the
leaderboard, where this package is not installed. The library API and the tests import
them from the repository's solutions/ tree through this loader.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS_ROOT = REPO_ROOT / "solutions"


def solution_dir(definition: str, author: str, name: str) -> Path:
    path = SOLUTIONS_ROOT / author / "gemm" / definition / name
    if not (path / "main.py").is_file():
        raise FileNotFoundError(f"no solution main.py under {path}")
    return path


def load_solution(definition: str, author: str, name: str, entry: str = "main") -> ModuleType:
    """Import <solution>/<entry>.py as a submodule of a package made of the solution folder."""
    package = "lowbit_solution_" + "_".join(part.replace("-", "_") for part in (author, name))
    return load_solution_folder(solution_dir(definition, author, name), package, entry)


def load_solution_folder(path: Path, package: str, entry: str = "main") -> ModuleType:
    """Import path/<entry>.py as a submodule of a package named `package` made of the folder
    (made once per name: a second folder needs another name, e.g. an earlier commit's copy)."""
    path = Path(path)
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            package, path / "__init__.py", submodule_search_locations=[str(path)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        if (path / "__init__.py").is_file():
            spec.loader.exec_module(module)
    return importlib.import_module(f"{package}.{entry}")
