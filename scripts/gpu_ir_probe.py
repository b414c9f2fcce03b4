"""What Triton made of each kernel as launched on this GPU (diagnostic for the few-row paths).

Launches the sparse and grouped solutions on a few shapes (and two streaming-kernel
variants), then for every compiled kernel kept by the solutions' launch caches prints:
registers, spills, shared memory, and from the TTGIR how many loads became cp.async copies
(`async_copy_global_to_local`, i.e. pipelined), how many stayed plain `tt.load`, the
`async_wait` depths and the wgmma wait depths. Triton on the CPU (3.9) and on the GPU host
(3.6) may differ; this reads the GPU's own compile.

Usage: python3 scripts/gpu_ir_probe.py [ncu]   ("ncu": launch only, one call each, for ncu)
"""

import dataclasses
import re
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from lowbit_gemm.quantize import quantize_act_fp8_per128, quantize_weight_fp4_per32  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

SP = "sparse_gemm_fp4_fp8_n2048_k2048"
GR = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
sp = load_solution(SP, "lowbit", "triton_sparse_fp4_decode_wgmma")
spH = load_solution(SP, "lowbit", "triton_sparse_fp4_decode_wgmma", "heuristics")
gr = load_solution(GR, "lowbit", "triton_fp4_to_fp8_wgmma")
dev = "cuda"


def sparse_inputs(m):
    g = torch.Generator(device=dev).manual_seed(m)
    av = torch.randint(-128, 128, (m, 512), dtype=torch.int8, device=dev, generator=g)
    am = torch.randint(-128, 128, (m, 512), dtype=torch.int8, device=dev, generator=g)
    b = torch.randn(2048, 2048, device=dev, generator=g).clamp(-2, 2).to(torch.float8_e4m3fn)
    return av, am, b, torch.empty(m, 2048, dtype=torch.bfloat16, device=dev)


def grouped_inputs(max_m, masked):
    g = torch.Generator(device=dev).manual_seed(max_m)
    a, a_s = quantize_act_fp8_per128(torch.randn(4, max_m, 2048, device=dev, generator=g))
    b, b_s = quantize_weight_fp4_per32(torch.randn(4, 2048, 2048, device=dev, generator=g) * 0.02)
    mm = torch.tensor(masked, dtype=torch.int32, device=dev)
    c = torch.empty(4, max_m, 2048, dtype=torch.bfloat16, device=dev)
    return a, a_s, b, b_s, mm, c


def launch_all():
    from gpu_floor import read_kernel  # the pure read of 4 MiB, for reference under ncu
    x = torch.ones(1 << 20, dtype=torch.int32, device=dev)
    read_kernel[(1024,)](x, torch.empty(1024, dtype=torch.int32, device=dev), 1024, BLOCK=512, STAGES=3)
    for m in (1, 16, 64, 256):
        sp.run(*sparse_inputs(m))
    sp.launch_stream(*sparse_inputs(16), spH.StreamConfig(16, 32, 128, num_stages=4))
    sp.launch_stream(*sparse_inputs(64), spH.StreamConfig(64, 16, 128, num_stages=4))
    for max_m, masked, e in ((1, [1, 1, 0, 1], 1), (16, [8, 16, 3, 11], 8), (64, [8, 21, 32, 13], 22),
                             (512, [512] * 4, 512)):
        a, a_s, b, b_s, mm, c = grouped_inputs(max_m, masked)
        gr.run(a, a_s, b, b_s, mm, e, c)
    # The one-pass few-row kernel on 8 warps (eighth session, run 34: both warpgroups decoded
    # the whole B tile, 5.39 M warp instructions against 3.10 M; not taken).
    grH = load_solution(GR, "lowbit", "triton_fp4_to_fp8_wgmma", "heuristics")
    a, a_s, b, b_s, mm, c = grouped_inputs(1, [1, 1, 0, 1])
    cfg = dataclasses.replace(grH.choose_config(1, 1, 2048), num_warps=8)
    gr.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, 1, config=cfg)
    torch.cuda.synchronize()


def describe(kernel, consts, ck):
    ir = ck.asm.get("ttgir", "")
    name = getattr(getattr(kernel, "fn", None), "__name__", None) or getattr(kernel, "__name__", "?")
    try:
        ck._init_handles()
    except Exception:
        pass
    waits = sorted(set(re.findall(r"async_wait .*?num = (\d+)", ir)))
    pend = sorted(set(re.findall(r"pendings = (\d+)", ir)))
    loads = len(re.findall(r"= tt.load ", ir))
    return (f"{name} {consts} warps={ck.metadata.num_warps} stages={ck.metadata.num_stages} "
            f"regs={getattr(ck, 'n_regs', '?')} spills={getattr(ck, 'n_spills', '?')} "
            f"smem={ck.metadata.shared} | cp.async={ir.count('async_copy_global_to_local')} "
            f"tt.load={loads} local_load={ir.count('ttg.local_load')} async_wait={waits} "
            f"wgmma={ir.count('warp_group_dot ')} wgmma_wait={pend} mma_v2={ir.count('tt.dot ')} "
            f"loops={ir.count('scf.for')}")


def main():
    print(f"GPU {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}")
    launch_all()
    if "ncu" in sys.argv[1:]:
        return
    for mod in (sp, gr):
        for key, (ck, _tail) in mod._COMPILED.items():
            print(describe(key[0], key[1], ck))


if __name__ == "__main__":
    main()
