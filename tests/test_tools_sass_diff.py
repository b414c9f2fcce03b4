"""tools/sass_diff.py on hand-written SASS in cuobjdump's layout (the tool itself needs nvcc and
cuobjdump, which only the GPU host has): the kernel picked by name, its loops found from
backward branches, short barrier spins left out, and the differing opcodes printed last."""

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


def test_spins_left_out_and_the_differences_last(monkeypatch, capsys, tmp_path):
    a, b = tmp_path / "a" / "k.cu", tmp_path / "b" / "k.cu"
    monkeypatch.setattr(sass_diff, "sass_of", lambda cu: fake_sass(4 if cu == a else 6))
    monkeypatch.setattr(sys, "argv", ["sass_diff.py", str(a), str(b), "--kernel", "regw_gemm", "--min-loop", "3"])
    assert sass_diff.main() == 0
    out = capsys.readouterr().out.strip().splitlines()
    listed = [line for line in out if line.startswith("  0x")]
    assert len(listed) == 2 and all("0x00030-" in line for line in listed)  # the 2-instruction spin is not listed
    assert out[-1] == "| HGMMA | 4 | 6 |" and out[-2] == "| all | 10 | 12 |"
