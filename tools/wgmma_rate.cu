// Tensor-core rate of the consumer structures a 128 x 128 x 128 stage of the CUDA grouped kernel
// can take: two consumer warpgroups of 64 token rows, each 8 x wgmma m64n128k16 (f16, fp32) a
// stage on the same 128 x 128 B operand in shared memory, one CTA an SM, no global memory at all:
//   RS / SS       A from registers (as cuda_fp4_wgmma) / from shared memory
//   wait+promote  wait_group 0 after each stage, then acc += blk * scale (as cuda_fp4_wgmma)
//   chained       the stages' MMAs accumulate into one sum, no wait (the tensor pipe's rate)
//   ping-pong     two block sums, the stage before promoted under this stage's MMAs (wait_group 1;
//                 ptxas serialises these MMAs: C7514, accumulators read inside the pipeline)
// and the same stage's flops as a 256 x 64 x 128 tile: four consumer warpgroups of 64 token rows,
// each 8 x wgmma m64n64k16 on one 64 x 128 B operand (A from registers or shared memory, wait +
// promote each stage; 640 threads, consumers at 112 registers).
// Prints us, cycles a stage (at the GPU's maximum clock) and TFLOP/s, for 16 and 256 stages a CTA.
// Build and run on a Hopper GPU host, from the repository root:
//   D=solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/cuda_fp4_wgmma
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -I$D -o /tmp/wgmma_rate tools/wgmma_rate.cu && /tmp/wgmma_rate
#include <cstdio>
#include <cstdint>
#include <cuda_fp16.h>
#include "hopper_ptx.cuh"
#include "wgmma_dense.cuh"
using namespace hopper;

// SS form: A and B from shared-memory descriptors
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t da, uint64_t db, uint32_t scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) : "l"(da), "l"(db), "r"(scale_d));
}

constexpr int ATOM = 128 * 128;  // bytes: 128 rows x 64 K fp16
constexpr int SMEM = 2 * ATOM /*B*/ + 2 * 2 * 64 * 128 /*A per wg*/ + 1024 + 1024;

// The CTA's operands: bytes - 2048 of fp16 pairs in [0.5, 2) (exponent 14 or 15, random
// mantissa), then a table of 256 promotion scales; returns the 1024-aligned base and the table.
__device__ __forceinline__ uint8_t* fill_operands(uint8_t* raw, int bytes, float*& sa_tab) {
  uint8_t* sm = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  for (int i = threadIdx.x; i < (bytes - 2048) / 4; i += blockDim.x) {
    uint32_t h = i * 2654435761u;
    h ^= h >> 13;
    reinterpret_cast<uint32_t*>(sm)[i] = (h & 0x03ff03ffu) | 0x38003800u | ((h >> 10) & 0x04000400u);
  }
  sa_tab = reinterpret_cast<float*>(sm + bytes - 2048);
  if (threadIdx.x < 256) sa_tab[threadIdx.x] = 1.0f + threadIdx.x * 1e-3f;
  __syncthreads();
  return sm;
}

// Register fragments of A for the RS form: fp16 pairs near 1, distinct a thread and a step.
__device__ __forceinline__ void init_fragments(uint32_t (&fr)[8][4], int lt) {
  for (int j = 0; j < 8; ++j)
    for (int q = 0; q < 4; ++q) fr[j][q] = 0x3c003c00u + ((lt * 7 + j * 3 + q) & 0x3ff) * 0x10001u;
}

// acc += blk * scale as the grouped kernel promotes: accumulators 4 c + 0, 1 at row g, 4 c + 2, 3
// at row g + 8, each row's scale from the table by stage.
template <int NACC>
__device__ __forceinline__ void promote(float (&acc)[NACC], const float (&blk)[NACC], const float* sa_tab, int s, int lt) {
  const float s0 = sa_tab[(s + lt) & 255], s1 = sa_tab[(s + lt + 1) & 255];
#pragma unroll
  for (int i = 0; i < NACC; i += 4) {
    acc[i] = fmaf(blk[i], s0, acc[i]); acc[i + 1] = fmaf(blk[i + 1], s0, acc[i + 1]);
    acc[i + 2] = fmaf(blk[i + 2], s1, acc[i + 2]); acc[i + 3] = fmaf(blk[i + 3], s1, acc[i + 3]);
  }
}

