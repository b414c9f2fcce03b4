// M-masked grouped GEMM, A e4m3 (fp32 scale per row per 128 of K) x B packed E2M1 (fp32 UE8M0
// scale per row per 32 of K), bf16 out, on Hopper's wgmma with f16 operands and fp32
// accumulation: c[g, r] = bf16(sum_kb a_scale[g, r, kb] * sum_{k in kb} A[g, r, k] * B'[g, n, k] * ...)
// for r < clamp(masked_m[g], 0, max_m), 0 for the other rows.
//
// Why f16: every e4m3 value is exact in fp16, and so is an E2M1 value times 2^d for d >= -23
// (fp16's subnormals end at 2^-24); the MMA sums exact products in fp32. Hopper's FP8 MMA keeps
// about 14 bits of its sums and fails FlashInfer-Bench's elementwise check.
//
// The scale fold, per weight row and 128-K block kb (one pipeline stage), in three modes; a
// stage takes the slowest mode any of its rows needs:
//   whole: the four per-32 scales are powers of two in [2^-23, 2^13], as quantized weights'
//       are: B' = code * scale in fp16 (exact: fp16 holds 0.5 * 2^-23 .. 6 * 2^13), and the
//       consumers promote once per block by the token row's scale only: acc += blk * a_scale[r, kb];
//   relative: powers of two in [2^-126, 2^125] spread over at most 23 binades, e_j their
//       exponents: B' = code * 2^(e_j - max e), ref[n] = 2^(max e - 127), and
//       acc += blk * (a_scale[r, kb] * ref[n]) (ref 1 for the stage's whole rows);
//   plain: any other scales: B' = code, the four actual scales beside it; the stage is
//       multiplied as four 32-K sub-blocks, each promoted by its own factor: exact for any scale.
//
// Five forms. The producer form (below) decodes B into shared memory; two tokens-as-N forms
// decode it straight into the MMA's register operand, for groups of few token rows: on wgmma
// (grouped_swapped_kernel, up to 32 rows) and on mma.sync (grouped_sync_kernel, up to 16 rows,
// where a CTA of 32 weight rows puts twice as many CTAs on the weights' loads); for groups of
// many rows the register-weights form (grouped_regw.cuh) converts the tokens to fp16 in a first
// pass and decodes the weights into the MMA's register operand by the threads that multiply
// them, and the prepared form (grouped_prepared.cuh) converts both operands to fp16 in a first
// pass and multiplies them from shared memory with one accumulator set.
// Persistent: one CTA an SM walks the tiles with rows (group, 128 token rows, BN weight rows; BN
// 128, or 64 where 128-wide tiles would leave SMs idle); the rows past them are written by bulk
// copies of zeros that the TMA engine runs beside the MMAs (zero_rows_async), not by a CTA launch
// with 200 KB of shared memory a zero tile.
// Data flow per tile (BM = 128 token rows, BN weight rows, one 128-K block a stage):
//   producer warpgroup (warps 8-11; warp s handles sub-block s of every row, lane = row % 32):
//       packed FP4 [BN, 64 B] and the rows' scales by cp.async into a raw ring RAW_STAGES deep
//       -> fold -> fp16 (prmt decode, times the fold's factor) -> shared memory, 128-byte-swizzled
//       K-major rows in the K order below, plus each row's per-sub-block promotion factor and
//       each warp's fold mode bits; mbarrier full/empty handoff, STAGES deep;
//   two consumer warpgroups (64 token rows each): A's e4m3 read from global one stage ahead
//       straight into the MMA's register fragments (cvt to f16), 8 wgmma m64nBNk16 a stage.
// K order within a stage: the MMA's k16 step j = 2 s + h (s = 32-K sub-block) at fragment
// column 2 t + q (q = 0, 1) or 8 + 2 t + q - 2 (q = 2, 3) multiplies actual k = 32 s + 8 t + 4 h + q,
// so consumer thread t (lane % 4) reads 8 contiguous bytes of A per sub-block, each packed B byte
// (two codes) is one f16x2 of the MMA's B, and each sub-block is two whole k16 steps.
// tests/test_grouped_wgmma_model.py checks this mapping and the fold against the definition.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "hopper_ptx.cuh"
#include "wgmma_dense.cuh"

namespace {

using namespace hopper;

constexpr int BM = 128;
constexpr int BK = 128;           // one scale block
constexpr int STAGES = 4;
constexpr int RAW_STAGES = 4;
constexpr int THREADS = 384;
constexpr int ZERO_PIECES = 8;  // pieces of a CTA's share of the rows past masked_m (zero_rows_async)
constexpr int MAX_SPREAD = 23;    // binades a block's scales may span on the relative fold (fp16)
constexpr int WHOLE_E_MIN = 127 - 23, WHOLE_E_MAX = 127 + 13;  // scale exponents the whole fold takes
// A stage's fold mode bits, OR-ed over its rows: the consumers promote per column (relative or
// plain rows), per 32-K sub-block (plain rows).
constexpr uint32_t MODE_PER_COLUMN = 1u, MODE_PER_SUBBLOCK = 2u;
constexpr int SCHED_GROUPS = 64;  // groups whose tile counts a CTA keeps to hand out busy tiles first
constexpr int PRODUCER_BARRIER = 1;  // named barrier of the producer warpgroup's 128 threads

// -DLOWBIT_STAGE_TRACE: clock64 stamps of CTA 0's first TRACE_STAGES pipeline stages, by the
// producer's thread 0 (events 0-3, 8, 9) and consumer warpgroup 0's thread 0 (events 4-7), for
// tools/trace_wgmma_stages.py to lay out which step of a stage waits on which; row
// TRACE_STAGES holds the kernel's start. The tokens-as-N kernel stamps row ls * SPLIT + wg
// (events 0-6, by each warpgroup's thread 0). The plain build compiles the stamps away.
#ifdef LOWBIT_STAGE_TRACE
constexpr int TRACE_STAGES = 64, TRACE_EVENTS = 10;
__device__ long long g_stage_trace[TRACE_STAGES + 1][TRACE_EVENTS];
#define STAGE_TRACE(gs, ev, lead)                                                                   \
  do {                                                                                              \
    if (blockIdx.x == 0 && (lead) && (gs) < TRACE_STAGES) g_stage_trace[gs][ev] = clock64(); \
  } while (0)
#define STAGE_TRACE_START()                                                                         \
  do {                                                                                              \
    if (blockIdx.x == 0 && threadIdx.x == 0) g_stage_trace[TRACE_STAGES][0] = clock64();            \
  } while (0)
#else
#define STAGE_TRACE_START() \
  do {                      \
  } while (0)
#define STAGE_TRACE(gs, ev, lead) \
  do {                            \
  } while (0)
#endif

// Shared memory of a CTA whose tiles are BN weight rows wide (128, or 64 where 128-wide tiles
// leave SMs idle: the producer's decode per stage halves with BN).
template <int BN>
struct Smem {
  static constexpr int STAGE_BYTES = BN * BK * 2;   // fp16 B: two 64-K swizzle atoms of BN x 128 bytes
  static constexpr int ATOM_BYTES = BN * 128;
  // packed FP4 of a stage, 16 bytes a (row r, sub-block q) at ((r / 32) * 4 + q) * 512 + (r % 32) * 16:
  // a warp's copies (8 rows x 4 sub-blocks) and its decode reads (32 rows, one sub-block) both
  // cover whole 128-byte bank rows
  static constexpr int RAW_CODE_BYTES = BN * BK / 2;
  // + the rows' four scales, [row] 16 bytes (copied and read by the thread that folds the row)
  static constexpr int RAW_BYTES = RAW_CODE_BYTES + BN * 16;
  static constexpr int FACTOR_BYTES = 4 * BN * 4;   // fp32 factor [sub-block][row]
  static constexpr int OFF_RAW = STAGES * STAGE_BYTES;
  static constexpr int OFF_FACTOR = OFF_RAW + RAW_STAGES * RAW_BYTES;
  static constexpr int OFF_FLAG = OFF_FACTOR + STAGES * FACTOR_BYTES;  // uint32 [stage][producer warp]
  // f16x2 factor 2^d [stage parity][sub-block][row], from the thread that folds the row to the
  // four that decode its sub-blocks
  static constexpr int OFF_XCHG = OFF_FLAG + STAGES * 4 * 4;
  static constexpr int OFF_BAR = OFF_XCHG + 2 * 4 * BN * 4;
  // int: rows [groups], the busy tiles' prefix [groups + 1], the CTA's tile count [1] (the CTA's
  // walk), padded to 16 bytes
  static constexpr int OFF_SCHED = OFF_BAR + 2 * STAGES * 8;
  // zeros for the rows past masked_m (zero_rows_async): 8 KB keeps the CTA within the 196 KB
  // shared-memory carve-out (L1 keeps 60 KB for A's loads; at 228 KB small buckets run 5-10 % slower)
  static constexpr int OFF_SHARE = OFF_SCHED + (2 * SCHED_GROUPS + 4) * 4;  // long long [2]: zero_share
  static constexpr int OFF_ZERO = (OFF_SHARE + 16 + 127) / 128 * 128;
  static constexpr int ZERO_BYTES = 8 * 1024;
  static constexpr int BYTES = OFF_ZERO + ZERO_BYTES + 1024;
  static_assert(BYTES <= 196 * 1024, "the 196 KB carve-out");
};

// E2M1 magnitude code (0..7) -> high byte of its fp16 value (the low byte is always 0).
constexpr uint32_t E2M1_F16_HI_0_3 = 0x3e3c3800u;  // 0, 0.5, 1, 1.5
constexpr uint32_t E2M1_F16_HI_4_7 = 0x46444240u;  // 2, 3, 4, 6

// Four packed bytes (eight E2M1 codes, low nibble first) -> four f16x2, out[b] = {byte b's low
// code, its high code}. Magnitudes: one permute looks up four codes' fp16 high bytes, a second
// spreads two of them into the high byte of each half; signs: bit 7 of byte b of w << 4 is the
// sign of code 2b, bit 7 of byte b of w that of code 2b + 1; one permute puts them under bits 15
// and 31, a mask keeps those.
__device__ __forceinline__ void e2m1x8_to_f16x2x4(uint32_t w, uint32_t (&out)[4]) {
  const uint32_t mag_lo = prmt(E2M1_F16_HI_0_3, E2M1_F16_HI_4_7, w & 0x7777u);          // codes 0..3
  const uint32_t mag_hi = prmt(E2M1_F16_HI_0_3, E2M1_F16_HI_4_7, (w >> 16) & 0x7777u);  // codes 4..7
  const uint32_t w4 = w << 4;  // byte i of w4: bit 7 = sign of code 2i; byte i of w: sign of code 2i + 1
  // out[b] = [0, hi(code 2b), 0, hi(code 2b + 1)]: selector nibbles 4 (a zero byte of 0u) and the index
  out[0] = prmt(mag_lo, 0u, 0x1404u) | (prmt(w4, w, 0x4000u) & 0x80008000u);
  out[1] = prmt(mag_lo, 0u, 0x3424u) | (prmt(w4, w, 0x5010u) & 0x80008000u);
  out[2] = prmt(mag_hi, 0u, 0x1404u) | (prmt(w4, w, 0x6020u) & 0x80008000u);
  out[3] = prmt(mag_hi, 0u, 0x3424u) | (prmt(w4, w, 0x7030u) & 0x80008000u);
}

__device__ __forceinline__ uint32_t f16x2_mul(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// Two e4m3 bytes (low first) -> f16x2 (exact).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// One weight row's fold for a block, from its four scales' fp32 bits: its mode bits, per
// sub-block j the f16x2 factor the decode multiplies by (the scale, 2^(e_j - max e), or 1.0)
// and the fp32 factor the consumers promote by (1.0, ref 2^(max e - 127), or the scale).
struct Fold {
  uint32_t mode;
  uint32_t factor2[4];
  uint32_t promote_bits[4];
};

// fp16 bits of 2^d for -24 < d < 16: normal from 2^-14 (exponent field d + 15), subnormal below (bit d + 24)
__device__ __forceinline__ uint32_t f16_pow2(int d) {
  return d >= -14 ? static_cast<uint32_t>(d + 15) << 10 : 1u << (d + 24 < 0 ? 0 : d + 24);
}

// One per-32 scale (fp32 bits) on the whole fold, as fold_row's whole mode takes a row's four:
// ok where it is a positive power of two in [2^-23, 2^13]; the fp16 bits of the scale, or of 1.0
// where it is not (the prepared and register-weights forms' decode then uses the bare codes, and
// the gate leaves the call to the exact fallback).
__device__ __forceinline__ uint32_t whole_factor(uint32_t bits, bool& ok) {
  const int e = static_cast<int>((bits >> 23) & 0xffu);
  ok = (bits & 0x807fffffu) == 0u && e >= WHOLE_E_MIN && e <= WHOLE_E_MAX;
  return f16_pow2(ok ? e - 127 : 0);
}

__device__ __forceinline__ Fold fold_row(const uint4& sc) {
  const uint32_t bits[4] = {sc.x, sc.y, sc.z, sc.w};
  bool pow2 = true;
  int e_max = 0, e_min = 255;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int e = static_cast<int>((bits[j] >> 23) & 0xffu);
    pow2 = pow2 && (bits[j] & 0x807fffffu) == 0u && e >= 1 && e <= 252;  // positive, power of two, normal
    e_max = max(e_max, e);
    e_min = min(e_min, e);
  }
  const bool whole = pow2 && e_min >= WHOLE_E_MIN && e_max <= WHOLE_E_MAX;
  const bool relative = pow2 && e_max - e_min <= MAX_SPREAD;
  Fold f;
  f.mode = whole ? 0u : relative ? MODE_PER_COLUMN : MODE_PER_COLUMN | MODE_PER_SUBBLOCK;
  const int e_ref = whole ? 127 : e_max;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t h = f16_pow2(static_cast<int>((bits[j] >> 23) & 0xffu) - e_ref);  // -23 .. 13 when folded
    f.factor2[j] = whole || relative ? (h | (h << 16)) : 0x3c003c00u;
    f.promote_bits[j] = whole ? 0x3f800000u : relative ? static_cast<uint32_t>(e_max) << 23 : bits[j];
  }
  return f;
}

