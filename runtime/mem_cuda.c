/* SPDX-License-Identifier: MIT */
/* tilewave: host tile memory (pinned when GPUs exist) and the per-GPU caching device pool. */
/* Why one file: the device pool's blocks, the tiles' replicas in them and the copies of
 * replicas back to host tiles (write-backs, synchronous downloads, their bounce buffers) share
 * the pool's lock and its state; no other file calls the CUDA allocators. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "rt_core.h"

/* This file is the only caller of cudaMalloc, cudaFree, cudaHostAlloc and cudaFreeHost
 * (kernels never allocate device memory): kernels and workers take memory from here. */

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

bool
twi_host_register(void *p, size_t len)
{
#ifdef TW_HAVE_CUDA
    cudaError_t e = cudaHostRegister(p, len, cudaHostRegisterPortable);

    if (e == cudaSuccess)
        return true;
    (void)cudaGetLastError();
    TW_DEBUG("cuda", "cudaHostRegister of %zu bytes: %s; copies from them stay pageable", len,
             cudaGetErrorString(e));
#else
    (void)p;
    (void)len;
#endif
    return false;
}

bool
twi_host_pinned(const void *p)
{
#ifdef TW_HAVE_CUDA
    struct cudaPointerAttributes a;

    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
#else
    (void)p;
    return false;
#endif
}

