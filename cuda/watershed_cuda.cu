/* SPDX-License-Identifier: MIT */
/* tilewave: the marker-controlled watershed inside one tile on CUDA (keys, best predecessors,
 * labels), the twins of omp/watershed_omp.c's tile kernels. */
/*
 * Both fixpoints of the watershed (kern/watershed.h, docs/watershed.md) are monotone "min"
 * fixpoints: any order of updates that only lowers a value to one of its candidates and stops
 * when none lowers anything reaches the CPU kernels' bytes. The CPU runs Dijkstra (keys) and a
 * FIFO (labels); here both are a parallel relaxation:
 *
 *   keys:   key(p) := min(key(p), step(key(q), lev(p))) over the in-tile neighbours q with a
 *           key, for p inside the mask;
 *   labels: lab(p) := min(lab(p), lab(q)) over the in-tile neighbours q that are best
 *           predecessors of p (its pred bits).
 *
 * One persistent cooperative kernel per fixpoint: rounds separated by grid-wide barriers. In a
 * round each block takes patches of 32 x 32 pixels (grid-stride), loads a patch and its
 * one-pixel halo into shared memory, relaxes the patch there until it is stable (Jacobi
 * sweeps between block barriers only, so a plateau crosses a patch in one round rather than
 * one round a pixel, as the GPU reconstruction's per-block queues do), then writes the pixels
 * that changed back.
 * A round in which no block changed anything ends the run: every patch was then stable
 * against halo values no one changed. Values in global memory are read and written as whole
 * 64- (32-) bit words through L2 (relaxed atomics): a block may read a neighbour's value
 * before or after another block lowers it in the same round, both are upper bounds of the
 * fixpoint, and the lowering block reports a change, so another round follows.
 *
 * After the first round only the patches next to a patch that changed in the round before
 * are relaxed again. Seeded runs (the pixels a BP lowered) need no seed list: their first
 * round visits the whole tile, finds the patches the seeds unsettled and works there; the
 * rest of the tile is at its fixpoint already, so the result is the CPU's seeded run's.
 *
 * The best-predecessor bits are a pure function of the final keys: one thread a pixel, the
 * same bit layout and neighbour order as twi_omp_watershed_preds (kern/watershed.h), the
 * neighbours outside the tile read from the ring.
 */
#include <cooperative_groups.h>
#include <cstdint>

#include <cuda/atomic>
#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "watershed.h" /* the keys, the ring and the neighbour order (kern/) */

namespace cg = cooperative_groups;

namespace {

using twi_cu::align_up;
using twi_cu::ceil_div;
typedef unsigned long long u64;

/* Tuning: patches of PW x PH pixels, a block of PW x (PH / ROWS) threads, each thread ROWS
 * pixels of a column of the patch; at most BLOCKS_PER_SM resident blocks an SM. */
struct WsPolicy {
    static constexpr int PW = 32;
    static constexpr int PH = 32;
    static constexpr int ROWS = 4;
    static constexpr int THREADS = PW * PH / ROWS;
    static constexpr int BLOCKS_PER_SM = 4;
    static constexpr int PRED_THREADS = 256;
    static constexpr unsigned MAX_GRID = 65535u;
};
static_assert(WsPolicy::THREADS <= 1024, "block too large");
static_assert(WsPolicy::PH % WsPolicy::ROWS == 0, "rows per thread must divide the patch");
static_assert((WsPolicy::PW + 2) * (WsPolicy::PH + 2) * 8 <= 48 * 1024, "shared patch too large");

/* kern/watershed.c's neighbour order (checked against it on the host before every launch). */
__constant__ int c_dx[8] = {0, 0, -1, 1, -1, 1, 1, -1};
__constant__ int c_dy[8] = {-1, 1, 0, 0, -1, 1, -1, 1};
const int h_dx[8] = {0, 0, -1, 1, -1, 1, 1, -1};
const int h_dy[8] = {-1, 1, 0, 0, -1, 1, -1, 1};

__device__ __forceinline__ u64
step(u64 kq, uint32_t lp)
{
    return (u64)lp > (kq >> 32) ? ((u64)lp << 32) | 1u : kq + 1u;
}

template <class T>
__device__ __forceinline__ T
ld_l2(const T *p)
{
    return cuda::atomic_ref<T, cuda::thread_scope_device>(*const_cast<T *>(p))
        .load(cuda::memory_order_relaxed);
}

template <class T>
__device__ __forceinline__ void
st_l2(T *p, T v)
{
    cuda::atomic_ref<T, cuda::thread_scope_device>(*p).store(v, cuda::memory_order_relaxed);
}

/* The key relaxation: a pixel inside the mask takes step(key(q), lev(p)) when lower. */
struct KeyOp {
    typedef u64 T;
    struct Aux {
        uint32_t lev;
        bool in;
    };
    static constexpr u64 INF = TWI_WATERSHED_KINF;
    const uint32_t *lev;
    const uint8_t *in;

