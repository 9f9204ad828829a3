/* SPDX-License-Identifier: MIT */
/* tilewave: host tile memory (pinned when GPUs exist) and the per-GPU caching device pool. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "runtime_internal.h"

/* This file is the only caller of cudaMalloc, cudaFree, cudaHostAlloc and cudaFreeHost
 * (house style rule 20): kernels and workers take memory from here. */

#define HOST_ALIGN 64

static void *
plain_alloc(size_t bytes)
{
    void *p = NULL;

    /* posix_memalign instead of aligned_alloc: no multiple-of-alignment size rule. */
    if (posix_memalign(&p, HOST_ALIGN, bytes ? bytes : 1) != 0)
        return NULL;
    return p;
}

void *
twi_host_alloc(twi_devpool *pinned_pool, size_t bytes, bool *pinned_out)
{
    *pinned_out = false;
#ifdef TW_HAVE_CUDA
    if (pinned_pool) {
        /* cudaHostAlloc costs milliseconds and stalls streams; the pool pays it once per
         * size class, not once per tile. */
        void *p = twi_devpool_alloc(pinned_pool, bytes);

        if (p) {
            *pinned_out = true;
            return p;
        }
        TW_DEBUG("cuda", "pinned allocation of %zu bytes failed; using pageable memory", bytes);
    }
#else
    (void)pinned_pool;
#endif
    return plain_alloc(bytes);
}

void
twi_host_free(twi_devpool *pinned_pool, void *p, size_t bytes, bool pinned)
{
    if (!p)
        return;
#ifdef TW_HAVE_CUDA
    if (pinned) {
        twi_devpool_free(pinned_pool, p, bytes);
        return;
    }
#else
    (void)pinned_pool;
    (void)bytes;
    (void)pinned;
#endif
    free(p);
}

#ifdef TW_HAVE_CUDA

/* Size classes: 256 bytes and up, four classes per power of two, so a request wastes at most
 * a quarter of its size while tiles of one shape always share a class. */
#define POOL_MIN_SHIFT 8
#define POOL_SUBCLASSES 4
#define POOL_CLASSES (64 * POOL_SUBCLASSES)

typedef struct pool_list {
    void **ptr;     /* cached device blocks of this class */
    size_t n, cap;
} pool_list;

struct twi_devpool {
    int ordinal;
    bool host;            /* pinned host memory (cudaHostAlloc) instead of device memory */
    size_t cache_cap;     /* bytes kept in the free lists at most; beyond, blocks go back */
    pthread_mutex_t lock;
    pool_list free_list[POOL_CLASSES];
    size_t bytes_cached;  /* in the free lists */
    size_t bytes_live;    /* handed out */
};

static int
size_class(size_t bytes, size_t *class_bytes)
{
    size_t top, step, rounded;
    int shift = 63;

    *class_bytes = 0;
    if (bytes > SIZE_MAX / 2)
        return POOL_CLASSES; /* no device holds that much; the caller fails */
    if (bytes <= ((size_t)1 << POOL_MIN_SHIFT)) {
        *class_bytes = (size_t)1 << POOL_MIN_SHIFT;
        return 0;
    }
    while (!((bytes - 1) >> shift))
        shift--;
    /* bytes - 1 has its top bit at `shift`: bytes lies in (2^shift, 2^(shift+1)]. */
    top = (size_t)1 << shift;
    step = top / POOL_SUBCLASSES;
    rounded = (bytes + step - 1) / step * step;
    *class_bytes = rounded;
    /* (rounded - top) / step is 1..4; class 0 holds everything up to 256 bytes. */
    return (shift - POOL_MIN_SHIFT) * POOL_SUBCLASSES + (int)((rounded - top) / step);
}

static tw_status
pool_create(int ordinal, bool host, twi_devpool **out)
{
    twi_devpool *p = calloc(1, sizeof *p);

    if (!p)
        return TW_E_NOMEM;
    p->ordinal = ordinal;
    p->host = host;
    /* Device blocks stay cached until an allocation fails; pinned host memory is taken from
     * the whole machine, so keep at most 1 GiB of it idle. */
    p->cache_cap = host ? (size_t)1 << 30 : SIZE_MAX;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return TW_E_NOMEM;
    }
    *out = p;
    return TW_OK;
}

tw_status
twi_devpool_create(int ordinal, twi_devpool **out)
{
    return pool_create(ordinal, false, out);
}

