/* SPDX-License-Identifier: MIT */
/* tilewave: border max-trees and attribute filters of one tile on CUDA (bottom-up areas). */

/*
 * What this computes: the CUDA twins of twi_maxtree_border_extract and twi_maxtree_filter_tile
 * (omp/maxtree_border.c), the same node numbers, arrays and output bytes, from a tile's levels
 * and its canonical parent image (kern/maxtree.h) in device memory. The CPU twins sort
 * the pixels and sweep them once upwards (areas, highest levels) and once downwards (answers);
 * neither order exists on the GPU, so both sweeps are recast as work that needs no order.
 *
 * 1. Bottom-up sweep (k_count, k_sweep). One 64-bit word per pixel, W = (area - 1) << 32 |
 *    tokens. k_init gives every pixel one token (its own); k_count adds one token to the
 *    parent of every canonical non-root pixel (one per child node), adds 1 << 32 to the
 *    canonical pixel of every other pixel (its area), and stamps non-canonical pixels' low half
 *    NONCANON. In k_sweep a node is finished by whoever removes its last token: its own thread
 *    (which sees low == 1 when all children already arrived, and removes its token with an
 *    atomic otherwise) or the last child to arrive, whose fetch_add both adds its area and
 *    removes its token. The finisher then arrives at the parent: atomicMax of its highest level
 *    (maxv) into the parent's `mx`, the border mark, then the release/acquire fetch_add, and goes
 *    on up only if it removed the parent's last token. So every node is finished exactly once,
 *    after all its children, with linear work; the longest chain of hand-offs is the tree's
 *    height (255 for 8-bit, up to 65535 for 16-bit: the sweep's critical path, about 1 us per
 *    level on an H100). The own token is what makes "leaf" unambiguous: without it a count of
 *    0 would mean either "no children" or "all children have just arrived".
 *    Hot spots: the big nodes of natural and noisy images (at every level, one component that
 *    holds most of the pixels at or above it) collect the increments of thousands of pixels
 *    and children on one word; serialised on one address they made k_count 2.5-3x slower.
 *    So blocks work on 64 x 32 regions, sum their increments (k_count) and their nodes' first
 *    arrivals (k_sweep: area, highest level, marks, tokens) per target in a shared hash table,
 *    and add each sum once; a full table falls back to the word itself. The protocol is
 *    unchanged: several children arriving in one fetch_add remove several tokens.
 * 2. Border marks (k_sidemark, then k_sweep). A node is in the border tree iff its subtree
 *    holds a side pixel, a bottom-up property: the side pixels mark their canonical pixel, and
 *    a marked node marks its parent before its release, so the parent's finisher sees it.
 *    Finished marked nodes count themselves into their 4096-pixel chunk (bsum).
 * 3. Numbering (k_bscan, k_number). Border-tree nodes are numbered by increasing canonical
 *    index: an exclusive scan of the chunk counts (one block), then each chunk with marks scans
 *    its mark bytes and stores the node number in `mx` (the highest level is read first and no
 *    longer needed). k_link fills lparent, subtracts each border-tree node's area from its
 *    parent's `own` and writes the side arrays.
 * 4. Filter answers (k_sweep, k_find). The answer of a node is that of its nearest ancestor
 *    (itself included) that is resolved: a border-tree node (d_res), the root, or a node that
 *    survives the rule; survival is monotone up a path (areas grow, and maxv - level(parent)
 *    grows since maxv does and the parent's level drops), as the CPU twin's top-down sweep
 *    relies on too. The finisher of a node therefore knows whether it is resolved and writes,
 *    in the now idle low half of W, a jump + 1 (itself when resolved, its parent otherwise) and,
 *    when resolved and not a border node, its answer in `mx`. k_find walks each pixel's jumps
 *    with path halving (any jump a thread writes points at an ancestor at or below the same
 *    resolved node, so the races are benign, and a stale jump read through L1 is still a valid
 *    jump) and writes the answer. AREA_MAP needs no jumps: the pixel's canonical area or d_res.
 *
 * Determinism: only integer sums, maxima and ORs are computed concurrently, and the numbering
 * is a scan: the bytes never depend on the order threads ran in.
 *
 * Scratch (twi_cuda_maxtree_filter_scratch_size): per pixel W 8 + mx 4 + mark 1 + the border tree's
 * arrays (level 2, maxv 2, lparent 4, own 4) = 25 bytes, plus the side arrays (4 (2 w + 2 h)), the
 * chunk counts (4 per 4096 pixels) and alignment. The filter uses the first 13 bytes a pixel.
 * Limits: w * h <= UINT32_MAX (TW_U32 parents).
 */
#include <cstddef>
#include <cstdint>

#include <cub/block/block_scan.cuh>
#include <cuda/atomic>
#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

