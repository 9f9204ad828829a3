/* SPDX-License-Identifier: MIT */
/* tilewave tests: packing a grid's border max-trees for the GPU merge (twi_maxtree_pack_build). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"
#include "twtest_maxtree.h"

/* A tiled random image's border max-trees: tiles_x x tiles_y of them, raster order. */
typedef twtest_maxtree_grid grid;

/* The border trees of a random W x H image cut into a random grid; `extra`: sometimes give
 * tiles sides they do not need (the pack keeps every present side). */
static grid
random_grid(uint64_t *rng, int32_t W, int32_t H, tw_sample_type type, int conn, bool extra)
{
    unsigned char *img = malloc((size_t)W * (size_t)H * (type == TW_U16 ? 2 : 1));
    grid g;

    cr_assert_not_null(img);
    twtest_maxtree_random_image(rng, img, type, W, H, (int)twtest_rnd(rng, 6));
    g = twtest_maxtree_grid_make(rng, img, W, H, type, conn, 0, 0, extra ? 4 : 0);
    free(img);
    return g;
}

/* Every array of the pack against the trees it came from. */
static void
check_pack(const grid *g, const twi_maxtree_pack *l, const void *buf)
{
    const char *p = buf;
    const int64_t nt = g->tx * g->ty;
    int64_t m = 0, n_sides = 0;
    const int64_t *off = (const int64_t *)(const void *)(p + l->off_at);
    const int64_t *side_at = (const int64_t *)(const void *)(p + l->side_at);
    const int32_t *dims = (const int32_t *)(const void *)(p + l->dims_at);
    const uint16_t *level = (const uint16_t *)(const void *)(p + l->level_at);
    const uint16_t *maxv = (const uint16_t *)(const void *)(p + l->maxv_at);
    const uint32_t *lparent = (const uint32_t *)(const void *)(p + l->lparent_at);
    const uint32_t *own = (const uint32_t *)(const void *)(p + l->own_at);
    const uint32_t *sides = (const uint32_t *)(const void *)(p + l->sides_at);

    for (int64_t t = 0; t < nt; t++) {
        m += g->bt[t].n;
        for (int s = 0; s < 4; s++)
            if (g->bt[t].side[s])
                n_sides += s <= TWI_MAXTREE_BOTTOM ? g->bt[t].w : g->bt[t].h;
    }
    cr_assert(eq(i64, l->tiles_x, g->tx));
    cr_assert(eq(i64, l->tiles_y, g->ty));
    cr_assert(eq(i64, l->n_tiles, nt));
    cr_assert(eq(i64, l->n, m));
    /* the arrays: aligned to their elements, inside the buffer, not overlapping */
    {
        const size_t at[8] = {l->off_at,    l->side_at,    l->dims_at, l->level_at,
                              l->maxv_at,   l->lparent_at, l->own_at,  l->sides_at};
        const size_t len[8] = {(size_t)(nt + 1) * 8, (size_t)nt * 32,      (size_t)nt * 8,
                               (size_t)m * 2,        (size_t)m * 2,        (size_t)m * 4,
                               (size_t)m * 4,        (size_t)n_sides * 4};
        const size_t al[8] = {8, 8, 4, 2, 2, 4, 4, 4};

        for (int a = 0; a < 8; a++) {
            cr_assert(eq(sz, at[a] % al[a], 0), "array %d misaligned", a);
            cr_assert(le(sz, at[a] + len[a], l->bytes), "array %d outside the buffer", a);
            for (int b = 0; b < a; b++)
                cr_assert(at[a] + len[a] <= at[b] || at[b] + len[b] <= at[a] || !len[a] ||
                              !len[b],
                          "arrays %d and %d overlap", a, b);
        }
    }
    cr_assert(eq(i64, off[0], 0));
    n_sides = 0;
    for (int64_t t = 0; t < nt; t++) {
        const twi_maxtree_border *b = &g->bt[t];

        cr_assert(eq(i64, off[t + 1], off[t] + b->n));
        cr_assert(eq(i32, dims[2 * t], b->w));
        cr_assert(eq(i32, dims[2 * t + 1], b->h));
        for (int64_t i = 0; i < b->n; i++) {
            cr_assert(eq(u16, level[off[t] + i], b->level[i]));
            cr_assert(eq(u16, maxv[off[t] + i], b->maxv[i]));
            cr_assert(eq(u32, lparent[off[t] + i], b->lparent[i]));
            cr_assert(eq(u32, own[off[t] + i], b->own[i]));
        }
        for (int s = 0; s < 4; s++) {
            const int64_t len = s <= TWI_MAXTREE_BOTTOM ? b->w : b->h;

            if (!b->side[s]) {
                cr_assert(eq(i64, side_at[4 * t + s], -1));
                continue;
            }
            cr_assert(eq(i64, side_at[4 * t + s], n_sides), "sides are packed in turn");
            for (int64_t k = 0; k < len; k++)
                cr_assert(eq(u32, sides[n_sides + k], b->side[s][k]));
            n_sides += len;
        }
    }
}

