// The prepared form, for groups of many token rows: both operands converted to fp16 once a call,
// then multiplied on wgmma with both in shared memory. Included by grouped_wgmma.cu
// inside its namespace, after the decode helpers it shares (e2m1x8_to_f16x2x4, whole_factor2,
// e4m3x2_to_f16x2, clamp_rows).
//
// Two launches a call, the second a programmatic dependent of the first:
//   prepare_kernel  A e4m3 -> fp16 (exact; a 128-K block whose a_scale is 0 as A x 0, which keeps
//                   NaN) and B' = E2M1 code x its per-32 scale in fp16 (the whole fold: exact for
//                   scales 2^-23 .. 2^13), each written as the swizzled 64-K stage images the GEMM
//                   copies in whole; gate[cta] = 1 where its rows need the exact fallback (a weight
//                   scale outside the whole fold, a nonzero a_scale outside 2^-45 .. 2^45 or not finite)
//   prepared_gemm   (a programmatic dependent of prepare_kernel) when no gate word is set: a
//                   persistent CTA an SM over tiles of 128 token rows x 256 weight rows, warpgroup
//                   0's one thread issuing two 1-D bulk copies a 64-K stage into a ring 4 deep,
//                   warpgroups 1 and 2 each multiplying 64 token rows by the 256 weight rows,
//                   4 x wgmma m64n256k16 a stage; when one is set, its CTAs run the producer form
//                   on 128 x 128 tiles instead (producer_form<128>), exact for any scale
//
// One accumulator set (128 fp32 a thread, where promoting a block sum into a second set would
// need 256): after 128-K block kb the accumulators hold sum_{j <= kb} (s_j / s_kb) T_j, s the
// token row's a_scale and T_j block j's MMA sums, so they are multiplied by s_kb / s_kb+1 before
// block kb + 1 and by s_last at the end: c = sum_j s_j T_j, with two fp32 roundings a block (the
// ratio and the product) where a promoted block sum has one. Scales within 2^-45 .. 2^45 keep
// every ratio within 2^90 and the sums far from fp32's range (|T_j| < 2^32). A zero a_scale
// takes the scale of the block before (its block's A is 0, so T_j = 0 and any factor is exact).
//
// Workspace (16-byte aligned; KS = k / 64 stages, MT = ceil(max_m / 128)), in this order:
//   a_img [g][MT][KS][128 rows][128 B]  only the m-tiles holding rows; rows past masked_m zero
//   b_img [g][n / 256][KS][256 rows][128 B]  only the groups holding rows
//   gate  [prepare_kernel's CTAs] uint32
// Row r's 16-byte chunk c (K 8 c .. 8 c + 7 of the stage, in order) at chunk c ^ (r % 8): the
// 128-byte swizzle of the MMAs' descriptors, so that a stage is one contiguous copy an operand.
#pragma once

// the producer form's body (grouped_producer.cuh), which prepared_gemm runs where the gate is set
template <int BN>
__device__ __forceinline__ void producer_form(const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                                              const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
                                              const void* __restrict__ masked_m, int masked_m_is_64,
                                              __nv_bfloat16* __restrict__ c, int groups, int max_m, int n, int k,
                                              const uint32_t* gate, int gate_words);

