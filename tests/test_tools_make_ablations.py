"""tools/make_ablations.py's edits still meet the CUDA grouped kernel's sources: every part of
every form names text that occurs exactly once (the tool refuses to write a variant otherwise),
and each edit puts its part behind its own ABL_ switch."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_ablations", ROOT / "tools" / "make_ablations.py")
make_ablations = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_ablations)


@pytest.mark.parametrize("form", sorted(make_ablations.FORMS))
def test_every_part_applies_behind_its_switch(form):
    _, parts = make_ablations.FORMS[form]
    texts = make_ablations.edited(parts)  # SystemExit where a part's text is gone or repeated
    for part in parts:
        assert any(f"ABL_{part}" in text for text in texts.values()), part
