/* SPDX-License-Identifier: MIT */
/* tilewave: runtime memory and tiles: host and device pools, tile replicas, the host
 * memory budget, the tile layout (runtime/mem_cuda.c, budget.c, tile.c). */
#ifndef TW_RT_MEM_H
#define TW_RT_MEM_H

#include <stdatomic.h>

#include "tw_internal.h"

/* Only the sources of runtime/ include this header; nothing outside sees these layouts. */

typedef struct tw_worker tw_worker;
/* One GPU's caching allocator (or the pinned host pool), below. */
typedef struct twi_devpool twi_devpool;

/* ---- memory (runtime/mem_cuda.c: the only file that calls cudaMalloc/cudaFree/cudaHostAlloc) */
/* Host tile memory, 64-byte aligned: pinned from `pinned_pool` when it is not NULL (falls back
 * to plain memory when pinning fails), plain otherwise. *pinned_out says which. */
TWI_HIDDEN void *twi_host_alloc(twi_devpool *pinned_pool, size_t bytes, bool *pinned_out);
/* Page-lock (cudaHostRegister, portable) or release the caller's memory at p (runtime.
 * caller_memory = register); false when it could not be (no CUDA, refused, or already). */
TWI_HIDDEN bool twi_host_register(void *p, size_t len);
/* p is page-locked host memory (cudaHostAlloc'd or registered); false without CUDA. */
TWI_HIDDEN bool twi_host_pinned(const void *p);
TWI_HIDDEN void twi_host_unregister(void *p);
TWI_HIDDEN void twi_host_free(twi_devpool *pinned_pool, void *p, size_t bytes, bool pinned);
/* A caching device allocator for one GPU: free lists by size class, cudaMalloc on a miss,
 * everything cudaFree'd at destroy. Thread-safe. Create and destroy with the device current. */
/* The device pool also keeps the tiles' replicas on its GPU (see the tile section) and never
 * holds more than `budget` bytes, in use and cached together: an allocation that would go
 * beyond first frees idle blocks and evicts idle replicas (least recently used first), then
 * fails. */
TWI_HIDDEN tw_status twi_devpool_create(int ordinal, size_t budget, twi_devpool **out);
TWI_HIDDEN void twi_devpool_destroy(twi_devpool *p);
/* The same allocator over pinned host memory (cudaHostAlloc, portable), keeping at most
 * `cache_cap` bytes idle (runtime.pinned_cache); one per runtime with GPUs, for host tiles.
 * No budget, no replicas. */
TWI_HIDDEN tw_status twi_hostpool_create(int ordinal, size_t cache_cap, twi_devpool **out);
TWI_HIDDEN void *twi_devpool_alloc(twi_devpool *p, size_t bytes); /* NULL: out of memory */
TWI_HIDDEN void twi_devpool_free(twi_devpool *p, void *d_ptr, size_t bytes);
/* The block size the pool hands out for a request of `bytes` (its size class). */
TWI_HIDDEN size_t twi_devpool_class_bytes(size_t bytes);
/* Instrumentation, lock-free: the most bytes the pool ever held (in use + cached), the bytes
 * in use that cannot be evicted (pinned replicas, task buffers, scratch), replicas evicted. */
TWI_HIDDEN size_t twi_devpool_high_water(const twi_devpool *p);
TWI_HIDDEN size_t twi_devpool_hard_bytes(const twi_devpool *p);
TWI_HIDDEN uint64_t twi_devpool_evictions(const twi_devpool *p);
/* Pin tile's replica on the pool's GPU (index gi), allocating its block when it has none
 * (NULL: no room under the budget, or out of memory). *current: the block holds the tile's
 * current version (no upload needed). The pool's own thread only. */
TWI_HIDDEN void *twi_replica_pin(twi_devpool *p, tw_tile *tile, int gi, bool *current);
/* Unpin; `version` is what the block holds now (0: nothing worth keeping). An unpinned
 * replica holding the tile's current version stays cached (LRU); any other goes back. */
