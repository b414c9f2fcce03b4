// 2:4-sparse E2M1 A times dense e4m3 B, bf16 out, exact: fp16 operands on the tensor cores'
// mma.sync m16n8k16 with fp32 accumulation. Every E2M1 value, the sum of two (a repeated
// position sums its two values: at most 5 significant bits) and every e4m3 value is exact in
// fp16, and the MMA sums the exact products in fp32.
//
// The form for few rows of A (tokens), where the call is bound by reading B's n x k bytes:
// c^T = B A^T, B's rows on the MMA's M side, converted e4m3 -> fp16 in registers straight from
// 16-byte global loads; A's groups decoded into the MMA's B operand, four values from one byte
// of a_vals and one of a_meta. CTA (x, y) owns 16 * MT rows of B and every gridDim.y-th round of
// 8 * NT tokens from y; its KW warps split K, so that every SM has B's bytes in flight at once,
// and their sums join in shared memory. Each CTA decodes its tokens over all of K, so the decode
// is repeated once per 16 * MT rows of B: more rows a CTA and tokens split over y cut that
// repetition while keeping every SM busy.
//
// K order: within a 64-wide chunk, thread t of a quad holds fragment columns 2t, 2t + 1,
// 2t + 8, 2t + 9 of each k16 step s; they stand for K = 16 t + 4 s + 0, 1, 2, 3 (the same
// permutation for both operands, so the product is unchanged). B's row bytes 16 t .. 16 t + 15
// are then one load, and A's group 4 t + s (K 16 t + 4 s .. + 3) is one byte of a_vals and one
// of a_meta: its positions 0, 1 are the B-operand register b0 and its positions 2, 3 b1.
//
// For more rows, sparse_wgmma_sp.cuh runs the sparse tensor cores on prepared fp16 operands;
// where n is no multiple of their 128-row tiles, dense_operands_kernel (further down) writes A
// and B dense in bf16 for cuBLAS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "sparse_wgmma_sp.cuh"

