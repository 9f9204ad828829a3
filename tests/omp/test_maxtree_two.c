/* SPDX-License-Identifier: MIT */
/* tilewave tests: the max-tree of images of at most two levels (omp/maxtree_two.c), which
 * twi_omp_maxtree takes for masks, against a naive flood of the definition and against the
 * one-block flooding kernel (twi_omp_maxtree_grid, which never takes it), byte for byte. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* The canonical parents by the definition: every pixel of level hi in a component (a stack
 * flood) points to the component's largest index, which points to the largest index of level
 * lo; pixels of level lo point there too; with one level everything points to the last pixel. */
static void
naive_two(const uint16_t *f, int w, int h, int conn, uint64_t *par)
{
    int64_t n = (int64_t)w * h, root = -1;
    int64_t *comp = malloc((size_t)n * sizeof *comp), *stack = malloc((size_t)n * sizeof *stack);
    uint16_t lo = f[0], hi = f[0];

    for (int64_t p = 0; p < n; p++) {
        lo = f[p] < lo ? f[p] : lo;
        hi = f[p] > hi ? f[p] : hi;
        comp[p] = -1;
    }
    for (int64_t p = 0; p < n; p++)
        if (f[p] == lo)
            root = p;
    for (int64_t p = 0; p < n; p++)
        par[p] = (uint64_t)root;
    for (int64_t s = 0; s < n && lo != hi; s++) {
        int64_t head = 0, tail = 0, last = s;

        if (f[s] != hi || comp[s] >= 0)
            continue;
        comp[s] = s;
        stack[tail++] = s; /* a queue whose entries stay: the component's pixels */
        while (head < tail) {
            int64_t p = stack[head++];
            int x = (int)(p % w), y = (int)(p / w);

            last = p > last ? p : last;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int64_t q = (int64_t)(y + dy) * w + x + dx;

                    if ((!dx && !dy) || (conn == 4 && dx && dy) || x + dx < 0 || x + dx >= w ||
                        y + dy < 0 || y + dy >= h || f[q] != hi || comp[q] >= 0)
                        continue;
                    comp[q] = s;
                    stack[tail++] = q;
                }
        }
        for (int64_t i = 0; i < tail; i++)
            par[stack[i]] = (uint64_t)last;
        par[last] = (uint64_t)root;
    }
    free(comp);
    free(stack);
}

/* The image f (packed) as a u8 or u16 view with `pad` samples of junk after each row. */
static tw_tile_view
level_view(const uint16_t *f, int w, int h, int wide, int pad, void **buf)
{
    int64_t stride = (int64_t)(w + pad) * (wide ? 2 : 1);
    char *b = malloc((size_t)(stride * h + 8));

    memset(b, 0xa7, (size_t)(stride * h + 8));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            if (wide)
                ((uint16_t *)(void *)(b + y * stride))[x] = f[(int64_t)y * w + x];
            else
                ((uint8_t *)(b + y * stride))[x] = (uint8_t)f[(int64_t)y * w + x];
        }
    *buf = b;
    return (tw_tile_view){b, stride, w, h, 1, wide ? TW_U16 : TW_U8, 0, 0};
}

static uint64_t
par_at(const tw_tile_view *p, int64_t i)
{
    int y = (int)(i / p->w), x = (int)(i % p->w);

    return p->type == TW_U32 ? TWI_ROW(p, uint32_t, y)[x] : TWI_ROW(p, uint64_t, y)[x];
}

/* One image through twi_omp_maxtree (every thread count, both parent types, padded views)
 * and the one-block flood: both equal the naive parents. */
