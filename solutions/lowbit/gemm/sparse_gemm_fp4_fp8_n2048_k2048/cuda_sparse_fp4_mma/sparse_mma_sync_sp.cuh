// The middle rows' path: 2:4-sparse A (tokens) x dense B (weights) on the warp-level sparse MMA,
// mma.sp::ordered_metadata m16n8k32 with f16 operands and fp32 accumulation (exact, as in
// sparse_wgmma_sp.cuh). Included by sparse_mma.cu.
//
// Two launches, the second a programmatic dependent of the first:
//   a_frags  A's groups canonicalised once (canon(), shared with sparse_wgmma_sp.cuh) straight
//            into the MMA's register order: for each 16-token tile and 32-K chunk, each lane's four
//            value registers (16 bytes) and its metadata word, so that the GEMM loads them with one
//            coalesced 16-byte and one 4-byte load and decodes nothing.
//   gemm     B stays e4m3 in global memory: each thread loads its weight rows' bytes and converts
//            them to fp16 in registers (cvt e4m3x2 -> f16x2), so B is never written back. A CTA
//            owns 16 WM tokens x 8 WN WARPS_N weight rows; each warp a 16 WM x 8 WN tile of them
//            over 1 / WARPS_K of K, its loads D chunks ahead in a register ring. B's first chunks
//            are loaded before the wait on a_frags (they do not depend on it).
// Against the sparse-wgmma path this writes no fp16 copy of B (8 MiB at the definition's shape)
// and has no pipeline to fill; the price is B converted once per CTA row of tokens (the few-rows
// kernel's trade, with half the MMAs and A decoded once).
//
// K order inside a 32-K chunk. The MMA's B fragment gives thread t of a quad K 2t + 8v + {0, 1}
// (v = 0..3): halves of the logical groups t / 2 + 2v. Logical group L (K 4L .. 4L + 3 of the
// MMA) is physical group phi(L) = 4 (L & 1) + L / 2 of the chunk (a permutation of whole groups,
// the same for A and B, so the product is unchanged and each group keeps its positions). Thread t's
// B bytes are then one 16-byte load, bytes 16 (t / 2) .. + 15 of the row's chunk (physical groups
// 4 (t / 2) + v), of which it takes byte pair 2 (t & 1), + 1 of each word. A's value registers of
// lane (g, t): logical groups t and t + 4 = physical phi(t) and phi(t) + 2, rows g and g + 8; the
// metadata word of lanes t & 1 == 0 covers logical groups 0..3 (physical 0, 4, 1, 5), of lanes
// t & 1 == 1 groups 4..7 (physical 2, 6, 3, 7): bits 0-15 row g, 16-31 row g + 8, a nibble a group.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "sparse_wgmma_sp.cuh"

namespace sp_sync {
using namespace hopper;
using sp_wgmma::canon;
using sp_wgmma::e4m3x2_to_f16x2;

constexpr int FRAG_THREADS = 256;

// Bytes of the workspace: values uint4 then metadata uint32, per (16-token tile, 32-K chunk, lane).
__host__ __device__ inline long long tiles16(int m) { return (m + 15) / 16; }
inline long long workspace_bytes(int m, int k) { return tiles16(m) * (k / 32) * 32 * (16 + 4); }

// physical group of the chunk holding logical group l (0..7)
__host__ __device__ constexpr int phi(int l) { return 4 * (l & 1) + (l >> 1); }

// One thread a (tile, chunk, lane): rows 16 tile + g, + 8, the chunk's 8 bytes of a_vals and a_meta each.
__global__ void __launch_bounds__(FRAG_THREADS)
    a_frags(const uint8_t* __restrict__ a_vals, const uint8_t* __restrict__ a_meta, uint4* __restrict__ vals,
            uint32_t* __restrict__ meta, int m, int k, long long items) {
  launch_dependents();  // the GEMM may start its B loads
  const long long i = blockIdx.x * static_cast<long long>(FRAG_THREADS) + threadIdx.x;
  if (i >= items) return;
  const int kc = k / 32, lane = static_cast<int>(i & 31), g = lane >> 2, t = lane & 3;
  const long long tc = i >> 5;  // tile * kc + chunk
  const int c = static_cast<int>(tc % kc);
  const long long tile = tc / kc;
  uint64_t v[2], me[2];  // rows g, g + 8: the chunk's 8 groups, byte j = group j
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long long row = tile * 16 + g + 8 * h;
    v[h] = me[h] = 0;  // code 0 is +0 (rows past m multiply zeros and are never stored)
    if (row < m) {
      const size_t off = static_cast<size_t>(row) * (k / 4) + 8 * c;
      v[h] = __ldg(reinterpret_cast<const unsigned long long*>(a_vals + off));
      me[h] = __ldg(reinterpret_cast<const unsigned long long*>(a_meta + off));
    }
  }
  const int p_lo = phi(t), p_hi = phi(t) + 2;
  uint32_t out[4], nib;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    out[h] = canon(static_cast<uint32_t>(v[h] >> (8 * p_lo)) & 0xffu, static_cast<uint32_t>(me[h] >> (8 * p_lo)) & 0xffu, nib);
    out[2 + h] = canon(static_cast<uint32_t>(v[h] >> (8 * p_hi)) & 0xffu, static_cast<uint32_t>(me[h] >> (8 * p_hi)) & 0xffu, nib);
  }
  // metadata word: logical groups 4 (t & 1) + j, j = 0..3 -> physical phi(4 (t & 1) + j)
  uint32_t word = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int p = phi(4 * (t & 1) + j);
      canon(static_cast<uint32_t>(v[h] >> (8 * p)) & 0xffu, static_cast<uint32_t>(me[h] >> (8 * p)) & 0xffu, nib);
      word |= nib << (16 * h + 4 * j);
    }
  vals[i] = make_uint4(out[0], out[1], out[2], out[3]);
  meta[i] = word;
}

