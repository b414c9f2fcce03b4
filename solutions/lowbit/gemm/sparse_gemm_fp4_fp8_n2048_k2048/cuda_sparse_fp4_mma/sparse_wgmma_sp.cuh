// The many-rows path: 2:4-sparse A (tokens) x dense B (weights) on Hopper's sparse tensor cores,
// wgmma.mma_async.sp m64n128k32 (m64n64k32 on 64-weight-row tiles) with f16 operands and fp32
// accumulation (exact: every E2M1 value, every sum of two and every e4m3 value is an fp16).
// Included by sparse_mma.cu.
//
// Two launches, the second a programmatic dependent of the first (PDL: its prologue overlaps):
//   prep     A's 2:4 groups canonicalised (two distinct positions in increasing order, as the
//            instruction needs; a repeated position's two values summed into one slot, the other
//            slot 0 at another position) into compressed fp16 values and metadata words; B
//            converted e4m3 -> fp16. Both written pre-tiled and pre-swizzled into the call's
//            workspace, so that each pipeline stage of sp_gemm is three contiguous 1-D bulk
//            copies, four with 64-weight-row tiles (no tensor map to encode). Rows m .. m_pad - 1
//            of A are written as zeros.
//   sp_gemm  persistent, warp-specialised: warpgroup 0 (setmaxnreg 40) has one thread that
//            issues each stage's bulk copies into a ring of shared memory (full / empty
//            mbarriers); warpgroups 1 and 2 (setmaxnreg 232) each multiply MW m64 blocks of tokens
//            by the CTA's BN (128 or 64) weight rows, one stage's MMAs kept in flight
//            (wait_group 1), and release a slot once the MMAs that read it have retired (every
//            consumer thread arrives after its own wait_group: 256 arrivals a slot, each thread's
//            arrival releasing its own metadata loads from the slot, as the PTX memory model
//            orders them).
//            The sparsity metadata is a register operand of the asynchronous MMA, read while the
//            MMA runs, so it alternates between two register sets (the K loop unrolled by 2),
//            each kept live (hold()) until the wait_group that retires its MMAs.
//            Split (splits 2, where the split tiles fit one wave): a tile's K stages halved between
//            the two CTAs of a cluster, one work item a CTA; each writes its fp32 partial tile into
//            its ring, and after a cluster barrier each sums its half of the tile's rows over both
//            CTAs' partials through distributed shared memory, in rank order, and stores them.
//            At these sizes a CTA runs one tile and is bound by its SM's reads from L2 (768 KB of
//            operands a 128 x 128 tile), so halving a CTA's K halves its time to the epilogue;
//            tiles of 64 weight rows, where their split tiles still fit one wave, put twice the
//            CTAs on the SMs, each reading ~270 KB against ~400 KB a 128 x 128 split tile.
//
// Workspace (KT = k / 128 stages of 128 K; m_pad = m rounded up to M_ALIGN), in this order:
//   a_c   [KT][m_pad][128 B]: row r's 64 compressed fp16 of the stage; its 16-byte chunk c
//         (groups 4c .. 4c + 3, two values each) at chunk c ^ (r & 7) (the 128-byte swizzle)
//   meta  [KT][m_pad / 64][64][4] uint32: m64 block, thread index u = 16 w + 2 (l / 4) + l % 2,
//         k32 step j; a thread (warp w, lane l) of a warpgroup loads the 16 bytes at u
//   b16   [n / 128][KT][2][128][128 B]: 128 weight rows, the stage's K halves 0-63 and 64-127
//         (one 128-byte swizzle atom each), row r's chunk c (K 8c .. 8c + 7) at c ^ (r & 7)
// A stage in shared memory is [A: BM rows x 128 B][B: 2 atoms x 128 rows x 128 B][meta BM x 16 B],
// each part 1024-byte aligned, the same bytes as in global memory.
//
// Metadata register of thread (warp w, lane l) of a warpgroup for k32 step kk (sparsity selector
// 0): bits 0-15 row 16 w + l / 4, bits 16-31 row 16 w + l / 4 + 8, each the four groups of K
// 32 kk + 16 (l % 2) .. + 15, a nibble a group (low: first), positions i0 | i1 << 2, i0 < i1.
// Compressed value columns 2 j, 2 j + 1 of a step are group j's values at i0, i1. (Lanes
// l % 4 >= 2 load the same word as lane l - 2; the MMA reads lanes l % 4 < 2 with selector 0.)
//
// What bounds it: the sparse MMAs themselves. Without any of its copies (A, B and metadata left
// in shared memory) the 256 x 128 kernel takes 78.6 us at m 8192 against 83.6 with them, about
// 152 cycles a m64n128k32.sp against 64 at the nominal sparse rate (docs/kernels/sparse_gemm.md).
// Tiles are visited n fastest (16 n-tiles a row of tiles), so the CTAs of a wave share A's rows
// and all of B stays in L2.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "hopper_ptx.cuh"
#include "wgmma_sparse.cuh"

