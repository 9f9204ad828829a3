/* SPDX-License-Identifier: MIT */
/* tilewave: the watershed kernels' contract: flooding keys, the tile's arrays, the halo ring
 * and the neighbour order that the kernels and their driver share (valid C and C++). */
#ifndef TWI_KERN_WATERSHED_H
#define TWI_KERN_WATERSHED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * watershed: marker-controlled watershed inside one tile (ops/watershed.c drives the tiles;
 * docs/watershed.md states the rule). Every pixel p has a sortable level lev(p) (u32) and a
 * flooding key
 *     key(p) = (L(p) << 32) | D(p)
 * the smallest, in that order, over the paths from a marker pixel to p inside the mask of the
 * path cost: L = the highest level on the path, D = the steps since the path last rose to a
 * new highest level (a marker pixel: (lev, 0)). One step from q to p: twi_watershed_step(key(q),
 * lev(p)). Unreached and masked-out pixels keep TWI_WATERSHED_KINF. Labels: a marker pixel keeps
 * its own; any other reached pixel takes the smallest label among its "best predecessors", the
 * neighbours q with twi_watershed_step(key(q), lev(p)) == key(p) whose key is the lowest of those.
 *
 * The tile's arrays are tile-raster (y * w + x). Neighbours outside the tile reach the kernels
 * only through a halo ring (twi_watershed_ring) that the driver fills from the adjacent tiles: the
 * row above (w + 2 entries, x = -1 .. w), the row below (w + 2), the column left (h entries),
 * the column right (h); outside the image: TWI_WATERSHED_KINF keys and TWI_WATERSHED_LINF labels.
 */
#define TWI_WATERSHED_KINF UINT64_MAX
#define TWI_WATERSHED_LINF UINT32_MAX

typedef struct twi_watershed_tile {
    int32_t w, h;
    const uint32_t *lev; /* [w h] sortable levels */
    const uint8_t *in;   /* [w h] 1: inside the mask */
    uint64_t *key;       /* [w h] flooding keys (RW) */
    uint32_t *lab;       /* [w h] labels, TWI_WATERSHED_LINF: none yet (RW) */
    uint8_t *pred;       /* [w h] bit k: neighbour k (twi_watershed_dx/dy) is a best predecessor */
} twi_watershed_tile;

typedef struct twi_watershed_ring {
    uint64_t *key; /* [2 (w + 2) + 2 h]: above, below, left, right */
    uint32_t *lab; /* same layout; NULL where the kernel reads keys only */
} twi_watershed_ring;

/* Neighbour k of a pixel: (dx, dy) = (twi_watershed_dx[k], twi_watershed_dy[k]); k < 4 are the
 * 4-neighbours, k < 8 the 8-neighbours; neighbour k of p sees p as neighbour k ^ 1. */
extern const int twi_watershed_dx[8], twi_watershed_dy[8];

/* The key of p reached from a neighbour of key kq (< TWI_WATERSHED_KINF), lev(p) = lp. */
static inline uint64_t
twi_watershed_step(uint64_t kq, uint32_t lp)
{
    return (uint64_t)lp > (kq >> 32) ? ((uint64_t)lp << 32) | 1u : kq + 1u;
}

/* Ring index of (x, y), x in [-1, w], y in [-1, h], outside the tile. */
static inline int64_t
twi_watershed_ring_at(int32_t w, int32_t h, int32_t x, int32_t y)
{
    if (y < 0)
        return x + 1;
    if (y >= h)
        return (int64_t)w + 2 + x + 1;
    return 2 * ((int64_t)w + 2) + (x < 0 ? y : (int64_t)h + y);
}

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_WATERSHED_H */
