// The FP4 decode, the scale fold and the promotions that the forms share: E2M1 codes to fp16 by
// permutes, e4m3 to fp16, a weight row's fold of its four per-32 scales (grouped_wgmma.cu's
// module comment gives the modes), and the consumers' promotion of a block's sums. Included by
// grouped_wgmma.cu inside its namespace, after its constants.
#pragma once

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

// fp16 bits of x twice, as an f16x2 (exact where x is a power of two in [2^-24, 2^15])
__device__ __forceinline__ uint32_t f16x2_dup(float x) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(x));
  return r;
}

// Scale bits the whole fold takes, given their OR and their least and greatest: positive powers
// of two in [2^-23, 2^13] (sign and mantissa clear, after which the bits e << 23 order as the
// exponents e, in [WHOLE_E_MIN, WHOLE_E_MAX]).
__device__ __forceinline__ bool whole_bits(uint32_t ored, uint32_t lo, uint32_t hi) {
  return (ored & 0x807fffffu) == 0u && lo >= (static_cast<uint32_t>(WHOLE_E_MIN) << 23) &&
         hi <= (static_cast<uint32_t>(WHOLE_E_MAX) << 23);
}

// One per-32 scale (fp32 bits) on the whole fold, as fold_row's whole mode takes a row's four:
// ok where whole_bits takes it; the f16x2 of the scale, or of 1.0 where it is not (the prepared
// and register-weights forms' decode then uses the bare codes, and the gate leaves the call to
// the exact fallback).
__device__ __forceinline__ uint32_t whole_factor2(uint32_t bits, bool& ok) {
  ok = whole_bits(bits, bits, bits);
  return f16x2_dup(ok ? __uint_as_float(bits) : 1.0f);
}

// A row's four scales all take the whole fold.
__device__ __forceinline__ bool folds_whole(const uint4& sc) {
  return whole_bits(sc.x | sc.y | sc.z | sc.w, min(min(sc.x, sc.y), min(sc.z, sc.w)),
                    max(max(sc.x, sc.y), max(sc.z, sc.w)));
}

// A row whose scales do not all fold whole: relative where they are positive normal powers of two
// within MAX_SPREAD binades (factors 2^(e_j - max e), promoted by 2^(max e - 127)), else plain
__device__ __forceinline__ Fold fold_row_modes(const uint4& sc) {
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
  const bool relative = pow2 && e_max - e_min <= MAX_SPREAD;
  Fold f;
  f.mode = relative ? MODE_PER_COLUMN : MODE_PER_COLUMN | MODE_PER_SUBBLOCK;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t h = f16_pow2(static_cast<int>((bits[j] >> 23) & 0xffu) - e_max);  // -23 .. 0 when relative
    f.factor2[j] = relative ? (h | (h << 16)) : 0x3c003c00u;
    f.promote_bits[j] = relative ? static_cast<uint32_t>(e_max) << 23 : bits[j];
  }
  return f;
}

// Quantized weights' scales take the whole fold, whose factors are the scales themselves in fp16
// (one conversion each); any other row takes fold_row_modes, on a branch of its own.
__device__ __forceinline__ Fold fold_row(const uint4& sc) {
  if (!folds_whole(sc)) return fold_row_modes(sc);
  const uint32_t bits[4] = {sc.x, sc.y, sc.z, sc.w};
  Fold f;
  f.mode = 0u;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    f.factor2[j] = f16x2_dup(__uint_as_float(bits[j]));
    f.promote_bits[j] = 0x3f800000u;
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