namespace prepared {

constexpr int TM = 128, TN = 256;            // tile: token rows x weight rows
constexpr int A_BYTES = TM * 128;            // a stage of A: 128 rows x 64 K x fp16
constexpr int B_BYTES = TN * 128;            // a stage of B': 256 rows x 64 K x fp16
constexpr int STAGE = A_BYTES + B_BYTES;     // 48 KiB, a multiple of the swizzle's 1024 bytes
constexpr int STAGES = 4;
constexpr int SMEM = STAGES * STAGE + 1024 + 2 * STAGES * 8;  // + alignment slack + barriers
constexpr int THREADS = 384;
constexpr int PREP_THREADS = 256;
constexpr int OUT_PITCH = TN * 2 + 16;       // bytes a row of the epilogue's bf16 staging (padded: no bank conflicts)
constexpr float SCALE_MIN = 0x1p-45f, SCALE_MAX = 0x1p45f;  // nonzero a_scale magnitudes the rescale takes
static_assert(SMEM <= 227 * 1024, "shared memory");
static_assert(2 * 64 * OUT_PITCH <= 2 * STAGE, "the epilogue's staging fits a block's two slots");
static_assert(STAGES % 2 == 0, "a block's two slots are adjacent");

__host__ __device__ inline long long m_tiles(int max_m) { return (max_m + TM - 1) / TM; }
inline long long a_img_bytes(int g, int max_m, int k) { return static_cast<long long>(g) * m_tiles(max_m) * TM * k * 2; }
inline long long b_img_bytes(int g, int n, int k) { return static_cast<long long>(g) * n * k * 2; }
inline long long b_ctas(int g, int n, int k) { return static_cast<long long>(g) * (n / 128) * (k / 128); }
inline long long a_ctas(int g, int max_m, int k) { return static_cast<long long>(g) * m_tiles(max_m) * 2 * (k / 128); }
inline long long gate_words(int g, int max_m, int n, int k) { return b_ctas(g, n, k) + a_ctas(g, max_m, k); }
// a gate of `words` uint32, rounded up to 16 bytes (what follows it stays 16-byte aligned)
inline long long gate_bytes(long long words) { return (words * 4 + 15) / 16 * 16; }
inline long long workspace_bytes(int g, int max_m, int n, int k) {
  return a_img_bytes(g, max_m, k) + b_img_bytes(g, n, k) + gate_bytes(gate_words(g, max_m, n, k));
}
// the register-weights form's rescale factors: float [g][MT][KB][128]
inline long long ratio_bytes(int g, int max_m, int k) { return static_cast<long long>(g) * m_tiles(max_m) * (k / 128) * TM * 4; }

// CTAs [0, nb_ctas): B, CTA (group, 128 weight rows, 128-K block kb), thread (row t / 2, half
// t % 2 of each of the block's two stages): 16 bytes of codes and one scale a stage -> four
// chunks. CTAs [nb_ctas, grid): A, CTA (group, m-tile, 64-row half, block kb), thread (row t / 4,
// quarter t % 4 of each stage): 16 e4m3 -> two chunks. A CTA's chunks are assembled in shared
// memory as the image's bytes (each stage's rows are contiguous there) and written out by bulk
// copies: a thread's own 16-byte stores would each write half a 32-byte sector.
//
// REGW (the register-weights form, regw below): no B CTAs (nb_ctas 0: its GEMM decodes the
// weights and checks their scales itself); A's images hold each 128-K
// block's K in the order of the weights' register fragments (regw::k_of), and ratio
// [g][MT][KB][128] gets each token row's rescale factors e_kb / e_kb+1 (the last block: e_last),
// e_kb the row's a_scale of block kb or, where that is 0, the one before (1 before the first), at
// regw_factor_slot(row % 128), so that each GEMM thread loads its 64 factors 16 bytes at a time.
// Where token row c (0..127) of an image tile keeps its rescale factor: the accumulators of c = 8 i
// + 2 t + e belong to the GEMM threads with t = lane % 4 (columns 8 i + 2 t, + 1), so columns
// 16 j + 2 t + e and 16 j + 8 + 2 t + e share the 16 bytes at 16 j + 4 t (e, then 2 + e).
__host__ __device__ constexpr int regw_factor_slot(int c) { return 16 * (c / 16) + 4 * (c % 8 / 2) + 2 * (c / 8 % 2) + c % 2; }

template <bool REGW>
__global__ void __launch_bounds__(PREP_THREADS)
    prepare_kernel(const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                   const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
                   const void* __restrict__ masked_m, int masked_m_is_64, int max_m, int n, int k, int nb_ctas,
                   uint8_t* __restrict__ a_img, uint8_t* __restrict__ b_img, uint32_t* __restrict__ gate,
                   float* __restrict__ ratio) {
  __shared__ __align__(128) uint8_t staged[2][128 * 128];  // [stage of the block][rows x 128 bytes]
  const int KB = k / 128, KS = k / 64, MT = static_cast<int>(m_tiles(max_m)), t = threadIdx.x;
  const uint32_t st0 = smem_addr(staged);
  bool bad = false;
  uint8_t* dst[2] = {nullptr, nullptr};  // where the two staged stages go (null: this CTA writes nothing)
  uint32_t bytes = 0;
  int cta = blockIdx.x;
  if (cta < nb_ctas) {
    const int kb = cta % KB, rest = cta / KB, nblk = rest % (n / 128), grp = rest / (n / 128);
    if (clamp_rows(masked_m, masked_m_is_64, grp, max_m) > 0) {
      const int h = t & 1, r = t >> 1, row = nblk * 128 + r;
      const size_t grow = static_cast<size_t>(grp) * n + row;
      uint4 q[2];
      uint32_t sb[2];
#pragma unroll
      for (int st = 0; st < 2; ++st) {
        const int ks = 2 * kb + st;
        q[st] = __ldg(reinterpret_cast<const uint4*>(b_fp4 + grow * (k / 2) + ks * 32 + h * 16));
        sb[st] = __float_as_uint(__ldg(b_scale + grow * (k / 32) + ks * 2 + h));
        dst[st] = b_img + ((((static_cast<size_t>(grp) * (n / TN) + row / TN) * KS + ks) * TN) + nblk * 128 % TN) * 128;
      }
      bytes = 128 * 128;
#pragma unroll
      for (int st = 0; st < 2; ++st) {
        bool ok;
        const uint32_t f2 = whole_factor2(sb[st], ok);
        bad = bad || !ok;
        const uint32_t w[4] = {q[st].x, q[st].y, q[st].z, q[st].w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // word i: K 8 i .. 8 i + 7 of the half, chunk 4 h + i
          uint32_t d[4], v[4];
          e2m1x8_to_f16x2x4(w[i], d);
#pragma unroll
          for (int b = 0; b < 4; ++b) v[b] = f16x2_mul(d[b], f2);
          st_shared16(st0 + st * 128 * 128 + r * 128 + (((4 * h + i) ^ (r & 7)) << 4), v);
        }
      }
    }
  } else {
    cta -= nb_ctas;
    const int kb = cta % KB, rest = cta / KB, half = rest % 2, mb = (rest / 2) % MT, grp = rest / 2 / MT;
    const int rows = clamp_rows(masked_m, masked_m_is_64, grp, max_m);
    if (mb * TM < rows) {
      const int qq = t & 3, r = t >> 2, row = mb * TM + half * 64 + r;  // r: row in the half (r % 8 = row % 8)
      const bool valid = row < rows;
      uint4 v[2] = {make_uint4(0u, 0u, 0u, 0u), make_uint4(0u, 0u, 0u, 0u)};
      float s = 1.0f, rt = 1.0f;
      if (valid) {
        const size_t grow = static_cast<size_t>(grp) * max_m + row;
        s = __ldg(a_scale + grow * KB + kb);
#pragma unroll
        for (int st = 0; st < 2; ++st)  // REGW: quarter qq of the block's 128 bytes, else of each stage's 64
          v[st] = __ldg(reinterpret_cast<const uint4*>(a_fp8 + grow * k + (REGW ? kb * 128 + qq * 32 + st * 16
                                                                                : (2 * kb + st) * 64 + qq * 16)));
        bad = !(s == 0.0f || (fabsf(s) >= SCALE_MIN && fabsf(s) <= SCALE_MAX));  // NaN fails both
        if (REGW && qq == 0) {  // the rescale factor after block kb, as prepared_gemm computes it
          const float x = kb + 1 < KB ? __ldg(a_scale + grow * KB + kb + 1) : 0.0f;
          float e = s;  // a zero scale takes the last nonzero one before it (1 if none)
          for (int j = kb - 1; e == 0.0f; --j) e = j >= 0 ? __ldg(a_scale + grow * KB + j) : 1.0f;
          rt = kb + 1 < KB ? e / (x != 0.0f ? x : e) : e;
        }
      }
      const uint32_t z = s == 0.0f ? 0u : 0x3c003c00u;  // x 0 (keeps NaN) or x 1
      if (REGW) {
        if (qq == 0)
          ratio[((static_cast<size_t>(grp) * MT + mb) * KB + kb) * TM + regw_factor_slot(half * 64 + r)] = rt;
        // byte pair p (K 32 qq + 2 p, + 1 of the block) -> stage p / 8, chunk p % 8, word qq (regw::k_of)
        const uint32_t w[8] = {v[0].x, v[0].y, v[0].z, v[0].w, v[1].x, v[1].y, v[1].z, v[1].w};
#pragma unroll
        for (int p = 0; p < 16; ++p) {
          const uint32_t x = f16x2_mul(e4m3x2_to_f16x2(w[p / 2] >> (16 * (p % 2))), z);
          st_shared4(st0 + (p / 8) * 128 * 128 + r * 128 + (((p % 8) ^ (r & 7)) << 4) + qq * 4, x);
        }
      }
#pragma unroll
      for (int st = 0; st < 2; ++st) {
        dst[st] = a_img + (((static_cast<size_t>(grp) * MT + mb) * KS + 2 * kb + st) * TM + half * 64) * 128;
        if (REGW) continue;
        const uint32_t w[4] = {v[st].x, v[st].y, v[st].z, v[st].w};
#pragma unroll
        for (int c = 0; c < 2; ++c) {  // chunk 2 qq + c: bytes 8 c .. 8 c + 7 of the thread's 16
          const uint32_t x[4] = {f16x2_mul(e4m3x2_to_f16x2(w[2 * c]), z), f16x2_mul(e4m3x2_to_f16x2(w[2 * c] >> 16), z),
                                 f16x2_mul(e4m3x2_to_f16x2(w[2 * c + 1]), z), f16x2_mul(e4m3x2_to_f16x2(w[2 * c + 1] >> 16), z)};
          st_shared16(st0 + st * 128 * 128 + r * 128 + (((2 * qq + c) ^ (r & 7)) << 4), x);
        }
      }
      bytes = 64 * 128;
    }
  }
  fence_proxy_async();  // this thread's shared-memory writes, before the bulk copies read them
  bad = __syncthreads_or(bad);
  if (t == 0) {
    gate[blockIdx.x] = bad ? 1u : 0u;
    if (bytes) {
      bulk_s2g(dst[0], st0, bytes);
      bulk_s2g(dst[1], st0 + 128 * 128, bytes);
      bulk_commit_and_wait();
    }
  }
  launch_dependents();  // after this CTA's stores: the GEMM's CTAs take no SM from the pass before its last wave
}

// Whether any of the gate's words is set (every thread of the CTA; gate 16-byte aligned). The
// words are OR-ed, 16 bytes a load, with no test between loads, so that a thread's loads are all
// in flight at once: every CTA of the GEMMs reads the whole gate before its first stage.
__device__ __forceinline__ bool gate_set(const uint32_t* gate, int words, int tid, int threads) {
  uint32_t any = 0u;
  const uint4* g4 = reinterpret_cast<const uint4*>(gate);
#pragma unroll 4
  for (int i = tid; i < words / 4; i += threads) {
    const uint4 v = g4[i];
    any |= v.x | v.y | v.z | v.w;
  }
  for (int i = words / 4 * 4 + tid; i < words; i += threads) any |= gate[i];
  return __syncthreads_or(any != 0u) != 0;
}

// Tile `tile` of a list holding first the tiles with rows (group-major, m-tiles of tm token
// rows, weight column blocks fastest), then those wholly past masked_m: (group, m-tile, column
// block, rows).
__device__ __forceinline__ int4 tile_of(int tile, const void* masked_m, int masked_m_is_64, int groups, int max_m, int nb,
                                        int tm) {
  const int mt = (max_m + tm - 1) / tm;
  int busy = 0;
  for (int gi = 0; gi < groups; ++gi) busy += (clamp_rows(masked_m, masked_m_is_64, gi, max_m) + tm - 1) / tm * nb;
  const bool zero = tile >= busy;
  int j = zero ? tile - busy : tile;
  for (int gi = 0; gi < groups; ++gi) {
    const int rows = clamp_rows(masked_m, masked_m_is_64, gi, max_m), full = (rows + tm - 1) / tm;
    const int here = (zero ? mt - full : full) * nb;
    if (j < here) return make_int4(gi, (zero ? full : 0) + j / nb, j % nb, rows);
    j -= here;
  }
  return make_int4(0, 0, 0, 0);  // not reached: tile < the list's length
}

// Thread 0 initialises the ring's barriers: full [stages] (the producer's expect_tx arrival + the
// bytes), empty [stages] (every one of the 256 consumer threads); every thread returns once they
// are visible.
__device__ __forceinline__ void init_ring(uint64_t* bars, int stages) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(bars + s, 1);
      mbar_init(bars + stages + s, 256);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// Thread 0 finds this CTA's tile (tile_of) and initialises the ring (init_ring); every thread
// returns the tile once both are visible.
__device__ __forceinline__ int4 tile_and_ring(uint64_t* bars, int stages, const void* masked_m, int masked_m_is_64,
                                              int groups, int max_m, int nb, int tm) {
  __shared__ int4 s_tile;
  if (threadIdx.x == 0) s_tile = tile_of(blockIdx.x, masked_m, masked_m_is_64, groups, max_m, nb, tm);
  init_ring(bars, stages);  // its __syncthreads publishes s_tile as well
  return s_tile;
}

// rows x cols of zeros from cg (row pitch n), 16 bytes a thread a step.
__device__ __forceinline__ void zero_tile(__nv_bfloat16* cg, int rows, int cols, int n, int tid, int threads) {
  for (int i = tid; i < rows * (cols / 8); i += threads)
    *reinterpret_cast<uint4*>(cg + static_cast<size_t>(i / (cols / 8)) * n + 8 * (i % (cols / 8))) = make_uint4(0u, 0u, 0u, 0u);
}

// Persistent: CTA b walks tiles b, b + gridDim.x, ... of tile_of's list, its ring's slots counted
// over all of them, so that a tile's first stages land while the tile before is in its last block
// and its epilogue. The epilogue stages its bf16 rows in the last block's two slots (adjacent: a
// block is two stages and the ring four), released once the rows are stored.
__global__ void __launch_bounds__(THREADS, 1)
    prepared_gemm(const uint8_t* __restrict__ a_img, const uint8_t* __restrict__ b_img, const uint32_t* __restrict__ gate,
                  int gate_count, const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                  const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale, const void* __restrict__ masked_m,
                  int masked_m_is_64, __nv_bfloat16* __restrict__ c, int groups, int max_m, int n, int k) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t base = smem_addr(smem);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE);  // full [STAGES], empty [STAGES]
  const int tid = threadIdx.x, wg = tid >> 7;
  wait_for_prerequisites();  // prepare_kernel's images and gate complete and visible
  if (gate_set(gate, gate_count, tid, THREADS)) {  // a scale the images cannot take: the producer form, exact for any
    producer_form<128>(a_fp8, a_scale, b_fp4, b_scale, masked_m, masked_m_is_64, c, groups, max_m, n, k, nullptr, 0);
    return;
  }
  const int NB = n / TN, KS = k / 64, KB = k / 128, MT = static_cast<int>(m_tiles(max_m));
  const int tiles = groups * MT * NB;  // the launch keeps it an int
  init_ring(bars, STAGES);

  if (wg == 0) {
    setmaxnreg_dec<40>();
    if (tid == 0) {
      int it = 0;  // stages issued over the CTA's tiles
      for (int tl = blockIdx.x; tl < tiles; tl += gridDim.x) {
        const int4 tile = tile_of(tl, masked_m, masked_m_is_64, groups, max_m, NB, TM);
        if (tile.y * TM >= tile.w) break;  // the tiles past masked_m come last: no more stages
        const uint8_t* a_src = a_img + (static_cast<size_t>(tile.x) * MT + tile.y) * KS * A_BYTES;
        const uint8_t* b_src = b_img + (static_cast<size_t>(tile.x) * NB + tile.z) * KS * B_BYTES;
        for (int ks = 0; ks < KS; ++ks, ++it) {
          const int s = it % STAGES;
          mbar_wait(bars + STAGES + s, ((it / STAGES) & 1) ^ 1);
          const uint32_t fb = smem_addr(bars + s), sb = base + s * STAGE;
          expect_tx(fb, STAGE);
          bulk_g2s(sb, a_src + static_cast<size_t>(ks) * A_BYTES, A_BYTES, fb);
          bulk_g2s(sb + A_BYTES, b_src + static_cast<size_t>(ks) * B_BYTES, B_BYTES, fb);
        }
      }
    }
    return;
  }
  setmaxnreg_inc<232>();
  const int cw = wg - 1, lt = tid & 127, w = lt >> 5, l = lt & 31, gq = l >> 2, q = l & 3;
  const uint64_t da0 = b_desc(base + cw * 64 * 128), db0 = b_desc(base + A_BYTES);
  int s = 0;
  uint32_t ph = 0;
