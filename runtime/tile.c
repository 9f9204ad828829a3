/* SPDX-License-Identifier: MIT */
/* tilewave: reference-counted tiles (host pixels, rows packed, pinned when GPUs exist). */
#include <stdint.h>
#include <stdlib.h>

#include "rt_core.h"

/*
 * A tile owns its host pixels and, per GPU of the runtime, at most one replica: a device block
 * from that GPU's pool (runtime/mem_cuda.c) which GPU tasks reuse instead of uploading the tile
 * again.
 *
 * Downloads. Eager (runtime.gpu_downloads = eager, and always under a host budget): a GPU task
 * that writes a tile downloads it as it ends, so the host copy is always current and replicas
 * are caches of it. Lazy (the default with GPUs): the written tile stays on its GPU only, and
 * `host_version` records which version h_data holds. Whoever reads host pixels first brings
 * them back with twi_tile_sync_host(): a CPU task as it starts (twi_task_host_begin), code
 * between tasks through twi_tile_pin()/_pin_read(), a task staged on another GPU, and the pool
 * when it evicts the replica. A GPU task that writes a tile whose host copy is stale brings it
 * back before it starts, so that a CPU retry after a failure starts from the same pixels.
 * Only one GPU ever holds a version the host does not: a copy to another GPU goes through the
 * host.
 *
 * Validity is a version number. Every change of the pixels bumps the tile's version: a task
 * that declares the tile W or RW bumps it as it starts (worker loop for CPU variants,
 * twi_cuda_run for CUDA ones), code writing host pixels outside tasks with
 * twi_tile_host_written(). A replica records the version its block holds and is used only
 * while that equals the tile's. Bumping at the start rather than the end is equivalent for
 * correct task graphs (no reader runs concurrently with a writer of the same tile) and also
 * invalidates the replicas when a writer fails halfway or is retried on another device.
 *
 * Pixel contents of a new tile are undefined until a reader or a W task fills them.
 *
 * Wrapped tiles (twi_tile_wrap). A job on the caller's images can make its tiles windows of
 * them: no tile memory, no copy in or out. Host views then have the caller's row stride; a
 * device block keeps rows packed (tile->row apart), and uploads and downloads are 2D copies
 * between the two (cudaMemcpy2D*), straight from and into the caller's memory. Such tiles are
 * never dropped from the host (twi_tile_drop_host) and exist only without a host budget.
 */

/* A new tile: its own host pixels when data is NULL, else the caller's at data, rows `stride`
 * bytes apart (twi_tile_wrap). */
static tw_status
tile_new(tw_runtime *rt, void *data, size_t stride, int32_t w, int32_t h, int32_t channels,
         tw_sample_type type, tw_tile **out)
{
    tw_tile *t = NULL;
    size_t ss = tw_sample_size(type);
    uint64_t row, bytes;
    int n_rep;

    if (!rt || !out || w <= 0 || h <= 0 || channels <= 0 || ss == 0)
        return TW_E_INVALID;
    row = (uint64_t)w * (uint64_t)channels * ss;
    bytes = row * (uint64_t)h;
    if (bytes > (uint64_t)INT64_MAX || bytes > SIZE_MAX)
        return TW_E_INVALID;
    if (data && (rt->caller_mode == TWI_CALLER_COPY || stride < row || stride % ss ||
                 (uintptr_t)data % ss || stride > (uint64_t)INT64_MAX / (uint64_t)h))
        return TW_E_INVALID;
    n_rep = rt->n_gpus > 0 ? rt->n_gpus : 0;
    if (!(t = calloc(1, sizeof *t + (size_t)n_rep * sizeof t->rep[0])))
        return TW_E_NOMEM;
    /* Host budget (runtime/budget.c): the pixels come with the first pin instead. */
    atomic_init(&t->mem.pins, 0);
    t->mem.off = -1;
    if (data) {
        t->h_data = data;
        t->external = true;
    } else if (!rt->budget) {
        t->h_data = twi_host_alloc(rt->host_pool, (size_t)bytes, &t->pinned);
        if (!t->h_data) {
            free(t);
            return TW_E_NOMEM;
        }
        twi_mem_count(rt, (int64_t)bytes);
    }
    atomic_init(&t->refs, 1);
    t->rt = rt;
    t->stride = data ? (int64_t)stride : (int64_t)row;
    t->row = (size_t)row;
    t->bytes = (size_t)bytes;
    t->w = w;
    t->h = h;
    t->channels = channels;
    t->type = type;
    atomic_init(&t->version, 1);
    atomic_init(&t->host_version, 1);
    t->dev_bytes = twi_devpool_class_bytes((size_t)bytes);
    t->n_rep = n_rep;
    for (int i = 0; i < n_rep; i++) {
        atomic_init(&t->rep[i].version, 0);
        t->rep[i].tile = t;
    }
    *out = t;
    return TW_OK;
}

