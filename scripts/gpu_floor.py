"""What the timing method itself costs: GPU time of a pure read of B-sized buffers.

The issue's memory floors divide bytes by the 4.25 TB/s copy rate. A call that moves only a
few MiB also pays a fixed cost (launch, the first DRAM round trip, the tail), so this script
measures, with the project's timing method (lowbit_gemm.bench.timing: CUDA-graph replay over
rotating input sets, L2 cold, median), a Triton kernel that reads N bytes and writes one int
per program, for the sizes the decode-like calls must read:
  4 MiB   sparse B (e4m3, n = k = 2048)
  8.5 MiB grouped b_fp4 + b_scale (g = 4)
  16 MiB  grouped B decoded to e4m3 (the two-pass path's GEMM read)
plus a one-program kernel (the launch floor). Also prints the same read timed after a
128 MiB memset (the FlashInfer-Bench flush, which leaves L2 full of dirty lines).

Usage (H200): PYTHONUNBUFFERED=1 python3 scripts/gpu_floor.py [--writes | --slabs]
(--writes, twelfth session: the rate at which zeros can be written instead; see writes();
--slabs, sixteenth session: the same bytes read in the few-row kernels' order; see slabs())
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from lowbit_gemm.bench.timing import time_after_memset, time_call  # noqa: E402

L2 = 60 << 20


@triton.jit
def read_kernel(x_ptr, out_ptr, per_prog, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """Program p sums int32 words [p * per_prog, (p + 1) * per_prog) (per_prog % BLOCK == 0)."""
    base = tl.program_id(0).to(tl.int64) * per_prog
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in tl.range(0, per_prog, BLOCK, num_stages=STAGES):
        acc += tl.load(x_ptr + base + i + tl.arange(0, BLOCK))
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def slab_kernel(x_ptr, out_ptr, ROW_WORDS, ROWS: tl.constexpr, STEP_WORDS: tl.constexpr, STAGES: tl.constexpr):
    """Program p reads its [ROWS, ROW_WORDS] int32 region (contiguous, row-major) one column
    slab [ROWS, STEP_WORDS] per step: fused_ws's and the few-row GEMM's order over B's rows."""
    base = tl.program_id(0).to(tl.int64) * ROWS * ROW_WORDS
    offs = tl.arange(0, ROWS)[:, None] * ROW_WORDS + tl.arange(0, STEP_WORDS)[None, :]
    acc = tl.zeros((ROWS, STEP_WORDS), dtype=tl.int32)
    for i in tl.range(0, ROW_WORDS, STEP_WORDS, num_stages=STAGES):
        acc += tl.load(x_ptr + base + offs + i)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc))


@triton.jit
def zero_kernel(y_ptr, per_prog, BLOCK: tl.constexpr, STREAM: tl.constexpr):
    """Program p writes zeros to bf16 elements [p * per_prog, (p + 1) * per_prog)."""
    base = tl.program_id(0).to(tl.int64) * per_prog
    z = tl.zeros((BLOCK,), dtype=tl.bfloat16)
    for i in range(0, per_prog, BLOCK):
        if STREAM:
            tl.store(y_ptr + base + i + tl.arange(0, BLOCK), z, cache_modifier=".cs")
        else:
            tl.store(y_ptr + base + i + tl.arange(0, BLOCK), z)


@triton.jit
def zero_rows_kernel(y_ptr, N, ZR: tl.constexpr, ZN: tl.constexpr):
    """The one-pass GEMM's zero programs (grouped_gemm_kernel): ZR rows of N bf16 each."""
    rows = tl.program_id(0).to(tl.int64) * ZR + tl.arange(0, ZR)
    z = tl.zeros((ZR, ZN), dtype=tl.bfloat16)
    for n0 in range(0, N, ZN):
        tl.store(y_ptr + rows[:, None] * N + n0 + tl.arange(0, ZN)[None, :], z)


