"""Compares one kernel's machine code (SASS, sm_90a) between builds of its source: each build's
loops (a backward branch and the instructions from its target up to it; barrier spins shorter
than --min-loop left out) with their lengths and counts of the opcodes named in --watch, then,
last so that a log's tail holds it, ptxas's notes on the kernel (registers, spills, C7514: wgmma
serialised, C7519: a warpgroup.arrive injected) and the opcodes whose counts differ between the
builds. A source change that leaves the PTX alike but slows the kernel shows where ptxas made it
longer. Builds each .cu to a cubin with nvcc (ptxas -v) and reads it with cuobjdump; no GPU needed
(tools/README.md says where cuobjdump comes from on a machine without the full toolkit).
  python3 tools/sass_diff.py variants/main/grouped_wgmma.cu variants/persist/grouped_wgmma.cu \\
      --kernel regw_gemm [--watch HGMMA,LDG,LDS,STS,BAR,SYNCS,PRMT,HMUL2]"""

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

NVCC = ["nvcc", "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-Xptxas", "-v"]
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
LABEL = re.compile(r"^\s*(\.L_x_\d+):")


def sass_of(cu: Path) -> tuple[str, str]:
    """The cubin's SASS (cuobjdump) and ptxas's -v log."""
    cubin = cu.with_suffix(".cubin")
    log = subprocess.run([*NVCC, str(cu), "-o", str(cubin)], check=True, capture_output=True, text=True).stderr
    return subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout, log


def ptxas_notes(log: str, kernel: str) -> dict:
    """What ptxas -v says of the first function whose name holds `kernel`: registers, spill
    bytes, and how many of each (Cnnnn) note name that function."""
    names = re.findall(r"Function properties for (\S+)", log)
    name = next((x for x in names if kernel in x), None)
    if name is None:
        return {}
    props, notes, inside = {}, collections.Counter(), False
    for line in log.splitlines():
        m = re.search(r"\((C\d{4})\).*function '([^']+)'", line)
        if m and m.group(2) == name:
            notes[m.group(1)] += 1
        if "Function properties for " in line:
            inside = line.split("Function properties for ")[1].strip() == name
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line) if inside else None
        if m:
            props["spill stores"], props["spill loads"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line) if inside else None
        if m:
            props["registers"], inside = int(m.group(1)), False
    return {**props, **dict(sorted(notes.items()))}


def kernel_lines(sass: str, kernel: str):
    """(address, opcode, operands, predicate or "") of the first function whose name holds
    `kernel`, and its labels' addresses."""
    out, labels, inside = [], {}, False
    pending = []
    for line in sass.splitlines():
        if line.strip().startswith("Function :"):
            if inside:
                break
            inside = kernel in line
            continue
        if not inside:
            continue
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = LINE.search(line)
        if m:
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            out.append((addr, m.group(3), m.group(4), (m.group(2) or "").strip()))
    if not out:
        raise SystemExit(f"no function holding {kernel!r} in the SASS")
    return out, labels


def loops(lines, labels):
    """[(start, end)] of every backward branch: end its address, start its target's."""
    found = []
    for addr, op, rest, _ in lines:
        target = branch_target(op, rest, labels)
        if target is not None and target <= addr:
            found.append((target, addr))
    return sorted(found)


def branch_target(op, rest, labels):
    """A branch's target address, or None (not a branch, or an indirect one)."""
    if not op.startswith("BRA"):
        return None
    m = re.search(r"\(?(\.L_x_\d+)\)?", rest) or re.search(r"0x([0-9a-f]+)", rest)
    if not m:
        return None
    return labels.get(m.group(1)) if m.group(1).startswith(".L") else int(m.group(1), 16)