namespace {

typedef unsigned long long u64;

/*
 * Tuning (in policies, not kernels), H100, tests/gpu/sanitize_maxtree.c time mode: 256 threads a
 * block; k_count and k_sweep on 64 x 32 regions (8 pixels a thread) with shared hash tables of
 * 4096 and 2048 slots (one global atomic per region and target instead of one per pixel: the
 * two kernels went from 926 + 842 us to 285 + 643 us on a 4096^2 8-bit tile, and from 1461 +
 * 1457 to 471 + 1161 us on 8-bit noise). The numbering works on chunks of 4096 mark bytes (256
 * threads x 16 bytes, one 16-byte load each); the chunk scan runs in one block of 1024 threads.
 */
struct AttrPolicy {
    static constexpr int THREADS = 256;
    /* k_count and k_sweep: a block owns a RW x RH region, RPT pixels a thread; its shared
     * hash tables (2^LOG_CAP slots) hold at most one entry per pixel, so they stay at most
     * half (count) or wholly (sweep, in theory; a few percent in practice) full. */
    static constexpr int RW = 64, RH = 32, RPT = RW * RH / THREADS;
    static constexpr int COUNT_LOG_CAP = 12, SWEEP_LOG_CAP = 11, MAX_PROBE = 16;
    static constexpr int ITEMS = 16;                 /* mark bytes per thread (one uint4) */
    static constexpr int LOG_CHUNK = 12;
    static constexpr int CHUNK = THREADS * ITEMS;    /* pixels per numbering chunk */
    static constexpr int SCAN_THREADS = 1024;
    static constexpr int SCAN_ITEMS = 4;
};
static_assert(AttrPolicy::CHUNK == 1 << AttrPolicy::LOG_CHUNK, "chunk size");
static_assert(AttrPolicy::THREADS % AttrPolicy::RW == 0 &&
                  AttrPolicy::RW * AttrPolicy::RH == AttrPolicy::THREADS * AttrPolicy::RPT,
              "region shape");
static_assert(AttrPolicy::RPT * AttrPolicy::THREADS < (1 << 16),
              "tokens and marks of one region's arrivals must fit 16 bits each");
static_assert(12 << AttrPolicy::COUNT_LOG_CAP <= 48 * 1024, "count table over 48 KB");
static_assert(16 << AttrPolicy::SWEEP_LOG_CAP <= 48 * 1024, "sweep table over 48 KB");

using twi_cu::ALIGN;
using twi_cu::aligned_base;
using twi_cu::finish;
using twi_cu::launched;
constexpr uint32_t NONCANON = 0xffffffffu;  /* low half of W for non-canonical pixels */

enum Mode { M_BORDER, M_AREA, M_HEIGHT, M_MAP };

/* Everything the kernels see of a tile and its scratch. */
struct Tile {
    const unsigned char *lv;    /* levels (row stride = w * sizeof(T) + lpad) */
    uint64_t lpad;
    const uint32_t *par;        /* packed parent image */
    uint32_t w, h, n;           /* n = w * h <= UINT32_MAX */
    uint32_t nch;               /* numbering chunks */
    uint32_t nrx;               /* regions per row (k_count, k_sweep) */
    u64 *W;                     /* [n] (area - 1) << 32 | tokens, later jump + 1 */
    uint32_t *mx;               /* [n] highest level; then the answer or the node number */
    unsigned char *mark;        /* [nch * CHUNK] border-tree marks, 0 / 1 */
    uint32_t *bsum;             /* [nch + 1] marks per chunk, then their exclusive scan */
    int64_t *N;                 /* border-tree nodes */
};

/* The border tree's arrays (BORDER) and the filter's parameters. */
struct Outs {
    uint16_t *level, *maxv;
    uint32_t *lparent, *own;
    uint32_t *side[4];
    unsigned sides;
};

struct Rule {
    u64 threshold;
    uint32_t vmin;
};

/* ---- memory helpers ------------------------------------------------------------------- */

template <class T>
__device__ __forceinline__ uint32_t
lev(const Tile &t, uint32_t p)
{
    uint64_t off = (uint64_t)p * sizeof(T);

    if (t.lpad)
        off += (uint64_t)(p / t.w) * t.lpad;
    return __ldg(reinterpret_cast<const T *>(t.lv + off));
}

template <class T>
__device__ __forceinline__ uint32_t
canon_of(const Tile &t, uint32_t p)
{
    const uint32_t q = __ldg(t.par + p);

    return q != p && lev<T>(t, q) == lev<T>(t, p) ? q : p;
}

__device__ __forceinline__ u64
fetch_add_ar(u64 *p, u64 v)
{
    return cuda::atomic_ref<u64, cuda::thread_scope_device>(*p).fetch_add(
        v, cuda::memory_order_acq_rel);
}

__device__ __forceinline__ u64
load_acq(u64 *p)
{
    return cuda::atomic_ref<u64, cuda::thread_scope_device>(*p).load(cuda::memory_order_acquire);
}

__device__ __forceinline__ u64
load_rlx64(u64 *p)
{
    return cuda::atomic_ref<u64, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
}

/* A load that may be served by the SM's L1: for words whose every value, however stale, is
 * valid (the jumps of k_find). */
__device__ __forceinline__ uint32_t
load_cta(uint32_t *p)
{
    return cuda::atomic_ref<uint32_t, cuda::thread_scope_block>(*p).load(
        cuda::memory_order_relaxed);
}

__device__ __forceinline__ uint32_t
load_rlx(uint32_t *p)
{
    return cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*p).load(
        cuda::memory_order_relaxed);
}

__device__ __forceinline__ void
store_rlx(uint32_t *p, uint32_t v)
{
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*p).store(v,
                                                                    cuda::memory_order_relaxed);
}

/* The low half of W[p] (little-endian). */
__device__ __forceinline__ uint32_t *
wlow(const Tile &t, uint32_t p)
{
    return reinterpret_cast<uint32_t *>(t.W + p);
}