namespace {

using sp_wgmma::e4m3x2_hi_to_f16x2;
using sp_wgmma::e4m3x2_to_f16x2;
using sp_wgmma::hadd2_u;

__device__ __forceinline__ uint32_t hmul2_u(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// One 2:4 group -> its four fp16 values at positions 0 .. 3 (lo: 0, 1; hi: 2, 3). v: the two
// E2M1 codes (low nibble first), meta: their positions (bits 0-1, 2-3; the rest ignored).
// A code's bits placed in fp16's sign and exponent/mantissa fields are its value times 2^-14;
// two codes sharing a position add (exact), then one multiply by 2^14 (exact).
__device__ __forceinline__ void group_f16(uint32_t v, uint32_t meta, uint32_t& lo, uint32_t& hi) {
  const uint64_t h0 = ((v & 7u) << 9) | ((v & 8u) << 12);
  const uint64_t h1 = ((v & 0x70u) << 5) | ((v & 0x80u) << 8);
  const uint64_t s0 = h0 << (16 * (meta & 3u));
  const uint64_t s1 = h1 << (4 * (meta & 12u));
  constexpr uint32_t TWO14 = 0x74007400u;  // 2^14 in both halves
  lo = hmul2_u(hadd2_u(static_cast<uint32_t>(s0), static_cast<uint32_t>(s1)), TWO14);
  hi = hmul2_u(hadd2_u(static_cast<uint32_t>(s0 >> 32), static_cast<uint32_t>(s1 >> 32)), TWO14);
}

// The few-rows kernel's decode of one 32-bit word of a_vals (tv) and of a_meta (tm), its 4 groups
// s = 0..3 (byte s) -> lo[s], hi[s]: the same f16 values as group_f16 (exact E2M1 values, a
// repeated position's two values summed; a lone -0 code stays -0 where group_f16 gives +0, which
// adds nothing to a sum), fewer instructions:
//  - fp16 of an E2M1 code: high byte T[code & 7] (T = 00 38 3c 3e 40 42 44 46: 0, 0.5, 1, 1.5,
//    2, 3, 4, 6) with the code's sign in bit 7, low byte 0. One prmt looks up the 4 codes of 2
//    groups (selector nibbles = the codes, sign bits masked off; table bytes | 0x80), a second
//    prmt with every pool byte 0x01 gives 1 for a positive code and 0 (bit 3 set: byte 0x01's
//    sign replicated) for a negative one, and p = t - 128 s clears bit 7 of the positive codes'
//    bytes (no borrow: every byte of t is >= 0x80): p = bytes (f(c0), f(c1)) of each group, fp16
//    high bytes.
//  - x = (f0, f1) as f16x2 (prmt from p and zero), y = f0 + f1 in both halves (exact in fp16).
//  - lo = prmt(x, y, sel_lo), hi = prmt(x, y, sel_hi), (sel_lo, sel_hi) = lut[meta & 15]: each position's two
//    bytes from x's f0 (p0 there), f1 (p1 there), y (both there) or x's zero byte 0 (neither).
__device__ __forceinline__ void word_f16(uint32_t tv, uint32_t tm, uint32_t lut, uint32_t k_t, uint32_t k_one,
                                         uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  const uint32_t mag = tv & 0x77777777u;
  const uint32_t off = (tm << 3) & 0x78787878u;  // byte s: lut's byte offset of group s's entry
  uint32_t p[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // groups 2h, 2h + 1: nibbles of bits 16 h .. 16 h + 15
    const uint32_t t = hopper::prmt(k_t, 0xc6c4c2c0u, h ? mag >> 16 : mag);
    const uint32_t sg = hopper::prmt(k_one, 0x01010101u, h ? tv >> 16 : tv);
    p[h] = t - (sg << 7);
  }
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    // (0, f0 byte, 0, f1 byte): bytes 2 (s & 1), 2 (s & 1) + 1 of p[s >> 1] into bytes 1 and 3
    const uint32_t x = hopper::prmt(p[s >> 1], 0u, (s & 1) ? 0x3424u : 0x1404u);
    uint32_t y;
    asm("{\n.reg .b16 a, b, c;\nmov.b32 {a, b}, %1;\nadd.rn.f16 c, a, b;\nmov.b32 %0, {c, c};\n}\n" : "=r"(y) : "r"(x));
    // the entry's shared address: lut (256-byte aligned: low byte 0) with byte s of off as its low byte
    const uint32_t at = hopper::prmt(off, lut, 0x7650u + s);
    uint32_t sel_lo, sel_hi;
    asm("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(sel_lo), "=r"(sel_hi) : "r"(at));
    lo[s] = hopper::prmt(x, y, sel_lo);
    hi[s] = hopper::prmt(x, y, sel_hi);
  }
}

// lut[p0 | p1 << 2]: prmt selectors (x: positions 0, 1; y: 2, 3) over the pool (x, y) above.
__device__ __forceinline__ uint2 lut_entry(int i) {
  const int p0 = i & 3, p1 = i >> 2;
  uint32_t code[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) code[j] = (p0 == j && p1 == j) ? 0x54u : p0 == j ? 0x10u : p1 == j ? 0x32u : 0x00u;
  return make_uint2(code[0] | (code[1] << 8), code[2] | (code[3] << 8));
}

__device__ __forceinline__ uint32_t word(const uint4& q, int s) {
  return s == 0 ? q.x : s == 1 ? q.y : s == 2 ? q.z : q.w;
}

template <int MT, int KW, int CH, int NT>
struct SmallM {  // CH: 64-K chunks a warp loads at once (a block)
  static constexpr int ROWS = 16 * MT;   // B rows a CTA
  static constexpr int TOK = 8 * NT;     // A rows (tokens) a round
  static constexpr int STRIDE = ROWS + 4;  // a token's floats in the join buffer (bank spread)
  static constexpr int SMEM = KW * TOK * STRIDE * 4;
};

// CTA (x, y): B rows n0 = 16 MT x ..; token rounds from m0 = 8 NT y, gridDim.y apart; warp w:
// blocks of 64-K chunks w CH + i + j KW CH (i < CH, j = 0, 1, ...), each block's loads all
// issued before any of it is multiplied (CH = 4 / MT: 128 bytes of B a thread in flight).
template <int MT, int KW, int CH, int NT>
__global__ void __launch_bounds__(KW * 32)
    sparse_small_m_kernel(const uint8_t* __restrict__ a_vals, const uint8_t* __restrict__ a_meta,
                          const uint8_t* __restrict__ b_fp8, __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  using S = SmallM<MT, KW, CH, NT>;
  extern __shared__ float join[];  // [KW][TOK][STRIDE]
  __shared__ __align__(256) uint2 lut[16];  // word_f16's selectors
  if (threadIdx.x < 16) lut[threadIdx.x] = lut_entry(threadIdx.x);
  __syncthreads();
  const uint32_t lut_at = hopper::smem_addr(lut);
  // word_f16's constant prmt pools, kept in registers (not rematerialised before every prmt)
  uint32_t k_t = 0xbebcb880u, k_one = 0x01010101u;
  asm volatile("" : "+r"(k_t), "+r"(k_one));
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * S::ROWS, kc = k / 64, kg = k / 4;
  const uint8_t* brow[MT][2];
  bool bok[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = n0 + 16 * mt + 8 * h + g;
      bok[mt][h] = r < n;
      brow[mt][h] = b_fp8 + static_cast<size_t>(bok[mt][h] ? r : 0) * k + 16 * t;
    }
  }
#pragma unroll 1
  for (int m0 = blockIdx.y * S::TOK; m0 < m; m0 += gridDim.y * S::TOK) {
    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
#pragma unroll 1
    for (int c0 = w * CH; c0 < kc; c0 += KW * CH) {
      uint4 bq[CH][MT][2];
      uint32_t tv[CH][NT], tm[CH][NT];
#pragma unroll
      for (int i = 0; i < CH; ++i) {
        const int ch = c0 + i;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            bq[i][mt][h] = make_uint4(0u, 0u, 0u, 0u);
            if (ch < kc && bok[mt][h]) bq[i][mt][h] = __ldg(reinterpret_cast<const uint4*>(brow[mt][h] + 64 * ch));
          }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int r = m0 + 8 * nt + g;
          tv[i][nt] = tm[i][nt] = 0u;  // code 0 is +0: rows past m multiply zeros, never stored
          if (ch < kc && r < m) {
            const size_t off = static_cast<size_t>(r) * kg + 16 * ch + 4 * t;
            tv[i][nt] = __ldg(reinterpret_cast<const uint32_t*>(a_vals + off));
            tm[i][nt] = __ldg(reinterpret_cast<const uint32_t*>(a_meta + off));
          }
        }
      }
#pragma unroll
      for (int i = 0; i < CH; ++i) {
        uint32_t blo[NT][4], bhi[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) word_f16(tv[i][nt], tm[i][nt], lut_at, k_t, k_one, blo[nt], bhi[nt]);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          uint32_t af[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            const uint32_t w0 = word(bq[i][mt][0], s), w1 = word(bq[i][mt][1], s);
            af[mt][0] = e4m3x2_to_f16x2(w0);     // row g, K 16 t + 4 s + 0, 1
            af[mt][1] = e4m3x2_to_f16x2(w1);     // row g + 8
            af[mt][2] = e4m3x2_hi_to_f16x2(w0);  // row g, K + 2, 3
            af[mt][3] = e4m3x2_hi_to_f16x2(w1);
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) hopper::mma_m16n8k16(acc[mt][nt], af[mt], blo[nt][s], bhi[nt][s]);
        }
      }
    }
    // join: acc[mt][nt][e] is B row 16 mt + g (+ 8 for e >= 2), token 8 nt + 2 t + (e & 1)
    float* mine = join + w * S::TOK * S::STRIDE;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          mine[(8 * nt + 2 * t + (e & 1)) * S::STRIDE + 16 * mt + g + 8 * (e >> 1)] = acc[mt][nt][e];
    __syncthreads();
    // two adjacent B rows of one token a thread: the warps' sums in order, one bf16x2 store
    for (int q = threadIdx.x; q < S::TOK * S::ROWS / 2; q += KW * 32) {
      const int tok = q / (S::ROWS / 2), rr = 2 * (q % (S::ROWS / 2));
      float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int w2 = 0; w2 < KW; ++w2) {
        const float2 p = *reinterpret_cast<const float2*>(join + (w2 * S::TOK + tok) * S::STRIDE + rr);
        sum.x += p.x;
        sum.y += p.y;
      }
      const int r = m0 + tok, col = n0 + rr;
      if (r < m && col < n) {
        __nv_bfloat16* dst = c + static_cast<size_t>(r) * n + col;
        if (col + 1 < n)
          *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(sum.x, sum.y);
        else
          *dst = __float2bfloat16_rn(sum.x);
      }
    }
    __syncthreads();  // the join buffer is rewritten by the next round
  }
}

