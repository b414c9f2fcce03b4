// The register-weights form, for groups of 257-1024 token rows, and of more where n is no multiple
// of 256 (heuristics.py): c^T = B' A^T with the weights on wgmma's register operand, decoded there
// by the threads that multiply them, and the tokens converted to fp16 once a call by
// prepared::prepare_kernel<true>. Included by grouped_wgmma.cu inside its namespace, after
// grouped_prepared.cuh.
//
// Three launches a call, the second and third programmatic dependents of the one before:
//   prepare_kernel<true>  A e4m3 -> fp16 stage images (as the prepared form's, but each 128-K
//                         block's K in the fragments' order, k_of below), each token row's
//                         rescale factors, and its gate words (a_scale outside 2^-45 .. 2^45)
//   regw_gemm             one CTA a tile of 256 token rows x 128 weight rows, 384 threads; a tile
//                         wholly past masked_m stores its zeros at once, the others wait for the
//                         first pass and run when none of its gate words is set:
//     warpgroup 0, one thread: per 64-K stage the tokens' image (two 16 KiB bulk copies: the
//                         two 128-row image tiles) and, with a block's second stage, the block's
//                         256 rescale factors, into a ring 4 deep
//     warpgroups 1, 2 (64 weight rows each): per 128-K block 8 x wgmma m64n256k16 (weights from
//                         registers, tokens from shared memory); under them the next block's
//                         fragments decoded into a second set (each thread: its two weight rows'
//                         16 bytes of codes and one per-32 scale, loaded two blocks ahead; prmt,
//                         x the scale in fp16: the whole fold); then wait, release the slots and
//                         multiply each token column's accumulators by its rescale factor
//     epilogue: bf16, transposed through shared memory, 16 bytes a thread a store; the CTA's
//                         gate word set where a weight scale it decoded is outside the whole fold
//                         (its c is then wrong, and rewritten by the fallback)
//   the producer form, a programmatic dependent of regw_gemm: once that has ended, it computes c
//                         where any gate word is set, exact for any scale, else returns at once
//
// The weights' scales are checked where they are decoded, by the GEMM: checked by the first pass
// instead, they cost 2.4 us of the call at 512 full (H100; grouped_gemm_wgmma.md).
//
// K order inside a 128-K block: step s (k16, 0..7), fragment column c (0..15) multiply
// K = 32 t + 4 s + q with t = (c % 8) / 2, q = c % 2 + 2 (c / 8): a thread (t = lane % 4) holds
// K 32 t .. 32 t + 31 of its rows, one 16-byte load and one per-32 scale a row, and the decode's
// four f16x2 of a code word are steps 2 i and 2 i + 1's two column pairs.
//
// The accumulators are rescaled as in prepared_gemm (one set, acc *= e_kb / e_kb+1 after each
// block, e_last after the last), with the factors from the first pass: the same arithmetic.
#pragma once