__device__ __forceinline__ uint32_t
ld_mark(const Tile &t, uint32_t p)
{
    return *reinterpret_cast<volatile unsigned char *>(t.mark + p);
}

__device__ __forceinline__ void
st_mark(const Tile &t, uint32_t p)
{
    *reinterpret_cast<volatile unsigned char *>(t.mark + p) = 1;
}

/* Side pixel i of [0, 2 w + 2 h) (top, bottom, left, right): its side, position and pixel. */
__device__ __forceinline__ int
side_pixel(const Tile &t, uint64_t i, uint32_t &k, uint32_t &p)
{
    if (i < t.w) {
        k = (uint32_t)i;
        p = k;
        return TWI_MAXTREE_TOP;
    }
    if (i < 2ull * t.w) {
        k = (uint32_t)(i - t.w);
        p = (t.h - 1) * t.w + k;
        return TWI_MAXTREE_BOTTOM;
    }
    if (i < 2ull * t.w + t.h) {
        k = (uint32_t)(i - 2ull * t.w);
        p = k * t.w;
        return TWI_MAXTREE_LEFT;
    }
    k = (uint32_t)(i - 2ull * t.w - t.h);
    p = k * t.w + t.w - 1;
    return TWI_MAXTREE_RIGHT;
}

/* Pixel k (of RPT) of this thread in the block's region; false outside the tile. Threads of
 * a warp take consecutive columns of one row. */
__device__ __forceinline__ bool
region_pixel(const Tile &t, int k, uint32_t &p)
{
    constexpr int RW = AttrPolicy::RW, RH = AttrPolicy::RH;
    const uint32_t ry = blockIdx.x / t.nrx, rx = blockIdx.x - ry * t.nrx;
    const uint32_t x = rx * RW + threadIdx.x % RW;
    const uint32_t y = ry * RH + threadIdx.x / RW + (uint32_t)k * (AttrPolicy::THREADS / RW);

    p = y * t.w + x;
    return x < t.w && y < t.h;
}

constexpr uint32_t EMPTY = 0xffffffffu; /* a free hash slot (never a pixel index) */

template <int LOG>
__device__ __forceinline__ void
hash_clear(uint32_t *keys)
{
    for (int i = (int)threadIdx.x; i < 1 << LOG; i += AttrPolicy::THREADS)
        keys[i] = EMPTY;
}

/* The slot of `key` in a shared open-addressing table, claimed if new; -1 when MAX_PROBE
 * slots are taken by other keys (the caller then goes to global memory directly). */
template <int LOG>
__device__ __forceinline__ int
hash_slot(uint32_t *keys, uint32_t key)
{
    uint32_t h = (key * 2654435761u) >> (32 - LOG);

    for (int i = 0; i < AttrPolicy::MAX_PROBE; i++) {
        uint32_t k = *reinterpret_cast<volatile uint32_t *>(keys + h);

        if (k == EMPTY && (k = atomicCAS(keys + h, EMPTY, key)) == EMPTY)
            return (int)h;
        if (k == key)
            return (int)h;
        h = (h + 1u) & ((1u << LOG) - 1u);
    }
    return -1;
}

/* ---- 1. areas, highest levels, marks ---------------------------------------------------- */

__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_init(Tile t, bool sides)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < t.n)
        t.W[i] = 1; /* the pixel's own token */
    if (sides) {
        if (i < (uint64_t)t.nch * AttrPolicy::CHUNK)
            t.mark[i] = 0;
        if (i <= t.nch)
            t.bsum[i] = 0;
    }
}

template <class T>
__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_sidemark(Tile t, unsigned sides)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t k, p;

    if (i >= 2ull * t.w + 2ull * t.h)
        return;
    if (sides & TWI_MAXTREE_SIDE(side_pixel(t, i, k, p)))
        st_mark(t, canon_of<T>(t, p));
}

/*
 * Tokens and non-canonical areas. Big nodes collect the increments of thousands of pixels on
 * one word (the giant components of noise at every level: ~65K atomics on one address in a
 * 4096^2 tile, measured 1.5 ms), so a block sums its region's increments per target in
 * shared memory first and adds each sum once.
 */
template <class T, bool NEED_MX>
__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_count(Tile t)
{
    constexpr int LOG = AttrPolicy::COUNT_LOG_CAP, RPT = AttrPolicy::RPT;
    /* 32-bit sums and every load issued first: 381 -> 285 us (ncu, 4096^2 8-bit smooth)
     * against 64-bit sums with the loads pixel by pixel */
    __shared__ uint32_t keys[1 << LOG], areas[1 << LOG], tokens[1 << LOG];
    uint32_t px[RPT], pq[RPT], lp[RPT], lq[RPT];
    bool in[RPT];

    hash_clear<LOG>(keys);
    for (int i = (int)threadIdx.x; i < 1 << LOG; i += AttrPolicy::THREADS) {
        areas[i] = 0;
        tokens[i] = 0;
    }
    /* every load first, so that each thread has its 8 pixels' loads in flight at once */
#pragma unroll
    for (int k = 0; k < RPT; k++) {
        in[k] = region_pixel(t, k, px[k]);
        pq[k] = in[k] ? __ldg(t.par + px[k]) : 0u;
    }
#pragma unroll
    for (int k = 0; k < RPT; k++) {
        lp[k] = in[k] ? lev<T>(t, px[k]) : 0u;
        lq[k] = in[k] ? lev<T>(t, pq[k]) : 0u;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < RPT; k++) {
        if (!in[k])
            continue;
        const uint32_t p = px[k], q = pq[k];
        const bool area = q != p && lq[k] == lp[k]; /* else a token for the parent */

        if (area) {
            t.W[p] = NONCANON; /* nobody else ever writes a non-canonical pixel's word */
        } else {
            if (NEED_MX)
                t.mx[p] = lp[k];
            if (q == p)
                continue;
        }
        const int sl = hash_slot<LOG>(keys, q);

        if (sl >= 0)
            atomicAdd(area ? areas + sl : tokens + sl, 1u);
        else
            atomicAdd(t.W + q, area ? 1ull << 32 : 1ull);
    }
    __syncthreads();
    for (int i = (int)threadIdx.x; i < 1 << LOG; i += AttrPolicy::THREADS)
        if (keys[i] != EMPTY)
            atomicAdd(t.W + keys[i], (u64)areas[i] << 32 | tokens[i]);
}

