/* SPDX-License-Identifier: MIT */
/* tilewave tests: the OpenMP labelling kernel and the border-label merge against a naive
 * flood fill. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"
#include "twtest_label.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* Label a packed mask with the kernel (threads nt) into a padded TW_U32 view. */
static int64_t
kernel_label(const uint8_t *mask, int w, int h, int conn, int nt, uint32_t *out)
{
    tw_tile_view mv = {(void *)mask, w, w, h, 1, TW_U8, 0, 0};
    int64_t stride = w + 3;
    uint32_t *buf = malloc((size_t)(stride * h + 1) * 4), *par = malloc((size_t)(w * h + 1) * 4);
    tw_tile_view lv = {buf, stride * 4, w, h, 1, TW_U32, 0, 0};
    int64_t n = -1;

    cr_assert(eq(int, twi_omp_label(&mv, conn, &lv, par, &n, nt), TW_OK));
    for (int y = 0; y < h; y++)
        memcpy(out + (int64_t)y * w, buf + y * stride, (size_t)w * 4);
    free(buf);
    free(par);
    return n;
}

/* Every mask kind, both connectivities, 1 to 4 threads: the kernel's labels equal the flood
 * fill's, numbered in raster order of first pixels, with the same count. */
Test(label_omp, equals_flood_fill)
{
    static const int sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {2, 2}, {17, 5}, {40, 64},
                                   {64, 40}, {131, 97}, {300, 70}};

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int mode = 0; mode < 5; mode++)
            for (int conn = 4; conn <= 8; conn += 4) {
                int w = sizes[s][0], h = sizes[s][1];
                uint8_t *m = malloc((size_t)(w * h));
                uint64_t *want = malloc((size_t)(w * h) * 8), nw;
                uint32_t *got = malloc((size_t)(w * h) * 4);

                twtest_label_mask(m, w, h, mode, 30 + 10 * (int)s, &rng);
                nw = twtest_label_naive(m, w, h, conn, want);
                for (int nt = 1; nt <= 4; nt++) {
                    int64_t n = kernel_label(m, w, h, conn, nt, got);

                    cr_assert(eq(i64, n, (int64_t)nw), "%dx%d mode %d conn %d nt %d", w, h,
                              mode, conn, nt);
                    for (int64_t i = 0; i < (int64_t)w * h; i++)
                        cr_assert(eq(u64, got[i], want[i]),
                                  "%dx%d mode %d conn %d nt %d pixel %lld", w, h, mode, conn,
                                  nt, (long long)i);
                }
                free(m);
                free(want);
                free(got);
            }
}

/* Pass 1's border labels made from a summary (first pixels and side labels, what the GPU sends
 * back) are those taken from the labels themselves, for any set of sides; a summary that
 * breaks the numbering, or names a label above n, is refused. */
Test(label_omp, border_from_first_equals_extract)
{
    static const int sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {2, 2}, {17, 5}, {131, 97}};
    static const unsigned side_sets[] = {0, 15, 1, 2, 4, 8, 5, 10};

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int mode = 0; mode < 5; mode++)
            for (int conn = 4; conn <= 8; conn += 4) {
                int w = sizes[s][0], h = sizes[s][1];
                uint8_t *m = malloc((size_t)(w * h));
                uint32_t *lab = malloc((size_t)(w * h) * 4);
                int64_t n;
                uint32_t *sum;
                tw_tile_view lv = {lab, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};

                twtest_label_mask(m, w, h, mode, 40, &rng);
                n = kernel_label(m, w, h, conn, 2, lab);
                sum = malloc((size_t)(n + 1 + 2 * (w + h)) * 4);
                twtest_label_summary(lab, w, h, n, sum);
                for (size_t k = 0; k < sizeof side_sets / sizeof side_sets[0]; k++) {
                    twi_label_border a, b;
                    char why[160] = "";

                    cr_assert(eq(int, twi_label_border_extract(&lv, n, side_sets[k], &a), TW_OK));
                    cr_assert(eq(int, twi_label_border_from_first(w, h, n, side_sets[k], sum,
                                                                  sum + n + 1, &b), TW_OK));
                    cr_assert(eq(int, twtest_label_border_diff(&a, &b, why, sizeof why), 0),
                              "%dx%d mode %d conn %d sides %u: %s", w, h, mode, conn,
                              side_sets[k], why);
                    twi_label_border_free(&a);
                    twi_label_border_free(&b);
                }
                if (n >= 2) {
                    twi_label_border b;
                    uint32_t keep = sum[1];

                    sum[1] = sum[2]; /* not increasing */
                    cr_assert(eq(int, twi_label_border_from_first(w, h, n, 15, sum, sum + n + 1,
                                                                  &b), TW_E_INVALID));
                    sum[1] = keep;
                    sum[0] = 0; /* the GPU met a label above n */
                    cr_assert(eq(int, twi_label_border_from_first(w, h, n, 15, sum, sum + n + 1,
                                                                  &b), TW_E_INVALID));
                    sum[0] = UINT32_MAX;
                    keep = sum[n + 1];
                    sum[n + 1] = (uint32_t)n + 1; /* a side label above n */
                    cr_assert(eq(int, twi_label_border_from_first(w, h, n, 1, sum, sum + n + 1,
                                                                  &b), TW_E_INVALID));
                    sum[n + 1] = keep;
                    sum[n] = (uint32_t)(w * h); /* outside the tile */
                    cr_assert(eq(int, twi_label_border_from_first(w, h, n, 15, sum, sum + n + 1,
                                                                  &b), TW_E_INVALID));
                }
                free(sum);
                free(m);
                free(lab);
            }
}