    __device__ Aux aux(int64_t i) const { return Aux{lev[i], in[i] != 0}; }
    __device__ T relax(const Aux &a, T cur, T q, int) const
    {
        if (!a.in || q == INF)
            return cur;
        const T c = step(q, a.lev);
        return c < cur ? c : cur;
    }
};

/* The label relaxation: a pixel takes the label of a best predecessor when lower. */
struct LabOp {
    typedef uint32_t T;
    typedef uint8_t Aux;
    static constexpr uint32_t INF = TWI_WATERSHED_LINF;
    const uint8_t *pred;

    __device__ Aux aux(int64_t i) const { return pred[i]; }
    __device__ T relax(const Aux &a, T cur, T q, int k) const
    {
        return (a >> k & 1u) && q < cur ? q : cur;
    }
};

/* Round counters: round r counts its changed patches in cnt[r % 3]; block 0 clears
 * cnt[(r + 1) % 3] in round r, which was last read after round r - 2's barrier (before round
 * r - 1's) and is next written in round r + 1: one barrier a round suffices. cnt[3]: rounds.
 * The same three slots of per-patch flags (chg[slot * np + patch], 1: the patch changed in
 * that round; each patch clears its own flag of slot (r + 1) % 3 in round r): after round 0 a
 * patch is relaxed only when it or one of its 8 neighbouring patches changed in the round
 * before; a patch none of those changed in since it was last relaxed is still stable, so a
 * seeded run works where the seeds are and not over the whole tile every round. */
template <class Op, int NK>
__global__ void __launch_bounds__(WsPolicy::THREADS)
fixpoint_kernel(Op op, typename Op::T *val, int32_t w, int32_t h, unsigned *cnt, unsigned *chg)
{
    using P = WsPolicy;
    using T = typename Op::T;
    constexpr int SW = P::PW + 2;
    __shared__ T s[(P::PH + 2) * SW];
    cg::grid_group grid = cg::this_grid();
    const int64_t px = ceil_div(w, P::PW), np = px * ceil_div(h, P::PH);
    const int tx = (int)threadIdx.x % P::PW, ty = (int)threadIdx.x / P::PW;
    constexpr int RSTEP = P::PH / P::ROWS;

    for (unsigned r = 0;; r++) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            st_l2(cnt + (r + 1) % 3, 0u);
        for (int64_t b = blockIdx.x; b < np; b += gridDim.x) {
            const int64_t x0 = (b % px) * P::PW, y0 = (b / px) * P::PH;
            typename Op::Aux a[P::ROWS];
            T orig[P::ROWS];
            bool own[P::ROWS], any = false, active = r == 0;

            /* the flags of round r - 1 are not written in round r: every thread reads the
             * same ones, so the block agrees */
            for (int64_t dy = -1; dy <= 1 && !active; dy++)
                for (int64_t dx = -1; dx <= 1 && !active; dx++) {
                    const int64_t bx = b % px + dx, by = b / px + dy;

                    if (bx >= 0 && by >= 0 && bx < px && by * px + bx < np)
                        active = ld_l2(chg + (int64_t)((r + 2) % 3) * np + by * px + bx) != 0;
                }
            if (threadIdx.x == 0)
                st_l2(chg + (int64_t)((r + 1) % 3) * np + b, 0u);
            if (!active)
                continue;

            for (int i = (int)threadIdx.x; i < (P::PH + 2) * SW; i += P::THREADS) {
                const int64_t gx = x0 + i % SW - 1, gy = y0 + i / SW - 1;

                s[i] = gx >= 0 && gy >= 0 && gx < w && gy < h ? ld_l2(val + gy * w + gx) : Op::INF;
            }
#pragma unroll
            for (int j = 0; j < P::ROWS; j++) {
                const int64_t gx = x0 + tx, gy = y0 + ty + j * RSTEP;

                own[j] = gx < w && gy < h;
                a[j] = own[j] ? op.aux(gy * w + gx) : typename Op::Aux{};
            }
            __syncthreads();
#pragma unroll
            for (int j = 0; j < P::ROWS; j++)
                orig[j] = s[(ty + j * RSTEP + 1) * SW + tx + 1];
            /* Jacobi sweeps: every thread reads, a barrier, the lowered pixels are written, a
             * barrier (no thread writes what another reads in the same phase) */
            for (;;) {
                T nv[P::ROWS];
                bool ch = false;

#pragma unroll
                for (int j = 0; j < P::ROWS; j++) {
                    const int c = (ty + j * RSTEP + 1) * SW + tx + 1;

                    nv[j] = s[c];
                    if (!own[j])
                        continue;
#pragma unroll
                    for (int k = 0; k < NK; k++)
                        nv[j] = op.relax(a[j], nv[j], s[c + c_dy[k] * SW + c_dx[k]], k);
                    ch |= nv[j] < s[c];
                }
                if (!__syncthreads_or(ch))
                    break;
#pragma unroll
                for (int j = 0; j < P::ROWS; j++)
                    if (own[j])
                        s[(ty + j * RSTEP + 1) * SW + tx + 1] = nv[j];
                __syncthreads();
                any = true;
            }
#pragma unroll
            for (int j = 0; j < P::ROWS; j++) {
                const T v = s[(ty + j * RSTEP + 1) * SW + tx + 1];

                if (own[j] && v != orig[j])
                    st_l2(val + (y0 + ty + j * RSTEP) * w + x0 + tx, v);
            }
            if (any && threadIdx.x == 0) {
                st_l2(chg + (int64_t)(r % 3) * np + b, 1u);
                atomicAdd(cnt + r % 3, 1u);
            }
            __syncthreads(); /* the next patch reuses s */
        }
        grid.sync();
        if (ld_l2(cnt + r % 3) == 0) {
            if (blockIdx.x == 0 && threadIdx.x == 0)
                st_l2(cnt + 3, r + 1);
            break;
        }
    }
}

