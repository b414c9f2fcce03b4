"""Timeline of fused_ws_kernel inside one launch (sixteenth session, runs 62 and 65): when each
partition of each CTA reaches its milestones, from %globaltimer stamps written by a probe copy
of the kernel beside fused_ws.py in the solution's folder (it imports from `.kernel`): the
kernel of commit f01e1bd with a `tl_ptr` argument and milestone stamps (`fused_ws_tl.py`), or
run 60's two-chain kernel with them (`fused_ws_tl2.py`), both kept at commit 2674455 (run 62);
or a copy with a stamp per block and partition and TIMELINE_BLOCKS = True (`fused_ws_tlb4.py`,
`fused_ws_tlb8.py`: the kernel of f01e1bd with 4 or 8 stages; `fused_ws_tlbd4.py`: with run
65's 4-warp decoder), kept at commit 4bc1fc2 (run 65); `fused_ws_tlb.py`, the seventeenth
session's submitted kernel with those stamps and TIMELINE_READY (the consumer's stamp when it
finds a block decoded, slots 80-95), on %clock64 with TIMELINE_CLOCK (run 74, commit 9df78f9;
on %globaltimer, run 73, commit 1bcf1d1); for the submitted kernel as it is now,
`python3 scripts/make_ws_timeline_probe.py` writes that copy (`fused_ws_tlb.py`, twenty-third
session, run 120). None is in the solution folder (its packed JSON holds every file there):
delete a copy after its run; restore an old one with
  git show 4bc1fc2:solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/\
triton_fp4_to_fp8_wgmma/fused_ws_tlb8.py > <that folder>/fused_ws_tlb8.py

Each launch follows a 128 MiB write (L2 cold, as the harness's flush leaves it). Prints, per
milestone, the min / median / max over the CTAs with work of (stamp - the launch's first
stamp) in us; a two-chain copy (run 60's kernel) stamps its second chain's milestones 32
slots on, and its first chain's blocks 0 and 14 as "block 0" and "block 15" (its second
chain's 1 and 15). Usage (H200): python3 scripts/gpu_ws_timeline.py [MODULE[,MODULE...]] [--time]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_ir_probe as p  # noqa: E402  (inputs)

import torch  # noqa: E402

from lowbit_gemm.solutions import load_solution  # noqa: E402

SLOTS = {0: "loader start", 1: "loader has masked_m", 2: "loader issued block 0", 3: "loader reuses stage 0",
         4: "loader issued block 15", 8: "decoder start", 9: "decoder: block 0 loaded", 10: "decoder: block 0 done",
         11: "decoder: block 15 loaded", 12: "decoder: block 15 done", 16: "consumer start",
         17: "consumer: block 0 loaded", 18: "consumer: block 0 decoded", 19: "consumer: block 0 released",
         20: "consumer: block 15 ready", 21: "consumer: block 15 released", 22: "consumer: tile stored",
         23: "consumer exit"}


CASES = ((1, [1, 1, 0, 1]), (1, [1, 1, 1, 1]), (64, [8, 21, 32, 13]))


def main():
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else ["fused_ws_tl"]
    mods = {name: load_solution(p.GR, "lowbit", "triton_fp4_to_fp8_wgmma", name) for name in names}
    for name, mod in mods.items():
        if getattr(mod, "TIMELINE_BLOCKS", False):
            blocks(mod, name)
        elif name.startswith("fused_ws_tl"):  # the copies with milestone stamps
            timeline(mod, name)
    if "--time" in sys.argv:
        times(mods)


_FLUSH = []  # the 128 MiB written before each stamped launch, allocated once


def stamps(mod, max_m, masked, slots):
    """One launch after a 128 MiB write; the [CTAs, slots] stamps and which CTAs had work."""
    if not _FLUSH:
        _FLUSH.append(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"))
    flush = _FLUSH[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a, a_s, b, b_s, mm, c = p.grouped_inputs(max_m, masked)
    buf = torch.zeros(sms * slots, dtype=torch.int64, device="cuda")
    for _ in range(5):  # the first compiles; the last is kept
        buf.zero_()
        flush.fill_(1)
        mod.launch(a, a_s, b, b_s, mm, c, sms, buf)
        torch.cuda.synchronize()
    return buf.view(sms, slots).cpu()


def blocks(mod, name):
    """A copy with TIMELINE_BLOCKS (run 65): per block of the first tile, the median over the
    CTAs with work of when the loader had issued it, the decoder found it loaded, had decoded
    it and the consumer released it, and the differences (load, decode, MMA)."""
    for max_m, masked in CASES:
        t = stamps(mod, max_m, masked, 128)
        work = t[:, 0] > 0
        if getattr(mod, "TIMELINE_CLOCK", False):
            # %clock64 cycles, per SM (not comparable across SMs): each CTA from its own first
            # stamp, at its own clock rate (cycles between slots 66 and 65 over the ns between
            # the %globaltimer stamps 96 and 97 beside them).
            tw = t[work].double()
            ghz = (tw[:, 65] - tw[:, 66]) / (tw[:, 97] - tw[:, 96])
            tw[:, 96:] = 0
            first = torch.where(tw[:, :96] > 0, tw[:, :96], torch.inf).min(dim=1).values
            us = torch.where(tw > 0, (tw - first[:, None]) / ghz[:, None] / 1e3, 0)
            print(f"\n{name}: SM clock {ghz.median():.3f} GHz (median over CTAs)", end="")
        else:
            t0 = t[t > 0].min()
            us = (t[work].double() - t0) / 1e3
        med = us.median(dim=0).values
        print(f"\n{name}: max_m {max_m} masked {masked}, {int(work.sum())} CTAs with work; medians, us after "
              f"the first stamp: masked_m read {med[64]:.2f}, c stored {med[65]:.2f}")
        ready = getattr(mod, "TIMELINE_READY", False)  # slots 80-95: the consumer found it decoded
        print("block  issued  loaded decoded" + ("   ready" if ready else "") + " released | load  decode  mma"
              + ("  (wait  own)" if ready else ""))
        for kb in range(16):
            i, l, d, r = (med[kb + 16 * e] for e in range(4))
            lat = (us[:, 16 + kb] - us[:, kb]).median()
            dec = (us[:, 32 + kb] - us[:, 16 + kb]).median()
            mma = (us[:, 48 + kb] - us[:, 32 + kb]).median()
            line = f"{kb:5d} {i:7.2f} {l:7.2f} {d:7.2f}" + (f" {med[80 + kb]:7.2f}" if ready else "")
            line += f" {r:8.2f} | {lat:5.2f} {dec:6.2f} {mma:5.2f}"
            if ready:  # the MMA column split: waiting for the consumer, then its own block
                wait = (us[:, 80 + kb] - us[:, 32 + kb]).median()
                own = (us[:, 48 + kb] - us[:, 80 + kb]).median()
                line += f"  ({wait:5.2f} {own:5.2f})"
            print(line)


def times(mods):
    """--time: each module's GPU time by the project's graph replay (rotating sets) and after a
    128 MiB memset (the harness's flush), on the timeline's cases."""
    from lowbit_gemm.bench.timing import time_after_memset, time_call
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    buf = torch.zeros(sms * 128, dtype=torch.int64, device="cuda")
    print(f"\n{'case':28s} " + " ".join(f"{n + ' graph':>22s} {n + ' memset':>22s}" for n in mods))
    for max_m, masked in CASES:
        a, a_s, b, b_s, mm, c = p.grouped_inputs(max_m, masked)
        row = []
        for name, mod in mods.items():
            fn = (lambda *x, mod=mod: mod.launch(*x, sms, buf)) if name.startswith("fused_ws_tl") else \
                (lambda *x, mod=mod: mod.launch(*x, sms))
            row.append(time_call(fn, [a, a_s, b, b_s, mm, c], 60 << 20, reps=20).median_us)
            row.append(time_after_memset(lambda: fn(a, a_s, b, b_s, mm, c)))
        print(f"{str((max_m, masked)):28s} " + " ".join(f"{v:22.2f}" for v in row))


def timeline(tlmod, name):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for max_m, masked in CASES:
        t = stamps(tlmod, max_m, masked, 64)
        work = t[:, 2] > 0
        t0 = t[t > 0].min()
        print(f"\n{name}: max_m {max_m} masked {masked}: {int(work.sum())} CTAs with work of {sms}")
        print(f"{'milestone':28s} {'min':>7s} {'median':>7s} {'max':>7s}  (us after the first stamp)")
        for chain in (0, 1):  # a second chain's stamps sit 32 slots on (two-chain copies)
            for slot, what in SLOTS.items():
                col = t[work, slot + 32 * chain]
                col = col[col > 0]
                if len(col):
                    us = (col - t0).double() / 1e3
                    print(f"{chain} {what:26s} {us.min():7.2f} {us.median():7.2f} {us.max():7.2f}")


if __name__ == "__main__":
    main()
