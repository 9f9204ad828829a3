/* SPDX-License-Identifier: MIT */
/* tilewave: the BP merge of border max-trees on CUDA (concurrent CONNECT over all tiles' nodes). */

/*
 * What this computes: the CUDA twin of twi_maxtree_merge (omp/maxtree_border.c) over a grid packed
 * by twi_maxtree_pack_build (kern/maxtree.h): for every border-tree node v (global number
 * off[t] + i), d_res[v] is the answer of the filter for v's component in the global max-tree
 * of all border-tree nodes, the same 64-bit value the CPU writes.
 *
 * The graph (as in the CPU twin): vertices are the nodes, weighted by their level; edges are
 * the local parent links and, for each pair of adjacent side pixels of adjacent tiles, the
 * link between their nodes (4-connectivity: facing pixels; 8-connectivity: the diagonals too,
 * and the two diagonals across each corner where four tiles meet, exactly grid_links'
 * pairs). Its max-tree, in the canonical form of kern/maxtree.h with the node number
 * as the index (a node's parent is lower, or at the same level with a larger number; the
 * level root of a component is its node of largest number at that level), is what the CPU
 * builds with its union-find in decreasing (level, -number) order. The answers depend only on
 * that tree's components, so any correct construction gives the CPU's bytes.
 *
 * How:
 * 1. mm_geometry (one block): the image rows and columns where each tile row and column
 *    starts (prefix sums of the tiles' sizes; every tile of a row has the same height, of a
 *    column the same width), so that a thread can find its border position by binary search.
 * 2. mm_init, one thread per node: the parent record (level << 32 | number + 1, 0 = none,
 *    as cuda/maxtree_cuda.cu's global records) starts as the local parent. A border tree is a
 *    max-tree of its own links (parents strictly lower, which twi_maxtree_pack_build checks), so
 *    the starting forest is already a valid partial max-tree and the local links need no
 *    CONNECT.
 * 3. mm_links, one thread per border position (grid-stride): the lock-free concurrent CONNECT
 *    of [Blin22] (algorithm 6; atomicMax on the 64-bit records) for each link of that
 *    position. Links equal to the one just before them in grid_links' order are skipped and
 *    the others counted, so *d_links equals the CPU's `edges`.
 * 4. mm_flatten, one thread per node: parent := level root of the parent (the node itself for
 *    the root). A node that is not a level root adds its own pixels and highest level into its
 *    level root at once; the level roots' children are counted.
 * 5. mm_sum, bottom-up over the level roots: a thread starts at each one without level-root
 *    children and climbs, adding its subtree's area (sum of `own`) and highest level into the
 *    parent; only the last child to arrive at a node (an acq_rel counter) goes on up with the
 *    node's totals, and a parent with a single child is updated without atomics. Linear work;
 *    the critical path is the tree's depth (one step per level), which on 16-bit trees is
 *    tens of thousands of steps and most of the time (H100, the border trees of a 16384^2
 *    natural-like 16-bit image in 1024^2 tiles, 16 M nodes: 54 ms of 80; 72 ms of 97 before
 *    the single-child path).
 * 6. mm_answer_init / mm_answer, top-down without ordering: d_res[v] holds either v's answer
 *    or (top bit set) a proper ancestor u whose answer is v's: the root and every node that
 *    survives the rule have their answer at once, a node at its parent's level takes its
 *    level root's, and a node that does not survive takes its parent's. Each thread then jumps
 *    along those pointers, copying what it reads into its own entry (pointer jumping, done
 *    asynchronously: each entry is one 64-bit word written only by its own thread, and every
 *    value it ever holds is either the answer or a pointer to a node with the same answer),
 *    so chains shorten for everyone and every thread ends on a resolved answer.
 *
 * Determinism: the tree is the canonical one whatever the order the CONNECTs ran in; sums and
 * maxima are exact integer reductions; the answers are a function of the tree. Nothing
 * depends on the scratch's contents at entry.
 *
 * Limits: fewer than UINT32_MAX nodes (the pack's check); links are counted in 64 bits. The
 * launcher cannot see device memory: it trusts the pack (twi_maxtree_pack_build checked the grid
 * and the trees) and checks the layout only. A grid whose links do not connect (impossible
 * for a pack of extracted border trees: each is a tree and adjacent tiles share a side) gives
 * one answer per component instead of the CPU's TW_E_INTERNAL.
 */
#include <cstddef>
#include <cstdint>

#include <cuda/atomic>
#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