/* The best-predecessor bits, as twi_omp_watershed_preds computes them. */
template <int NK>
__global__ void __launch_bounds__(WsPolicy::PRED_THREADS)
preds_kernel(const u64 *key, const uint32_t *lev, const u64 *ring, uint8_t *pred, int32_t w,
             int32_t h)
{
    const int64_t n = (int64_t)w * h;

    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (int64_t)gridDim.x * blockDim.x) {
        const int32_t x = (int32_t)(p % w), y = (int32_t)(p / w);
        const u64 kp = key[p];
        u64 best = TWI_WATERSHED_KINF, kq[NK];
        unsigned bits = 0;

        if (kp == TWI_WATERSHED_KINF || (kp & 0xffffffffu) == 0) {
            pred[p] = 0;
            continue;
        }
#pragma unroll
        for (int k = 0; k < NK; k++) {
            const int32_t qx = x + c_dx[k], qy = y + c_dy[k];

            if (qx < 0 || qy < 0 || qx >= w || qy >= h) {
                /* twi_watershed_ring_at */
                const int64_t side = 2 * ((int64_t)w + 2) + (qx < 0 ? qy : (int64_t)h + qy);
                const int64_t r = qy < 0 ? qx + 1 : qy >= h ? (int64_t)w + 2 + qx + 1 : side;

                kq[k] = ring[r];
            } else {
                kq[k] = key[(int64_t)qy * w + qx];
            }
            if (kq[k] == TWI_WATERSHED_KINF || step(kq[k], lev[p]) != kp)
                kq[k] = TWI_WATERSHED_KINF;
            else if (kq[k] < best)
                best = kq[k];
        }
#pragma unroll
        for (int k = 0; k < NK; k++)
            if (kq[k] == best && best != TWI_WATERSHED_KINF)
                bits |= 1u << k;
        pred[p] = (uint8_t)bits;
    }
}