namespace regw {

constexpr int TT = 256, TW = 128;          // tile: token rows (wgmma's N) x weight rows (M)
constexpr int TOK_BYTES = TT * 128;        // a stage of tokens: 256 rows x 64 K x fp16
constexpr int RATIO_BYTES = TT * 4;        // a block's rescale factors
constexpr int SLOT = TOK_BYTES + RATIO_BYTES;  // 33 KiB, a multiple of the swizzle's 1024 bytes
constexpr int STAGES = 4;
constexpr int SMEM = STAGES * SLOT + 1024 + 2 * STAGES * 8;
constexpr int THREADS = 384;
constexpr int OUT_PITCH = TW * 2 + 16;     // bytes a token row of the epilogue's bf16 staging
static_assert(SLOT % 1024 == 0, "slots keep the swizzle's alignment");
static_assert(SMEM <= 227 * 1024, "shared memory");
static_assert(TT * OUT_PITCH <= STAGES * SLOT, "the epilogue's staging fits the ring");

__host__ __device__ inline long long t_tiles(int max_m) { return (max_m + TT - 1) / TT; }
__host__ __device__ inline long long tiles(int g, int max_m, int n) { return static_cast<long long>(g) * t_tiles(max_m) * (n / TW); }
// the gate: a uint32 a first-pass CTA (a_scale), then one a GEMM CTA (weight scales)
inline long long gate_words(int g, int max_m, int n, int k) { return prepared::a_ctas(g, max_m, k) + tiles(g, max_m, n); }
// Workspace (16-byte aligned): the token images (prepared::a_img_bytes), the rescale factors
// (prepared::ratio_bytes), the gate, in this order.
inline long long workspace_bytes(int g, int max_m, int n, int k) {
  return prepared::a_img_bytes(g, max_m, k) + prepared::ratio_bytes(g, max_m, k) + prepared::gate_bytes(gate_words(g, max_m, n, k));
}

// The K (0..127) of a 128-K block that step s, fragment column c multiplies (module comment).
__host__ __device__ constexpr int k_of(int s, int c) { return 32 * ((c % 8) / 2) + 4 * s + c % 2 + 2 * (c / 8); }

struct Codes {
  uint4 w0, w1;   // rows r0, r0 + 8: 16 bytes of codes each
  float s0, s1;   // their per-32 scales
};

__device__ __forceinline__ Codes load_codes(const uint8_t* c0, const uint8_t* c1, const float* s0, const float* s1,
                                            int kb) {
  Codes x;
  x.w0 = __ldg(reinterpret_cast<const uint4*>(c0 + kb * 64));
  x.w1 = __ldg(reinterpret_cast<const uint4*>(c1 + kb * 64));
  x.s0 = __ldg(s0 + kb * 4);
  x.s1 = __ldg(s1 + kb * 4);
  return x;
}

// A block's 8 steps of register fragments: frag[s] = {row r0 cols 2t, 2t+1; r0 + 8 same; r0 cols
// 2t+8, 2t+9; r0 + 8 same}, each code x its scale: exact where both scales fold whole, false
// where one does not (the CTA then sets its gate word).
__device__ __forceinline__ bool decode_block(const Codes& x, uint32_t (&frag)[8][4]) {
  bool ok0, ok1;
  const uint32_t g0 = whole_factor2(__float_as_uint(x.s0), ok0), g1 = whole_factor2(__float_as_uint(x.s1), ok1);
  const uint32_t a[4] = {x.w0.x, x.w0.y, x.w0.z, x.w0.w}, b[4] = {x.w1.x, x.w1.y, x.w1.z, x.w1.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // word i: K 32 t + 8 i .. + 7, steps 2 i and 2 i + 1
    uint32_t d0[4], d1[4];
    e2m1x8_to_f16x2x4(a[i], d0);
    e2m1x8_to_f16x2x4(b[i], d1);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      d0[j] = f16x2_mul(d0[j], g0);
      d1[j] = f16x2_mul(d1[j], g1);
    }
    frag[2 * i][0] = d0[0];
    frag[2 * i][1] = d1[0];
    frag[2 * i][2] = d0[1];
    frag[2 * i][3] = d1[1];
    frag[2 * i + 1][0] = d0[2];
    frag[2 * i + 1][1] = d1[2];
    frag[2 * i + 1][2] = d0[3];
    frag[2 * i + 1][3] = d1[3];
  }
  return ok0 && ok1;
}

