/* SPDX-License-Identifier: MIT */
/* tilewave: the canonical max-tree on CUDA ([Blin22]: 1D column trees, concurrent CONNECT). */

/*
 * What this computes: the CUDA twin of twi_omp_maxtree (omp/omp_kernels.h), the canonical
 * parent image of kern/maxtree.h: with p < q iff f(p) < f(q), or f(p) = f(q) and
 * index(p) > index(q), every pixel points to the canonical pixel (largest raster index) of its
 * node, a canonical pixel to that of the parent node, and the root to itself. The form is
 * unique, so the bytes equal the CPU twin's whatever the order the threads ran in.
 *
 * How ([Blin22], sections 4-5, the "1D-optimised" algorithm):
 *
 * 1. mt_tile, one thread block per TW x TH tile (TH = SUB * NS), TW x NS threads. The levels go
 *    to shared memory. Thread (x, s) builds the max-tree of rows [s SUB, (s + 1) SUB) of column
 *    x with the linear 1D algorithm of [Menotti07] ([Blin22] alg. 2), scanning upwards so
 *    that links inside a flat run go to the larger index, as the order requires. Its stack is
 *    threaded through the parent records themselves: a pushed pixel's record names the pixel
 *    below it on the stack (its parent if nothing lower turns up), so no per-thread array.
 *    Then all threads merge concurrently with the lock-free CONNECT of [Blin22] alg. 6: thread
 *    (x, s) walks the border between columns x and x + 1 over its rows, and the border between
 *    its segment and the next one at column x. The parent of a pixel is a 32-bit record
 *    (parent level << 16 | parent local index + 1, 0 = none): an atomicMax on it keeps the
 *    candidate nearest the pixel (higher level, then larger index), exactly the rule of
 *    algorithm 6, and one load yields both the next pixel and its level. After a barrier each
 *    thread flattens its pixels inside the tile (parent := level root of parent) and writes
 *    64-bit records (parent level << 32 | global index + 1) to the scratch array.
 * 2. mt_merge, one thread per pixel pair across a tile border (tile rows, then tile columns):
 *    the same CONNECT on the 64-bit records in global memory, atomicMax again. The record holds
 *    the parent's level, so a walk up a branch is one dependent load per step (with 32-bit
 *    parents and the levels read from the image, a step is two), and the atomicMax lets several
 *    threads make progress on one parent at once where a CAS makes all but one retry.
 * 3. mt_flatten, one thread per pixel: parent := level root of the parent, written as a 32-bit
 *    index to the output; a pixel with no parent is the root and points to itself. The walks
 *    to the level roots are compressed as they go for 16-bit 8-connectivity (see there).
 *
 * Fewer CONNECTs (section 5.2). On every border (column pairs and segment pairs inside a tile,
 * tile pairs in global memory) the edges are cut into segments that lie inside one tile on
 * each side, and each position k of a segment (pixels u_k | v_k) issues at most one CONNECT.
 * An edge may be dropped when its two ends are joined, inside the regions the border separates
 * (column trees, whole tiles) and through kept edges of the same segment, by a path with no
 * pixel below the edge's weight min(f(u), f(v)): the components of every [f >= l] are then
 * the same, hence the max-tree.
 * - 4-connectivity: with m_k = min(f(u_k), f(v_k)), edge k is dropped when m_{k-1} >= m_k or
 *   m_{k+1} > m_k ([Blin22]'s proposition 3, with the inequalities its proof needs: the path
 *   u_k u_{k-1} v_{k-1} v_k; ties are broken one way so that equal neighbours never drop each
 *   other, and the maxima of m always stay). Measured 15-50 % faster than every edge.
 * - 8-connectivity: every cross edge of the square u_{k-1} u_k v_{k-1} v_k is dominated by the
 *   one joining the higher pixel of each side (a_k, b_k), of weight c_k ([Blin22]'s proposition
 *   1; straight edges go too, which also covers its proposition 2). Those square edges are then
 *   thinned like the 4-connected ones: square k goes when square k - 1 has c >= c_k or square
 *   k + 1 has c > c_k, provided the two squares' ends are joined above c_k on both sides (they
 *   are, unless a_k and the neighbour's a sit two apart around a pixel below c_k). At most one
 *   CONNECT per position, as in [Blin22], and about as few as with 4-connectivity. A segment of
 *   one position keeps its straight edge; the diagonals across a corner where four tiles meet
 *   are in no segment and get their own CONNECTs.
 * Dropped edges lean on paths inside regions and on kept edges of the same segment; the
 * segment borders inside a tile lean on the column borders and never the reverse, so the
 * justifications never go round in a circle. (tests/cuda/test_maxtree_cuda.c checks every rule
 * against a naive union-find on images full of ties.)
 *
 * Each thread runs its kept column-border edges back to back (the codes of a segment's edges
 * are found first), and every edge goes through one CONNECT call site whatever its shape:
 * the threads of a warp then walk together; with a call per edge shape, threads holding
 * different shapes ran different inlined copies of the loop one after another, which cost
 * 8-connectivity a factor of 1.5.
 *
 * 32-bit levels (TW_U32, the ranks of the tree of shapes, ops/tos.c): the same kernels on
 * 64-bit shared records (level << 32 | local index + 1), so any 32-bit level fits, and the
 * global records as they are (their level field has 32 bits). As on the CPU (omp/
 * maxtree_u32.c) they take fewer than 2^31 pixels, and may run in place (the parent view the
 * very view of the levels: mt_flatten reads only the records). twi_cuda_maxtree_canon also
 * writes the bit map of the canonical pixels (mt_canon, before mt_flatten), which the CPU
 * kernel's `canon` gives and the levels no longer tell once replaced.
 *
 * Limits: w * h <= UINT32_MAX (TW_U32 parents; global indices + 1 fit 32 bits), tiles of at
 * most 65535 pixels for 8- and 16-bit levels (local indices + 1 fit 16 bits). Scratch: 8
 * bytes per pixel.
 */