static void
check_image(const uint16_t *f, int w, int h, int wide, int conn)
{
    int64_t n = (int64_t)w * h;
    uint64_t *want = malloc((size_t)n * sizeof *want);
    void *lb;
    tw_tile_view lv = level_view(f, w, h, wide, (int)(n % 3), &lb);

    naive_two(f, w, h, conn, want);
    for (int t = 1; t <= 4; t++)
        for (int pt = 0; pt < 2; pt++) {
            int ps = pt ? 8 : 4, pad = t % 2;
            size_t bytes = (size_t)(w + pad) * (size_t)ps * (size_t)h;
            char *pb = malloc(bytes), *gb = malloc(bytes);
            tw_tile_view pv = {pb, (int64_t)(w + pad) * ps, w, h, 1, pt ? TW_U64 : TW_U32, 0, 0};
            tw_tile_view gv = pv;
            uint16_t lo, hi;

            gv.data = gb;
            memset(pb, 0x33, bytes);
            cr_assert(twi_maxtree_two_levels(&lv, &lo, &hi));
            cr_assert(eq(int, twi_omp_maxtree(&lv, conn, &pv, t), TW_OK));
            cr_assert(eq(int, twi_omp_maxtree_grid(&lv, conn, &gv, t, 1, 1), TW_OK));
            for (int64_t i = 0; i < n; i++) {
                cr_assert(eq(u64, par_at(&pv, i), want[i]), "%dx%d u%d conn %d threads %d %s: "
                          "pixel %lld", w, h, wide ? 16 : 8, conn, t, pt ? "u64" : "u32",
                          (long long)i);
                cr_assert(eq(u64, par_at(&gv, i), want[i]));
            }
            free(pb);
            free(gb);
        }
    free(lb);
    free(want);
}

/* Random masks of every density, levels from 0/1 to 65534/65535 and lo above 0, sizes from one
 * pixel to more than the run labeller's row chunks, both connectivities. */
Test(maxtree_two, random_masks_match_the_definition)
{
    static const int sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {2, 2}, {5, 3}, {64, 3}, {65, 17},
                                   {130, 41}, {33, 200}};
    static const uint16_t pairs[][2] = {{0, 255}, {0, 1}, {7, 8}, {254, 255}, {200, 3},
                                        {0, 65535}, {1000, 40000}, {65534, 65535}};
    static const uint32_t dens[] = {0, 5, 30, 50, 70, 95, 100};

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t v = 0; v < sizeof pairs / sizeof pairs[0]; v++)
            for (size_t d = 0; d < sizeof dens / sizeof dens[0]; d++) {
                int w = sizes[s][0], h = sizes[s][1], wide = pairs[v][0] > 255 || pairs[v][1] > 255;
                uint16_t *f = malloc((size_t)w * h * sizeof *f);

                for (int64_t i = 0; i < (int64_t)w * h; i++)
                    f[i] = twtest_rnd(&rng, 100) < dens[d] ? pairs[v][1] : pairs[v][0];
                check_image(f, w, h, wide, 4);
                check_image(f, w, h, wide, 8);
                if (!wide)
                    check_image(f, w, h, 1, 8); /* u8 levels in a u16 image */
                free(f);
            }
}

/* Shapes that the runs must join: a checkerboard (8 joins corners, 4 does not), a spiral-like
 * comb whose component ends far from its first pixel, the upper level on every border. */
Test(maxtree_two, joined_shapes_match_the_definition)
{
    const int w = 97, h = 61;
    uint16_t *f = malloc((size_t)w * h * sizeof *f);

    for (int k = 0; k < 3; k++) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int edge = x == 0 || y == 0 || x == w - 1 || y == h - 1;
                int on = k == 0   ? (x + y) % 2
                         : k == 1 ? (y % 4 == 0) || (x == (y % 8 < 4 ? w - 1 : 0))
                                  : edge || (x * y) % 7 == 0;

                f[(int64_t)y * w + x] = on ? 9 : 4;
            }
        check_image(f, w, h, 0, 4);
        check_image(f, w, h, 0, 8);
    }
    free(f);
}

/* The detection: a third value anywhere (the last pixel, a row after uniform ones) is not two
 * levels; a constant image is, with lo == hi. */
Test(maxtree_two, a_third_level_is_seen_anywhere)
{
    const int w = 70, h = 9;
    uint16_t f[70 * 9], lo, hi;
    void *b;

    for (int i = 0; i < w * h; i++)
        f[i] = 5;
    for (int wide = 0; wide < 2; wide++) {
        tw_tile_view v = level_view(f, w, h, wide, 3, &b);

        cr_assert(twi_maxtree_two_levels(&v, &lo, &hi));
        cr_assert(eq(u16, lo, 5));
        cr_assert(eq(u16, hi, 5));
        free(b);
    }
    f[3 * w + 10] = 2;
    for (int at = 0; at < w * h; at += 37) {
        uint16_t keep = f[at];

        if (at == 3 * w + 10)
            continue;
        f[at] = 200;
        for (int wide = 0; wide < 2; wide++) {
            tw_tile_view v = level_view(f, w, h, wide, 3, &b);

            cr_assert(not(twi_maxtree_two_levels(&v, &lo, &hi)), "third value at %d", at);
            free(b);
        }
        f[at] = keep;
    }
    f[w * h - 1] = 200;
    {
        tw_tile_view v = level_view(f, w, h, 0, 0, &b);

        cr_assert(not(twi_maxtree_two_levels(&v, &lo, &hi)));
        free(b);
    }
    check_image(f, 1, 1, 0, 8);
}