__global__ void __launch_bounds__(THREADS, 1)
    regw_gemm(const uint8_t* __restrict__ a_img, const float* __restrict__ ratio, uint32_t* __restrict__ gate,
              int a_words, const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
              const void* __restrict__ masked_m, int masked_m_is_64, __nv_bfloat16* __restrict__ c, int groups,
              int max_m, int n, int k) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t base = smem_addr(smem);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + STAGES * SLOT);  // full [STAGES], empty [STAGES]
  __shared__ int s_bad;
  const int tid = threadIdx.x, wg = tid >> 7;
  STAGE_TRACE_START();
  const int NB = n / TW, KS = k / 64, KB = k / 128, MT = static_cast<int>(prepared::m_tiles(max_m));
  if (tid == 0) s_bad = 0;
  // the tile before the first pass's output: a tile wholly past masked_m needs neither that nor
  // the gate (c and this CTA's gate word are not the first pass's; the fallback reads the word and
  // rewrites c only once this grid has ended), and a busy one finds its tile while it waits. Where
  // every tile is past masked_m no CTA waits for the pass, so the fallback may read the pass's
  // words before the pass has written them; the pass sets none without rows, and a stale set word
  // only makes the fallback write c's zeros again, exactly.
  const int4 tile = prepared::tile_and_ring(bars, STAGES, masked_m, masked_m_is_64, groups, max_m, NB, TT);
  CALL_TRACE(2, tid == 128);  // tile found, ring ready
  const int grp = tile.x, mt = tile.y, nb = tile.z, rows = tile.w;
  __nv_bfloat16* cg = c + (static_cast<size_t>(grp) * max_m + mt * TT) * n + nb * TW;
  const int tile_rows = min(TT, max_m - mt * TT);
  if (mt * TT >= rows) {  // wholly past masked_m: zeros
    launch_dependents();
    prepared::zero_tile(cg, tile_rows, TW, n, tid, THREADS);
    if (tid == 0) gate[a_words + blockIdx.x] = 0u;
    return;
  }
  wait_for_prerequisites();  // the first pass's images, factors and gate words complete and visible
  const bool fallback = prepared::gate_set(gate, a_words, tid, THREADS);
  CALL_TRACE(1, tid == 128);  // gate read
  launch_dependents();  // the fallback may be scheduled: it reads the gate once this grid has ended
  if (fallback) return;  // an a_scale the rescale cannot take: the producer form computes c

  if (wg == 0) {
    setmaxnreg_dec<40>();
    if (tid == 0) {
      const int mb = 2 * mt;  // the first of the tile's two 128-row image tiles
      const bool two = mb + 1 < MT && (mb + 1) * prepared::TM < rows;  // the first pass wrote the second
      const uint8_t* a_src = a_img + (static_cast<size_t>(grp) * MT + mb) * KS * prepared::A_BYTES;
      const float* r_src = ratio + (static_cast<size_t>(grp) * MT + mb) * KB * prepared::TM;
      const size_t a_next = static_cast<size_t>(KS) * prepared::A_BYTES, r_next = static_cast<size_t>(KB) * prepared::TM;
      for (int ks = 0; ks < KS; ++ks) {
        const int s = ks % STAGES;
        mbar_wait(bars + STAGES + s, ((ks / STAGES) & 1) ^ 1);
        const uint32_t fb = smem_addr(bars + s), sb = base + s * SLOT;
        const bool last = ks & 1;  // a block's second stage brings its factors
        expect_tx(fb, (two ? 2 : 1) * (prepared::A_BYTES + (last ? 512 : 0)));
        const size_t off = static_cast<size_t>(ks) * prepared::A_BYTES;
        bulk_g2s(sb, a_src + off, prepared::A_BYTES, fb);
        CALL_TRACE(7, ks == 0);  // the first copies issued
        if (two) bulk_g2s(sb + prepared::A_BYTES, a_src + a_next + off, prepared::A_BYTES, fb);
        if (last) {
          const size_t roff = static_cast<size_t>(ks / 2) * prepared::TM;
          bulk_g2s(sb + TOK_BYTES, r_src + roff, 512, fb);
          if (two) bulk_g2s(sb + TOK_BYTES + 512, r_src + r_next + roff, 512, fb);
        }
      }
    }
    return;
  }
  setmaxnreg_inc<232>();
  const int cw = wg - 1, lt = tid & 127, w = lt >> 5, l = lt & 31, gq = l >> 2, t = l & 3;
  const int r0 = nb * TW + cw * 64 + 16 * w + gq;  // this thread's weight rows r0 and r0 + 8
  const size_t row0 = static_cast<size_t>(grp) * n + r0;
  const uint8_t* c0 = b_fp4 + row0 * (k / 2) + 16 * t;
  const uint8_t* c1 = c0 + 8 * static_cast<size_t>(k / 2);
  const float* s0 = b_scale + row0 * (k / 32) + t;
  const float* s1 = s0 + 8 * static_cast<size_t>(k / 32);
  const uint64_t db0 = b_desc(base);
  float acc[TT / 2];