tw_status
twi_tile_create(tw_runtime *rt, int32_t w, int32_t h, int32_t channels, tw_sample_type type,
                tw_tile **out)
{
    return tile_new(rt, NULL, 0, w, h, channels, type, out);
}

tw_status
twi_tile_wrap(tw_runtime *rt, void *data, size_t stride, int32_t w, int32_t h, int32_t channels,
              tw_sample_type type, tw_tile **out)
{
    if (!data)
        return TW_E_INVALID;
    return tile_new(rt, data, stride, w, h, channels, type, out);
}

void
twi_tile_detach(tw_tile *t)
{
    if (!t || !t->external)
        return;
    /* No write-back: the job has ended, and with it the right to touch the caller's memory
     * (its host copy is current after a success; after a failure the result is undefined). */
    for (int i = 0; i < t->n_rep; i++)
        if (t->rt->gpus[i].pool)
            twi_replica_drop(t->rt->gpus[i].pool, t, i);
    t->h_data = NULL;
}

bool
twi_tile_can_wrap_cpu(const tw_runtime *rt, const void *p)
{
    return rt && p && rt->caller_mode != TWI_CALLER_COPY;
}

bool
twi_tile_can_wrap(const tw_runtime *rt, const void *p)
{
    if (!rt || !p)
        return false;
    switch (rt->caller_mode) {
    case TWI_CALLER_WRAP:
    case TWI_CALLER_REGISTER: return true;
    case TWI_CALLER_AUTO: return rt->n_gpus == 0 || twi_host_pinned(p);
    default: return false;
    }
}

void
twi_tile_acquire(tw_tile *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void
twi_tile_release(tw_tile *t)
{
    if (!t)
        return;
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int i = 0; i < t->n_rep; i++)
        if (t->rt->gpus[i].pool)
            twi_replica_drop(t->rt->gpus[i].pool, t, i);
    if (t->external) {
        /* the caller's memory: nothing to free */
    } else if (t->rt->budget) { /* runtime/budget.c: pixels, scratch copy, accounting */
        twi_budget_tile_free(t);
    } else {
        if (t->h_data) /* NULL: dropped while a GPU held it (twi_tile_drop_host) */
            twi_mem_count(t->rt, -(int64_t)t->bytes);
        twi_host_free(t->rt->host_pool, t->h_data, t->bytes, t->pinned);
    }
    free(t);
}

void
twi_tile_set_origin(tw_tile *t, int64_t x0, int64_t y0)
{
    if (!t)
        return;
    t->x0 = x0;
    t->y0 = y0;
}

tw_tile_view
twi_tile_host_view(tw_tile *t)
{
    tw_tile_view v = {0};

    if (!t)
        return v;
    TW_ASSERT(twi_tile_is_pinned(t)); /* under a host budget, pixels exist only while pinned */
    TW_ASSERT(twi_tile_host_current(t)); /* lazy downloads: synced by the pin or task start */
    v.data = t->h_data;
    v.stride = t->stride;
    v.w = t->w;
    v.h = t->h;
    v.channels = t->channels;
    v.type = t->type;
    v.x0 = t->x0;
    v.y0 = t->y0;
    return v;
}

void
twi_tile_host_written(tw_tile *t)
{
    /* The task graph orders this before the next task that uses the tile (through the
     * dependency release and the scheduler lock), which is what makes relaxed enough. */
    if (!t)
        return;
    atomic_fetch_add_explicit(&t->version, 1, memory_order_relaxed);
    twi_tile_host_set_current(t);
}

void
twi_task_bump_written(const tw_task *t)
{
    for (int i = 0; i < t->n_tiles; i++)
        if (t->modes[i] & TW_W)
            atomic_fetch_add_explicit(&t->tiles[i]->version, 1, memory_order_relaxed);
}

tw_status
twi_task_host_begin(const tw_task *t, char *msg, size_t n)
{
    tw_status st;

    /* Written tiles too: a variant may keep pixels it does not overwrite. */
    for (int i = 0; i < t->n_tiles; i++)
        if ((st = twi_tile_sync_host(t->tiles[i], msg, n)) != TW_OK)
            return st;
    twi_task_bump_written(t);
    for (int i = 0; i < t->n_tiles; i++)
        if (t->modes[i] & TW_W)
            twi_tile_host_set_current(t->tiles[i]);
    return TW_OK;
}

int64_t
twi_task_resident_bytes(const tw_task *t, int gi)
{
    int64_t n = 0;

    for (int i = 0; i < t->n_tiles; i++) {
        const tw_tile *tile = t->tiles[i];
        uint64_t v;

        if (!(t->modes[i] & TW_R) || gi >= tile->n_rep)
            continue;
        v = atomic_load_explicit(&tile->rep[gi].version, memory_order_relaxed);
        if (v && v == atomic_load_explicit(&tile->version, memory_order_relaxed))
            n += (int64_t)tile->bytes;
    }
    return n;
}
