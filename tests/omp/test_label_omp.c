/* SPDX-License-Identifier: MIT */
/* tilewave tests: the pixel labelling kernel (the GPU kernel's CPU twin) against a naive flood
 * fill, and border labels from a summary against those from the labels (the merge across
 * tiles, by runs and by pixels: tests/omp/test_label_runs.c). */
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