TWI_HIDDEN void twi_replica_unpin(twi_devpool *p, tw_tile *tile, int gi, uint64_t version);
/* Free tile's replica on that pool (the tile is being freed; any thread). */
TWI_HIDDEN void twi_replica_drop(twi_devpool *p, tw_tile *tile, int gi);
/* Bytes an evicted replica writes back to the host (lazy downloads) are added to *counter
 * (the manager's bytes_down). */
TWI_HIDDEN void twi_devpool_count_downloads(twi_devpool *p, atomic_uint_fast64_t *counter);

/* ---- host memory budget (runtime/budget.c): runtime.host_mem, docs/runtime.md "Memory
 * budgets". Without a budget rt->budget is NULL and only host_live / host_peak are kept. */
typedef struct twi_budget twi_budget;

/* A tile's residency under a budget (under the budget's lock; pins is also read lock-free by
 * assertions). */
typedef struct twi_tile_mem {
    atomic_int pins;        /* running tasks using it + twi_tile_pin() holders */
    uint8_t io;             /* a spill or a reload of it is under way (budget.c) */
    bool filled;            /* its pixels are worth keeping (a writer ran or pinned it) */
    bool in_lru;            /* resident and idle: may be spilled */
    int64_t off;            /* its current copy in the scratch file, -1 when none */
    tw_tile *lru_prev, *lru_next;
} twi_tile_mem;

/* A task's share of the budget: set at dispatch under the scheduler lock, then used by the
 * worker that runs it. */
typedef struct twi_task_mem {
    bool dispatched;        /* twi_budget_dispatch() ran; twi_budget_task_end() undoes it */
    bool escape;            /* its working set exceeds what spilling can free: runs alone */
    unsigned pinned;        /* bit i: tiles[i] pinned for it */
    int worker;             /* index of the worker it was dispatched to */
    int64_t need;           /* bytes reserved at dispatch */
    int64_t reserved;       /* of which not yet allocated */
    int64_t taken;          /* taken from the reservation by pins in its variant */
    int64_t frees;          /* bytes expected to be freed when it ends */
    int64_t promise;        /* a load's host_bytes, kept for its consumers when it ends */
} twi_task_mem;

/* At creation (after plan_workers: it needs the worker count) and destruction. */
TWI_HIDDEN tw_status twi_budget_create(tw_runtime *rt, tw_error *err);
TWI_HIDDEN void twi_budget_destroy(tw_runtime *rt);
/* Count host tile bytes allocated (> 0) or freed (< 0) without a budget. */
TWI_HIDDEN void twi_mem_count(tw_runtime *rt, int64_t delta);
/* A tile with a budget is freed: its pixels and its scratch copy (tile.c). */
TWI_HIDDEN void twi_budget_tile_free(tw_tile *t);
/* Under the scheduler lock (rt->budget set): may t be dispatched to w now? */
TWI_HIDDEN bool twi_budget_fits(const tw_worker *w, const tw_task *t);
/* Under the scheduler lock, right after the pop that took t for w (rt->budget set): reserve
 * its need and pin its resident tiles. */
TWI_HIDDEN void twi_budget_dispatch(tw_worker *w, tw_task *t);
/* Under the scheduler lock, when a pop found nothing (rt->budget set): with `on`, true when
 * nothing runs and a task waits for memory; then the caller pops again and every task fits
 * (the oldest runs, spilling what it must, alone over the budget when even that is not
 * enough), and calls it again with `on` false. */
TWI_HIDDEN bool twi_budget_stall(tw_runtime *rt, bool on);
/* Under the scheduler lock: nothing runs and a task was refused for memory. */
TWI_HIDDEN bool twi_budget_stalled(tw_runtime *rt);
/* On the worker, before the variant of a dispatched task: pin (allocate, read back) the rest
 * of its tiles. On failure `msg` gets the message; twi_budget_task_end() must follow either
 * way. A no-op for tasks not dispatched with a budget. */