#pragma unroll
  for (int i = 0; i < TT / 2; ++i) acc[i] = 0.0f;
  bool bad = false;  // a weight scale outside the whole fold: the fallback computes c
  int s = 0;
  uint32_t ph = 0;
  // one 128-K block: decode, two stages of 4 MMAs, the next loads into the same registers, rescale
  // after a block's MMAs: each token column's accumulators times its factor (acc 4 i + 0..1 at
  // columns 8 i + 2 t, + 1; 4 i + 2..3 the same columns, row + 8), the factors of columns 16 j + 2 t,
  // + 1 and 16 j + 8 + 2 t, + 1 one 16-byte load (prepared::regw_factor_slot): ptxas keeps two loads
  // in flight, all the registers allow, so the rescale waits on 16 load latencies rather than 32
  auto rescale = [&](int slot) {
    const uint32_t rf = base + slot * SLOT + TOK_BYTES + 16 * t;
#pragma unroll
    for (int i = 0; i < TT / 16; ++i) {
      const float4 f = ld_shared_f4(rf + 64 * i);
      acc[8 * i + 0] *= f.x;
      acc[8 * i + 1] *= f.y;
      acc[8 * i + 2] *= f.x;
      acc[8 * i + 3] *= f.y;
      acc[8 * i + 4] *= f.z;
      acc[8 * i + 5] *= f.w;
      acc[8 * i + 6] *= f.z;
      acc[8 * i + 7] *= f.w;
    }
  };
  // block kb: its two stages' MMAs from cur; block kb + 1 decoded into nxt under them from x,
  // which then takes block kb + 3's codes; the MMAs waited for, their slots released, rescale
  auto block = [&](uint32_t (&cur)[8][4], uint32_t (&nxt)[8][4], Codes& x, int kb) {
    int slot[2];
#pragma unroll
    for (int st = 0; st < 2; ++st) {
      STAGE_TRACE(kb, 0, tid == 128 && st == 0);  // waits for the block's tokens
      mbar_wait(bars + s, ph);
      STAGE_TRACE(kb, 1, tid == 128 && st == 0);  // tokens there
      const uint64_t off = static_cast<uint64_t>((s * SLOT) >> 4);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) wgmma_dense(acc, cur[4 * st + j], db0 + off + 2 * j, 1u);
      wgmma_commit();
      slot[st] = s;
      if (++s == STAGES) {
        s = 0;
        ph ^= 1u;
      }
    }
    STAGE_TRACE(kb, 2, tid == 128);  // both stages' MMAs issued
    if (kb + 1 < KB) bad = !decode_block(x, nxt) || bad;
    if (kb + 3 < KB) x = load_codes(c0, c1, s0, s1, kb + 3);
    STAGE_TRACE(kb, 3, tid == 128);  // the next block decoded
    wgmma_wait<1>();
    mbar_arrive(bars + STAGES + slot[0]);
    wgmma_wait<0>();
    keep_f(acc);
#pragma unroll
    for (int j = 0; j < 8; ++j) keep_u(cur[j]);  // the MMAs read them until here
    STAGE_TRACE(kb, 4, tid == 128);  // MMAs done
    rescale(slot[1]);
    mbar_arrive(bars + STAGES + slot[1]);
    STAGE_TRACE(kb, 5, tid == 128);  // rescaled
  };
  uint32_t fa[8][4], fb[8][4];
  Codes xa = load_codes(c0, c1, s0, s1, 0), xb = xa;
  if (KB > 1) xb = load_codes(c0, c1, s0, s1, 1);
  bad = !decode_block(xa, fa);
  if (KB > 2) xa = load_codes(c0, c1, s0, s1, 2);
  CALL_TRACE(3, tid == 128);  // the first block's fragments decoded
#pragma unroll 1
  for (int kb = 0; kb < KB; kb += 2) {  // unrolled by two: the fragment and code registers alternate
    block(fa, fb, xb, kb);
    if (kb + 1 < KB) block(fb, fa, xa, kb + 1);
  }
  // epilogue: every MMA has retired and every stage has landed, so the ring is free: bf16 staged
  // transposed there ([token][weight row]), then stored 16 bytes a thread
  CALL_TRACE(4, tid == 128);  // epilogue
  if (bad) atomicOr(&s_bad, 1);
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
  if (tid == 128) gate[a_words + blockIdx.x] = s_bad ? 1u : 0u;
  const int wr = cw * 64 + 16 * w + gq;  // weight row in the tile of accumulators 4 i + 0..1 (+ 8: 4 i + 2..3)
#pragma unroll
  for (int i = 0; i < TT / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int tok = 8 * i + 2 * t + (e & 1), row = wr + 8 * (e >> 1);
      const __nv_bfloat16 v = __float2bfloat16_rn(acc[4 * i + e]);
      asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(base + tok * OUT_PITCH + row * 2),
                   "h"(*reinterpret_cast<const unsigned short*>(&v)) : "memory");
    }
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
  CALL_TRACE(5, tid == 128);  // staged
  const int ct = tid - 128;
  for (int i = ct; i < TT * (TW / 8); i += 256) {
    const int tok = i / (TW / 8), ch = i % (TW / 8);
    if (tok >= tile_rows) break;
    const uint4 v = mt * TT + tok < rows ? ld_shared16(base + tok * OUT_PITCH + ch * 16) : make_uint4(0u, 0u, 0u, 0u);
    *reinterpret_cast<uint4*>(cg + static_cast<size_t>(tok) * n + 8 * ch) = v;
  }
  CALL_TRACE(6, tid == 128);  // stores issued
}

}  // namespace regw