// acc += blk * a_scale, a stage whose rows all folded whole (B' carries the weight scales):
// acc[4 c + 0..1] at row g (a_scale sa0), acc[4 c + 2..3] at row g + 8 (sa1).
template <int NACC>
__device__ __forceinline__ void promote_rows(float (&acc)[NACC], const float (&blk)[NACC], float sa0, float sa1) {
#pragma unroll
  for (int i = 0; i < NACC; i += 4) {
    acc[i + 0] = fmaf(blk[i + 0], sa0, acc[i + 0]);
    acc[i + 1] = fmaf(blk[i + 1], sa0, acc[i + 1]);
    acc[i + 2] = fmaf(blk[i + 2], sa1, acc[i + 2]);
    acc[i + 3] = fmaf(blk[i + 3], sa1, acc[i + 3]);
  }
}

// acc += blk * (a_scale * factor[col]), as the Triton solutions promote: acc[4 c + 0..1] at row g
// (a_scale sa0), cols 8 c + 2 t, + 1; acc[4 c + 2..3] at row g + 8 (sa1). (a_scale * factor can
// overflow only where a_scale * b_scale > 2^128, far from quantized data; multiplying blk first
// avoids that but costs 50-100 bytes of spills in the consumers.)
template <int NACC>  // BN / 2 accumulators a thread
__device__ __forceinline__ void promote(float (&acc)[NACC], const float (&blk)[NACC], uint32_t factor,
                                        float sa0, float sa1, int t) {
#pragma unroll
  for (int cb = 0; cb < NACC / 4; ++cb) {
    const float2 f = ld_shared_f2(factor + (8 * cb + 2 * t) * 4);
    acc[4 * cb + 0] = fmaf(blk[4 * cb + 0], sa0 * f.x, acc[4 * cb + 0]);
    acc[4 * cb + 1] = fmaf(blk[4 * cb + 1], sa0 * f.y, acc[4 * cb + 1]);
    acc[4 * cb + 2] = fmaf(blk[4 * cb + 2], sa1 * f.x, acc[4 * cb + 2]);
    acc[4 * cb + 3] = fmaf(blk[4 * cb + 3], sa1 * f.y, acc[4 * cb + 3]);
  }
}

__device__ __forceinline__ int clamp_rows(const void* masked_m, int masked_m_is_64, int grp, int max_m) {
  const long long v = masked_m_is_64 ? static_cast<const long long*>(masked_m)[grp]
                                     : static_cast<long long>(static_cast<const int*>(masked_m)[grp]);
  return static_cast<int>(v < 0 ? 0 : (v > max_m ? max_m : v));
}

