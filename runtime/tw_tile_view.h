/* SPDX-License-Identifier: MIT */
/* tilewave: the plain tile view that kernels in omp/ and cuda/ receive (valid C and C++). */
#ifndef TW_TILE_VIEW_H
#define TW_TILE_VIEW_H

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


/*
 * Exact Euclidean distance transform of a band of image rows (omp/ and cuda/ twins; ops/edt.c
 * drives them). The band is `h` consecutive rows of the whole image width, starting at image
 * row `y0`; the whole image is one band with no neighbours. Input: TW_U8, 0 = background,
 * anything else = foreground. What lies outside the band reaches the kernel only through
 * `above` and `below`: per column, the image row of the nearest background pixel above the
 * band (< y0) and below it (>= y0 + h), or TWI_EDT_NONE. Because the EDT is separable (the
 * nearest background pixel of p is the nearest over columns of "nearest in that column"), this
 * is all a band needs to be exact: no halo.
 */
#define TWI_EDT_NONE (-1)
/* Largest image side (columns or rows) the EDT kernels accept: keeps every integer
 * intermediate (squared distances, PBA's dominance test) inside int64. */
#define TWI_EDT_MAX_SIDE (1 << 20)

typedef enum twi_edt_format {
    TWI_EDT_F32 = 0, /* TW_F32: (float)sqrt(d2) with d2 in double (exact integer when sx = sy = 1) */
    TWI_EDT_U16,     /* TW_U16: min(65535, floor(sqrt(d2) + 0.5)), sqrt in double */
    TWI_EDT_SQ32     /* TW_U32: d2 in pixels (isotropic only), UINT32_MAX when larger */
} twi_edt_format;

typedef struct twi_edt_band {
    int64_t y0;            /* image row of the band's first row */
    const int32_t *above;  /* [w] or NULL (= all TWI_EDT_NONE); device memory for CUDA */
    const int32_t *below;  /* [w] or NULL */
    double sx, sy;         /* spacing of columns and rows (> 0); exactly 1, 1: integer path */
    int format;            /* twi_edt_format */
    int32_t m1, m2, m3;    /* CUDA only: PBA+ band counts of phases 1, 2, 3; 0 = automatic */
} twi_edt_band;

/*
 * Max-tree (seeds 000 and 001; omp/ and cuda/ twins, ops/maxtree.c drives them). A max-tree is
 * stored as a parent image of raster indices (y * w + x of the image or tile being processed).
 * Canonical form (seed 001, section 2.2): with the total order
 *     p < q  iff  f(p) < f(q), or f(p) = f(q) and index(p) > index(q),
 * parent(p) < p for every pixel but the root, which points to itself, and every parent is a
 * canonical pixel. The canonical pixel of a node (a connected component of [f >= v] holding a
 * pixel of level v, under 4- or 8-connectivity) is its pixel of LARGEST raster index at level
 * v; every other pixel of the node points to it; a canonical pixel points to the canonical
 * pixel of the parent node. The representation is therefore unique: two correct
 * implementations produce the same bytes.
 */
#ifdef __cplusplus
}
#endif

#endif /* TW_TILE_VIEW_H */
