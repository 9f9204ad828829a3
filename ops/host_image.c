/* SPDX-License-Identifier: MIT */
/* tilewave: the caller's images (tw_host_image) of jobs in memory: checks, copies out, and
 * windows of them as tiles (runtime/tile.c, "Wrapped tiles"). */
#include <stdint.h>
#include <string.h>

#include "ops_internal.h"

tw_status
twi_host_image_check(const char *op, const char *what, const tw_host_image *r, int64_t w,
                     int64_t h, tw_sample_type t, tw_error *err)
{
    if (r->w != w || r->h != h || r->type != t ||
        (r->stride && r->stride < (size_t)r->w * tw_sample_size(t)))
        return twi_error_set(err, TW_E_INVALID,
                             "%s: the %s image is %lldx%lld %s (stride %zu); %lldx%lld %s needed",
                             op, what, (long long)r->w, (long long)r->h,
                             tw_sample_type_name(r->type), r->stride, (long long)w, (long long)h,
                             tw_sample_type_name(t));
    return TW_OK;
}

/* The row stride of a (0 means packed). */
static size_t
host_stride(const tw_host_image *a)
{
    return a->stride ? a->stride : (size_t)a->w * tw_sample_size(a->type);
}

static bool
wrappable(const tw_host_image *a)
{
    size_t ss = tw_sample_size(a->type);

    return a->data && ss && a->w > 0 && a->h > 0 && host_stride(a) % ss == 0 &&
           (uintptr_t)a->data % ss == 0;
}

bool
twi_host_image_wrappable(const tw_runtime *rt, const tw_host_image *a)
{
    return wrappable(a) && twi_tile_can_wrap(rt, a->data);
}

bool
twi_host_image_wrappable_cpu(const tw_runtime *rt, const tw_host_image *a)
{
    return wrappable(a) && twi_tile_can_wrap_cpu(rt, a->data);
}

bool
twi_host_image_overlap(const tw_host_image *a, const tw_host_image *b)
{
    uintptr_t a0, a1, b0, b1;

    if (!a->data || !b->data || a->w < 1 || a->h < 1 || b->w < 1 || b->h < 1)
        return false;
    a0 = (uintptr_t)a->data;
    a1 = a0 + (size_t)(a->h - 1) * host_stride(a) + (size_t)a->w * tw_sample_size(a->type);
    b0 = (uintptr_t)b->data;
    b1 = b0 + (size_t)(b->h - 1) * host_stride(b) + (size_t)b->w * tw_sample_size(b->type);
    return a0 < b1 && b0 < a1;
}

bool
twi_host_image_same(const tw_host_image *a, const tw_host_image *b)
{
    return a->data && a->data == b->data && a->w == b->w && a->h == b->h &&
           a->type == b->type && host_stride(a) == host_stride(b);
}

tw_status
twi_host_image_wrap(tw_runtime *rt, const tw_host_image *a, int64_t x, int64_t y, int32_t w,
                    int32_t h, tw_tile **out)
{
    size_t stride = host_stride(a), ss = tw_sample_size(a->type);
    tw_status st = twi_tile_wrap(rt, (char *)a->data + (size_t)y * stride + (size_t)x * ss,
                                 stride, w, h, 1, a->type, out);

    if (st == TW_OK)
        twi_tile_set_origin(*out, x, y);
    return st;
}

void
twi_host_image_register(tw_job *job, const tw_host_image *a)
{
    if (a->data && a->w > 0 && a->h > 0)
        twi_job_register_host(job, a->data, (size_t)(a->h - 1) * host_stride(a) +
                                                (size_t)a->w * tw_sample_size(a->type));
}

void
twi_host_image_put(const tw_host_image *dst, const tw_tile_view *v, int64_t x, int64_t y)
{
    size_t px = (size_t)v->channels * tw_sample_size(v->type);
    size_t stride = dst->stride ? dst->stride : (size_t)dst->w * px;

    for (int32_t r = 0; r < v->h; r++)
        memcpy((char *)dst->data + (size_t)(y + r) * stride + (size_t)x * px,
               (const char *)v->data + (int64_t)r * v->stride, (size_t)v->w * px);
}
