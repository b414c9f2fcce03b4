// Prototype, not a solution: 2:4-sparse A (tokens) x dense B (weights) on Hopper's sparse tensor
// cores, wgmma.mma_async.sp m64n128k32 with f16 operands and fp32 accumulation (exact for this
// definition: every E2M1 value, every sum of two and every e4m3 value is an fp16). Driven by
// tools/proto_sparse_wgmma_sp.py; docs/kernels/sparse_gemm.md has the figures.
//
// Two launches:
//   prep     one fused launch. Its first blocks canonicalise A's 2:4 groups (two distinct
//            positions in increasing order; a repeated position's two values summed into one
//            slot, the other slot 0 at another position) into compressed fp16 values and
//            metadata words; the rest convert B e4m3 -> fp16. Both are written pre-tiled and
//            pre-swizzled, so that each pipeline stage of the MMA kernel is three contiguous
//            1-D bulk copies (no tensor map). Rows m .. m_pad - 1 of A are written as zeros.
//   sp_gemm  persistent, warp-specialised: warpgroup 0 (setmaxnreg 40) has one thread that
//            issues the bulk copies of each stage into a ring of shared memory (full / empty
//            mbarriers); warpgroups 1 and 2 (setmaxnreg 232) each multiply MW m64 blocks of
//            tokens by the CTA's 128 weight rows and release a slot once the MMAs that read it
//            have retired (lane 0 of each of the 4 warps arrives after its own wait_group, so
//            the empty barriers count 8 arrivals a CTA of the cluster).
//            The sparsity metadata is a register operand of the asynchronous MMA, read while the
//            MMA runs: a metadata register set must not be rewritten before the wait_group that
//            retires the MMAs reading it. Two pipelines, the same speed:
//            PIPE 1: one stage's MMAs kept in flight (wait_group 1). The metadata alternates
//            between two register sets (the K loop unrolled by 2), each kept live (hold(): a
//            never-taken predicated store ptxas cannot drop) until the wait_group that retires
//            its MMAs.
//            PIPE 0: wait_group 0 after each stage's MMAs (no MMA in flight across stages), as
//            CUTLASS's sm90 sparse mainloop (K_PIPE_MMAS = 0).
//
// Prepared layouts in global memory (KT = k / 128 stages of 128 K; m_pad = m rounded up to 512):
//   a_c   [KT][m_pad][128 B]: row r's 64 compressed fp16 of the stage; its 16-byte chunk c
//         (groups 4c .. 4c + 3, two values each) at chunk c ^ (r & 7) (the 128-byte swizzle)
//   meta  [KT][m_pad / 64][64][4] uint32: m64 block, thread index u = 16 w + 2 (l / 4) + l % 2,
//         k32 step j; a thread (warp w, lane l) of a warpgroup loads the 16 bytes at u
//   b16   [n / 128][KT][2][128][128 B]: 128 weight rows, the stage's K halves 0-63 and 64-127
//         (one 128-byte swizzle atom each), row r's chunk c (K 8c .. 8c + 7) at c ^ (r & 7)
//   a_r   (RS variants, instead of a_c) [KT][m_pad / 64][4 j][128 lt][4 uint32]: the A fragments of
//         the register form, thread lt = 32 w + 4 g + q of a consumer warpgroup, m64 block, k32
//         step j: register 2 hi + h = compressed values of group 8 j + 4 hi + q of row
//         16 w + g + 8 h (one 16-byte load a thread a step, 512 contiguous bytes a warp)
// A stage in shared memory is [A: BM rows x 128 B][B: 2 atoms x 128 rows x 128 B][meta BM x 16 B],
// each part 1024-byte aligned, the same bytes as in global memory (RS: no A part).
//
// Metadata register of thread (warp w, lane l) of a warpgroup for k32 step kk (sparsity selector
// 0): bits 0-15 row 16 w + l / 4, bits 16-31 row 16 w + l / 4 + 8, each the four groups of K
// 32 kk + 16 (l % 2) .. + 15, a nibble a group (low: first), positions i0 | i1 << 2, i0 < i1.
// Compressed value columns 2 j, 2 j + 1 of a step are group j's values at i0, i1. (Lanes
// l % 4 >= 2 load the same word as lane l - 2; the MMA reads lanes l % 4 < 2 with selector 0.)
//
// Tile arithmetic (sparse f16 rate: 4096 logical MACs a cycle an SM, twice dense; one
// m64n128k32.sp is 64 cycles). A 128-K stage of a BM x 128 tile is 4 BM cycles of MMA and moves
// BM x 128 (A) + BM x 16 (meta) + 32768 (B) bytes:
//   BM 128 (MW 1):  51,200 B / 512 cycles  = 100 B a cycle; 4 stages (200 KiB)
//   BM 256 (MW 2):  69,632 B / 1,024 cycles = 68 B a cycle;  3 stages (204 KiB)
//   BM 256, B multicast over a cluster of 2 along m (CL 2): 53,248 B a CTA from L2, 52 B a cycle
// A 128 x 256 tile (one m64n256 a warpgroup) is 84 B a cycle, and its 82 KiB stage leaves room
// for only 2 stages, so the wide dimension is the tokens': 256 x 128, two m64n128 accumulators
// (128 fp32 registers) a consumer thread. At m 8192 with 256 x 128 tiles L2 delivers 16 n-tiles
// x 18 MiB of A + 32 m-tiles x 8 MiB of B = 544 MiB (416 MiB with CL 2), about 13 TB/s at a
// 41 us MMA floor (twice cuBLAS's dense fp16 rate). Tiles are visited n fastest (16 n-tiles a row of tiles), so the 132 CTAs of
// a wave cover about 8 m-tiles and all of B: B (8 MiB fp16) stays L2-resident and each A tile is
// read by 16 CTAs at about the same time.
//
// Shared-memory bandwidth bounds the kernel before the tensor cores do: each m64n128k32 sparse
// MMA reads its B tile (128 x 32 fp16, 8 KiB) from shared memory in the 64 cycles it takes, i.e.
// 128 bytes a cycle, which is all of an SM's shared-memory bandwidth, before A's reads (64 x 16
// compressed fp16, 2 KiB an MMA, also from shared memory here) and the bulk copies' writes. At
// 256 x 128 tiles a k32 step of a CTA (4 MMAs, 256 cycles of MMA) moves about 57 KiB through
// shared memory: 4 x 8 KiB of B reads, 4 x 2 KiB of A reads and 17 KiB of copies (a quarter of
// the 68 KiB stage), about 450 cycles a step; at m 8192 (512 tiles on 132 SMs: 4 tiles x 64
// steps a CTA) that is ~117k cycles, ~60 us at 1.98 GHz. Measured: 81.5 us.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "hopper_ptx.cuh"