// The many-rows path's first pass: A's 2:4 encoding expanded dense and B converted, both to bf16
// (exact: A's values and pairwise sums hold 5 significant bits, e4m3 values 4, bf16 8), for a
// cuBLAS GEMM with fp32 accumulation. Item i < m k / 16: four groups of A (one 32-bit word of
// a_vals and of a_meta, 32 bytes out); the rest: 16 bytes of B (32 bytes out).
__device__ __forceinline__ uint32_t f16x2_to_bf16x2(uint32_t h) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
  return *reinterpret_cast<const uint32_t*>(&b);
}

__global__ void __launch_bounds__(256)
    dense_operands_kernel(const uint32_t* __restrict__ a_vals, const uint32_t* __restrict__ a_meta,
                          const uint4* __restrict__ b_fp8, uint4* __restrict__ a16, uint4* __restrict__ b16,
                          long long a_items, long long items) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < items; i += gridDim.x * 256ll) {
    uint32_t out[8];
    if (i < a_items) {
      const uint32_t v = __ldg(a_vals + i), meta = __ldg(a_meta + i);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        uint32_t lo, hi;
        group_f16(v >> (8 * s), meta >> (8 * s), lo, hi);
        out[2 * s] = f16x2_to_bf16x2(lo);
        out[2 * s + 1] = f16x2_to_bf16x2(hi);
      }
      a16[2 * i] = make_uint4(out[0], out[1], out[2], out[3]);
      a16[2 * i + 1] = make_uint4(out[4], out[5], out[6], out[7]);
    } else {
      const long long j = i - a_items;
      const uint4 q = __ldg(b_fp8 + j);
      const uint32_t in[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        out[2 * s] = f16x2_to_bf16x2(e4m3x2_to_f16x2(in[s]));
        out[2 * s + 1] = f16x2_to_bf16x2(e4m3x2_hi_to_f16x2(in[s]));
      }
      b16[2 * j] = make_uint4(out[0], out[1], out[2], out[3]);
      b16[2 * j + 1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
  }
}