/* The scratch: the tile's arrays, the ring's keys, the counters. */
struct Layout {
    size_t key, lev, lab, in, pred, ring, cnt, chg, bytes;
};

/* Patches of a w x h tile. */
int64_t
patches(int32_t w, int32_t h)
{
    return ceil_div(w > 0 ? w : 0, WsPolicy::PW) * ceil_div(h > 0 ? h : 0, WsPolicy::PH);
}

Layout
layout(int32_t w, int32_t h)
{
    const size_t n = (size_t)(w > 0 ? w : 0) * (size_t)(h > 0 ? h : 0);
    const size_t rl = 2 * ((size_t)(w > 0 ? w : 0) + 2) + 2 * (size_t)(h > 0 ? h : 0);
    Layout L;

    L.key = 0;
    L.lev = L.key + align_up(n * 8);
    L.lab = L.lev + align_up(n * 4);
    L.in = L.lab + align_up(n * 4);
    L.pred = L.in + align_up(n);
    L.ring = L.pred + align_up(n);
    L.cnt = L.ring + align_up(rl * 8);
    L.chg = L.cnt + align_up(4 * sizeof(unsigned));
    L.bytes = L.chg + align_up(3 * (size_t)patches(w, h) * sizeof(unsigned)) + twi_cu::ALIGN;
    return L;
}

bool
order_ok()
{
    for (int k = 0; k < 8; k++)
        if (twi_watershed_dx[k] != h_dx[k] || twi_watershed_dy[k] != h_dy[k])
            return false;
    return true;
}

bool
tile_ok(const twi_watershed_tile *t, int conn)
{
    return t && t->w >= 0 && t->h >= 0 && (int64_t)t->w * t->h <= (int64_t)UINT32_MAX &&
           (conn == 4 || conn == 8) && order_ok();
}

template <class Op, int NK>
tw_status
launch_fixpoint(const Op &op, typename Op::T *val, int32_t w, int32_t h, unsigned char *scratch,
                cudaStream_t s)
{
    using P = WsPolicy;
    int64_t cap = 0;
    auto kernel = fixpoint_kernel<Op, NK>;
    const Layout L = layout(w, h);
    const int64_t np = patches(w, h);
    unsigned *cnt = reinterpret_cast<unsigned *>(scratch + L.cnt);
    unsigned *chg = reinterpret_cast<unsigned *>(scratch + L.chg);

    if (cudaMemsetAsync(cnt, 0, 4 * sizeof(unsigned), s) != cudaSuccess ||
        cudaMemsetAsync(chg, 0, 3 * (size_t)np * sizeof(unsigned), s) != cudaSuccess)
        return TW_E_DEVICE;
    if (twi_cu::coop_capacity(kernel, P::THREADS, P::BLOCKS_PER_SM, &cap) != TW_OK)
        return TW_E_DEVICE;
    const unsigned blocks = (unsigned)(np < cap ? np : cap);
    Op o = op;
    void *args[] = {&o, &val, &w, &h, &cnt, &chg};

    if (cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(kernel), dim3(blocks),
                                    dim3(P::THREADS), args, 0, s) != cudaSuccess) {
        (void)cudaGetLastError();
        return TW_E_DEVICE;
    }
    return twi_cu::launched_finish(s);
}

/* The flood's and the labelling's checks: TW_OK with *sc the aligned scratch, or NULL when the
 * tile is empty (nothing to do); TW_E_INVALID for a bad tile, connectivity or scratch. */
tw_status
fixpoint_args(const twi_watershed_tile *t, int conn, void *d_scratch, size_t scratch_bytes,
              unsigned char **sc)
{
    *sc = nullptr;
    if (!tile_ok(t, conn) || !d_scratch || scratch_bytes < layout(t->w, t->h).bytes)
        return TW_E_INVALID;
    if (t->w > 0 && t->h > 0)
        *sc = twi_cu::aligned_base(d_scratch);
    return TW_OK;
}