namespace sp_wgmma {
using namespace hopper;

constexpr int B_ROWS = 128;             // weight rows a block of the prepared B (b16)
constexpr int B_ATOM = B_ROWS * 128;    // one 64-K half of a stage of b16: 128 rows x 128 bytes
constexpr int M_ALIGN = 256;            // m_pad's multiple: the largest tile's rows
constexpr int PREP_THREADS = 128;
constexpr int B_UNITS = 4;              // 16-byte chunks of fp16 B a prep thread writes

inline long long m_pad_of(int m) { return (m + M_ALIGN - 1) / M_ALIGN * static_cast<long long>(M_ALIGN); }
// the workspace's bytes: a_c, meta, b16
inline long long workspace_bytes(int m, int n, int k) { return m_pad_of(m) * k + m_pad_of(m) * (k / 8) + 2ll * n * k; }

// f16x2 add and e4m3x2 -> f16x2, also used by sparse_mma.cu's kernels
__device__ __forceinline__ uint32_t hadd2_u(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// A real (never executed) use of a metadata register set: ptxas must keep the registers
// holding it unchanged until here (an empty asm would not: ptxas never sees it). never != 0
// does not happen (it is m < 0); addr is any shared address.
__device__ __forceinline__ void hold(const uint4& v, uint32_t addr, uint32_t never) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n@p st.shared.v4.b32 [%4], {%0, %1, %2, %3};\n}\n" ::"r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w), "r"(addr), "r"(never)
               : "memory");
}
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {  // the low two bytes -> f16x2
  uint32_t r;
  asm("{\n.reg .b16 lo;\nmov.b32 {lo, _}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}\n" : "=r"(r) : "r"(two));
  return r;
}
// The high two bytes -> f16x2: the cvt reads the upper half of the register itself (no shift before it)
__device__ __forceinline__ uint32_t e4m3x2_hi_to_f16x2(uint32_t two) {
  uint32_t r;
  asm("{\n.reg .b16 hi;\nmov.b32 {_, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}\n" : "=r"(r) : "r"(two));
  return r;
}

