"""tools/sass_diff.py on hand-written SASS in cuobjdump's layout and a hand-written ptxas -v log
(the tool itself needs nvcc and cuobjdump): the kernel picked by name, its loops found from
backward branches, short barrier spins left out, ptxas's notes on that kernel, and the differing
opcodes printed last."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("sass_diff", ROOT / "tools" / "sass_diff.py")
sass_diff = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sass_diff)


def fake_sass(mma_steps: int) -> str:
    """One other kernel, then `regw_gemm`: a one-instruction spin, then a loop of mma_steps HGMMAs
    and one LDS closed by a predicated backward branch."""
    lines = ["        Function : _Z5otherv", "        /*0000*/                   EXIT ;",
             "        Function : _Z9regw_gemmPKh",
             "        /*0000*/                   MOV R1, c[0x0][0x28] ;",
             ".L_x_0:",
             "        /*0010*/                   SYNCS.PHASECHK.TRANS64 P0, [UR4], R2 ;",
             "        /*0020*/              @!P0 BRA `(.L_x_0) ;",
             ".L_x_1:"]
    addr = 0x30
    for _ in range(mma_steps):
        lines.append(f"        /*{addr:04x}*/                   HGMMA.64x256x16.F32 R24, gdesc[UR8], R24 ;")
        addr += 0x10
    lines.append(f"        /*{addr:04x}*/                   LDS R2, [R3] ;")
    lines.append(f"        /*{addr + 0x10:04x}*/              @P1 BRA `(.L_x_1) ;")
    lines.append(f"        /*{addr + 0x20:04x}*/                   EXIT ;")
    return "\n".join(lines)


def test_loops_of_the_named_kernel_only():
    lines, labels = sass_diff.kernel_lines(fake_sass(4), "regw_gemm")
    assert lines[0][1] == "MOV" and len(lines) == 1 + 2 + 4 + 2 + 1
    assert sass_diff.loops(lines, labels) == [(0x10, 0x20), (0x30, 0x30 + 5 * 0x10)]
    ops, rows = sass_diff.summary(lines, labels, ["HGMMA", "LDS"])
    assert ops["HGMMA"] == 4 and ops["BRA"] == 2
    assert rows[1] == (0x30, 0x80, 6, {"HGMMA": 4, "LDS": 1})


def test_blocks_split_where_branches_land_and_after_them():
    """The loop's blocks add up to the loop; the spin's target starts a block, and a predicated
    branch ends one with its predicate shown."""
    lines, labels = sass_diff.kernel_lines(fake_sass(4), "regw_gemm")
    found = sass_diff.blocks(lines, labels, 0x00, 0x90)
    assert [(first, n) for first, n, _ in found] == [(0x00, 1), (0x10, 2), (0x30, 6), (0x90, 1)]
    assert found[1][2].startswith("@!P0 BRA") and found[2][2].startswith("@P1 BRA") and found[3][2] == "EXIT"
    assert sass_diff.innermost_longest(sass_diff.summary(lines, labels, [])[1]) == (0x30, 0x80)


def fake_ptxas_log(serialised: bool) -> str:
    """ptxas -v's lines for `other`, then for `regw_gemm` (a C7519 note twice, C7514 if serialised)."""
    notes = ["ptxas info    : (C7519) warpgroup.arrive is injected in around line 12 by compiler to allow use of "
             "registers in GMMA in function '_Z9regw_gemmPKh'"] * 2
    if serialised:
        notes.append("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized "
                     "due to non wgmma instructions reading accumulator registers in the function '_Z9regw_gemmPKh'")
    return "\n".join(["ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90a'",
                      "ptxas info    : Function properties for _Z5otherv",
                      "    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads",
                      "ptxas info    : Used 40 registers, used 0 barriers", *notes,
                      "ptxas info    : Compiling entry function '_Z9regw_gemmPKh' for 'sm_90a'",
                      "ptxas info    : Function properties for _Z9regw_gemmPKh",
                      f"    0 bytes stack frame, {16 if serialised else 0} bytes spill stores, 0 bytes spill loads",
                      "ptxas info    : Used 168 registers, used 2 barriers, 32 bytes smem"])


def test_ptxas_notes_of_the_named_kernel_only():
    assert sass_diff.ptxas_notes(fake_ptxas_log(True), "regw_gemm") == {
        "registers": 168, "spill stores": 16, "spill loads": 0, "C7514": 1, "C7519": 2}
    assert sass_diff.ptxas_notes(fake_ptxas_log(False), "other") == {"registers": 40, "spill stores": 8,
                                                                     "spill loads": 8}


def test_spins_left_out_and_the_differences_last(monkeypatch, capsys, tmp_path):
    a, b = tmp_path / "a" / "k.cu", tmp_path / "b" / "k.cu"
    monkeypatch.setattr(sass_diff, "sass_of", lambda cu: (fake_sass(4 if cu == a else 6), fake_ptxas_log(cu == b)))
    monkeypatch.setattr(sys, "argv", ["sass_diff.py", str(a), str(b), "--kernel", "regw_gemm", "--min-loop", "3"])
    assert sass_diff.main() == 0
    out = capsys.readouterr().out.strip().splitlines()
    listed = [line for line in out if line.startswith("  0x")]
    assert len(listed) == 2 and all("0x00030-" in line for line in listed)  # the 2-instruction spin is not listed
    assert out[-1] == "| HGMMA | 4 | 6 |" and out[-2] == "| all | 10 | 12 |"
    assert "| C7514 | 0 | 1 |" in out and "| spill stores | 0 | 16 |" in out and "| registers | 168 | 168 |" in out