/* What the finisher of node v (parent q, area a, highest level m, mark mk) records. */
template <class T, int MODE, bool SIDES>
__device__ __forceinline__ void
finish_node(const Tile &t, const Rule &r, uint32_t v, uint32_t q, uint32_t a, uint32_t m,
            uint32_t mk)
{
    if (SIDES && mk)
        atomicAdd(t.bsum + (v >> AttrPolicy::LOG_CHUNK), 1u);
    if (MODE == M_AREA || MODE == M_HEIGHT) {
        uint32_t jump = v;

        if (SIDES && mk) {
            /* answered by d_res */
        } else if (q == v) {
            t.mx[v] = MODE == M_HEIGHT || a >= r.threshold ? lev<T>(t, v) : r.vmin;
        } else if (MODE == M_AREA ? (u64)a >= r.threshold
                                  : (u64)(m - lev<T>(t, q)) >= r.threshold) {
            t.mx[v] = lev<T>(t, v);
        } else {
            jump = q;
        }
        *wlow(t, v) = jump + 1u; /* nobody touches W[v] once v is finished */
    }
}

/*
 * `k` children of q, of total area A, highest level m and marked when mk, arrive at q; whoever
 * removes q's last tokens finishes q and arrives at its parent, and so on up.
 */
template <class T, int MODE, bool SIDES>
__device__ void
climb(const Tile &t, const Rule &r, uint32_t q, uint32_t A, uint32_t m, uint32_t mk, uint32_t k)
{
    constexpr bool NEED_MX = MODE == M_BORDER || MODE == M_HEIGHT;

    for (;;) {
        const uint32_t qq = __ldg(t.par + q); /* before the atomic: one latency less a level */

        if (NEED_MX)
            atomicMax(t.mx + q, m);
        if (SIDES && mk)
            st_mark(t, q);
        const u64 old = fetch_add_ar(t.W + q, ((u64)A << 32) - k);

        if ((uint32_t)old != k)
            return;
        A += (uint32_t)(old >> 32) + 1u;
        if (NEED_MX) {
            const uint32_t mq = load_rlx(t.mx + q);

            m = mq > m ? mq : m;
        }
        if (SIDES)
            mk |= ld_mark(t, q);
        finish_node<T, MODE, SIDES>(t, r, q, qq, A, m, mk);
        if (qq == q)
            return;
        q = qq;
        k = 1;
    }
}

/*
 * Every node whose children have all arrived (leaves at once) is finished by its own thread;
 * the block sums these first arrivals per parent in shared memory (area, highest level, marks,
 * tokens) and each sum arrives once, then climbs on (climb). Measured (H100): loading the 8
 * pixels' words up front, 32-bit sums and an out-of-line climb took 48 registers instead of
 * 26-29 and made this kernel 1.5-1.8x slower (fewer warps to hide the climbs' latency).
 */
template <class T, int MODE, bool SIDES>
__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_sweep(Tile t, Rule r)
{
    constexpr bool NEED_MX = MODE == M_BORDER || MODE == M_HEIGHT;
    constexpr int LOG = AttrPolicy::SWEEP_LOG_CAP, CAP = 1 << LOG;
    __shared__ uint32_t keys[CAP];
    __shared__ u64 vals[CAP]; /* area << 32 | marked children << 16 | children */
    __shared__ uint32_t hmx[NEED_MX ? CAP : 1];

    hash_clear<LOG>(keys);
    for (int i = (int)threadIdx.x; i < CAP; i += AttrPolicy::THREADS) {
        vals[i] = 0;
        if (NEED_MX)
            hmx[i] = 0;
    }
    __syncthreads();
#pragma unroll 1
    for (int k = 0; k < AttrPolicy::RPT; k++) {
        uint32_t v;

        if (!region_pixel(t, k, v))
            continue;
        u64 old = load_rlx64(t.W + v);

        if ((uint32_t)old == NONCANON)
            continue;
        if ((uint32_t)old != 1u) {
            /* children still to come: drop the own token; the last one to leave finishes v */
            old = fetch_add_ar(t.W + v, ~0ull);
            if ((uint32_t)old != 1u)
                continue;
        } else if (NEED_MX || SIDES) {
            old = load_acq(t.W + v); /* orders the reads of what the children left */
        }
        const uint32_t a = (uint32_t)(old >> 32) + 1u, q = __ldg(t.par + v);
        const uint32_t m = NEED_MX ? load_rlx(t.mx + v) : 0u, mk = SIDES ? ld_mark(t, v) : 0u;

        finish_node<T, MODE, SIDES>(t, r, v, q, a, m, mk);
        if (q == v)
            continue;
        const int sl = hash_slot<LOG>(keys, q);

        if (sl < 0) {
            climb<T, MODE, SIDES>(t, r, q, a, m, mk, 1u);
            continue;
        }
        atomicAdd(vals + sl, (u64)a << 32 | (u64)mk << 16 | 1u);
        if (NEED_MX)
            atomicMax(hmx + sl, m);
    }
    __syncthreads();
    for (int i = (int)threadIdx.x; i < CAP; i += AttrPolicy::THREADS) {
        const uint32_t q = keys[i];

        if (q == EMPTY)
            continue;
        const u64 v = vals[i];

        climb<T, MODE, SIDES>(t, r, q, (uint32_t)(v >> 32), NEED_MX ? hmx[i] : 0u,
                              (uint32_t)(v >> 16) & 0xffffu ? 1u : 0u, (uint32_t)v & 0xffffu);
    }
}

