"""How fast the SMs can read from L2, against DRAM: a ceiling for GEMM tiles whose operands
all sit in L2 (the grouped solution's 512-full GEMM pass reads ~192 MiB of tiles from a 20 MiB
working set, docs/kernels/grouped_gemm.md, run 45).

A Triton kernel in which every program walks the buffer with a grid-wide stride, REPS times,
summing what it reads (so nothing is optimised away). A buffer under the L2's size stays
resident after the first pass, so its figure is the L2-to-SM read rate; a 1 GiB buffer gives
DRAM's. GPU time from CUDA events around 10 launches after a warm-up, median; bytes are the
bytes the programs load.

Usage (GPU machine, repository root): python3 scripts/gpu_l2_probe.py
"""

import statistics

import torch
import triton
import triton.language as tl


@triton.jit
def stream_read_kernel(x_ptr, out_ptr, n, REPS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for _ in range(REPS):
        for off in range(pid * BLOCK, n, step):
            acc += tl.load(x_ptr + off + tl.arange(0, BLOCK))
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)


def read_rate(mib, reps, programs_per_sm=8, block=2048):
    """(TB/s, us) of reading a mib-MiB int32 buffer reps times."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n = (mib << 20) // 4
    x = torch.randint(0, 7, (n,), dtype=torch.int32, device="cuda")
    grid = sms * programs_per_sm
    out = torch.empty(grid * block, dtype=torch.int32, device="cuda")

    def launch():
        stream_read_kernel[(grid,)](x, out, n, REPS=reps, BLOCK=block, num_warps=8)

    launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    us = statistics.median(times)
    return (mib << 20) * reps / (us * 1e-6) / 1e12, us


def main():
    p = torch.cuda.get_device_properties(0)
    print(f"GPU {p.name} ({p.multi_processor_count} SMs, L2 {p.L2_cache_size >> 20} MiB) torch {torch.__version__} "
          f"triton {triton.__version__}")
    rows = []
    for mib, reps in ((8, 40), (16, 20), (24, 14), (32, 10), (48, 6), (1024, 1)):
        for pps in (4, 8, 16):
            tbs, us = read_rate(mib, reps, pps)
            rows.append((mib, reps, pps, tbs, us))
            print(f"{mib:5d} MiB x {reps:2d} reads, {pps:2d} programs/SM: {tbs:6.2f} TB/s ({us:8.1f} us)", flush=True)
    print("\n| buffer MiB | reads | programs per SM | TB/s | us |\n|---|---|---|---|---|")
    for mib, reps, pps, tbs, us in rows:
        print(f"| {mib} | {reps} | {pps} | {tbs:.2f} | {us:.1f} |")


if __name__ == "__main__":
    main()
