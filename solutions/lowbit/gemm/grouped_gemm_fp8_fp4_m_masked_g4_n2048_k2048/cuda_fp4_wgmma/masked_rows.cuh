// masked_m's rows: a group's rows clamped to [0, max_m], and the rows past them set to zero by
// the threads' own stores or by bulk copies beside the MMAs. Included by grouped_wgmma.cu inside
// its namespace, after decode_fold.cuh.
#pragma once

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