/* Pass 1 and pass 2 of the border max-trees from the runs against the general ones given the
 * flood's parents: the same border tree (every field, every side set) and the same filtered
 * bytes for every rule (area, height, area map in 32 and 64 bits), the border nodes' answers
 * drawn at random as the merge would give them. */
static void
check_border(const uint16_t *f, int w, int h, int wide, int conn)
{
    int64_t n = (int64_t)w * h;
    void *lb;
    tw_tile_view lv = level_view(f, w, h, wide, 1, &lb);
    uint32_t *pb = malloc((size_t)n * 4);
    tw_tile_view pv = {pb, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    uint16_t lo, hi;

    cr_assert(twi_maxtree_two_levels(&lv, &lo, &hi));
    cr_assert(eq(int, twi_omp_maxtree_grid(&lv, conn, &pv, 1, 1, 1), TW_OK));
    for (unsigned sides = 0; sides < 16; sides++) {
        twi_maxtree_border g, t;
        uint64_t *res;

        cr_assert(eq(int, twi_maxtree_border_extract(&lv, &pv, sides, &g), TW_OK));
        cr_assert(eq(int, twi_maxtree_two_border(&lv, lo, hi, conn, sides, 1 + (int)(sides % 3),
                                                 &t), TW_OK));
        cr_assert(eq(i64, t.n, g.n), "%dx%d conn %d sides %u", w, h, conn, sides);
        cr_assert(eq(int, t.w, g.w));
        cr_assert(eq(int, t.h, g.h));
        for (int64_t i = 0; i < g.n; i++) {
            cr_assert(eq(u16, t.level[i], g.level[i]));
            cr_assert(eq(u32, t.lparent[i], g.lparent[i]));
            cr_assert(eq(u32, t.own[i], g.own[i]), "node %lld", (long long)i);
            cr_assert(eq(u16, t.maxv[i], g.maxv[i]));
        }
        for (int s = 0; s < 4; s++) {
            int len = s <= TWI_MAXTREE_BOTTOM ? w : h;

            cr_assert(eq(int, !t.side[s], !g.side[s]));
            for (int k = 0; g.side[s] && k < len; k++)
                cr_assert(eq(u32, t.side[s][k], g.side[s][k]), "side %d pixel %d", s, k);
        }
        res = malloc((size_t)(g.n + 1) * sizeof *res);
        for (int rule = 0; rule < 4; rule++) {
            twi_maxtree_filter fl = {rule == 0 ? TWI_MAXTREE_AREA
                                     : rule == 1 ? TWI_MAXTREE_HEIGHT
                                                 : TWI_MAXTREE_AREA_MAP,
                                     1 + twtest_rnd(&rng, 2 * (uint32_t)n), (uint16_t)(lo / 2)};
            tw_sample_type ot = rule < 2 ? lv.type : rule == 2 ? TW_U32 : TW_U64;
            size_t os = tw_sample_size(ot), ob = (size_t)n * os;
            char *o1 = malloc(ob), *o2 = malloc(ob);
            tw_tile_view v1 = {o1, (int64_t)w * (int64_t)os, w, h, 1, ot, 0, 0}, v2 = v1;

            v2.data = o2;
            if (rule == 1)
                fl.threshold = twtest_rnd(&rng, 2) ? (uint64_t)(hi - lo) : (uint64_t)(hi - lo) + 1;
            for (int64_t i = 0; i < g.n; i++)
                res[i] = rule < 2 ? (twtest_rnd(&rng, 2) ? lo : hi) : twtest_rnd(&rng, 1u << 30);
            memset(o1, 0x11, ob);
            memset(o2, 0x22, ob);
            cr_assert(eq(int, twi_maxtree_filter_tile(&lv, &pv, sides, sides ? res : NULL, &fl,
                                                      &v1), TW_OK));
            cr_assert(eq(int, twi_maxtree_two_filter(&lv, lo, hi, conn, sides,
                                                     sides ? res : NULL, &fl, 2, &v2), TW_OK));
            cr_assert(eq(int, memcmp(o1, o2, ob), 0), "%dx%d conn %d sides %u rule %d", w, h,
                      conn, sides, rule);
            free(o1);
            free(o2);
        }
        free(res);
        twi_maxtree_border_free(&g);
        twi_maxtree_border_free(&t);
    }
    free(pb);
    free(lb);
}

Test(maxtree_two, border_trees_and_filters_match_the_general_passes)
{
    static const int sizes[][2] = {{1, 1}, {1, 6}, {6, 1}, {3, 3}, {16, 9}, {70, 33}};
    static const uint16_t pairs[][2] = {{0, 255}, {3, 4}, {100, 60000}};
    static const uint32_t dens[] = {0, 20, 50, 85, 100};

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t v = 0; v < sizeof pairs / sizeof pairs[0]; v++)
            for (size_t d = 0; d < sizeof dens / sizeof dens[0]; d++) {
                int w = sizes[s][0], h = sizes[s][1], wide = pairs[v][1] > 255;
                uint16_t *f = malloc((size_t)w * h * sizeof *f);

                for (int64_t i = 0; i < (int64_t)w * h; i++)
                    f[i] = twtest_rnd(&rng, 100) < dens[d] ? pairs[v][1] : pairs[v][0];
                check_border(f, w, h, wide, 4);
                check_border(f, w, h, wide, 8);
                free(f);
            }
}

