/* SPDX-License-Identifier: MIT */
/* tilewave: reference-counted tiles (host pixels, rows packed, pinned when GPUs exist). */
#include <stdint.h>
#include <stdlib.h>

#include "runtime_internal.h"

/* The skeleton keeps no device replica between tasks: a GPU worker copies a tile in, runs,
 * copies it back and returns the device buffer to its pool, so a tile owns only host memory.
 * Pixel contents of a new tile are undefined until a reader or a W task fills them. */

tw_status
twi_tile_create(tw_runtime *rt, int32_t w, int32_t h, int32_t channels, tw_sample_type type,
                tw_tile **out)
{
    tw_tile *t = NULL;
    size_t ss = tw_sample_size(type);
    uint64_t stride, bytes;

    if (!rt || !out || w <= 0 || h <= 0 || channels <= 0 || ss == 0)
        return TW_E_INVALID;
    stride = (uint64_t)w * (uint64_t)channels * ss;
    bytes = stride * (uint64_t)h;
    if (bytes > (uint64_t)INT64_MAX || bytes > SIZE_MAX)
        return TW_E_INVALID;
    if (!(t = calloc(1, sizeof *t)))
        return TW_E_NOMEM;
    t->h_data = twi_host_alloc(rt->host_pool, (size_t)bytes, &t->pinned);
    if (!t->h_data) {
        free(t);
        return TW_E_NOMEM;
    }
    atomic_init(&t->refs, 1);
    t->rt = rt;
    t->stride = (int64_t)stride;
    t->bytes = (size_t)bytes;
    t->w = w;
    t->h = h;
    t->channels = channels;
    t->type = type;
    *out = t;
    return TW_OK;
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
    twi_host_free(t->rt->host_pool, t->h_data, t->bytes, t->pinned);
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
