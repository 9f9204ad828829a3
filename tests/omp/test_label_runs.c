/* SPDX-License-Identifier: MIT */
/* tilewave tests: the run labeller (omp/label_runs.c) against the naive flood fill, and its
 * border labels and mapped writes against the pixel kernel's (twi_label_border_extract,
 * twi_omp_label_apply). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"
#include "twtest_label.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* A mask view of the packed bytes m in a padded buffer of type u8 or u16 (nonzero values
 * vary: 1..255 or up to 65535), its rows `pad` samples apart beyond w. */
static tw_tile_view
mask_view(const uint8_t *m, int w, int h, int wide, int pad, void **buf)
{
    int64_t stride = (int64_t)(w + pad) * (wide ? 2 : 1);
    char *b = malloc((size_t)(stride * h + 8));

    memset(b, 0x5a, (size_t)(stride * h + 8)); /* padding is not foreground to read */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t v = m[(int64_t)y * w + x];

            if (wide)
                ((uint16_t *)(void *)(b + y * stride))[x] = v ? (uint16_t)(v * 257u) : 0;
            else
                ((uint8_t *)(b + y * stride))[x] = v;
        }
    *buf = b;
    return (tw_tile_view){b, stride, w, h, 1, wide ? TW_U16 : TW_U8, 0, 0};
}

/* Nonzero bytes of random values (the kernels test != 0, not == 1). */
static void
scramble(uint8_t *m, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (m[i])
            m[i] = (uint8_t)(1 + twtest_rnd(&rng, 255));
}

/* Every mask kind and size, u8 and u16, padded rows, both connectivities, 1 to 4 threads: the
 * written labels equal the flood fill's, with the same count. */
Test(label_runs, equals_flood_fill)
{
    static const int sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {2, 2}, {7, 3}, {8, 8}, {17, 5},
                                   {33, 40}, {64, 40}, {131, 97}, {300, 70}};

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int mode = 0; mode < 6; mode++)
            for (int conn = 4; conn <= 8; conn += 4) {
                int w = sizes[s][0], h = sizes[s][1], wide = (int)(s + mode) % 2;
                uint8_t *m = malloc((size_t)(w * h));
                uint64_t *want = malloc((size_t)(w * h) * 8), nw;
                uint32_t *got = malloc((size_t)((w + 5) * h) * 4);
                void *buf, *sc = malloc(twi_label_runs_scratch(w, h));
                tw_tile_view mv, lv = {got, (int64_t)(w + 5) * 4, w, h, 1, TW_U32, 0, 0};

                if (mode == 5) { /* a checkerboard: the most runs a row can hold */
                    for (int64_t i = 0; i < (int64_t)w * h; i++)
                        m[i] = (uint8_t)((i % w + i / w) % 2 == 0);
                } else {
                    twtest_label_mask(m, w, h, mode, 30 + 10 * (int)s, &rng);
                }
                scramble(m, (int64_t)w * h);
                nw = twtest_label_naive(m, w, h, conn, want);
                mv = mask_view(m, w, h, wide, (int)s % 3, &buf);
                for (int nt = 1; nt <= 4; nt++) {
                    twi_label_runs r;

                    cr_assert(eq(int, twi_omp_label_runs(&mv, conn, sc, &r, nt), TW_OK));
                    cr_assert(eq(i64, r.n, (int64_t)nw), "%dx%d mode %d conn %d nt %d", w, h,
                              mode, conn, nt);
                    cr_assert(eq(int, twi_label_runs_write(&r, NULL, &lv, nt), TW_OK));
                    for (int y = 0; y < h; y++)
                        for (int x = 0; x < w; x++)
                            cr_assert(eq(u64, got[(int64_t)y * (w + 5) + x],
                                         want[(int64_t)y * w + x]),
                                      "%dx%d mode %d conn %d nt %d wide %d (%d,%d)", w, h, mode,
                                      conn, nt, wide, x, y);
                }
                free(buf);
                free(sc);
                free(m);
                free(want);
                free(got);
            }
}

/* The whole cross-tile path, by runs and by pixels: each tile's border labels from its runs
 * are those the pixel kernel's labels give (twi_label_border_extract), for several sets of
 * sides; after the merge, the runs written through each tile's map are the bytes of the pixel
 * kernel's labels through it (twi_omp_label_apply), and the assembled image equals the flood
 * fill of the whole mask, in u32 and u64, for tile sizes down to 1x1. */