namespace {
using namespace hopper;

constexpr int BN = 128;                 // weight rows a CTA tile
constexpr int B_ATOM = BN * 128;        // one 64-K half of a stage of B: 128 rows x 128 bytes
constexpr int B_STAGE = 2 * B_ATOM;     // 32 KiB
constexpr int M_ALIGN = 512;            // m_pad's multiple: a cluster of two 256-row tiles
constexpr int PREP_THREADS = 128;
constexpr int B_UNITS = 4;              // 16-byte loads of B a prep thread

// ---------------------------------------------------------------- PTX helpers (beyond hopper_ptx.cuh)

__device__ __forceinline__ uint32_t hadd2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ void expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// 1-D bulk copy global -> this CTA's shared memory, completing `bytes` on the mbarrier
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// the same into every CTA of the cluster in mask, at the same offsets (data and complete_tx)
__device__ __forceinline__ void bulk_g2s_mc(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;\n" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "h"(mask)
      : "memory");
}
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void arrive_cluster(uint32_t bar, uint32_t cta) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(cta));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
// until the mbarrier's phase of this parity has completed; cluster scope where other CTAs arrive.
// PROTO_WATCHDOG: trap after 2^31 cycles (about a second) instead of hanging on a protocol error
// (no printf: a call there would serialise the wgmma pipeline).
template <bool CLUSTER_SCOPE>
__device__ __forceinline__ void wait_bar(uint32_t bar, uint32_t parity) {
  uint32_t done;
#ifdef PROTO_WATCHDOG
  const long long t0 = clock64();
#endif
  do {
    if (CLUSTER_SCOPE)
      asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                   : "=r"(done)
                   : "r"(bar), "r"(parity)
                   : "memory");
    else
      asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                   : "=r"(done)
                   : "r"(bar), "r"(parity)
                   : "memory");
#ifdef PROTO_WATCHDOG
    if (!done && clock64() - t0 > (1ll << 31)) __trap();