namespace {

/* Tuning (in policies, not kernels): plain 256-thread blocks for the per-node kernels; the link
 * kernel runs a grid-stride loop over as many blocks as the device keeps resident. */
struct MergePolicy {
    static constexpr int THREADS = 256;
    static constexpr int LINK_THREADS = 256;
    static constexpr int LINK_BLOCKS_PER_SM = 2048 / LINK_THREADS;
    static constexpr int GEO_THREADS = 1024;
};

using twi_cu::ALIGN;
using twi_cu::u64;
/* d_res entries with this bit hold "same answer as node (low 32 bits)" rather than answers;
 * answers are levels or areas (areas of less than 2^63 pixels). */
constexpr u64 UNRESOLVED = 1ull << 63;

/* The packed grid, as device pointers. */
struct Grid {
    int64_t tiles_x, tiles_y;
    uint32_t n;
    const int64_t *off;      /* [n_tiles + 1] */
    const int32_t *dims;     /* [2 n_tiles] */
    const int64_t *side_at;  /* [4 n_tiles] */
    const uint16_t *level, *maxv;
    const uint32_t *lparent, *own, *sides;
};

/* The scratch arrays. */
struct Work {
    u64 *rec;           /* [n] parent records */
    u64 *area;          /* [n] subtree areas */
    uint32_t *par;      /* [n] canonical parents */
    uint32_t *kids;     /* [n] level-root children in the canonical tree */
    uint32_t *arrived;  /* [n] children whose subtree is summed */
    uint32_t *mx;       /* [n] highest level of the subtree */
    int64_t *rowy;      /* [tiles_y + 1] first image row of each tile row; [tiles_y]: height */
    int64_t *colx;      /* [tiles_x + 1] first image column of each tile column */
};

/* The rule, as plain values. */
struct Rule {
    int rule;
    u64 threshold;
    u64 vmin;
};

/* ---- records (the global form of cuda/cuda_common.cuh) ---------------------------------- */

using twi_cu::enc;
using twi_cu::rec_idx;
using twi_cu::rec_lev;

/* Loads of words other threads' atomics may change: never from a stale L1 line. */
__device__ __forceinline__ u64
ld_relaxed(u64 *p)
{
    return cuda::atomic_ref<u64, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
}

__device__ __forceinline__ void
st_relaxed(u64 *p, u64 v)
{
    cuda::atomic_ref<u64, cuda::thread_scope_device>(*p).store(v, cuda::memory_order_relaxed);
}

/* The concurrent CONNECT on the node records (cuda/cuda_common.cuh), uncounted. */
__device__ __forceinline__ void
connect(u64 *rec, uint32_t a, uint32_t fa, uint32_t b, uint32_t fb)
{
    twi_cu::connect_records<false>(rec, a, fa, b, fb, nullptr);
}

/* The largest k in [0, cnt) with first[k] <= x (first[0] = 0 <= x, first increasing). */
__device__ __forceinline__ int64_t
find_run(const int64_t *first, int64_t cnt, int64_t x)
{
    int64_t lo = 0, hi = cnt;

    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;

        if (__ldg(first + mid) <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Sum of a warp's values, added once into *links (NULL: nothing). All lanes must call. */
__device__ __forceinline__ void
count_links(unsigned long long *links, unsigned c)
{
    if (!links)
        return;
    c = __reduce_add_sync(0xffffffffu, c);
    if ((threadIdx.x & 31u) == 0 && c)
        atomicAdd(links, (unsigned long long)c);
}

/* ---- 1. geometry ----------------------------------------------------------------------- */

/* first[k] = sum of size(j) for j < k, k in [0, cnt]; one block. */
template <class F>
__device__ void
block_prefix(int64_t *first, int64_t cnt, const F &size, int64_t *part)
{
    const int T = (int)blockDim.x, i = (int)threadIdx.x;
    const int64_t chunk = (cnt + T - 1) / T, k0 = min(cnt, (int64_t)i * chunk),
                  k1 = min(cnt, k0 + chunk);
    int64_t s = 0;

    for (int64_t k = k0; k < k1; k++)
        s += size(k);
    part[i] = s;
    __syncthreads();
    /* inclusive scan of the partial sums (Hillis-Steele) */
    for (int d = 1; d < T; d *= 2) {
        const int64_t add = i >= d ? part[i - d] : 0;

        __syncthreads();
        part[i] += add;
        __syncthreads();
    }
    s = part[i] - s;
    for (int64_t k = k0; k < k1; k++) {
        first[k] = s;
        s += size(k);
    }
    if (i == T - 1)
        first[cnt] = part[i];
    __syncthreads();
}

__global__ void __launch_bounds__(MergePolicy::GEO_THREADS)
mm_geometry(Grid g, Work w)
{
    __shared__ int64_t part[MergePolicy::GEO_THREADS];

    block_prefix(
        w.rowy, g.tiles_y, [&](int64_t r) { return (int64_t)g.dims[2 * r * g.tiles_x + 1]; },
        part);
    block_prefix(w.colx, g.tiles_x, [&](int64_t c) { return (int64_t)g.dims[2 * c]; }, part);
}

/* ---- 2. records from the local trees --------------------------------------------------- */

__global__ void __launch_bounds__(MergePolicy::THREADS)
mm_init(Grid g, Work w, unsigned long long *links)
{
    const uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned c = 0;

    if (v < g.n) {
        const int64_t t = find_run(g.off, g.tiles_x * g.tiles_y, (int64_t)v);
        const int64_t o = __ldg(g.off + t);
        const uint32_t lp = __ldg(g.lparent + v);
        u64 r = 0;

        if ((int64_t)lp != (int64_t)v - o) {
            const uint32_t gp = (uint32_t)(o + lp);

            r = enc<u64>(__ldg(g.level + gp), gp);
            c = 1;
        }
        w.rec[v] = r;
        w.area[v] = __ldg(g.own + v);
        w.mx[v] = __ldg(g.maxv + v);
        w.kids[v] = 0;
        w.arrived[v] = 0;
    }
    count_links(links, c);
}

/* ---- 3. links between tiles ------------------------------------------------------------- */

/* The side array s of tile t. */
__device__ __forceinline__ const uint32_t *
side_of(const Grid &g, int64_t t, int s)
{
    return g.sides + __ldg(g.side_at + 4 * t + s);
}

/*
 * The links of position k of a border of length len between u (side su, tile offset ou) and
 * v (side sv, offset ov), in grid_links' order: (u_k, v_k), then with 8-connectivity and
 * k + 1 < len (u_k, v_{k+1}) and (u_{k+1}, v_k). A link equal to its predecessor in that
 * order is skipped (the CPU skips it too, and counts only the others).
 */
template <int CONN>
__device__ __forceinline__ unsigned
border_links(u64 *rec, const uint16_t *lev, const uint32_t *su, const uint32_t *sv, uint32_t ou,
             uint32_t ov, int64_t k, int64_t len)
{
    const uint32_t u0 = __ldg(su + k), v0 = __ldg(sv + k);
    unsigned c = 0;
    bool keep;

    if (k == 0)
        keep = true;
    else if (CONN == 8)
        keep = __ldg(sv + k - 1) != v0; /* predecessor (u_k, v_{k-1}) */
    else
        keep = __ldg(su + k - 1) != u0 || __ldg(sv + k - 1) != v0;
    if (keep) {
        connect(rec, ou + u0, __ldg(lev + ou + u0), ov + v0, __ldg(lev + ov + v0));
        c++;
    }
    if (CONN == 8 && k + 1 < len) {
        const uint32_t u1 = __ldg(su + k + 1), v1 = __ldg(sv + k + 1);

        if (v1 != v0) { /* predecessor (u_k, v_k) */
            connect(rec, ou + u0, __ldg(lev + ou + u0), ov + v1, __ldg(lev + ov + v1));
            c++;
        }
        if (u1 != u0 || v0 != v1) { /* predecessor (u_k, v_{k+1}) */
            connect(rec, ou + u1, __ldg(lev + ou + u1), ov + v0, __ldg(lev + ov + v0));
            c++;
        }
    }
    return c;
}

/*
 * Positions [0, nv): the borders between tile columns, position i * H + y at image row y of
 * the border right of tile column i. Positions [nv, nv + nh): the borders between tile rows,
 * nv + j * W + x at image column x below tile row j. The position at the right end of a
 * row border also joins the diagonal to the tile down-right, the one at its left end the
 * diagonal to the tile down-left (8-connectivity), as grid_links does.
 */
template <int CONN>
__global__ void __launch_bounds__(MergePolicy::LINK_THREADS)
mm_links(Grid g, Work w, unsigned long long *links)
{
    const int64_t H = w.rowy[g.tiles_y], W = w.colx[g.tiles_x];
    const int64_t nv = (g.tiles_x - 1) * H, nh = (g.tiles_y - 1) * W;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    unsigned c = 0;

    for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < nv + nh; s += stride) {
        if (s < nv) {
            const int64_t i = s / H, y = s - i * H;
            const int64_t r = find_run(w.rowy, g.tiles_y, y);
            const int64_t y0 = __ldg(w.rowy + r), len = __ldg(w.rowy + r + 1) - y0;
            const int64_t t = r * g.tiles_x + i;

            c += border_links<CONN>(w.rec, g.level, side_of(g, t, TWI_MAXTREE_RIGHT),
                                    side_of(g, t + 1, TWI_MAXTREE_LEFT), (uint32_t)__ldg(g.off + t),
                                    (uint32_t)__ldg(g.off + t + 1), y - y0, len);
        } else {
            const int64_t s2 = s - nv, j = s2 / W, x = s2 - j * W;
            const int64_t col = find_run(w.colx, g.tiles_x, x);
            const int64_t x0 = __ldg(w.colx + col), len = __ldg(w.colx + col + 1) - x0;
            const int64_t t = j * g.tiles_x + col, tb = t + g.tiles_x, k = x - x0;
            const uint32_t *ba = side_of(g, t, TWI_MAXTREE_BOTTOM);
            const uint32_t ou = (uint32_t)__ldg(g.off + t);

            c += border_links<CONN>(w.rec, g.level, ba, side_of(g, tb, TWI_MAXTREE_TOP), ou,
                                    (uint32_t)__ldg(g.off + tb), k, len);
            /* Corner diagonals: their predecessors are links to other tiles, never equal. */
            if (CONN == 8 && k == len - 1 && col + 1 < g.tiles_x) {
                const uint32_t u = ou + __ldg(ba + k);
                const uint32_t v =
                    (uint32_t)__ldg(g.off + tb + 1) + __ldg(side_of(g, tb + 1, TWI_MAXTREE_TOP));

                connect(w.rec, u, __ldg(g.level + u), v, __ldg(g.level + v));
                c++;
            }
            if (CONN == 8 && k == 0 && col > 0) {
                const int64_t wl = x0 - __ldg(w.colx + col - 1);
                const uint32_t u = ou + __ldg(ba);
                const uint32_t v = (uint32_t)__ldg(g.off + tb - 1) +
                                   __ldg(side_of(g, tb - 1, TWI_MAXTREE_TOP) + wl - 1);

                connect(w.rec, u, __ldg(g.level + u), v, __ldg(g.level + v));
                c++;
            }
        }
    }
    count_links(links, c);
}

/* ---- 4. canonical form ------------------------------------------------------------------ */

/*
 * parent := level root of the parent. A node at its parent's level (not a level root) is a
 * leaf of the canonical tree: its own pixels and highest level go into its level root here,
 * and only the level roots' children are counted, so that mm_sum climbs level roots alone.
 */
__global__ void __launch_bounds__(MergePolicy::THREADS)
mm_flatten(Grid g, Work w)
{
    const uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (v >= g.n)
        return;
    const u64 r = __ldg(w.rec + v);
    uint32_t q = (uint32_t)v;

    if (r) {
        const uint32_t f = rec_lev(r);

        q = rec_idx(r);
        for (u64 rq = __ldg(w.rec + q); rq && rec_lev(rq) == f; rq = __ldg(w.rec + q))
            q = rec_idx(rq);
        if (f == __ldg(g.level + v)) {
            atomicAdd(w.area + q, (u64)__ldg(g.own + v));
            atomicMax(w.mx + q, (uint32_t)__ldg(g.maxv + v));
        } else {
            atomicAdd(w.kids + q, 1u);
        }
    }
    w.par[v] = q;
}

/* ---- 5. areas and highest levels, bottom-up --------------------------------------------- */

/*
 * One thread from each level root with no level-root child. At a parent with one such child
 * the climber is alone: it adds with plain loads and stores, one dependent load a step (most
 * steps on the long chains of 16-bit trees). Elsewhere it adds with atomics and only the last
 * child to arrive goes on.
 */
__global__ void __launch_bounds__(MergePolicy::THREADS)
mm_sum(Grid g, Work w)
{
    uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (v >= g.n || __ldg(w.kids + v) != 0)
        return;
    uint32_t q = __ldg(w.par + v);

    if (q != v && __ldg(g.level + q) == __ldg(g.level + v))
        return; /* not a level root: counted by mm_flatten */
    u64 a = w.area[v];
    uint32_t m = w.mx[v];

    for (; q != v; v = q, q = __ldg(w.par + q)) {
        if (__ldg(w.kids + q) == 1u) {
            a += w.area[q];
            m = max(m, w.mx[q]);
            w.area[q] = a;
            w.mx[q] = m;
            continue;
        }
        cuda::atomic_ref<u64, cuda::thread_scope_device> aq(w.area[q]);
        cuda::atomic_ref<uint32_t, cuda::thread_scope_device> mq(w.mx[q]);
        cuda::atomic_ref<uint32_t, cuda::thread_scope_device> nq(w.arrived[q]);

        aq.fetch_add(a, cuda::memory_order_relaxed);
        mq.fetch_max(m, cuda::memory_order_relaxed);
        /* release: our sums before the count; acquire: the other children's, for the last */
        if (nq.fetch_add(1u, cuda::memory_order_acq_rel) + 1u != __ldg(w.kids + q))
            break;
        a = aq.load(cuda::memory_order_relaxed);
        m = mq.load(cuda::memory_order_relaxed);
    }
}

/* ---- 6. answers ------------------------------------------------------------------------- */

/* v's answer, or UNRESOLVED | the node whose answer v takes (twi_maxtree_merge's rules). */
__global__ void __launch_bounds__(MergePolicy::THREADS)
mm_answer_init(Grid g, Work w, Rule f, u64 *res)
{
    const uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (v >= g.n)
        return;
    const uint32_t q = __ldg(w.par + v), lv = __ldg(g.level + v), lq = __ldg(g.level + q);
    const u64 area = __ldg(w.area + v);
    u64 r;

    if (q == v) /* the root: the whole image's minimum */
        r = f.rule == TWI_MAXTREE_AREA_MAP                              ? area
            : f.rule == TWI_MAXTREE_HEIGHT || area >= f.threshold ? (u64)lv
                                                             : f.vmin;
    else if (lq == lv) /* not the level root: the level root's answer */
        r = UNRESOLVED | q;
    else if (f.rule == TWI_MAXTREE_AREA_MAP)
        r = area;
    else if (f.rule == TWI_MAXTREE_AREA)
        r = area >= f.threshold ? (u64)lv : UNRESOLVED | q;
    else
        r = (u64)(__ldg(w.mx + v) - lq) >= f.threshold ? (u64)lv : UNRESOLVED | q;
    res[v] = r;
}

__global__ void __launch_bounds__(MergePolicy::THREADS)
mm_answer(Grid g, u64 *res)
{
    const uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (v >= g.n)
        return;
    u64 cur = ld_relaxed(res + v);

    while (cur & UNRESOLVED) {
        cur = ld_relaxed(res + (uint32_t)cur);
        st_relaxed(res + v, cur);
    }
}

/* ---- host side -------------------------------------------------------------------------- */

using twi_cu::align_up;

/* The layout's arrays lie inside the buffer, aligned to their elements. */
bool
layout_ok(const twi_maxtree_pack *l)
{
    if (!l || l->tiles_x < 1 || l->tiles_y < 1 || l->tiles_x > INT64_MAX / l->tiles_y ||
        l->n_tiles != l->tiles_x * l->tiles_y || l->n < 1 || l->n >= (int64_t)UINT32_MAX ||
        (uint64_t)l->n_tiles > SIZE_MAX / 64)
        return false;
    const size_t nt = (size_t)l->n_tiles, n = (size_t)l->n;
    const struct {
        size_t at, bytes, align;
    } a[] = {
        {l->off_at, (nt + 1) * 8, 8}, {l->dims_at, nt * 8, 4}, {l->side_at, nt * 32, 8},
        {l->level_at, n * 2, 2},      {l->maxv_at, n * 2, 2},  {l->lparent_at, n * 4, 4},
        {l->own_at, n * 4, 4},        {l->sides_at, 0, 4},
    };

    for (const auto &e : a)
        if (e.at % e.align || e.at > l->bytes || e.bytes > l->bytes - e.at)
            return false;
    return true;
}

size_t
scratch_bytes_for(const twi_maxtree_pack *l)
{
    const size_t n = (size_t)l->n;

    return ALIGN + 2 * align_up(n * 8) + 4 * align_up(n * 4) +
           align_up(((size_t)l->tiles_y + 1) * 8) + align_up(((size_t)l->tiles_x + 1) * 8);
}

template <class T>
const T *
at(const void *base, size_t off)
{
    return reinterpret_cast<const T *>(static_cast<const unsigned char *>(base) + off);
}

Work
carve(void *scratch, const twi_maxtree_pack *l)
{
    unsigned char *b = twi_cu::aligned_base(scratch);
    const size_t n = (size_t)l->n;
    Work w;

    w.rec = reinterpret_cast<u64 *>(b);
    b += align_up(n * 8);
    w.area = reinterpret_cast<u64 *>(b);
    b += align_up(n * 8);
    w.par = reinterpret_cast<uint32_t *>(b);
    b += align_up(n * 4);
    w.kids = reinterpret_cast<uint32_t *>(b);
    b += align_up(n * 4);
    w.arrived = reinterpret_cast<uint32_t *>(b);
    b += align_up(n * 4);
    w.mx = reinterpret_cast<uint32_t *>(b);
    b += align_up(n * 4);
    w.rowy = reinterpret_cast<int64_t *>(b);
    b += align_up(((size_t)l->tiles_y + 1) * 8);
    w.colx = reinterpret_cast<int64_t *>(b);
    return w;
}

tw_status
launch(const void *d_pack, const twi_maxtree_pack *l, int conn, const twi_maxtree_filter *f,
       u64 *res,
       unsigned long long *links, void *d_scratch, cudaStream_t s)
{
    constexpr int T = MergePolicy::THREADS;
    const Grid g = {l->tiles_x,
                    l->tiles_y,
                    (uint32_t)l->n,
                    at<int64_t>(d_pack, l->off_at),
                    at<int32_t>(d_pack, l->dims_at),
                    at<int64_t>(d_pack, l->side_at),
                    at<uint16_t>(d_pack, l->level_at),
                    at<uint16_t>(d_pack, l->maxv_at),
                    at<uint32_t>(d_pack, l->lparent_at),
                    at<uint32_t>(d_pack, l->own_at),
                    at<uint32_t>(d_pack, l->sides_at)};
    const Work w = carve(d_scratch, l);
    const Rule r = {(int)f->rule, f->threshold, f->vmin};
    const unsigned nb = (unsigned)(((uint64_t)l->n + T - 1) / T);
    int dev = 0, sms = 0;

    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return TW_E_DEVICE;
    if (links && cudaMemsetAsync(links, 0, sizeof *links, s) != cudaSuccess)
        return TW_E_DEVICE;
    mm_geometry<<<1, MergePolicy::GEO_THREADS, 0, s>>>(g, w);
    mm_init<<<nb, T, 0, s>>>(g, w, links);
    if (l->n_tiles > 1) {
        const unsigned lb = (unsigned)(sms > 0 ? sms : 1) * MergePolicy::LINK_BLOCKS_PER_SM;

        if (conn == 8)
            mm_links<8><<<lb, MergePolicy::LINK_THREADS, 0, s>>>(g, w, links);
        else
            mm_links<4><<<lb, MergePolicy::LINK_THREADS, 0, s>>>(g, w, links);
    }
    mm_flatten<<<nb, T, 0, s>>>(g, w);
    mm_sum<<<nb, T, 0, s>>>(g, w);
    mm_answer_init<<<nb, T, 0, s>>>(g, w, r, res);
    mm_answer<<<nb, T, 0, s>>>(g, res);
    return twi_cu::launched();
}

} // namespace

extern "C" size_t
twi_cuda_maxtree_merge_scratch_size(const twi_maxtree_pack *layout, int conn)
{
    if (!layout_ok(layout) || (conn != 4 && conn != 8))
        return 0;
    return scratch_bytes_for(layout);
}

extern "C" tw_status
twi_cuda_maxtree_merge(const void *d_pack, const twi_maxtree_pack *layout, int conn,
                       const twi_maxtree_filter *f, uint64_t *d_res, int64_t *d_links,
                       void *d_scratch,
                       size_t scratch_bytes, void *stream)
{
    try {
        if (!d_pack || (uintptr_t)d_pack % 8 || !layout_ok(layout) || (conn != 4 && conn != 8) ||
            !f || (f->rule != TWI_MAXTREE_AREA && f->rule != TWI_MAXTREE_HEIGHT &&
                   f->rule != TWI_MAXTREE_AREA_MAP) ||
            !d_res || (uintptr_t)d_res % 8 || (d_links && (uintptr_t)d_links % 8) ||
            !d_scratch || scratch_bytes < scratch_bytes_for(layout))
            return TW_E_INVALID;
        cudaStream_t s = static_cast<cudaStream_t>(stream);
        const tw_status st = launch(d_pack, layout, conn, f, reinterpret_cast<u64 *>(d_res),
                                    reinterpret_cast<unsigned long long *>(d_links), d_scratch,
                                    s);

        return st != TW_OK ? st : twi_cu::finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}
