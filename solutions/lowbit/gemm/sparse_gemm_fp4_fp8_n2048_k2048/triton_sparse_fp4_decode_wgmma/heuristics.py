"""Path and tile choice from m, n and the device, apart from the kernels.

Paths (see docs/kernels/sparse_gemm.md for the measurements behind the numbers):
- one or two rows: one fused launch that decodes A on the fly and multiplies on the FP32
  units, each program loading all of K for 8 / BM rows of B at once (the problem is a read
  of B);
- 3..128 rows (and every m from 3 off Hopper): decode A once into a dense e4m3 workspace (one
  int32 word per 2:4 group), then a dense tensor-core GEMM (on Hopper both operands widened to
  fp16 in registers, fp32 accumulation), with narrow tiles so that 128+ CTAs run;
- from 129 rows on Hopper: dense e4m3 A, then the FP8 GEMM with its running sum promoted to
  fp32 after every wgmma (32 products), which keeps the harness's check; its tile width
  grows with m (32, 64, then 128 columns); TMA loads from TMA_FROM_M rows, pointer loads
  below (where the call is host-bound, see TMA_FROM_M).
Decoding both operands to fp16 workspaces first (decode_f16_kernel, GemmConfig.f16; the
129..256-row path until round 9), the one-launch split-K kernel (small_m_mma_kernel) and the
no-split streaming kernel (stream_kernel) stay selectable for experiments; all measured
slower (runs 8-10, round 9).
Decoding inside the GEMM ("fused" path, kept for experiments) repeats the decode for every
column tile, and measured 1.8x slower at m = 16; its 64- and 128-row tiles do not compile
with Triton 3.6.
"""

from dataclasses import dataclass

# Rows up to which the fused FP32-unit kernel is used. Round 12 (tenth session, H200): at
# m = 2 its 2x4x2048 tiles took 5.74 us (rotating input sets) / 5.45 (after a memset) against
# 8.41 / 8.00 for decode + GEMM; 4-row tiles took 8.3-8.5 at m = 3 and 4, where the
# tensor-core path took 7.6-7.7 / 8.0; 8-row tiles took 17-28 at m = 7.
SMALL_M_MAX = 2
# Rows up to which the one-launch tensor-core kernel (small_m_mma_kernel) is used: measured
# (round 2) 8.9 us GPU at m = 16 against 7.9 for decode + GEMM, but one launch instead of
# two; at m = 64 it took 18.3 us against 9.1 and at 256 24.9 against 10.3, so above 16 rows
# the two-launch path stays. Run 9 (third session): with two 128-wide K steps per program and
# a 2-stage pipeline instead of one 256-wide step (which spilled: 255 registers) it takes
# 9.4-9.7 us at m = 2..16 against 10.9-11.4, while at m = 32 and 64 the two-launch path is
# still faster (10.8-10.9 against 12.3-15.0).
# Run 10: the two-launch path with 16-wide weight tiles beat it at m = 16 (8.13 against 9.76
# us), so it is no longer chosen (0); it stays selectable through MmaSmallConfig.
MMA_SMALL_M_MAX = 0
# On Hopper, rows from which the FP8 MMA promoted every 32 products replaces the fp16 MMA
# (run 14, fourth session: harness-like inputs at m = 256..8192 all within tolerance, worst
# error 0.78 of it, a one-ulp bf16 rounding flip; 512: 13.2 us against 17.1 through fp16
# workspaces, 1024: 17.1 / 21.8, 8192: 106.5 / 138.0). Round 9 (sixth session) moved it from
# 257 to 129 with 32-wide tiles: m = 256 10.3 us against 13.7 through fp16 workspaces (the
# pruned and random-byte inputs within 0.77 of the tolerance); at 128 a tie with the
# fp16-widened 32x32 tiles below (9.3 / 9.2), which keep m <= 128.
F8_FROM_M = 129
# Rows from which the FP8 GEMM loads through TMA descriptors. Triton 3.6's launcher encodes
# the three descriptors at every launch, 8-16 us of host time on the H200 host, which
# FlashInfer-Bench's timing adds to the GPU time; TMA saves 0.7-2.0 us of GPU time at
# m = 512-2048 and 4.1-8.9 us at 4096-8192 (run 20, fifth session). Below, pointer loads.
TMA_FROM_M = 4096
# Products per fp32 promotion of the FP8 MMA on Hopper (one wgmma's K). Every 64 kept the
# check in run 14 too, but with less margin (worst 0.93 of the tolerance at m = 2048) and it
# failed the harness in run 5; every 128 failed in run 13.
ACC_K_HOPPER = 32
# SMs assumed when the caller does not say (the H200's).
DEFAULT_SMS = 132


