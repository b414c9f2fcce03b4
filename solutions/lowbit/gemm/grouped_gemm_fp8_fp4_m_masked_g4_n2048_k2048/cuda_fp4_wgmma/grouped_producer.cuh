// The producer form (grouped_wgmma.cu's module comment: its data flow and K order): a producer
// warpgroup decodes B into shared memory, two consumer warpgroups multiply. Included by
// grouped_wgmma.cu inside its namespace, after grouped_regw.cuh (the gate's reader).
#pragma once

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

// The producer form's body: its own kernel (below), and prepared_gemm's CTAs where the prepared
// form's gate is set (gate null there). gate: null, or (as the exact fallback of the
// register-weights form) its gate_words gate words, read once its GEMM has ended: the kernel then
// returns at once unless one is set (that GEMM's c, where it wrote any, is then rewritten).
template <int BN>
__device__ __forceinline__ void producer_form(const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                                              const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
                                              const void* __restrict__ masked_m, int masked_m_is_64,
                                              __nv_bfloat16* __restrict__ c, int groups, int max_m, int n, int k,
                                              const uint32_t* gate, int gate_words) {
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

template <int BN>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_wgmma_kernel(const uint8_t* __restrict__ a_fp8, const float* __restrict__ a_scale,
                         const uint8_t* __restrict__ b_fp4, const float* __restrict__ b_scale,
                         const void* __restrict__ masked_m, int masked_m_is_64, __nv_bfloat16* __restrict__ c,
                         int groups, int max_m, int n, int k, const uint32_t* gate, int gate_words) {
  producer_form<BN>(a_fp8, a_scale, b_fp4, b_scale, masked_m, masked_m_is_64, c, groups, max_m, n, k, gate, gate_words);
}
