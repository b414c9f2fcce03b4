"""Registers, spills and shared memory of the main GEMM kernels for sm_90, without a GPU.

Triton compiles for a target it is not running on, and its wheel carries ptxas, so the CPU
machine can answer "how many registers does this tile config take, and how many CTAs fit an
SM" before any device time is spent. It compiles the grouped solution's
grouped_tile_gemm_kernel for each of the heuristic's tile configs (BM 64; BN 32 / 64 / 128
with their stage counts, TMA on) and the sparse solution's FP8 GEMM (64x128x128, 4 stages,
TMA and pointer loads), optionally with a register cap, runs the bundled ptxas on the PTX and
prints one line per config with the CTAs per SM that registers and shared memory allow
(H200: 65536 registers, 228 KiB of shared memory per SM).

The local Triton (3.9 here) is not the GPU host's (3.6): the counts can differ there. Run 21
(fifth session): on 64-wide tiles the first-block guess with its exact loops compiled in took
191 registers against 160 without (2 CTAs per SM instead of 3), which matches the 3.6-9.4 us
lost on those tiles in harness run J.

Sixth session: the sparse GEMM is also listed with 3 stages (72 KiB, 3 CTAs per SM by
shared memory).

Ninth session: run it with the GPU host's Triton (a venv with triton==3.6.0 and
torch==2.13.0, both installable here; see README, Development): run 38's 128x128 tile as two
column halves took 126 registers and no spill at a cap of 128 with 3.9, but spilled 1044
bytes with 3.6 and ran 1.4-2x slower on the H200.

Usage: python scripts/cpu_kernel_resources.py [--maxnreg N]
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
SP = "sparse_gemm_fp4_fp8_n2048_k2048"
REGS_PER_SM, SMEM_PER_SM, THREADS = 65536, 228 * 1024, 128  # H200; 4 warps per CTA


def grouped_tile_config(kernel, bn, stages, row_ref=False):
    """(kernel, signature, constexprs, attrs, options) of grouped_tile_gemm_kernel, 64 x bn."""
    sig = {"a_ptr": "*fp8e4nv", "as_ptr": "*fp32", "b_ptr": "*u8", "bs_ptr": "*fp32", "mm_ptr": "*i32",
           "c_ptr": "*bf16", "bq_ptr": "*fp8e4nv", "ref_ptr": "*fp32",
           "a_desc": "tensordesc<fp8e4nv[64, 128]>", "bq_desc": f"tensordesc<fp8e4nv[{bn}, 128]>",
           "MAX_M": "i32", "N": "i32", "K": "i32"}
    consts = dict(BM=64, BN=bn, TMA=True, MANUAL_RNE=False, USE_ASM=True, CORR_ASM=True, PLAIN=False, PDL=False,
                  ROW_REF=row_ref)
    # 16-byte aligned pointers and N, K divisible by 16, as in the definition's calls.
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 7, 11, 12)}
    return kernel, sig, consts, attrs, {"num_warps": 4, "num_stages": stages}


def sparse_gemm_config(kernels, tma, stages=4):
    """The sparse solution's FP8 GEMM as its heuristic runs it from m = 257 (64x128x128, 4
    stages, promotion every 32 products), TMA or pointer loads."""
    consts = dict(BM=64, BN=128, BK=128, GROUP_M=8, ACC_K=32, SCALE=64.0, PDL=False)
    if tma:
        sig = {"a_desc": "tensordesc<fp8e4nv[64, 128]>", "b_desc": "tensordesc<fp8e4nv[128, 128]>",
               "c_desc": "tensordesc<bf16[64, 128]>", "M": "i32", "N": "i32", "K": "i32"}
        consts["WS"] = False
        return kernels.fp8_gemm_tma_kernel, sig, consts, {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5)}, \
            {"num_warps": 4, "num_stages": stages}
    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}
    consts["PREFETCH_B"] = False
    return kernels.fp8_gemm_kernel, sig, consts, {(i,): [["tt.divisibility", 16]] for i in range(9)}, \
        {"num_warps": 4, "num_stages": stages}


def compile_for_sm90(kernel, sig, consts, attrs, options):
    sig = {**sig, **{name: "constexpr" for name in consts}}
    src = ASTSource(fn=kernel, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


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
    cap = int(sys.argv[sys.argv.index("--maxnreg") + 1]) if "--maxnreg" in sys.argv else 0
    grouped = load_solution(GR, "lowbit", "triton_fp4_to_fp8_wgmma", "kernel").grouped_tile_gemm_kernel
    sparse = load_solution(SP, "lowbit", "triton_sparse_fp4_decode_wgmma", "kernel")
    configs = [(f"grouped 64x{bn}, {st} stages", grouped_tile_config(grouped, bn, st))
               for bn, st in ((32, 6), (64, 4), (128, 3))]
    configs.append(("grouped 64x128, 3 stages, row_ref", grouped_tile_config(grouped, 128, 3, True)))
    configs.append(("grouped 64x64, 4 stages, row_ref", grouped_tile_config(grouped, 64, 4, True)))
    configs += [(f"sparse 64x128x128, {st} stages, {'TMA' if tma else 'pointers'}",
                 sparse_gemm_config(sparse, tma, st)) for st in (4, 3) for tma in (True, False)]
    print(f"triton {triton.__version__} (the GPU host runs its own version), target sm_90a, 4 warps"
          + (f", maxnreg {cap}" if cap else ""))
    print("| kernel | registers | spill bytes | shared KiB | CTAs/SM by registers | by shared |")
    print("|---|---|---|---|---|---|")
    for label, (kernel, sig, consts, attrs, options) in configs:
        if cap:
            options = {**options, "maxnreg": cap}
        ck = compile_for_sm90(kernel, sig, consts, attrs, options)
        regs, spill = ptxas_registers(ck.asm["ptx"])
        smem = ck.metadata.shared
        # Registers are allocated per warp in units of 256 (8 per thread).
        by_regs = REGS_PER_SM // (-(-regs // 8) * 8 * THREADS)
        print(f"| {label} | {regs} | {spill} | {smem / 1024:.1f} | {by_regs} | {SMEM_PER_SM // max(smem, 1)} |")


if __name__ == "__main__":
    main()
