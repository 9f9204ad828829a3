/* SPDX-License-Identifier: MIT */
/* tilewave tests: max-tree helpers (naive reference, random images, structural check). */
#ifndef TWTEST_MAXTREE_H
#define TWTEST_MAXTREE_H

#include <stdint.h>

#include "maxtree.h"
#include "tilewave.h"

/*
 * Naive canonical max-tree, written independently of the kernels: pixels sorted by (level
 * descending, index ascending) with qsort, a plain union-find, then canonicalisation to the
 * contract form of kern/maxtree.h (the canonical pixel is the largest raster index of
 * its node, the root points to itself). img: packed w * h of TW_U8 or TW_U16; parent: w * h
 * raster indices. conn: 4 or 8. Asserts (Criterion) on allocation failure.
 */
void twtest_maxtree_naive(const void *img, tw_sample_type type, int w, int h, int conn,
                          uint64_t *parent);

/*
 * Fill img (packed w * h, TW_U8 or TW_U16) with a random test image; every mode is valid for
 * both types:
 *   0 uniform noise over the type's full range,  1 few levels (0..3),
 *   2 plateaus (random rectangles of constant level on few levels),
 *   3 smooth-ish (a random walk along rows, blended with the row above),
 *   4 many levels (16-bit: noise over 0..4095 plus a ramp; 8-bit: the full range),
 *   5 extremes (only 0 and the type's maximum).
 * Modes outside 0..5 are taken modulo 6.
 */
void twtest_maxtree_random_image(uint64_t *rng, void *img, tw_sample_type type, int w, int h,
                            int mode);

/* Fill img (packed w * h, TW_U8 or TW_U16) with a natural-like image: smooth waves at four
 * scales, a gentle slope and fine noise over the type's whole range (large flat levels in 8
 * bits, nearly all levels distinct in 16). */
void twtest_maxtree_natural_image(uint64_t *rng, void *img, tw_sample_type type, int w, int h);

/*
 * Structural check of a parent image against the contract: indices in range,
 * f(parent(p)) <= f(p), parent(p) < p in the total order for every non-root pixel (level, then
 * larger index first), parents canonical, exactly one root and at the minimum level (the
 * strict order makes the graph acyclic). Returns NULL if OK, else a static message.
 */
const char *twtest_maxtree_check(const void *img, tw_sample_type type, int w, int h, int conn,
                                 const uint64_t *parent);

/* Cut positions of a side of `len` pixels into tiles of `t` pixels (the last one smaller), or,
 * with t <= 0, by a random scheme (regular, random cuts, one-pixel tiles, one tile):
 * 0 = c[0] < c[1] < ... < c[*k] = len. malloc'ed. */
int32_t *twtest_maxtree_cuts(uint64_t *rng, int32_t len, int32_t t, int64_t *k);

/* The border max-trees of an image cut into a grid of tiles (the tests of the BP merge). */
typedef struct twtest_maxtree_grid {
    int64_t tx, ty;         /* tiles across and down */
    twi_maxtree_border *bt;      /* [tx * ty] border max-trees, raster order */
    twi_maxtree_border **bp;     /* [tx * ty] pointers to them, as twi_maxtree_merge takes them */
    uint32_t maxv;          /* the type's largest level */
    int64_t pixels;         /* of the image */
} twtest_maxtree_grid;

/* img (packed W x H, TW_U8 / TW_U16) cut into tw x th tiles (0: random cuts, per side); each
 * tile's tree by twi_omp_maxtree, its border max-tree by twi_maxtree_border_extract with the sides
 * towards its neighbours (a lone tile gets one random side, so that it has nodes) and, when
 * extra_one_in > 0, one time in extra_one_in random sides it does not need. */
twtest_maxtree_grid twtest_maxtree_grid_make(uint64_t *rng, const void *img, int32_t W, int32_t H,
                                   tw_sample_type type, int conn, int32_t tw, int32_t th,
                                   int extra_one_in);
void twtest_maxtree_grid_free(twtest_maxtree_grid *g);

#endif /* TWTEST_MAXTREE_H */
