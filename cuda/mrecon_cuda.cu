/* SPDX-License-Identifier: MIT */
/* tilewave: reconstruction by dilation on CUDA: raster passes, then a queued wavefront. */
/* Why one file: the four phases of the FH-GPU reconstruction ([Teodoro13]) share the queue
 * layout, the device helpers and the host-side scratch plan; as one nvcc unit the helpers stay
 * in an anonymous namespace. */

/*
 * Reconstruction by dilation of the marker J under the mask I, inside one tile, in place on
 * the marker: the fixpoint of J(p) <- max{J(q), q in N[p]} ^ I(p), N = 4 or 8 neighbours.
 * The fixpoint is unique, so any order of updates that ends at it gives the bytes of the CPU
 * twin (omp/mrecon_omp.c). This file is the FH-GPU algorithm of Teodoro et al. ([Teodoro13],
 * sections 3.1-3.3, algorithm 5) with a queue that never drops pixels.
 *
 * Phases, all enqueued on the caller's stream, none waiting for the host:
 *
 * 1. Raster passes (whole tile only). Forward rows, forward columns, backward rows, backward
 *    columns. A row pass (N^{+,0} = the left neighbour, N^{-,0} = the right one) is one warp
 *    per row: J(x) = clamp(J(x-1), J(x), I(x)) is a composition of clamp functions
 *    v -> min(max(v, lo), hi), which compose into a clamp again, so a warp scans 32 chunks of
 *    16 bytes with a shuffle scan and the result equals the sequential pass exactly. A column
 *    pass (N^{0,+} = the row above: the pixel straight up for 4-connectivity, and the two
 *    diagonals too for 8) is one warp per 32-column strip walking down (or up) the rows, the
 *    diagonals coming from the neighbouring lanes by shuffle. For parallelism the columns are
 *    cut into independent segments (the backward pass cuts half a segment away from the
 *    forward one) and the diagonals do not cross strip edges: these passes only have to move J
 *    towards the result without overshooting it (every update is one elementary dilation
 *    capped by I), and the wavefront below fixes whatever they leave. The four passes repeat,
 *    at most RASTER_ROUNDS times, while the previous round changed more than
 *    npix / RASTER_MIN_CHANGE_DIV pixels: the passes count their changes into the scratch
 *    header and the kernels of a round that follows a quiet one return at once, so the
 *    decision needs no host. On a 16384^2 tissue-like tile a round costs about 1.7 ms and the
 *    first few each cut the wavefront's work 2-4x (one round left 274M queue entries to
 *    process, three 52M, six 13M); a round is worth it while it changes more pixels than the
 *    wavefront processes in the same time, about npix / 60, and a round changes about half as
 *    many as the one before, hence the divisor 32.
 *
 * 2. Initial wavefront (algorithm 5, lines 16-18): p is queued when some neighbour q, among
 *    all of N(p), satisfies J(q) < J(p) and J(q) < I(q), i.e. p can still raise q. With seeds
 *    (the tile was stable and only the seed pixels were raised from outside) every violated
 *    pair starts at a seed, so the seeds are the initial wavefront. The same kernel copies J
 *    into a 32-bit working marker in scratch, J32(p) = J(p) << 1 | queued(p).
 *
 * 3. Wavefront (algorithm 5, lines 19-26): processing p clears its queued bit and reads its
 *    value v_p in one atomicAnd; for each neighbour q with value below v = min(v_p, I(q)),
 *    old = atomicMax(&J32(q), v << 1 | 1), and q is queued only if this set its queued bit.
 *    A raise that finds the bit set needs no entry: the pending processing of q reads the
 *    word with its atomicAnd later in that word's order. So a pixel is queued at most once at
 *    a time and always propagates its latest value ([Teodoro13]'s algorithm queues q on every
 *    raise). J32 is 32 bits because atomicMax has no 8- or 16-bit form; the copy costs two
 *    streaming passes (about 1 ms at 16384^2) and spares a compare-and-swap loop on the word
 *    shared with three neighbours, which would also touch bytes outside the tile.
 *    Invariant: every pixel raised since it was last processed has its bit set and sits in
 *    some queue level or in the pending bitmap; reads of J32 go to L2 (atomics, and
 *    ld.relaxed.gpu for the neighbour pre-check: L1 is not coherent with other SMs' atomics),
 *    so at the end no pair p, q violates the fixpoint.
 *
 *    The queue has [Teodoro13]'s levels: a per-thread queue (the bitmask of the up to 8
 *    neighbours a thread raised, in a register), a block queue in shared memory filled per
 *    warp (warp prefix sum of the counts, one shared atomic per warp), and a global queue
 *    filled per block (one global atomic per flush of the block queue). Each level spills
 *    into the next when full, and the last level, the global queue of `queue_capacity`
 *    elements, spills into a pending bitmap (one bit per pixel, atomicOr); when the global
 *    queue runs dry, a compaction round turns pending bits back into queue entries, as many
 *    as fit. Nothing is dropped and nothing restarts, so any capacity gives the same bytes
 *    (a capacity of 1 works, slowly).
 *
 *    Convergence is detected on the device: the wavefront is one persistent cooperative
 *    kernel (as many blocks as can be resident) that runs rounds separated by grid-wide
 *    barriers (cooperative_groups grid.sync) and leaves when, after a barrier, the global
 *    queue and the pending bitmap are both empty. Chosen over CUDA graph conditional nodes
 *    because it needs no graph per call and keeps the state in registers and shared memory
 *    between rounds. Round r reads queue buffer r % 2 with counter slot r % 3, writes buffer
 *    (r + 1) % 2 with slot (r + 1) % 3, and block 0 clears slot (r + 2) % 3, which nobody
 *    reads or writes during round r: one barrier per round suffices.
 *
 *    Balance: every round splits the global queue evenly into contiguous chunks, one per
 *    block, so uneven fronts are redistributed each round. Inside a round a block chases its
 *    own front with block barriers only ([Teodoro13]'s independent per-block queues) while the
 *    front stays small (at most LOCAL_MAX pixels), which serves narrow fronts such as a
 *    one-pixel corridor without a grid barrier per step; it stops early and hands its front
 *    to the global queue when the other blocks have queued enough work for the whole grid.
 *
 * 4. J32 >> 1 is copied back into the marker.
 *
 * Tiles hold at most 2^32 pixels (queue entries and seeds are 32-bit raster indices y*w+x);
 * row offsets are 64-bit. Seeds out of range are ignored here (the launcher cannot read
 * device memory without synchronising); the CPU twin rejects them, and ops/mrecon.c only
 * passes indices it computed. Timestamps and counters of the last run stay in the scratch
 * header for twi_cuda_mrecon_stats (tests and benchmarks).
 */