// Rows [rows, max_m) of one group's output cg (n columns) set to zero, 16 bytes a thread a step,
// shared as whole rows by `parts` parts of `threads` threads each (this thread: tid of part
// `part`), so that a warp writes 512 contiguous bytes.
__device__ __forceinline__ void zero_rows_from(__nv_bfloat16* cg, int rows, int max_m, int n, int part, int parts,
                                               int threads, int tid) {
  const int chunks = n / 8;
  const long long zeros = static_cast<long long>(max_m - rows) * chunks;
  for (long long i = tid + static_cast<long long>(part) * threads; i < zeros;
       i += static_cast<long long>(parts) * threads) {
    const int r = rows + static_cast<int>(i / chunks), col = 8 * static_cast<int>(i % chunks);
    *reinterpret_cast<uint4*>(cg + static_cast<size_t>(r) * n + col) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// The rows past masked_m, [rows_g, max_m) of each group g, set to zero by bulk copies out of
// shared memory holding zeros (`zeros`, `zero_bytes` of it): the TMA engine writes them beside
// the CTA's MMAs, where the threads' own stores would take their issue slots and, issued before
// or after the MMAs, add their DRAM time to the call's (22 us for a 4096-row bucket's 64 MiB).
// A group's rows past masked_m are contiguous bytes. The call's are split evenly, by rows, over
// the CTAs that write them (zero_share, once a call); the producer form issues a CTA's share as
// ZERO_PIECES pieces (zero_piece_of) between its stages, so that its own loads are not queued
// behind it, and the tokens-as-N form, whose compute is short, issues it at once. rows_of(g):
// group g's rows, from shared memory where the form keeps them (a global load here would stall
// the issuing warp). zero_rows_async is called by one thread, after the buffer is cleared
// (clear_zeros) and the CTA has synchronised; that thread waits for its copies (bulk_wait)
// before it exits.
__device__ __forceinline__ void clear_zeros(uint32_t zeros, int zero_bytes, int tid, int threads) {
  const uint32_t z[4] = {0u, 0u, 0u, 0u};
  for (int i = tid; i < zero_bytes / 16; i += threads) st_shared16(zeros + 16 * i, z);
  fence_proxy_async();  // the generic stores, before the bulk copies read them
}

// This CTA's share [x, y) of the call's rows past masked_m (indices among all of them, group by
// group), split evenly by rows over `workers` CTAs: computed once a call (it divides).
template <class RowsOf>
__device__ __forceinline__ longlong2 zero_share(RowsOf rows_of, int groups, int max_m, int worker, int workers) {
  long long total = 0;
  for (int gi = 0; gi < groups; ++gi) total += max_m - rows_of(gi);
  return make_longlong2(total * worker / workers, total * (worker + 1) / workers);
}
// Piece p of ZERO_PIECES of a share: bounds by shifts (ZERO_PIECES a power of two)
static_assert((ZERO_PIECES & (ZERO_PIECES - 1)) == 0, "ZERO_PIECES a power of two");
__device__ __forceinline__ longlong2 zero_piece_of(longlong2 share, int p) {
  constexpr int SHIFT = __builtin_ctz(ZERO_PIECES);
  const long long len = share.y - share.x;
  return make_longlong2(share.x + ((len * p) >> SHIFT), share.x + ((len * (p + 1)) >> SHIFT));
}
// Rows [r.x, r.y) of those past masked_m set to zero: bulk copies of at most zero_bytes each.
template <class RowsOf>
__device__ __forceinline__ void zero_rows_async(__nv_bfloat16* c, RowsOf rows_of, int groups, int max_m, int n,
                                                longlong2 r, uint32_t zeros, int zero_bytes) {
  if (r.x >= r.y) return;
  const long long row_bytes = 2ll * n;
  long long first = 0;  // the index, among all rows past masked_m, of group gi's first
  for (int gi = 0; gi < groups && first < r.y; ++gi) {
    const int rows = rows_of(gi);
    const long long lo = max(r.x, first), hi = min(r.y, first + (max_m - rows));
    if (lo < hi) {
      uint8_t* dst = reinterpret_cast<uint8_t*>(c) + (static_cast<long long>(gi) * max_m + rows + (lo - first)) * row_bytes;
      for (long long left = (hi - lo) * row_bytes; left > 0; left -= zero_bytes, dst += zero_bytes)
        bulk_s2g(dst, zeros, static_cast<uint32_t>(left < zero_bytes ? left : zero_bytes));
    }
    first += max_m - rows;
  }
  bulk_commit();
}

#include "grouped_prepared.cuh"
#include "grouped_regw.cuh"

// The producer form. gate: null, or (as the exact fallback of the prepared and register-weights
// forms) their gate_words gate words, read once their GEMM has ended: the kernel then returns at
// once unless one is set (that GEMM's c, where it wrote any, is then rewritten).
template <int BN>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_wgmma_kernel(const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                         const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
                         const void* __restrict__ masked_m, int masked_m_is_64, __nv_bfloat16* __restrict__ c,
                         int groups, int max_m, int n, int k, const uint32_t* gate, int gate_words) {
  using S = Smem<BN>;
  constexpr int STAGE_BYTES = S::STAGE_BYTES, ATOM_BYTES = S::ATOM_BYTES, RAW_BYTES = S::RAW_BYTES;
  constexpr int ROWS = BN / 32;  // weight rows a producer thread decodes a stage: lane + 32 i
  // the split of the registers (setmaxnreg): at BN 128 the consumers need 224 (at 216 they
  // spill); at BN 64 they fit 216, and the kernel runs 3-5 % faster with the producer at 72 than 56
  constexpr int PRODUCER_REGS = BN == 64 ? 72 : 56, CONSUMER_REGS = BN == 64 ? 216 : 224;
  static_assert(128 * (168 - PRODUCER_REGS) == 256 * (CONSUMER_REGS - 168), "the CTA's register pool");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint32_t* flags = reinterpret_cast<uint32_t*>(smem + S::OFF_FLAG);    // mode bits [stage][producer warp]
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + S::OFF_BAR);
  uint64_t* empty = full + STAGES;

  const int tid = threadIdx.x;
  if (gate) {  // the fallback, a programmatic dependent of prepared_gemm or regw_gemm
    // that GEMM's end (it computed c, or returned at once), whose CTAs may write gate words
    wait_for_prerequisites();
    if (!prepared::gate_set(gate, gate_words, tid, THREADS)) return;
  }
  const int wg = tid >> 7;
  const int tiles_n = n / BN;
  const int tiles_mn = ((max_m + BM - 1) / BM) * tiles_n;
  const int total = groups * tiles_mn;
  const int KT = k / BK;
  const int KB = k / 128;
  // A persistent CTA walks tiles blockIdx.x, + gridDim.x, ... of the list of tiles with rows
  // (group-major, then 128 token rows, weight rows fastest): the busy tiles spread evenly over
  // the CTAs, however the rows sit in the groups; the rows past them are zero_rows_async's.
  // Thread 0 reads masked_m once and keeps each group's rows and the list's prefix counts in
  // shared memory. With more than SCHED_GROUPS groups the list is every tile in the plain order,
  // and a tile wholly past masked_m costs the consumers its stores (the producer moves on).
  // Producer and consumers walk the same tiles and count pipeline stages across them (stage
  // counter gs: slot gs % STAGES, phase (gs / STAGES) & 1).
  int* s_rows = reinterpret_cast<int*>(smem + S::OFF_SCHED);
  int* s_busy = s_rows + SCHED_GROUPS;      // [groups + 1]: tiles with rows before group i
  const bool listed = groups <= SCHED_GROUPS;
  auto tile_of = [&](int tile, int& grp, int& m0, int& n0) {
    if (!listed) {
      grp = tile / tiles_mn;
      const int rem = tile - grp * tiles_mn;
      m0 = (rem / tiles_n) * BM;
      n0 = (rem % tiles_n) * BN;
      return;
    }
    grp = 0;
    while (s_busy[grp + 1] <= tile) ++grp;  // tile < s_busy[groups] ends the scan
    const int j = tile - s_busy[grp];
    m0 = (j / tiles_n) * BM;
    n0 = (j % tiles_n) * BN;
  };

  // A CTA's walk: list index blockIdx.x + w * gridDim.x for w < s_walk[0], the count of its busy
  // tiles, which thread 0 writes to shared memory so that the producer's few registers do not
  // hold it. walk(w): the CTA's tile w, -1 past its last.
  int* s_walk = s_busy + SCHED_GROUPS + 1;
  auto walk = [&](int w) { return w < s_walk[0] ? static_cast<int>(blockIdx.x + w * gridDim.x) : -1; };

  STAGE_TRACE_START();
  clear_zeros(smem_addr(smem) + S::OFF_ZERO, S::ZERO_BYTES, tid, THREADS);
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 128);
      mbar_init(&empty[s], 256);
    }
    if (listed) {
      int busy = 0;
      for (int gi = 0; gi < groups; ++gi) {
        const int rows = clamp_rows(masked_m, masked_m_is_64, gi, max_m);
        s_rows[gi] = rows;
        s_busy[gi] = busy;
        busy += (rows + BM - 1) / BM * tiles_n;
      }
      s_busy[groups] = busy;
      *reinterpret_cast<longlong2*>(smem + S::OFF_SHARE) =
          zero_share([&](int gi) { return s_rows[gi]; }, groups, max_m, blockIdx.x, gridDim.x);
    }
    const int G = gridDim.x, bx = blockIdx.x;
    const int busy = listed ? s_busy[groups] : total;
    s_walk[0] = bx < busy ? (busy - bx + G - 1) / G : 0;
  }
  __syncthreads();
  // the rows past masked_m (listed: the walk leaves them out): thread 0, a consumer, issues its
  // CTA's share a piece at a time over its first tile's stages, the rest after its last tile
  const bool zeroing = tid == 0 && listed;
  int zero_piece = 0;
  auto zero_next = [&]() {
    const longlong2 share = *reinterpret_cast<const longlong2*>(smem + S::OFF_SHARE);
    zero_rows_async(c, [&](int gi) { return s_rows[gi]; }, groups, max_m, n, zero_piece_of(share, zero_piece++),
                    smem_addr(smem) + S::OFF_ZERO, S::ZERO_BYTES);
  };

  if (wg == 2) {
    // ---- producer: warp s decodes sub-block s (K 32 s .. 32 s + 31 of each block) of rows lane + 32 i ----
    // Registers move from the producer to the consumers (the CTA's own pool: 384 x 168 at launch;
    // 128 x (168 - PRODUCER_REGS) freed here = 256 x (CONSUMER_REGS - 168) taken below).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
    const int p = tid - 256, s = p >> 5, lane = p & 31;
    const size_t src_row32 = static_cast<size_t>(32) * (k / 2);
    const uint32_t base = smem_addr(smem);
    // chunk p + 128 i: row p / 4 + 32 i, sub-block p % 4
    const uint32_t raw_copy = base + S::OFF_RAW + (p & 3) * 512 + (p >> 2) * 16;
    const uint32_t raw = base + S::OFF_RAW + s * 512 + lane * 16;  // decode reads: + slot * RAW_BYTES + i * 2048
    // thread (s, lane) also folds row lane + 32 s (where the tile has it) for all four warps
    const int fold_r = lane + 32 * s;
    const bool folds = fold_r < BN;
    const uint32_t raw_sc = base + S::OFF_RAW + S::RAW_CODE_BYTES + fold_r * 16;  // + slot * RAW_BYTES
    // this thread's fp16 stores: row lane + 32 i, swizzle by lane % 8 (= row % 8);
    // store (h, qp) of sub-block s: logical K 16 (2 s + h) + 8 qp: atom s / 2, 16-byte chunk
    // 4 (s % 2) + 2 h + qp of the 128-byte row
    const uint32_t r7 = lane & 7;
    const uint32_t row_off = (s >> 1) * ATOM_BYTES + lane * 128;
    uint32_t gs = 0;  // pipeline stages produced so far, over all tiles
#pragma unroll 1
    for (int w = 0;; ++w) {
      const int tile = walk(w);
      if (tile < 0) break;
      int grp, m0, n0;
      tile_of(tile, grp, m0, n0);
      if (m0 >= clamp_rows(masked_m, masked_m_is_64, grp, max_m)) continue;
      // copies: thread p moves chunk c = p + 128 i (row c / 4, sub-block c % 4): four threads read
      // one row's 64 contiguous bytes
      const uint8_t* src = b_fp4 + (static_cast<size_t>(grp) * n + n0 + (p >> 2)) * (k / 2) + (p & 3) * 16;
      const float* sc_src = b_scale + (static_cast<size_t>(grp) * n + n0 + (folds ? fold_r : 0)) * (k / 32);
      // raw slots count stages over all tiles: the next tile's first copies, issued before any
      // barrier of that tile, then land in slots every warp is done with (those of the stages
      // before the tile's last), whatever KT is
      const uint32_t gs0 = gs;
      auto copy_stage = [&](int st) {  // stage st's codes (chunks p + 128 i), the scales of the row p folds
        const uint32_t slot = ((gs0 + st) % RAW_STAGES) * RAW_BYTES;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) cp_async16(raw_copy + slot + i * 2048, src + i * src_row32 + st * 64);
        if (folds) cp_async16(raw_sc + slot, sc_src + 4 * st);
      };
#pragma unroll
      for (int st = 0; st < RAW_STAGES - 1; ++st) {
        if (st < KT) copy_stage(st);
        cp_async_commit();
      }
#pragma unroll 1
      for (int it = 0; it < KT; ++it) {
        cp_async_wait<RAW_STAGES - 2>();  // this thread's own copies of stage it have landed
        STAGE_TRACE(gs, 0, p == 0);  // raw codes landed
        // the fold's scales (this thread's own copy) are loaded before anything waits on them;
        // each row's codes while the row before is decoded: one warp a scheduler has no other
        // warp to hide a shared-memory load's latency behind
        const uint32_t slot_raw = raw + (gs % RAW_STAGES) * RAW_BYTES;  // gs = gs0 + it
        uint4 sc = make_uint4(0u, 0u, 0u, 0u);
        if (folds) sc = ld_shared16(raw_sc + (gs % RAW_STAGES) * RAW_BYTES);
        const Fold f = fold_row(sc);
        const int slot = gs % STAGES;
        mbar_wait(&empty[slot], ((gs / STAGES) & 1) ^ 1);
        STAGE_TRACE(gs, 1, p == 0);  // folded, slot free
        const uint32_t sb = base + slot * STAGE_BYTES;
        // the folded row's factors: for the consumers (1 for a whole fold, ref for a relative one,
        // the actual scales for a plain row) and, through the exchange, for the producer threads
        // that decode its sub-blocks
        const uint32_t xchg = base + S::OFF_XCHG + (gs & 1) * (4 * BN * 4);
        const uint32_t mode = folds ? f.mode : 0u;
        if (folds) {
          const uint32_t fac = base + S::OFF_FACTOR + (slot * (4 * BN) + fold_r) * 4;  // + sub-block * BN * 4
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            st_shared4(fac + j * BN * 4, f.promote_bits[j]);
            st_shared4(xchg + (j * BN + fold_r) * 4, f.factor2[j]);
          }
        }
        // the four producer warps: stage it's codes have landed (each thread's copies), the
        // exchange of this stage parity is written (the one of the other parity is still read by
        // warps a stage behind, and rewritten only after the next), and every warp is done with
        // stage it - 1's raw slot, which the copies issued next overwrite
        asm volatile("bar.sync %0, %1;\n" ::"n"(PRODUCER_BARRIER), "n"(128) : "memory");
        STAGE_TRACE(gs, 2, p == 0);  // factors written, the four warps met
        if (it + RAW_STAGES - 1 < KT) copy_stage(it + RAW_STAGES - 1);
        cp_async_commit();
        STAGE_TRACE(gs, 8, p == 0);  // next copies issued
        uint4 codes = ld_shared16(slot_raw);
        uint32_t factor2[ROWS];
#pragma unroll
        for (int i = 0; i < ROWS; ++i) factor2[i] = ld_shared4(xchg + (s * BN + lane + 32 * i) * 4);
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
          const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
          if (i + 1 < ROWS) codes = ld_shared16(slot_raw + (i + 1) * 2048);
          uint32_t dec[4][4];  // dec[t][b]: word t's byte b as f16x2, times 2^d
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            e2m1x8_to_f16x2x4(w[t], dec[t]);
#pragma unroll
            for (int b = 0; b < 4; ++b) dec[t][b] = f16x2_mul(dec[t][b], factor2[i]);
          }
          const uint32_t row_base = sb + row_off + i * 32 * 128;