// Thread-block clusters: the split-K form's partial tiles are summed through distributed shared memory.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// every thread of every CTA of the cluster: shared-memory writes before it are visible to all after it
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr, uint32_t rank) {  // addr in CTA rank's shared memory
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote) : "memory");
  return v;
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
  const uint32_t s = hadd2_u(x, y);                                                                     // f0 + f1, twice
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
// Blocks [a_blocks, grid): B, a thread per 16-byte output chunk (B_UNITS of them, loads first),
// 8 input bytes each, so that a warp's stores write four whole 128-byte rows of the image: the
// B part's time is mostly its 8 MiB of stores (docs/kernels/sparse_gemm.md, where the time goes).
__global__ void __launch_bounds__(PREP_THREADS)
    prep(const uint8_t* __restrict__ a_vals, const uint8_t* __restrict__ a_meta, const uint8_t* __restrict__ b8,
         uint8_t* __restrict__ a_c, uint8_t* __restrict__ meta, uint8_t* __restrict__ b16, int m, int m_pad, int n, int k,
         int a_blocks) {
  __shared__ __align__(1024) uint8_t sa[64 * 128];
  __shared__ __align__(16) uint16_t sm[64 * 4 * 2];
  launch_dependents();  // sp_gemm may start its prologue
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
      st_shared16(smem_addr(sa) + rr * 128 + ((c ^ (rr & 7)) << 4), out);
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
    // output chunk o (16 bytes: 8 fp16) = (((nb KT + ks) 2 + atom) 128 + r) 8 + j holds K 64 atom +
    // 8 (j ^ (r & 7)) .. + 7 of stage ks, weight row 128 nb + r: 8 input bytes
    const int chunks = n / 8 * k, o0 = (blockIdx.x - a_blocks) * PREP_THREADS * B_UNITS + t;
    uint2 in[B_UNITS];
#pragma unroll
    for (int it = 0; it < B_UNITS; ++it) {
      const int o = o0 + it * PREP_THREADS;
      const int j = o & 7, r = (o >> 3) & 127, atom = (o >> 10) & 1, ks = (o >> 11) % KT, nb = (o >> 11) / KT;
      const size_t src = static_cast<size_t>(nb * 128 + r) * k + ks * 128 + atom * 64 + 8 * (j ^ (r & 7));
      in[it] = o < chunks ? __ldg(reinterpret_cast<const uint2*>(b8 + src)) : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int it = 0; it < B_UNITS; ++it) {
      const int o = o0 + it * PREP_THREADS;
      if (o >= chunks) break;
      reinterpret_cast<uint4*>(b16)[o] = make_uint4(e4m3x2_to_f16x2(in[it].x), e4m3x2_hi_to_f16x2(in[it].x),
                                                    e4m3x2_to_f16x2(in[it].y), e4m3x2_hi_to_f16x2(in[it].y));
    }
  }
}

// ---------------------------------------------------------------- MMA

// wgmma_sp(acc, desc_a, desc_b, meta, scale_d): wgmma_sparse.cuh (m64n128k32 / m64n64k32 .sp)

// MW: m64 blocks a consumer warpgroup; BN: weight rows (128, or 64: half of a b16 block).
// CTA tile 128 MW tokens x BN weight rows.
template <int MW, int BN>
struct Cfg {
  static constexpr int EMPTY_ARRIVALS = 256;  // every thread of the two consumer warpgroups
  static constexpr int BM = 128 * MW;
  static constexpr int A_BYTES = BM * 128, M_BYTES = BM * 16;
  static constexpr int B_TILE_ATOM = BN * 128;  // a stage's B in shared memory: 2 atoms of BN rows x 128 bytes
  static constexpr int B_STAGE = 2 * B_TILE_ATOM;
  static constexpr int STAGE = A_BYTES + B_STAGE + M_BYTES;  // a multiple of 1024
  static constexpr int STAGES = MW == 2 ? 3 : BN == 64 ? 6 : 4;
  static_assert(BN == 128 || BN == 64, "a tile is a b16 block or half of one");
  static constexpr int SMEM = STAGES * STAGE + 1024 + 2 * STAGES * 8;  // + alignment slack + barriers
  static_assert(STAGE % 1024 == 0, "stage parts must stay 1024-byte aligned");
  static_assert(SMEM <= 227 * 1024, "shared memory");
  static_assert(BM <= M_ALIGN, "m_pad covers a whole tile");
  // split-K: a CTA's fp32 partial tile in the ring, rows padded to BN + 8 floats (8 g + 2 q: the
  // accumulators' 64-bit stores of a half-warp hit distinct banks)
  static constexpr int PART_PITCH = BN + 8;
  static_assert(BM * PART_PITCH * 4 <= STAGES * STAGE, "the partial tile fits the ring");
};