Test(label_runs, tiles_merged_equal_whole_image)
{
    for (int it = 0; it < 160; it++) {
        int w = 1 + (int)twtest_rnd(&rng, 48), h = 1 + (int)twtest_rnd(&rng, 48);
        int tw = 1 + (int)twtest_rnd(&rng, (uint32_t)w + 1),
            th = 1 + (int)twtest_rnd(&rng, (uint32_t)h + 1);
        int conn = it % 2 ? 8 : 4, mode = it % 5, u64out = it % 3 == 0;
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
                unsigned sides = (y0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0u) |
                                 (y0 + ch < h ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM) : 0u) |
                                 (x0 > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0u) |
                                 (x0 + cw < w ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0u);
                void *sc = malloc(twi_label_runs_scratch(cw, ch));
                twi_label_runs r;

                cr_assert(eq(int, twi_omp_label_runs(&mv, conn, sc, &r, 1 + (int)(t % 3)),
                             TW_OK));
                if (pass == 1) {
                    uint32_t *lab = malloc((size_t)(cw * ch) * 4),
                             *par = malloc((size_t)(cw * ch) * 4);
                    tw_tile_view lv = {lab, cw * 4, cw, ch, 1, TW_U32, 0, 0};
                    twi_label_border a;
                    int64_t n;
                    char why[160] = "";

                    cr_assert(eq(int, twi_omp_label(&mv, conn, &lv, par, &n, 1), TW_OK));
                    cr_assert(eq(i64, r.n, n));
                    for (unsigned k = 0; k < 16; k += 5) { /* sides 0, 5, 10, 15 */
                        cr_assert(eq(int, twi_label_border_extract(&lv, n, k, &a), TW_OK));
                        cr_assert(eq(int, twi_label_runs_border(&r, k, &bs[t]), TW_OK));
                        cr_assert(eq(int, twtest_label_border_diff(&a, &bs[t], why, sizeof why),
                                     0),
                                  "case %d tile %lld sides %u: %s", it, (long long)t, k, why);
                        twi_label_border_free(&a);
                        twi_label_border_free(&bs[t]);
                    }
                    cr_assert(eq(int, twi_label_runs_border(&r, sides, &bs[t]), TW_OK));
                    bp[t] = &bs[t];
                    free(lab);
                    free(par);
                } else {
                    uint64_t *map = malloc((size_t)(r.n + 1) * 8),
                             *out = malloc((size_t)(cw * ch) * 8);
                    tw_tile_view ov = {out, cw * (u64out ? 8 : 4), cw, ch, 1,
                                       u64out ? TW_U64 : TW_U32, 0, 0};

                    cr_assert(eq(int, twi_label_map(&bs[t], &mg, t, y0, map), TW_OK));
                    cr_assert(eq(int, twi_label_runs_write(&r, map, &ov, 2), TW_OK));
                    { /* the pixel kernel's labels through the same map: the same bytes */
                        uint32_t *lab = malloc((size_t)(cw * ch) * 4),
                                 *par = malloc((size_t)(cw * ch) * 4);
                        uint64_t *px = malloc((size_t)(cw * ch) * 8);
                        tw_tile_view lv = {lab, cw * 4, cw, ch, 1, TW_U32, 0, 0},
                                     pv = {px, ov.stride, cw, ch, 1, ov.type, 0, 0};
                        int64_t n;

                        cr_assert(eq(int, twi_omp_label(&mv, conn, &lv, par, &n, 2), TW_OK));
                        cr_assert(eq(int, twi_omp_label_apply(&lv, map, &pv, 1), TW_OK));
                        cr_assert(eq(int, memcmp(px, out, (size_t)(ch * ov.stride)), 0),
                                  "case %d tile %lld", it, (long long)t);
                        free(lab);
                        free(par);
                        free(px);
                    }
                    for (int y = 0; y < ch; y++)
                        for (int x = 0; x < cw; x++)
                            got[(int64_t)(y0 + y) * w + x0 + x] =
                                u64out ? out[(int64_t)y * cw + x]
                                       : ((uint32_t *)out)[(int64_t)y * cw + x];
                    free(map);
                    free(out);
                }
                free(sc);
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

/* What breaks the contract is refused: bad views, connectivity, a NULL scratch, a write into
 * a view of another size or type, u64 without a map. An empty tile has no runs. */
Test(label_runs, rejects_bad_arguments)
{
    uint8_t m[4] = {1, 0, 0, 1};
    uint32_t l[4];
    uint64_t map[3] = {0, 7, 9};
    char sc[256];
    tw_tile_view mv = {m, 2, 2, 2, 1, TW_U8, 0, 0}, lv = {l, 8, 2, 2, 1, TW_U32, 0, 0};
    tw_tile_view bad = mv;
    twi_label_runs r;

    cr_assert(eq(sz, twi_label_runs_scratch(2, 2) <= sizeof sc, 1));
    cr_assert(eq(int, twi_omp_label_runs(&mv, 6, sc, &r, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_label_runs(&mv, 4, NULL, &r, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_label_runs(&mv, 4, sc, NULL, 1), TW_E_INVALID));
    bad.type = TW_U32;
    cr_assert(eq(int, twi_omp_label_runs(&bad, 4, sc, &r, 1), TW_E_INVALID));
    bad = mv;
    bad.channels = 2;
    cr_assert(eq(int, twi_omp_label_runs(&bad, 4, sc, &r, 1), TW_E_INVALID));
    bad = mv;
    bad.stride = 1;
    cr_assert(eq(int, twi_omp_label_runs(&bad, 4, sc, &r, 1), TW_E_INVALID));
    bad = mv;
    bad.w = bad.h = 0;
    cr_assert(eq(int, twi_omp_label_runs(&bad, 4, NULL, &r, 1), TW_OK));
    cr_assert(eq(i64, r.n, 0));

    cr_assert(eq(int, twi_omp_label_runs(&mv, 4, sc, &r, 1), TW_OK));
    cr_assert(eq(i64, r.n, 2));
    cr_assert(eq(int, twi_omp_label_runs(&mv, 8, sc, &r, 3), TW_OK));
    cr_assert(eq(i64, r.n, 1));
    bad = lv;
    bad.w = 1;
    cr_assert(eq(int, twi_label_runs_write(&r, NULL, &bad, 1), TW_E_INVALID));
    bad = lv;
    bad.type = TW_U64;
    bad.stride = 16;
    cr_assert(eq(int, twi_label_runs_write(&r, NULL, &bad, 1), TW_E_INVALID));
    bad = lv;
    bad.type = TW_U16;
    cr_assert(eq(int, twi_label_runs_write(&r, map, &bad, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_label_runs_write(&r, map, &lv, 1), TW_OK));
    cr_assert(eq(u32, l[0], 7));
    cr_assert(eq(u32, l[1], 0));
    cr_assert(eq(u32, l[2], 0));
    cr_assert(eq(u32, l[3], 7));
}

/* Views the pixel kernel refuses are refused here too (twi_view_fits with the sample size, as
 * twi_label_check): a u16 mask at an odd address or with an odd stride (its samples would be
 * read misaligned), a u64 output at 4 mod 8. */
Test(label_runs, rejects_misaligned_views)
{
    uint64_t mbuf[8] = {0}, obuf[16] = {0}, map[4] = {0, 5, 6, 7};
    char *mb = (char *)mbuf;
    char sc[1024];
    twi_label_runs r;
    tw_tile_view mv = {mb + 1, 8, 3, 2, 1, TW_U16, 0, 0}, ok = {mb, 8, 3, 2, 1, TW_U16, 0, 0};
    tw_tile_view ov = {(char *)obuf + 4, 24, 3, 2, 1, TW_U64, 0, 0};

    mb[2] = 1;
    cr_assert(eq(sz, twi_label_runs_scratch(3, 2) <= sizeof sc, 1));
    cr_assert(eq(int, twi_omp_label_runs(&mv, 4, sc, &r, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_label_runs_alloc(&mv, 4, &r, 1, NULL), TW_E_INVALID));
    mv.data = mb;
    mv.stride = 7;
    cr_assert(eq(int, twi_omp_label_runs(&mv, 4, sc, &r, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_label_runs(&ok, 4, sc, &r, 1), TW_OK));
    cr_assert(eq(i64, r.n, 1));
    cr_assert(eq(int, twi_label_runs_write(&r, map, &ov, 1), TW_E_INVALID));
    ov.data = obuf;
    cr_assert(eq(int, twi_label_runs_write(&r, map, &ov, 1), TW_OK));
    cr_assert(eq(u64, obuf[1], 5));
}

/* A row of 2^31 - 1 pixels (the widest view; w * h < 2^32 - 1): its 64-pixel blocks are
 * counted without overflowing int32 (the last block starts at 2^31 - 64). The mask and the
 * scratch are sparse mappings: untouched pages cost nothing (the zero page when read). */
Test(label_runs, widest_row)
{
    const int32_t w = INT32_MAX;
    size_t sb = twi_label_runs_scratch(w, 1);
    char *m = mmap(NULL, (size_t)w, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *sc = mmap(NULL, sb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
    tw_tile_view mv = {m, w, w, 1, 1, TW_U8, 0, 0};
    twi_label_runs r;

    if (m == MAP_FAILED || sc == MAP_FAILED) {
        if (m != MAP_FAILED)
            munmap(m, (size_t)w);
        if (sc != MAP_FAILED)
            munmap(sc, sb);
        cr_skip_test("no sparse mapping of %zu bytes", sb);
    }
    /* runs at 2^31 - 70 (one pixel), 2^31 - 66 .. 2^31 - 63 (across the last block's start),
     * and the last pixel: the one row's components are its runs */
    m[w - 70] = 1;
    m[w - 66] = m[w - 65] = m[w - 64] = m[w - 63] = 9;
    m[w - 1] = 1;
    cr_assert(eq(int, twi_omp_label_runs(&mv, 8, sc, &r, 2), TW_OK));
    cr_assert(eq(i64, r.n, 3));
    cr_assert(eq(u32, r.re[0] - r.rs[0], 3));
    cr_assert(eq(u32, r.run[4 * (r.rs[0] + 1)], (uint32_t)w - 66));
    cr_assert(eq(u32, r.run[4 * (r.rs[0] + 1) + 1], (uint32_t)w - 62));
    cr_assert(eq(u32, r.run[4 * (r.rs[0] + 2) + 1], (uint32_t)w));
    cr_assert(eq(u32, r.run[4 * (r.rs[0] + 2) + 3], 3));
    /* the same from the mask's bits (256 MiB of them: a bit a pixel) */
    cr_assert(eq(int, twi_omp_label_runs_alloc(&mv, 4, &r, 2, NULL), TW_OK));
    cr_assert(eq(i64, r.n, 3));
    cr_assert(eq(u32, r.run[4 * 1 + 1], (uint32_t)w - 62));
    cr_assert(eq(u32, r.run[4 * 2 + 1], (uint32_t)w));
    twi_label_runs_free(&r);
    munmap(sc, sb);
    munmap(m, (size_t)w);
}

/* A stop hook that says stop after `left` questions (asked by the team's threads). */
static bool
stop_after(const void *user)
{
    atomic_int *left = (atomic_int *)(uintptr_t)user;

    return atomic_fetch_sub(left, 1) <= 0;
}

/* The whole-image maker asks its stop hook before each chunk of rows: never stopped, the runs
 * of twi_omp_label_runs; stopped at once or after any number of questions short of all of
 * them (in the first read or the second), TW_E_CANCELED with r empty (nothing leaked, under
 * ASan). */
Test(label_runs, alloc_stops_when_asked)
{
    const int w = 200, h = 300;
    uint8_t *m = malloc((size_t)(w * h));
    tw_tile_view mv = {m, w, w, h, 1, TW_U8, 0, 0};
    void *sc = malloc(twi_label_runs_scratch(w, h));
    twi_label_runs r, want;
    atomic_int left = 1 << 30;
    twi_stop stop = {stop_after, (const void *)(uintptr_t)&left};
    int asked;

    twtest_label_mask(m, w, h, 1, 40, &rng);
    cr_assert(eq(int, twi_omp_label_runs(&mv, 8, sc, &want, 2), TW_OK));
    cr_assert(eq(int, twi_omp_label_runs_alloc(&mv, 8, &r, 2, &stop), TW_OK));
    asked = (1 << 30) - atomic_load(&left);
    cr_assert(asked >= 2, "the hook was asked %d times", asked);
    cr_assert(eq(i64, r.n, want.n));
    for (int32_t y = 0; y < h; y++) {
        cr_assert(eq(u32, r.re[y] - r.rs[y], want.re[y] - want.rs[y]));
        for (uint32_t k = 0; k < r.re[y] - r.rs[y]; k++)
            for (int f = 0; f < 4; f += f == 1 ? 2 : 1) /* first x, end x, label */
                cr_assert(eq(u32, r.run[4 * (r.rs[y] + k) + f],
                             want.run[4 * (want.rs[y] + k) + f]));
    }
    twi_label_runs_free(&r);
    for (int after = 0; after < asked; after++) {
        atomic_store(&left, after);
        cr_assert(eq(int, twi_omp_label_runs_alloc(&mv, 8, &r, 2, &stop), TW_E_CANCELED),
                  "stop after %d of %d", after, asked);
        cr_assert(r.own == NULL && r.run == NULL && r.rs == NULL, "after %d", after);
    }
    free(sc);
    free(m);
}
