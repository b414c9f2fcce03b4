"""CPU model of the wgmma.sp prototype's A pass (tools/proto_sparse_wgmma_sp.cu, `canon` and
`prep_a`): for every a_vals byte and every a_meta byte, the canonical pair (two distinct
positions in increasing order, the nibble the MMA reads) expands to the group the definition
means (repeated positions summed, bits 4-7 ignored); and the metadata word of each thread holds
the nibbles of the rows and K its header says, so that every (row, group) of a 64 x 32 step is
carried by the threads of lanes l % 4 < 2 exactly once."""

import re
from pathlib import Path

import pytest

CU = Path(__file__).resolve().parents[1] / "tools/proto_sparse_wgmma_sp.cu"
SRC = CU.read_text()
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
VALID_NIBBLES = {i0 | (i1 << 2) for i0 in range(4) for i1 in range(4) if i0 < i1}


def canon(v: int, meta: int):
    """(value at i0, value at i1, nibble) as canon() computes them."""
    f0, f1 = E2M1[v & 15], E2M1[(v >> 4) & 15]
    p0, p1 = meta & 3, (meta >> 2) & 3
    if p0 < p1:
        return f0, f1, p0 | (p1 << 2)
    if p0 > p1:
        return f1, f0, p1 | (p0 << 2)
    if p0 < 3:
        return f0 + f1, 0.0, p0 | (3 << 2)
    return 0.0, f0 + f1, 2 | (3 << 2)


def test_the_model_follows_the_source():
    body = SRC[SRC.index("__device__ __forceinline__ uint32_t canon("):SRC.index("// thread (m64 tile mt")]
    for line in ("if (p0 < p1) { lo = f0; hi = f1; nib = p0 | (p1 << 2); }",
                 "else if (p0 > p1) { lo = f1; hi = f0; nib = p1 | (p0 << 2); }",
                 "else if (p0 < 3u) { lo = f0 + f1; hi = 0.0f; nib = p0 | (3u << 2); }",
                 "else { lo = 0.0f; hi = f0 + f1; nib = 2u | (3u << 2); }"):
        assert line in body, line


@pytest.mark.parametrize("meta", range(256))
def test_canonical_pair_is_the_definitions_group(meta):
    for v in range(256):
        lo, hi, nib = canon(v, meta)
        assert nib in VALID_NIBBLES
        dense = [0.0] * 4
        dense[meta & 3] += E2M1[v & 15]
        dense[(meta >> 2) & 3] += E2M1[(v >> 4) & 15]
        got = [0.0] * 4
        got[nib & 3] += lo
        got[nib >> 2] += hi
        assert got == dense, (v, meta)


def test_metadata_words_cover_each_row_and_group_once():
    """prep_a: thread (w, l) of step kk puts rows 16 w + l / 4 (bits 0-15) and + 8 (bits 16-31),
    groups 4 (l % 2) + j at nibble j; lanes l % 4 < 2 carry the step's metadata (selector 0)."""
    assert "const int row = mt * 64 + 16 * w + (l >> 2) + 8 * half;" in SRC
    assert "const int grp = kk * 8 + 4 * hb + j;" in SRC and "word |= m16 << (16 * half);" in SRC
    assert re.search(r"const int w = t >> 5, l = t & 31, hb = l & 1;", SRC)
    seen = set()
    for t in range(128):
        w, l = t >> 5, t & 31
        if l % 4 >= 2:
            continue
        for half in range(2):
            for j in range(4):
                key = (16 * w + (l >> 2) + 8 * half, 4 * (l & 1) + j)
                assert key not in seen
                seen.add(key)
    assert seen == {(r, g) for r in range(64) for g in range(8)}