Test(maxtree_pack, random_grids_pack_every_array)
{
    /* 400 random tilings (one-pixel tiles, 1 x N and N x 1 grids, extra sides included), 8-
     * and 16-bit, 4- and 8-connected: every array and offset of the pack equals the trees. */
    uint64_t rng = 0xC0FFEE1234ull;

    for (int k = 0; k < 400; k++) {
        const int32_t W = 1 + (int32_t)twtest_rnd(&rng, k % 8 == 7 ? 150 : 40);
        const int32_t H = 1 + (int32_t)twtest_rnd(&rng, k % 8 == 7 ? 150 : 40);
        grid g = random_grid(&rng, W, H, twtest_rnd(&rng, 2) ? TW_U16 : TW_U8,
                             twtest_rnd(&rng, 2) ? 8 : 4, true);
        twi_maxtree_pack l;
        void *buf = NULL;

        cr_assert(eq(int, twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf), TW_OK),
                  "case %d: %dx%d in %lldx%lld tiles", k, W, H, (long long)g.tx,
                  (long long)g.ty);
        cr_assert_not_null(buf);
        check_pack(&g, &l, buf);
        free(buf);
        twtest_maxtree_grid_free(&g);
    }
}

/* Pack and merge on a grid made bad on purpose: both must say TW_E_INVALID. */
static void
both_reject(twi_maxtree_border *const *tiles, int64_t tx, int64_t ty, const char *what)
{
    twi_maxtree_pack l;
    void *buf = (void *)&l;
    uint64_t *res = NULL;
    int64_t *off = NULL;
    const twi_maxtree_filter f = {TWI_MAXTREE_AREA, 3, 0};

    cr_assert(eq(int, twi_maxtree_pack_build(tiles, tx, ty, &l, &buf), TW_E_INVALID), "pack: %s",
              what);
    cr_assert_null(buf, "pack: %s leaves *buf set", what);
    cr_assert(eq(int, twi_maxtree_merge(tiles, tx, ty, 4, &f, &res, &off, NULL), TW_E_INVALID),
              "merge: %s", what);
}

Test(maxtree_pack, bad_grids_are_rejected_like_the_merge)
{
    /* The grid checks of twi_maxtree_merge: no tiles, empty grid sizes, a NULL tile, a tile with
     * no nodes, a missing border side on each of the four sides, a tile row of unequal
     * heights, a tile column of unequal widths; and NULL out-parameters. */
    uint64_t rng = 0xBADBADull;
    grid g;
    twi_maxtree_border *saved[4], *bp[4];
    twi_maxtree_pack l;
    void *buf = NULL;

    do { /* a 2 x 2 grid */
        g = random_grid(&rng, 2 + (int32_t)twtest_rnd(&rng, 20), 2 + (int32_t)twtest_rnd(&rng, 20),
                        TW_U8, 4, false);
        if (g.tx == 2 && g.ty == 2)
            break;
        twtest_maxtree_grid_free(&g);
    } while (1);
    memcpy(bp, g.bp, sizeof bp);
    memcpy(saved, g.bp, sizeof saved);
    cr_assert(eq(int, twi_maxtree_pack_build(bp, 2, 2, &l, &buf), TW_OK));
    free(buf);

    both_reject(NULL, 2, 2, "no tiles");
    both_reject(bp, 0, 2, "tiles_x 0");
    both_reject(bp, 2, 0, "tiles_y 0");
    both_reject(bp, -1, -2, "negative sizes");
    bp[3] = NULL;
    both_reject(bp, 2, 2, "a NULL tile");
    bp[3] = saved[3];
    {
        const int64_t n = g.bt[1].n;

        g.bt[1].n = 0;
        both_reject(bp, 2, 2, "a tile without nodes");
        g.bt[1].n = n;
    }
    {
        /* tile, side it must have */
        static const int need[4][2] = {
            {1, TWI_MAXTREE_LEFT}, {0, TWI_MAXTREE_RIGHT}, {2, TWI_MAXTREE_TOP},
            {0, TWI_MAXTREE_BOTTOM}};

        for (int c = 0; c < 4; c++) {
            uint32_t *s = g.bt[need[c][0]].side[need[c][1]];

            g.bt[need[c][0]].side[need[c][1]] = NULL;
            both_reject(bp, 2, 2, "a missing border side");
            g.bt[need[c][0]].side[need[c][1]] = s;
        }
    }
    g.bt[1].h++;
    both_reject(bp, 2, 2, "a tile row of unequal heights");
    g.bt[1].h--;
    g.bt[2].w++;
    both_reject(bp, 2, 2, "a tile column of unequal widths");
    g.bt[2].w--;
    cr_assert(eq(int, twi_maxtree_pack_build(bp, 2, 2, NULL, &buf), TW_E_INVALID));
    cr_assert(eq(int, twi_maxtree_pack_build(bp, 2, 2, &l, NULL), TW_E_INVALID));
    /* the grid is whole again */
    cr_assert(eq(int, twi_maxtree_pack_build(bp, 2, 2, &l, &buf), TW_OK));
    check_pack(&g, &l, buf);
    free(buf);
    twtest_maxtree_grid_free(&g);
}