#include <cstddef>
#include <cstdint>

#include <cuda/atomic>
#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "maxtree.h" /* twi_maxtree_check: the contract both twins share (kern/) */

namespace {

/*
 * Tuning (in policies, not kernels), measured on an H100 with tests/gpu/time_maxtree.cu (6000 x
 * 4000 and 8192 x 8192 smooth-plus-noise images, median of 7 runs): columns cut in segments of
 * 16 rows (one thread each); tiles of 64 x 64 for 8-bit, 64 x 32 for 16-bit. 8-bit: 64 x 16,
 * 64 x 32, 32 x 64, 128 x 32 and 32 x 128 were within 5 % (64 x 64 best or near it with
 * 8-connectivity); segments of 8 or 32 rows were 3-10 % slower. 16-bit: 64 x 32 had the best
 * total over both images and connectivities (32 x 64 and 64 x 64 were 3-12 % slower with
 * 8-connectivity; 64 x 16 won one case by 25 % and lost another by 25 %). Tried and dropped:
 * the one-pixel halo of [Blin22] section 5.3 on the borders between tile columns (16-bit
 * 4-connected 1.6 % faster, 8-connected 5-15 % slower, 8-bit mixed), merging even column
 * borders before odd ones (5-30 % slower), and shortening level-root walks with an atomicMax
 * (no gain). Running a thread's kept column-border edges back to back took 10-20 % off the
 * time, one CONNECT call site for every edge shape a third off with 8-connectivity.
 */
struct MtPolicyBase {
    static constexpr int SUB = 16;           /* rows per column segment (one thread each) */
    static constexpr int MERGE_THREADS = 256;
    static constexpr int FLAT_THREADS = 256;
    /* Counters for the timing tool (tests/gpu/time_maxtree.cu); compiled out here. */
    static constexpr bool STATS = false;
    static __device__ void stat(int, unsigned long long) {}
};
template <class T> struct MtPolicy;
template <> struct MtPolicy<uint8_t> : MtPolicyBase {
    static constexpr int TW = 64;            /* tile width: columns = threads along x */
    static constexpr int NS = 4;             /* segments per tile: TH = SUB * NS */
};
template <> struct MtPolicy<uint16_t> : MtPolicyBase {
    static constexpr int TW = 64;
    static constexpr int NS = 2;
};
/* 32-bit levels (the ranks of the tree of shapes): 64-bit shared records, so 64 x 32 tiles
 * (24 KB of shared memory, as 16-bit's 64 x 64 would be 48). Not tuned on a GPU yet. */
template <> struct MtPolicy<uint32_t> : MtPolicyBase {
    static constexpr int TW = 64;
    static constexpr int NS = 2;
};

/* The parent records of a tile in shared memory: (level << 16 | local index + 1) in 32 bits
 * for 8- and 16-bit levels; 32-bit levels take 64 (level << 32 | local index + 1), the
 * global records' layout. */
template <class T> struct MtRec {
    typedef uint32_t type;
};
template <> struct MtRec<uint32_t> {
    typedef unsigned long long type;
};

/* Counter slots of the STATS hook. */
enum { ST_CALLS, ST_ROUNDS, ST_STEPS, ST_LOST, ST_T_TREE, ST_T_MERGE, ST_T_FLAT, ST_FLAT_STEPS };

using twi_cu::ALIGN;
using twi_cu::ceil_div;
using twi_cu::u64;

/* ---- parent records -------------------------------------------------------------------- */

/* The records and the concurrent CONNECT (cuda/cuda_common.cuh), counted for the STATS hook. */
using twi_cu::enc;
using twi_cu::ld_rec;
using twi_cu::rec_idx;
using twi_cu::rec_lev;

template <class P, class R>
__device__ __forceinline__ void
connect(R *rec, uint32_t a, uint32_t fa, uint32_t b, uint32_t fb)
{
    twi_cu::ConnectCount c = {0, 0, 0};

    twi_cu::connect_records<P::STATS>(rec, a, fa, b, fb, &c);
    if (P::STATS) {
        P::stat(ST_CALLS, 1);
        P::stat(ST_ROUNDS, c.rounds);
        P::stat(ST_STEPS, c.steps);
        P::stat(ST_LOST, c.lost);
    }
}

/*
 * The one edge position k of a border segment (pixels u_k | v_k, k in [0, n)) keeps after the
 * grid simplification (see the essay): 0 none, else the pair it joins: 1 (u_k, v_k),
 * 2 (u_{k-1}, v_k), 3 (u_k, v_{k-1}), 4 (u_{k-1}, v_{k-1}). u, v: levels at k - 2 .. k + 1
 * (anything where the position is outside the segment).
 */
template <int CONN>
__device__ __forceinline__ int
border_edge(const uint32_t (&u)[4], const uint32_t (&v)[4], int k, int n)
{
    if (CONN == 4) {
        const uint32_t m = min(u[2], v[2]);

        if (k > 0 && min(u[1], v[1]) >= m)
            return 0;
        if (k + 1 < n && min(u[3], v[3]) > m)
            return 0;
        return 1;
    }
    if (n == 1)
        return 1;
    if (k == 0)
        return 0;
    /* square k (positions k - 1, k): the higher pixel of each side, and the edge's weight */
    const int ia = u[2] > u[1], ib = v[2] > v[1];
    const uint32_t c = min(ia ? u[2] : u[1], ib ? v[2] : v[1]);

    if (k >= 2) {
        const int il = u[1] > u[0], jl = v[1] > v[0];

        /* square k - 1 at least as high, and joined to this one above c on both sides */
        if (min(il ? u[1] : u[0], jl ? v[1] : v[0]) >= c && !(ia && !il && u[1] < c) &&
            !(ib && !jl && v[1] < c))
            return 0;
    }
    if (k + 1 < n) {
        const int ir = u[3] > u[2], jr = v[3] > v[2];

        if (min(ir ? u[3] : u[2], jr ? v[3] : v[2]) > c && !(!ia && ir && u[2] < c) &&
            !(!ib && jr && v[2] < c))
            return 0;
    }
    return 1 + (ia ? 0 : 1) + (ib ? 0 : 2);
}

/*
 * CONNECT of the edge `e` (border_edge) at position k; u(k), v(k) give the record indices and
 * uw, vw the levels at k - 2 .. k + 1. One call site for every edge shape, so that the threads
 * of a warp run the same loop together.
 */
template <class P, class R, class U, class V>
__device__ __forceinline__ void
connect_edge(R *rec, int e, int64_t k, const U &u, const V &v, const uint32_t (&uw)[4],
             const uint32_t (&vw)[4])
{
    if (e) {
        const bool pu = e == 2 || e == 4, pv = e >= 3; /* that side's pixel at k - 1 */

        connect<P>(rec, u(pu ? k - 1 : k), pu ? uw[1] : uw[2], v(pv ? k - 1 : k),
                   pv ? vw[1] : vw[2]);
    }
}

/* Levels at positions k - 2 .. k + 1 of a border segment [0, n) (0 outside it). */
template <class F>
__device__ __forceinline__ void
window(uint32_t (&out)[4], const F &f, int64_t k, int64_t n)
{
#pragma unroll
    for (int d = 0; d < 4; d++) {
        const int64_t kk = k - 2 + d;

        out[d] = kk >= 0 && kk < n ? f(kk) : 0u;
    }
}

/* ---- 1. tiles in shared memory ---------------------------------------------------------- */

/*
 * The max-tree of rows [y0, y1) of column x of the tile ([Blin22] alg. 2, scanned upwards).
 * r: the current level root (not yet linked); top: the stack of lower level roots still open,
 * each linked through its record to the one under it; ftop: the level of top.
 */
template <class T, int TW, class R>
__device__ void
column_tree(R *rec, const T *lev, int x, int y0, int y1)
{
    constexpr uint32_t NONE = 0xffffffffu;
    uint32_t r = (uint32_t)((y1 - 1) * TW + x), fr = lev[r];
    uint32_t top = NONE, ftop = 0;

    for (int y = y1 - 2; y >= y0; y--) {
        const uint32_t p = (uint32_t)(y * TW + x), fp = lev[p];

        if (fr < fp) {
            rec[r] = top == NONE ? (R)0 : enc<R>(ftop, top);
            top = r;
            ftop = fr;
            r = p;
            fr = fp;
        } else if (fr == fp) {
            rec[p] = enc<R>(fr, r);
        } else {
            while (top != NONE && fp <= ftop) {
                const R below = rec[top];

                rec[r] = enc<R>(ftop, top);
                r = top;
                fr = ftop;
                top = below ? rec_idx(below) : NONE;
                ftop = rec_lev(below);
            }
            if (fr > fp) {
                rec[r] = enc<R>(fp, p);
                r = p;
                fr = fp;
            } else {
                rec[p] = enc<R>(fr, r);
            }
        }
    }
    rec[r] = top == NONE ? (R)0 : enc<R>(ftop, top);
}

/*
 * The border between columns x and x + 1 over rows [y0, y1) of the tile (k = y - y0). The
 * kept edges are found first (3 bits each) and then run back to back, so that the threads of
 * a warp take their i-th CONNECTs together rather than stepping through the rows in lockstep
 * with most of them idle.
 */
template <int CONN, class P, class T, class R>
__device__ __forceinline__ void
column_border(R *rec, const T *lev, int x, int y0, int y1)
{
    constexpr int TW = P::TW;
    static_assert(3 * P::SUB <= 64, "edge codes of a segment must fit 64 bits");
    const auto u = [&](int64_t k) { return (uint32_t)((y0 + k) * TW + x); };
    const auto v = [&](int64_t k) { return (uint32_t)((y0 + k) * TW + x + 1); };
    const int n = y1 - y0;
    uint32_t uw[4], vw[4];
    u64 codes = 0;

    window(uw, [&](int64_t k) { return (uint32_t)lev[u(k)]; }, 0, n);
    window(vw, [&](int64_t k) { return (uint32_t)lev[v(k)]; }, 0, n);
    for (int k = 0; k < n; k++) {
        codes |= (u64)border_edge<CONN>(uw, vw, k, n) << (3 * k);
        uw[0] = uw[1];
        uw[1] = uw[2];
        uw[2] = uw[3];
        uw[3] = k + 2 < n ? (uint32_t)lev[u(k + 2)] : 0u;
        vw[0] = vw[1];
        vw[1] = vw[2];
        vw[2] = vw[3];
        vw[3] = k + 2 < n ? (uint32_t)lev[v(k + 2)] : 0u;
    }
    while (codes) {
        const int k = (__ffsll((long long)codes) - 1) / 3;
        const int e = (int)(codes >> (3 * k) & 7u);

        codes &= ~(7ull << (3 * k));
        uw[1] = k > 0 ? (uint32_t)lev[u(k - 1)] : 0u;
        vw[1] = k > 0 ? (uint32_t)lev[v(k - 1)] : 0u;
        uw[2] = lev[u(k)];
        vw[2] = lev[v(k)];
        connect_edge<P>(rec, e, k, u, v, uw, vw);
    }
}

/* The tile grid of an image. */
struct Geo {
    int32_t w, h;
    int64_t tiles_x, tiles_y;
};

template <class T, int CONN, class P>
__global__ void __launch_bounds__(P::TW *P::NS)
mt_tile(const unsigned char *__restrict__ in, int64_t istride, Geo g, u64 *__restrict__ grec)
{
    typedef typename MtRec<T>::type R;
    constexpr int TW = P::TW, SUB = P::SUB, TH = P::SUB * P::NS;
    __shared__ R rec[TW * TH];
    __shared__ T lev[TW * TH];
    const int x = (int)threadIdx.x, s = (int)threadIdx.y;
    const int64_t ty = (int64_t)blockIdx.x / g.tiles_x, tx = (int64_t)blockIdx.x - ty * g.tiles_x;
    const int64_t X0 = tx * TW, Y0 = ty * TH;
    const int vw = (int)min((int64_t)TW, (int64_t)g.w - X0);
    const int vh = (int)min((int64_t)TH, (int64_t)g.h - Y0);
    const int y0 = s * SUB, y1 = min(y0 + SUB, vh);
    const bool col = x < vw && y0 < y1;
    long long t0 = P::STATS ? clock64() : 0;

    if (col) {
        const unsigned char *src = in + (Y0 + y0) * istride + (X0 + x) * (int64_t)sizeof(T);

        for (int y = y0; y < y1; y++, src += istride)
            lev[y * TW + x] = *reinterpret_cast<const T *>(src);
        column_tree<T, TW, R>(rec, lev, x, y0, y1);
    }
    __syncthreads();
    if (P::STATS && x == 0 && s == 0)
        P::stat(ST_T_TREE, (u64)(clock64() - t0));
    t0 = clock64();

    if (col && x + 1 < vw)
        column_border<CONN, P>(rec, lev, x, y0, y1);
    /* Border between this segment and the next at column x (k = x, over the tile width). */
    if (col && s + 1 < P::NS && y1 < vh) {
        const int yu = y1 - 1;
        const auto u = [&](int64_t k) { return (uint32_t)(yu * TW + k); };
        const auto v = [&](int64_t k) { return (uint32_t)((yu + 1) * TW + k); };
        uint32_t uw[4], vw4[4];

        window(uw, [&](int64_t k) { return (uint32_t)lev[u(k)]; }, x, vw);
        window(vw4, [&](int64_t k) { return (uint32_t)lev[v(k)]; }, x, vw);
        connect_edge<P>(rec, border_edge<CONN>(uw, vw4, x, vw), x, u, v, uw, vw4);
    }
    __syncthreads();
    if (P::STATS && x == 0 && s == 0)
        P::stat(ST_T_MERGE, (u64)(clock64() - t0));
    t0 = clock64();

    /* Flatten inside the tile and write global records. */
    if (col) {
        u64 *dst = grec + (uint64_t)(Y0 + y0) * (uint64_t)g.w + (uint64_t)(X0 + x);
        u64 fsteps = 0;

        for (int y = y0; y < y1; y++, dst += g.w) {
            const R r = rec[y * TW + x];
            u64 gr = 0;

            if (r) {
                uint32_t q = rec_idx(r);
                const uint32_t fq = rec_lev(r);

                for (R rq = rec[q]; rq && rec_lev(rq) == fq; rq = rec[q]) {
                    q = rec_idx(rq);
                    fsteps++;
                }
                const uint64_t gq = (uint64_t)(Y0 + (int64_t)(q / TW)) * (uint64_t)g.w +
                                    (uint64_t)(X0 + (int64_t)(q % TW));

                gr = enc<u64>(fq, (uint32_t)gq);
            }
            *dst = gr;
        }
        if (P::STATS)
            P::stat(ST_FLAT_STEPS, fsteps);
    }
    if (P::STATS && x == 0 && s == 0)
        P::stat(ST_T_FLAT, (u64)(clock64() - t0));
}

/* ---- 2. tile borders in global memory -------------------------------------------------- */

template <class T>
__device__ __forceinline__ uint32_t
pix(const unsigned char *in, int64_t istride, int64_t x, int64_t y)
{
    return *reinterpret_cast<const T *>(in + y * istride + x * (int64_t)sizeof(T));
}

/*
 * Threads [0, nh): the borders between tile rows, thread j * w + x at column x of border j
 * (segments: the tile columns). Threads [nh, nh + nv): the borders between tile columns,
 * thread nh + i * h + y at row y of border i (segments: the tile rows). The thread at the
 * start of a row-border segment also joins the two diagonals across the tile corner there
 * (8-connectivity).
 */
template <class T, int CONN, class P>
__global__ void __launch_bounds__(P::MERGE_THREADS)
mt_merge(const unsigned char *__restrict__ in, int64_t istride, Geo g, uint32_t nh, uint32_t nv,
         u64 *grec)
{
    constexpr int TW = P::TW, TH = P::SUB * P::NS;
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t w = g.w;

    if (t < nh) {
        const uint32_t j = t / (uint32_t)w;
        const int64_t x = (int64_t)(t - j * (uint32_t)w), yv = (int64_t)(j + 1) * TH, yu = yv - 1;
        const int64_t x0 = x & ~(int64_t)(TW - 1), k = x - x0;
        const int64_t n = min((int64_t)TW, w - x0);
        const auto u = [&](int64_t kk) { return (uint32_t)(yu * w + x0 + kk); };
        const auto v = [&](int64_t kk) { return (uint32_t)(yv * w + x0 + kk); };
        uint32_t uw[4], vw4[4];

        window(uw, [&](int64_t kk) { return pix<T>(in, istride, x0 + kk, yu); }, k, n);
        window(vw4, [&](int64_t kk) { return pix<T>(in, istride, x0 + kk, yv); }, k, n);
        connect_edge<P>(grec, border_edge<CONN>(uw, vw4, (int)k, (int)n), k, u, v, uw, vw4);
        if (CONN == 8 && k == 0 && x0 > 0) {
            connect<P>(grec, u(-1), pix<T>(in, istride, x - 1, yu), v(0), vw4[2]);
            connect<P>(grec, u(0), uw[2], v(-1), pix<T>(in, istride, x - 1, yv));
        }
    } else if (t - nh < nv) {
        const uint32_t t2 = t - nh, i = t2 / (uint32_t)g.h;
        const int64_t y = (int64_t)(t2 - i * (uint32_t)g.h);
        const int64_t xv = (int64_t)(i + 1) * TW, xu = xv - 1;
        const int64_t y0 = y & ~(int64_t)(TH - 1), k = y - y0;
        const int64_t n = min((int64_t)TH, (int64_t)g.h - y0);
        const auto u = [&](int64_t kk) { return (uint32_t)((y0 + kk) * w + xu); };
        const auto v = [&](int64_t kk) { return (uint32_t)((y0 + kk) * w + xv); };
        uint32_t uw[4], vw4[4];

        window(uw, [&](int64_t kk) { return pix<T>(in, istride, xu, y0 + kk); }, k, n);
        window(vw4, [&](int64_t kk) { return pix<T>(in, istride, xv, y0 + kk); }, k, n);
        connect_edge<P>(grec, border_edge<CONN>(uw, vw4, (int)k, (int)n), k, u, v, uw, vw4);
    }
}

/* ---- 3. canonical form ------------------------------------------------------------------ */

__device__ __forceinline__ void
st_rec(u64 *p, u64 v)
{
    cuda::atomic_ref<u64, cuda::thread_scope_device>(*p).store(v, cuda::memory_order_relaxed);
}

/*
 * The walks to a level root follow chains of pixels of one level. On 8-connected 16-bit noise
 * the giant component's node at each level holds ~1000 pixels linked in long chains: walking
 * them from every pixel made this kernel 89 ms of 205 at 8192^2 (4-conn: 3 ms). With COMPRESS
 * each walk that took a step is compressed behind it: every pixel on it (and the pixel itself)
 * gets the level root as parent. Safe while other threads walk: all merges are done, and a
 * record only ever moves to a pixel further up the same chain, so any mix of old and new
 * records still leads to the one level root. Only 16-bit 8-connectivity gains (89 -> 2.5 ms,
 * 7.3 -> 2.3 on smooth + noise); elsewhere the chains are short and the stores and uncached
 * loads cost 10-60 % of this kernel (8-bit 0.19 -> 0.36 ms), so the others keep plain walks.
 */
template <bool COMPRESS>
__global__ void __launch_bounds__(MtPolicyBase::FLAT_THREADS)
mt_flatten(u64 *__restrict__ grec, Geo g, unsigned char *out, int64_t ostride)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (x >= g.w)
        return;
    for (int64_t y = blockIdx.y; y < g.h; y += gridDim.y) {
        const uint64_t p = (uint64_t)y * (uint64_t)g.w + (uint64_t)x;
        uint32_t q = (uint32_t)p;

        if (!COMPRESS) {
            const u64 r = grec[p];

            if (r) {
                const uint32_t f = rec_lev(r);

                q = rec_idx(r);
                for (u64 rq = __ldg(grec + q); rq && rec_lev(rq) == f; rq = __ldg(grec + q))
                    q = rec_idx(rq);
            }
        } else {
            const u64 r = ld_rec(grec + p);

            if (r) {
                const uint32_t f = rec_lev(r), q0 = rec_idx(r);
                u64 rq = ld_rec(grec + q0);

                q = q0;
                if (rq && rec_lev(rq) == f) {
                    do {
                        q = rec_idx(rq);
                        rq = ld_rec(grec + q);
                    } while (rq && rec_lev(rq) == f);
                    const u64 root = enc<u64>(f, q);

                    st_rec(grec + p, root);
                    for (uint32_t c = q0; c != q;) {
                        const u64 rc = ld_rec(grec + c);

                        if (rc != root)
                            st_rec(grec + c, root);
                        c = rec_idx(rc);
                    }
                }
            }
        }
        reinterpret_cast<uint32_t *>(out + y * ostride)[x] = q;
    }
}

