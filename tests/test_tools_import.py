"""Every tool under tools/ imports on a CPU machine (its imports resolve against this checkout's
package) and has a main(): a tool broken by a change elsewhere is found here, not in a GPU call
that has to be repeated. Nothing is run."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = sorted((ROOT / "tools").glob("*.py"))


@pytest.mark.parametrize("path", TOOLS, ids=[p.stem for p in TOOLS])
def test_tool_imports_and_has_a_main(path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))  # tools import their siblings by name
    spec = importlib.util.spec_from_file_location(f"tool_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
    sys.modules.pop(f"tool_{path.stem}", None)


def test_every_tool_is_listed_in_the_tools_readme():
    readme = (ROOT / "tools" / "README.md").read_text()
    missing = [p.name for p in sorted((ROOT / "tools").iterdir())
               if p.suffix in (".py", ".sh", ".cu") and f"`{p.name}`" not in readme]
    assert not missing, f"not in tools/README.md: {missing}"