#endif
  } while (!done);
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
// A real (never executed) use of a metadata register set: ptxas must keep the registers
// holding it unchanged until here (an empty asm would not: ptxas never sees it). never != 0
// does not happen (it is m < 0); addr is any shared address.
__device__ __forceinline__ void hold(const uint4& v, uint32_t addr, uint32_t never) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n@p st.shared.v4.b32 [%4], {%0, %1, %2, %3};\n}\n" ::"r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w), "r"(addr), "r"(never)
               : "memory");
}
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// ---------------------------------------------------------------- prep

// One group (v: codes c0 | c1 << 4; me: its meta byte) -> f16x2 (value at i0, value at i1) and
// nib = i0 | i1 << 2, i0 < i1. fp16 of an E2M1 code: high byte T[code & 7] (T = 00 38 3c 3e 40
// 42 44 46: 0, 0.5, 1, 1.5, 2, 3, 4, 6), bit 15 the code's bit 3, low byte 0; prmt picks bytes 1
// and 3 from T and bytes 0 and 2 from T[0] = 0. A repeated position: the sum (exact in fp16) in
// the slot of that position, 0 in the other (position 3 for p < 3, else position 2).
__device__ __forceinline__ uint32_t canon(uint32_t v, uint32_t me, uint32_t& nib) {
  const uint32_t sel = ((v & 7u) << 4) | ((v & 0x70u) << 8);
  const uint32_t x = prmt(0x3e3c3800u, 0x46444240u, sel) | ((v & 8u) << 12) | ((v & 0x80u) << 24);  // (f0, f1)
  const uint32_t y = prmt(x, x, 0x1032u);                                                              // (f1, f0)
  const uint32_t s = hadd2(x, y);                                                                      // f0 + f1, twice
  const uint32_t p0 = me & 3u, p1 = (me >> 2) & 3u;
  // selects, not branches: random meta bytes would make branches diverge
  const uint32_t same = p0 < 3u ? (s & 0xffffu) : (s & 0xffff0000u), same_nib = p0 < 3u ? (p0 | (3u << 2)) : (2u | (3u << 2));
  nib = p0 < p1 ? (p0 | (p1 << 2)) : p0 > p1 ? (p1 | (p0 << 2)) : same_nib;
  return p0 < p1 ? x : p0 > p1 ? y : same;
}

// Blocks [0, a_blocks): A, one block a (64-row block mb, stage ks): thread t row rr = t / 2 of the
// block, groups 16 hs .. 16 hs + 15 of the stage (hs = t % 2): 16-byte loads of a_vals and a_meta,
// the swizzled 8 KiB row block and its 1 KiB of metadata words assembled in shared memory, then
// written out with 16-byte stores (both contiguous in global memory).
// Blocks [a_blocks, grid): B, thread unit i = 16 input bytes (row nrow, stage ks, q = i % 8: K
// 16 q .. 16 q + 15 of the stage) -> two 16-byte chunks 2 (q % 4), + 1 of atom q / 4.
__global__ void __launch_bounds__(PREP_THREADS)
    prep(const uint8_t* __restrict__ a_vals, const uint8_t* __restrict__ a_meta, const uint8_t* __restrict__ b8,
         uint8_t* __restrict__ a_c, uint8_t* __restrict__ meta, uint8_t* __restrict__ b16, int m, int m_pad, int n, int k,
         int a_blocks, int a_rs) {
  __shared__ __align__(1024) uint8_t sa[64 * 128];
  __shared__ __align__(16) uint16_t sm[64 * 4 * 2];
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // lets a PDL-launched sp_gemm start its prologue
  const int KT = k / 128, t = threadIdx.x;
  if (static_cast<int>(blockIdx.x) < a_blocks) {
    const int mb = blockIdx.x / KT, ks = blockIdx.x % KT;
    const int rr = t >> 1, hs = t & 1, row = mb * 64 + rr;
    uint4 v = make_uint4(0u, 0u, 0u, 0u), me = v;
    if (row < m) {
      const size_t off = static_cast<size_t>(row) * (k / 4) + ks * 32 + hs * 16;
      v = __ldg(reinterpret_cast<const uint4*>(a_vals + off));
      me = __ldg(reinterpret_cast<const uint4*>(a_meta + off));
    }
    const uint32_t vw[4] = {v.x, v.y, v.z, v.w}, mw[4] = {me.x, me.y, me.z, me.w};
    const int w = rr >> 4, lq = rr & 7, half = (rr >> 3) & 1;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t out[4], nib16 = 0u;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        uint32_t nib;
        out[e] = canon((vw[q] >> (8 * e)) & 0xffu, (mw[q] >> (8 * e)) & 0xffu, nib);
        nib16 |= nib << (4 * e);
      }
      const int c = 4 * hs + q;                            // chunk c: groups 4c .. 4c + 3 of the stage
      if (a_rs) {  // group 4c + e -> register 2 (c & 1) + half of thread 32 w + 4 lq + e, step c / 2
        uint32_t* words = reinterpret_cast<uint32_t*>(sa);
#pragma unroll
        for (int e = 0; e < 4; ++e) words[((c >> 1) * 128 + 32 * w + 4 * lq + e) * 4 + 2 * (c & 1) + half] = out[e];
      } else {
        st_shared16(smem_addr(sa) + rr * 128 + ((c ^ (rr & 7)) << 4), out);
      }
      const int u = 16 * w + 2 * lq + (c & 1), j = c >> 1;  // k32 step c / 2, its K half c % 2
      sm[(u * 4 + j) * 2 + half] = static_cast<uint16_t>(nib16);
    }
    __syncthreads();
    uint4* dst = reinterpret_cast<uint4*>(a_c + (static_cast<size_t>(ks) * m_pad + mb * 64) * 128);