/* Whether mt_flatten compresses its walks for this input (see there). 32-bit levels (the
 * ranks of the tree of shapes, whose flat zones hold whole batches of the sort) compress too,
 * as a guard against long chains; not measured yet. */
template <class T, int CONN> constexpr bool
flat_compress()
{
    return (sizeof(T) == 2 && CONN == 8) || sizeof(T) == 4;
}

/*
 * The canonical bit map (twi_cuda_maxtree_canon): after the merges, before mt_flatten, a
 * pixel is canonical (the level root of its node) when it has no parent or its parent
 * record's level is below its own: equal-level parents always point to a larger index, so a
 * pixel with one is not its node's canonical pixel, and mt_flatten points every pixel at the
 * level root of its record. One thread per pixel; a warp's ballot is one 32-bit word of the
 * map (bit i % 64 of 64-bit word i / 64 is bit i % 32 of 32-bit word i / 32: little endian).
 * Threads cover whole 64-bit words, so the map's tail bits are written as 0.
 */
template <class T>
__global__ void __launch_bounds__(MtPolicyBase::FLAT_THREADS)
mt_canon(const u64 *__restrict__ grec, const unsigned char *__restrict__ in, int64_t istride,
         Geo g, uint64_t words, uint32_t *__restrict__ canon)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t n = (uint64_t)g.w * (uint64_t)g.h;
    bool c = false;

    if (i >= 64 * words)
        return; /* whole warps: 64 * words is a multiple of 32 */
    if (i < n) {
        const int64_t y = (int64_t)(i / (uint64_t)g.w), x = (int64_t)(i - (uint64_t)y * g.w);
        const u64 r = grec[i];

        c = r == 0 || rec_lev(r) != pix<T>(in, istride, x, y);
    }
    const unsigned bits = __ballot_sync(0xffffffffu, c);

    if ((threadIdx.x & 31u) == 0)
        canon[i >> 5] = bits;
}

