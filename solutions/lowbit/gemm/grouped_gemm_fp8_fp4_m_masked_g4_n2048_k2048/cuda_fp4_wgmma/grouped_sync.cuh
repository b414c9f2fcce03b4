// The tokens-as-N form on mma.sync, for decode-like buckets (up to 16 token rows a group).
// Included by grouped_wgmma.cu inside its namespace, after grouped_tokens_as_n.cuh.
#pragma once

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