void
twi_host_unregister(void *p)
{
#ifdef TW_HAVE_CUDA
    if (cudaHostUnregister(p) != cudaSuccess)
        (void)cudaGetLastError();
#else
    (void)p;
#endif
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

/*
 * The device pool of one GPU: size-class free lists (cudaMalloc is slow and synchronising, so
 * blocks are reused), the tiles' replicas on that GPU, and the GPU's memory budget.
 *
 * Every block the pool has from the driver is either cached in a free list, or live: handed out
 * as scratch or a task's buffer, or the block of a tile's replica. A replica no task uses sits
 * in an LRU list and may be evicted. The budget bounds live + cached at every moment: an
 * allocation that would cross it takes, in this order, a free block of its class, the block of
 * the least recently used idle replica of its class (no driver call), then frees cached blocks
 * and evicts idle replicas (LRU first) until it fits, and fails when nothing is left to free.
 * The same happens when cudaMalloc itself runs out (other processes, fragmentation).
 *
 * Replicas are touched by the GPU's manager thread (pin, unpin, eviction) and by whichever
 * thread frees the tile (drop), all under the pool's lock; their `version` is also read
 * lock-free by the scheduler. Lock order: the scheduler lock may be held when taking this one,
 * never the other way round.
 */

/* Size classes: 256 bytes and up, four classes per power of two, so a request wastes at most
 * a quarter of its size while tiles of one shape always share a class. */
#define POOL_MIN_SHIFT 8
#define POOL_SUBCLASSES 4
#define POOL_CLASSES (64 * POOL_SUBCLASSES)

/*
 * Bounce buffers. A synchronous copy from the device into pageable memory (cudaMemcpy2D into
 * an ordinary host tile, which is what the CLI's tiles are) ran at about 1.2 GB/s on the H200
 * host and held up the GPU's other streams while it ran: in the EDT of a 1 GPix slide every
 * band's kernels (0.6 ms) and uploads took as long as the store task's lazy download of the
 * band before it (100 ms for 128 MB of distances). Such copies now go through a page-locked
 * buffer of two halves, BOUNCE_HALF bytes each, on a stream of their own: the device copies
 * rows into one half while the caller's thread copies the other half's rows into the tile, so
 * the bus runs at the pinned rate and several CPU workers bring tiles back at once (one slot
 * each, BOUNCE_SLOTS a GPU; a caller waits for a free one). Slots are made on first use;
 * where one cannot be made, or a row does not fit a half, the copy is a plain cudaMemcpy2D.
 */
#define BOUNCE_SLOTS 8
#define BOUNCE_HALF ((size_t)4 << 20)

typedef struct bounce_slot {
    char *buf;             /* 2 * BOUNCE_HALF page-locked bytes; NULL until first use */
    cudaStream_t stream;   /* non-blocking */
    cudaEvent_t done[2];   /* the copy into each half has landed */
    bool busy;
    bool broken;           /* could not be made: plain copies instead */
} bounce_slot;

typedef struct pool_list {
    void **ptr;     /* cached device blocks of this class */
    size_t n, cap;
} pool_list;

struct twi_devpool {
    int ordinal;
    bool host;            /* pinned host memory (cudaHostAlloc) instead of device memory */
    size_t cache_cap;     /* bytes kept in the free lists at most; beyond, blocks go back */
    size_t budget;        /* bytes_live + bytes_cached never above it (SIZE_MAX: no budget) */
    pthread_mutex_t lock;
    pool_list free_list[POOL_CLASSES];
    size_t bytes_cached;  /* in the free lists */
    size_t bytes_live;    /* handed out, replicas' blocks included */
    size_t bytes_idle_rep; /* of bytes_live: replicas no task uses (evictable) */
    twi_replica *lru_head, *lru_tail; /* idle replicas, least recently used first */
    /* Mirrors for lock-free readers (fit checks under the scheduler lock, tests). */
    atomic_size_t hard;   /* bytes_live - bytes_idle_rep */
    atomic_size_t high;   /* the largest bytes_live + bytes_cached so far */
    atomic_uint_fast64_t evictions;
    atomic_uint_fast64_t *down_counter; /* write-backs are counted there (may be NULL) */
    /* Device pools: page-locked bounce buffers for synchronous copies into pageable host
     * tiles (copy_to_host); bounce_lock and bounce_cv guard their busy flags. */
    pthread_mutex_t bounce_lock;
    pthread_cond_t bounce_cv;
    bounce_slot bounce[BOUNCE_SLOTS];
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

/* The block size of class c (the inverse of size_class). */
static size_t
class_size(int c)
{
    size_t top;

    if (c == 0)
        return (size_t)1 << POOL_MIN_SHIFT;
    top = (size_t)1 << ((c - 1) / POOL_SUBCLASSES + POOL_MIN_SHIFT);
    return top + (size_t)((c - 1) % POOL_SUBCLASSES + 1) * (top / POOL_SUBCLASSES);
}

size_t
twi_devpool_class_bytes(size_t bytes)
{
    size_t cb;

    return size_class(bytes, &cb) < POOL_CLASSES ? cb : bytes;
}

static tw_status
pool_create(int ordinal, bool host, size_t budget, size_t cache_cap, twi_devpool **out)
{
    twi_devpool *p = calloc(1, sizeof *p);

    if (!p)
        return TW_E_NOMEM;
    p->ordinal = ordinal;
    p->host = host;
    p->budget = budget;
    /* Device blocks stay cached until an allocation needs the room; pinned host memory is
     * taken from the whole machine, so only cache_cap of it stays idle. */
    p->cache_cap = cache_cap;
    atomic_init(&p->hard, 0);
    atomic_init(&p->high, 0);
    atomic_init(&p->evictions, 0);
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return TW_E_NOMEM;
    }
    if (pthread_mutex_init(&p->bounce_lock, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return TW_E_NOMEM;
    }
    if (pthread_cond_init(&p->bounce_cv, NULL) != 0) {
        pthread_mutex_destroy(&p->bounce_lock);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return TW_E_NOMEM;
    }
    *out = p;
    return TW_OK;
}

tw_status
twi_devpool_create(int ordinal, size_t budget, twi_devpool **out)
{
    return pool_create(ordinal, false, budget ? budget : SIZE_MAX, SIZE_MAX, out);
}

tw_status
twi_hostpool_create(int ordinal, size_t cache_cap, twi_devpool **out)
{
    return pool_create(ordinal, true, SIZE_MAX, cache_cap, out);
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

/* Refresh the lock-free mirrors. Under p->lock. */
static void
publish(twi_devpool *p)
{
    size_t total = p->bytes_live + p->bytes_cached;

    atomic_store_explicit(&p->hard, p->bytes_live - p->bytes_idle_rep, memory_order_relaxed);
    if (total > atomic_load_explicit(&p->high, memory_order_relaxed))
        atomic_store_explicit(&p->high, total, memory_order_relaxed);
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

/* Give the largest cached block back to the driver; false when none is cached. */
static bool
free_one_cached(twi_devpool *p)
{
    for (int c = POOL_CLASSES - 1; c >= 0; c--) {
        pool_list *l = &p->free_list[c];

        if (l->n == 0)
            continue;
        block_free(p, l->ptr[--l->n]);
        p->bytes_cached -= class_size(c);
        return true;
    }
    return false;
}

static void
lru_unlink(twi_devpool *p, twi_replica *r)
{
    if (r->lru_prev)
        r->lru_prev->lru_next = r->lru_next;
    else
        p->lru_head = r->lru_next;
    if (r->lru_next)
        r->lru_next->lru_prev = r->lru_prev;
    else
        p->lru_tail = r->lru_prev;
    r->lru_prev = r->lru_next = NULL;
}

static void
lru_append(twi_devpool *p, twi_replica *r)
{
    r->lru_next = NULL;
    r->lru_prev = p->lru_tail;
    if (p->lru_tail)
        p->lru_tail->lru_next = r;
    else
        p->lru_head = r;
    p->lru_tail = r;
}

static void
bounce_unmake(bounce_slot *b)
{
    if (!b->buf)
        return;
    (void)cudaStreamDestroy(b->stream);
    (void)cudaEventDestroy(b->done[0]);
    (void)cudaEventDestroy(b->done[1]);
    (void)cudaFreeHost(b->buf);
    b->buf = NULL;
}

/* A free slot of p, made on first use with p's device current; NULL when none can be made. */
static bounce_slot *
bounce_take(twi_devpool *p)
{
    bounce_slot *b = NULL;

    pthread_mutex_lock(&p->bounce_lock);
    for (;;) {
        bool usable = false;

        for (int i = 0; i < BOUNCE_SLOTS && !b; i++) {
            usable |= !p->bounce[i].broken;
            if (!p->bounce[i].busy && !p->bounce[i].broken)
                b = &p->bounce[i];
        }
        if (b || !usable)
            break;
        pthread_cond_wait(&p->bounce_cv, &p->bounce_lock);
    }
    if (b)
        b->busy = true;
    pthread_mutex_unlock(&p->bounce_lock);
    if (b && !b->buf) {
        int made = 0;
        void *buf = NULL;

        if (cudaHostAlloc(&buf, 2 * BOUNCE_HALF, cudaHostAllocPortable) == cudaSuccess &&
            ++made &&
            cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking) == cudaSuccess &&
            ++made && cudaEventCreateWithFlags(&b->done[0], cudaEventDisableTiming) == cudaSuccess &&
            ++made && cudaEventCreateWithFlags(&b->done[1], cudaEventDisableTiming) == cudaSuccess) {
            b->buf = buf;
        } else {
            (void)cudaGetLastError();
            if (made >= 3)
                (void)cudaEventDestroy(b->done[0]);
            if (made >= 2)
                (void)cudaStreamDestroy(b->stream);
            if (made >= 1)
                (void)cudaFreeHost(buf);
            TW_DEBUG("cuda", "GPU %d: no page-locked bounce buffer; plain copies", p->ordinal);
            pthread_mutex_lock(&p->bounce_lock);
            b->busy = false;
            b->broken = true;
            pthread_cond_broadcast(&p->bounce_cv);
            pthread_mutex_unlock(&p->bounce_lock);
            b = NULL;
        }
    }
    return b;
}

static void
bounce_give(twi_devpool *p, bounce_slot *b)
{
    pthread_mutex_lock(&p->bounce_lock);
    b->busy = false;
    pthread_cond_signal(&p->bounce_cv);
    pthread_mutex_unlock(&p->bounce_lock);
}

/* The device rows [y0, y0 + n) of t's block into half k of b, on b's stream. */
static cudaError_t
bounce_issue(bounce_slot *b, const tw_tile *t, const void *src, int64_t y0, int64_t n, int k)
{
    cudaError_t e = cudaMemcpyAsync(b->buf + (size_t)k * BOUNCE_HALF,
                                    (const char *)src + (size_t)y0 * t->row, (size_t)n * t->row,
                                    cudaMemcpyDeviceToHost, b->stream);

    return e == cudaSuccess ? cudaEventRecord(b->done[k], b->stream) : e;
}

/* copy_to_host through b: chunks of `per` rows, alternating halves. */
static cudaError_t
bounce_copy(bounce_slot *b, tw_tile *t, const void *src, int64_t per)
{
    int64_t h = t->h;
    cudaError_t e = bounce_issue(b, t, src, 0, per < h ? per : h, 0);

    for (int64_t y0 = 0, k = 0; e == cudaSuccess && y0 < h; y0 += per, k ^= 1) {
        int64_t n = per < h - y0 ? per : h - y0;
        const char *from = b->buf + (size_t)k * BOUNCE_HALF;
        char *to = (char *)t->h_data + (size_t)y0 * (size_t)t->stride;

        if (y0 + n < h &&
            (e = bounce_issue(b, t, src, y0 + n, per < h - y0 - n ? per : h - y0 - n,
                              (int)(k ^ 1))) != cudaSuccess)
            break;
        if ((e = cudaEventSynchronize(b->done[k])) != cudaSuccess)
            break;
        if ((size_t)t->stride == t->row) {
            memcpy(to, from, (size_t)n * t->row);
        } else {
            for (int64_t y = 0; y < n; y++)
                memcpy(to + (size_t)y * (size_t)t->stride, from + (size_t)y * t->row, t->row);
        }
    }
    if (e != cudaSuccess)
        (void)cudaStreamSynchronize(b->stream); /* nothing may land in the buffer later */
    return e;
}

/* Copy a device block of t (rows packed) into its host pixels (rows t->stride apart) on the
 * pool's device, synchronously, from any thread; into pageable pixels through a bounce buffer
 * when `bounce` (the caller holds no lock a bounce slot's holder may wait for). */
static cudaError_t
copy_to_host(twi_devpool *p, tw_tile *t, const void *src, bool bounce)
{
    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    bounce_slot *b = NULL;
    int64_t per = t->row ? (int64_t)(BOUNCE_HALF / t->row) : 0;

    if (e == cudaSuccess && prev != p->ordinal)
        e = cudaSetDevice(p->ordinal);
    if (e == cudaSuccess && bounce && per > 0 && !t->pinned &&
        !(t->external && twi_host_pinned(t->h_data)) && (b = bounce_take(p))) {
        e = bounce_copy(b, t, src, per);
        bounce_give(p, b);
    } else if (e == cudaSuccess) {
        /* The legacy default stream: the tiles' copies and kernels run on non-blocking
         * streams, so this waits for nothing else; the block is idle or pinned by the caller. */
        e = cudaMemcpy2D(t->h_data, (size_t)t->stride, src, t->row, t->row, (size_t)t->h,
                         cudaMemcpyDeviceToHost);
    }
    if (prev >= 0 && prev != p->ordinal)
        (void)cudaSetDevice(prev);
    return e;
}

/* The host pixels of a tile whose host copy was dropped (twi_tile_drop_host), allocated
 * again before a copy back. Only while the tile's one current replica is kept from moving:
 * pinned by the caller, or idle under its pool's lock (a sync pins it under that lock), so
 * never twice at once. false when out of memory. */
static bool
host_ensure(tw_tile *t)
{
    if (t->h_data)
        return true;
    if (!(t->h_data = twi_host_alloc(t->rt->host_pool, t->bytes, &t->pinned)))
        return false;
    twi_mem_count(t->rt, (int64_t)t->bytes);
    return true;
}

/* Lazy downloads: an idle replica about to lose its block may hold the only copy of its tile's
 * current pixels; copy them to the host first. Under p->lock. A twi_tile_sync_host() of the
 * same tile pins the replica while it copies, so it is never this one. */
static void
write_back(twi_devpool *p, twi_replica *r)
{
    tw_tile *t = r->tile;
    uint64_t v = atomic_load_explicit(&r->version, memory_order_relaxed);
    cudaError_t e;

    if (!t->rt->lazy_down || v == 0 || v != atomic_load_explicit(&t->version, memory_order_relaxed) ||
        atomic_load_explicit(&t->host_version, memory_order_acquire) == v)
        return;
    if (!host_ensure(t)) {
        TW_WARN("cuda", "GPU %d: no host memory to write back a %zu-byte tile before evicting it",
                p->ordinal, t->bytes);
        return;
    }
    if ((e = copy_to_host(p, t, r->d_ptr, false)) != cudaSuccess) {
        (void)cudaGetLastError();
        /* The tile's readers then fail with twi_tile_sync_host()'s message. */
        TW_WARN("cuda", "GPU %d: writing back a %zu-byte tile before evicting it failed (%s)",
                p->ordinal, t->bytes, cudaGetErrorString(e));
        return;
    }
    atomic_store_explicit(&t->host_version, v, memory_order_release);
    if (p->down_counter)
        atomic_fetch_add_explicit(p->down_counter, t->bytes, memory_order_relaxed);
}

/* Take the block away from an idle replica (it then has none) and return it. */
static void *
detach(twi_devpool *p, twi_replica *r)
{
    void *ptr = r->d_ptr;

    write_back(p, r);
    lru_unlink(p, r);
    p->bytes_idle_rep -= r->tile->dev_bytes;
    r->d_ptr = NULL;
    atomic_store_explicit(&r->version, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->evictions, 1, memory_order_relaxed);
    return ptr;
}

/* Evict the least recently used idle replica; false when there is none. */
static bool
evict_one(twi_devpool *p)
{
    twi_replica *r = p->lru_head;
    size_t cb;

    if (!r)
        return false;
    cb = r->tile->dev_bytes;
    block_free(p, detach(p, r));
    p->bytes_live -= cb;
    return true;
}

/* Put a live block of class c into its free list (or back to the driver). */
static void
give_back(twi_devpool *p, void *ptr, int c, size_t cb)
{
    pool_list *l = &p->free_list[c];

    p->bytes_live -= cb;
    if (p->bytes_cached + cb > p->cache_cap) {
        block_free(p, ptr);
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        void **np = realloc(l->ptr, cap * sizeof *np);

        if (!np) {
            /* No room to cache it: hand it straight back to the driver. */
            block_free(p, ptr);
            return;
        }
        l->ptr = np;
        l->cap = cap;
    }
    l->ptr[l->n++] = ptr;
    p->bytes_cached += cb;
}

/* A live block of class c (cb bytes), within the budget; NULL when there is no room. Under
 * p->lock. */
static void *
take_block(twi_devpool *p, int c, size_t cb)
{
    void *ptr = NULL;
    cudaError_t e;

    if (p->free_list[c].n > 0) {
        p->bytes_cached -= cb;
        p->bytes_live += cb;
        return p->free_list[c].ptr[--p->free_list[c].n];
    }
    if (p->bytes_live + p->bytes_cached + cb > p->budget) {
        int rc;
        size_t rcb;

        /* An idle replica of the same class changes hands without a driver call (cudaFree
         * waits for the whole device). */
        for (twi_replica *r = p->lru_head; r; r = r->lru_next) {
            rc = size_class(r->tile->bytes, &rcb);
            if (rc == c)
                return detach(p, r); /* stays live: it only changes owner */
        }
        while (p->bytes_live + p->bytes_cached + cb > p->budget)
            if (!free_one_cached(p) && !evict_one(p))
                return NULL;
    }
    e = block_alloc(p, &ptr, cb);
    if (e == cudaErrorMemoryAllocation) {
        /* The driver ran out below the budget (other users, fragmentation): free what the
         * pool holds idle, then evict replicas one by one. */
        (void)cudaGetLastError();
        trim(p);
        while ((e = block_alloc(p, &ptr, cb)) == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            if (!evict_one(p))
                break;
        }
    }
    if (e != cudaSuccess) {
        /* Allocation failures are not sticky; clear them so the next call starts clean. */
        (void)cudaGetLastError();
        return NULL;
    }
    p->bytes_live += cb;
    return ptr;
}

void
twi_devpool_destroy(twi_devpool *p)
{
    int c;

    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    /* Tiles outliving the workers lose their replicas here. */
    while (p->lru_head) {
        size_t cb = p->lru_head->tile->dev_bytes;

        block_free(p, detach(p, p->lru_head));
        p->bytes_live -= cb;
    }
    trim(p);
    pthread_mutex_unlock(&p->lock);
    for (c = 0; c < POOL_CLASSES; c++)
        free(p->free_list[c].ptr);
    for (c = 0; c < BOUNCE_SLOTS; c++)
        bounce_unmake(&p->bounce[c]);
    pthread_cond_destroy(&p->bounce_cv);
    pthread_mutex_destroy(&p->bounce_lock);
    if (p->bytes_live)
        TW_WARN("cuda", "GPU %d pool destroyed with %zu bytes still in use", p->ordinal,
                p->bytes_live);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void *
twi_devpool_alloc(twi_devpool *p, size_t bytes)
{
    void *d_ptr;
    size_t cb;
    int c = size_class(bytes, &cb);

    if (c >= POOL_CLASSES)
        return NULL;
    pthread_mutex_lock(&p->lock);
    d_ptr = take_block(p, c, cb);
    publish(p);
    pthread_mutex_unlock(&p->lock);
    return d_ptr;
}

void
twi_devpool_free(twi_devpool *p, void *d_ptr, size_t bytes)
{
    size_t cb;
    int c = size_class(bytes, &cb);

    if (!d_ptr || c >= POOL_CLASSES)
        return;
    pthread_mutex_lock(&p->lock);
    give_back(p, d_ptr, c, cb);
    publish(p);
    pthread_mutex_unlock(&p->lock);
}

size_t
twi_devpool_high_water(const twi_devpool *p)
{
    return p ? atomic_load_explicit(&p->high, memory_order_relaxed) : 0;
}

size_t
twi_devpool_hard_bytes(const twi_devpool *p)
{
    return p ? atomic_load_explicit(&p->hard, memory_order_relaxed) : 0;
}

uint64_t
twi_devpool_evictions(const twi_devpool *p)
{
    return p ? (uint64_t)atomic_load_explicit(&p->evictions, memory_order_relaxed) : 0;
}

void *
twi_replica_pin(twi_devpool *p, tw_tile *tile, int gi, bool *current)
{
    twi_replica *r = &tile->rep[gi];
    size_t cb;
    int c = size_class(tile->bytes, &cb);
    void *ptr = NULL;

    *current = false;
    if (c >= POOL_CLASSES)
        return NULL;
    pthread_mutex_lock(&p->lock);
    if (r->d_ptr) {
        uint64_t v = atomic_load_explicit(&r->version, memory_order_relaxed);

        if (r->pins == 0) {
            lru_unlink(p, r);
            p->bytes_idle_rep -= cb;
        }
        r->pins++;
        *current = v != 0 && v == atomic_load_explicit(&tile->version, memory_order_relaxed);
        ptr = r->d_ptr;
    } else if ((ptr = take_block(p, c, cb))) {
        r->d_ptr = ptr;
        r->pins = 1;
        atomic_store_explicit(&r->version, 0, memory_order_relaxed);
    }
    publish(p);
    pthread_mutex_unlock(&p->lock);
    return ptr;
}

void
twi_replica_unpin(twi_devpool *p, tw_tile *tile, int gi, uint64_t version)
{
    twi_replica *r = &tile->rep[gi];
    size_t cb;
    int c = size_class(tile->bytes, &cb);

    pthread_mutex_lock(&p->lock);
    if (r->d_ptr && r->pins > 0) {
        atomic_store_explicit(&r->version, version, memory_order_relaxed);
        if (--r->pins == 0) {
            if (version && version == atomic_load_explicit(&tile->version, memory_order_relaxed)) {
                lru_append(p, r);
                p->bytes_idle_rep += cb;
            } else {
                /* Stale or half-written: versions only grow, it can never be used again. */
                give_back(p, r->d_ptr, c, cb);
                r->d_ptr = NULL;
                atomic_store_explicit(&r->version, 0, memory_order_relaxed);
            }
        }
    }
    publish(p);
    pthread_mutex_unlock(&p->lock);
}

void
twi_devpool_count_downloads(twi_devpool *p, atomic_uint_fast64_t *counter)
{
    p->down_counter = counter;
}

/* Pin tile's replica on pool p when it holds the tile's current version; NULL otherwise. */
static void *
pin_current(twi_devpool *p, tw_tile *tile, int gi)
{
    twi_replica *r = &tile->rep[gi];
    void *ptr = NULL;

    pthread_mutex_lock(&p->lock);
    if (r->d_ptr) {
        uint64_t v = atomic_load_explicit(&r->version, memory_order_relaxed);

        if (v != 0 && v == atomic_load_explicit(&tile->version, memory_order_relaxed)) {
            if (r->pins++ == 0) {
                lru_unlink(p, r);
                p->bytes_idle_rep -= tile->dev_bytes;
            }
            ptr = r->d_ptr;
        }
    }
    publish(p);
    pthread_mutex_unlock(&p->lock);
    return ptr;
}

tw_status
twi_tile_sync_host(tw_tile *t, char *msg, size_t n)
{
    tw_runtime *rt = t->rt;
    pthread_mutex_t *l;
    tw_status st = TW_OK;
    uint64_t v;

    if (twi_tile_host_current(t))
        return TW_OK;
    l = &rt->sync_lock[((uintptr_t)t >> 6) % (sizeof rt->sync_lock / sizeof rt->sync_lock[0])];
    pthread_mutex_lock(l);
    v = atomic_load_explicit(&t->version, memory_order_relaxed);
    if (atomic_load_explicit(&t->host_version, memory_order_acquire) != v) {
        void *d = NULL;
        int gi;

        /* The one GPU that wrote this version holds it (a copy elsewhere went through the
         * host, which would then be current). */
        for (gi = 0; gi < t->n_rep; gi++)
            if (rt->gpus[gi].pool && (d = pin_current(rt->gpus[gi].pool, t, gi)))
                break;
        if (d && !host_ensure(t)) {
            twi_replica_unpin(rt->gpus[gi].pool, t, gi, v);
            snprintf(msg, n, "cuda: no host memory for a %zu-byte tile coming back from GPU %d",
                     t->bytes, rt->gpus[gi].ordinal);
            st = TW_E_NOMEM;
        } else if (d) {
            twi_devpool *p = rt->gpus[gi].pool;
            int64_t t0 = twi_trace_now();
            cudaError_t e = copy_to_host(p, t, d, true);
            tw_worker *self = twi_worker_self();

            twi_replica_unpin(p, t, gi, v);
            if (e == cudaSuccess) {
                atomic_store_explicit(&t->host_version, v, memory_order_release);
                if (p->down_counter)
                    atomic_fetch_add_explicit(p->down_counter, t->bytes, memory_order_relaxed);
                /* In the caller's lane: a CPU worker's task that waited for it, or a GPU
                 * manager's downloads (which are all such copies when downloads are lazy). */
                if (rt->trace_file && self && self->rt == rt)
                    twi_trace_add(self,
                                  self->type == TW_DEVICE_CUDA ? TWI_TRACE_DOWNLOADS
                                                               : TWI_TRACE_TASKS,
                                  "download", t0, twi_trace_now());
            } else {
                (void)cudaGetLastError();
                snprintf(msg, n, "cuda: copying a %zu-byte tile from GPU %d failed (%s)",
                         t->bytes, rt->gpus[gi].ordinal, cudaGetErrorString(e));
                st = TW_E_DEVICE;
            }
        } else if (atomic_load_explicit(&t->host_version, memory_order_acquire) != v) {
            /* Not written back when evicted: the eviction's write-back failed (logged). */
            snprintf(msg, n, "cuda: the current pixels of a %dx%d tile were lost on a GPU",
                     (int)t->w, (int)t->h);
            st = TW_E_DEVICE;
        }
    }
    pthread_mutex_unlock(l);
    return st;
}

bool
twi_tile_drop_host(tw_tile *t)
{
    tw_runtime *rt = t->rt;
    pthread_mutex_t *l;
    bool dropped = false;
    int holder = -1, current = 0;
    uint64_t v;

    if (!rt->lazy_down || rt->budget || !t->h_data || t->external)
        return false;
    l = &rt->sync_lock[((uintptr_t)t >> 6) % (sizeof rt->sync_lock / sizeof rt->sync_lock[0])];
    pthread_mutex_lock(l);
    v = atomic_load_explicit(&t->version, memory_order_relaxed);
    for (int gi = 0; gi < t->n_rep; gi++)
        if (atomic_load_explicit(&t->rep[gi].version, memory_order_relaxed) == v) {
            holder = gi;
            current++;
        }
    /* One current replica, and the host copy current too: pinned, the replica cannot be
     * evicted while the host copy goes; afterwards its eviction writes it back. */
    if (current == 1 && t->h_data &&
        atomic_load_explicit(&t->host_version, memory_order_acquire) == v &&
        rt->gpus[holder].pool && pin_current(rt->gpus[holder].pool, t, holder)) {
        atomic_store_explicit(&t->host_version, 0, memory_order_release);
        twi_host_free(rt->host_pool, t->h_data, t->bytes, t->pinned);
        t->h_data = NULL;
        twi_mem_count(rt, -(int64_t)t->bytes);
        twi_replica_unpin(rt->gpus[holder].pool, t, holder, v);
        dropped = true;
    }
    pthread_mutex_unlock(l);
    return dropped;
}

void
twi_replica_drop(twi_devpool *p, tw_tile *tile, int gi)
{
    twi_replica *r = &tile->rep[gi];
    size_t cb;
    int c = size_class(tile->bytes, &cb);

    pthread_mutex_lock(&p->lock);
    if (r->d_ptr) {
        /* A task holds a reference on each of its tiles, so nothing pins a dying tile. */
        if (r->pins == 0) {
            lru_unlink(p, r);
            p->bytes_idle_rep -= cb;
        }
        give_back(p, r->d_ptr, c, cb);
        r->d_ptr = NULL;
        atomic_store_explicit(&r->version, 0, memory_order_relaxed);
    }
    publish(p);
    pthread_mutex_unlock(&p->lock);
}

#else /* !TW_HAVE_CUDA: no device memory exists */

tw_status
twi_devpool_create(int ordinal, size_t budget, twi_devpool **out)
{
    (void)ordinal;
    (void)budget;
    *out = NULL;
    return TW_E_NODEV;
}

tw_status
twi_hostpool_create(int ordinal, size_t cache_cap, twi_devpool **out)
{
    (void)ordinal;
    (void)cache_cap;
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

size_t
twi_devpool_class_bytes(size_t bytes)
{
    return bytes;
}

size_t
twi_devpool_high_water(const twi_devpool *p)
{
    (void)p;
    return 0;
}

size_t
twi_devpool_hard_bytes(const twi_devpool *p)
{
    (void)p;
    return 0;
}

uint64_t
twi_devpool_evictions(const twi_devpool *p)
{
    (void)p;
    return 0;
}

void *
twi_replica_pin(twi_devpool *p, tw_tile *tile, int gi, bool *current)
{
    (void)p;
    (void)tile;
    (void)gi;
    *current = false;
    return NULL;
}

void
twi_replica_unpin(twi_devpool *p, tw_tile *tile, int gi, uint64_t version)
{
    (void)p;
    (void)tile;
    (void)gi;
    (void)version;
}

void
twi_replica_drop(twi_devpool *p, tw_tile *tile, int gi)
{
    (void)p;
    (void)tile;
    (void)gi;
}

void
twi_devpool_count_downloads(twi_devpool *p, atomic_uint_fast64_t *counter)
{
    (void)p;
    (void)counter;
}

bool
twi_tile_drop_host(tw_tile *t)
{
    (void)t;
    return false;
}

tw_status
twi_tile_sync_host(tw_tile *t, char *msg, size_t n)
{
    /* Without CUDA no runtime has GPUs, so downloads are never lazy. */
    (void)t;
    (void)msg;
    (void)n;
    return TW_OK;
}

#endif /* TW_HAVE_CUDA */