/* The kernel refuses what breaks its contract. */
Test(label_omp, rejects_bad_views)
{
    uint8_t m[4] = {1, 0, 0, 1};
    uint32_t l[4], par[4];
    tw_tile_view mv = {m, 2, 2, 2, 1, TW_U8, 0, 0}, lv = {l, 8, 2, 2, 1, TW_U32, 0, 0};
    tw_tile_view bad = lv;
    int64_t n;

    cr_assert(eq(int, twi_omp_label(&mv, 6, &lv, par, &n, 1), TW_E_INVALID));
    bad.type = TW_U16;
    cr_assert(eq(int, twi_omp_label(&mv, 4, &bad, par, &n, 1), TW_E_INVALID));
    bad = lv;
    bad.w = 1;
    cr_assert(eq(int, twi_omp_label(&mv, 4, &bad, par, &n, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_label(&mv, 4, &lv, NULL, &n, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_label(&mv, 8, &lv, par, &n, 1), TW_OK));
    cr_assert(eq(i64, n, 1));
    cr_assert(eq(int, twi_omp_label(&mv, 4, &lv, par, &n, 1), TW_OK));
    cr_assert(eq(i64, n, 2));
}

/* The whole cross-tile path without the runtime: label every tile of a grid, extract its
 * border labels, merge, map and apply; the assembled image equals the flood fill of the whole
 * mask for tile sizes down to 1x1 and both connectivities. */
Test(label_omp, tiles_merged_equal_whole_image)
{
    for (int it = 0; it < 120; it++) {
        int w = 1 + (int)twtest_rnd(&rng, 40), h = 1 + (int)twtest_rnd(&rng, 40);
        int tw = 1 + (int)twtest_rnd(&rng, (uint32_t)w + 1),
            th = 1 + (int)twtest_rnd(&rng, (uint32_t)h + 1);
        int conn = it % 2 ? 8 : 4, mode = it % 5;
        int64_t tx_n, ty_n, nt;
        uint8_t *m = malloc((size_t)(w * h));
        uint64_t *want = malloc((size_t)(w * h) * 8), *got = calloc((size_t)(w * h), 8), nw;
        twi_label_border *bs, **bp;
        twi_label_merged mg;

        if (it % 7 == 0)
            tw = th = 1;
        tx_n = (w + tw - 1) / tw;
        ty_n = (h + th - 1) / th;
        nt = tx_n * ty_n;
        bs = calloc((size_t)nt, sizeof *bs);
        bp = calloc((size_t)nt, sizeof *bp);
        twtest_label_mask(m, w, h, mode, 45, &rng);
        nw = twtest_label_naive(m, w, h, conn, want);
        for (int pass = 1; pass <= 2; pass++) {
            if (pass == 2)
                cr_assert(eq(int, twi_label_merge(bp, tx_n, ty_n, tw, th, w, conn, &mg), TW_OK));
            for (int64_t t = 0; t < nt; t++) {
                int x0 = (int)(t % tx_n) * tw, y0 = (int)(t / tx_n) * th;
                int cw = w - x0 < tw ? w - x0 : tw, ch = h - y0 < th ? h - y0 : th;
                tw_tile_view mv = {m + (int64_t)y0 * w + x0, w, cw, ch, 1, TW_U8, 0, 0};
                uint32_t *lab = malloc((size_t)(cw * ch) * 4), *par = malloc((size_t)(cw * ch) * 4);
                uint64_t *out = malloc((size_t)(cw * ch) * 8);
                tw_tile_view lv = {lab, cw * 4, cw, ch, 1, TW_U32, 0, 0};
                tw_tile_view ov = {out, cw * 8, cw, ch, 1, TW_U64, 0, 0};
                unsigned sides = (y0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0u) |
                                 (y0 + ch < h ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM) : 0u) |
                                 (x0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0u) |
                                 (x0 + cw < w ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0u);
                int64_t n;

                cr_assert(eq(int, twi_omp_label(&mv, conn, &lv, par, &n, 2), TW_OK));
                if (pass == 1) {
                    cr_assert(eq(int, twi_label_border_extract(&lv, n, sides, &bs[t]), TW_OK));
                    bp[t] = &bs[t];
                } else {
                    uint64_t *map = malloc((size_t)(n + 1) * 8);

                    cr_assert(eq(int, twi_label_map(&bs[t], &mg, t, y0, map), TW_OK));
                    cr_assert(eq(int, twi_omp_label_apply(&lv, map, &ov, 1), TW_OK));
                    for (int y = 0; y < ch; y++)
                        memcpy(got + (int64_t)(y0 + y) * w + x0, out + (int64_t)y * cw,
                               (size_t)cw * 8);
                    free(map);
                }
                free(lab);
                free(par);
                free(out);
            }
        }
        cr_assert(eq(u64, mg.total, nw), "case %d %dx%d tiles %dx%d conn %d", it, w, h, tw, th,
                  conn);
        for (int64_t i = 0; i < (int64_t)w * h; i++)
            cr_assert(eq(u64, got[i], want[i]), "case %d %dx%d tiles %dx%d conn %d pixel %lld",
                      it, w, h, tw, th, conn, (long long)i);
        twi_label_merged_free(&mg);
        for (int64_t t = 0; t < nt; t++)
            twi_label_border_free(&bs[t]);
        free(bs);
        free(bp);
        free(m);
        free(want);
        free(got);
    }
}