Test(maxtree_pack, broken_trees_are_rejected)
{
    /* What the GPU cannot check on device memory: a local parent out of range, a local parent
     * not below its child, a side entry out of range, a tile of no pixels. */
    uint64_t rng = 0x7EE5ull;
    twi_maxtree_pack l;
    void *buf = NULL;
    grid g;
    twi_maxtree_border *b;
    int64_t t = 0;

    do {
        g = random_grid(&rng, 3 + (int32_t)twtest_rnd(&rng, 20), 3 + (int32_t)twtest_rnd(&rng, 20),
                        TW_U16, 8, false);
        for (t = 0; t < g.tx * g.ty && g.bt[t].n < 2; t++)
            ;
        if (g.tx * g.ty > 1 && t < g.tx * g.ty)
            break;
        twtest_maxtree_grid_free(&g);
    } while (1);
    b = &g.bt[t];
    for (int64_t i = 0; i < b->n; i++)
        if (b->lparent[i] != (uint32_t)i) {
            const uint32_t p = b->lparent[i];

            b->lparent[i] = (uint32_t)b->n;
            cr_assert(eq(int, twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf), TW_E_INVALID));
            b->lparent[i] = (uint32_t)i == 0 ? 1u : 0u; /* some other node, maybe not lower */
            if (b->level[b->lparent[i]] >= b->level[i])
                cr_assert(eq(int, twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf),
                             TW_E_INVALID));
            {
                const uint16_t lv = b->level[p];

                b->lparent[i] = p;
                b->level[p] = b->level[i]; /* the parent at its child's level */
                cr_assert(eq(int, twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf),
                             TW_E_INVALID));
                b->level[p] = lv;
            }
            break;
        }
    for (int s = 0; s < 4; s++)
        if (b->side[s]) {
            const uint32_t v = b->side[s][0];

            b->side[s][0] = (uint32_t)b->n;
            cr_assert(eq(int, twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf), TW_E_INVALID));
            b->side[s][0] = v;
            break;
        }
    {
        const int32_t w = b->w;

        b->w = 0;
        cr_assert(eq(int, twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf), TW_E_INVALID));
        b->w = w;
    }
    cr_assert(eq(int, twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf), TW_OK));
    check_pack(&g, &l, buf);
    free(buf);
    twtest_maxtree_grid_free(&g);
}

Test(maxtree_pack, empty_tiles_have_empty_border_trees_and_are_not_packed)
{
    /* A 5x0 or 0x5 tile with every side set: no nodes and no side pixels (nothing read out
     * of bounds), and the pack refuses a grid holding it. */
    static const int dims[2][2] = {{5, 0}, {0, 5}};

    for (int k = 0; k < 2; k++) {
        uint8_t px[1] = {0};
        uint32_t par[1] = {0};
        tw_tile_view in = {px, dims[k][0], dims[k][0], dims[k][1], 1, TW_U8, 0, 0};
        tw_tile_view pv = {par, 4 * (int64_t)dims[k][0], dims[k][0], dims[k][1], 1, TW_U32, 0, 0};
        twi_maxtree_border b, *bp = &b;
        twi_maxtree_pack l;
        void *buf = NULL;

        cr_assert(eq(int, twi_maxtree_border_extract(&in, &pv, 15, &b), TW_OK));
        cr_assert(eq(i64, b.n, 0));
        cr_assert(eq(int, twi_maxtree_pack_build(&bp, 1, 1, &l, &buf), TW_E_INVALID));
        cr_assert(buf == NULL);
        twi_maxtree_border_free(&b);
    }
}