def blocks(lines, labels, start, end):
    """The basic blocks of [start, end]: [(first address, instructions, its last opcode and
    operands)], split where a branch lands and after each branch or exit, so that the
    instructions on one path through a loop add up from the blocks it takes."""
    targets = {t for _, op, rest, _ in lines if (t := branch_target(op, rest, labels)) is not None}
    out, first, count = [], None, 0
    for addr, op, rest, pred in lines:
        if not start <= addr <= end:
            continue
        if addr in targets and count:
            out.append((first, count, last))
            count = 0
        if not count:
            first = addr
        count, last = count + 1, f"{pred} {op}{rest}".strip()
        if op.startswith(("BRA", "EXIT")):
            out.append((first, count, last))
            count = 0
    if count:
        out.append((first, count, last))
    return out


def summary(lines, labels, watch):
    ops = collections.Counter(op.split(".")[0] for _, op, _, _ in lines)
    rows = []
    for start, end in loops(lines, labels):
        body = [op.split(".")[0] for a, op, _, _ in lines if start <= a <= end]
        counts = collections.Counter(body)
        rows.append((start, end, len(body), {w: counts[w] for w in watch if counts[w]}))
    return ops, rows


def innermost_longest(rows):
    """(start, end) of the longest loop that holds no other loop of half its length or more: a
    kernel's K loop rather than the tile loop around it."""
    def holds_long_loop(r):
        return any(o is not r and r[0] <= o[0] and o[1] <= r[1] and 2 * o[2] >= r[2] for o in rows)
    start, end, _, _ = max((r for r in rows if not holds_long_loop(r)), key=lambda r: r[2])
    return start, end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sources", nargs="+", type=Path, help="grouped_wgmma.cu (or any .cu) of each build")
    ap.add_argument("--kernel", required=True, help="a part of the kernel's mangled name, e.g. regw_gemm")
    ap.add_argument("--watch", default="HGMMA,LDG,LDS,STS,STG,BAR,SYNCS,PRMT,HMUL2,MOV,IMAD",
                    help="opcodes counted in each loop")
    ap.add_argument("--min-loop", type=int, default=40,
                    help="loops shorter than this many instructions (barrier spins) are not listed")
    ap.add_argument("--blocks", action="store_true",
                    help="also list the basic blocks of each build's innermost longest loop, to add up "
                         "the instructions of the path a stage takes")
    args = ap.parse_args()
    watch = args.watch.split(",")
    per, ptxas = {}, {}
    listed = {}
    for cu in args.sources:
        sass, log = sass_of(cu)
        lines, labels = kernel_lines(sass, args.kernel)
        per[cu] = summary(lines, labels, watch)
        ptxas[cu] = ptxas_notes(log, args.kernel)
        if args.blocks and per[cu][1]:
            start, end = innermost_longest(per[cu][1])
            listed[cu] = (start, end, blocks(lines, labels, start, end))
    names = [str(cu.parent.name or cu) for cu in args.sources]
    for cu, name in zip(args.sources, names):
        print(f"{name}: loops of {args.min_loop}+ instructions (start-end, instructions, watched opcodes)")
        for start, end, n, counts in per[cu][1]:
            if n >= args.min_loop:
                print(f"  {start:#07x}-{end:#07x} {n:5d} {counts}")
        if cu in listed:
            start, end, found = listed[cu]
            print(f"  basic blocks of {start:#07x}-{end:#07x} (first address, instructions, last instruction):")
            for first, count, last in found:
                print(f"    {first:#07x} {count:5d}  {last[:70]}")
        print()
    # last, so that the tail of a long log holds them: ptxas's notes, the opcodes whose counts differ
    keys = sorted(set().union(*ptxas.values()), key=lambda x: (x.startswith("C"), x))
    print("| ptxas | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for key in keys:
        print(f"| {key} | " + " | ".join(str(ptxas[cu].get(key, 0)) for cu in args.sources) + " |")
    print()
    everything = sorted(set().union(*(ops for ops, _ in per.values())))
    print("| opcode | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    print("| all | " + " | ".join(str(sum(per[cu][0].values())) for cu in args.sources) + " |")
    for op in everything:
        counts = [per[cu][0][op] for cu in args.sources]
        if len(set(counts)) > 1:
            print(f"| {op} | " + " | ".join(map(str, counts)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