#pragma unroll
    for (int i = 0; i < 4; ++i) dst[t + PREP_THREADS * i] = ld_shared16(smem_addr(sa) + (t + PREP_THREADS * i) * 16);
    if (t < 64)
      reinterpret_cast<uint4*>(meta + (static_cast<size_t>(ks) * (m_pad / 64) + mb) * 1024)[t] = ld_shared16(smem_addr(sm) + t * 16);
  } else {
    const int units = n / 16 * k, i0 = (blockIdx.x - a_blocks) * PREP_THREADS * B_UNITS + t;  // 16-byte units
    uint4 in[B_UNITS];
#pragma unroll
    for (int it = 0; it < B_UNITS; ++it) {
      const int i = i0 + it * PREP_THREADS;
      in[it] = i < units ? __ldg(reinterpret_cast<const uint4*>(b8) + i) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int it = 0; it < B_UNITS; ++it) {
      const int i = i0 + it * PREP_THREADS;
      if (i >= units) break;
      const int q = i & 7, ks = (i >> 3) % KT, nrow = (i >> 3) / KT;
      const int atom = q >> 2, c = (q & 3) * 2, x = nrow & 7;
      uint8_t* row = b16 + ((((static_cast<size_t>(nrow >> 7) * KT + ks) * 2 + atom) * 128 + (nrow & 127)) * 128);
      const uint4 lo = make_uint4(e4m3x2_to_f16x2(in[it].x), e4m3x2_to_f16x2(in[it].x >> 16), e4m3x2_to_f16x2(in[it].y),
                                  e4m3x2_to_f16x2(in[it].y >> 16));
      const uint4 hi = make_uint4(e4m3x2_to_f16x2(in[it].z), e4m3x2_to_f16x2(in[it].z >> 16), e4m3x2_to_f16x2(in[it].w),
                                  e4m3x2_to_f16x2(in[it].w >> 16));
      *reinterpret_cast<uint4*>(row + ((c ^ x) << 4)) = lo;
      *reinterpret_cast<uint4*>(row + (((c + 1) ^ x) << 4)) = hi;
    }
  }
}

// ---------------------------------------------------------------- MMA

__device__ __forceinline__ void wgmma_sp(float (&d)[64], uint64_t da, uint64_t db, uint32_t meta, uint32_t scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %67, 0;\n"
      "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, %66, 0, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(meta), "r"(scale_d));
}