__device__ __forceinline__ void mma_sp(float (&d)[4], const uint4& a, const uint32_t (&b)[4], uint32_t e) {
  asm volatile(
      "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
}

__device__ __forceinline__ uint32_t word_of(const uint4& q, int v) { return v == 0 ? q.x : v == 1 ? q.y : v == 2 ? q.z : q.w; }

template <int WM, int WN, int WARPS_N, int WARPS_K, int D>
struct Tile {
  static constexpr int THREADS = 32 * WARPS_N * WARPS_K;
  static constexpr int TM = 16 * WM;            // tokens a CTA
  static constexpr int TN = 8 * WN * WARPS_N;   // weight rows a CTA
  static constexpr int JOIN = WARPS_K > 1 ? WARPS_K * WARPS_N * WM * WN * 4 * 32 : 1;  // floats
};

// CTA (x, y): weight rows TN x .., tokens TM y ..; warp w: weight rows 8 WN (w % WARPS_N) .. of the
// CTA's, 32-K chunks w / WARPS_N + i WARPS_K (K split WARPS_K ways, so that each warp's chain of
// loads is kc / WARPS_K chunks long); the WARPS_K partial sums joined in shared memory in order.
template <int WM, int WN, int WARPS_N, int WARPS_K, int D>
__global__ void __launch_bounds__(Tile<WM, WN, WARPS_N, WARPS_K, D>::THREADS)
    gemm(const uint4* __restrict__ vals, const uint32_t* __restrict__ meta, const uint8_t* __restrict__ b8,
         __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  using T = Tile<WM, WN, WARPS_N, WARPS_K, D>;
  __shared__ float join[T::JOIN];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int wn = w % WARPS_N, wk = w / WARPS_N, kc = k / 32, steps = kc / WARPS_K;
  const long long tile0 = static_cast<long long>(blockIdx.y) * WM;  // first m16 tile
  const int n_w = blockIdx.x * T::TN + 8 * WN * wn;                 // first weight row
  const long long tiles = tiles16(m);
  const uint8_t* brow[WN];
  bool bok[WN];
#pragma unroll
  for (int j = 0; j < WN; ++j) {
    const int r = n_w + 8 * j + g;
    bok[j] = r < n;
    brow[j] = b8 + static_cast<size_t>(bok[j] ? r : 0) * k + 32 * wk + 16 * (t >> 1);
  }
  const uint4* arow[WM];
  const uint32_t* erow[WM];
  bool aok[WM];
#pragma unroll
  for (int i = 0; i < WM; ++i) {
    aok[i] = tile0 + i < tiles;
    const long long base = ((aok[i] ? tile0 + i : 0) * kc + wk) * 32 + lane;
    arow[i] = vals + base;
    erow[i] = meta + base;
  }
  float acc[WM][WN][4];
#pragma unroll
  for (int i = 0; i < WM; ++i)
#pragma unroll
    for (int j = 0; j < WN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  uint4 bq[D][WN], av[D][WM];
  uint32_t ev[D][WM];
  auto load_b = [&](int s, int step) {  // step: this warp's chunk wk + step WARPS_K
#pragma unroll
    for (int j = 0; j < WN; ++j)
      bq[s][j] = step < steps && bok[j] ? __ldg(reinterpret_cast<const uint4*>(brow[j] + 32 * WARPS_K * step))
                                       : make_uint4(0u, 0u, 0u, 0u);
  };
  auto load_a = [&](int s, int step) {
#pragma unroll
    for (int i = 0; i < WM; ++i) {
      const bool ok = step < steps && aok[i];
      av[s][i] = ok ? __ldg(arow[i] + 32 * WARPS_K * step) : make_uint4(0u, 0u, 0u, 0u);
      ev[s][i] = ok ? __ldg(erow[i] + 32 * WARPS_K * step) : 0x44444444u;  // positions 0, 1 in every group: a valid word
    }
  };
#pragma unroll
  for (int s = 0; s < D; ++s) load_b(s, s);
  wait_for_prerequisites();  // a_frags has written A's fragments
#pragma unroll
  for (int s = 0; s < D; ++s) load_a(s, s);
  const int sh = 16 * (t & 1);  // this thread's byte pair of each B word
#pragma unroll 1
  for (int i0 = 0; i0 < steps; i0 += D) {
#pragma unroll
    for (int s = 0; s < D; ++s) {
      uint32_t bf[WN][4];
#pragma unroll
      for (int j = 0; j < WN; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) bf[j][v] = e4m3x2_to_f16x2(word_of(bq[s][j], v) >> sh);
      uint4 a[WM];
      uint32_t e[WM];
#pragma unroll
      for (int i = 0; i < WM; ++i) {
        a[i] = av[s][i];
        e[i] = ev[s][i];
      }
      load_b(s, i0 + s + D);
      load_a(s, i0 + s + D);
#pragma unroll
      for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j) mma_sp(acc[i][j], a[i], bf[j], e[i]);
    }
  }
  if constexpr (WARPS_K > 1) {  // partial sums in register order, lane fastest; warps wk 0 add them in wk order
    float* mine = join + (wk * WARPS_N + wn) * (WM * WN * 4 * 32) + lane;
#pragma unroll
    for (int i = 0; i < WM; ++i)
#pragma unroll
      for (int j = 0; j < WN; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) mine[((i * WN + j) * 4 + e) * 32] = acc[i][j][e];
    __syncthreads();
    if (wk != 0) return;
#pragma unroll
    for (int i = 0; i < WM; ++i)
#pragma unroll
      for (int j = 0; j < WN; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float sum = 0.0f;
#pragma unroll
          for (int q = 0; q < WARPS_K; ++q) sum += join[((q * WARPS_N + wn) * (WM * WN * 4) + (i * WN + j) * 4 + e) * 32 + lane];
          acc[i][j][e] = sum;
        }
  }
  // acc[i][j]: tokens 16 (tile0 + i) + g (e 0, 1) and + 8 (e 2, 3), weight rows n_w + 8 j + 2 t, + 1
#pragma unroll
  for (int i = 0; i < WM; ++i)
#pragma unroll
    for (int j = 0; j < WN; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long long r = (tile0 + i) * 16 + g + 8 * h;
        const int col = n_w + 8 * j + 2 * t;
        if (r < m && col < n) {
          __nv_bfloat16* dst = c + static_cast<size_t>(r) * n + col;
          if (col + 1 < n)
            *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
          else
            *dst = __float2bfloat16_rn(acc[i][j][2 * h]);
        }
      }
}

// a_frags, then gemm<...> as its programmatic dependent, on stream st. work: workspace_bytes(m, k)
// bytes, 16-byte aligned. (k / 32) % (WARPS_K D) == 0. Returns a cudaError_t code.
template <int WM, int WN, int WARPS_N, int WARPS_K, int D>
int launch(const void* a_vals, const void* a_meta, const void* b_fp8, void* c, void* work, int m, int n, int k,
           cudaStream_t st) {
  using T = Tile<WM, WN, WARPS_N, WARPS_K, D>;
  if ((k / 32) % (WARPS_K * D)) return static_cast<int>(cudaErrorInvalidValue);
  cudaGetLastError();  // an earlier, unrelated error must not be reported as this launch's
  const long long items = tiles16(m) * (k / 32) * 32;
  uint4* vals = static_cast<uint4*>(work);
  uint32_t* meta = reinterpret_cast<uint32_t*>(vals + items);
  a_frags<<<static_cast<unsigned>((items + FRAG_THREADS - 1) / FRAG_THREADS), FRAG_THREADS, 0, st>>>(
      static_cast<const uint8_t*>(a_vals), static_cast<const uint8_t*>(a_meta), vals, meta, m, k, items);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return static_cast<int>(e);
  const long long rows = (m + T::TM - 1) / T::TM;
  if (rows > 65535) return static_cast<int>(cudaErrorInvalidValue);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(static_cast<unsigned>((n + T::TN - 1) / T::TN), static_cast<unsigned>(rows));
  cfg.blockDim = dim3(T::THREADS);
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return static_cast<int>(cudaLaunchKernelEx(&cfg, gemm<WM, WN, WARPS_N, WARPS_K, D>, static_cast<const uint4*>(vals),
                                             static_cast<const uint32_t*>(meta), static_cast<const uint8_t*>(b_fp8),
                                             static_cast<__nv_bfloat16*>(c), m, n, k));
}

}  // namespace sp_sync
