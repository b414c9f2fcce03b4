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
// Five forms. The producer form (grouped_producer.cuh) decodes B into shared memory; two
// tokens-as-N forms decode it straight into the MMA's register operand, for groups of few token
// rows: on wgmma (grouped_tokens_as_n.cuh, up to 32 rows) and on mma.sync (grouped_sync.cuh, up
// to 16 rows, where a CTA of 32 weight rows puts twice as many CTAs on the weights' loads); for
// groups of many rows the register-weights form (grouped_regw.cuh) converts the tokens to fp16
// in a first pass and decodes the weights into the MMA's register operand by the threads that
// multiply them, and the prepared form (grouped_prepared.cuh) converts both operands to fp16 in
// a first pass and multiplies them from shared memory with one accumulator set.
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
// The decode, the fold and the promotions live in decode_fold.cuh; masked_m's rows and the zeros
// past them in masked_rows.cuh; this file holds the constants, the launches and the C entries.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

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
// (events 0-6, by each warpgroup's thread 0). The register-weights GEMM stamps row kb, its 128-K
// block (events 0-5, by consumer warpgroup 1's thread 0), and its call's steps in row
// TRACE_STAGES (CALL_TRACE, events 1-7). The plain build compiles the stamps away.
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
#define CALL_TRACE(ev, lead)                                                                        \
  do {                                                                                              \
    if (blockIdx.x == 0 && (lead)) g_stage_trace[TRACE_STAGES][ev] = clock64();                     \
  } while (0)
#else
#define STAGE_TRACE_START() \
  do {                      \
  } while (0)
#define STAGE_TRACE(gs, ev, lead) \
  do {                            \
  } while (0)
#define CALL_TRACE(ev, lead) \
  do {                       \
  } while (0)
#endif

#include "decode_fold.cuh"
#include "masked_rows.cuh"
#include "grouped_prepared.cuh"
#include "grouped_regw.cuh"
#include "grouped_producer.cuh"
#include "grouped_tokens_as_n.cuh"
#include "grouped_sync.cuh"

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

// The exact fallback of the register-weights form: the producer form on 128 x 128 tiles, a
// programmatic dependent of its GEMM (which sets gate words itself, so the fallback follows it),
// scheduled once that GEMM's CTAs allow it, so that its launch overlaps the GEMM; its CTAs read
// the gate once the GEMM has ended and return at once where no word is set, else compute c,
// exact for any scale.
int launch_gated_fallback(const uint8_t* a8, const float* as, const uint8_t* b4, const float* bs, const void* masked_m,
                          int masked_m_is_64, __nv_bfloat16* c, int g, int max_m, int n, int k, const uint32_t* gate,
                          long long words, cudaStream_t s) {
  return launch<grouped_wgmma_kernel<128>, THREADS, Smem<128>::BYTES>(
      g * prepared::m_tiles(max_m) * (n / 128), s, true, a8, as, b4, bs, masked_m, masked_m_is_64, c, g, max_m, n, k,
      gate, static_cast<int>(words));
}

// The prepared form (grouped_prepared.cuh): prepare_kernel, then prepared_gemm as its programmatic
// dependent, which runs the producer form itself where the first pass set a gate word.
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
  static_assert(P::THREADS == THREADS && Smem<128>::BYTES <= P::SMEM,
                "the producer form runs in prepared_gemm's threads and shared memory");
  return launch<P::prepared_gemm, P::THREADS, P::SMEM>(
      tiles, s, true, static_cast<const uint8_t*>(a_img), static_cast<const uint8_t*>(b_img),
      static_cast<const uint32_t*>(gate), static_cast<int>(words), a8, as, b4, bs, masked_m, masked_m_is_64, c, g,
      max_m, n, k);
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