// the register form: A's four fragment registers (compressed values) instead of a descriptor
__device__ __forceinline__ void wgmma_sp_rs(float (&d)[64], const uint4& a, uint64_t db, uint32_t meta, uint32_t scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"
      "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, %69, 0, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(db), "r"(meta), "r"(scale_d));
}
__device__ __forceinline__ uint4 ld_nc16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// MW: m64 blocks a consumer warpgroup (CTA tile 128 MW tokens x 128 weight rows); CL: CTAs a
// cluster along m, each bulk-copying one 64-K half of the shared B stage to both.
// RS: A from registers (a_r, loaded by each consumer thread from global memory), no A in the stage.
template <int MW, int CL, bool RS>
struct Cfg {
  static constexpr int EMPTY_ARRIVALS = 8 * CL;                // lane 0 of 8 consumer warps, each CTA of the cluster
  static constexpr int BM = 128 * MW;
  static constexpr int A_BYTES = RS ? 0 : BM * 128, M_BYTES = BM * 16;
  static constexpr int STAGE = A_BYTES + B_STAGE + M_BYTES;  // a multiple of 1024
  static constexpr int STAGES = RS ? 6 : MW == 1 ? 4 : 3;
  static constexpr int SMEM = STAGES * STAGE + 1024 + 2 * STAGES * 8;  // + alignment slack + barriers
  static_assert(STAGE % 1024 == 0, "stage parts must stay 1024-byte aligned");
  static_assert(SMEM <= 227 * 1024, "shared memory");
};

