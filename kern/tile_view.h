/* SPDX-License-Identifier: MIT */
/* tilewave: the plain tile view that kernels in omp/ and cuda/ receive (valid C and C++); the
 * per-operation contracts beside it (kern/edt.h, kern/maxtree.h, ...) build on it. */
#ifndef TWI_KERN_TILE_VIEW_H
#define TWI_KERN_TILE_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "tilewave/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A rectangle of pixels in host or device memory. Kernels never see the scheduler: this is
 * all they get. Samples of a pixel are interleaved; rows are `stride` bytes apart. */
typedef struct tw_tile_view {
    void *data;          /* first sample of row 0; host or device pointer */
    int64_t stride;      /* bytes between rows, >= w * channels * sample size */
    int32_t w, h;        /* pixels */
    int32_t channels;    /* interleaved samples per pixel */
    tw_sample_type type;
    int64_t x0, y0;      /* position of the tile's first pixel in the image being processed */
} tw_tile_view;

/* Row y of a view as a T *: the one row accessor of kernels and the ops that read views. */
#define TWI_ROW(v, T, y) ((T *)(void *)((char *)(v)->data + (int64_t)(y) * (v)->stride))

/* The memory check every kernel makes of its views: 1 when the size is not negative and, for
 * a non-empty view, data is set, rows hold at least `row_bytes` and both data and stride are
 * multiples of `align` (the sample size); 0 otherwise. Shapes and types are the kernel's own
 * business. */
static inline int
twi_view_fits(const tw_tile_view *v, size_t row_bytes, size_t align)
{
    if (v->w < 0 || v->h < 0)
        return 0;
    if (v->w == 0 || v->h == 0)
        return 1;
    if (!v->data || v->stride < 0 || (uint64_t)v->stride < row_bytes)
        return 0;
    return (uintptr_t)v->data % align == 0 && (uint64_t)v->stride % align == 0;
}

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_TILE_VIEW_H */
