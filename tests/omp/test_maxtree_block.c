/* SPDX-License-Identifier: MIT */
/* tilewave tests: the border max-tree merge in blocks (twi_maxtree_merge_block,
 * twi_maxtree_resolve) against the merge of the whole grid at once (twi_maxtree_merge). */
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

/* Merge g in blocks of bx x by tiles (the last ones smaller): each block with
 * twi_maxtree_merge_block, the blocks' trees with twi_maxtree_merge, then every tile node's answer
 * resolved; the answers in twi_maxtree_merge's layout (off of the whole grid). */
static uint64_t *
merge_in_blocks(const twtest_maxtree_grid *g, int64_t bx, int64_t by, int conn,
                const twi_maxtree_filter *f, int64_t m)
{
    const int64_t nbx = (g->tx + bx - 1) / bx, nby = (g->ty + by - 1) / by, nb = nbx * nby;
    twi_maxtree_border *bt = calloc((size_t)nb, sizeof *bt), **bp = calloc((size_t)nb, sizeof *bp);
    uint64_t **res = calloc((size_t)nb, sizeof *res), *bres = NULL, *out = malloc((size_t)m * 8);
    int64_t **off = calloc((size_t)nb, sizeof *off), *boff = NULL, *goff;

    cr_assert(bt && bp && res && off && out);
    goff = malloc((size_t)(g->tx * g->ty + 1) * sizeof *goff);
    goff[0] = 0;
    for (int64_t t = 0; t < g->tx * g->ty; t++)
        goff[t + 1] = goff[t] + g->bt[t].n;
    for (int64_t b = 0; b < nb; b++) {
        int64_t x0 = (b % nbx) * bx, y0 = (b / nbx) * by;
        int64_t w = g->tx - x0 < bx ? g->tx - x0 : bx, h = g->ty - y0 < by ? g->ty - y0 : by;
        twi_maxtree_border **tiles = malloc((size_t)(w * h) * sizeof *tiles);
        unsigned sides = (y0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0u) |
                         (y0 + h < g->ty ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM) : 0u) |
                         (x0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0u) |
                         (x0 + w < g->tx ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0u);

        for (int64_t j = 0; j < h; j++)
            for (int64_t i = 0; i < w; i++)
                tiles[j * w + i] = g->bp[(y0 + j) * g->tx + x0 + i];
        cr_assert(eq(int, twi_maxtree_merge_block(tiles, w, h, sides, conn, f, &bt[b], &res[b],
                                                  &off[b]),
                     TW_OK),
                  "block %lld", (long long)b);
        cr_assert(bt[b].n > 0);
        bp[b] = &bt[b];
        free(tiles);
    }
    cr_assert(eq(int, twi_maxtree_merge(bp, nbx, nby, conn, f, &bres, &boff, NULL), TW_OK));
    for (int64_t b = 0; b < nb; b++) {
        int64_t x0 = (b % nbx) * bx, y0 = (b / nbx) * by;
        int64_t w = g->tx - x0 < bx ? g->tx - x0 : bx, h = g->ty - y0 < by ? g->ty - y0 : by;

        twi_maxtree_resolve(res[b], off[b][w * h], bres + boff[b]);
        for (int64_t j = 0; j < h; j++)
            for (int64_t i = 0; i < w; i++) {
                int64_t t = (y0 + j) * g->tx + x0 + i, lt = j * w + i;

                memcpy(out + goff[t], res[b] + off[b][lt],
                       (size_t)(off[b][lt + 1] - off[b][lt]) * 8);
            }
        twi_maxtree_border_free(&bt[b]);
        free(res[b]);
        free(off[b]);
    }
    free(bres);
    free(boff);
    free(goff);
    free(bt);
    free(bp);
    free(res);
    free(off);
    return out;
}