constexpr int MAX_DEVICES = 64;

template <int MT, int KW, int CH, int NT>
int launch_small_m(const void* a_vals, const void* a_meta, const void* b_fp8, void* c, int m, int n, int k,
                   int ysplit, cudaStream_t stream) {
  using S = SmallM<MT, KW, CH, NT>;
  static bool configured[MAX_DEVICES] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (dev < 0 || dev >= MAX_DEVICES) return static_cast<int>(cudaErrorInvalidDevice);
  if (!configured[dev]) {
    e = cudaFuncSetAttribute(sparse_small_m_kernel<MT, KW, CH, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             S::SMEM);
    if (e != cudaSuccess) return static_cast<int>(e);
    configured[dev] = true;
  }
  cudaGetLastError();  // an earlier, unrelated error must not be reported as this launch's
  const int rounds = (m + S::TOK - 1) / S::TOK;
  const dim3 grid(static_cast<unsigned>((n + S::ROWS - 1) / S::ROWS), static_cast<unsigned>(ysplit < rounds ? ysplit : rounds));
  sparse_small_m_kernel<MT, KW, CH, NT><<<grid, KW * 32, S::SMEM, stream>>>(
      static_cast<const uint8_t*>(a_vals), static_cast<const uint8_t*>(a_meta), static_cast<const uint8_t*>(b_fp8),
      static_cast<__nv_bfloat16*>(c), m, n, k);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// c [m, n] bf16 = A [m, k] (a_vals, a_meta: int8/uint8 [m, k/4]) @ b_fp8 (e4m3 [n, k])^T, all
// contiguous and 16-byte aligned, k % 64 == 0. Tile: mt (B rows a CTA / 16), nt (tokens a round
// / 8), one of the pairs below; ysplit >= 1 CTAs over the token rounds of each mt. Returns a
// cudaError_t code.
extern "C" int lowbit_sparse_small_m(const void* a_vals, const void* a_meta, const void* b_fp8, void* c, int m, int n,
                                     int k, int mt, int nt, int ysplit, void* stream) {
  if (m <= 0 || n <= 0) return 0;
  if (k <= 0 || k % 64 || ysplit < 1 || ysplit > 65535) return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
#define LOWBIT_SMALL_M(MT_, NT_) \
  if (mt == MT_ && nt == NT_) return launch_small_m<MT_, 8, 4 / MT_, NT_>(a_vals, a_meta, b_fp8, c, m, n, k, ysplit, s);
  LOWBIT_SMALL_M(1, 1)
  LOWBIT_SMALL_M(1, 2)
  LOWBIT_SMALL_M(1, 4)
  LOWBIT_SMALL_M(1, 8)
  LOWBIT_SMALL_M(2, 2)
  LOWBIT_SMALL_M(2, 4)
  LOWBIT_SMALL_M(2, 8)
  LOWBIT_SMALL_M(4, 1)
  LOWBIT_SMALL_M(4, 2)
  LOWBIT_SMALL_M(4, 4)
#undef LOWBIT_SMALL_M
  return static_cast<int>(cudaErrorInvalidValue);
}

// The many-rows path's first pass (dense_operands_kernel): a16 bf16 [m, k], b16 bf16 [n, k], all
// contiguous and 16-byte aligned, k % 64 == 0. Returns a cudaError_t code.
extern "C" int lowbit_sparse_dense_operands(const void* a_vals, const void* a_meta, const void* b_fp8, void* a16,
                                            void* b16, int m, int n, int k, void* stream) {
  if (m <= 0 || n <= 0) return 0;
  if (k <= 0 || k % 64) return static_cast<int>(cudaErrorInvalidValue);
  const long long a_items = static_cast<long long>(m) * (k / 16), items = a_items + static_cast<long long>(n) * (k / 16);
  const long long blocks = (items + 255) / 256;
  cudaGetLastError();  // an earlier, unrelated error must not be reported as this launch's
  dense_operands_kernel<<<static_cast<unsigned>(blocks < 132 * 16 ? blocks : 132 * 16), 256, 0,
                          static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint32_t*>(a_vals), static_cast<const uint32_t*>(a_meta), static_cast<const uint4*>(b_fp8),
      static_cast<uint4*>(a16), static_cast<uint4*>(b16), a_items, items);
  return static_cast<int>(cudaGetLastError());
}

