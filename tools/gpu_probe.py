"""Diagnostic timings of the grouped kernels' forms on a few buckets (GPU us, graph replay,
cold L2), with the harness rule's bad-element count against the definition's reference."""
import sys
import torch
sys.path.insert(0, "tools")
from gpu_sweep import grouped_inputs, margin, L2
from lowbit_gemm.bench.timing import time_call
from lowbit_gemm.references import GROUPED, load_reference
from lowbit_gemm.solutions import load_solution

K = load_solution(GROUPED, "lowbit", "triton_fp4_fp16_mma", "kernel")
ref_fn = load_reference(GROUPED)


def one_pass(bm, bn, swap, w, st):
    def f(a, a_s, b, b_s, mm, c):
        max_m = a.shape[1]
        K.grouped_fp16_kernel[(-(-max_m // bm) * (2048 // bn), 4, 1)](
            a, a_s, b, b_s, mm, c, max_m, 2048, K=2048, BM=bm, BN=bn, SWAP=swap, GROUP_M=8, MANUAL_RNE=False,
            num_warps=w, num_stages=st)
    return f


def two_pass(bm, bn, w, st, br=64, dw=4, nat=True, exact=True):
    def f(a, a_s, b, b_s, mm, c):
        max_m = a.shape[1]
        bq = torch.empty(4, 2048, 2048, dtype=torch.float16, device="cuda")
        ref = torch.empty(4, 2048, 16, dtype=torch.float32, device="cuda")
        K.decode_b_kernel[(2048 // br, 16, 4)](b, b_s, bq, ref, 2048, K=2048, BR=br, NATURAL=nat, num_warps=dw)
        K.gemm_fp16_kernel[(-(-max_m // bm) * (2048 // bn), 4, 1)](
            a, a_s, b, b_s, bq, ref, mm, c, max_m, 2048, K=2048, BM=bm, BN=bn, GROUP_M=8, MANUAL_RNE=False,
            NATURAL=nat, EXACT=exact, num_warps=w, num_stages=st)
    return f


def decode_only(br, dw, nat):
    def f(a, a_s, b, b_s, mm, c):
        bq = torch.empty(4, 2048, 2048, dtype=torch.float16, device="cuda")
        ref = torch.empty(4, 2048, 16, dtype=torch.float32, device="cuda")
        K.decode_b_kernel[(2048 // br, 16, 4)](b, b_s, bq, ref, 2048, K=2048, BR=br, NATURAL=nat, num_warps=dw)
    return f


small = [("2p 32x64 w4 s3 nat", two_pass(32, 64, 4, 3)), ("2p 32x64 w4 s3 perm", two_pass(32, 64, 4, 3, nat=False)),
         ("2p 64x64 w4 s3 nat", two_pass(64, 64, 4, 3)), ("decode only br64 w4 perm", decode_only(64, 4, False)),
         ("decode only br64 w4 nat", decode_only(64, 4, True)), ("decode only br32 w4 nat", decode_only(32, 4, True)),
         ("decode only br128 w8 nat", decode_only(128, 8, True))]
big = [("2p 128x128 w8 s3 nat", two_pass(128, 128, 8, 3)), ("2p 128x128 w8 s4 nat", two_pass(128, 128, 8, 4)),
       ("2p 128x128 w8 s3 nat noexact", two_pass(128, 128, 8, 3, exact=False)),
       ("2p 64x128 w4 s4 nat", two_pass(64, 128, 4, 4)), ("2p 128x256 w8 s3 nat", two_pass(128, 256, 8, 3)),
       ("2p 128x128 w8 s3 perm noexact", two_pass(128, 128, 8, 3, nat=False, exact=False)),
       ("2p 64x256 w8 s3 nat", two_pass(64, 256, 8, 3)), ("2p 64x128 w4 s4 nat noexact", two_pass(64, 128, 4, 4, exact=False))]
cases = [("64 ~24", 64, [20, 27, 24, 22], small), ("512 full", 512, [512] * 4, big),
         ("2048 75%", 2048, [1500, 1600, 1450, 1550], big[:5])]
for name, max_m, masked, forms in cases:
    a, a_s, b, b_s, mm = grouped_inputs(max_m, masked, "outl" in name, 1)
    ref = ref_fn(a, a_s, b, b_s, mm, 0)
    for label, f in forms:
        if f is None:
            continue
        c = torch.full((4, max_m, 2048), float("nan"), dtype=torch.bfloat16, device="cuda")
        try:
            f(a, a_s, b, b_s, mm, c)
            torch.cuda.synchronize()
            bad, worst = margin(c, ref)
            us = time_call(f, [a, a_s, b, b_s, mm, c], L2).median_us
            print(f"| {name} | {label} | {bad} | {worst:.3f} | {us:.1f} |", flush=True)
        except Exception as e:
            print(f"| {name} | {label} | FAILED {str(e)[-400:]} |", flush=True)