template <class Op>
tw_status
launch_conn(const Op &op, typename Op::T *val, int conn, const twi_watershed_tile *t,
            unsigned char *sc, cudaStream_t s)
{
    return conn == 8 ? launch_fixpoint<Op, 8>(op, val, t->w, t->h, sc, s)
                     : launch_fixpoint<Op, 4>(op, val, t->w, t->h, sc, s);
}

} // namespace

extern "C" size_t
twi_cuda_watershed_scratch_size(int32_t w, int32_t h)
{
    return layout(w, h).bytes;
}

extern "C" tw_status
twi_cuda_watershed_layout(void *d_scratch, int32_t w, int32_t h, twi_watershed_tile *d_t,
                          uint64_t **d_ring)
{
    if (!d_scratch || !d_t || !d_ring || w < 0 || h < 0)
        return TW_E_INVALID;
    unsigned char *b = twi_cu::aligned_base(d_scratch);
    const Layout L = layout(w, h);

    d_t->w = w;
    d_t->h = h;
    d_t->key = reinterpret_cast<uint64_t *>(b + L.key);
    d_t->lev = reinterpret_cast<const uint32_t *>(b + L.lev);
    d_t->lab = reinterpret_cast<uint32_t *>(b + L.lab);
    d_t->in = reinterpret_cast<const uint8_t *>(b + L.in);
    d_t->pred = reinterpret_cast<uint8_t *>(b + L.pred);
    *d_ring = reinterpret_cast<uint64_t *>(b + L.ring);
    return TW_OK;
}

extern "C" tw_status
twi_cuda_watershed_flood(const twi_watershed_tile *d_t, int conn, void *d_scratch,
                         size_t scratch_bytes, void *stream)
{
    try {
        unsigned char *sc = nullptr;
        tw_status st = fixpoint_args(d_t, conn, d_scratch, scratch_bytes, &sc);

        if (st != TW_OK || !sc)
            return st;
        return launch_conn(KeyOp{d_t->lev, d_t->in}, reinterpret_cast<u64 *>(d_t->key), conn,
                           d_t, sc, static_cast<cudaStream_t>(stream));
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" tw_status
twi_cuda_watershed_preds(twi_watershed_tile *d_t, int conn, const uint64_t *d_ring_key,
                         void *stream)
{
    try {
        cudaStream_t s = static_cast<cudaStream_t>(stream);

        if (!tile_ok(d_t, conn) || !d_ring_key)
            return TW_E_INVALID;
        const int64_t n = (int64_t)d_t->w * d_t->h;

        if (n == 0)
            return TW_OK;
        int64_t g = ceil_div(n, WsPolicy::PRED_THREADS);
        const unsigned blocks = (unsigned)(g > WsPolicy::MAX_GRID ? WsPolicy::MAX_GRID : g);
        const u64 *key = reinterpret_cast<const u64 *>(d_t->key);
        const u64 *ring = reinterpret_cast<const u64 *>(d_ring_key);

        if (conn == 8)
            preds_kernel<8><<<blocks, WsPolicy::PRED_THREADS, 0, s>>>(key, d_t->lev, ring,
                                                                      d_t->pred, d_t->w, d_t->h);
        else
            preds_kernel<4><<<blocks, WsPolicy::PRED_THREADS, 0, s>>>(key, d_t->lev, ring,
                                                                      d_t->pred, d_t->w, d_t->h);
        return twi_cu::launched_finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" tw_status
twi_cuda_watershed_label(twi_watershed_tile *d_t, int conn, void *d_scratch,
                         size_t scratch_bytes, void *stream)
{
    try {
        unsigned char *sc = nullptr;
        tw_status st = fixpoint_args(d_t, conn, d_scratch, scratch_bytes, &sc);

        if (st != TW_OK || !sc)
            return st;
        return launch_conn(LabOp{d_t->pred}, d_t->lab, conn, d_t, sc,
                           static_cast<cudaStream_t>(stream));
    } catch (...) {
        return TW_E_DEVICE;
    }
}
