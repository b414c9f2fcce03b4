"""The inline-PTX wgmma wrappers the CUDA solutions include are tools/gen_wgmma_wrappers.py's
output, byte for byte (edit the script, not the headers)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("gen_wgmma_wrappers", ROOT / "tools/gen_wgmma_wrappers.py")
GEN = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(GEN)


@pytest.mark.parametrize("path,make", [(GEN.OUT, GEN.header), (GEN.OUT_SPARSE, GEN.header_sparse)],
                         ids=["wgmma_dense", "wgmma_sparse"])
def test_header_is_the_generator_output(path, make):
    assert (ROOT / path).read_text() == make(), f"{path} differs: run python tools/gen_wgmma_wrappers.py"