/* ---- 2. numbering ----------------------------------------------------------------------- */

/* bsum[0..nch] := exclusive scan of the chunk counts; *N := the total. One block. */
__global__ void __launch_bounds__(AttrPolicy::SCAN_THREADS)
k_bscan(Tile t)
{
    constexpr int NT = AttrPolicy::SCAN_THREADS, IT = AttrPolicy::SCAN_ITEMS;
    typedef cub::BlockScan<uint32_t, NT> Scan;
    __shared__ typename Scan::TempStorage tmp;
    uint32_t carry = 0;
    const uint64_t nb = (uint64_t)t.nch + 1; /* the last slot receives the total */

    for (uint64_t base = 0; base < nb; base += (uint64_t)NT * IT) {
        uint32_t v[IT], sum = 0, off, agg;

#pragma unroll
        for (int j = 0; j < IT; j++) {
            const uint64_t k = base + (uint64_t)threadIdx.x * IT + j;

            v[j] = k < t.nch ? t.bsum[k] : 0u;
            sum += v[j];
        }
        Scan(tmp).ExclusiveSum(sum, off, agg);
        off += carry;
#pragma unroll
        for (int j = 0; j < IT; j++) {
            const uint64_t k = base + (uint64_t)threadIdx.x * IT + j;

            if (k < nb)
                t.bsum[k] = off;
            off += v[j];
        }
        carry += agg;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *t.N = (int64_t)carry;
}

/* The 16 mark bytes of thread `tid` of chunk `b`, and how many are set. */
__device__ __forceinline__ uint4
chunk_marks(const Tile &t, uint32_t b, int tid, uint32_t &cnt)
{
    const uint4 m = reinterpret_cast<const uint4 *>(
        t.mark + (uint64_t)b * AttrPolicy::CHUNK)[tid];

    cnt = (uint32_t)(__popc(m.x) + __popc(m.y) + __popc(m.z) + __popc(m.w));
    return m;
}

__device__ __forceinline__ bool
mark_bit(const uint4 &m, int j)
{
    const uint32_t w = j < 4 ? m.x : j < 8 ? m.y : j < 12 ? m.z : m.w;

    return (w >> (8 * (j & 3))) & 1u;
}

/* Node numbers into mx (and, for BORDER, level, maxv and the whole area into own). */
template <class T, bool BORDER>
__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_number(Tile t, Outs o)
{
    typedef cub::BlockScan<uint32_t, AttrPolicy::THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    const uint32_t b = blockIdx.x, b0 = t.bsum[b];

    if (t.bsum[b + 1] == b0)
        return; /* no marks in this chunk (the whole block leaves) */
    uint32_t cnt, off;
    const uint4 m = chunk_marks(t, b, (int)threadIdx.x, cnt);

    Scan(tmp).ExclusiveSum(cnt, off);
    uint32_t id = b0 + off;
    const uint32_t p0 = b * (uint32_t)AttrPolicy::CHUNK + threadIdx.x * AttrPolicy::ITEMS;

#pragma unroll
    for (int j = 0; j < AttrPolicy::ITEMS; j++) {
        if (!mark_bit(m, j))
            continue;
        const uint32_t p = p0 + (uint32_t)j;

        if (BORDER) {
            o.level[id] = (uint16_t)lev<T>(t, p);
            o.maxv[id] = (uint16_t)t.mx[p];
            o.own[id] = (uint32_t)(t.W[p] >> 32) + 1u;
        }
        t.mx[p] = id++;
    }
}

/* Blocks [0, nch): lparent and own of the chunk's nodes; the rest: the side arrays. */
template <class T>
__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_link(Tile t, Outs o)
{
    if (blockIdx.x < t.nch) {
        const uint32_t b = blockIdx.x;

        if (t.bsum[b + 1] == t.bsum[b])
            return;
        uint32_t cnt;
        const uint4 m = chunk_marks(t, b, (int)threadIdx.x, cnt);
        const uint32_t p0 = b * (uint32_t)AttrPolicy::CHUNK + threadIdx.x * AttrPolicy::ITEMS;

        for (int j = 0; cnt && j < AttrPolicy::ITEMS; j++) {
            if (!mark_bit(m, j))
                continue;
            const uint32_t p = p0 + (uint32_t)j, q = __ldg(t.par + p), id = t.mx[p];

            if (q == p) {
                o.lparent[id] = id;
            } else {
                const uint32_t pid = t.mx[q]; /* ancestors of marked nodes are marked */

                o.lparent[id] = pid;
                atomicSub(o.own + pid, (uint32_t)(t.W[p] >> 32) + 1u);
            }
        }
        return;
    }
    const uint64_t i = (uint64_t)(blockIdx.x - t.nch) * blockDim.x + threadIdx.x;
    uint32_t k, p;

    if (i >= 2ull * t.w + 2ull * t.h)
        return;
    const int s = side_pixel(t, i, k, p);

    if (o.sides & TWI_MAXTREE_SIDE(s)) {
        /* no run-time index into o.side: that would copy the parameter to local memory */
        uint32_t *d = s == TWI_MAXTREE_TOP      ? o.side[TWI_MAXTREE_TOP]
                      : s == TWI_MAXTREE_BOTTOM ? o.side[TWI_MAXTREE_BOTTOM]
                      : s == TWI_MAXTREE_LEFT   ? o.side[TWI_MAXTREE_LEFT]
                                           : o.side[TWI_MAXTREE_RIGHT];

        d[k] = t.mx[canon_of<T>(t, p)];
    }
}

/* ---- 3. answers --------------------------------------------------------------------------- */

struct OutView {
    unsigned char *data;
    uint64_t opad;   /* stride - w * sample size */
};

template <class O>
__device__ __forceinline__ O *
out_at(const Tile &t, const OutView &ov, uint32_t p)
{
    uint64_t off = (uint64_t)p * sizeof(O);

    if (ov.opad)
        off += (uint64_t)(p / t.w) * ov.opad;
    return reinterpret_cast<O *>(ov.data + off);
}

/* The canonical pixel of p after the sweep (pixel n - 1 is always canonical; a canonical
 * word whose jump + 1 happens to read NONCANON points at n - 1, which then gives the same
 * answer). */
__device__ __forceinline__ uint32_t
canon_after(const Tile &t, uint32_t p)
{
    return load_rlx(wlow(t, p)) == NONCANON && p != t.n - 1 ? __ldg(t.par + p) : p;
}

/*
 * Every pixel follows the jumps from its node to the nearest resolved node, halving the path
 * as it goes, and points its start node straight at the result. Most pixels end at a few big
 * nodes, so the jumps are read through L1 (any value, however stale, is a valid jump) and the
 * answers with __ldg.
 */
template <class T, bool SIDES>
__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_find(Tile t, const uint64_t *__restrict__ res, OutView ov)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (i >= t.n)
        return;
    const uint32_t p = (uint32_t)i, pp = __ldg(t.par + p); /* both loads in flight at once */
    const uint32_t v = load_cta(wlow(t, p)) == NONCANON && p != t.n - 1 ? pp : p;
    uint32_t r = v;

    for (;;) {
        const uint32_t j = load_cta(wlow(t, r)) - 1u;

        if (j == r)
            break;
        const uint32_t j2 = load_cta(wlow(t, j)) - 1u;

        if (j2 == j) {
            r = j;
            break;
        }
        store_rlx(wlow(t, r), j2 + 1u); /* path halving */
        r = j2;
    }
    if (r != v && load_cta(wlow(t, v)) != r + 1u)
        store_rlx(wlow(t, v), r + 1u);
    const uint32_t a = __ldg(t.mx + r);
    const uint32_t val = SIDES && __ldg(t.mark + r) ? (uint32_t)(uint16_t)__ldg(res + a)
                                                    : (uint32_t)(uint16_t)a;

    *out_at<T>(t, ov, p) = (T)val;
}

