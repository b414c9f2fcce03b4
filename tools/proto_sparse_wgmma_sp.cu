// Prototype, not a solution: 2:4-sparse A (tokens) x dense B (weights) on Hopper's sparse tensor
// cores, wgmma.mma_async.sp m64n128k32 with f16 operands and fp32 accumulation, to measure the
// instruction's rate and check the metadata layout before the sparse solution's kernel is built
// on it (tools/proto_sparse_wgmma_sp.py drives it; docs/kernels/sparse_gemm.md has the figures).
//
// Three launches: prep_a canonicalises A's 2:4 groups (two distinct positions in increasing
// order, a repeated position's two values summed, the other value 0) into compressed fp16 values
// [m, k/2] and metadata words in the register order the MMA takes; prep_b converts B e4m3 -> fp16
// [n, k]; sp_gemm multiplies, CTA 128 tokens x 128 weight rows (two warpgroups, m64 each), K in
// 128-wide stages through a 4-deep cp.async ring of 128-byte-swizzled tiles.
//
// Metadata register of thread (warp w, lane l) of a warpgroup for k32 step kk (sparsity selector
// 0): bits 0-15 row 16 w + l / 4, bits 16-31 row 16 w + l / 4 + 8, each the four groups of K
// 32 kk + 16 (l % 2) .. + 15, a nibble a group (low: first), positions i0 | i1 << 2, i0 < i1.
// Compressed value columns 2 j, 2 j + 1 of a step are group j's values at i0, i1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "hopper_ptx.cuh"

namespace {
using namespace hopper;

__device__ __forceinline__ float e2m1(uint32_t c) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (c & 8u) ? -mag[c & 7u] : mag[c & 7u];
}

// one group: (value at i0, value at i1) as f16x2, and its nibble
__device__ __forceinline__ uint32_t canon(uint32_t v, uint32_t meta, uint32_t& nib) {
  const float f0 = e2m1(v & 15u), f1 = e2m1((v >> 4) & 15u);
  const uint32_t p0 = meta & 3u, p1 = (meta >> 2) & 3u;
  float lo, hi;
  if (p0 < p1) { lo = f0; hi = f1; nib = p0 | (p1 << 2); }
  else if (p0 > p1) { lo = f1; hi = f0; nib = p1 | (p0 << 2); }
  else if (p0 < 3u) { lo = f0 + f1; hi = 0.0f; nib = p0 | (3u << 2); }
  else { lo = 0.0f; hi = f0 + f1; nib = 2u | (3u << 2); }
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// thread (m64 tile mt, step kk, t < 128): its metadata word; lanes l % 4 < 2 also write the
// compressed values of their rows' four groups (16 bytes a row)
__global__ void prep_a(const uint8_t* __restrict__ a_vals, const uint8_t* __restrict__ a_meta, uint4* __restrict__ a_c,
                       uint32_t* __restrict__ meta_words, int m, int k) {
  const int ks = k / 32;
  const long long item = blockIdx.x * 128ll + threadIdx.x;
  const int t = threadIdx.x, mt = static_cast<int>(item / 128 / ks), kk = static_cast<int>((item / 128) % ks);
  const int w = t >> 5, l = t & 31, hb = l & 1;
  uint32_t word = 0u;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = mt * 64 + 16 * w + (l >> 2) + 8 * half;
    uint32_t vals[4], m16 = 0u;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int grp = kk * 8 + 4 * hb + j;
      uint32_t v = 0u, me = 0u, nib;
      if (row < m) {
        v = a_vals[static_cast<size_t>(row) * (k / 4) + grp];
        me = a_meta[static_cast<size_t>(row) * (k / 4) + grp];
      }
      vals[j] = canon(v, me, nib);
      m16 |= nib << (4 * j);
    }
    word |= m16 << (16 * half);
    if ((l & 3) < 2 && row < m) a_c[(static_cast<size_t>(row) * (k / 2) + kk * 16 + 8 * hb) / 8] = make_uint4(vals[0], vals[1], vals[2], vals[3]);
  }
  meta_words[item] = word;
}

__global__ void prep_b(const uint32_t* __restrict__ b8, uint2* __restrict__ b16, long long words) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < words; i += gridDim.x * 256ll) {
    const uint32_t v = __ldg(b8 + i);
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v >> 16), __NV_E4M3);
    b16[i] = make_uint2(static_cast<uint32_t>(lo.x) | (static_cast<uint32_t>(lo.y) << 16),
                        static_cast<uint32_t>(hi.x) | (static_cast<uint32_t>(hi.y) << 16));
  }
}

__device__ __forceinline__ void wgmma_sp(float (&d)[64], uint64_t da, uint64_t db, uint32_t meta, uint32_t scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %67, 0;\n"
      "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, %66, 0, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(meta), "r"(scale_d));
}

