/* SPDX-License-Identifier: MIT */
/* tilewave: the max-tree kernels' contract: the canonical parent image, border max-trees,
 * the attribute filters' parameters, the packed grid of the GPU merge, and the argument check
 * that the CPU and CUDA variants share (valid C and C++). */
#ifndef TWI_KERN_MAXTREE_H
#define TWI_KERN_MAXTREE_H

#include "tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Max-tree ([Blin21], [Blin22]; omp/ and cuda/ twins, ops/maxtree.c and ops/attr_filter.c
 * drive them). A max-tree is stored as a parent image of raster indices (y * w + x of the
 * image or tile being processed).
 * Canonical form ([Blin22], section 2.2): with the total order
 *     p < q  iff  f(p) < f(q), or f(p) = f(q) and index(p) > index(q),
 * parent(p) < p for every pixel but the root, which points to itself, and every parent is a
 * canonical pixel. The canonical pixel of a node (a connected component of [f >= v] holding a
 * pixel of level v, under 4- or 8-connectivity) is its pixel of LARGEST raster index at level
 * v; every other pixel of the node points to it; a canonical pixel points to the canonical
 * pixel of the parent node. The representation is therefore unique: two correct
 * implementations produce the same bytes.
 */

/* Border max-trees (omp/maxtree_border.c, cuda/attr_filter_cuda.cu, cuda/maxtree_merge.cu; the
 * whole-slide attribute filters of ops/attr_filter.c). A tile's border max-tree is the set of
 * nodes of its local max-tree that hold a pixel of a border side (a side shared with another
 * tile) or are ancestors of such a node. Its nodes are numbered by increasing canonical pixel
 * index, so the same tile gives the same numbering in both passes and on every device. */
enum { TWI_MAXTREE_TOP = 0, TWI_MAXTREE_BOTTOM, TWI_MAXTREE_LEFT, TWI_MAXTREE_RIGHT };
#define TWI_MAXTREE_SIDE(s) (1u << (s))

typedef struct twi_maxtree_border {
    int64_t n;          /* nodes */
    uint16_t *level;    /* [n] */
    uint32_t *lparent;  /* [n] the local parent's number; its own for the tile's root */
    uint32_t *own;      /* [n] pixels whose nearest border-tree node (itself or an ancestor) is
                           this one: the node's area minus its border-tree children's areas */
    uint16_t *maxv;     /* [n] the highest level in the node's local subtree */
    uint32_t *side[4];  /* TWI_MAXTREE_*: the node number of every pixel of that side (w or h of
                           them), NULL when the side is not a border */
    int32_t w, h;
} twi_maxtree_border;

/* What a pass computes for each node (twi_maxtree_merge, twi_maxtree_filter). */
typedef enum twi_maxtree_rule {
    TWI_MAXTREE_AREA = 0, /* level of the nearest ancestor with area >= threshold, else vmin */
    TWI_MAXTREE_HEIGHT,   /* nearest ancestor with maxv - level(parent) >= threshold; root kept */
    TWI_MAXTREE_AREA_MAP  /* the node's area (for tests and tilewave maxtree --area) */
} twi_maxtree_rule;

typedef struct twi_maxtree_filter {
    twi_maxtree_rule rule;
    uint64_t threshold;
    uint16_t vmin;      /* level given when no ancestor survives (TWI_MAXTREE_AREA) */
} twi_maxtree_filter;

/* The border max-trees of a grid of tiles packed into one buffer for the GPU merge
 * (twi_maxtree_pack_build in omp/, twi_cuda_maxtree_merge in cuda/). Offsets are in bytes from the
 * buffer's start, so one layout describes the host buffer and its device copy. Tiles are in
 * raster order; node numbers in `lparent` and `sides` are tile-local, as in twi_maxtree_border. */
typedef struct twi_maxtree_pack {
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
} twi_maxtree_pack;

/* The argument check of twi_omp_maxtree, shared with its CUDA twin: TW_OK or TW_E_INVALID. */
tw_status twi_maxtree_check(const tw_tile_view *in, int conn, const tw_tile_view *parent);

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_MAXTREE_H */