/* Views the general passes refuse (twi_maxtree_border_extract, twi_maxtree_filter_tile: no
 * data, rows shorter than the width, misaligned 16-bit samples, several channels, 32-bit
 * levels) and a connectivity other than 4 or 8: TW_E_INVALID from the runs' passes too, with
 * one level or two, before any sample is read. */
Test(maxtree_two, bad_views_are_refused_before_reading)
{
    static uint16_t buf[64];
    const tw_tile_view good = {buf, 8 * 2, 8, 4, 1, TW_U16, 0, 0};
    uint16_t out[32];
    tw_tile_view ov = {out, 8 * 2, 8, 4, 1, TW_U16, 0, 0};
    twi_maxtree_filter fl = {TWI_MAXTREE_AREA, 3, 0};
    uint64_t res[8] = {0};

    for (int i = 0; i < 64; i++)
        buf[i] = (uint16_t)(i % 3 ? 7 : 9);
    for (int bad = 0; bad < 6; bad++) {
        tw_tile_view v = good;
        int conn = bad == 5 ? 6 : 4;

        if (bad == 0)
            v.data = NULL;
        else if (bad == 1)
            v.stride = 8; /* a u16 row of 8 samples needs 16 bytes */
        else if (bad == 2)
            v.data = (char *)buf + 1;
        else if (bad == 3)
            v.channels = 3;
        else if (bad == 4)
            v.type = TW_U32;
        for (int two = 0; two < 2; two++) {
            twi_maxtree_border b;
            uint16_t lo = 7, hi = two ? 9 : 7;

            cr_assert(eq(int, twi_maxtree_two_border(&v, lo, hi, conn, 15, 1, &b), TW_E_INVALID),
                      "bad %d two %d", bad, two);
            cr_assert(eq(i64, b.n, 0));
            cr_assert(eq(int, twi_maxtree_two_filter(&v, lo, hi, conn, 15, res, &fl, 1, &ov),
                         TW_E_INVALID),
                      "bad %d two %d", bad, two);
        }
    }
}

/* Random tiles against the general passes, with what the tests above fix: levels that differ
 * in one byte of a 16-bit sample only (the runs XOR every lane with lo), lo > 0 and hi =
 * 65535, one level, a third value in the row padding (never a sample), one-row and
 * one-column tiles and widths about a 64-pixel word, 1-4 threads, every side set, each rule
 * with thresholds 0, hi - lo and its neighbours, n and n + 1, any vmin, and answers above
 * 2^32 for the area map (saturated in 32 bits). Parents, border trees and filtered bytes
 * (the output's padding included) must be the general ones. */
