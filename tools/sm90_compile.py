"""Compile the fp16-MMA kernels for sm_90a without a GPU and print what the compiler made of
each tile: registers, spills, shared memory, and which MMA instructions and layout
conversions the kernel holds (wgmma or mma.sync; convert_layout / local_alloc counts).

Triton compiles for a target it is not running on and its wheel carries ptxas. Run it with
the GPU host's Triton (a venv with triton==3.6.0): numbers differ between versions.

  python tools/sm90_compile.py
"""

import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

ROOT = Path(__file__).resolve().parents[1] / "solutions" / "lowbit" / "gemm"


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_sm90(kernel, sig, consts, options):
    sig = {**sig, **{name: "constexpr" for name in consts}}
    attrs = {(i,): [["tt.divisibility", 16]] for i, (n, t) in enumerate(sig.items()) if t.startswith("*")}
    src = ASTSource(fn=kernel, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def ptxas(ptx):
    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        out = subprocess.run([str(bin_dir / "ptxas"), "-arch=sm_90a", "-v", str(path), "-o", str(Path(tmp) / "k.o")],
                             capture_output=True, text=True)
        text = out.stderr + out.stdout
        regs = re.search(r"Used (\d+) registers", text)
        spill = re.search(r"(\d+) bytes spill stores", text)
        return (int(regs.group(1)) if regs else -1), (int(spill.group(1)) if spill else 0)


def report(label, ck):
    ttgir, ptx = ck.asm["ttgir"], ck.asm["ptx"]
    regs, spill = ptxas(ptx)
    print(f"| {label} | {regs} | {spill} | {ck.metadata.shared / 1024:.0f} | "
          f"{ptx.count('wgmma.mma_async')} | {ptx.count('mma.sync')} | {ttgir.count('convert_layout')} | "
          f"{ttgir.count('local_alloc')} | {ttgir.count('async_copy_global_to_local')} |", flush=True)


def main():
    print(f"triton {triton.__version__}, sm_90a")
    print("| kernel tile | regs | spill B | smem KiB | wgmma | mma.sync | convert_layout | local_alloc | cp.async |")
    print("|---|---|---|---|---|---|---|---|---|")
    which = sys.argv[1:] or ["grouped", "sparse"]
    if "grouped" in which:
        g = _module(ROOT / "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/triton_fp4_fp16_mma/kernel.py", "gk")
        sig = {"a_ptr": "*fp8e4nv", "as_ptr": "*fp32", "b_ptr": "*i8", "s_ptr": "*fp32", "mm_ptr": "*i32",
               "c_ptr": "*bf16", "MAX_M": "i32", "N": "i32"}
        for bm, bn, swap, w, st in ((128, 128, False, 8, 2), (128, 128, False, 8, 1), (64, 128, False, 4, 2),
                                    (128, 256, False, 8, 2), (32, 64, True, 4, 2), (16, 64, True, 4, 4),
                                    (64, 128, True, 4, 2), (64, 128, True, 8, 2)):
            consts = dict(K=2048, BM=bm, BN=bn, SWAP=swap, GROUP_M=8, MANUAL_RNE=False)
            try:
                report(f"grouped {bm}x{bn}{'s' if swap else ''} w{w} s{st}",
                       compile_sm90(g.grouped_fp16_kernel, sig, consts, {"num_warps": w, "num_stages": st}))
            except Exception as e:
                print(f"| grouped {bm}x{bn} | failed: {str(e)[-1500:]} |")
    if "sparse" in which:
        s = _module(ROOT / "sparse_gemm_fp4_fp8_n2048_k2048/triton_sparse_fp4_fp16_mma/kernel.py", "sk")
        sig = {"v_ptr": "*i8", "m_ptr": "*i8", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "M": "i32", "N": "i32",
               "G": "i32"}
        for bm, bn, swap, w, st in ((128, 256, False, 8, 2), (128, 128, False, 8, 2), (128, 128, False, 8, 1),
                                    (256, 128, False, 8, 2), (64, 64, True, 4, 4), (16, 64, True, 4, 4)):
            consts = dict(BM=bm, BN=bn, SWAP=swap, GROUP_M=8, MANUAL_RNE=False)
            try:
                report(f"sparse {bm}x{bn}{'s' if swap else ''} w{w} s{st}",
                       compile_sm90(s.sparse_fp16_kernel, sig, consts, {"num_warps": w, "num_stages": st}))
            except Exception as e:
                print(f"| sparse {bm}x{bn} | failed: {str(e)[-1500:]} |")


if __name__ == "__main__":
    main()