def three_ctas_pay(tiles: int, num_sms: int) -> bool:
    """Whether the FP8 GEMM's 64x128 tiles should run 3 CTAs per SM (3 stages, 72 KiB of
    shared memory, and TMA's 194 registers capped at 168) instead of 2 (4 stages, 96 KiB):
    when that takes fewer waves. Round 8 (H200, GPU us, 4 stages -> 3): m = 3072 (768 tiles)
    45.9 -> 41.2 with pointers, 4096 (1024) 55.8 -> 49.9 and 8192 (2048) 108.4 -> 96.1 with
    TMA; at 512-2048 (128-512 tiles, as many waves either way) 3 stages were 0-2.8 us slower."""
    return -(-tiles // (3 * num_sms)) < -(-tiles // (2 * num_sms))


# Decode and GEMM as a programmatic dependent launch pair on sm_90+ (GemmConfig.pdl). Off:
# it saved 0.1-0.7 us (run 17), and harness run H' (2026-11-30) failed one output of m = 8192
# by 2.0 with it on, an error the FP8 path never came near without it (worst 0.78 of the
# tolerance over 50 M outputs, run 14; harness run G). The cause is not yet found: run
# `scripts/gpu_sparse_gemm.py pdlcheck` on a GPU before turning it back on.
PDL = False
# k must be a multiple of this: the smallest K tile of an FP8 tensor-core dot.
K_MULTIPLE = 32
DECODE_BLOCK = 512
# decode_f16_kernel: groups of A per program (4 fp16 out each), elements of B per program.
DECODE16_BLOCK_A = 512
DECODE16_BLOCK_B = 4096


@dataclass(frozen=True)
class SmallConfig:
    BM: int
    BN: int
    BK: int
    num_warps: int = 4
    num_stages: int = 3
    path: str = "fma"

    def as_kwargs(self):
        return dict(BM=self.BM, BN=self.BN, BK=self.BK, num_warps=self.num_warps,
                    num_stages=self.num_stages)


@dataclass(frozen=True)
class MmaSmallConfig:
    """One-launch tensor-core path for few rows (kernel.small_m_mma_kernel): BW weight rows
    on the MMA's M side, BT tokens on its N side, K split SPLIT ways (fp32 partials summed
    in-kernel by the last program of each tile), BK the K step (K / SPLIT a multiple of it)."""
    BW: int
    BT: int
    BK: int
    split: int
    num_warps: int = 4
    num_stages: int = 1
    acc_k: int = 64
    lut: bool = False
    path: str = "mma_small"

    def as_kwargs(self):
        return dict(BW=self.BW, BT=self.BT, BK=self.BK, SPLIT=self.split, ACC_K=self.acc_k,
                    LUT=self.lut, num_warps=self.num_warps, num_stages=self.num_stages)

    def workspace(self, m: int, n: int):
        """(fp32 partial floats, tickets) this launch needs; (0, 0) without a split."""
        tiles = -(-m // self.BT) * -(-n // self.BW)
        return (tiles * self.split * self.BW * self.BT, tiles) if self.split > 1 else (0, 0)


@dataclass(frozen=True)
class StreamConfig:
    """One launch, no split (kernel.stream_kernel): BN weight rows and BM token rows per
    program, all of K in BK steps through a num_stages-deep cp.async pipeline. a_f16: A
    decoded to fp16 and the fp16 MMA (exact on Hopper); else e4m3 A and kernel._mma with
    acc_k."""
    BM: int
    BN: int
    BK: int
    num_warps: int = 4
    num_stages: int = 4
    a_f16: bool = True
    acc_k: int = -1
    path: str = "stream"

    def as_kwargs(self):
        return dict(BM=self.BM, BN=self.BN, BK=self.BK, ACC_K=self.acc_k, A_F16=self.a_f16,
                    STAGES=self.num_stages, num_warps=self.num_warps)


@dataclass(frozen=True)
class GemmConfig:
    BM: int
    BN: int
    BK: int
    num_warps: int
    num_stages: int
    group_m: int = 8
    # kernel._mma's ACC_K: K products per fp32 promotion of the FP8 MMA's running sum
    # (0: one per K tile; ACC_F16: fp16 MMA). gemm_config sets it from the device (_acc_k).
    acc_k: int = 64
    # "tma": decode, then the descriptor GEMM; "ptr": decode, then the pointer GEMM;
    # "fused": decode inside the GEMM (one launch).
    path: str = "ptr"
    # Warp-specialised K loop (TMA path only).
    ws: bool = False
    # Both operands decoded to dense fp16 workspaces by one launch (decode_f16_kernel), so
    # the GEMM's loads feed the fp16 dot directly (ACC_K forced to ACC_F16, SCALE 2^14);
    # False: dense e4m3 A (decode_a_kernel), B read as e4m3, SCALE 64.
    f16: bool = False
    # The GEMM as a programmatic dependent launch of the decode (sm_90+, not the
    # interpreter): it starts while the decode runs and waits for its writes in-kernel; the
    # pointer GEMM on e4m3 A first prefetches its B rows (an input) into L2.
    pdl: bool = False
    # Register cap per thread (0: the compiler's choice).
    maxnreg: int = 0

    def as_kwargs(self):
        kw = dict(BM=self.BM, BN=self.BN, BK=self.BK, GROUP_M=self.group_m,
                  ACC_K=ACC_F16 if self.f16 else self.acc_k,
                  SCALE=16384.0 if self.f16 else 64.0, PDL=self.pdl,
                  num_warps=self.num_warps, num_stages=self.num_stages)
        if self.pdl:
            kw["launch_pdl"] = True
        if self.maxnreg:
            kw["maxnreg"] = self.maxnreg
        if self.path == "tma":
            kw["WS"] = self.ws
        else:
            kw["PREFETCH_B"] = self.pdl and not self.f16
        return kw


def _pow2_at_least(x: int, lo: int, hi: int) -> int:
    p = lo
    while p < x and p < hi:
        p *= 2
    return p


# kernel._mma's ACC_K: negative = widen to fp16 and use the fp16 MMA (fp32 accumulation).
ACC_F16 = -1


def _acc_k(capability) -> int:
    """Hopper's FP8 MMA accumulates with reduced precision (about 14 bits): promoting every
    64 products failed FlashInfer-Bench's atol = rtol = 1e-2 on outputs near zero (H200,
    m >= 1024, run 5), so below F8_FROM_M rows Hopper multiplies in fp16 (exact for e4m3
    operands, fp32 accumulation) and from there the FP8 MMA is promoted every ACC_K_HOPPER
    products (gemm_config). Elsewhere the FP8 MMA is used with one fp32 promotion per K tile
    (sm_100's MMA accumulates in fp32; untested off Hopper)."""
    return ACC_F16 if capability[0] == 9 else 0


def use_small_path(m: int) -> bool:
    return m <= SMALL_M_MAX


def tile_k(k: int, cap: int) -> int:
    """Largest power of two <= cap (and >= K_MULTIPLE) dividing k; the caller checked k."""
    bk = cap
    while k % bk:
        bk //= 2
    return bk


def small_config(m: int, n: int, k: int) -> SmallConfig:
    # Each program loads its whole B slice at once (the loop is not pipelined): all of K up
    # to 2048 for 8 / BM columns, BM * BN * BK <= 16K products held in registers. Round 12:
    # at m = 2, 2x4x2048 took 5.74 / 5.45 us (rotating sets / after a memset) against
    # 6.49 / 7.16 for 2x8x1024, as 1x8x2048 is m = 1's best.
    bm = _pow2_at_least(m, 1, max(SMALL_M_MAX, 1))
    return SmallConfig(BM=bm, BN=max(2, 8 // bm), BK=tile_k(k, 2048))


def gemm_config(m: int, n: int, k: int, capability=(9, 0), num_sms: int = DEFAULT_SMS) -> GemmConfig:
    """Tiles measured on the H200 (docs/kernels/sparse_gemm.md, graph us at n = k = 2048).
    On Hopper: from F8_FROM_M rows dense e4m3 A and the FP8 GEMM promoted every
    ACC_K_HOPPER products (runs 13-14, round 9; TMA loads only from TMA_FROM_M rows since
    run 20); fewer rows dense e4m3 A widened to fp16 in registers (ACC_F16). Elsewhere:
    dense e4m3 A and the FP8 MMA (untested off Hopper)."""
    if capability[0] == 9 and m >= F8_FROM_M:
        # One warpgroup per tile, so that two or three CTAs per SM overlap one CTA's fp32
        # promotions with another's MMA (run 14: 106.5 us at 8192 against 116.6 for 128x128
        # with two warpgroups). Up to 512 rows the 64x128 tiles are under one wave on 132
        # SMs; narrower ones give more CTAs (round 9, pointer loads: m = 256 10.3 us on 64x32
        # with 6 stages against 15.0 on 64x128; 512 13.1 on 64x64 against 14.0; 1024 18.1 on
        # 64x128 against 22-27 on the narrower ones).
        path = "tma" if m >= TMA_FROM_M else "ptr"
        cap = 0
        if m <= 256:
            bn, stages = 32, 6
        elif m <= 512:
            bn, stages = 64, 4
        elif three_ctas_pay(-(-m // 64) * -(-n // 128), num_sms):
            # A third CTA per SM where it saves a wave; TMA's 194 registers need a cap for it.
            bn, stages, cap = 128, 3, 168 if path == "tma" else 0
        else:
            bn, stages = 128, 4
        return GemmConfig(BM=64, BN=bn, BK=tile_k(k, 128), num_warps=4, num_stages=stages,
                          acc_k=ACC_K_HOPPER, path=path, pdl=PDL, maxnreg=cap)
    # Few rows: the GEMM is latency-bound with one warp per scheduler (ncu, run 8), so narrow
    # tiles that give 128+ CTAs win (runs 10-11, graph us: 32x32x256 with 3 stages 8.40 at
    # m = 2, 8.02 at 7, 8.43 at 48, 8.46 at 64, 9.37 at 96, 9.49 at 128, within 0.5 us of
    # the best tile at each m; 64x32x256 took 10.5-11.1). Round 12: 5 stages instead of 3
    # (80 KiB of shared memory, 2 CTAs per SM), 7.60-7.85 / 7.95-8.37 us (rotating sets /
    # after a memset) against 7.99-8.38 / 8.44-8.93 at m = 3..64; 8 stages in between.
    if m <= 64:
        cfg = GemmConfig(BM=32, BN=32, BK=256, num_warps=4, num_stages=5)
    elif m <= 128:
        cfg = GemmConfig(BM=32, BN=32, BK=256, num_warps=4, num_stages=3)
    elif m <= 256:
        cfg = GemmConfig(BM=64, BN=32, BK=256, num_warps=4, num_stages=4)
    elif m <= 2048:
        cfg = GemmConfig(BM=64, BN=128, BK=128, num_warps=4, num_stages=4)
    else:
        cfg = GemmConfig(BM=128, BN=128, BK=128, num_warps=8, num_stages=3)
    # Descriptors (TMA) only where measured; older GPUs take the portable pointer GEMM.
    path = cfg.path if capability[0] >= 9 else "ptr"
    bk = tile_k(k, cfg.BK)
    acc_k = _acc_k(capability)
    return GemmConfig(cfg.BM, cfg.BN, bk, cfg.num_warps, cfg.num_stages, cfg.group_m, acc_k,
                      path, cfg.ws, pdl=PDL and capability[0] >= 9)


def mma_small_config(m: int, n: int, k: int, capability=(9, 0), bw: int = 64, split: int = 8,
                     bk_cap: int = 128, bt_cap: int = 64, num_warps: int = 4, num_stages: int = 2,
                     lut: bool = False) -> MmaSmallConfig:
    """Tokens on the MMA's N side (16..bt_cap), bw weight rows per program, K split so that
    N / bw * split programs stream B (4 MiB at n = k = 2048) at once."""
    bt = _pow2_at_least(m, 16, bt_cap)
    while split > 1 and k % (split * K_MULTIPLE):
        split //= 2
    bk = tile_k(k // split, bk_cap)
    acc_k = _acc_k(capability)
    return MmaSmallConfig(BW=bw, BT=bt, BK=bk, split=split, num_warps=num_warps,
                          num_stages=num_stages, acc_k=acc_k, lut=lut)


def choose(m: int, n: int, k: int, capability=(9, 0), num_sms: int = DEFAULT_SMS):
    """The config (with .path: "fma", "mma_small", "ptr" or "tma") for one call, m >= 1."""
    if use_small_path(m):
        return small_config(m, n, k)
    if m <= MMA_SMALL_M_MAX:
        return mma_small_config(m, n, k, capability)
    return gemm_config(m, n, k, capability, num_sms)
