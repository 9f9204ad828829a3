/* SPDX-License-Identifier: MIT */
/* tilewave: packing a grid's border max-trees into one buffer for the GPU merge. */
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"

/*
 * One buffer, so that the BP task uploads a grid's border max-trees with one copy and the
 * kernels find every array at a byte offset that means the same on the host and the device
 * (kern/maxtree.h, twi_maxtree_pack). Arrays of 8-byte elements come first; each array
 * starts on a PACK_ALIGN boundary so that warps read whole cache lines.
 *
 * The checks are those of twi_maxtree_merge (twi_maxtree_grid_check, shared with it), plus the ones
 * the GPU cannot make on device memory: node numbers in range and local parents at a
 * lower level than their children (true of every tree twi_maxtree_border_extract makes; a broken
 * one would send the device's CONNECT out of bounds or round a cycle instead of failing).
 */
#define PACK_ALIGN ((size_t)128)

/* Reserve `bytes` at the next aligned position; 0 when the total overflows. */
static int
place(size_t *pos, size_t *at, size_t bytes)
{
    size_t p = (*pos + PACK_ALIGN - 1) / PACK_ALIGN * PACK_ALIGN;

    if (p < *pos || bytes > SIZE_MAX - p)
        return 0;
    *at = p;
    *pos = p + bytes;
    return 1;
}

static int64_t
side_len(const twi_maxtree_border *b, int s)
{
    return s <= TWI_MAXTREE_BOTTOM ? b->w : b->h;
}

tw_status
twi_maxtree_grid_check(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y,
                       int64_t *m)
{
    int64_t nt;

    if (!tiles || tiles_x < 1 || tiles_y < 1 || tiles_x > INT64_MAX / tiles_y)
        return TW_E_INVALID;
    nt = tiles_x * tiles_y;
    if ((uint64_t)nt > SIZE_MAX / (8 * sizeof(int64_t)))
        return TW_E_INVALID;
    *m = 0;
    for (int64_t t = 0; t < nt; t++)
        if (!tiles[t])
            return TW_E_INVALID;
    for (int64_t t = 0; t < nt; t++) {
        int64_t tx = t % tiles_x, ty = t / tiles_x;
        const twi_maxtree_border *b = tiles[t];

        if (b->n < 1 || (tx > 0 && !b->side[TWI_MAXTREE_LEFT]) ||
            (tx + 1 < tiles_x && !b->side[TWI_MAXTREE_RIGHT]) ||
            (ty > 0 && !b->side[TWI_MAXTREE_TOP]) ||
            (ty + 1 < tiles_y && !b->side[TWI_MAXTREE_BOTTOM]) ||
            (tx + 1 < tiles_x && tiles[t + 1]->h != b->h) ||
            (ty + 1 < tiles_y && tiles[t + tiles_x]->w != b->w))
            return TW_E_INVALID;
        *m += b->n;
        if (*m >= (int64_t)UINT32_MAX)
            return TW_E_INVALID;
    }
    return TW_OK;
}

/* What the device needs beyond twi_maxtree_merge's checks (see above). */
static tw_status
tree_check(const twi_maxtree_border *b)
{
    uint32_t n = (uint32_t)b->n;

    if (b->w < 1 || b->h < 1 || !b->level || !b->lparent || !b->own || !b->maxv)
        return TW_E_INVALID;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = b->lparent[i];

        if (p >= n || (p != i && b->level[p] >= b->level[i]))
            return TW_E_INVALID;
    }
    for (int s = 0; s < 4; s++) {
        int64_t len = side_len(b, s);

        for (int64_t k = 0; b->side[s] && k < len; k++)
            if (b->side[s][k] >= n)
                return TW_E_INVALID;
    }
    return TW_OK;
}

tw_status
twi_maxtree_pack_build(twi_maxtree_border *const *tiles, int64_t tiles_x, int64_t tiles_y,
                       twi_maxtree_pack *layout, void **buf)
{
    twi_maxtree_pack l;
    int64_t m = 0, nt, n_sides = 0, *off, *side_at;
    int32_t *dims;
    char *p = NULL;
    size_t pos = 0;
    tw_status st;

    if (!layout || !buf)
        return TW_E_INVALID;
    *buf = NULL;
    memset(layout, 0, sizeof *layout);
    if ((st = twi_maxtree_grid_check(tiles, tiles_x, tiles_y, &m)) != TW_OK)
        return st;
    nt = tiles_x * tiles_y;
    for (int64_t t = 0; t < nt; t++) {
        if ((st = tree_check(tiles[t])) != TW_OK)
            return st;
        for (int s = 0; s < 4; s++)
            if (tiles[t]->side[s])
                n_sides += side_len(tiles[t], s);
    }

    memset(&l, 0, sizeof l);
    l.tiles_x = tiles_x;
    l.tiles_y = tiles_y;
    l.n_tiles = nt;
    l.n = m;
    if (!place(&pos, &l.off_at, (size_t)(nt + 1) * sizeof(int64_t)) ||
        !place(&pos, &l.side_at, (size_t)nt * 4 * sizeof(int64_t)) ||
        !place(&pos, &l.dims_at, (size_t)nt * 2 * sizeof(int32_t)) ||
        !place(&pos, &l.lparent_at, (size_t)m * sizeof(uint32_t)) ||
        !place(&pos, &l.own_at, (size_t)m * sizeof(uint32_t)) ||
        !place(&pos, &l.sides_at, (size_t)n_sides * sizeof(uint32_t)) ||
        !place(&pos, &l.level_at, (size_t)m * sizeof(uint16_t)) ||
        !place(&pos, &l.maxv_at, (size_t)m * sizeof(uint16_t)))
        return TW_E_INVALID;
    l.bytes = (pos + PACK_ALIGN - 1) / PACK_ALIGN * PACK_ALIGN;
    /* calloc: the alignment gaps travel to the device too, so they hold zeros, not garbage */
    if (!(p = calloc(1, l.bytes)))
        return TW_E_NOMEM;
    off = (int64_t *)(void *)(p + l.off_at);
    side_at = (int64_t *)(void *)(p + l.side_at);
    dims = (int32_t *)(void *)(p + l.dims_at);
    off[0] = 0;
    n_sides = 0;
    for (int64_t t = 0; t < nt; t++) {
        const twi_maxtree_border *b = tiles[t];
        size_t o = (size_t)off[t];

        off[t + 1] = off[t] + b->n;
        dims[2 * t] = b->w;
        dims[2 * t + 1] = b->h;
        memcpy(p + l.level_at + o * sizeof(uint16_t), b->level, (size_t)b->n * sizeof(uint16_t));
        memcpy(p + l.maxv_at + o * sizeof(uint16_t), b->maxv, (size_t)b->n * sizeof(uint16_t));
        memcpy(p + l.lparent_at + o * sizeof(uint32_t), b->lparent,
               (size_t)b->n * sizeof(uint32_t));
        memcpy(p + l.own_at + o * sizeof(uint32_t), b->own, (size_t)b->n * sizeof(uint32_t));
        for (int s = 0; s < 4; s++) {
            int64_t len = side_len(b, s);

            if (!b->side[s]) {
                side_at[4 * t + s] = -1;
                continue;
            }
            side_at[4 * t + s] = n_sides;
            memcpy(p + l.sides_at + (size_t)n_sides * sizeof(uint32_t), b->side[s],
                   (size_t)len * sizeof(uint32_t));
            n_sides += len;
        }
    }
    *layout = l;
    *buf = p;
    return TW_OK;
}
