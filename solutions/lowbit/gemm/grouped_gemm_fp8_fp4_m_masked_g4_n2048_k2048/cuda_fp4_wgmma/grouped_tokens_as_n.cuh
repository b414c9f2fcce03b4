// The tokens-as-N form on wgmma, for decode-like buckets (up to 32 token rows a group). Included
// by grouped_wgmma.cu inside its namespace, after grouped_producer.cuh.
#pragma once

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
  static constexpr int OFF_MODES = OFF_SA + TN * 4;  // uint32 [4 warps]: the fold modes of the warp's rows, OR-ed
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
        // the warp's fold modes, OR-ed: a row that did not fold makes the warpgroup multiply the
        // stage by sub-blocks; where every row folded whole, the promotion is by a_scale alone
        const uint32_t warp_modes = __reduce_or_sync(0xffffffffu, f0.mode | f1.mode);
        if (lane == 0) st_shared4(buf + S::OFF_MODES + warp * 4, warp_modes);
        STAGE_TRACE(trace_row, 2, lt == 0);  // tokens stored, modes written
        // generic-proxy stores, read next by the tensor cores (async proxy); the warpgroup's
        // named barrier (the other buffer is still read by the stage before)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
        const uint4 modes4 = ld_shared16(buf + S::OFF_MODES);
        const uint32_t stage_modes = modes4.x | modes4.y | modes4.z | modes4.w;
        const bool plain = (stage_modes & MODE_PER_SUBBLOCK) != 0u;
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
        // (all_whole a std::bool_constant: where every row folded whole, a_scale alone, no multiply)
        auto promote_t = [&](auto all_whole, float p0, float p1) {
#pragma unroll
          for (int cb = 0; cb < NACC / 4; ++cb) {
            const float2 s2 = ld_shared_f2(buf + S::OFF_SA + (8 * cb + 2 * t) * 4);
            float x0 = s2.x, y0 = s2.y, x1 = s2.x, y1 = s2.y;
            if constexpr (!decltype(all_whole)::value) {
              x0 *= p0, y0 *= p0, x1 *= p1, y1 *= p1;
            }
            acc[4 * cb + 0] = fmaf(blk[4 * cb + 0], x0, acc[4 * cb + 0]);
            acc[4 * cb + 1] = fmaf(blk[4 * cb + 1], y0, acc[4 * cb + 1]);
            acc[4 * cb + 2] = fmaf(blk[4 * cb + 2], x1, acc[4 * cb + 2]);
            acc[4 * cb + 3] = fmaf(blk[4 * cb + 3], y1, acc[4 * cb + 3]);
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
          if (stage_modes == 0u)  // all whole: acc += blk * a_scale[col]
            promote_t(std::true_type{}, 1.0f, 1.0f);
          else  // the promotion factor of a relative fold is the same for all four sub-blocks
            promote_t(std::false_type{}, __uint_as_float(f0.promote_bits[0]), __uint_as_float(f1.promote_bits[0]));
        } else {
#pragma unroll
          for (int sub = 0; sub < 4; ++sub) {
            wgmma_fence();
            wgmma_dense(blk, frag[2 * sub], desc + (((sub >> 1) * S::ATOM_BYTES + 64 * (sub & 1)) >> 4), 0u);
            wgmma_dense(blk, frag[2 * sub + 1], desc + (((sub >> 1) * S::ATOM_BYTES + 64 * (sub & 1) + 32) >> 4), 1u);
            wgmma_commit();
            wgmma_wait<0>();
            keep_f(blk);
            promote_t(std::false_type{}, __uint_as_float(f0.promote_bits[sub]), __uint_as_float(f1.promote_bits[sub]));
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