#pragma unroll
          for (int b = 0; b < 4; ++b) {  // b = 2 h + qp: fragment columns 8 qp + 2 t, + 1 of step 2 s + h
            const uint32_t chunk = (4u * (s & 1) + b) ^ r7;
            const uint32_t v[4] = {dec[0][b], dec[1][b], dec[2][b], dec[3][b]};
            st_shared16(row_base + (chunk << 4), v);
          }
        }
        STAGE_TRACE(gs, 9, p == 0);  // fp16 stores issued
        const uint32_t warp_mode = __reduce_or_sync(0xffffffffu, mode);
        if (lane == 0) flags[slot * 4 + s] = warp_mode;
        // generic-proxy stores, read next by the tensor cores (async proxy)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        STAGE_TRACE(gs, 3, p == 0);  // decoded and fenced
        mbar_arrive(&full[slot]);
        ++gs;
      }
    }
    return;
  }

  // ---- consumers: warpgroup wg computes token rows m0 + 64 wg .. + 63 ----
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
  const int lt = tid & 127, warp = lt >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const uint32_t base = smem_addr(smem);
  uint32_t gs = 0;  // pipeline stages consumed so far, over all tiles
#pragma unroll 1
  for (int w = 0;; ++w) {
    const int tile = walk(w);
    if (tile < 0) break;
    int grp, m0, n0;
    tile_of(tile, grp, m0, n0);
    const int rows = clamp_rows(masked_m, masked_m_is_64, grp, max_m);
    __nv_bfloat16* cg = c + static_cast<size_t>(grp) * max_m * n;
    if (m0 >= rows) {  // zeros: 16 bytes a thread a step, rows below max_m
      for (int i = tid; i < BM * BN / 8; i += 256) {
        const int r = m0 + i / (BN / 8), col = n0 + 8 * (i % (BN / 8));
        if (r < max_m) *reinterpret_cast<uint4*>(cg + static_cast<size_t>(r) * n + col) = make_uint4(0u, 0u, 0u, 0u);
      }
      continue;
    }
    const int row0 = m0 + wg * 64 + warp * 16 + g, row1 = row0 + 8;
    const bool ok0 = row0 < rows, ok1 = row1 < rows;
    // rows past masked_m read row 0's A (always there) and are never stored
    const uint8_t* pa0 = a_fp8 + (static_cast<size_t>(grp) * max_m + (ok0 ? row0 : 0)) * k + 8 * t;
    const uint8_t* pa1 = a_fp8 + (static_cast<size_t>(grp) * max_m + (ok1 ? row1 : 0)) * k + 8 * t;
    const float* ps0 = a_scale + (static_cast<size_t>(grp) * max_m + (ok0 ? row0 : 0)) * KB;
    const float* ps1 = a_scale + (static_cast<size_t>(grp) * max_m + (ok1 ? row1 : 0)) * KB;

    float acc[BN / 2], blk[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    keep_f(acc);

    // A's bytes of one stage: sub-block s at 32 s + 8 t, 8 bytes a row (uint2); the pointers
    // step one stage a load
    uint2 a_nxt0[4], a_nxt1[4];
    float sa_nxt0, sa_nxt1;
    auto load_a = [&]() {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        a_nxt0[q] = __ldg(reinterpret_cast<const uint2*>(pa0 + 32 * q));
        a_nxt1[q] = __ldg(reinterpret_cast<const uint2*>(pa1 + 32 * q));
      }
      sa_nxt0 = __ldg(ps0++);
      sa_nxt1 = __ldg(ps1++);
      pa0 += BK;
      pa1 += BK;
    };
    load_a();

    // every row of this warpgroup past masked_m (decode-like buckets): no MMA, it only hands the
    // stages back (the empty barriers count 256 arrivals); its epilogue writes the rows' zeros
    const bool idle = m0 + wg * 64 >= rows;
#pragma unroll 1
    for (int it = 0; it < KT; ++it) {
      if (zeroing && zero_piece < ZERO_PIECES && zero_piece * KT <= it * ZERO_PIECES) zero_next();
      if (idle) {
        mbar_wait(&full[gs % STAGES], (gs / STAGES) & 1);
        mbar_arrive(&empty[gs % STAGES]);
        ++gs;
        continue;
      }
      // fragments of step j = 2 s + h: {row g low pair, row g + 8 low, row g high, row g + 8 high}
      uint32_t frag[8][4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t w0[2] = {a_nxt0[q].x, a_nxt0[q].y}, w1[2] = {a_nxt1[q].x, a_nxt1[q].y};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          frag[2 * q + h][0] = e4m3x2_to_f16x2(w0[h]);
          frag[2 * q + h][1] = e4m3x2_to_f16x2(w1[h]);
          frag[2 * q + h][2] = e4m3x2_to_f16x2(w0[h] >> 16);
          frag[2 * q + h][3] = e4m3x2_to_f16x2(w1[h] >> 16);
        }
      }
      const float sa0 = sa_nxt0, sa1 = sa_nxt1;
      if (it + 1 < KT) load_a();

      const int slot = gs % STAGES;
      STAGE_TRACE(gs, 4, tid == 0);  // A converted, waits for B
      mbar_wait(&full[slot], (gs / STAGES) & 1);
      STAGE_TRACE(gs, 5, tid == 0);  // B there
      const uint32_t sb = base + slot * STAGE_BYTES;
      const uint32_t fac = base + S::OFF_FACTOR + slot * (4 * BN) * 4;  // fp32 [sub-block][row]
      const uint4 warp_modes = ld_shared16(base + S::OFF_FLAG + slot * 16);
      const uint32_t mode = warp_modes.x | warp_modes.y | warp_modes.z | warp_modes.w;
      // descriptor of byte offset o into the stage: + o / 16 (the stage stays below 2^18)
      const uint64_t desc = b_desc(sb);
      if (!(mode & MODE_PER_SUBBLOCK)) {
        // step j reads logical K 16 j .. 16 j + 15: atom j / 4, 32 bytes a step into the 128-byte row
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < 8; ++j) wgmma_dense(blk, frag[j], desc + (((j >> 2) * ATOM_BYTES + 32 * (j & 3)) >> 4), j > 0);
        wgmma_commit();
        wgmma_wait<0>();
        STAGE_TRACE(gs, 6, tid == 0);  // MMA done
        keep_f(blk);
#pragma unroll
        for (int j = 0; j < 8; ++j) keep_u(frag[j]);
        if (mode == 0u) {
          promote_rows(acc, blk, sa0, sa1);
        } else {
          // acc += (blk * a_scale) * ref, ref from sub-block 0's factors (every folded row's are its ref)
          promote(acc, blk, fac, sa0, sa1, t);
        }
      } else {
        // a row of this block did not fold: each 32-K sub-block (two k16 steps) promoted by its own
        // factor (1 or ref for rows that folded, the actual scale for rows that did not)
#pragma unroll
        for (int sub = 0; sub < 4; ++sub) {
          wgmma_fence();
          wgmma_dense(blk, frag[2 * sub], desc + (((sub >> 1) * ATOM_BYTES + 64 * (sub & 1)) >> 4), 0u);
          wgmma_dense(blk, frag[2 * sub + 1], desc + (((sub >> 1) * ATOM_BYTES + 64 * (sub & 1) + 32) >> 4), 1u);
          wgmma_commit();
          wgmma_wait<0>();
          keep_f(blk);
          promote(acc, blk, fac + sub * BN * 4, sa0, sa1, t);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) keep_u(frag[j]);
      }
      STAGE_TRACE(gs, 7, tid == 0);  // promoted
      mbar_arrive(&empty[slot]);
      ++gs;
    }

    // the epilogue's tile, read again rather than kept: the K loop's registers are the consumers' limit
    tile_of(walk(w), grp, m0, n0);
    const int e_rows = clamp_rows(masked_m, masked_m_is_64, grp, max_m);
    const int e_row0 = m0 + wg * 64 + warp * 16 + g, e_row1 = e_row0 + 8;
    __nv_bfloat16* e_cg = c + static_cast<size_t>(grp) * max_m * n;

    // ---- epilogue: rows < rows get bf16(acc) (round to nearest even), rows in [rows, max_m) zeros ----
    const bool in0 = e_row0 < max_m, in1 = e_row1 < max_m, e_ok0 = e_row0 < e_rows, e_ok1 = e_row1 < e_rows;
    __nv_bfloat16* c0 = e_cg + static_cast<size_t>(in0 ? e_row0 : 0) * n + n0 + 2 * t;
    __nv_bfloat16* c1 = e_cg + static_cast<size_t>(in1 ? e_row1 : 0) * n + n0 + 2 * t;