Test(maxtree_block, blocks_give_the_answers_of_the_whole_grid, .timeout = TWTEST_TIMEOUT(120))
{
    /* Random images (every kind, 8 and 16 bits, 4- and 8-connectivity) cut into random tile
     * grids, merged in random blocks of tiles: every tile node's answer, for the area map, the
     * area opening and the height opening at random thresholds, equals the whole grid's. */
    uint64_t rng = 0x5eed;
    int cases = 0;

    for (int it = 0; it < 300; it++) {
        tw_sample_type type = it % 3 == 2 ? TW_U16 : TW_U8;
        int conn = it % 2 ? 8 : 4;
        int32_t W = 2 + (int32_t)twtest_rnd(&rng, 60), H = 2 + (int32_t)twtest_rnd(&rng, 60);
        unsigned char *img = malloc((size_t)W * (size_t)H * 2);
        twtest_maxtree_grid g;
        int64_t m = 0;

        twtest_maxtree_random_image(&rng, img, type, W, H, it);
        g = twtest_maxtree_grid_make(&rng, img, W, H, type, conn, 0, 0, 0);
        free(img);
        if (g.tx * g.ty < 2) {
            twtest_maxtree_grid_free(&g);
            continue;
        }
        for (int64_t t = 0; t < g.tx * g.ty; t++)
            m += g.bt[t].n;
        for (int r = 0; r < 3; r++) {
            twi_maxtree_filter f = {.rule = (twi_maxtree_rule)r, .vmin = 0};
            uint64_t *flat = NULL, *blk;
            int64_t *off = NULL;
            int64_t bx = 1 + (int64_t)twtest_rnd(&rng, (uint32_t)g.tx),
                    by = 1 + (int64_t)twtest_rnd(&rng, (uint32_t)g.ty);

            /* at least two blocks */
            if (bx >= g.tx && by >= g.ty) {
                if (g.tx > 1)
                    bx = g.tx - 1;
                else
                    by = g.ty - 1;
            }
            f.threshold = r == TWI_MAXTREE_AREA ? 1 + twtest_rnd(&rng, (uint32_t)(W * H))
                          : r == TWI_MAXTREE_HEIGHT ? twtest_rnd(&rng, type == TW_U8 ? 256 : 4096)
                                               : 0;
            cr_assert(eq(int, twi_maxtree_merge(g.bp, g.tx, g.ty, conn, &f, &flat, &off, NULL),
                         TW_OK));
            blk = merge_in_blocks(&g, bx, by, conn, &f, m);
            for (int64_t i = 0; i < m; i++)
                cr_assert(eq(u64, blk[i], flat[i]),
                          "case %d rule %d: %dx%d, %lldx%lld tiles in blocks of %lldx%lld, "
                          "node %lld", it, r, W, H, (long long)g.tx, (long long)g.ty,
                          (long long)bx, (long long)by, (long long)i);
            free(flat);
            free(off);
            free(blk);
            cases++;
        }
        twtest_maxtree_grid_free(&g);
    }
    cr_assert(cases > 500, "%d cases", cases);
}

Test(maxtree_block, bad_arguments)
{
    /* No side towards another block, or a side the tiles lack: TW_E_INVALID, nothing out. */
    uint64_t rng = 7;
    unsigned char img[20 * 10];
    twtest_maxtree_grid g;
    twi_maxtree_filter f = {.rule = TWI_MAXTREE_AREA_MAP};
    twi_maxtree_border out;
    uint64_t *res = (uint64_t *)1;
    int64_t *off = (int64_t *)1;

    twtest_maxtree_random_image(&rng, img, TW_U8, 20, 10, 1);
    g = twtest_maxtree_grid_make(&rng, img, 20, 10, TW_U8, 4, 10, 10, 0);
    cr_assert(eq(i64, g.tx, 2));
    cr_assert(eq(int, twi_maxtree_merge_block(g.bp, 1, 1, 0, 4, &f, &out, &res, &off),
                 TW_E_INVALID));
    /* tile 0 has its right side only */
    cr_assert(eq(int, twi_maxtree_merge_block(g.bp, 1, 1, TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP), 4, &f,
                                              &out, &res,
                                              &off),
                 TW_E_INVALID));
    cr_assert(res == NULL && off == NULL && out.n == 0);
    twtest_maxtree_grid_free(&g);
}
