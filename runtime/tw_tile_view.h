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
    TWI_EDT_SQ32,    /* TW_U32: d2 in pixels (isotropic only), UINT32_MAX when larger */
    TWI_EDT_U8       /* TW_U8: min(255, floor(sqrt(d2) + 0.5)); the CPU variant only (the CUDA
                      * variant refuses it) */
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
 * Max-tree ([Blin21], [Blin22]; omp/ and cuda/ twins, ops/maxtree.c drives them). A max-tree is
 * stored as a parent image of raster indices (y * w + x of the image or tile being processed).
 * Canonical form ([Blin22], section 2.2): with the total order
 *     p < q  iff  f(p) < f(q), or f(p) = f(q) and index(p) > index(q),
 * parent(p) < p for every pixel but the root, which points to itself, and every parent is a
 * canonical pixel. The canonical pixel of a node (a connected component of [f >= v] holding a
 * pixel of level v, under 4- or 8-connectivity) is its pixel of LARGEST raster index at level
 * v; every other pixel of the node points to it; a canonical pixel points to the canonical
 * pixel of the parent node. The representation is therefore unique: two correct
 * implementations produce the same bytes.
 */

/* Border max-trees (omp/maxtree_border.c, cuda/maxtree_attr.cu, cuda/maxtree_merge.cu; the
 * whole-slide attribute filters of ops/maxtree.c). A tile's border max-tree is the set of
 * nodes of its local max-tree that hold a pixel of a border side (a side shared with another
 * tile) or are ancestors of such a node. Its nodes are numbered by increasing canonical pixel
 * index, so the same tile gives the same numbering in both passes and on every device. */
enum { TWI_MT_TOP = 0, TWI_MT_BOTTOM, TWI_MT_LEFT, TWI_MT_RIGHT };
#define TWI_MT_SIDE(s) (1u << (s))

typedef struct twi_mt_border {
    int64_t n;          /* nodes */
    uint16_t *level;    /* [n] */
    uint32_t *lparent;  /* [n] the local parent's number; its own for the tile's root */
    uint32_t *own;      /* [n] pixels whose nearest border-tree node (itself or an ancestor) is
                           this one: the node's area minus its border-tree children's areas */
    uint16_t *maxv;     /* [n] the highest level in the node's local subtree */
    uint32_t *side[4];  /* TWI_MT_*: the node number of every pixel of that side (w or h of
                           them), NULL when the side is not a border */
    int32_t w, h;
} twi_mt_border;

/* What a pass computes for each node (twi_mt_merge, twi_mt_filter). */
typedef enum twi_mt_rule {
    TWI_MT_AREA = 0, /* level of the nearest ancestor with area >= threshold, else vmin */
    TWI_MT_HEIGHT,   /* nearest ancestor with maxv - level(parent) >= threshold; root kept */
    TWI_MT_AREA_MAP  /* the node's area (for tests and tilewave maxtree --area) */
} twi_mt_rule;

typedef struct twi_mt_filter {
    twi_mt_rule rule;
    uint64_t threshold;
    uint16_t vmin;      /* level given when no ancestor survives (TWI_MT_AREA) */
} twi_mt_filter;

/* The border max-trees of a grid of tiles packed into one buffer for the GPU merge
 * (twi_mt_pack_build in omp/, twi_cuda_mt_merge in cuda/). Offsets are in bytes from the
 * buffer's start, so one layout describes the host buffer and its device copy. Tiles are in
 * raster order; node numbers in `lparent` and `sides` are tile-local, as in twi_mt_border. */
typedef struct twi_mt_pack {
    int64_t tiles_x, tiles_y, n_tiles;
    int64_t n;            /* nodes of all tiles */
    size_t bytes;         /* size of the buffer */
    size_t off_at;        /* int64_t [n_tiles + 1]: first node of each tile (off[0] = 0) */
    size_t dims_at;       /* int32_t [2 * n_tiles]: w, h of each tile */
    size_t side_at;       /* int64_t [4 * n_tiles]: index in `sides` where side s of tile t
                             starts (entry 4 t + s), -1 when that side is not a border */
    size_t level_at;      /* uint16_t [n] */
    size_t maxv_at;       /* uint16_t [n] */
    size_t lparent_at;    /* uint32_t [n] */
    size_t own_at;        /* uint32_t [n] */
    size_t sides_at;      /* uint32_t [...]: every present side's node numbers, in turn */
} twi_mt_pack;

/*
 * Connected-component labelling across tiles (omp/label_omp.c, cuda/label_cuda.cu; ops/label.c
 * drives them). A tile's local labels are 1..n in raster order of each component's first
 * pixel within the tile (0: background). Its border labels are those on a side shared with
 * another tile (TWI_MT_* sides, as for border max-trees).
 */
typedef struct twi_label_border {
    int64_t n;          /* local labels */
    int32_t w, h;
    uint32_t *rows;     /* [h] local labels whose first pixel lies in that row */
    int64_t m;          /* border labels */
    uint32_t *lab;      /* [m] the border labels, ascending */
    uint32_t *first;    /* [m] tile raster index (y * w + x) of each one's first pixel */
    uint32_t *side[4];  /* TWI_MT_*: the label of every pixel of that side (w or h of them),
                           NULL when the side is not a border */
} twi_label_border;

/* What the merge of a grid's border labels gives (twi_label_merge). */
typedef struct twi_label_merged {
    int64_t n;            /* border labels of all tiles */
    int64_t *off;         /* [n_tiles + 1]: tile t's border labels are off[t] .. off[t + 1] - 1 */
    uint64_t *final;      /* [n]: each border label's final label */
    uint8_t *start;       /* [n]: 1 when it holds its component's first pixel */
    uint64_t *row_base;   /* [H * tiles_x]: components whose first pixel comes before
                             (image row y, tile column tx) in raster order: entry y * tiles_x + tx */
    int64_t tiles_x;
    uint64_t total;       /* components of the whole image */
} twi_label_merged;

#ifdef __cplusplus
}
#endif

#endif /* TW_TILE_VIEW_H */
