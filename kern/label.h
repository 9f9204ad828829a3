/* SPDX-License-Identifier: MIT */
/* tilewave: the labelling kernels' contract: border labels, the merge's result and the
 * argument checks that the CPU and CUDA variants share (valid C and C++). */
#ifndef TWI_KERN_LABEL_H
#define TWI_KERN_LABEL_H

#include "maxtree.h" /* the TWI_MAXTREE_* tile sides */
#include "tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Connected-component labelling across tiles (omp/label_omp.c, cuda/label_cuda.cu; ops/label.c
 * drives them). A tile's local labels are 1..n in raster order of each component's first
 * pixel within the tile (0: background). Its border labels are those on a side shared with
 * another tile (TWI_MAXTREE_* sides, as for border max-trees).
 */
typedef struct twi_label_border {
    int64_t n;          /* local labels */
    int32_t w, h;
    uint32_t *rows;     /* [h] local labels whose first pixel lies in that row */
    int64_t m;          /* border labels */
    uint32_t *lab;      /* [m] the border labels, ascending */
    uint32_t *first;    /* [m] tile raster index (y * w + x) of each one's first pixel */
    uint32_t *side[4];  /* TWI_MAXTREE_*: the label of every pixel of that side (w or h of them),
                           NULL when the side is not a border */
} twi_label_border;

/* What the merge of a grid's border labels gives (twi_label_merge). */
typedef struct twi_label_merged {
    int64_t n;            /* border labels of all tiles */
    int64_t *off;         /* [n_tiles + 1]: tile t's border labels are off[t] .. off[t + 1] - 1 */
    uint64_t *final;      /* [n]: each border label's final label */
    uint8_t *start;       /* [n]: 1 when it holds its component's first pixel */
    uint64_t *row_base;   /* [H * tiles_x]: components whose first pixel comes before
                             (image row y,
                              tile column tx) in raster order: entry y * tiles_x + tx */
    int64_t tiles_x;
    uint64_t total;       /* components of the whole image */
} twi_label_merged;

/* The argument check of twi_omp_label, shared with its CUDA twin: TW_OK or TW_E_INVALID. */
tw_status twi_label_check(const tw_tile_view *mask, int conn, const tw_tile_view *labels);
/* The argument check of twi_omp_label_apply, shared with its CUDA twin (map only tested
 * for NULL). */
tw_status twi_label_apply_check(const tw_tile_view *labels, const uint64_t *map,
                                const tw_tile_view *out);

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_LABEL_H */