def writes():
    """--writes: how fast zeros reach c (the mostly-empty buckets are mostly their zeros,
    twelfth session): torch's zero_, cudaMemsetAsync, a flat Triton store loop (program count,
    step, streaming stores), the one-pass GEMM's zero-program layout; 64 MiB and 16 MiB."""
    import ctypes

    cudart = None
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            cudart = ctypes.CDLL(name)
            break
        except OSError:
            pass
    print(f"GPU {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__} "
          f"cudart {'found' if cudart else 'not found'}", flush=True)
    rows = []
    for mib in (64, 16):
        nbytes = mib << 20
        y = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        # name -> (fn, bytes it writes: the flat loop's per-program share is rounded down)
        fns = {"torch zero_": (lambda y: y.zero_(), nbytes)}
        if cudart is not None:
            fns["cudaMemsetAsync"] = (lambda y: cudart.cudaMemsetAsync(
                ctypes.c_void_p(y.data_ptr()), 0, ctypes.c_size_t(y.numel() * 2),
                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)), nbytes)
        for progs, block in ((132, 8192), (264, 8192), (528, 4096), (1056, 4096), (2112, 2048), (4096, 2048)):
            per = y.numel() // progs // block * block
            if per == 0:
                continue
            for stream in (False, True):
                fns[f"triton {progs} progs x {block * 2 >> 10} KiB{' .cs' if stream else ''} ({per * progs * 2 >> 20} MiB)"] = (
                    lambda y, per=per, progs=progs, block=block, stream=stream:
                    zero_kernel[(progs,)](y, per, BLOCK=block, STREAM=stream), per * progs * 2)
        for zr in (16, 64):
            fns[f"one-pass zero programs, {zr} rows x 2048"] = (
                lambda y, zr=zr: zero_rows_kernel[(y.numel() // 2048 // zr,)](y, 2048, ZR=zr, ZN=256), nbytes)
        for what, (fn, written) in fns.items():
            t = time_call(fn, [y], L2).median_us
            tm = time_after_memset(lambda: fn(y))
            rows.append((f"{mib} MiB {what}", written, t, tm))
            print(rows[-1], flush=True)
    print("\nwhat | bytes | rotating-sets graph us (TB/s) | after 128 MiB memset us (TB/s)")
    for what, nb, t, tm in rows:
        print(f"{what} | {nb} | {t:.2f} ({nb / t / 1e6:.2f}) | {tm:.2f} ({nb / tm / 1e6:.2f})")


def slabs():
    """--slabs (run 61): is the few-row kernels' order of reading B what holds them at ~1.3-1.5
    TB/s? 128 programs (fused_ws's CTAs at <= 64 rows per group) each read a contiguous 64 KiB
    region (64 weight rows of 1 KiB: b_fp4's rows at k = 2048) as [64 rows, W bytes] column
    slabs, W = 64 (fused_ws's step), 128, 256, 1024 (whole rows: contiguous), at several
    pipeline depths; beside it the contiguous read of the same 8 MiB in 4 KiB steps."""
    print(f"GPU {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}", flush=True)
    progs, rows, row_words = 128, 64, 256
    x = torch.randint(0, 7, (progs * rows * row_words,), dtype=torch.int32, device="cuda")
    out = torch.empty(4096, dtype=torch.int32, device="cuda")
    nbytes = x.numel() * 4
    fns = {"contiguous, 4 KiB steps, 4 stages": lambda x, o: read_kernel[(progs,)](
        x, o, rows * row_words, BLOCK=1024, STAGES=4)}
    for step_words in (16, 32, 64, 256):
        for stages in (2, 4, 8):
            if stages > row_words // step_words:
                continue
            fns[f"[64 rows, {step_words * 4} B] slabs, {stages} stages"] = (
                lambda x, o, sw=step_words, st=stages: slab_kernel[(progs,)](
                    x, o, row_words, ROWS=rows, STEP_WORDS=sw, STAGES=st))
    rows_out = []
    for what, fn in fns.items():
        t = time_call(fn, [x, out], L2).median_us
        rows_out.append((what, t))
        print(rows_out[-1], flush=True)
    print(f"\nread {nbytes >> 20} MiB by {progs} programs | rotating-sets graph us (TB/s)")
    for what, t in rows_out:
        print(f"{what} | {t:.2f} ({nbytes / t / 1e6:.2f})")


def main():
    if "--writes" in sys.argv:
        return writes()
    if "--slabs" in sys.argv:
        return slabs()
    print(f"GPU {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}")
    rows = []
    out = torch.empty(4096, dtype=torch.int32, device="cuda")
    one = torch.ones(1024, dtype=torch.int32, device="cuda")
    launch = lambda x, o: read_kernel[(1,)](x, o, 1024, BLOCK=1024, STAGES=1)  # noqa: E731
    rows.append(("launch floor (1 program, 4 KiB)", 4096, time_call(launch, [one, out], L2).median_us, None))
    for mib in (4, 8.5, 16):
        nbytes = int(mib * (1 << 20))
        for progs, block, stages in ((132, 1024, 4), (264, 1024, 4), (528, 512, 4), (1056, 512, 3), (264, 2048, 3)):
            words = nbytes // 4
            per = -(-words // progs)
            per = -(-per // block) * block
            x = torch.randint(0, 7, (per * progs,), dtype=torch.int32, device="cuda")

            def fn(x, o, per=per, progs=progs, block=block, stages=stages):
                read_kernel[(progs,)](x, o, per, BLOCK=block, STAGES=stages)
            t = time_call(fn, [x, out], L2).median_us
            tm = time_after_memset(lambda: fn(x, out))
            rows.append((f"read {mib} MiB, {progs} progs x {block * 4 >> 10} KiB steps, {stages} stages",
                         per * progs * 4, t, tm))
            print(rows[-1], flush=True)
    print("\nwhat | bytes | rotating-sets graph us (TB/s) | after 128 MiB memset us (TB/s)")
    for what, nb, t, tm in rows:
        a = f"{t:.2f} ({nb / t / 1e6:.2f})"
        b = "-" if tm is None else f"{tm:.2f} ({nb / tm / 1e6:.2f})"
        print(f"{what} | {nb} | {a} | {b}")


if __name__ == "__main__":
    main()