constexpr int STAGES = 4, A_BYTES = 128 * 128, B_ATOM = 128 * 128, STAGE_BYTES = A_BYTES + 2 * B_ATOM;

__global__ void __launch_bounds__(256, 1)
    sp_gemm(const uint8_t* __restrict__ a_c, const uint32_t* __restrict__ meta_words, const uint8_t* __restrict__ b16,
            __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t base = smem_addr(smem);
  const int tid = threadIdx.x, wg = tid >> 7, lt = tid & 127;
  const int n0 = blockIdx.x * 128, m0 = blockIdx.y * 128, KT = k / 128, ks = k / 32;
  auto load = [&](int st) {
    const uint32_t sb = base + (st % STAGES) * STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // A: 128 rows x 8 chunks of 16 bytes (64 compressed values)
      const int q = tid + 256 * i, row = q >> 3, ch = q & 7;
      cp_async16(sb + row * 128 + ((ch ^ (row & 7)) << 4), a_c + (static_cast<size_t>(m0 + row) * (k / 2) + st * 64) * 2 + ch * 16);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // B: 128 rows x 16 chunks (128 K), two 64-K atoms
      const int q = tid + 256 * i, row = q >> 4, cc = q & 15, atom = cc >> 3, ch = cc & 7;
      cp_async16(sb + A_BYTES + atom * B_ATOM + row * 128 + ((ch ^ (row & 7)) << 4),
                 b16 + (static_cast<size_t>(n0 + row) * k + st * 128) * 2 + cc * 16);
    }
  };
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const uint32_t* mw = meta_words + (static_cast<size_t>(m0 / 64 + wg) * ks) * 128 + lt;
  uint32_t meta_nxt[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) meta_nxt[j] = __ldg(mw + j * 128);
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < KT) load(st);
    cp_async_commit();
  }
#pragma unroll 1
  for (int it = 0; it < KT; ++it) {
    cp_async_wait<STAGES - 2>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (it + STAGES - 1 < KT) load(it + STAGES - 1);
    cp_async_commit();
    uint32_t meta[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) meta[j] = meta_nxt[j];
    const uint32_t sb = base + (it % STAGES) * STAGE_BYTES;
    const uint64_t da = b_desc(sb + wg * 64 * 128), db = b_desc(sb + A_BYTES);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 4; ++j)
      wgmma_sp(acc, da + ((32 * j) >> 4), db + (((j >> 1) * B_ATOM + (j & 1) * 64) >> 4), meta[j], (it | j) != 0);
    wgmma_commit();
    if (it + 1 < KT) {
#pragma unroll
      for (int j = 0; j < 4; ++j) meta_nxt[j] = __ldg(mw + ((it + 1) * 4 + j) * 128);
    }
    wgmma_wait<0>();
    keep_f(acc);
  }
  const int w = lt >> 5, l = lt & 31, g = l >> 2, q = l & 3;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + 64 * wg + 16 * w + g + 8 * h, col = n0 + 8 * j + 2 * q;
      if (row < m)
        *reinterpret_cast<__nv_bfloat162*>(c + static_cast<size_t>(row) * n + col) =
            __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
  }
}
}  // namespace

// a_c: fp16 [m, k/2]; meta_words: uint32 [m/64][k/32][128]; m % 128 == 0, n % 128 == 0, k % 128 == 0
extern "C" int proto_prep_a(const void* a_vals, const void* a_meta, void* a_c, void* meta_words, int m, int k, void* s) {
  prep_a<<<(m / 64) * (k / 32), 128, 0, static_cast<cudaStream_t>(s)>>>(
      static_cast<const uint8_t*>(a_vals), static_cast<const uint8_t*>(a_meta), static_cast<uint4*>(a_c),
      static_cast<uint32_t*>(meta_words), m, k);
  return static_cast<int>(cudaGetLastError());
}
extern "C" int proto_prep_b(const void* b8, void* b16, int n, int k, void* s) {
  const long long words = static_cast<long long>(n) * k / 4;
  prep_b<<<132 * 8, 256, 0, static_cast<cudaStream_t>(s)>>>(static_cast<const uint32_t*>(b8), static_cast<uint2*>(b16), words);
  return static_cast<int>(cudaGetLastError());
}
extern "C" int proto_sp_gemm(const void* a_c, const void* meta_words, const void* b16, void* c, int m, int n, int k, void* s) {
  constexpr int SMEM = STAGES * STAGE_BYTES + 1024;
  static bool set = false;
  if (!set) {
    cudaFuncSetAttribute(sp_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    set = true;
  }
  sp_gemm<<<dim3(n / 128, m / 128), 256, SMEM, static_cast<cudaStream_t>(s)>>>(
      static_cast<const uint8_t*>(a_c), static_cast<const uint32_t*>(meta_words), static_cast<const uint8_t*>(b16),
      static_cast<__nv_bfloat16*>(c), m, n, k);
  return static_cast<int>(cudaGetLastError());
}