TWI_HIDDEN tw_status twi_budget_task_begin(tw_task *t, char *msg, size_t n);
/* After the variant (and its commit), or instead of it: unpin, give back the reservation,
 * wake idle workers when a task waits for memory. Before the task is completed or requeued. */
TWI_HIDDEN void twi_budget_task_end(tw_task *t);

/* ---- tiles */
/* A tile's copy on one GPU (runtime/mem_cuda.c). `version` is read anywhere (the locality
 * policy, fit checks) and written under the GPU pool's lock; the rest is under that lock. */
typedef struct twi_replica {
    atomic_uint_fast64_t version; /* the tile version its block holds; 0 = nothing valid */
    void *d_ptr;            /* device block of tile->dev_bytes, NULL = none */
    int pins;               /* GPU tasks using it (running or staged); 0: in the pool's LRU */
    struct twi_replica *lru_prev, *lru_next;
    tw_tile *tile;
} twi_replica;

struct tw_tile {
    atomic_int refs;
    tw_runtime *rt;
    void *h_data;           /* host pixels, 64-byte aligned, rows packed (external: the
                               caller's, rows `stride` apart) */
    bool pinned;            /* h_data came from cudaHostAlloc */
    bool external;          /* h_data is a window of the caller's memory (twi_tile_wrap):
                               never freed, dropped, spilled or counted */
    int64_t stride;         /* bytes between host rows: `row`, or the caller's stride */
    size_t row;             /* bytes of a row's pixels = w * channels * sample size; device
                               blocks keep rows packed, `row` apart */
    size_t bytes;           /* row * h: the pixels, as a device block holds them */
    int32_t w, h, channels;
    tw_sample_type type;
    int64_t x0, y0;
    twi_tile_mem mem;       /* host budget (runtime/budget.c); h_data is NULL while spilled */
    /* Bumped when the pixels change: a task that writes the tile starts (W/RW), or
     * twi_tile_host_written(). Starts at 1; a replica is current when it holds this. */
    atomic_uint_fast64_t version;
    /* The version h_data holds (rt->lazy_down only; see runtime/tile.c): the host copy is
     * current when it equals `version`, else the current pixels are in a GPU replica. */
    atomic_uint_fast64_t host_version;
    size_t dev_bytes;       /* its block on a GPU: the pool's size class of `bytes` */
    int n_rep;              /* rt->n_gpus when it was made */
    twi_replica rep[];      /* one per GPU of the runtime, in rt->gpus order */
};

/* Bytes of t's R/RW tiles resident and current on the runtime's GPU `gi`; lock-free. */
TWI_HIDDEN int64_t twi_task_resident_bytes(const tw_task *t, int gi);
/* A task that writes tiles is starting: bump their versions (invalidates every replica). */
TWI_HIDDEN void twi_task_bump_written(const tw_task *t);
/* A CPU variant of t is starting: bring its tiles' current pixels to the host, then bump the
 * versions of those it writes (whose host copies then stay current). TW_OK, or TW_E_DEVICE
 * with a message in msg. */
TWI_HIDDEN tw_status twi_task_host_begin(const tw_task *t, char *msg, size_t n);
/* Lazy downloads: when t's current pixels are only in a GPU replica, copy them to h_data
 * (synchronously, on the calling thread, any device) and mark the host copy current. No-op
 * when the host copy is current. Thread-safe; callers follow the task graph (no task writes t
 * meanwhile). TW_OK, or TW_E_DEVICE with a message in msg (may be NULL when n is 0)
 * (runtime/mem_cuda.c). */
TWI_HIDDEN tw_status twi_tile_sync_host(tw_tile *t, char *msg, size_t n);
/* The host copy of t holds its current version (written there, or kept as the input of a
 * failed GPU task that the CPU retries). */
static inline void
twi_tile_host_set_current(tw_tile *t)
{
    atomic_store_explicit(&t->host_version,
                          atomic_load_explicit(&t->version, memory_order_relaxed),
                          memory_order_release);
}

#endif /* TW_RT_MEM_H */
