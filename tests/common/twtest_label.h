/* SPDX-License-Identifier: MIT */
/* tilewave tests: the naive connected-component reference (flood fill). */
#ifndef TWTEST_LABEL_H
#define TWTEST_LABEL_H

#include <stddef.h>
#include <stdint.h>

/* Labels of the nonzero pixels of the packed w x h mask (bytes) into out (w * h), 4- or
 * 8-connected, by flood fill from each unlabelled foreground pixel met in raster order: 1, 2,
 * ... in raster order of each component's first pixel, 0 background. Returns the count. */
uint64_t twtest_label_naive(const uint8_t *mask, int w, int h, int conn, uint64_t *out);
/* A random mask: mode 0 noise of density p/100; 1 blobs (discs); 2 stripes and rings that
 * wind across the image; 3 all foreground; 4 all background. */
void twtest_label_mask(uint8_t *mask, int w, int h, int mode, int p, uint64_t *rng);

/* The border summary twi_cuda_label_summary leaves, made naively from packed 32-bit labels
 * 1..n: out[0] = UINT32_MAX, out[l] = label l's first raster index, then the labels of the
 * top, bottom, left and right sides (w, w, h, h of them); n + 1 + 2 (w + h) words. */
void twtest_label_summary(const uint32_t *labels, int w, int h, int64_t n, uint32_t *out);
/* 0 when the two border-label sets (kern/label.h's twi_label_border) are the same; else 1,
 * with what differs in why[n]. */
struct twi_label_border;
int twtest_label_border_diff(const struct twi_label_border *a, const struct twi_label_border *b,
                             char *why, size_t n);

#endif