#pragma unroll 1
  for (int tl = blockIdx.x; tl < tiles; tl += gridDim.x) {
    const int4 tile = tile_of(tl, masked_m, masked_m_is_64, groups, max_m, NB, TM);
    const int grp = tile.x, mb = tile.y, nb = tile.z, rows = tile.w;
    __nv_bfloat16* cg = c + (static_cast<size_t>(grp) * max_m + mb * TM) * n + nb * TN;
    const int tile_rows = min(TM, max_m - mb * TM);
    if (mb * TM >= rows) {  // wholly past masked_m: zeros, a warp 512 contiguous bytes
      zero_tile(cg, tile_rows, TN, n, tid - 128, THREADS - 128);
      continue;
    }
    const int r0 = mb * TM + cw * 64 + 16 * w + gq;  // this thread's rows r0 and r0 + 8 (accumulators 4 i + 0..1, 4 i + 2..3)
    const float* sc0 = r0 < rows ? a_scale + (static_cast<size_t>(grp) * max_m + r0) * KB : nullptr;
    const float* sc1 = r0 + 8 < rows ? a_scale + (static_cast<size_t>(grp) * max_m + r0 + 8) * KB : nullptr;
    float e0 = 1.0f, e1 = 1.0f;  // the effective scale of the block before: a zero a_scale keeps it
    {
      const float x0 = sc0 ? __ldg(sc0) : 1.0f, x1 = sc1 ? __ldg(sc1) : 1.0f;
      e0 = x0 != 0.0f ? x0 : e0;
      e1 = x1 != 0.0f ? x1 : e1;
    }
    float acc[TN / 2];
#pragma unroll
    for (int i = 0; i < TN / 2; ++i) acc[i] = 0.0f;
    int slot[2];
#pragma unroll 1
    for (int kb = 0; kb < KB; ++kb) {
      const float x0 = sc0 && kb + 1 < KB ? __ldg(sc0 + kb + 1) : 0.0f;  // the next block's scales, used after its MMAs
      const float x1 = sc1 && kb + 1 < KB ? __ldg(sc1 + kb + 1) : 0.0f;
#pragma unroll
      for (int st = 0; st < 2; ++st) {
        mbar_wait(bars + s, ph);
        const uint64_t off = static_cast<uint64_t>((s * STAGE) >> 4);
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < 4; ++j)  // k16 step j: 32 bytes into each row's 128
          wgmma_ss(acc, da0 + off + 2 * j, db0 + off + 2 * j, (kb | st | j) != 0);
        wgmma_commit();
        slot[st] = s;
        if (++s == STAGES) {
          s = 0;
          ph ^= 1u;
        }
      }
      wgmma_wait<1>();
      if (kb + 1 < KB) mbar_arrive(bars + STAGES + slot[0]);  // the last block's slots hold the epilogue's rows
      wgmma_wait<0>();
      keep_f(acc);
      if (kb + 1 < KB) {
        mbar_arrive(bars + STAGES + slot[1]);
        const float f0 = x0 != 0.0f ? x0 : e0, f1 = x1 != 0.0f ? x1 : e1;
        const float q0 = e0 / f0, q1 = e1 / f1;
        e0 = f0;
        e1 = f1;
#pragma unroll
        for (int i = 0; i < TN / 2; i += 4) {
          acc[i + 0] *= q0;
          acc[i + 1] *= q0;
          acc[i + 2] *= q1;
          acc[i + 3] *= q1;
        }
      }
    }
    // epilogue: both warpgroups' MMAs of the last block have retired, so its two slots are free:
    // bf16 rows staged there (each warpgroup its 64), then stored 16 bytes a thread, a warp a row
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    const uint32_t out = base + slot[0] * STAGE + cw * 64 * OUT_PITCH;
#pragma unroll
    for (int i = 0; i < TN / 8; ++i)  // accumulators 4 i + 2 h, + 1: row 16 w + gq + 8 h, columns 8 i + 2 q, + 1
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(acc[4 * i + 2 * h] * (h ? e1 : e0), acc[4 * i + 2 * h + 1] * (h ? e1 : e0));
        st_shared4(out + (16 * w + gq + 8 * h) * OUT_PITCH + (8 * i + 2 * q) * 2, *reinterpret_cast<const uint32_t*>(&v));
      }
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
    for (int i = lt; i < 64 * (TN / 8); i += 128) {
      const int rl = i / (TN / 8), ch = i % (TN / 8), row = cw * 64 + rl;  // row in the tile
      if (row >= tile_rows) break;
      const uint4 v = mb * TM + row < rows ? ld_shared16(out + rl * OUT_PITCH + ch * 16) : make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(cg + static_cast<size_t>(row) * n + 8 * ch) = v;
    }
    fence_proxy_async();  // the rows' shared-memory accesses, before the next bulk copies into the slots
    mbar_arrive(bars + STAGES + slot[0]);
    mbar_arrive(bars + STAGES + slot[1]);
  }
}

}  // namespace prepared