// PIPE: 1 = one stage's MMAs in flight, two metadata register sets; 0 = wait_group 0 a stage
template <int MW, int CL, int PIPE, bool RS, bool MCA>
__global__ void __launch_bounds__(384, 1)
    sp_gemm(const uint8_t* __restrict__ a_c, const uint8_t* __restrict__ meta, const uint8_t* __restrict__ b16,
            __nv_bfloat16* __restrict__ c, int m, int m_pad, int n, int k, int abl) {
  static_assert(PIPE == 0 || PIPE == 1, "PIPE");
  using C = Cfg<MW, CL, RS>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t base = smem_addr(smem);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + C::STAGES * C::STAGE);
  const uint32_t full0 = smem_addr(bars), empty0 = full0 + 8 * C::STAGES;  // barrier s at + 8 s
  const int tid = threadIdx.x, wg = tid >> 7;
  const uint32_t rank = CL > 1 ? cluster_ctarank() : 0u;
  if (tid == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      mbar_init(bars + s, 1);                          // full: the producer's expect_tx arrival + bytes
      mbar_init(bars + C::STAGES + s, C::EMPTY_ARRIVALS);  // empty: lane 0 of each consumer warp, each CTA
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (CL > 1) cluster_sync();
  else __syncthreads();

  const int KT = k / 128, NT = n / BN;
  // cluster tiles, n fastest. MCA: the cluster's CTAs share the m tile (A multicast), n tiles CL nt' + rank;
  // else they share the n tile (B multicast), m tiles CL mt' + rank
  const int tiles = MCA ? (m + C::BM - 1) / C::BM * (NT / CL) : (m + C::BM * CL - 1) / (C::BM * CL) * NT;
  const int cid = blockIdx.x / CL, ncl = gridDim.x / CL;
  auto tile_m0 = [&](int t) { return MCA ? (t / (NT / CL)) * C::BM : ((t / NT) * CL + static_cast<int>(rank)) * C::BM; };
  auto tile_nt = [&](int t) { return MCA ? (t % (NT / CL)) * CL + static_cast<int>(rank) : t % NT; };

  if (wg == 0) {
    setmaxnreg_dec<RS ? 24 : 40>();  // RS: two A register sets need the consumers' 240
    if (tid == 0) {
      asm volatile("griddepcontrol.wait;\n" ::: "memory");  // PDL: prep's writes complete and visible
      int s = 0;
      uint32_t ph = 0;
      for (int t = cid; t < tiles; t += ncl) {
        const int m0 = tile_m0(t), nt = tile_nt(t);
        for (int ks = 0; ks < KT; ++ks) {
          wait_bar<(CL > 1)>(empty0 + 8 * s, ph ^ 1u);
          const uint32_t sb = base + s * C::STAGE, fb = full0 + 8 * s;
          // abl (ablations, output wrong): bit 0 no A copy, bit 1 no B copy
          expect_tx(fb, C::STAGE - ((abl & 1) ? C::A_BYTES : 0) - ((abl & 2) ? B_STAGE : 0));
          const uint16_t all = static_cast<uint16_t>((1u << CL) - 1u);
          if (MCA) {  // each CTA copies its half of the A rows and of the metadata to both
            if (!(abl & 1))
              bulk_g2s_mc(sb + rank * (C::A_BYTES / CL), a_c + (static_cast<size_t>(ks) * m_pad + m0 + rank * (C::BM / CL)) * 128,
                          C::A_BYTES / CL, fb, all);
            bulk_g2s_mc(sb + C::A_BYTES + B_STAGE + rank * (C::M_BYTES / CL),
                        meta + (static_cast<size_t>(ks) * (m_pad / 64) + m0 / 64) * 1024 + rank * (C::M_BYTES / CL), C::M_BYTES / CL, fb, all);
          } else {
            if (!RS && !(abl & 1)) bulk_g2s(sb, a_c + (static_cast<size_t>(ks) * m_pad + m0) * 128, C::A_BYTES, fb);
            bulk_g2s(sb + C::A_BYTES + B_STAGE, meta + (static_cast<size_t>(ks) * (m_pad / 64) + m0 / 64) * 1024, C::M_BYTES, fb);
          }
          const uint8_t* bs = b16 + (static_cast<size_t>(nt) * KT + ks) * B_STAGE;
          if (abl & 2) {
          } else if (CL == 1 || MCA) {
            bulk_g2s(sb + C::A_BYTES, bs, B_STAGE, fb);
          } else {
            bulk_g2s_mc(sb + C::A_BYTES + rank * B_ATOM, bs + rank * B_ATOM, B_ATOM, fb, all);
          }
          if (++s == C::STAGES) { s = 0; ph ^= 1u; }
        }
      }
    }
  } else {
    setmaxnreg_inc<RS ? 240 : 232>();
    const int cw = wg - 1, lt = tid & 127, w = lt >> 5, l = lt & 31, g = l >> 2, q = l & 3;
    const int u = 16 * w + 2 * g + (l & 1);
    const uint64_t da0 = b_desc(base + cw * MW * 64 * 128), db0 = b_desc(base + C::A_BYTES);
    const uint32_t never = m < 0 ? 1u : 0u;
    float acc[MW][64];
#pragma unroll
    for (int i = 0; i < MW; ++i)
#pragma unroll
      for (int e = 0; e < 64; ++e) acc[i][e] = 0.0f;
    int s = 0, prev = 0;
    uint32_t ph = 0;
    // slot sl's MMAs have retired in this warp: lane 0 gives it back to the producer(s)
    auto release = [&](int sl) {
      if (l == 0) {
        if (CL == 1) mbar_arrive(bars + C::STAGES + sl);
        else
          for (int d = 0; d < CL; ++d) arrive_cluster(empty0 + 8 * sl, d);
      }
    };
    // RS: a register set of A fragments a stage ([i][j]: m64 block i, k32 step j), loaded from
    // a_r for (tile t, stage ks); the thread's 16 bytes of each (block, step)
    auto load_a = [&](uint4 (&ra)[MW][4], int t, int ks) {
      const int b0 = tile_m0(t) / 64 + cw * MW;
      const uint4* src = reinterpret_cast<const uint4*>(a_c) + (static_cast<size_t>(ks) * (m_pad / 64) + b0) * 4 * 128 + lt;
#pragma unroll
      for (int i = 0; i < MW; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) ra[i][j] = ld_nc16(src + (i * 4 + j) * 128);
    };
    // one stage of tile t: its metadata into mt (other: the set the stage before used), its MMAs
    // (RS: on A set ra; the next stage's A, in this tile or the next, then goes into ro once the
    // MMAs that read ro have retired)
    auto stage = [&](int t, int ks, uint4 (&mt)[MW], uint4 (&other)[MW], uint4 (&ra)[MW][4], uint4 (&ro)[MW][4]) {
      wait_bar<false>(full0 + 8 * s, ph);
      const uint32_t sb = base + s * C::STAGE;
#pragma unroll
      for (int i = 0; i < MW; ++i) mt[i] = ld_shared16(sb + C::A_BYTES + B_STAGE + ((cw * MW + i) * 64 + u) * 16);
      const uint64_t off = static_cast<uint64_t>((s * C::STAGE) >> 4);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint64_t db = db0 + off + (((j >> 1) * B_ATOM + (j & 1) * 64) >> 4);
#pragma unroll
        for (int i = 0; i < MW; ++i) {
          const uint32_t mj = j == 0 ? mt[i].x : j == 1 ? mt[i].y : j == 2 ? mt[i].z : mt[i].w;
          if (RS) wgmma_sp_rs(acc[i], ra[i][j], db, mj, (ks | j) != 0);
          else wgmma_sp(acc[i], da0 + off + ((i * 64 * 128 + 32 * j) >> 4), db, mj, (ks | j) != 0);
        }
      }
      wgmma_commit();
      if (PIPE == 0) {  // this stage's MMAs retired before its slot and metadata registers are reused
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < MW; ++i) {
          hold(mt[i], base, never);
          if (RS)
#pragma unroll
            for (int j = 0; j < 4; ++j) hold(ra[i][j], base, never);
        }
        release(s);
      } else if (ks > 0) {  // the stage before has retired: its slot and its metadata (and A) sets are free
        wgmma_wait<1>();
#pragma unroll
        for (int i = 0; i < MW; ++i) {
          hold(other[i], base, never);
          if (RS)
#pragma unroll
            for (int j = 0; j < 4; ++j) hold(ro[i][j], base, never);
        }
        release(prev);
      }
      if (RS) {
        if (ks + 1 < KT) load_a(ro, t, ks + 1);
        else if (t + ncl < tiles) load_a(ro, t + ncl, 0);
      }
      prev = s;
      if (++s == C::STAGES) { s = 0; ph ^= 1u; }
    };
    uint4 mt0[MW], mt1[MW];
    uint4 ra0[MW][4], ra1[MW][4];  // RS only (dropped otherwise)
    if (RS && cid < tiles) load_a(ra0, cid, 0);
    for (int t = cid; t < tiles; t += ncl) {
      const int m0 = tile_m0(t), n0 = tile_nt(t) * BN;
#pragma unroll 1
      for (int ks = 0; ks < KT; ks += 2) {  // even stages: sets 0, odd stages: sets 1 (RS: KT even)
        stage(t, ks, mt0, mt1, ra0, ra1);
        if (ks + 1 < KT) stage(t, ks + 1, mt1, mt0, ra1, ra0);
      }
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < MW; ++i) {
        keep_f(acc[i]);
        if (PIPE == 1) {
          hold(mt0[i], base, never);
          if (KT > 1) hold(mt1[i], base, never);
          if (RS)
#pragma unroll
            for (int j = 0; j < 4; ++j) hold(ra1[i][j], base, never);
        }
      }
      if (PIPE == 1) release(prev);