#pragma unroll
    for (int cb = 0; cb < BN / 8; ++cb) {
      if (in0)
        *reinterpret_cast<__nv_bfloat162*>(c0 + 8 * cb) =
            e_ok0 ? __floats2bfloat162_rn(acc[4 * cb], acc[4 * cb + 1]) : __floats2bfloat162_rn(0.0f, 0.0f);
      if (in1)
        *reinterpret_cast<__nv_bfloat162*>(c1 + 8 * cb) =
            e_ok1 ? __floats2bfloat162_rn(acc[4 * cb + 2], acc[4 * cb + 3]) : __floats2bfloat162_rn(0.0f, 0.0f);
    }
  }
  if (zeroing) {
    while (zero_piece < ZERO_PIECES) zero_next();  // a CTA without tiles, or with fewer stages than pieces
    bulk_wait();
  }
}

// ---- the tokens-as-N form, for decode-like buckets (few token rows a group) ----
// c^T = B' A^T: weight rows on the MMA's M side, decoded by the multiplying threads straight
// into wgmma's register operand (no producer, no shared-memory handoff of B'); the group's token
// rows, TN at a time, on the N side, converted e4m3 -> fp16 into a 128-byte-swizzled shared stage
// by the warpgroup that multiplies them. A CTA owns SW_ROWS weight rows of one group; its SPLIT
// warpgroups take every SPLIT-th 128-K stage (each its own double-buffered token stage), and
// their sums join in shared memory. The K order and the fold are the other form's: thread t's
// word of a sub-block is fragment columns 2 t, + 1 and 8 + 2 t, + 1 of its two k16 steps.
constexpr int SW_ROWS = 64;  // weight rows a CTA: one m64 MMA

template <int TN, int SPLIT>
struct SwSmem {
  static constexpr int ATOM_BYTES = TN * 128;        // TN rows x 64 K of fp16
  static constexpr int TOK_BYTES = 2 * ATOM_BYTES;   // a 128-K stage
  static constexpr int OFF_SA = TOK_BYTES;           // fp32 a_scale [TN] of the stage
  static constexpr int OFF_PLAIN = OFF_SA + TN * 4;  // uint32 [4 warps]: a row of the warp did not fold
  static constexpr int BUF_BYTES = TOK_BYTES + 1024;  // keeps every buffer's atoms 1024-aligned
  static constexpr int OFF_JOIN = SPLIT * 2 * BUF_BYTES;  // fp32 [SPLIT - 1][TN / 2][128]
  static constexpr int OFF_ZERO = OFF_JOIN + (SPLIT - 1) * (TN / 2) * 128 * 4;  // zero_rows_async's zeros
  static constexpr int ZERO_BYTES = 32 * 1024;
  static constexpr int BYTES = OFF_ZERO + ZERO_BYTES + 1024;
};