template <int MW, int BN>
__global__ void __launch_bounds__(384, 1)
    sp_gemm(const uint8_t* __restrict__ a_c, const uint8_t* __restrict__ meta, const uint8_t* __restrict__ b16,
            __nv_bfloat16* __restrict__ c, int m, int m_pad, int n, int k, int splits) {
  using C = Cfg<MW, BN>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t base = smem_addr(smem);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + C::STAGES * C::STAGE);
  const uint32_t full0 = smem_addr(bars);  // full barrier s at + 8 s; empty barrier s: bars + STAGES + s
  const int tid = threadIdx.x, wg = tid >> 7;
  if (tid == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      mbar_init(bars + s, 1);                              // full: the producer's expect_tx arrival + bytes
      mbar_init(bars + C::STAGES + s, C::EMPTY_ARRIVALS);  // empty: every consumer thread
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int KT = k / 128, NT = n / BN, KS = KT / splits;  // KS: stages a work item (splits divides KT)
  // work item t: tile t / splits (n fastest), K stages (t % splits) KS .. + KS - 1. With splits > 1
  // the grid is one item a CTA and a cluster is a tile's splits (rank = t % splits).
  const int items = (m + C::BM - 1) / C::BM * NT * splits;

  if (wg == 0) {
    setmaxnreg_dec<40>();
    if (tid == 0) {
      wait_for_prerequisites();  // prep's writes complete and visible
      int s = 0;
      uint32_t ph = 0;
      for (int t = blockIdx.x; t < items; t += gridDim.x) {
        const int tile = t / splits, m0 = (tile / NT) * C::BM, nt = tile % NT, k0 = (t % splits) * KS;
        for (int ks = k0; ks < k0 + KS; ++ks) {
          mbar_wait(bars + C::STAGES + s, ph ^ 1u);
          const uint32_t sb = base + s * C::STAGE, fb = full0 + 8 * s;
          expect_tx(fb, C::STAGE);
          bulk_g2s(sb, a_c + (static_cast<size_t>(ks) * m_pad + m0) * 128, C::A_BYTES, fb);
          bulk_g2s(sb + C::A_BYTES + C::B_STAGE, meta + (static_cast<size_t>(ks) * (m_pad / 64) + m0 / 64) * 1024, C::M_BYTES, fb);
          // b16 block nt * BN / 128, rows (nt * BN) % 128 .. + BN - 1 of each of its two atoms
          const uint8_t* bsrc = b16 + ((static_cast<size_t>(nt * BN / B_ROWS) * KT + ks) * 2 * B_ROWS + (nt * BN) % B_ROWS) * 128;
          if (BN == B_ROWS) {
            bulk_g2s(sb + C::A_BYTES, bsrc, C::B_STAGE, fb);
          } else {
            bulk_g2s(sb + C::A_BYTES, bsrc, C::B_TILE_ATOM, fb);
            bulk_g2s(sb + C::A_BYTES + C::B_TILE_ATOM, bsrc + B_ATOM, C::B_TILE_ATOM, fb);
          }
          if (++s == C::STAGES) { s = 0; ph ^= 1u; }
        }
      }
    }
    if (MW == 1 && splits > 1) {  // the consumers' two cluster barriers (one item a CTA)
      cluster_sync();
      cluster_sync();
    }
  } else {
    setmaxnreg_inc<232>();
    const int cw = wg - 1, lt = tid & 127, w = lt >> 5, l = lt & 31, g = l >> 2, q = l & 3;
    const int u = 16 * w + 2 * g + (l & 1);
    const uint64_t da0 = b_desc(base + cw * MW * 64 * 128), db0 = b_desc(base + C::A_BYTES);
    const uint32_t never = m < 0 ? 1u : 0u;
    float acc[MW][BN / 2];
#pragma unroll
    for (int i = 0; i < MW; ++i)
#pragma unroll
      for (int e = 0; e < BN / 2; ++e) acc[i][e] = 0.0f;
    int s = 0, prev = 0;
    uint32_t ph = 0;
    // slot sl's MMAs have retired in this warp: each thread gives it back to the producer (its
    // arrival releases its own metadata loads from the slot; one lane's arrival after a
    // __syncwarp orders the others' loads only through the warp barrier, which racecheck
    // reports as a hazard against the next bulk copy into the slot)
    auto release = [&](int sl) { mbar_arrive(bars + C::STAGES + sl); };
    // one stage: its metadata into mt (other: the set the stage before used), its MMAs
    auto stage = [&](int kk, uint4 (&mt)[MW], uint4 (&other)[MW]) {  // kk: the stage's index in the item
      mbar_wait(bars + s, ph);
      const uint32_t sb = base + s * C::STAGE;
#pragma unroll
      for (int i = 0; i < MW; ++i) mt[i] = ld_shared16(sb + C::A_BYTES + C::B_STAGE + ((cw * MW + i) * 64 + u) * 16);
      const uint64_t off = static_cast<uint64_t>((s * C::STAGE) >> 4);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint64_t db = db0 + off + (((j >> 1) * C::B_TILE_ATOM + (j & 1) * 64) >> 4);
#pragma unroll
        for (int i = 0; i < MW; ++i) {
          const uint32_t mj = j == 0 ? mt[i].x : j == 1 ? mt[i].y : j == 2 ? mt[i].z : mt[i].w;
          wgmma_sp(acc[i], da0 + off + ((i * 64 * 128 + 32 * j) >> 4), db, mj, (kk | j) != 0);
        }
      }
      wgmma_commit();
      if (kk > 0) {  // the stage before has retired: its slot and its metadata set are free
        wgmma_wait<1>();
#pragma unroll
        for (int i = 0; i < MW; ++i) hold(other[i], base, never);
        release(prev);
      }
      prev = s;
      if (++s == C::STAGES) { s = 0; ph ^= 1u; }
    };
    uint4 mt0[MW], mt1[MW];
    for (int t = blockIdx.x; t < items; t += gridDim.x) {
      const int tile = t / splits, m0 = (tile / NT) * C::BM, n0 = (tile % NT) * BN;
#pragma unroll 1
      for (int kk = 0; kk < KS; kk += 2) {  // even stages: set 0, odd stages: set 1
        stage(kk, mt0, mt1);
        if (kk + 1 < KS) stage(kk + 1, mt1, mt0);
      }
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < MW; ++i) {
        keep_f(acc[i]);
        hold(mt0[i], base, never);
        if (KS > 1) hold(mt1[i], base, never);
      }
      release(prev);
      if (MW == 1 && splits > 1) {  // one item a CTA: the ring is free once both warpgroups' MMAs have retired
        asm volatile("bar.sync 1, 256;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < MW; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = (cw * MW + i) * 64 + 16 * w + g + 8 * h;
#pragma unroll
            for (int jn = 0; jn < BN / 8; ++jn)
              st_shared_f2(base + (row * C::PART_PITCH + 8 * jn + 2 * q) * 4, acc[i][4 * jn + 2 * h], acc[i][4 * jn + 2 * h + 1]);
          }
        cluster_sync();  // every split's partial tile written
        // this CTA's rows of the tile: the splits' partials summed in rank order (the same sums
        // whichever CTA adds them), rounded once to bf16
        const int per = C::BM / splits, r0 = static_cast<int>(cluster_rank()) * per, tt = tid - 128;
        for (int e = tt; e < per * (BN / 4); e += 256) {
          const int row = r0 + e / (BN / 4), col = 4 * (e % (BN / 4));
          const uint32_t at = base + (row * C::PART_PITCH + col) * 4;
          float4 sum = ld_cluster_f4(at, 0);
          for (int p = 1; p < splits; ++p) {
            const float4 v = ld_cluster_f4(at, p);
            sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
          }
          if (m0 + row < m) {
            const __nv_bfloat162 lo = __floats2bfloat162_rn(sum.x, sum.y), hi = __floats2bfloat162_rn(sum.z, sum.w);
            uint2 pk;
            pk.x = *reinterpret_cast<const uint32_t*>(&lo);
            pk.y = *reinterpret_cast<const uint32_t*>(&hi);
            *reinterpret_cast<uint2*>(c + static_cast<size_t>(m0 + row) * n + n0 + col) = pk;
          }
        }
        cluster_sync();  // no CTA leaves while another reads its shared memory
        continue;
      }
#pragma unroll
      for (int i = 0; i < MW; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + (cw * MW + i) * 64 + 16 * w + g + 8 * h;
          if (row < m) {
            __nv_bfloat16* cr = c + static_cast<size_t>(row) * n + n0 + 2 * q;
#pragma unroll
            for (int jn = 0; jn < BN / 8; ++jn)
              *reinterpret_cast<__nv_bfloat162*>(cr + 8 * jn) = __floats2bfloat162_rn(acc[i][4 * jn + 2 * h], acc[i][4 * jn + 2 * h + 1]);
          }
        }
      }
    }
  }
}

