"""SASS instructions per K step of the grouped one-pass loop, for sm_90a, without a GPU.

The one-pass few-row kernel (grouped_gemm_kernel with kperm) is issue-bound: one warp per
scheduler, each 128-K step a chain of ~350-450 dependent instructions (eighth session, run
34). This compiles it as the heuristic launches it (64 weight rows by BM tokens, 4 warps, 3
stages, PTX decode; one 128-K block per iteration, or two with --unroll 2, the heuristic's
choice where K is not split), disassembles the cubin with the wheel's nvdisasm, finds the K
loop (the basic block holding the wgmma instructions) and prints its instruction count and
mix per iteration, and with --by-line the source lines that emit them.

Count with the GPU host's Triton (3.6 there; the CPU machine's 3.9 emits ~25% fewer
instructions for the same source): `pip download triton==3.6.0` works here, so a venv with
that wheel and torch==2.13.0 reproduces the device's compiler:
    python -m venv /tmp/tr36 && /tmp/tr36/bin/pip install triton==3.6.0 torch==2.13.0
    PYTHONPATH=src /tmp/tr36/bin/python scripts/cpu_loop_sass.py [--bm 16|32] [--unroll 1|2] [--split N] [--by-line]
Ninth session (Triton 3.6): 447 -> 356 instructions per step at BM 16, 502 -> 392 at BM 32,
from the scale fold on the scales' bit patterns and unmasked loads (docs/kernels/grouped_gemm.md,
run 39); with --unroll 2, 561 per iteration of two blocks at BM 16 (run 40).
"""

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from cpu_kernel_resources import GR, compile_for_sm90, ptxas_registers  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

INSTR = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
LABEL = re.compile(r"^\.L_x_\d+:")
SOURCE = re.compile(r'File "([^"]+)", line (\d+)')


def one_pass_kernel(bm: int, unroll: int, split: int = 1):
    """The one-pass kernel compiled for sm_90a as the heuristic launches it (CompiledKernel)."""
    kernel = load_solution(GR, "lowbit", "triton_fp4_to_fp8_wgmma", "kernel").grouped_gemm_kernel
    sig = {"a_ptr": "*fp8e4nv", "as_ptr": "*fp32", "b_ptr": "*u8", "bs_ptr": "*fp32", "mm_ptr": "*i32",
           "c_ptr": "*bf16", "bq_ptr": "*fp8e4nv", "ref_ptr": "*fp32", "part_ptr": "*fp32", "tick_ptr": "*i32",
           "MAX_M": "i32", "N": "i32", "K": "i32", "M_SPLIT": "i32"}
    consts = dict(BM=bm, BN=64, SWAP=True, ZR=16, ZN=256, MANUAL_RNE=False, USE_ASM=True, FOLD2D=True,
                  PREDEC=False, SPLIT_K=split, ABLATE=0, CORR_ASM=True, KPERM=True, UNROLL=unroll)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12)}
    return compile_for_sm90(kernel, sig, consts, attrs, {"num_warps": 4, "num_stages": 3})


def disassemble(ck) -> str:
    """SASS of a CompiledKernel's cubin (the wheel's nvdisasm), with source lines."""
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(ck.asm["cubin"])
        return subprocess.run([str(nvdisasm), "-c", "-g", str(cubin)], capture_output=True, text=True,
                              check=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bm", type=int, default=16, help="token tile (16: up to 16 rows, 32: 17-32)")
    ap.add_argument("--unroll", type=int, default=1, choices=(1, 2), help="128-K blocks per loop iteration")
    ap.add_argument("--split", type=int, default=1, help="K split over programs (the heuristic: 2 for 17-32 rows)")
    ap.add_argument("--by-line", action="store_true", help="also the instructions per source line")
    args = ap.parse_args()
    ck = one_pass_kernel(args.bm, args.unroll, args.split)
    regs, spill = ptxas_registers(ck.asm["ptx"])
    print(f"registers {regs}, spill bytes {spill}")
    lines = disassemble(ck).splitlines()
    mma = next(i for i, line in enumerate(lines) if "GMMA" in line)
    lo = max(i for i in range(mma) if LABEL.match(lines[i]))
    hi = min(i for i in range(mma, len(lines)) if LABEL.match(lines[i]))
    ops, by_line, where = collections.Counter(), collections.Counter(), None
    for line in lines[lo:hi]:
        src = SOURCE.search(line)
        if src:
            where = f"{Path(src.group(1)).name}:{src.group(2)}"
        elif m := INSTR.match(line):
            ops[m.group(2)] += 1
            by_line[where] += 1
    print(f"triton {triton.__version__}, sm_90a, one-pass loop BM={args.bm}: {sum(ops.values())} SASS "
          f"instructions per iteration ({args.unroll} x 128 K)")
    print(" ".join(f"{op}:{n}" for op, n in ops.most_common()))
    if args.by_line:
        for where, n in by_line.most_common(16):
            print(f"{n:5d}  {where}")


if __name__ == "__main__":
    main()