template <int TN, int SPLIT>
__global__ void __launch_bounds__(SPLIT * 128, 1)
    grouped_swapped_kernel(const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                           const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
                           const void* __restrict__ masked_m, int masked_m_is_64, __nv_bfloat16* __restrict__ c,
                           int groups, int max_m, int n, int k) {
  using S = SwSmem<TN, SPLIT>;
  constexpr int NACC = TN / 2;   // accumulators a thread: rows g, g + 8 x TN / 4 token columns
  constexpr int TROWS = TN / 32;  // token rows a thread converts a stage: lt / 4 + 32 i, sub-block lt % 4
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t base = smem_addr(smem);
  float* join = reinterpret_cast<float*>(smem + S::OFF_JOIN);
  const int tid = threadIdx.x, wg = tid >> 7, lt = tid & 127, warp = lt >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int cs = lt & 3, cr = lt >> 2;  // the sub-block and first token row this thread converts
  STAGE_TRACE_START();
  clear_zeros(base + S::OFF_ZERO, S::ZERO_BYTES, tid, SPLIT * 128);
  __syncthreads();
  if (tid == 0)  // the rows past masked_m, all at once (the compute is short); it waits for them at its end
  {
    auto rows_of = [&](int gi) { return clamp_rows(masked_m, masked_m_is_64, gi, max_m); };
    zero_rows_async(c, rows_of, groups, max_m, n, zero_share(rows_of, groups, max_m, blockIdx.x, gridDim.x),
                    base + S::OFF_ZERO, S::ZERO_BYTES);
  }
  const int KT = k / BK, KB = k / 128;
  const int tiles_n = n / SW_ROWS;
  const int total = groups * tiles_n;
  uint32_t ls = 0;  // stages this warpgroup has multiplied, over all tiles: its buffer ls & 1
#pragma unroll 1
  for (int tile = blockIdx.x; tile < total; tile += gridDim.x) {
    const int grp = tile / tiles_n, n0 = (tile % tiles_n) * SW_ROWS;
    const int rows = clamp_rows(masked_m, masked_m_is_64, grp, max_m);
    __nv_bfloat16* cg = c + static_cast<size_t>(grp) * max_m * n;
    // this thread's weight rows n0 + 16 warp + g and + 8: stage st's word of sub-block s at
    // st * 16 + 4 s (+ t), its four scales at st
    const size_t wrow0 = static_cast<size_t>(grp) * n + n0 + 16 * warp + g;
    const uint32_t* pb0 = reinterpret_cast<const uint32_t*>(b_fp4 + wrow0 * (k / 2)) + t;
    const uint32_t* pb1 = pb0 + 8 * (k / 8);  // 8 rows on
    const uint4* psc0 = reinterpret_cast<const uint4*>(b_scale + wrow0 * (k / 32));
    const uint4* psc1 = psc0 + 8 * (k / 128);
#pragma unroll 1
    for (int m0 = 0; m0 < rows; m0 += TN) {
      uint32_t w_nxt[2][4];
      uint4 sc_nxt[2], a_nxt[TROWS][2];
      float sa_nxt[TROWS];
      auto load = [&](int st) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          w_nxt[0][s] = __ldg(pb0 + st * 16 + 4 * s);
          w_nxt[1][s] = __ldg(pb1 + st * 16 + 4 * s);
        }
        sc_nxt[0] = __ldg(psc0 + st);
        sc_nxt[1] = __ldg(psc1 + st);
#pragma unroll
        for (int i = 0; i < TROWS; ++i) {
          const int r = m0 + cr + 32 * i;
          a_nxt[i][0] = a_nxt[i][1] = make_uint4(0u, 0u, 0u, 0u);
          sa_nxt[i] = 0.0f;
          if (r < rows) {  // rows past masked_m multiply zeros and are never stored
            const uint4* pa = reinterpret_cast<const uint4*>(a_fp8 + (static_cast<size_t>(grp) * max_m + r) * k +
                                                             st * BK + 32 * cs);
            a_nxt[i][0] = __ldg(pa);
            a_nxt[i][1] = __ldg(pa + 1);
            sa_nxt[i] = __ldg(a_scale + (static_cast<size_t>(grp) * max_m + r) * KB + st);
          }
        }
      };
      float acc[NACC], blk[NACC];
#pragma unroll
      for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
      keep_f(acc);
      if (wg < KT) load(wg);
#pragma unroll 1
      for (int st = wg; st < KT; st += SPLIT, ++ls) {
        [[maybe_unused]] const uint32_t trace_row = ls * SPLIT + wg;
        STAGE_TRACE(trace_row, 0, lt == 0);  // stage start
        uint32_t w[2][4];
        uint4 a[TROWS][2];
        float sa[TROWS];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          w[0][s] = w_nxt[0][s];
          w[1][s] = w_nxt[1][s];
        }
        const Fold f0 = fold_row(sc_nxt[0]), f1 = fold_row(sc_nxt[1]);
#pragma unroll
        for (int i = 0; i < TROWS; ++i) {
          a[i][0] = a_nxt[i][0];
          a[i][1] = a_nxt[i][1];
          sa[i] = sa_nxt[i];
        }
        if (st + SPLIT < KT) load(st + SPLIT);
        STAGE_TRACE(trace_row, 1, lt == 0);  // folded, next loads issued

        // tokens -> fp16 stage: 16-byte chunk u of (row, sub-block cs) holds, for t' = 0..3, the
        // f16x2 of bytes 8 t' + 2 u, + 1 (logical K 32 cs + 8 u + 2 t' of the row)
        const uint32_t buf = base + ((wg * 2 + (ls & 1)) * S::BUF_BYTES);
#pragma unroll
        for (int i = 0; i < TROWS; ++i) {
          const int r = cr + 32 * i;
          const uint32_t lo[4] = {a[i][0].x, a[i][0].z, a[i][1].x, a[i][1].z};  // bytes 8 t' .. 8 t' + 3
          const uint32_t hi[4] = {a[i][0].y, a[i][0].w, a[i][1].y, a[i][1].w};  // bytes 8 t' + 4 .. + 7
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            uint32_t v[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = e4m3x2_to_f16x2((u < 2 ? lo[q] : hi[q]) >> (16 * (u & 1)));
            const uint32_t chunk = (4u * (cs & 1) + u) ^ (r & 7);
            st_shared16(buf + (cs >> 1) * S::ATOM_BYTES + r * 128 + (chunk << 4), v);
          }
          if (cs == 0) st_shared4(buf + S::OFF_SA + r * 4, __float_as_uint(sa[i]));
        }
        // a row that did not fold makes the warpgroup multiply the stage by sub-blocks
        const bool plain_rows = ((f0.mode | f1.mode) & MODE_PER_SUBBLOCK) != 0u;
        const uint32_t warp_plain = __any_sync(0xffffffffu, plain_rows) ? 1u : 0u;
        if (lane == 0) st_shared4(buf + S::OFF_PLAIN + warp * 4, warp_plain);
        STAGE_TRACE(trace_row, 2, lt == 0);  // tokens stored, vote written
        // generic-proxy stores, read next by the tensor cores (async proxy); the warpgroup's
        // named barrier (the other buffer is still read by the stage before)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
        const uint4 plain4 = ld_shared16(buf + S::OFF_PLAIN);
        const bool plain = (plain4.x | plain4.y | plain4.z | plain4.w) != 0u;
        STAGE_TRACE(trace_row, 3, lt == 0);  // fenced, the warpgroup met

        // weights -> the MMA's register operand: step j = 2 s + h of row r is byte 2 h (columns
        // 2 t, + 1) and byte 2 h + 1 (8 + 2 t, + 1) of word s, times the fold's factor
        uint32_t frag[8][4];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          uint32_t d0[4], d1[4];
          e2m1x8_to_f16x2x4(w[0][s], d0);
          e2m1x8_to_f16x2x4(w[1][s], d1);
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            d0[b] = f16x2_mul(d0[b], f0.factor2[s]);
            d1[b] = f16x2_mul(d1[b], f1.factor2[s]);
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            frag[2 * s + h][0] = d0[2 * h];
            frag[2 * s + h][1] = d1[2 * h];
            frag[2 * s + h][2] = d0[2 * h + 1];
            frag[2 * s + h][3] = d1[2 * h + 1];
          }
        }
        const uint64_t desc = b_desc(buf);
        STAGE_TRACE(trace_row, 4, lt == 0);  // fragments decoded
        // acc += blk * (a_scale[col] * factor[row]): accumulators 4 c + 0, 1 at row g, 4 c + 2, 3 at
        // row g + 8, token columns 8 c + 2 t, + 1
        auto promote_t = [&](float p0, float p1) {
#pragma unroll
          for (int cb = 0; cb < NACC / 4; ++cb) {
            const float2 s2 = ld_shared_f2(buf + S::OFF_SA + (8 * cb + 2 * t) * 4);
            acc[4 * cb + 0] = fmaf(blk[4 * cb + 0], s2.x * p0, acc[4 * cb + 0]);
            acc[4 * cb + 1] = fmaf(blk[4 * cb + 1], s2.y * p0, acc[4 * cb + 1]);
            acc[4 * cb + 2] = fmaf(blk[4 * cb + 2], s2.x * p1, acc[4 * cb + 2]);
            acc[4 * cb + 3] = fmaf(blk[4 * cb + 3], s2.y * p1, acc[4 * cb + 3]);
          }
        };
        if (!plain) {
          wgmma_fence();
#pragma unroll
          for (int j = 0; j < 8; ++j) wgmma_dense(blk, frag[j], desc + (((j >> 2) * S::ATOM_BYTES + 32 * (j & 3)) >> 4), j > 0);
          wgmma_commit();
          wgmma_wait<0>();
          STAGE_TRACE(trace_row, 5, lt == 0);  // MMA done
          keep_f(blk);
          // the promotion factor of a whole or relative fold is the same for all four sub-blocks
          promote_t(__uint_as_float(f0.promote_bits[0]), __uint_as_float(f1.promote_bits[0]));
        } else {
#pragma unroll
          for (int sub = 0; sub < 4; ++sub) {
            wgmma_fence();
            wgmma_dense(blk, frag[2 * sub], desc + (((sub >> 1) * S::ATOM_BYTES + 64 * (sub & 1)) >> 4), 0u);
            wgmma_dense(blk, frag[2 * sub + 1], desc + (((sub >> 1) * S::ATOM_BYTES + 64 * (sub & 1) + 32) >> 4), 1u);
            wgmma_commit();
            wgmma_wait<0>();
            keep_f(blk);
            promote_t(__uint_as_float(f0.promote_bits[sub]), __uint_as_float(f1.promote_bits[sub]));
          }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) keep_u(frag[j]);
        STAGE_TRACE(trace_row, 6, lt == 0);  // promoted
      }

      // join: warpgroups 1 .. SPLIT - 1 hand their sums to warpgroup 0, which adds them in order
      if (wg > 0) {
#pragma unroll
        for (int i = 0; i < NACC; ++i) join[((wg - 1) * NACC + i) * 128 + lt] = acc[i];
      }
      __syncthreads();
      if (wg == 0) {
#pragma unroll
        for (int w2 = 0; w2 < SPLIT - 1; ++w2) {
#pragma unroll
          for (int i = 0; i < NACC; ++i) acc[i] += join[(w2 * NACC + i) * 128 + lt];
        }
        // c[m0 + 8 cb + 2 t + e, n0 + 16 warp + g (+ 8)] = bf16(acc), token rows below masked_m
        __nv_bfloat16* c0 = cg + n0 + 16 * warp + g;
#pragma unroll
        for (int cb = 0; cb < NACC / 4; ++cb) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int m = m0 + 8 * cb + 2 * t + e;
            if (m < rows) {
              c0[static_cast<size_t>(m) * n] = __float2bfloat16_rn(acc[4 * cb + e]);
              c0[static_cast<size_t>(m) * n + 8] = __float2bfloat16_rn(acc[4 * cb + 2 + e]);
            }
          }
        }
      }
      __syncthreads();  // the join buffer is rewritten by the next token rows
    }
  }
  if (tid == 0) bulk_wait();  // zero_rows_async's copies
}

// ---- the tokens-as-N form on mma.sync, for decode-like buckets (few token rows a group) ----
// c^T = B A^T on mma.sync m16n8k16 (f16 in, fp32 accumulate): weight rows on the M side, their
// FP4 codes decoded (prmt, no scale) straight from 4-byte global loads into the MMA's A
// registers; a group's token rows on the N side, e4m3 -> f16 in registers. No fold: each 32-K
// sub-block's two MMAs start from zero and are promoted by the weight row's own scale, each
// 128-K block's sum by the token row's a_scale, so every scale (any float) is taken the same
// way, exactly, at the same speed. CTA (x, grp, y): weight rows 16 MT x .. of group grp and the
// token rounds of 8 NT rows from 8 NT y, gridDim.z apart; its SY_WARPS warps split K by 128-K
// blocks (warp w: blocks w CH + i + j SY_WARPS CH, i < CH, each CH blocks' loads all issued
// before any is multiplied) and their sums join in shared memory, added in warp order.
// K order within a block: step q of sub-block h at fragment columns 2 t, + 1 (and 8 + 2 t, + 1)
// multiplies k = 32 h + 8 t + 4 q + 0, 1 (+ 2, 3), so a thread's codes of a sub-block are one
// 32-bit word of each weight row and its tokens one 8-byte word of each token row.
constexpr int SY_WARPS = 8;

template <int MT, int NT>
struct SyncTile {
  static constexpr int ROWS = 16 * MT;     // weight rows a CTA
  static constexpr int TOK = 8 * NT;       // token rows a round
  static constexpr int STRIDE = ROWS + 4;  // a token's floats in the join buffer (banks spread)
  static constexpr int SMEM = SY_WARPS * TOK * STRIDE * 4;
};

__device__ __forceinline__ float lane4(const float4& v, int h) { return h == 0 ? v.x : h == 1 ? v.y : h == 2 ? v.z : v.w; }