/* ---- host side -------------------------------------------------------------------------- */

template <int V> constexpr bool
is_pow2()
{
    return V > 0 && (V & (V - 1)) == 0;
}

template <class P>
Geo
make_geo(int32_t w, int32_t h)
{
    return Geo{w, h, ceil_div(w, P::TW), ceil_div(h, P::SUB * P::NS)};
}

template <class T, int CONN, class P>
tw_status
launch_maxtree(const tw_tile_view *in, tw_tile_view *parent, uint64_t *canon, u64 *grec,
               cudaStream_t s)
{
    typedef typename MtRec<T>::type R;
    constexpr int TW = P::TW, TH = P::SUB * P::NS;
    static_assert(is_pow2<TW>() && is_pow2<TH>(), "tile sides must be powers of two");
    static_assert(sizeof(R) == 8 || TW * TH <= 65535, "local indices + 1 must fit 16 bits");
    static_assert(TW * TH * (sizeof(R) + sizeof(T)) <= 48 * 1024,
                  "tile over the static shared-memory limit");
    static_assert(TW * P::NS <= 1024, "too many threads per tile");
    static_assert(P::FLAT_THREADS == MtPolicyBase::FLAT_THREADS, "mt_flatten's launch bounds");
    const Geo g = make_geo<P>(in->w, in->h);
    const unsigned char *src = static_cast<const unsigned char *>(in->data);
    /* nh < w * h / TH, nv < h * w / TW: 32 bits */
    const uint32_t nh = (uint32_t)((g.tiles_y - 1) * g.w), nv = (uint32_t)((g.tiles_x - 1) * g.h);
    const dim3 fgrid((unsigned)ceil_div(g.w, P::FLAT_THREADS),
                     (unsigned)(g.h < 65535 ? g.h : 65535));

    mt_tile<T, CONN, P>
        <<<(unsigned)(g.tiles_x * g.tiles_y), dim3(TW, P::NS), 0, s>>>(src, in->stride, g, grec);
    if ((uint64_t)nh + nv > 0)
        mt_merge<T, CONN, P>
            <<<(unsigned)ceil_div((int64_t)nh + nv, P::MERGE_THREADS), P::MERGE_THREADS, 0, s>>>(
                src, in->stride, g, nh, nv, grec);
    if (canon) {
        /* before mt_flatten, which may write the parents over the levels (in place) */
        const uint64_t words = ((uint64_t)g.w * (uint64_t)g.h + 63) / 64;

        mt_canon<T><<<(unsigned)ceil_div((int64_t)(64 * words), P::FLAT_THREADS),
                      P::FLAT_THREADS, 0, s>>>(grec, src, in->stride, g, words,
                                               reinterpret_cast<uint32_t *>(canon));
    }
    mt_flatten<flat_compress<T, CONN>()><<<fgrid, P::FLAT_THREADS, 0, s>>>(
        grec, g, static_cast<unsigned char *>(parent->data), parent->stride);
    return twi_cu::launched();
}