template <class O, bool SIDES>
__global__ void __launch_bounds__(AttrPolicy::THREADS)
k_mapfind(Tile t, const uint64_t *__restrict__ res, OutView ov)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (i >= t.n)
        return;
    const uint32_t p = (uint32_t)i, c = canon_after(t, p);
    const u64 a = SIDES && __ldg(t.mark + c) ? __ldg(res + __ldg(t.mx + c))
                                             : (__ldg(t.W + c) >> 32) + 1u;

    *out_at<O>(t, ov, p) = sizeof(O) == 4 && a > 0xffffffffull ? (O)0xffffffffu : (O)a;
}

/* ---- host side -------------------------------------------------------------------------- */

struct Layout {
    size_t W, mx, mark, bsum, level, maxv, lparent, own, side[4], N, total;
    uint32_t nch;
};

using twi_cu::align_up;

/* Byte offsets of every array from the aligned base. */
Layout
layout(int32_t w, int32_t h)
{
    const size_t n = (size_t)w * (size_t)h;
    Layout L;
    size_t at = 0;

    L.nch = (uint32_t)((n + AttrPolicy::CHUNK - 1) / AttrPolicy::CHUNK);
    const auto take = [&](size_t bytes) {
        const size_t r = at;

        at += align_up(bytes ? bytes : 1);
        return r;
    };
    L.W = take(n * 8);
    L.mx = take(n * 4);
    L.mark = take((size_t)L.nch * AttrPolicy::CHUNK);
    L.bsum = take(((size_t)L.nch + 1) * 4);
    L.level = take(n * 2);
    L.maxv = take(n * 2);
    L.lparent = take(n * 4);
    L.own = take(n * 4);
    L.side[TWI_MAXTREE_TOP] = take((size_t)w * 4);
    L.side[TWI_MAXTREE_BOTTOM] = take((size_t)w * 4);
    L.side[TWI_MAXTREE_LEFT] = take((size_t)h * 4);
    L.side[TWI_MAXTREE_RIGHT] = take((size_t)h * 4);
    L.N = take(8);
    L.total = at + ALIGN; /* room to align the caller's pointer */
    return L;
}