#include <cstddef>
#include <cstdint>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "mrecon.h" /* twi_mrecon_check: the contract both variants share (kern/) */

namespace cg = cooperative_groups;

namespace {

/* Tuning (in policies, not kernels). Raster rounds and their stopping rule measured on an H100
 * (16384^2 tissue-like u8, conn 8): 3 fixed rounds 27.9 ms, 4: 21.4 ms, 6: 19.2 ms, 8: 21.0 ms;
 * stopping below npix / 32 ran 6 rounds, 19.2 ms. Blocks per SM 4 or 6: no difference. */
struct MreconPolicy {
    static constexpr int ROW_WARPS = 8;          /* rows per block in the row passes */
    static constexpr int COL_WARPS = 4;          /* 32-column strips per block, column passes */
    static constexpr int COL_SEG_ROWS = 1024;    /* rows walked by one warp in a column pass */
    static constexpr int COL_UNROLL = 8;         /* rows loaded ahead in a column pass */
    static constexpr int RASTER_ROUNDS = 8;      /* forward + backward raster rounds, at most */
    static constexpr int RASTER_MIN_CHANGE_DIV = 32; /* another round if the last changed
                                                       more than npix / this */
    static constexpr int TILE_ROWS = 8;          /* rows per block in the per-pixel kernels */
    static constexpr int TILE_RPT = 4;           /* rows per thread in the per-pixel kernels */
    static constexpr int WF_THREADS = 256;       /* threads per wavefront block */
    static constexpr int WF_BLOCKS_PER_SM = 4;   /* resident wavefront blocks per SM, at most */
    static constexpr unsigned BQ_CAP = 4096;     /* block queue, elements per buffer */
    static constexpr unsigned BQ_FLUSH = 2048;   /* flush the block queue to global from here */
    static constexpr unsigned LOCAL_MAX = 1024;  /* chase a block's front locally up to this */
    static constexpr unsigned LOCAL_ITERS = 1u << 16; /* local steps per round, at most */
    static constexpr uint64_t MIN_CAPACITY = 4096;    /* default queue: npix / 8, at least this */
    static constexpr int SEED_THREADS = 256;
};

constexpr unsigned FULL = 0xffffffffu;
constexpr uint64_t MAX_PIXELS = 1ull << 32;
using twi_cu::ALIGN;
using twi_cu::align_up;
using twi_cu::launched;

static_assert(MreconPolicy::WF_THREADS % 32 == 0 && MreconPolicy::WF_THREADS <= 1024, "block");
static_assert(MreconPolicy::BQ_FLUSH + 8u * MreconPolicy::WF_THREADS <= 2u * MreconPolicy::BQ_CAP,
              "a flush threshold this high makes most pushes spill past the block queue");
static_assert(MreconPolicy::LOCAL_MAX <= MreconPolicy::BQ_CAP, "local front must fit");
static_assert(2 * MreconPolicy::BQ_CAP * sizeof(uint32_t) + 64 <= 48 * 1024,
              "wavefront shared memory over the static 48 KB limit");
static_assert(32 * MreconPolicy::TILE_ROWS * MreconPolicy::TILE_RPT * sizeof(uint32_t) + 64 <=
                  48 * 1024,
              "initial-wavefront shared memory over the static 48 KB limit");

/* Scratch header: queue counters per slot, pending flags, statistics of the last run. */
struct Ctrl {
    unsigned long long count[3];   /* elements pushed into the queue of each slot */
    unsigned int pend[3];          /* the pending bitmap holds pixels (per slot) */
    unsigned int pad;
    unsigned long long rounds;     /* wavefront rounds (grid barriers) */
    unsigned long long compactions; /* rounds that rebuilt the queue from the bitmap */
    unsigned long long processed;  /* queue entries processed */
    unsigned long long initial;    /* initial queue entries (before clamping to capacity) */
    unsigned long long local_steps; /* block-local steps, summed over blocks */
    unsigned long long t_start, t_init, t_wave, t_wave_end; /* %globaltimer, ns */
    unsigned long long raster_min;  /* a raster round runs if the last changed this many */
    unsigned long long raster_changed[MreconPolicy::RASTER_ROUNDS]; /* pixels, per round */
};
static_assert(sizeof(Ctrl) <= ALIGN, "scratch header");

/* Where the queues live, as seen by the pushing code. */
struct QueueRef {
    uint32_t *q;                   /* global queue, `cap` elements */
    unsigned long long *count;     /* its fill counter (may exceed cap: the excess spilled) */
    unsigned long long cap;
    uint32_t *pending;             /* one bit per pixel */
    unsigned int *pend_flag;
};

__device__ __forceinline__ uint32_t
ld_relaxed(const uint32_t *p)
{
    uint32_t v;

    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ unsigned long long
ld_relaxed64(const unsigned long long *p)
{
    unsigned long long v;

    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ unsigned long long
global_ns()
{
    unsigned long long t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint32_t
clampv(uint32_t v, uint32_t lo, uint32_t hi)
{
    return min(max(v, lo), hi);
}

template <typename T>
__device__ __forceinline__ T *
row_ptr(unsigned char *base, int64_t stride, int64_t y)
{
    return reinterpret_cast<T *>(base + y * stride);
}

template <typename T>
__device__ __forceinline__ const T *
row_ptr(const unsigned char *base, int64_t stride, int64_t y)
{
    return reinterpret_cast<const T *>(base + y * stride);
}

/* Neighbour k as (dx, dy): 8-connectivity in raster order without the centre; 4: up, left,
 * right, down. Constant after unrolling. */
template <int CONN>
__device__ __forceinline__ int
nb_dx(int k)
{
    if (CONN == 8) {
        const int i = k < 4 ? k : k + 1;
        return i % 3 - 1;
    }
    return k == 1 ? -1 : (k == 2 ? 1 : 0);
}

template <int CONN>
__device__ __forceinline__ int
nb_dy(int k)
{
    if (CONN == 8) {
        const int i = k < 4 ? k : k + 1;
        return i / 3 - 1;
    }
    return k == 0 ? -1 : (k == 3 ? 1 : 0);
}

__device__ __forceinline__ void
mark_pending(const QueueRef &g, uint32_t q)
{
    atomicOr(g.pending + (q >> 5), 1u << (q & 31));
}

/*
 * Warp-level push (all 32 lanes call it, converged). Lane items: SELF ? {p} if bits : the
 * neighbours of p named by `bits`. A warp prefix sum of the counts gives each lane its place;
 * lane 0 reserves the warp's total with one shared atomic on the block queue `sq`; what does
 * not fit goes to the global queue with one global atomic, and what does not fit there into
 * the pending bitmap.
 */
template <int CONN, bool SELF>
__device__ __forceinline__ void
warp_push(uint32_t p, unsigned bits, uint32_t w, uint32_t *sq, unsigned long long *sq_n,
          unsigned sq_cap, const QueueRef &g)
{
    const unsigned lane = threadIdx.x & 31u;
    const unsigned cnt = __popc(bits);
    unsigned incl = cnt;

#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const unsigned t = __shfl_up_sync(FULL, incl, d);

        if (lane >= (unsigned)d)
            incl += t;
    }
    const unsigned total = __shfl_sync(FULL, incl, 31);

    if (total == 0)
        return;
    unsigned long long base = 0, gbase = 0;

    if (lane == 0) {
        base = atomicAdd(sq_n, (unsigned long long)total);
        const unsigned long long room = base < sq_cap ? sq_cap - base : 0;

        if (total > room)
            gbase = atomicAdd(g.count, total - room);
    }
    base = __shfl_sync(FULL, base, 0);
    gbase = __shfl_sync(FULL, gbase, 0);
    const unsigned in_sq = base < sq_cap ? (unsigned)min((unsigned long long)total,
                                                         sq_cap - base)
                                         : 0u;
    unsigned pos = incl - cnt;
    bool spilled = false;

    while (bits) {
        const int k = __ffs(bits) - 1;
        uint32_t q = p;

        bits &= bits - 1;
        if (!SELF)
            q = (uint32_t)((int64_t)p + (int64_t)nb_dy<CONN>(k) * (int64_t)w + nb_dx<CONN>(k));
        if (pos < in_sq) {
            sq[base + pos] = q;
        } else {
            const unsigned long long gpos = gbase + (pos - in_sq);

            if (gpos < g.cap) {
                g.q[gpos] = q;
            } else {
                mark_pending(g, q);
                spilled = true;
            }
        }
        pos++;
    }
    if (__any_sync(FULL, spilled) && lane == 0)
        atomicOr(g.pend_flag, 1u);
}

/* Block-level flush of n (block-uniform) entries of sq into the global queue: one atomic. */
__device__ __forceinline__ void
block_flush(const uint32_t *sq, unsigned n, const QueueRef &g, unsigned long long *s_gbase,
            unsigned tid, unsigned nthreads)
{
    if (n == 0)
        return;
    if (tid == 0)
        *s_gbase = atomicAdd(g.count, (unsigned long long)n);
    __syncthreads();
    const unsigned long long base = *s_gbase;
    int spilled = 0;

    for (unsigned i = tid; i < n; i += nthreads) {
        if (base + i < g.cap) {
            g.q[base + i] = sq[i];
        } else {
            mark_pending(g, sq[i]);
            spilled = 1;
        }
    }
    if (__syncthreads_or(spilled) && tid == 0)
        atomicOr(g.pend_flag, 1u);
}

/* ---- phase 1: raster passes ------------------------------------------------------------ */

/* Add a warp's changed-pixel counts to the round's counter (all lanes call it). */
__device__ __forceinline__ void
count_changes(unsigned n, int lane, unsigned long long *counter)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
        n += __shfl_xor_sync(FULL, n, d);
    if (lane == 0 && n)
        atomicAdd(counter, (unsigned long long)n);
}

/* K samples of a row from x0 (16-byte vector when aligned and inside the row). Outside the
 * row: `fill`. */
template <typename T, int K>
__device__ __forceinline__ void
load_chunk(const T *row, int64_t x0, int64_t w, uint32_t fill, uint32_t (&v)[K])
{
    constexpr int PER_WORD = 4 / (int)sizeof(T);
    constexpr int BITS = 8 * (int)sizeof(T);
    constexpr uint32_t MASK = (uint32_t)((1u << BITS) - 1u);
    const T *p = row + x0;

    if (x0 + K <= w && (reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const uint32_t wv[4] = {u.x, u.y, u.z, u.w};

#pragma unroll
        for (int k = 0; k < K; k++)
            v[k] = (wv[k / PER_WORD] >> (BITS * (k % PER_WORD))) & MASK;
    } else {
#pragma unroll
        for (int k = 0; k < K; k++)
            v[k] = x0 + k < w ? (uint32_t)p[k] : fill;
    }
}

template <typename T, int K>
__device__ __forceinline__ void
store_chunk(T *row, int64_t x0, int64_t w, const uint32_t (&v)[K])
{
    constexpr int PER_WORD = 4 / (int)sizeof(T);
    constexpr int BITS = 8 * (int)sizeof(T);
    T *p = row + x0;

    if (x0 + K <= w && (reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
        uint32_t wv[4] = {0, 0, 0, 0};

#pragma unroll
        for (int k = 0; k < K; k++)
            wv[k / PER_WORD] |= v[k] << (BITS * (k % PER_WORD));
        *reinterpret_cast<uint4 *>(p) = make_uint4(wv[0], wv[1], wv[2], wv[3]);
    } else {
#pragma unroll
        for (int k = 0; k < K; k++)
            if (x0 + k < w)
                p[k] = (T)v[k];
    }
}

/*
 * One warp per row; FWD: left to right (N^{+,0}), else right to left (N^{-,0}). Each lane
 * owns K consecutive pixels of a 32*K segment; the segment's clamp functions are scanned
 * across the warp in processing order, the carry enters from the previous segment.
 */
template <typename T, bool FWD>
__global__ void __launch_bounds__(MreconPolicy::ROW_WARPS * 32)
row_pass_kernel(unsigned char *jb, int64_t js, const unsigned char *ib, int64_t is, int32_t w,
                int32_t h, const unsigned long long *prev, unsigned long long min_changed,
                unsigned long long *counter)
{
    constexpr int K = 16 / (int)sizeof(T);
    constexpr int SEG = 32 * K;
    const int lane = (int)(threadIdx.x & 31u);
    const int64_t y = (int64_t)blockIdx.x * MreconPolicy::ROW_WARPS + (threadIdx.x >> 5);
    unsigned nchanged = 0;

    if (y >= h || (prev && ld_relaxed64(prev) < min_changed))
        return; /* whole warp; or the raster phase has converged enough */
    T *jr = row_ptr<T>(jb, js, y);
    const T *ir = row_ptr<T>(ib, is, y);
    const int64_t nseg = ((int64_t)w + SEG - 1) / SEG;
    uint32_t carry = 0; /* J of the pixel before the segment; 0 = none (max identity) */

    for (int64_t s = 0; s < nseg; s++) {
        const int64_t seg = FWD ? s : nseg - 1 - s;
        const int64_t x0 = seg * SEG + (int64_t)lane * K;
        uint32_t jv[K], iv[K];
        uint32_t lo = 0, hi = 0xffffffffu;

        /* Outside the row: the identity clamp (lo 0, hi max). */
        load_chunk<T, K>(jr, x0, w, 0u, jv);
        load_chunk<T, K>(ir, x0, w, 0xffffffffu, iv);
#pragma unroll
        for (int kk = 0; kk < K; kk++) {
            const int k = FWD ? kk : K - 1 - kk;

            lo = clampv(lo, jv[k], iv[k]);
            hi = clampv(hi, jv[k], iv[k]);
        }
        /* Inclusive scan: lane composite after the composites of the lanes before it. */
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const uint32_t ulo = FWD ? __shfl_up_sync(FULL, lo, d) : __shfl_down_sync(FULL, lo, d);
            const uint32_t uhi = FWD ? __shfl_up_sync(FULL, hi, d) : __shfl_down_sync(FULL, hi, d);

            if (FWD ? lane >= d : lane + d < 32) {
                const uint32_t nlo = clampv(ulo, lo, hi);

                hi = clampv(uhi, lo, hi);
                lo = nlo;
            }
        }
        const uint32_t after = clampv(carry, lo, hi); /* J leaving this lane's chunk */
        uint32_t v = FWD ? __shfl_up_sync(FULL, after, 1) : __shfl_down_sync(FULL, after, 1);
        uint32_t out[K];
        bool changed = false;

        if (lane == (FWD ? 0 : 31))
            v = carry;
#pragma unroll
        for (int kk = 0; kk < K; kk++) {
            const int k = FWD ? kk : K - 1 - kk;

            v = clampv(v, jv[k], iv[k]);
            out[k] = v;
            changed |= v != jv[k];
            nchanged += v != jv[k];
        }
        if (changed)
            store_chunk<T, K>(jr, x0, w, out);
        carry = __shfl_sync(FULL, after, FWD ? 31 : 0);
    }
    count_changes(nchanged, lane, counter);
}

/* One column step: the new J from the pixel, its mask, and the row before (prev, shuffled
 * to the diagonals for 8-connectivity; lanes at the strip edge see no diagonal outside). */
template <int CONN>
__device__ __forceinline__ uint32_t
col_step(uint32_t j, uint32_t i, uint32_t prev, int lane)
{
    uint32_t m = max(j, prev);

    if (CONN == 8) {
        uint32_t l = __shfl_up_sync(FULL, prev, 1);
        uint32_t r = __shfl_down_sync(FULL, prev, 1);

        if (lane == 0)
            l = 0;
        if (lane == 31)
            r = 0;
        m = max(m, max(l, r));
    }
    return min(m, i);
}

/* One warp per (32-column strip, row segment); FWD walks down (N^{0,+}), else up. */
template <typename T, int CONN, bool FWD>
__global__ void __launch_bounds__(MreconPolicy::COL_WARPS * 32)
col_pass_kernel(unsigned char *jb, int64_t js, const unsigned char *ib, int64_t is, int32_t w,
                int32_t h, int64_t seg_rows, int64_t seg_off, const unsigned long long *prev,
                unsigned long long min_changed, unsigned long long *counter)
{
    constexpr int U = MreconPolicy::COL_UNROLL;
    const int lane = (int)(threadIdx.x & 31u);
    const int64_t strip = (int64_t)blockIdx.x * MreconPolicy::COL_WARPS + (threadIdx.x >> 5);
    const int64_t x = strip * 32 + lane;
    unsigned nchanged = 0;

    if (strip * 32 >= w || (prev && ld_relaxed64(prev) < min_changed))
        return; /* whole warp; or the raster phase has converged enough */
    const bool valid = x < w;
    const int64_t xs = valid ? x : 0;
    const int64_t y0 = max((int64_t)blockIdx.y * seg_rows - seg_off, (int64_t)0);
    const int64_t y1 = min((int64_t)(blockIdx.y + 1) * seg_rows - seg_off, (int64_t)h);
    const int64_t n = y1 - y0;
    uint32_t up = 0; /* the row before, new values (0: none) */
    int64_t i = 0;

    for (; i + U <= n; i += U) {
        uint32_t jv[U], iv[U];

#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t y = FWD ? y0 + i + u : y1 - 1 - i - u;

            jv[u] = valid ? (uint32_t)row_ptr<T>(jb, js, y)[xs] : 0u;
            iv[u] = valid ? (uint32_t)__ldg(row_ptr<T>(ib, is, y) + xs) : 0u;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t y = FWD ? y0 + i + u : y1 - 1 - i - u;
            const uint32_t nv = col_step<CONN>(jv[u], iv[u], up, lane);

            if (valid && nv != jv[u]) {
                row_ptr<T>(jb, js, y)[xs] = (T)nv;
                nchanged++;
            }
            up = valid ? nv : 0u;
        }
    }
    for (; i < n; i++) {
        const int64_t y = FWD ? y0 + i : y1 - 1 - i;
        const uint32_t jv = valid ? (uint32_t)row_ptr<T>(jb, js, y)[xs] : 0u;
        const uint32_t iv = valid ? (uint32_t)__ldg(row_ptr<T>(ib, is, y) + xs) : 0u;
        const uint32_t nv = col_step<CONN>(jv, iv, up, lane);

        if (valid && nv != jv) {
            row_ptr<T>(jb, js, y)[xs] = (T)nv;
            nchanged++;
        }
        up = valid ? nv : 0u;
    }
    count_changes(nchanged, lane, counter);
}

/* ---- phase 2: initial wavefront, J -> J32 ---------------------------------------------- */

/* Per-pixel kernels walk 32 x (TILE_ROWS * TILE_RPT) tiles, grid-striding over them. */
struct TileGrid {
    int64_t tiles_x, tiles;
};

__host__ __device__ inline TileGrid
tile_grid(int32_t w, int32_t h)
{
    constexpr int64_t ROWS = MreconPolicy::TILE_ROWS * MreconPolicy::TILE_RPT;
    TileGrid g;

    g.tiles_x = ((int64_t)w + 31) / 32;
    g.tiles = g.tiles_x * (((int64_t)h + ROWS - 1) / ROWS);
    return g;
}

template <typename T, int CONN>
__global__ void __launch_bounds__(32 * MreconPolicy::TILE_ROWS)
init_front_kernel(const unsigned char *jb, int64_t js, const unsigned char *ib, int64_t is,
                  int32_t w, int32_t h, uint32_t *j32, QueueRef g, Ctrl *ctrl)
{
    constexpr unsigned CAP = 32 * MreconPolicy::TILE_ROWS * MreconPolicy::TILE_RPT;
    constexpr int64_t ROWS = MreconPolicy::TILE_ROWS * MreconPolicy::TILE_RPT;
    __shared__ uint32_t sq[CAP];
    __shared__ unsigned long long s_n, s_gbase;
    const unsigned tid = threadIdx.y * 32 + threadIdx.x;
    const TileGrid tg = tile_grid(w, h);

    if (blockIdx.x == 0 && tid == 0)
        ctrl->t_init = global_ns();
    for (int64_t t = blockIdx.x; t < tg.tiles; t += gridDim.x) {
        const int64_t x = (t % tg.tiles_x) * 32 + threadIdx.x;
        const int64_t ytile = (t / tg.tiles_x) * ROWS;

        if (tid == 0)
            s_n = 0;
        __syncthreads();
        for (int r = 0; r < MreconPolicy::TILE_RPT; r++) {
            const int64_t y = ytile + (int64_t)r * MreconPolicy::TILE_ROWS + threadIdx.y;
            unsigned push = 0;
            uint32_t p = 0;

            if (y >= h)
                break; /* whole warp */
            if (x < w) {
                const uint32_t jp = row_ptr<T>(jb, js, y)[x];

                p = (uint32_t)(y * (int64_t)w + x);
#pragma unroll
                for (int k = 0; k < CONN; k++) {
                    const int64_t nx = x + nb_dx<CONN>(k), ny = y + nb_dy<CONN>(k);

                    if (nx < 0 || nx >= w || ny < 0 || ny >= h)
                        continue;
                    const uint32_t jq = row_ptr<T>(jb, js, ny)[nx];
                    const uint32_t iq = __ldg(row_ptr<T>(ib, is, ny) + nx);

                    if (jq < jp && jq < iq)
                        push = 1;
                }
                j32[p] = (jp << 1) | push;
            }
            warp_push<CONN, true>(p, push, (uint32_t)w, sq, &s_n, CAP, g);
        }
        __syncthreads();
        block_flush(sq, (unsigned)min(s_n, (unsigned long long)CAP), g, &s_gbase, tid,
                    32 * MreconPolicy::TILE_ROWS);
        __syncthreads();
    }
}

/* Seeded mode: J -> J32 for the whole tile. */
template <typename T>
__global__ void __launch_bounds__(32 * MreconPolicy::TILE_ROWS)
widen_kernel(const unsigned char *jb, int64_t js, int32_t w, int32_t h, uint32_t *j32,
             Ctrl *ctrl)
{
    constexpr int64_t ROWS = MreconPolicy::TILE_ROWS * MreconPolicy::TILE_RPT;
    const TileGrid tg = tile_grid(w, h);

    if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0)
        ctrl->t_start = ctrl->t_init = global_ns();
    for (int64_t t = blockIdx.x; t < tg.tiles; t += gridDim.x) {
        const int64_t x = (t % tg.tiles_x) * 32 + threadIdx.x;
        const int64_t ytile = (t / tg.tiles_x) * ROWS;

        if (x >= w)
            continue;
        for (int r = 0; r < MreconPolicy::TILE_RPT; r++) {
            const int64_t y = ytile + (int64_t)r * MreconPolicy::TILE_ROWS + threadIdx.y;

            if (y < h)
                j32[y * (int64_t)w + x] = (uint32_t)row_ptr<T>(jb, js, y)[x] << 1;
        }
    }
}

/* Seeded mode: the seeds are the initial wavefront (out-of-range ones are ignored). */
template <int CONN>
__global__ void __launch_bounds__(MreconPolicy::SEED_THREADS)
seed_kernel(const uint32_t *seeds, int64_t n_seeds, uint64_t npix, uint32_t *j32, QueueRef g)
{
    constexpr unsigned CAP = 4 * MreconPolicy::SEED_THREADS;
    __shared__ uint32_t sq[CAP];
    __shared__ unsigned long long s_n, s_gbase;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;

    if (threadIdx.x == 0)
        s_n = 0;
    __syncthreads();
    /* Block-uniform trip count, so that every warp reaches every push. */
    for (int64_t base = (int64_t)blockIdx.x * blockDim.x; base < n_seeds; base += step) {
        const int64_t i = base + threadIdx.x;
        uint32_t p = 0;
        unsigned push = 0;

        if (i < n_seeds) {
            p = seeds[i];
            /* Duplicates are queued once: the first to set the flag queues the pixel. */
            push = (uint64_t)p < npix && !(atomicOr(j32 + p, 1u) & 1u);
        }
        warp_push<CONN, true>(p, push, 0u, sq, &s_n, CAP, g);
    }
    __syncthreads();
    block_flush(sq, (unsigned)min(s_n, (unsigned long long)CAP), g, &s_gbase, threadIdx.x,
                blockDim.x);
}

/* ---- phase 3: wavefront ---------------------------------------------------------------- */

template <typename T>
struct WaveArgs {
    uint32_t *j32;
    const unsigned char *mask;
    int64_t mstride;
    int32_t w, h;
    uint32_t *q0, *q1;         /* global queue buffers, cap elements each */
    unsigned long long cap;
    uint32_t *pending;
    uint64_t pend_words;
    Ctrl *ctrl;
    unsigned long long hungry; /* global entries that keep every thread busy next round */
};

/* Propagate from p to its neighbours; returns the bitmask of neighbours raised (the per-thread
 * queue). */
template <typename T, int CONN>
__device__ __forceinline__ unsigned
relax_from(const WaveArgs<T> &a, uint32_t p)
{
    const uint32_t w = (uint32_t)a.w;
    const uint32_t y = p / w, x = p - y * w;
    /* Take p out of the queue (clear its flag) and read its value in one atomic: a raise
     * after this point finds the flag clear and queues p again. */
    const uint32_t vp = atomicAnd(a.j32 + p, ~1u) >> 1;
    unsigned raised = 0;

    if (vp == 0)
        return 0;
#pragma unroll
    for (int k = 0; k < CONN; k++) {
        const int dx = nb_dx<CONN>(k), dy = nb_dy<CONN>(k);

        if ((dx < 0 && x == 0) || (dx > 0 && x + 1 >= w) || (dy < 0 && y == 0) ||
            (dy > 0 && y + 1 >= (uint32_t)a.h))
            continue;
        const uint32_t q = (uint32_t)((int64_t)p + (int64_t)dy * (int64_t)w + dx);
        const uint32_t iq = __ldg(row_ptr<T>(a.mask, a.mstride, (int64_t)y + dy) + x + dx);
        const uint32_t v = min(vp, iq);
        const uint32_t nv = (v << 1) | 1u;

        /* Queue q when this update set its flag (a raise that finds the flag set is picked up
         * by the pending processing of q, whose atomicAnd comes later on that word). */
        if ((ld_relaxed(a.j32 + q) >> 1) < v) {
            const uint32_t old = atomicMax(a.j32 + q, nv);

            if (old < nv && !(old & 1u))
                raised |= 1u << k;
        }
    }
    return raised;
}

template <typename T, int CONN>
__global__ void __launch_bounds__(MreconPolicy::WF_THREADS)
wavefront_kernel(WaveArgs<T> a)
{
    using P = MreconPolicy;
    __shared__ uint32_t sbuf[2][P::BQ_CAP];
    __shared__ unsigned long long s_n[2], s_gbase;
    __shared__ int s_stop;
    cg::grid_group grid = cg::this_grid();
    const unsigned tid = threadIdx.x;
    Ctrl *c = a.ctrl;
    unsigned long long processed = 0, local_steps = 0;
    uint32_t r = 0;

    if (blockIdx.x == 0 && tid == 0) {
        c->t_wave = global_ns();
        c->initial = ld_relaxed64(&c->count[0]);
    }
    for (;; r++) {
        const unsigned si = r % 3, so = (r + 1) % 3, sr = (r + 2) % 3;
        const unsigned long long n_in = min(ld_relaxed64(&c->count[si]), a.cap);
        const unsigned pend = ld_relaxed(&c->pend[si]);
        const uint32_t *qin = (r & 1) ? a.q1 : a.q0;
        QueueRef out;

        if (n_in == 0 && !pend)
            break; /* the same decision in every block: nobody writes slot si this round */
        out.q = (r & 1) ? a.q0 : a.q1;
        out.count = &c->count[so];
        out.cap = a.cap;
        out.pending = a.pending;
        out.pend_flag = &c->pend[so];
        if (blockIdx.x == 0 && tid == 0) {
            c->count[sr] = 0;
            c->pend[sr] = 0;
            if (n_in > 0 && pend)
                atomicOr(out.pend_flag, 1u); /* the bitmap keeps its pixels */
        }
        if (n_in > 0) {
            /* Process: a contiguous chunk of the global queue per block. */
            const unsigned long long chunk = (n_in + gridDim.x - 1) / gridDim.x;
            const unsigned long long lo = min(chunk * blockIdx.x, n_in);
            const unsigned long long hi = min(lo + chunk, n_in);
            unsigned cur = 0;
            unsigned long long n;

            if (tid == 0)
                s_n[0] = 0;
            __syncthreads();
            for (unsigned long long base = lo; base < hi; base += P::WF_THREADS) {
                const unsigned long long i = base + tid;
                uint32_t p = 0;
                unsigned bits = 0;

                if (i < hi) {
                    p = __ldcg(qin + i);
                    bits = relax_from<T, CONN>(a, p);
                    processed++;
                }
                warp_push<CONN, false>(p, bits, (uint32_t)a.w, sbuf[0], &s_n[0], P::BQ_CAP, out);
                __syncthreads();
                n = s_n[0];
                __syncthreads(); /* a uniform decision before anyone pushes again */
                if (n >= P::BQ_FLUSH) {
                    block_flush(sbuf[0], (unsigned)min(n, (unsigned long long)P::BQ_CAP), out,
                                &s_gbase, tid, P::WF_THREADS);
                    if (tid == 0)
                        s_n[0] = 0;
                    __syncthreads();
                }
            }
            __syncthreads();
            n = min(s_n[0], (unsigned long long)P::BQ_CAP);
            /* Chase a small front locally, block barriers only. */
            for (unsigned it = 0; n > 0 && n <= P::LOCAL_MAX && it < P::LOCAL_ITERS; it++) {
                if (tid == 0) {
                    s_n[cur ^ 1] = 0;
                    s_stop = ld_relaxed64(out.count) >= a.hungry;
                }
                __syncthreads();
                if (s_stop)
                    break;
                for (unsigned base = 0; base < n; base += P::WF_THREADS) {
                    const unsigned i = base + tid;
                    uint32_t p = 0;
                    unsigned bits = 0;

                    if (i < n) {
                        p = sbuf[cur][i];
                        bits = relax_from<T, CONN>(a, p);
                        processed++;
                    }
                    warp_push<CONN, false>(p, bits, (uint32_t)a.w, sbuf[cur ^ 1], &s_n[cur ^ 1],
                                           P::BQ_CAP, out);
                }
                __syncthreads();
                cur ^= 1;
                n = min(s_n[cur], (unsigned long long)P::BQ_CAP);
                local_steps++;
            }
            block_flush(sbuf[cur], (unsigned)n, out, &s_gbase, tid, P::WF_THREADS);
        } else {
            /* Compact: pending bits back into the queue, as many as fit; the rest stay. */
            const uint64_t nw = a.pend_words;
            const uint64_t step = (uint64_t)gridDim.x * P::WF_THREADS;
            const unsigned lane = tid & 31u;

            for (uint64_t base = (uint64_t)blockIdx.x * P::WF_THREADS; base < nw; base += step) {
                const uint64_t i = base + tid;
                const uint32_t word = i < nw ? __ldcg(a.pending + i) : 0u;
                const unsigned cnt = __popc(word);
                unsigned incl = cnt;

#pragma unroll
                for (int d = 1; d < 32; d <<= 1) {
                    const unsigned t = __shfl_up_sync(FULL, incl, d);

                    if (lane >= (unsigned)d)
                        incl += t;
                }
                const unsigned total = __shfl_sync(FULL, incl, 31);
                unsigned long long gbase = 0;

                if (total == 0)
                    continue; /* warp-uniform */
                if (lane == 0)
                    gbase = atomicAdd(out.count, (unsigned long long)total);
                gbase = __shfl_sync(FULL, gbase, 0);
                uint32_t keep = 0, bits = word;
                unsigned long long pos = gbase + (incl - cnt);

                while (bits) {
                    const int b = __ffs(bits) - 1;

                    bits &= bits - 1;
                    if (pos < out.cap)
                        out.q[pos] = (uint32_t)(i * 32 + (uint64_t)b);
                    else
                        keep |= 1u << b;
                    pos++;
                }
                if (word)
                    a.pending[i] = keep;
                if (__any_sync(FULL, keep != 0) && lane == 0)
                    atomicOr(out.pend_flag, 1u);
            }
            if (blockIdx.x == 0 && tid == 0)
                c->compactions++;
        }
        grid.sync();
    }
    atomicAdd(&c->processed, processed);
    if (tid == 0)
        atomicAdd(&c->local_steps, local_steps);
    if (blockIdx.x == 0 && tid == 0) {
        c->rounds = r;
        c->t_wave_end = global_ns();
    }
}

/* ---- phase 4: J32 -> J ----------------------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(32 * MreconPolicy::TILE_ROWS)
narrow_kernel(unsigned char *jb, int64_t js, int32_t w, int32_t h, const uint32_t *j32)
{
    constexpr int64_t ROWS = MreconPolicy::TILE_ROWS * MreconPolicy::TILE_RPT;
    const TileGrid tg = tile_grid(w, h);

    for (int64_t t = blockIdx.x; t < tg.tiles; t += gridDim.x) {
        const int64_t x = (t % tg.tiles_x) * 32 + threadIdx.x;
        const int64_t ytile = (t / tg.tiles_x) * ROWS;

        if (x >= w)
            continue;
        for (int r = 0; r < MreconPolicy::TILE_RPT; r++) {
            const int64_t y = ytile + (int64_t)r * MreconPolicy::TILE_ROWS + threadIdx.y;

            if (y < h)
                row_ptr<T>(jb, js, y)[x] = (T)(j32[y * (int64_t)w + x] >> 1);
        }
    }
}

__global__ void __launch_bounds__(32)
stamp_kernel(Ctrl *ctrl, unsigned long long raster_min)
{
    if (threadIdx.x == 0) {
        ctrl->t_start = global_ns();
        ctrl->raster_min = raster_min;
    }
}

/* ---- host side ------------------------------------------------------------------------- */

/* Scratch layout (offsets from the 256-aligned base). */
struct Layout {
    uint64_t npix, cap, pend_words;
    size_t j32, q0, q1, pending, total;
};

bool
make_layout(int32_t w, int32_t h, int64_t queue_capacity, Layout *L)
{
    *L = Layout();
    if (w < 0 || h < 0 || queue_capacity < 0 || (uint64_t)queue_capacity > MAX_PIXELS)
        return false;
    L->npix = (uint64_t)w * (uint64_t)h;
    if (L->npix == 0)
        return true;
    if (L->npix > MAX_PIXELS)
        return false;
    L->cap = queue_capacity > 0 ? (uint64_t)queue_capacity
                                : (L->npix / 8 > MreconPolicy::MIN_CAPACITY
                                       ? L->npix / 8 : MreconPolicy::MIN_CAPACITY);
    L->pend_words = (L->npix + 31) / 32;
    L->j32 = align_up(sizeof(Ctrl));
    L->q0 = L->j32 + align_up(L->npix * sizeof(uint32_t));
    L->q1 = L->q0 + align_up(L->cap * sizeof(uint32_t));
    L->pending = L->q1 + align_up(L->cap * sizeof(uint32_t));
    L->total = L->pending + align_up(L->pend_words * sizeof(uint32_t)) + ALIGN; /* + base slack */
    return true;
}

unsigned
grid_1d(int64_t items, int64_t cap)
{
    if (items < 1)
        return 1;
    return (unsigned)(items < cap ? items : cap);
}

template <typename T, int CONN>
tw_status
launch_mrecon(tw_tile_view *marker, const tw_tile_view *mask, const uint32_t *d_seeds,
              int64_t n_seeds, unsigned char *scratch, const Layout &L, cudaStream_t s)
{
    using P = MreconPolicy;
    const int32_t w = marker->w, h = marker->h;
    unsigned char *jb = static_cast<unsigned char *>(marker->data);
    const unsigned char *ib = static_cast<const unsigned char *>(mask->data);
    const int64_t js = marker->stride, is = mask->stride;
    Ctrl *ctrl = reinterpret_cast<Ctrl *>(scratch);
    uint32_t *j32 = reinterpret_cast<uint32_t *>(scratch + L.j32);
    uint32_t *pending = reinterpret_cast<uint32_t *>(scratch + L.pending);
    QueueRef q0 = {reinterpret_cast<uint32_t *>(scratch + L.q0), &ctrl->count[0], L.cap, pending,
                   &ctrl->pend[0]};
    const TileGrid tg = tile_grid(w, h);
    const dim3 tile_block(32, P::TILE_ROWS);
    const unsigned tile_blocks = grid_1d(tg.tiles, 1 << 20);
    tw_status st;

    if (cudaMemsetAsync(ctrl, 0, sizeof(Ctrl), s) != cudaSuccess ||
        cudaMemsetAsync(pending, 0, L.pend_words * sizeof(uint32_t), s) != cudaSuccess) {
        (void)cudaGetLastError();
        return TW_E_DEVICE;
    }
    if (!d_seeds) {
        const unsigned row_blocks = grid_1d(((int64_t)h + P::ROW_WARPS - 1) / P::ROW_WARPS,
                                            INT32_MAX);
        int64_t seg = P::COL_SEG_ROWS;

        /* Segments per column within the grid's y limit, one more for the offset ones. */
        if (((int64_t)h + seg - 1) / seg > 65534)
            seg = ((int64_t)h + 65533) / 65534;
        const unsigned strips = grid_1d((((int64_t)w + 31) / 32 + P::COL_WARPS - 1) /
                                            P::COL_WARPS, INT32_MAX);
        /* Rounds after the first run only while the last one changed at least this many
         * pixels: each kernel reads the counter on the device and returns at once if not. */
        const unsigned long long raster_min = L.npix / P::RASTER_MIN_CHANGE_DIV + 1;

        stamp_kernel<<<1, 32, 0, s>>>(ctrl, raster_min);
        for (int r = 0; r < P::RASTER_ROUNDS; r++) {
            const unsigned long long *prev = r ? &ctrl->raster_changed[r - 1] : nullptr;
            unsigned long long *cnt = &ctrl->raster_changed[r];
            /* The forward and backward column passes cut the columns at different rows
             * (half a segment apart), so that together they carry values across every cut. */
            const int64_t off_f = (r & 1) ? seg / 2 : 0, off_b = (r & 1) ? 0 : seg / 2;
            const dim3 grid_f(strips, grid_1d(((int64_t)h + off_f + seg - 1) / seg, 65535));
            const dim3 grid_b(strips, grid_1d(((int64_t)h + off_b + seg - 1) / seg, 65535));

            row_pass_kernel<T, true><<<row_blocks, P::ROW_WARPS * 32, 0, s>>>(
                jb, js, ib, is, w, h, prev, raster_min, cnt);
            col_pass_kernel<T, CONN, true><<<grid_f, P::COL_WARPS * 32, 0, s>>>(
                jb, js, ib, is, w, h, seg, off_f, prev, raster_min, cnt);
            row_pass_kernel<T, false><<<row_blocks, P::ROW_WARPS * 32, 0, s>>>(
                jb, js, ib, is, w, h, prev, raster_min, cnt);
            col_pass_kernel<T, CONN, false><<<grid_b, P::COL_WARPS * 32, 0, s>>>(
                jb, js, ib, is, w, h, seg, off_b, prev, raster_min, cnt);
        }
        init_front_kernel<T, CONN><<<tile_blocks, tile_block, 0, s>>>(jb, js, ib, is, w, h, j32,
                                                                     q0, ctrl);
    } else {
        widen_kernel<T><<<tile_blocks, tile_block, 0, s>>>(jb, js, w, h, j32, ctrl);
        seed_kernel<CONN><<<grid_1d((n_seeds + P::SEED_THREADS - 1) / P::SEED_THREADS, 4096),
                            P::SEED_THREADS, 0, s>>>(d_seeds, n_seeds, L.npix, j32, q0);
    }
    if ((st = launched()) != TW_OK)
        return st;

    /* The wavefront: a cooperative grid of as many blocks as can be resident (fewer for small
     * tiles, so that their grid barriers stay cheap). */
    int64_t cap = 0;
    auto kernel = wavefront_kernel<T, CONN>;

    if (twi_cu::coop_capacity(kernel, P::WF_THREADS, P::WF_BLOCKS_PER_SM, &cap) != TW_OK)
        return TW_E_DEVICE;
    const unsigned wf_blocks =
        grid_1d((int64_t)((L.npix + P::WF_THREADS - 1) / P::WF_THREADS), cap);
    WaveArgs<T> a;

    a.j32 = j32;
    a.mask = ib;
    a.mstride = is;
    a.w = w;
    a.h = h;
    a.q0 = q0.q;
    a.q1 = reinterpret_cast<uint32_t *>(scratch + L.q1);
    a.cap = L.cap;
    a.pending = pending;
    a.pend_words = L.pend_words;
    a.ctrl = ctrl;
    a.hungry = (unsigned long long)wf_blocks * P::WF_THREADS;
    void *args[] = {&a};

    if (cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(kernel), dim3(wf_blocks),
                                    dim3(P::WF_THREADS), args, 0, s) != cudaSuccess) {
        (void)cudaGetLastError();
        return TW_E_DEVICE;
    }
    narrow_kernel<T><<<tile_blocks, tile_block, 0, s>>>(jb, js, w, h, j32);
    return launched();
}

} // namespace