// Bytes of the workspace lowbit_sparse_wgmma_sp needs for (m, n, k).
extern "C" long long lowbit_sparse_wgmma_sp_workspace(int m, int n, int k) { return sp_wgmma::workspace_bytes(m, n, k); }

// The many-rows path (sparse_wgmma_sp.cuh): prep into work, then the sparse-MMA kernel, 128 mw
// tokens x bn weight rows a tile (mw 1 or 2; bn 128, or 64 with mw 1), its K split over a
// cluster of splits CTAs (1, or 2 with mw 1 and k % 256 == 0). work:
// lowbit_sparse_wgmma_sp_workspace(m, n, k) bytes, 16-byte aligned, not shared with a call that
// may run concurrently. n % 128 == 0, k % 128 == 0. Returns a cudaError_t code.
extern "C" int lowbit_sparse_wgmma_sp(const void* a_vals, const void* a_meta, const void* b_fp8, void* c, void* work,
                                      int m, int n, int k, int mw, int bn, int splits, void* stream) {
  if (m <= 0 || n <= 0) return 0;
  if (k <= 0 || k % 128 || n % 128) return static_cast<int>(cudaErrorInvalidValue);
  if (splits != 1 && (mw != 1 || splits != 2 || (k / 128) % splits))
    return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (mw == 1 && bn == 128) return sp_wgmma::launch<1, 128>(a_vals, a_meta, b_fp8, c, work, m, n, k, splits, s);
  if (mw == 1 && bn == 64) return sp_wgmma::launch<1, 64>(a_vals, a_meta, b_fp8, c, work, m, n, k, splits, s);
  if (mw == 2 && bn == 128) return sp_wgmma::launch<2, 128>(a_vals, a_meta, b_fp8, c, work, m, n, k, splits, s);
  return static_cast<int>(cudaErrorInvalidValue);
}