bool
levels_ok(const tw_tile_view *v)
{
    return v && v->channels == 1 && (v->type == TW_U8 || v->type == TW_U16) &&
           twi_view_fits(v, (size_t)v->w * tw_sample_size(v->type), tw_sample_size(v->type)) &&
           (uint64_t)(v->w > 0 ? v->w : 0) * (uint64_t)(v->h > 0 ? v->h : 0) <= UINT32_MAX;
}

bool
parent_ok(const tw_tile_view *lv, const tw_tile_view *p)
{
    return p && p->channels == 1 && p->type == TW_U32 && p->w == lv->w && p->h == lv->h &&
           (p->w == 0 || p->h == 0 ||
            (p->data && p->stride == (int64_t)p->w * 4 && (uintptr_t)p->data % 4 == 0));
}

Tile
make_tile(const tw_tile_view *lv, const tw_tile_view *par, unsigned char *base, const Layout &L)
{
    Tile t;

    t.lv = static_cast<const unsigned char *>(lv->data);
    t.lpad = (uint64_t)lv->stride - (uint64_t)lv->w * tw_sample_size(lv->type);
    t.par = static_cast<const uint32_t *>(par->data);
    t.w = (uint32_t)lv->w;
    t.h = (uint32_t)lv->h;
    t.n = (uint32_t)((uint64_t)lv->w * (uint64_t)lv->h);
    t.nch = L.nch;
    t.nrx = (uint32_t)(((uint64_t)lv->w + AttrPolicy::RW - 1) / AttrPolicy::RW);
    t.W = reinterpret_cast<u64 *>(base + L.W);
    t.mx = reinterpret_cast<uint32_t *>(base + L.mx);
    t.mark = base + L.mark;
    t.bsum = reinterpret_cast<uint32_t *>(base + L.bsum);
    t.N = reinterpret_cast<int64_t *>(base + L.N);
    return t;
}

unsigned
blocks(uint64_t items)
{
    return (unsigned)((items + AttrPolicy::THREADS - 1) / AttrPolicy::THREADS);
}

/* Steps 1 and 2 (marks, areas, highest levels, numbering), shared by both launchers. */
template <class T, int MODE, bool SIDES>
void
enqueue_tree(const Tile &t, const Rule &r, const Outs &o, cudaStream_t s)
{
    constexpr bool NEED_MX = MODE == M_BORDER || MODE == M_HEIGHT;
    const uint64_t init = SIDES ? (uint64_t)t.nch * AttrPolicy::CHUNK : t.n;

    k_init<<<blocks(init > t.nch + 1ull ? init : t.nch + 1ull), AttrPolicy::THREADS, 0, s>>>(
        t, SIDES);
    if (SIDES)
        k_sidemark<T><<<blocks(2ull * t.w + 2ull * t.h), AttrPolicy::THREADS, 0, s>>>(t, o.sides);
    const unsigned regions =
        t.nrx * (unsigned)(((uint64_t)t.h + AttrPolicy::RH - 1) / AttrPolicy::RH);

    k_count<T, NEED_MX><<<regions, AttrPolicy::THREADS, 0, s>>>(t);
    k_sweep<T, MODE, SIDES><<<regions, AttrPolicy::THREADS, 0, s>>>(t, r);
    if (SIDES) {
        k_bscan<<<1, AttrPolicy::SCAN_THREADS, 0, s>>>(t);
        k_number<T, MODE == M_BORDER><<<t.nch, AttrPolicy::THREADS, 0, s>>>(t, o);
    }
}

template <class T>
tw_status
border(const Tile &t, const Outs &o, cudaStream_t s)
{
    enqueue_tree<T, M_BORDER, true>(t, Rule{0, 0}, o, s);
    k_link<T><<<t.nch + blocks(2ull * t.w + 2ull * t.h), AttrPolicy::THREADS, 0, s>>>(t, o);
    return launched();
}

template <class T, int MODE, bool SIDES>
tw_status
filter_sides(const Tile &t, const Rule &r, const Outs &o, const uint64_t *res, OutView ov,
             tw_sample_type otype, cudaStream_t s)
{
    enqueue_tree<T, MODE, SIDES>(t, r, o, s);
    if (MODE != M_MAP)
        k_find<T, SIDES><<<blocks(t.n), AttrPolicy::THREADS, 0, s>>>(t, res, ov);
    else if (otype == TW_U32)
        k_mapfind<uint32_t, SIDES><<<blocks(t.n), AttrPolicy::THREADS, 0, s>>>(t, res, ov);
    else
        k_mapfind<u64, SIDES><<<blocks(t.n), AttrPolicy::THREADS, 0, s>>>(t, res, ov);
    return launched();
}