template <int MODE>
__global__ void __launch_bounds__(384, 1) rate(int stages, float* out) {
  extern __shared__ uint8_t raw[];
  float* sa_tab;
  uint8_t* sm = fill_operands(raw, SMEM, sa_tab);
  const int tid = threadIdx.x, wg = tid >> 7;
  if (wg == 2) { asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n"); return; }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const uint32_t base = smem_addr(sm);
  const uint64_t db = b_desc(base), da = b_desc(base + 2 * ATOM + wg * 2 * 64 * 128);
  const int lt = tid & 127;
  float acc[64], blk[64], blk2[64];
  for (int i = 0; i < 64; ++i) acc[i] = 0.f, blk[i] = 0.f, blk2[i] = 0.f;
  uint32_t fr[8][4];
  init_fragments(fr, lt);
  auto step_rs = [&](float (&b)[64], int j, uint32_t sc) {
    wgmma_dense(b, fr[j], db + (((j >> 2) * ATOM + 32 * (j & 3)) >> 4), sc);
  };
  auto step_ss = [&](float (&b)[64], int j, uint32_t sc) {
    wgmma_ss(b, da + (((j >> 2) * 64 * 128 + 32 * (j & 3)) >> 4), db + (((j >> 2) * ATOM + 32 * (j & 3)) >> 4), sc);
  };
  auto prom = [&](float (&b)[64], int s) { promote(acc, b, sa_tab, s, lt); };
#pragma unroll 1
  for (int s = 0; s < stages; s += 2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (MODE == 0 || MODE == 2) {
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < 8; ++j) { if (MODE == 0) step_rs(blk, j, j > 0); else step_ss(blk, j, j > 0); }
        wgmma_commit(); wgmma_wait<0>(); keep_f(blk);
        prom(blk, s + h);
      } else if (MODE == 1 || MODE == 4) {
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < 8; ++j) { if (MODE == 1) step_rs(blk, j, 1); else step_ss(blk, j, 1); }
        wgmma_commit();
      } else {  // ping-pong: this stage into blk (h 0) or blk2 (h 1); promote the other after wait<1>
        float (&cur)[64] = h ? blk2 : blk;
        float (&prev)[64] = h ? blk : blk2;
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < 8; ++j) { if (MODE == 5) step_rs(cur, j, j > 0); else step_ss(cur, j, j > 0); }
        wgmma_commit(); wgmma_wait<1>(); keep_f(prev);
        if (s + h > 0) prom(prev, s + h);
      }
    }
  }
  wgmma_wait<0>();
  float r = 0.f;
  for (int i = 0; i < 64; ++i) r += acc[i] + blk[i] + blk2[i];
  if (r == 12345.f) out[tid] = r;
}

// SS form, m64n64k16
__device__ __forceinline__ void wgmma_ss(float (&d)[32], uint64_t da, uint64_t db, uint32_t scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) : "l"(da), "l"(db), "r"(scale_d));
}

constexpr int ATOM64 = 64 * 128;  // bytes: 64 rows x 64 K fp16
constexpr int SMEM64 = 2 * ATOM64 /*B*/ + 4 * 2 * ATOM64 /*A per wg*/ + 1024 + 1024;

// 256 x 64 x 128 a stage: warpgroups 0-3 consumers (64 token rows each), 4 idle (the producer's place)
template <bool SS>
__global__ void __launch_bounds__(640, 1) rate_n64(int stages, float* out) {
  extern __shared__ uint8_t raw[];
  float* sa_tab;
  uint8_t* sm = fill_operands(raw, SMEM64, sa_tab);
  const int tid = threadIdx.x, wg = tid >> 7;
  if (wg == 4) { asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n"); return; }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 112;\n");  // 640 x 96 at launch, 128 x (96 - 24) freed
  const uint32_t base = smem_addr(sm);
  const uint64_t db = b_desc(base), da = b_desc(base + 2 * ATOM64 + wg * 2 * ATOM64);
  const int lt = tid & 127;
  float acc[32], blk[32];
  for (int i = 0; i < 32; ++i) acc[i] = 0.f, blk[i] = 0.f;
  uint32_t fr[8][4];
  init_fragments(fr, lt);
#pragma unroll 1
  for (int s = 0; s < stages; ++s) {
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint64_t dbj = db + (((j >> 2) * ATOM64 + 32 * (j & 3)) >> 4);
      if (SS) wgmma_ss(blk, da + (((j >> 2) * ATOM64 + 32 * (j & 3)) >> 4), dbj, j > 0);
      else wgmma_dense(blk, fr[j], dbj, j > 0);
    }
    wgmma_commit(); wgmma_wait<0>(); keep_f(blk);
    promote(acc, blk, sa_tab, s, lt);
  }
  float r = 0.f;
  for (int i = 0; i < 32; ++i) r += acc[i] + blk[i];
  if (r == 12345.f) out[tid] = r;
}

// Times 20 launches of one CTA an SM; prints a table row.
void time_kernel(void (*kernel)(int, float*), int threads, int smem, int stages, float* out, const char* name) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  for (int w = 0; w < 3; ++w) kernel<<<132, threads, smem>>>(stages, out);
  cudaEventRecord(a);
  const int reps = 20;
  for (int w = 0; w < reps; ++w) kernel<<<132, threads, smem>>>(stages, out);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  const double us = ms * 1e3 / reps;
  int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  const double tflops = 132.0 * stages * 2.0 * 128 * 128 * 128 / (us * 1e-6) / 1e12;  // both tiles: 2 x 128^3 flops a stage
  printf("| %s | %d | %.1f | %.0f | %.0f |\n", name, stages, us, us * 1e-6 * clk * 1e3 / stages, tflops);
  if (cudaGetLastError() != cudaSuccess) printf("error\n");
}

template <int MODE>
void run(int stages, float* out, const char* name) { time_kernel(rate<MODE>, 384, SMEM, stages, out, name); }

int main() {
  float* out; cudaMalloc(&out, 4096);
  printf("| structure | stages a CTA | us | cycles a stage (max clock) | TFLOP/s |\n|---|---|---|---|---|\n");
  for (int st : {16, 256}) {
    run<0>(st, out, "RS, wait + promote each stage");
    run<1>(st, out, "RS, chained, no wait");
    run<5>(st, out, "RS, ping-pong sums, wait<1>");
    run<2>(st, out, "SS, wait + promote each stage");
    run<3>(st, out, "SS, ping-pong sums, wait<1>");
    run<4>(st, out, "SS, chained, no wait");
    time_kernel(rate_n64<false>, 640, SMEM64, st, out, "256 x 64 tile, four warpgroups, RS, wait + promote each stage");
    time_kernel(rate_n64<true>, 640, SMEM64, st, out, "256 x 64 tile, four warpgroups, SS, wait + promote each stage");
  }
  return 0;
}