tw_status
twi_hostpool_create(int ordinal, twi_devpool **out)
{
    return pool_create(ordinal, true, out);
}

static cudaError_t
block_alloc(const twi_devpool *p, void **ptr, size_t bytes)
{
    /* Portable: the pinning holds for every device's context, not only the current one. */
    return p->host ? cudaHostAlloc(ptr, bytes, cudaHostAllocPortable) : cudaMalloc(ptr, bytes);
}

static void
block_free(const twi_devpool *p, void *ptr)
{
    if (p->host)
        (void)cudaFreeHost(ptr);
    else
        (void)cudaFree(ptr);
}

/* Give every cached block back to the driver. Under p->lock. */
static void
trim(twi_devpool *p)
{
    int c;
    size_t i;

    for (c = 0; c < POOL_CLASSES; c++) {
        for (i = 0; i < p->free_list[c].n; i++)
            block_free(p, p->free_list[c].ptr[i]);
        p->free_list[c].n = 0;
    }
    p->bytes_cached = 0;
}

void
twi_devpool_destroy(twi_devpool *p)
{
    int c;

    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    trim(p);
    pthread_mutex_unlock(&p->lock);
    for (c = 0; c < POOL_CLASSES; c++)
        free(p->free_list[c].ptr);
    if (p->bytes_live)
        TW_WARN("cuda", "GPU %d pool destroyed with %zu bytes still in use", p->ordinal,
                p->bytes_live);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void *
twi_devpool_alloc(twi_devpool *p, size_t bytes)
{
    void *d_ptr = NULL;
    size_t cb;
    int c = size_class(bytes, &cb);
    cudaError_t e;

    if (c >= POOL_CLASSES)
        return NULL;
    pthread_mutex_lock(&p->lock);
    if (p->free_list[c].n > 0) {
        d_ptr = p->free_list[c].ptr[--p->free_list[c].n];
        p->bytes_cached -= cb;
        p->bytes_live += cb;
        pthread_mutex_unlock(&p->lock);
        return d_ptr;
    }
    e = block_alloc(p, &d_ptr, cb);
    if (e == cudaErrorMemoryAllocation && p->bytes_cached > 0) {
        /* Blocks cached for other sizes may be what stands in the way: free them and retry. */
        (void)cudaGetLastError();
        trim(p);
        e = block_alloc(p, &d_ptr, cb);
    }
    if (e != cudaSuccess) {
        /* Allocation failures are not sticky; clear them so the next call starts clean. */
        (void)cudaGetLastError();
        d_ptr = NULL;
    } else {
        p->bytes_live += cb;
    }
    pthread_mutex_unlock(&p->lock);
    return d_ptr;
}

void
twi_devpool_free(twi_devpool *p, void *d_ptr, size_t bytes)
{
    size_t cb;
    int c = size_class(bytes, &cb);
    pool_list *l;

    if (!d_ptr || c >= POOL_CLASSES)
        return;
    pthread_mutex_lock(&p->lock);
    l = &p->free_list[c];
    p->bytes_live -= cb;
    if (p->bytes_cached + cb > p->cache_cap) {
        block_free(p, d_ptr);
        pthread_mutex_unlock(&p->lock);
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        void **np = realloc(l->ptr, cap * sizeof *np);

        if (!np) {
            /* No room to cache it: hand it straight back to the driver. */
            block_free(p, d_ptr);
            pthread_mutex_unlock(&p->lock);
            return;
        }
        l->ptr = np;
        l->cap = cap;
    }
    l->ptr[l->n++] = d_ptr;
    p->bytes_cached += cb;
    pthread_mutex_unlock(&p->lock);
}

#else /* !TW_HAVE_CUDA: no device memory exists */

tw_status
twi_devpool_create(int ordinal, twi_devpool **out)
{
    (void)ordinal;
    *out = NULL;
    return TW_E_NODEV;
}

tw_status
twi_hostpool_create(int ordinal, twi_devpool **out)
{
    (void)ordinal;
    *out = NULL;
    return TW_E_NODEV;
}

void
twi_devpool_destroy(twi_devpool *p)
{
    (void)p;
}

void *
twi_devpool_alloc(twi_devpool *p, size_t bytes)
{
    (void)p;
    (void)bytes;
    return NULL;
}

void
twi_devpool_free(twi_devpool *p, void *d_ptr, size_t bytes)
{
    (void)p;
    (void)d_ptr;
    (void)bytes;
}

#endif /* TW_HAVE_CUDA */