static const uint16_t lane_pairs[][2] = {
    {0x0100, 0x0000}, {0x0001, 0x0100}, {0x00ff, 0xff00}, {0x1234, 0x1235}, {0x1234, 0x2234},
    {0x8000, 0x0000}, {0x7fff, 0x8000}, {0xff00, 0xffff}, {65534, 65535}, {0, 65535},
    {0x8080, 0x0808}, {1, 0x8001},     {9, 9},          {65535, 65535}, {0, 0}};

static tw_tile_view
padded_view(const uint16_t *f, int w, int h, int wide, int pad, uint16_t junk, void **buf)
{
    void *b;
    tw_tile_view v = level_view(f, w, h, wide, pad, &b);

    for (int y = 0; y < h; y++)
        for (int x = w; x < w + pad; x++) {
            if (wide)
                TWI_ROW(&v, uint16_t, y)[x] = junk;
            else
                TWI_ROW(&v, uint8_t, y)[x] = (uint8_t)junk;
        }
    *buf = b;
    return v;
}

static void
random_tile(int it)
{
    static const int widths[] = {1, 2, 7, 63, 64, 65, 70};
    int wide = (int)twtest_rnd(&rng, 2), conn = twtest_rnd(&rng, 2) ? 8 : 4;
    int w = widths[twtest_rnd(&rng, 7)], h = 1 + (int)twtest_rnd(&rng, twtest_rnd(&rng, 4) ? 9 : 70);
    int pad = 1 + (int)twtest_rnd(&rng, 3), np = (int)(sizeof lane_pairs / sizeof lane_pairs[0]);
    int64_t n;
    uint16_t a, b, lo, hi, junk, *f;
    uint32_t dens = twtest_rnd(&rng, 101), *pb;
    unsigned sides = twtest_rnd(&rng, 16);
    void *lb;
    tw_tile_view lv, pv;
    twi_maxtree_border g, t;

    if (twtest_rnd(&rng, 2))
        h = h > 1 ? 1 : h; /* one row */
    if (twtest_rnd(&rng, 5) == 0) {
        int s = w; /* one column */
        w = 1;
        h = s;
    }
    n = (int64_t)w * h;
    if (wide && twtest_rnd(&rng, 4)) {
        int k = (int)twtest_rnd(&rng, (uint32_t)np);

        a = lane_pairs[k][0];
        b = lane_pairs[k][1];
    } else {
        a = (uint16_t)twtest_rnd(&rng, wide ? 65536 : 256);
        b = (uint16_t)(twtest_rnd(&rng, 2) ? a ^ (1u << twtest_rnd(&rng, wide ? 16 : 8))
                                           : twtest_rnd(&rng, wide ? 65536 : 256));
    }
    do
        junk = (uint16_t)twtest_rnd(&rng, wide ? 65536 : 256);
    while (junk == a || junk == b);
    f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        f[i] = twtest_rnd(&rng, 100) < dens ? b : a;
    if (twtest_rnd(&rng, 4) == 0) { /* the other level in the last pixel only */
        for (int64_t i = 0; i < n; i++)
            f[i] = a;
        f[n - 1] = b;
    }
    lv = padded_view(f, w, h, wide, pad, junk, &lb);
    cr_assert(twi_maxtree_two_levels(&lv, &lo, &hi), "case %d", it);
    {
        uint16_t mn = f[0], mx = f[0];

        for (int64_t i = 0; i < n; i++) {
            mn = f[i] < mn ? f[i] : mn;
            mx = f[i] > mx ? f[i] : mx;
        }
        cr_assert(lo == mn && hi == mx, "case %d: %u/%u, not %u/%u", it, lo, hi, mn, mx);
    }
    pb = malloc((size_t)n * 8 * 2);
    pv = (tw_tile_view){pb, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    {
        tw_tile_view p64 = {pb + 2 * n, (int64_t)w * 8, w, h, 1, TW_U64, 0, 0};

        /* the runs' parents (64-bit, a team) against the one-block flood's (32-bit) */
        cr_assert(eq(int, twi_omp_maxtree(&lv, conn, &p64, 1 + (int)twtest_rnd(&rng, 4)), TW_OK));
        cr_assert(eq(int, twi_omp_maxtree_grid(&lv, conn, &pv, 1, 1, 1), TW_OK));
        for (int64_t i = 0; i < n; i++)
            cr_assert(eq(u64, par_at(&p64, i), par_at(&pv, i)),
                      "case %d: %dx%d %u/%u conn %d pixel %lld", it, w, h, lo, hi, conn,
                      (long long)i);
    }
    cr_assert(eq(int, twi_maxtree_border_extract(&lv, &pv, sides, &g), TW_OK));
    cr_assert(eq(int, twi_maxtree_two_border(&lv, lo, hi, conn, sides,
                                             1 + (int)twtest_rnd(&rng, 4), &t), TW_OK));
    cr_assert(eq(i64, t.n, g.n), "case %d: %dx%d %u/%u conn %d sides %u", it, w, h, lo, hi,
              conn, sides);
    for (int64_t i = 0; i < g.n; i++)
        cr_assert(t.level[i] == g.level[i] && t.lparent[i] == g.lparent[i] &&
                      t.own[i] == g.own[i] && t.maxv[i] == g.maxv[i],
                  "case %d: node %lld", it, (long long)i);
    for (int s = 0; s < 4; s++) {
        cr_assert(eq(int, !t.side[s], !g.side[s]));
        if (g.side[s])
            cr_assert(eq(int, memcmp(t.side[s], g.side[s],
                                     (size_t)(s <= TWI_MAXTREE_BOTTOM ? w : h) * 4), 0),
                      "case %d: side %d", it, s);
    }
    for (int k = 0; k < 3; k++) {
        int rule = (int)twtest_rnd(&rng, 4), opad = (int)twtest_rnd(&rng, 3);
        uint64_t d = (uint64_t)(hi - lo);
        uint64_t thr[] = {0, 1, d, d + 1, d ? d - 1 : 0, (uint64_t)n, (uint64_t)n + 1,
                          twtest_rnd(&rng, 70000), UINT64_MAX};
        twi_maxtree_filter fl = {rule == 0 ? TWI_MAXTREE_AREA
                                 : rule == 1 ? TWI_MAXTREE_HEIGHT
                                             : TWI_MAXTREE_AREA_MAP,
                                 thr[twtest_rnd(&rng, 9)],
                                 (uint16_t)(twtest_rnd(&rng, 2) ? lo
                                                                : twtest_rnd(&rng, wide ? 65536 : 256))};
        tw_sample_type ot = rule < 2 ? lv.type : rule == 2 ? TW_U32 : TW_U64;
        size_t os = tw_sample_size(ot), ob = (size_t)(w + opad) * os * (size_t)h;
        uint64_t *res = malloc((size_t)(g.n + 1) * sizeof *res);
        char *o1 = malloc(ob), *o2 = malloc(ob);
        tw_tile_view v1 = {o1, (int64_t)(w + opad) * (int64_t)os, w, h, 1, ot, 0, 0}, v2 = v1;

        for (int64_t i = 0; i <= g.n; i++)
            res[i] = rule >= 2 ? (twtest_rnd(&rng, 2) ? UINT32_MAX - 1 + twtest_rnd(&rng, 3)
                                                       : twtest_xorshift(&rng))
                     : twtest_rnd(&rng, 2) ? (twtest_rnd(&rng, 2) ? lo : hi)
                                           : twtest_xorshift(&rng);
        v2.data = o2;
        memset(o1, 0x3c, ob);
        memset(o2, 0x3c, ob);
        cr_assert(eq(int, twi_maxtree_filter_tile(&lv, &pv, sides, sides ? res : NULL, &fl, &v1),
                     TW_OK));
        cr_assert(eq(int, twi_maxtree_two_filter(&lv, lo, hi, conn, sides, sides ? res : NULL, &fl,
                                                 1 + (int)twtest_rnd(&rng, 4), &v2),
                     TW_OK));
        cr_assert(eq(int, memcmp(o1, o2, ob), 0),
                  "case %d: %dx%d %u/%u conn %d sides %u rule %d threshold %llu vmin %u", it, w, h,
                  lo, hi, conn, sides, rule, (unsigned long long)fl.threshold, fl.vmin);
        free(o1);
        free(o2);
        free(res);
    }
    twi_maxtree_border_free(&g);
    twi_maxtree_border_free(&t);
    free(pb);
    free(lb);
    free(f);
}

Test(maxtree_two, random_tiles_match_the_general_passes, .timeout = TWTEST_TIMEOUT(60))
{
    for (int it = 0; it < 3000; it++)
        random_tile(it);
}