template <class T>
tw_status
dispatch(const tw_tile_view *in, int conn, tw_tile_view *parent, uint64_t *canon, u64 *grec,
         cudaStream_t s)
{
    return conn == 4 ? launch_maxtree<T, 4, MtPolicy<T>>(in, parent, canon, grec, s)
                     : launch_maxtree<T, 8, MtPolicy<T>>(in, parent, canon, grec, s);
}

u64 *
aligned_base(void *p)
{
    return reinterpret_cast<u64 *>(twi_cu::aligned_base(p));
}

/* The checks of the CPU twin (32-bit levels: fewer than 2^31 pixels, in place only as one
 * view), plus what only this variant requires: TW_U32 parents. */
tw_status
check(const tw_tile_view *in, int conn, const tw_tile_view *parent)
{
    const tw_status st = twi_maxtree_check(in, conn, parent);

    if (st != TW_OK)
        return st;
    if (parent->type != TW_U32 || (uint64_t)in->w * (uint64_t)in->h > UINT32_MAX)
        return TW_E_INVALID;
    return TW_OK;
}

tw_status
run(const tw_tile_view *d_in, int conn, tw_tile_view *d_parent, uint64_t *d_canon,
    void *d_scratch, size_t scratch_bytes, void *stream)
{
    tw_status st = check(d_in, conn, d_parent);

    if (st != TW_OK)
        return st;
    if (d_canon && d_in->type != TW_U32)
        return TW_E_INVALID;
    if (d_in->w == 0 || d_in->h == 0)
        return TW_OK;
    if (!d_scratch ||
        scratch_bytes < twi_cuda_maxtree_scratch_size(d_in->w, d_in->h, d_in->type, conn))
        return TW_E_INVALID;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    u64 *grec = aligned_base(d_scratch);

    switch (d_in->type) {
    case TW_U8: st = dispatch<uint8_t>(d_in, conn, d_parent, d_canon, grec, s); break;
    case TW_U16: st = dispatch<uint16_t>(d_in, conn, d_parent, d_canon, grec, s); break;
    default: st = dispatch<uint32_t>(d_in, conn, d_parent, d_canon, grec, s); break;
    }
    return st != TW_OK ? st : twi_cu::finish(s);
}

} // namespace

extern "C" size_t
twi_cuda_maxtree_scratch_size(int32_t w, int32_t h, tw_sample_type type, int conn)
{
    (void)type;
    (void)conn;
    if (w < 0 || h < 0 || (uint64_t)w * (uint64_t)h > UINT32_MAX)
        return 0;
    return (size_t)w * (size_t)h * sizeof(u64) + ALIGN;
}

extern "C" tw_status
twi_cuda_maxtree(const tw_tile_view *d_in, int conn, tw_tile_view *d_parent, void *d_scratch,
                 size_t scratch_bytes, void *stream)
{
    try {
        return run(d_in, conn, d_parent, NULL, d_scratch, scratch_bytes, stream);
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" tw_status
twi_cuda_maxtree_canon(const tw_tile_view *d_in, int conn, tw_tile_view *d_parent,
                       uint64_t *d_canon, void *d_scratch, size_t scratch_bytes, void *stream)
{
    try {
        return d_canon ? run(d_in, conn, d_parent, d_canon, d_scratch, scratch_bytes, stream)
                       : TW_E_INVALID;
    } catch (...) {
        return TW_E_DEVICE;
    }
}