#pragma unroll
      for (int i = 0; i < MW; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + (cw * MW + i) * 64 + 16 * w + g + 8 * h;
          if (row < m) {
            __nv_bfloat16* cr = c + static_cast<size_t>(row) * n + n0 + 2 * q;
#pragma unroll
            for (int jn = 0; jn < 16; ++jn)
              *reinterpret_cast<__nv_bfloat162*>(cr + 8 * jn) = __floats2bfloat162_rn(acc[i][4 * jn + 2 * h], acc[i][4 * jn + 2 * h + 1]);
          }
        }
      }
    }
  }
  __syncwarp();
  if (CL > 1) cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
}

template <int MW, int CL, int PIPE, bool RS, bool MCA>
int launch_sp_gemm(const void* a_c, const void* meta, const void* b16, void* c, int m, int m_pad, int n, int k, int pdl,
                   int max_ctas, int one_tile, int abl, cudaStream_t s) {
  using C = Cfg<MW, CL, RS>;
  static bool set = false;
  if (!set) {
    cudaError_t e = cudaFuncSetAttribute(sp_gemm<MW, CL, PIPE, RS, MCA>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
    if (e != cudaSuccess) return static_cast<int>(e);
    set = true;
  }
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int tiles = MCA ? (m + C::BM - 1) / C::BM * (n / BN / CL) : (m + C::BM * CL - 1) / (C::BM * CL) * (n / BN);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  int na = 0;
  cfg.blockDim = dim3(384);
  cfg.dynamicSmemBytes = C::SMEM;
  cfg.stream = s;
  int clusters = sms / CL;
  if (CL > 1) {
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = CL;
    attr[na].val.clusterDim.y = 1;
    attr[na].val.clusterDim.z = 1;
    ++na;
    cfg.gridDim = dim3(CL * clusters);
    cfg.attrs = attr;
    cfg.numAttrs = na;
    int active = 0;
    if (cudaOccupancyMaxActiveClusters(&active, sp_gemm<MW, CL, PIPE, RS, MCA>, &cfg) == cudaSuccess && active > 0 && active < clusters)
      clusters = active;
  }
  if (max_ctas > 0 && max_ctas / CL < clusters) clusters = max_ctas / CL > 0 ? max_ctas / CL : 1;
  if (one_tile) clusters = tiles;  // one (cluster) tile a CTA, in waves: no ring state carried across tiles
  if (clusters > tiles) clusters = tiles;
  if (clusters < 1) clusters = 1;
  if (pdl) {
    attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  cfg.gridDim = dim3(CL * clusters);
  cfg.attrs = attr;
  cfg.numAttrs = na;
  return static_cast<int>(cudaLaunchKernelEx(&cfg, sp_gemm<MW, CL, PIPE, RS, MCA>, static_cast<const uint8_t*>(a_c), static_cast<const uint8_t*>(meta),
                                             static_cast<const uint8_t*>(b16), static_cast<__nv_bfloat16*>(c), m, m_pad, n, k, abl));
}
}  // namespace

// m rounded up to the prepared arrays' row count
extern "C" int proto_m_pad(int m) { return (m + M_ALIGN - 1) / M_ALIGN * M_ALIGN; }

// a_c: m_pad * k / 2 fp16; meta: m_pad * k / 8 bytes; b16: n * k fp16.
// parts: 1 = A, 2 = B, 3 = both (one launch); | 4: A in the register form's layout (a_r). n % 128 == 0, k % 128 == 0, m_pad = proto_m_pad(m).
extern "C" int proto_prep(const void* a_vals, const void* a_meta, const void* b8, void* a_c, void* meta, void* b16, int m,
                          int m_pad, int n, int k, int parts, void* s) {
  const int a_blocks = (parts & 1) ? (m_pad / 64) * (k / 128) : 0;
  const int units = n / 16 * k;
  const int b_blocks = (parts & 2) ? (units + PREP_THREADS * B_UNITS - 1) / (PREP_THREADS * B_UNITS) : 0;
  if (a_blocks + b_blocks == 0) return 0;
  prep<<<a_blocks + b_blocks, PREP_THREADS, 0, static_cast<cudaStream_t>(s)>>>(
      static_cast<const uint8_t*>(a_vals), static_cast<const uint8_t*>(a_meta), static_cast<const uint8_t*>(b8),
      static_cast<uint8_t*>(a_c), static_cast<uint8_t*>(meta), static_cast<uint8_t*>(b16), m, m_pad, n, k, a_blocks,
      (parts >> 2) & 1);
  return static_cast<int>(cudaGetLastError());
}

// variant & 3: 0 = 128 x 128 tiles, 1 = 256 x 128, 2 = 128 x 128 in clusters of 2 (B multicast),
// 3 = 256 x 128 in clusters of 2. variant & 4: 0 = PIPE 1 (one stage's MMAs in flight, two
// metadata register sets), 4 = PIPE 0 (wait_group 0 a stage). variant & 8: one tile a CTA
// (grid = tiles, not persistent). variant & 16: A from registers (a_r from proto_prep parts | 4;
// k / 128 even), with variant & 7 = 1. variant & 32: with 3, clusters of 2 along n sharing A
// (multicast) instead of B. variant & 64 / 128: ablations (wrong output): no A copy / no B copy. pdl: launch as a programmatic dependent of the launch before (prep). max_ctas: 0
// for one CTA an SM, else at most that many (1: one CTA walks every tile through the ring).
extern "C" int proto_sp_gemm(const void* a_c, const void* meta, const void* b16, void* c, int m, int m_pad, int n, int k,
                             int variant, int pdl, int max_ctas, void* s) {
  cudaStream_t st = static_cast<cudaStream_t>(s);
  const int one = (variant >> 3) & 1, abl = (variant >> 6) & 3;
  if ((variant & 16) && (k / 128) % 2) return -2;
#define PROTO_CASE(V, MW, CL, PIPE, RS, MCA) \
  case V: return launch_sp_gemm<MW, CL, PIPE, RS, MCA>(a_c, meta, b16, c, m, m_pad, n, k, pdl, max_ctas, one, abl, st);
  switch (variant & 55) {
    PROTO_CASE(0, 1, 1, 1, false, false)
    PROTO_CASE(1, 2, 1, 1, false, false)
    PROTO_CASE(2, 1, 2, 1, false, false)
    PROTO_CASE(3, 2, 2, 1, false, false)
    PROTO_CASE(5, 2, 1, 0, false, false)
    PROTO_CASE(17, 2, 1, 1, true, false)
    PROTO_CASE(35, 2, 2, 1, false, true)
    default: return -1;
  }
#undef PROTO_CASE
}
