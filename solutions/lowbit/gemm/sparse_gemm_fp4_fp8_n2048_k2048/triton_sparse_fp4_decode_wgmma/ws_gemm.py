"""Warp-specialised FP8 GEMM for Hopper, written in Gluon (Triton's explicit-layout dialect).

c[m, n] = SCALE * sum_k a[m, k] * b[n, k], a and b e4m3 with k contiguous, c bf16.

Why a second GEMM: the Triton FP8 GEMM (kernel.fp8_gemm_*) must promote Hopper's
reduced-precision MMA sum to fp32 after every wgmma (32 products, see heuristics.ACC_K_HOPPER),
and Triton then waits for each wgmma before the next, so one CTA's MMA and promotions never
overlap; only other CTAs on the SM fill the gaps (round 8: ~700 TFLOP/s counted dense at
m = 8192). Here a persistent CTA has one TMA producer warp and two consumer warpgroups, each
on its own 64-row half of a 128-row tile and in step with the other only through the shared
stage barriers, so one warpgroup's fp32 adds run while the other's wgmma does. PP: each
consumer also alternates the tile's column halves, adding one half's wgmma result while the
other's runs.

Gluon has no interpreter and no portable lowering: callers take this path only on sm_90 with
a Triton that has Gluon (HAVE_GLUON) and keep the Triton GEMM everywhere else.
"""

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    HAVE_GLUON = True
except ImportError:  # Triton without Gluon: the Triton GEMM serves every call.
    HAVE_GLUON = False

# Registers per thread by consumer warpgroups (BM / 64): the launch's cap (all warpgroups,
# the producer's padded to 4 warps, within the SM's 64 K registers), then what setmaxnreg
# gives each consumer (acc + MMA temporaries) and the producer.
REGS = {2: (168, 232, 40), 3: (128, 160, 24), 4: (96, 112, 24)}