template <int MT, int NT, int CH>
__global__ void __launch_bounds__(SY_WARPS * 32, 2)
    grouped_sync_kernel(const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                        const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
                        const void* __restrict__ masked_m, int masked_m_is_64, __nv_bfloat16* __restrict__ c,
                        int max_m, int n, int k) {
  using S = SyncTile<MT, NT>;
  extern __shared__ float sync_join[];  // [SY_WARPS][TOK][STRIDE]
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
  const int grp = blockIdx.y, n0 = blockIdx.x * S::ROWS, KB = k / 128;
  const int rows = clamp_rows(masked_m, masked_m_is_64, grp, max_m);
  __nv_bfloat16* cg = c + static_cast<size_t>(grp) * max_m * n;
  // the group's CTAs (x, z) share its rows past masked_m
  zero_rows_from(cg, rows, max_m, n, blockIdx.z * gridDim.x + blockIdx.x, gridDim.x * gridDim.z, SY_WARPS * 32, tid);
  // this thread's weight rows n0 + 16 mt + 8 hf + g: word t of sub-block h of block kb at byte
  // kb 64 + 16 h + 4 t, the block's four scales at kb 4
  const uint8_t* wrow[MT][2];
  const float* srow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const size_t r = static_cast<size_t>(grp) * n + n0 + 16 * mt + 8 * hf + g;
      wrow[mt][hf] = b_fp4 + r * (k / 2) + 4 * t;
      srow[mt][hf] = b_scale + r * (k / 32);
    }
#pragma unroll 1
  for (int m0 = blockIdx.z * S::TOK; m0 < rows; m0 += gridDim.z * S::TOK) {
    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
#pragma unroll 1
    for (int kb0 = w * CH; kb0 < KB; kb0 += SY_WARPS * CH) {
      uint32_t bw[CH][MT][2][4];
      float4 bsc[CH][MT][2];
      uint2 tw[CH][NT][4];
      float2 sa[CH][NT];  // a_scale of token columns 8 nt + 2 t, + 1
#pragma unroll
      for (int i = 0; i < CH; ++i) {
        const int kb = kb0 + i;
        const bool in = kb < KB;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            bsc[i][mt][hf] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (in) bsc[i][mt][hf] = __ldg(reinterpret_cast<const float4*>(srow[mt][hf] + kb * 4));
#pragma unroll
            for (int h = 0; h < 4; ++h)
              bw[i][mt][hf][h] = in ? __ldg(reinterpret_cast<const uint32_t*>(wrow[mt][hf] + kb * 64 + 16 * h)) : 0u;
          }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int r = m0 + 8 * nt + g, rc = m0 + 8 * nt + 2 * t;
          const size_t row0 = static_cast<size_t>(grp) * max_m;
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            tw[i][nt][h] = make_uint2(0u, 0u);  // code 0 is +0: token rows past masked_m multiply zeros, never stored
            if (in && r < rows)
              tw[i][nt][h] = __ldg(reinterpret_cast<const uint2*>(a_fp8 + (row0 + r) * k + kb * 128 + 32 * h + 8 * t));
          }
          sa[i][nt].x = in && rc < rows ? __ldg(a_scale + (row0 + rc) * KB + kb) : 0.0f;
          sa[i][nt].y = in && rc + 1 < rows ? __ldg(a_scale + (row0 + rc + 1) * KB + kb) : 0.0f;
        }
      }
#pragma unroll
      for (int i = 0; i < CH; ++i) {
        float blk[MT][NT][4];  // this block's sum, each sub-block's promoted by the weight row's scale
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          uint32_t af[2][MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            uint32_t d0[4], d1[4];
            e2m1x8_to_f16x2x4(bw[i][mt][0][h], d0);  // row g: f16x2 of bytes 0..3 (k 8 t + 2 b, + 1)
            e2m1x8_to_f16x2x4(bw[i][mt][1][h], d1);  // row g + 8
#pragma unroll
            for (int q = 0; q < 2; ++q) {
              af[q][mt][0] = d0[2 * q];
              af[q][mt][1] = d1[2 * q];
              af[q][mt][2] = d0[2 * q + 1];
              af[q][mt][3] = d1[2 * q + 1];
            }
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            if (nt > 0 && m0 + 8 * nt >= rows) break;  // token columns wholly past masked_m: nothing to add
            const uint2 tv = tw[i][nt][h];
            const uint32_t b00 = e4m3x2_to_f16x2(tv.x), b01 = e4m3x2_to_f16x2(tv.x >> 16);
            const uint32_t b10 = e4m3x2_to_f16x2(tv.y), b11 = e4m3x2_to_f16x2(tv.y >> 16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              float sub[4];
              mma_m16n8k16<true>(sub, af[0][mt], b00, b01);
              mma_m16n8k16<false>(sub, af[1][mt], b10, b11);
              const float s0 = lane4(bsc[i][mt][0], h), s1 = lane4(bsc[i][mt][1], h);
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const float s = e < 2 ? s0 : s1;  // accumulators 0, 1 at row g, 2, 3 at row g + 8
                blk[mt][nt][e] = h == 0 ? sub[e] * s : fmaf(sub[e], s, blk[mt][nt][e]);
              }
            }
          }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[mt][nt][e] = fmaf(blk[mt][nt][e], (e & 1) ? sa[i][nt].y : sa[i][nt].x, acc[mt][nt][e]);
      }
    }
    // join: acc[mt][nt][e] is weight row 16 mt + g (+ 8 for e >= 2), token 8 nt + 2 t + (e & 1)
    float* mine = sync_join + w * S::TOK * S::STRIDE;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          mine[(8 * nt + 2 * t + (e & 1)) * S::STRIDE + 16 * mt + g + 8 * (e >> 1)] = acc[mt][nt][e];
    __syncthreads();
    // two adjacent weight rows of one token a thread: the warps' sums in order, one bf16x2 store
    for (int q = tid; q < S::TOK * S::ROWS / 2; q += SY_WARPS * 32) {
      const int tok = q / (S::ROWS / 2), rr = 2 * (q % (S::ROWS / 2));
      float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int w2 = 0; w2 < SY_WARPS; ++w2) {
        const float2 p = *reinterpret_cast<const float2*>(sync_join + (w2 * S::TOK + tok) * S::STRIDE + rr);
        sum.x += p.x;
        sum.y += p.y;
      }
      const int r = m0 + tok;
      if (r < rows)
        *reinterpret_cast<__nv_bfloat162*>(cg + static_cast<size_t>(r) * n + n0 + rr) = __floats2bfloat162_rn(sum.x, sum.y);
    }
    __syncthreads();  // the join buffer is rewritten by the next round
  }
}

constexpr int MAX_DEVICES = 64;

// KERNEL's shared-memory limit raised to SMEM_BYTES, once per device; sms: the current device's SM count.
template <auto KERNEL, int SMEM_BYTES>
cudaError_t configure(int& sms) {
  static int count[MAX_DEVICES] = {};  // 0: not yet configured
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= MAX_DEVICES) return cudaErrorInvalidDevice;
  if (!count[dev]) {
    e = cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return e;
    e = cudaDeviceGetAttribute(&count[dev], cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
  }
  sms = count[dev];
  return cudaSuccess;
}

// KERNEL on grid x THREADS_, a programmatic dependent of the kernel before it in the stream
// (it may start before that one ends: it must call wait_for_prerequisites before relying on it).
template <auto KERNEL, int THREADS_, int SMEM_BYTES, typename... Args>
cudaError_t launch_dependent(unsigned grid, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(THREADS_);
  cfg.dynamicSmemBytes = SMEM_BYTES;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, KERNEL, args...);
}

// One persistent CTA an SM over `tiles` tiles (a programmatic dependent of the kernel before it
// where `dependent`).
template <auto KERNEL, int THREADS_, int SMEM_BYTES, typename... Args>
int launch(long long tiles, cudaStream_t stream, bool dependent, Args... args) {
  int sms = 0;
  const cudaError_t e = configure<KERNEL, SMEM_BYTES>(sms);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (tiles >= (1LL << 30)) return static_cast<int>(cudaErrorInvalidValue);  // tile + gridDim.x stays an int
  const unsigned grid = static_cast<unsigned>(tiles < sms ? tiles : sms);
  if (dependent) return static_cast<int>(launch_dependent<KERNEL, THREADS_, SMEM_BYTES>(grid, stream, args...));
  KERNEL<<<grid, THREADS_, SMEM_BYTES, stream>>>(args...);
  return static_cast<int>(cudaGetLastError());
}

// The mma.sync tokens-as-N form: one CTA a (16 MT weight rows, group, y); y < SY_YSPLIT splits the
// token rounds (a hint that undercounts rows); all CTAs of a group share its rows past masked_m.
constexpr int SY_YSPLIT = 4;
// blocks whose loads a warp issues at once: two where the registers allow (8 token rows a round)
constexpr int sync_ch(int mt, int nt) { return mt * nt <= 2 ? 2 : 1; }

template <int MT, int NT>
int launch_sync(const uint8_t* a8, const float* as, const uint8_t* b4, const float* bs, const void* masked_m,
                int masked_m_is_64, __nv_bfloat16* c, int g, int max_m, int n, int k, cudaStream_t stream) {
  using S = SyncTile<MT, NT>;
  static_assert(S::SMEM <= 48 * 1024, "the join buffer fits the default shared-memory limit");
  if (g > 65535) return static_cast<int>(cudaErrorInvalidValue);
  const int rounds = (max_m + S::TOK - 1) / S::TOK;
  const dim3 grid(static_cast<unsigned>(n / S::ROWS), static_cast<unsigned>(g),
                  static_cast<unsigned>(rounds < SY_YSPLIT ? rounds : SY_YSPLIT));
  grouped_sync_kernel<MT, NT, sync_ch(MT, NT)><<<grid, SY_WARPS * 32, S::SMEM, stream>>>(
      a8, as, b4, bs, masked_m, masked_m_is_64, c, max_m, n, k);
  return static_cast<int>(cudaGetLastError());
}

// The mma.sync form's tiles (token rows a round x weight rows a CTA): 8 x 32 and 16 x 32.
bool sync_tile(int bm, int bn) { return bn == 32 && (bm == 8 || bm == 16); }

constexpr int SW_TN = 32, SW_SPLIT = 4;  // the tokens-as-N form's instantiation: 32 token rows, K split 4 ways

}  // namespace

