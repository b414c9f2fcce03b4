"""Registers, spills and shared memory of the grouped one-tile kernel for sm_90, without a GPU.

Triton compiles for a target it is not running on, and its wheel carries ptxas, so the CPU
machine can answer "how many registers does this tile config take, and how many CTAs fit an
SM" before any device time is spent. It compiles grouped_tile_gemm_kernel for each of the
heuristic's tile configs (BM 64; BN 32 / 64 / 128 with their stage counts, TMA on), runs the
bundled ptxas on the PTX, and prints one line per config with the CTAs per SM that
registers and shared memory allow (H200: 65536 registers, 228 KiB of shared memory per SM).

The local Triton (3.9 here) is not the GPU host's (3.6): the counts can differ there. Run 21
(fifth session): on 64-wide tiles the first-block guess with its exact loops compiled in took
191 registers against 160 without (2 CTAs per SM instead of 3), which matches the 3.6-9.4 us
lost on those tiles in harness run J.

Usage: python scripts/cpu_kernel_resources.py
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from lowbit_gemm.solutions import load_solution  # noqa: E402

GR = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
REGS_PER_SM, SMEM_PER_SM, THREADS = 65536, 228 * 1024, 128  # H200; 4 warps per CTA


def compile_tile_kernel(kernel, bm, bn, stages):
    sig = {"a_ptr": "*fp8e4nv", "as_ptr": "*fp32", "b_ptr": "*u8", "bs_ptr": "*fp32", "mm_ptr": "*i32",
           "c_ptr": "*bf16", "bq_ptr": "*fp8e4nv", "ref_ptr": "*fp32",
           "a_desc": f"tensordesc<fp8e4nv[{bm}, 128]>", "bq_desc": f"tensordesc<fp8e4nv[{bn}, 128]>",
           "MAX_M": "i32", "N": "i32", "K": "i32"}
    consts = dict(BM=bm, BN=bn, TMA=True, MANUAL_RNE=False, USE_ASM=True, CORR_ASM=True, PLAIN=False, PDL=False)
    sig.update({name: "constexpr" for name in consts})
    # 16-byte aligned pointers and N, K divisible by 16, as in the definition's calls.
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 7, 11, 12)}
    src = ASTSource(fn=kernel, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": stages})


def ptxas_registers(ptx):
    """(registers, spill bytes) from the wheel's ptxas; the newest one bundled reads Triton's PTX."""
    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        for name in ("ptxas-blackwell", "ptxas"):
            exe = bin_dir / name
            if not exe.exists():
                continue
            out = subprocess.run([str(exe), "-arch=sm_90a", "-v", str(path), "-o", str(Path(tmp) / "k.cubin")],
                                 capture_output=True, text=True)
            regs = re.search(r"Used (\d+) registers", out.stderr + out.stdout)
            spill = re.search(r"(\d+) bytes spill stores", out.stderr + out.stdout)
            if regs:
                return int(regs.group(1)), int(spill.group(1)) if spill else 0
    raise RuntimeError("no bundled ptxas could assemble the PTX")


def main():
    kernel = load_solution(GR, "lowbit", "triton_fp4_to_fp8_wgmma", "kernel").grouped_tile_gemm_kernel
    print(f"triton {triton.__version__} (the GPU host runs its own version), target sm_90a, 4 warps")
    print("| tile | stages | registers | spill bytes | shared KiB | CTAs/SM by registers | by shared |")
    print("|---|---|---|---|---|---|---|")
    for bn, stages in ((32, 6), (64, 4), (128, 3)):
        ck = compile_tile_kernel(kernel, 64, bn, stages)
        regs, spill = ptxas_registers(ck.asm["ptx"])
        smem = ck.metadata.shared
        # Registers are allocated per warp in units of 256 (8 per thread).
        by_regs = REGS_PER_SM // (-(-regs // 8) * 8 * THREADS)
        print(f"| 64x{bn} | {stages} | {regs} | {spill} | {smem / 1024:.1f} | {by_regs} | {SMEM_PER_SM // max(smem, 1)} |")


if __name__ == "__main__":
    main()