template <class T, int MODE>
tw_status
filter_mode(const Tile &t, const Rule &r, const Outs &o, const uint64_t *res, OutView ov,
            tw_sample_type otype, cudaStream_t s)
{
    return o.sides ? filter_sides<T, MODE, true>(t, r, o, res, ov, otype, s)
                   : filter_sides<T, MODE, false>(t, r, o, res, ov, otype, s);
}

template <class T>
tw_status
filter(const Tile &t, int rule, const Rule &r, const Outs &o, const uint64_t *res, OutView ov,
       tw_sample_type otype, cudaStream_t s)
{
    switch (rule) {
    case TWI_MAXTREE_AREA:
        return filter_mode<T, M_AREA>(t, r, o, res, ov, otype, s);
    case TWI_MAXTREE_HEIGHT:
        return filter_mode<T, M_HEIGHT>(t, r, o, res, ov, otype, s);
    default:
        return filter_mode<T, M_MAP>(t, r, o, res, ov, otype, s);
    }
}

} // namespace

extern "C" size_t
twi_cuda_maxtree_filter_scratch_size(int32_t w, int32_t h)
{
    if (w < 0 || h < 0 || (uint64_t)w * (uint64_t)h > UINT32_MAX)
        return 0;
    return layout(w, h).total;
}

extern "C" tw_status
twi_cuda_maxtree_border_extract(const tw_tile_view *d_levels, const tw_tile_view *d_parent,
                                unsigned sides, void *d_scratch, size_t scratch_bytes,
                                twi_cuda_maxtree_border *out, void *stream)
{
    try {
        if (!out)
            return TW_E_INVALID;
        *out = twi_cuda_maxtree_border{};
        if (!levels_ok(d_levels) || !parent_ok(d_levels, d_parent) || sides > 15u)
            return TW_E_INVALID;
        const Layout L = layout(d_levels->w, d_levels->h);

        if (!d_scratch || scratch_bytes < L.total)
            return TW_E_INVALID;
        cudaStream_t s = static_cast<cudaStream_t>(stream);
        unsigned char *base = aligned_base(d_scratch);
        const Tile t = make_tile(d_levels, d_parent, base, L);
        Outs o;

        o.level = reinterpret_cast<uint16_t *>(base + L.level);
        o.maxv = reinterpret_cast<uint16_t *>(base + L.maxv);
        o.lparent = reinterpret_cast<uint32_t *>(base + L.lparent);
        o.own = reinterpret_cast<uint32_t *>(base + L.own);
        o.sides = sides;
        out->n = t.N;
        out->level = o.level;
        out->maxv = o.maxv;
        out->lparent = o.lparent;
        out->own = o.own;
        for (int k = 0; k < 4; k++) {
            o.side[k] = reinterpret_cast<uint32_t *>(base + L.side[k]);
            out->side[k] = sides & TWI_MAXTREE_SIDE(k) ? o.side[k] : nullptr;
        }
        tw_status st;

        if (t.n == 0 || sides == 0) /* no border tree */
            st = cudaMemsetAsync(t.N, 0, sizeof *t.N, s) == cudaSuccess ? TW_OK : TW_E_DEVICE;
        else
            st = d_levels->type == TW_U8 ? border<uint8_t>(t, o, s) : border<uint16_t>(t, o, s);
        return st != TW_OK ? st : finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" tw_status
twi_cuda_maxtree_filter(const tw_tile_view *d_levels, const tw_tile_view *d_parent, unsigned sides,
                        const uint64_t *d_res, const twi_maxtree_filter *f, tw_tile_view *d_out,
                        void *d_scratch, size_t scratch_bytes, void *stream)
{
    try {
        if (!f || !d_out || !levels_ok(d_levels) || !parent_ok(d_levels, d_parent) ||
            sides > 15u || (sides && !d_res) || d_out->channels != 1 ||
            d_out->w != d_levels->w || d_out->h != d_levels->h ||
            (unsigned)f->rule > (unsigned)TWI_MAXTREE_AREA_MAP)
            return TW_E_INVALID;
        const bool map = f->rule == TWI_MAXTREE_AREA_MAP;

        if ((map && d_out->type != TW_U32 && d_out->type != TW_U64) ||
            (!map && d_out->type != d_levels->type) ||
            !twi_view_fits(d_out, (size_t)d_out->w * tw_sample_size(d_out->type),
                           tw_sample_size(d_out->type)))
            return TW_E_INVALID;
        if (d_levels->w == 0 || d_levels->h == 0)
            return TW_OK;
        const Layout L = layout(d_levels->w, d_levels->h);

        if (!d_scratch || scratch_bytes < L.total)
            return TW_E_INVALID;
        cudaStream_t s = static_cast<cudaStream_t>(stream);
        unsigned char *base = aligned_base(d_scratch);
        const Tile t = make_tile(d_levels, d_parent, base, L);
        const Rule r{(u64)f->threshold, (uint32_t)f->vmin};
        const OutView ov{static_cast<unsigned char *>(d_out->data),
                         (uint64_t)d_out->stride -
                             (uint64_t)d_out->w * tw_sample_size(d_out->type)};
        Outs o{};
        tw_status st;

        o.sides = sides;
        st = d_levels->type == TW_U8
                 ? filter<uint8_t>(t, (int)f->rule, r, o, d_res, ov, d_out->type, s)
                 : filter<uint16_t>(t, (int)f->rule, r, o, d_res, ov, d_out->type, s);
        return st != TW_OK ? st : finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}