extern "C" size_t
twi_cuda_mrecon_scratch_size(int32_t w, int32_t h, int64_t queue_capacity)
{
    Layout L;

    if (!make_layout(w, h, queue_capacity, &L))
        return 0;
    return L.total;
}

extern "C" tw_status
twi_cuda_mrecon(tw_tile_view *d_marker, const tw_tile_view *d_mask, int conn,
                const uint32_t *d_seeds, int64_t n_seeds, void *d_scratch, size_t scratch_bytes,
                int64_t queue_capacity, void *stream)
{
    try {
        Layout L;
        tw_status st;

        /* The checks of the CPU twin (kern/mrecon.h), seed values excepted (device memory). */
        if (twi_mrecon_check(d_marker, d_mask, conn) != TW_OK || (d_seeds && n_seeds < 0))
            return TW_E_INVALID;
        if (!make_layout(d_marker->w, d_marker->h, queue_capacity, &L))
            return TW_E_INVALID;
        if (L.npix == 0 || (d_seeds && n_seeds == 0))
            return TW_OK; /* nothing to reconstruct, or nothing was raised */
        if (!d_scratch || scratch_bytes < L.total)
            return TW_E_INVALID;
        unsigned char *base = twi_cu::aligned_base(d_scratch);
        cudaStream_t s = static_cast<cudaStream_t>(stream);

        if (d_marker->type == TW_U8)
            st = conn == 8 ? launch_mrecon<uint8_t, 8>(d_marker, d_mask, d_seeds, n_seeds, base,
                                                       L, s)
                           : launch_mrecon<uint8_t, 4>(d_marker, d_mask, d_seeds, n_seeds, base,
                                                       L, s);
        else
            st = conn == 8 ? launch_mrecon<uint16_t, 8>(d_marker, d_mask, d_seeds, n_seeds,
                                                        base, L, s)
                           : launch_mrecon<uint16_t, 4>(d_marker, d_mask, d_seeds, n_seeds,
                                                        base, L, s);
        return st != TW_OK ? st : twi_cu::finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}

/*
 * Test and benchmark hook (not used by the runtime; synchronises): counters and device
 * timestamps of the last run that used this scratch, after the stream has finished it.
 * out[0] rounds, [1] compactions, [2] entries processed, [3] initial entries, [4] local
 * steps, [5] raster ns, [6] initial-wavefront ns, [7] wavefront ns, [8] raster rounds run,
 * [9] pixels changed by the raster rounds (a pixel changed by several passes counts so).
 */
extern "C" tw_status
twi_cuda_mrecon_stats(const void *d_scratch, int64_t out[10])
{
    try {
        const unsigned char *base = static_cast<const unsigned char *>(d_scratch);
        Ctrl c;

        if (!d_scratch || !out)
            return TW_E_INVALID;
        base += (ALIGN - (uintptr_t)base % ALIGN) % ALIGN;
        if (cudaMemcpy(&c, base, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess) {
            (void)cudaGetLastError();
            return TW_E_DEVICE;
        }
        out[0] = (int64_t)c.rounds;
        out[1] = (int64_t)c.compactions;
        out[2] = (int64_t)c.processed;
        out[3] = (int64_t)c.initial;
        out[4] = (int64_t)c.local_steps;
        out[5] = (int64_t)(c.t_init - c.t_start);
        out[6] = (int64_t)(c.t_wave - c.t_init);
        out[7] = (int64_t)(c.t_wave_end - c.t_wave);
        out[8] = 0;
        out[9] = 0;
        for (int r = 0; r < MreconPolicy::RASTER_ROUNDS; r++) {
            if (c.t_init == c.t_start || (r && c.raster_changed[r - 1] < c.raster_min))
                break; /* seeded run, or this round returned at once */
            out[8]++;
            out[9] += (int64_t)c.raster_changed[r];
        }
        return TW_OK;
    } catch (...) {
        return TW_E_DEVICE;
    }
}
