/* SPDX-License-Identifier: MIT */
/* tilewave tests: naive attribute filters by flooding every level (no max-tree involved). */
#ifndef TWTEST_FILTER_H
#define TWTEST_FILTER_H

#include <stdint.h>

#include "tilewave.h"

/* What the reference computes for each pixel. */
enum {
    TWTEST_AREA = 0, /* area opening: the highest level v <= f(p) whose component of [f >= v]
                        around p has >= thr pixels, else 0 */
    TWTEST_HEIGHT,   /* height opening: the nearest node above p (its own first) whose highest
                        level minus its parent node's level is >= thr; the root always */
    TWTEST_AREA_MAP  /* the area of p's own node (the component of [f >= f(p)] around p) */
};

/* img: packed w x h of `type` (TW_U8 / TW_U16); conn 4 or 8; closing: the same on the
 * inverted image, inverted back (not for the area map). out: packed w x h of `type`, or
 * uint64_t for TWTEST_AREA_MAP. Flood fills level by level: O(levels x pixels), small images
 * only. */
void twtest_attr_filter_naive(const void *img, tw_sample_type type, int w, int h, int conn,
                              int rule, uint64_t thr, int closing, void *out);

#endif
