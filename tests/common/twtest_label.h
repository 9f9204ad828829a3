/* SPDX-License-Identifier: MIT */
/* tilewave tests: the naive connected-component reference (flood fill). */
#ifndef TWTEST_LABEL_H
#define TWTEST_LABEL_H

#include <stdint.h>

/* Labels of the nonzero pixels of the packed w x h mask (bytes) into out (w * h), 4- or
 * 8-connected, by flood fill from each unlabelled foreground pixel met in raster order: 1, 2,
 * ... in raster order of each component's first pixel, 0 background. Returns the count. */
uint64_t twtest_label_naive(const uint8_t *mask, int w, int h, int conn, uint64_t *out);
/* A random mask: mode 0 noise of density p/100; 1 blobs (discs); 2 stripes and rings that
 * wind across the image; 3 all foreground; 4 all background. */
void twtest_label_mask(uint8_t *mask, int w, int h, int mode, int p, uint64_t *rng);

#endif