constexpr int MAX_DEVICES = 64;

// prep, then sp_gemm<MW, BN> as its programmatic dependent, on stream st. work: workspace_bytes(m, n, k),
// 16-byte aligned. n % 128 == 0, k % 128 == 0. Returns a cudaError_t code.
template <int MW, int BN>
int launch(const void* a_vals, const void* a_meta, const void* b_fp8, void* c, void* work, int m, int n, int k,
           int splits, cudaStream_t st) {
  using Cf = Cfg<MW, BN>;
  static int sms[MAX_DEVICES] = {};  // 0: this device's kernel attribute not yet set
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (dev < 0 || dev >= MAX_DEVICES) return static_cast<int>(cudaErrorInvalidDevice);
  if (!sms[dev]) {
    e = cudaFuncSetAttribute(sp_gemm<MW, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cf::SMEM);
    if (e != cudaSuccess) return static_cast<int>(e);
    int count = 0;
    e = cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return static_cast<int>(e);
    sms[dev] = count;
  }
  cudaGetLastError();  // an earlier, unrelated error must not be reported as this launch's
  const int m_pad = static_cast<int>(m_pad_of(m));
  uint8_t* a_c = static_cast<uint8_t*>(work);
  uint8_t* meta = a_c + static_cast<size_t>(m_pad) * k;
  uint8_t* b16 = meta + static_cast<size_t>(m_pad) * (k / 8);
  const int a_blocks = (m_pad / 64) * (k / 128);
  const long long chunks = static_cast<long long>(n) / 8 * k;
  const int b_blocks = static_cast<int>((chunks + PREP_THREADS * B_UNITS - 1) / (PREP_THREADS * B_UNITS));
  prep<<<a_blocks + b_blocks, PREP_THREADS, 0, st>>>(static_cast<const uint8_t*>(a_vals), static_cast<const uint8_t*>(a_meta),
                                                   static_cast<const uint8_t*>(b_fp8), a_c, meta, b16, m, m_pad, n, k, a_blocks);
  e = cudaGetLastError();
  if (e != cudaSuccess) return static_cast<int>(e);
  const long long items = static_cast<long long>((m + Cf::BM - 1) / Cf::BM) * (n / BN) * splits;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = static_cast<unsigned>(splits);
  attr[1].val.clusterDim.y = attr[1].val.clusterDim.z = 1;
  // persistent (a CTA an SM) on whole tiles; split, one item a CTA (the ring holds its partial tile)
  cfg.gridDim = dim3(static_cast<unsigned>(splits > 1 || items < sms[dev] ? items : sms[dev]));
  cfg.blockDim = dim3(384);
  cfg.dynamicSmemBytes = Cf::SMEM;
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = splits > 1 ? 2 : 1;
  return static_cast<int>(cudaLaunchKernelEx(&cfg, sp_gemm<MW, BN>, static_cast<const uint8_t*>(a_c),
                                             static_cast<const uint8_t*>(meta), static_cast<const uint8_t*>(b16),
                                             static_cast<__nv_bfloat16*>(c), m, m_pad, n, k, splits));
}

}  // namespace sp_wgmma