if HAVE_GLUON:

    @gluon.jit
    def _tile_origin(tile, num_pid_m, num_pid_n, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr):
        """Grouped order (GROUP_M row tiles per B column tile), as kernel._tile_ids."""
        width = GROUP_M * num_pid_n
        first_m = (tile // width) * GROUP_M
        size_m = gl.minimum(num_pid_m - first_m, GROUP_M)
        return (first_m + (tile % width) % size_m) * BM, ((tile % width) // size_m) * BN

    @gluon.jit
    def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K,
                  C: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
        """One warp: per stage, C boxes of 64 A rows (one per consumer) and one of B."""
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[0]
        BM: gl.constexpr = 64 * C
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, BN)
        it = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            off_m, off_n = _tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
            for k in range(0, K, BK):
                s = it % STAGES
                # A fresh barrier counts as having completed the phase before 0.
                mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                bar = ready.index(s)
                mbarrier.expect(bar, C * a_desc.block_type.nbytes + b_desc.block_type.nbytes)
                for w in gl.static_range(C):
                    tma.async_copy_global_to_shared(a_desc, [off_m + 64 * w, k], bar, a_bufs.index(s * C + w))
                tma.async_copy_global_to_shared(b_desc, [off_n, k], bar, b_bufs.index(s))
                it += 1

    @gluon.jit
    def _consumer(c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm,
                  WG: gl.constexpr, C: gl.constexpr, SCALE: gl.constexpr, GROUP_M: gl.constexpr,
                  STAGES: gl.constexpr, ACC_K: gl.constexpr, PP: gl.constexpr):
        """Rows [64 WG, 64 WG + 64) of each tile. Every wgmma starts from zero (use_acc=False)
        and its ACC_K-product sum is added to an fp32 accumulator, so the tensor core's
        reduced-precision sum never spans more than ACC_K products (the Triton GEMM's order).
        PP: the tile's two column halves alternate, so the adds of one half's wgmma run while
        the other half's is in flight (temporaries of 64 x BN / 2: 128 registers in all)."""
        HALF: gl.constexpr = a_bufs.type.shape[1]  # 64 rows per consumer warpgroup (one wgmma M)
        BK: gl.constexpr = a_bufs.type.shape[2]
        BN: gl.constexpr = b_bufs.type.shape[1]
        BM: gl.constexpr = HALF * C
        STEPS: gl.constexpr = BK // ACC_K
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, BN)
        it = 0
        if PP:
            NH: gl.constexpr = BN // 2
            hl: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, NH, 32])
            t_lo = gl.zeros([HALF, NH], gl.float32, hl)
            t_hi = gl.zeros([HALF, NH], gl.float32, hl)
            for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
                off_m, off_n = _tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
                acc_lo = gl.zeros([HALF, NH], gl.float32, hl)
                acc_hi = gl.zeros([HALF, NH], gl.float32, hl)
                for k in range(0, K, BK):
                    s = it % STAGES
                    mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                    a_s = a_bufs.index(s * C + WG)
                    b_lo = b_bufs.index(s).slice(0, NH, dim=0)
                    b_hi = b_bufs.index(s).slice(NH, NH, dim=0)
                    for j in gl.static_range(STEPS):
                        a_j = a_s.slice(j * ACC_K, ACC_K, dim=1)
                        t_lo = warpgroup_mma(a_j, b_lo.slice(j * ACC_K, ACC_K, dim=1).permute((1, 0)), t_lo,
                                             use_acc=False, is_async=True)
                        if j > 0:  # the previous high half is done: add it while t_lo runs
                            t_hi = warpgroup_mma_wait(1, deps=(t_hi,))
                            acc_hi = acc_hi + t_hi
                        t_hi = warpgroup_mma(a_j, b_hi.slice(j * ACC_K, ACC_K, dim=1).permute((1, 0)), t_hi,
                                             use_acc=False, is_async=True)
                        t_lo = warpgroup_mma_wait(1, deps=(t_lo,))
                        acc_lo = acc_lo + t_lo
                    # The stage's last wgmma (loop-carried values must be plain tensors).
                    t_hi = warpgroup_mma_wait(0, deps=(t_hi,))
                    acc_hi = acc_hi + t_hi
                    mbarrier.arrive(empty.index(s), count=1)
                    it += 1
                rows = off_m + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, hl))
                cols = off_n + gl.arange(0, NH, layout=gl.SliceLayout(0, hl))
                mask = (rows < M)[:, None] & (cols < N)[None, :]
                ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :]
                gl.store(ptrs, (acc_lo * SCALE).to(gl.bfloat16), mask=mask)
                mask = (rows < M)[:, None] & (cols + NH < N)[None, :]
                gl.store(ptrs + NH, (acc_hi * SCALE).to(gl.bfloat16), mask=mask)
        else:
            layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, BN, 32])
            t = gl.zeros([HALF, BN], gl.float32, layout)
            for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
                off_m, off_n = _tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
                acc = gl.zeros([HALF, BN], gl.float32, layout)
                for k in range(0, K, BK):
                    s = it % STAGES
                    mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                    a_s = a_bufs.index(s * C + WG)
                    b_s = b_bufs.index(s)
                    for j in gl.static_range(BK // 32):
                        # One wgmma per 32 along K, chained ACC_K / 32 deep before the add.
                        t = warpgroup_mma(a_s.slice(j * 32, 32, dim=1),
                                          b_s.slice(j * 32, 32, dim=1).permute((1, 0)),
                                          t, use_acc=(j % (ACC_K // 32)) != 0, is_async=True)
                        if (j + 1) % (ACC_K // 32) == 0:
                            t = warpgroup_mma_wait(0, deps=(t,))
                            acc = acc + t
                    # Every wgmma reading stage s has completed: hand it back to the producer.
                    mbarrier.arrive(empty.index(s), count=1)
                    it += 1
                rows = off_m + WG * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, layout))
                cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
                mask = (rows < M)[:, None] & (cols < N)[None, :]
                gl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], (acc * SCALE).to(gl.bfloat16),
                         mask=mask)

    @gluon.jit
    def ws_fp8_gemm_kernel(a_desc, b_desc, c_ptr, M, N, K, stride_cm,
                           SCALE: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                           ACC_K: gl.constexpr, PP: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                           CONSUMER_REGS: gl.constexpr, C: gl.constexpr):
        """Persistent: grid = min(tiles, SMs); tiles of 64 * C rows by BN. a_desc [64, BK] and
        b_desc [BN, BK] boxes (zero-filled past m); num_warps = 4 (the first consumer, Gluon's
        default partition)."""
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[0]
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * C, 64, BK], a_desc.layout)
        b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, BK], b_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=C)  # every consumer releases a stage
        # Gluon wants the partition list spelled out, so one branch per consumer count.
        if C == 2:
            gl.warp_specialize([
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 0, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 1, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, C, GROUP_M, STAGES)),
            ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
        elif C == 3:
            gl.warp_specialize([
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 0, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 1, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 2, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, C, GROUP_M, STAGES)),
            ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
        else:
            gl.static_assert(C == 4, "2, 3 or 4 consumer warpgroups")
            gl.warp_specialize([
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 0, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 1, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 2, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_consumer, (c_ptr, a_bufs, b_bufs, ready, empty, M, N, K, stride_cm, 3, C, SCALE, GROUP_M, STAGES,
                             ACC_K, PP)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, C, GROUP_M, STAGES)),
            ], [4, 4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])


def descriptors(a, b, bn=128, bk=128):
    """Gluon TMA descriptors for ws_fp8_gemm_kernel (128-byte swizzle on the K-contiguous
    boxes): 64 rows of a, bn rows of b."""
    a_layout = gl.NVMMASharedLayout.get_default_for([64, bk], gl.float8e4nv)
    b_layout = gl.NVMMASharedLayout.get_default_for([bn, bk], gl.float8e4nv)
    return (GluonDescriptor.from_tensor(a, [64, bk], a_layout), GluonDescriptor.from_tensor(b, [bn, bk], b_layout))


def launch(a, b, c, scale, num_sms, stages=4, acc_k=32, pp=False, group_m=8, bm=128, bn=128):
    """c = scale * a @ b.T (a [m, k], b [n, k] e4m3, c [m, n] bf16), m >= 1; bm = 64 per
    consumer warpgroup (128, 192 or 256)."""
    (m, k), n = a.shape, b.shape[0]
    a_desc, b_desc = descriptors(a, b, bn=bn)
    tiles = -(-m // bm) * -(-n // bn)
    maxnreg, consumer_regs, producer_regs = REGS[bm // 64]
    ws_fp8_gemm_kernel[(min(tiles, num_sms),)](
        a_desc, b_desc, c, m, n, k, c.stride(0), SCALE=scale, GROUP_M=group_m, STAGES=stages, ACC_K=acc_k,
        PP=pp, PRODUCER_REGS=producer_regs, CONSUMER_REGS=consumer_regs, C=bm // 64, num_warps=4,
        maxnreg=maxnreg)
    return c
