/* SPDX-License-Identifier: MIT */
/* tilewave: what the CUDA launchers of cuda/ share (private to cuda/, CUDA C++ only): the
 * scratch alignment, the launch and debug-sync checks, and the concurrent CONNECT of the
 * max-tree files on parent records. */
#ifndef TWI_CUDA_COMMON_CUH
#define TWI_CUDA_COMMON_CUH

#include <cstddef>
#include <cstdint>

#include <cuda/atomic>
#include <cuda_runtime.h>

#include "tilewave/common.h"

namespace twi_cu {

typedef unsigned long long u64;

/* Every scratch buffer and every array inside one starts on this many bytes (the caller's
 * pointer is aligned up first, so scratch sizes include one ALIGN of slack). */
constexpr size_t ALIGN = 256;

inline size_t
align_up(size_t v)
{
    return (v + ALIGN - 1) / ALIGN * ALIGN;
}

inline unsigned char *
aligned_base(void *p)
{
    unsigned char *b = static_cast<unsigned char *>(p);

    return b + (ALIGN - (uintptr_t)b % ALIGN) % ALIGN;
}

__host__ __device__ constexpr int64_t
ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* After enqueueing: a failed launch is reported now (CUB's Debug()), not at the worker's next
 * synchronisation. */
inline tw_status
launched()
{
    return cudaGetLastError() == cudaSuccess ? TW_OK : TW_E_DEVICE;
}

/* The end of every launcher: with TW_CUDA_DEBUG_SYNC, wait for the stream and check it, so a
 * fault is reported by the launcher whose kernel caused it; otherwise nothing (the launchers
 * are asynchronous). */
inline tw_status
finish(cudaStream_t s)
{
    (void)s;
#ifdef TW_CUDA_DEBUG_SYNC
    if (cudaStreamSynchronize(s) != cudaSuccess || cudaGetLastError() != cudaSuccess)
        return TW_E_DEVICE;
#endif
    return TW_OK;
}

/* launched(), then finish(). */
inline tw_status
launched_finish(cudaStream_t s)
{
    const tw_status st = launched();

    return st != TW_OK ? st : finish(s);
}

/* The blocks of `threads` threads of `kernel` that a cooperative launch can keep resident on
 * the current device (at most max_per_sm per SM) into *blocks. TW_E_DEVICE when a query fails
 * (its error cleared) or the device cannot launch cooperatively. */
template <class K>
tw_status
coop_capacity(K kernel, int threads, int max_per_sm, int64_t *blocks)
{
    int dev = 0, sms = 0, coop = 0, per_sm = 0;

    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        return TW_E_DEVICE;
    }
    if (!coop || per_sm < 1 || sms < 1)
        return TW_E_DEVICE;
    if (per_sm > max_per_sm)
        per_sm = max_per_sm;
    *blocks = (int64_t)sms * per_sm;
    return TW_OK;
}

/*
 * Parent records of the concurrent max-tree builds (cuda/maxtree_cuda.cu in shared and global
 * memory, cuda/maxtree_merge.cu on border-tree nodes). Shared memory: uint32_t (level << 16 |
 * local index + 1). Global: u64 (level << 32 | index + 1). 0 = no parent. Comparing records
 * as integers compares candidate parents: higher level first, then larger index, which is the
 * order the canonical form needs.
 */
template <class R> struct RecBits;
template <> struct RecBits<uint32_t> {
    static constexpr int SHIFT = 16;
    static constexpr uint32_t MASK = 0xffffu;
};
template <> struct RecBits<u64> {
    static constexpr int SHIFT = 32;
    static constexpr u64 MASK = 0xffffffffull;
};

template <class R>
__device__ __forceinline__ R
enc(uint32_t lev, uint32_t idx)
{
    return (R)lev << RecBits<R>::SHIFT | (R)(idx + 1u);
}

template <class R>
__device__ __forceinline__ uint32_t
rec_idx(R r)
{
    return (uint32_t)(r & RecBits<R>::MASK) - 1u;
}

template <class R>
__device__ __forceinline__ uint32_t
rec_lev(R r)
{
    return (uint32_t)(r >> RecBits<R>::SHIFT);
}

/* Loads that other threads' atomics may change under us: never cached in a register (shared)
 * nor in the SM's L1, which is not coherent with other SMs' atomics (global). */
__device__ __forceinline__ uint32_t
ld_rec(uint32_t *p)
{
    return *reinterpret_cast<volatile uint32_t *>(p);
}

__device__ __forceinline__ u64
ld_rec(u64 *p)
{
    return cuda::atomic_ref<u64, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
}

/* What one CONNECT did (counted only when asked): rounds, steps climbed, atomicMax lost. */
struct ConnectCount {
    unsigned long long rounds, steps, lost;
};

/*
 * The concurrent lock-free CONNECT of the GPU max-tree: merge the branches
 * of a (level fa) and b (level fb) so that they share every node at or below min(fa, fb).
 * Each round takes the lower of the two, climbs from it to its level root and from the other
 * to the highest ancestor at or above that level, and hangs the higher of the two under the
 * lower with an atomicMax on its record (equal levels: the smaller index under the larger);
 * the record it displaced (or the one that beat it) is the next pixel to connect. COUNT: add
 * to *c what it did.
 */
template <bool COUNT, class R>
__device__ void
connect_records(R *rec, uint32_t a, uint32_t fa, uint32_t b, uint32_t fb, ConnectCount *c)
{
    unsigned long long rounds = 0, steps = 0, lost = 0;

    for (;;) {
        rounds++;
        if (fb < fa) {
            const uint32_t t = a, ft = fa;

            a = b;
            fa = fb;
            b = t;
            fb = ft;
        }
        R r = ld_rec(rec + a);

        while (r != 0 && rec_lev(r) == fa) {
            a = rec_idx(r);
            r = ld_rec(rec + a);
            steps++;
        }
        r = ld_rec(rec + b);
        while (r != 0 && rec_lev(r) >= fa) {
            b = rec_idx(r);
            fb = rec_lev(r);
            r = ld_rec(rec + b);
            steps++;
        }
        if (a == b)
            break;
        if (fb == fa && b > a) {
            const uint32_t t = a;

            a = b;
            b = t;
        }
        const R mine = enc<R>(fa, a);
        const R old = atomicMax(rec + b, mine);

        lost += old >= mine;
        if (old == 0)
            break;
        b = rec_idx(old);
        fb = rec_lev(old);
    }
    if (COUNT) {
        c->rounds += rounds;
        c->steps += steps;
        c->lost += lost;
    }
}

} // namespace twi_cu

#endif /* TWI_CUDA_COMMON_CUH */