#ifdef LOWBIT_STAGE_TRACE
// The stamps of the last launch: long long [TRACE_STAGES + 1][TRACE_EVENTS] (module top).
extern "C" int lowbit_stage_trace(long long* dst) {
  return static_cast<int>(cudaMemcpyFromSymbol(dst, g_stage_trace, sizeof(g_stage_trace)));
}
#endif

// The exact fallback of the prepared and register-weights forms: the producer form on 128 x 128
// tiles, a programmatic dependent of their GEMM, scheduled once that GEMM's CTAs allow it, so that
// its launch overlaps the GEMM; its CTAs read the gate once the GEMM has ended and return at once
// where no word is set, else compute c, exact for any scale.
int launch_gated_fallback(const uint8_t* a8, const float* as, const uint8_t* b4, const float* bs, const void* masked_m,
                          int masked_m_is_64, __nv_bfloat16* c, int g, int max_m, int n, int k, const uint32_t* gate,
                          long long words, cudaStream_t s) {
  return launch<grouped_wgmma_kernel<128>, THREADS, Smem<128>::BYTES>(
      g * prepared::m_tiles(max_m) * (n / 128), s, true, a8, as, b4, bs, masked_m, masked_m_is_64, c, g, max_m, n, k,
      gate, static_cast<int>(words));
}

// The prepared form (grouped_prepared.cuh): prepare_kernel, prepared_gemm as its programmatic
// dependent, then the producer form gated on the prepare pass's verdict (it returns at once
// unless some scale needs it).
int launch_prepared(const uint8_t* a8, const float* as, const uint8_t* b4, const float* bs, const void* masked_m,
                    int masked_m_is_64, __nv_bfloat16* c, int g, int max_m, int n, int k, void* workspace,
                    cudaStream_t s) {
  namespace P = prepared;
  const long long nb_ctas = P::b_ctas(g, n, k), words = P::gate_words(g, max_m, n, k);
  const long long tiles = g * P::m_tiles(max_m) * (n / P::TN);
  if (words >= (1LL << 31)) return static_cast<int>(cudaErrorInvalidValue);
  uint8_t* a_img = static_cast<uint8_t*>(workspace);
  uint8_t* b_img = a_img + P::a_img_bytes(g, max_m, k);
  uint32_t* gate = reinterpret_cast<uint32_t*>(b_img + P::b_img_bytes(g, n, k));
  P::prepare_kernel<false><<<static_cast<unsigned>(words), P::PREP_THREADS, 0, s>>>(
      a8, as, b4, bs, masked_m, masked_m_is_64, max_m, n, k, static_cast<int>(nb_ctas), a_img, b_img, gate, nullptr);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return static_cast<int>(e);
  const int r = launch<P::prepared_gemm, P::THREADS, P::SMEM>(
      tiles, s, true, static_cast<const uint8_t*>(a_img), static_cast<const uint8_t*>(b_img),
      static_cast<const uint32_t*>(gate), static_cast<int>(words), as, masked_m, masked_m_is_64, c, g, max_m, n, k);
  if (r != 0) return r;
  return launch_gated_fallback(a8, as, b4, bs, masked_m, masked_m_is_64, c, g, max_m, n, k, gate, words, s);
}

// The register-weights form (grouped_regw.cuh): prepare_kernel<true> (its gate words first),
// regw_gemm as its programmatic dependent (a gate word a CTA after them), then the gated fallback.
int launch_regw(const uint8_t* a8, const float* as, const uint8_t* b4, const float* bs, const void* masked_m,
                int masked_m_is_64, __nv_bfloat16* c, int g, int max_m, int n, int k, void* workspace, cudaStream_t s) {
  namespace P = prepared;
  namespace R = regw;
  int sms = 0;
  cudaError_t e = configure<R::regw_gemm, R::SMEM>(sms);
  if (e != cudaSuccess) return static_cast<int>(e);
  const long long a_words = P::a_ctas(g, max_m, k), words = R::gate_words(g, max_m, n, k), tiles = R::tiles(g, max_m, n);
  if (words >= (1LL << 31)) return static_cast<int>(cudaErrorInvalidValue);
  uint8_t* a_img = static_cast<uint8_t*>(workspace);
  float* ratio = reinterpret_cast<float*>(a_img + P::a_img_bytes(g, max_m, k));
  uint32_t* gate = reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(ratio) + P::ratio_bytes(g, max_m, k));
  P::prepare_kernel<true><<<static_cast<unsigned>(a_words), P::PREP_THREADS, 0, s>>>(
      a8, as, b4, bs, masked_m, masked_m_is_64, max_m, n, k, 0, a_img, nullptr, gate, ratio);
  e = cudaGetLastError();
  if (e != cudaSuccess) return static_cast<int>(e);
  e = launch_dependent<R::regw_gemm, R::THREADS, R::SMEM>(
      static_cast<unsigned>(tiles), s, static_cast<const uint8_t*>(a_img), static_cast<const float*>(ratio),
      gate, static_cast<int>(a_words), b4, bs, masked_m, masked_m_is_64, c, g, max_m, n, k);
  if (e != cudaSuccess) return static_cast<int>(e);
  return launch_gated_fallback(a8, as, b4, bs, masked_m, masked_m_is_64, c, g, max_m, n, k, gate, words, s);
}

// c[g, r] for r < clamp(masked_m[g], 0, max_m), zeros below (module comment). a_fp8 e4m3
// [g, max_m, k]; a_scale fp32 [g, max_m, k/128]; b_fp4 [g, n, k/2]; b_scale fp32 [g, n, k/32];
// masked_m int32 (masked_m_is_64 = 0) or int64 [g]; c bf16 [g, max_m, n]; all contiguous,
// 16-byte aligned; tile bm x bn (token rows x weight rows): 128 x 64 or 128 x 128 (weights
// decoded by a producer warpgroup), 256 x 128 (the register-weights form), 128 x 256 (the
// prepared form), 32 x 64 (the wgmma tokens-as-N form), or 8 x 32 and 16 x 32 (the mma.sync
// tokens-as-N form); n % bn == 0, k % 128 == 0.
// workspace: at 256 x 128 and 128 x 256 (and only there), 16-byte aligned, of
// lowbit_grouped_workspace_bytes(g, max_m, n, k, bm, bn) bytes, not in use by another call: the
// register-weights form's token images, factors and gate, or the prepared form's images and gate;
// null at the other tiles.
// Returns a cudaError_t code.
extern "C" int lowbit_grouped_wgmma(const void* a_fp8, const void* a_scale, const void* b_fp4, const void* b_scale,
                                    const void* masked_m, int masked_m_is_64, void* c, int g, int max_m, int n, int k,
                                    int bm, int bn, void* workspace, void* stream) {
  if (g <= 0 || max_m <= 0) return 0;
  const bool tile_ok = (bm == 128 && (((bn == 128 || bn == 64) && !workspace) || (bn == 256 && workspace))) ||
                       (bm == regw::TT && bn == regw::TW && workspace) ||
                       ((bm == SW_TN && bn == SW_ROWS) || sync_tile(bm, bn)) && !workspace;
  if (!tile_ok || n <= 0 || n % bn != 0 || k <= 0 || k % BK != 0) return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaGetLastError();  // an earlier, unrelated error must not be reported as this call's
  const auto a8 = static_cast<const uint8_t*>(a_fp8);
  const auto as = static_cast<const float*>(a_scale);
  const auto b4 = static_cast<const uint8_t*>(b_fp4);
  const auto bs = static_cast<const float*>(b_scale);
  const auto cc = static_cast<__nv_bfloat16*>(c);
  const long long m_tiles = (static_cast<long long>(max_m) + 127) / 128;
  if (bm == 8 && bn == 32)  // the mma.sync form: 2 x 16 weight rows a CTA, 1 x 8 or 2 x 8 tokens a round
    return launch_sync<2, 1>(a8, as, b4, bs, masked_m, masked_m_is_64, cc, g, max_m, n, k, s);
  if (bm == 16 && bn == 32)
    return launch_sync<2, 2>(a8, as, b4, bs, masked_m, masked_m_is_64, cc, g, max_m, n, k, s);
  if (bm == SW_TN)  // a CTA owns SW_ROWS weight rows and all token rows of a group
    return launch<grouped_swapped_kernel<SW_TN, SW_SPLIT>, SW_SPLIT * 128, SwSmem<SW_TN, SW_SPLIT>::BYTES>(
        static_cast<long long>(g) * (n / SW_ROWS), s, false, a8, as, b4, bs, masked_m, masked_m_is_64, cc, g, max_m, n, k);
  if (bm == regw::TT)
    return launch_regw(a8, as, b4, bs, masked_m, masked_m_is_64, cc, g, max_m, n, k, workspace, s);
  if (bn == prepared::TN)
    return launch_prepared(a8, as, b4, bs, masked_m, masked_m_is_64, cc, g, max_m, n, k, workspace, s);
  const long long tiles = g * m_tiles * (n / bn);
  const uint32_t* no_gate = nullptr;
  if (bn == 64)
    return launch<grouped_wgmma_kernel<64>, THREADS, Smem<64>::BYTES>(tiles, s, false, a8, as, b4, bs, masked_m,
                                                                       masked_m_is_64, cc, g, max_m, n, k, no_gate, 0);
  return launch<grouped_wgmma_kernel<128>, THREADS, Smem<128>::BYTES>(tiles, s, false, a8, as, b4, bs, masked_m,
                                                                        masked_m_is_64, cc, g, max_m, n, k, no_gate, 0);
}

// Bytes of the workspace of the form on tiles bm x bn: the register-weights form (256 x 128,
// grouped_regw.cuh) or the prepared form (128 x 256, grouped_prepared.cuh); 0 for the forms
// without one.
extern "C" long long lowbit_grouped_workspace_bytes(int g, int max_m, int n, int k, int bm, int bn) {
  if (bm == regw::TT && bn == regw::TW) return regw::workspace_bytes(g, max_m, n, k);
  if (bm == 128 && bn == prepared::TN) return prepared::workspace_bytes(g, max_m, n, k);
  return 0;
}
