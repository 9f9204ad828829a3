/* SPDX-License-Identifier: MIT */
/* tilewave tests: the watershed across tiles against a naive sequential reference. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest.h"

/*
 * The reference implements the rule of docs/watershed.md directly and naively, with its own
 * types (levels as doubles, keys as (level, steps) pairs, no packing):
 *   key(p): sweeps of key(p) = min(key(p), step(key(q), p)) over every pixel and neighbour
 *           until nothing changes, markers at (level, 0);
 *   labels: pixels in increasing key order, each a marker's label or the smallest label of
 *           its best predecessors (the neighbours whose step gives its key, of lowest key);
 *   lines:  0 where a neighbour of another label has a smaller (key, label).
 */

static uint64_t rng = 0x5eed;

static uint32_t
rnd(uint32_t n)
{
    return twtest_rnd(&rng, n);
}

static const int NB[8][2] = {{0, -1}, {-1, 0}, {1, 0}, {0, 1}, {-1, -1}, {1, -1}, {-1, 1}, {1, 1}};

typedef struct rkey {
    double l; /* level; INFINITY: unreached */
    int64_t d;
} rkey;

static int
rkey_cmp(rkey a, rkey b)
{
    if (a.l != b.l)
        return a.l < b.l ? -1 : 1;
    return (a.d > b.d) - (a.d < b.d);
}

static rkey
rstep(rkey q, double lp)
{
    rkey r = {lp, 1};

    if (lp > q.l)
        return r;
    r.l = q.l;
    r.d = q.d + 1;
    return r;
}

typedef struct rcase {
    int64_t w, h;
    double *lev;    /* the level of each pixel (negated with negate) */
    uint32_t *mark; /* 0: none */
    uint8_t *in;    /* 1: inside the mask */
    int conn;
    bool lines;
} rcase;

static const rkey *sort_keys;

static int
by_key(const void *a, const void *b)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    int c = rkey_cmp(sort_keys[i], sort_keys[j]);

    return c ? c : (i > j) - (i < j);
}

static uint32_t *
reference(const rcase *c)
{
    int64_t n = c->w * c->h;
    rkey *k = malloc((size_t)n * sizeof *k);
    uint32_t *lab = calloc((size_t)n, sizeof *lab), *out = calloc((size_t)n, sizeof *out);
    int64_t *order = malloc((size_t)n * sizeof *order);
    bool changed = true;

    for (int64_t p = 0; p < n; p++) {
        k[p].l = INFINITY;
        k[p].d = 0;
        if (c->in[p] && c->mark[p])
            k[p].l = c->lev[p];
    }
    while (changed) {
        changed = false;
        for (int64_t p = 0; p < n; p++) {
            int64_t x = p % c->w, y = p / c->w;

            if (!c->in[p])
                continue;
            for (int j = 0; j < c->conn; j++) {
                int64_t qx = x + NB[j][0], qy = y + NB[j][1], q;

                if (qx < 0 || qy < 0 || qx >= c->w || qy >= c->h)
                    continue;
                q = qy * c->w + qx;
                if (isinf(k[q].l))
                    continue;
                rkey s = rstep(k[q], c->lev[p]);
                if (rkey_cmp(s, k[p]) < 0) {
                    k[p] = s;
                    changed = true;
                }
            }
        }
    }
    for (int64_t p = 0; p < n; p++)
        order[p] = p;
    sort_keys = k;
    qsort(order, (size_t)n, sizeof *order, by_key);
    for (int64_t i = 0; i < n; i++) {
        int64_t p = order[i], x = p % c->w, y = p / c->w;
        rkey best = {INFINITY, 0};

        if (isinf(k[p].l))
            break;
        if (k[p].d == 0) {
            lab[p] = c->mark[p];
            continue;
        }
        for (int j = 0; j < c->conn; j++) {
            int64_t qx = x + NB[j][0], qy = y + NB[j][1], q;

            if (qx < 0 || qy < 0 || qx >= c->w || qy >= c->h)
                continue;
            q = qy * c->w + qx;
            if (!isinf(k[q].l) && rkey_cmp(rstep(k[q], c->lev[p]), k[p]) == 0 &&
                rkey_cmp(k[q], best) < 0)
                best = k[q];
        }
        for (int j = 0; j < c->conn; j++) {
            int64_t qx = x + NB[j][0], qy = y + NB[j][1], q;

            if (qx < 0 || qy < 0 || qx >= c->w || qy >= c->h)
                continue;
            q = qy * c->w + qx;
            if (!isinf(k[q].l) && rkey_cmp(rstep(k[q], c->lev[p]), k[p]) == 0 &&
                rkey_cmp(k[q], best) == 0 && (lab[p] == 0 || lab[q] < lab[p]))
                lab[p] = lab[q];
        }
        cr_assert(lab[p] != 0, "reference: pixel %lld has no labelled predecessor", (long long)p);
    }
    for (int64_t p = 0; p < n; p++) {
        int64_t x = p % c->w, y = p / c->w;

        out[p] = lab[p];
        if (!c->lines || !lab[p])
            continue;
        for (int j = 0; j < c->conn; j++) {
            int64_t qx = x + NB[j][0], qy = y + NB[j][1], q;

            if (qx < 0 || qy < 0 || qx >= c->w || qy >= c->h)
                continue;
            q = qy * c->w + qx;
            if (lab[q] && lab[q] != lab[p] &&
                (rkey_cmp(k[q], k[p]) < 0 || (rkey_cmp(k[q], k[p]) == 0 && lab[q] < lab[p])))
                out[p] = 0;
        }
    }
    free(k);
    free(lab);
    free(order);
    return out;
}

/* ---- properties */

/* Every label's pixels form one conn-connected region holding its marker pixels. */
static void
assert_regions(const rcase *c, const uint32_t *out)
{
    int64_t n = c->w * c->h, n_started = 0;
    int64_t *q = malloc((size_t)n * sizeof *q);
    uint32_t *started = malloc((size_t)n * sizeof *started);
    uint8_t *seen = calloc((size_t)n, 1);

    for (int64_t p = 0; p < n; p++)
        if (c->mark[p] && c->in[p])
            cr_assert(eq(u32, out[p], c->mark[p]), "marker pixel %lld lost its label",
                      (long long)p);
    /* One flood fill per region: a label that starts a second one is not connected. */
    for (int64_t s = 0; s < n; s++) {
        int64_t head = 0, tail = 0;

        if (!out[s] || seen[s])
            continue;
        for (int64_t i = 0; i < n_started; i++)
            cr_assert(started[i] != out[s], "label %u is not connected", out[s]);
        started[n_started++] = out[s];
        q[tail++] = s;
        seen[s] = 1;
        while (head < tail) {
            int64_t p = q[head++], x = p % c->w, y = p / c->w;

            for (int j = 0; j < c->conn; j++) {
                int64_t qx = x + NB[j][0], qy = y + NB[j][1], r;

                if (qx < 0 || qy < 0 || qx >= c->w || qy >= c->h)
                    continue;
                r = qy * c->w + qx;
                if (!seen[r] && out[r] == out[s]) {
                    seen[r] = 1;
                    q[tail++] = r;
                }
            }
        }
    }
    free(q);
    free(started);
    free(seen);
}

/* With lines, no two different labels touch. */
static void
assert_separated(const rcase *c, const uint32_t *out)
{
    for (int64_t p = 0; p < c->w * c->h; p++) {
        int64_t x = p % c->w, y = p / c->w;

        for (int j = 0; j < c->conn && out[p]; j++) {
            int64_t qx = x + NB[j][0], qy = y + NB[j][1];

            if (qx < 0 || qy < 0 || qx >= c->w || qy >= c->h)
                continue;
            cr_assert(out[qy * c->w + qx] == 0 || out[qy * c->w + qx] == out[p],
                      "labels %u and %u touch at %lld", out[p], out[qy * c->w + qx], (long long)p);
        }
    }
}

/* ---- running the job */

static tw_runtime *
make_runtime(int workers)
{
    char n[16];

    snprintf(n, sizeof n, "%d", workers);
    return twtest_runtime_with("none", n);
}

static tw_status
run_ws(tw_runtime *rt, const tw_watershed_opts *o, char *msg, size_t len)
{
    tw_job *job = NULL;
    tw_error err;
    tw_status st = tw_watershed_submit(rt, o, &job, &err);

    if (st != TW_OK) {
        snprintf(msg, len, "%s", err.message);
        return st;
    }
    st = tw_job_wait(job, -1);
    if (st != TW_OK)
        snprintf(msg, len, "%s", tw_job_get_error(job) ? tw_job_get_error(job) : "?");
    tw_job_destroy(job);
    return st;
}

/* ---- random content */

typedef struct inputs {
    void *img;
    tw_sample_type img_type;
    void *mark;
    tw_sample_type mark_type;
    uint8_t *mask; /* NULL: none */
    bool negate;
} inputs;

/* Levels: noise, blurred noise (basins and plateaus), few levels (large plateaus), a cone. */
static void
gen_levels(double *v, int64_t w, int64_t h, int kind)
{
    int64_t n = w * h;

    for (int64_t p = 0; p < n; p++)
        v[p] = rnd(1000);
    if (kind == 1 || kind == 2) {
        double *t = malloc((size_t)n * sizeof *t);

        for (int pass = 0; pass < 3; pass++) {
            for (int64_t p = 0; p < n; p++) {
                int64_t x = p % w, y = p / w, m = 0;
                double s = 0;

                for (int64_t dy = -2; dy <= 2; dy++)
                    for (int64_t dx = -2; dx <= 2; dx++)
                        if (x + dx >= 0 && y + dy >= 0 && x + dx < w && y + dy < h) {
                            s += v[(y + dy) * w + x + dx];
                            m++;
                        }
                t[p] = s / (double)m;
            }
            memcpy(v, t, (size_t)n * sizeof *v);
        }
        free(t);
        for (int64_t p = 0; p < n; p++)
            v[p] = floor(kind == 2 ? v[p] / 60.0 : v[p]);
    } else if (kind == 3) {
        for (int64_t p = 0; p < n; p++)
            v[p] = rnd(3);
    } else if (kind == 4) {
        for (int64_t p = 0; p < n; p++)
            v[p] = 7; /* one plateau: the flood is a breadth-first race */
    }
}

static void
random_case(tw_runtime *rt, int index, int workers)
{
    int64_t w, h;
    rcase c;
    tw_watershed_opts o;
    void *img, *mark;
    uint8_t *mask = NULL;
    uint32_t *want, *got;
    tw_sample_type it, mt;
    char msg[512] = "";
    int kind = (int)rnd(5);
    bool negate;
    int64_t n;

    switch (rnd(4)) {
    case 0: w = 1 + rnd(12); h = 1 + rnd(12); break;
    case 1: w = 1; h = 1 + rnd(60); break;
    default: w = 2 + rnd(60); h = 2 + rnd(50); break;
    }
    n = w * h;
    c.w = w;
    c.h = h;
    c.conn = rnd(2) ? 8 : 4;
    c.lines = rnd(3) == 0;
    c.lev = malloc((size_t)n * sizeof *c.lev);
    c.mark = calloc((size_t)n, sizeof *c.mark);
    c.in = malloc((size_t)n);
    gen_levels(c.lev, w, h, kind);
    it = rnd(3) == 0 ? TW_F32 : rnd(2) ? TW_U16 : TW_U8;
    mt = rnd(3) == 0 ? TW_U32 : rnd(2) ? TW_U16 : TW_U8;
    img = calloc((size_t)n, 4);
    mark = calloc((size_t)n, 4);
    for (int64_t p = 0; p < n; p++) {
        double v = c.lev[p];

        if (it == TW_U8)
            ((uint8_t *)img)[p] = (uint8_t)((int)v % 256);
        else if (it == TW_U16)
            ((uint16_t *)img)[p] = (uint16_t)(v * 37);
        else
            ((float *)img)[p] = (float)(v * 0.25 - 100.0);
        c.lev[p] = it == TW_U8 ? (double)((int)v % 256) : it == TW_U16 ? (double)(uint16_t)(v * 37)
                                                                       : (double)(float)(v * 0.25 - 100.0);
    }
    negate = rnd(4) == 0;
    if (negate)
        for (int64_t p = 0; p < n; p++)
            c.lev[p] = -c.lev[p];
    /* Markers: a few single pixels and a few rectangles (crossing tiles), distinct labels each
     * connected and inside the mask (so that its region must be connected); labels large for
     * u32. */
    {
        int count = 1 + (int)rnd(6);
        uint32_t base = mt == TW_U32 ? 100000u : 1u, maxl = mt == TW_U8 ? 255u : 65535u;

        for (int m = 0; m < count; m++) {
            uint32_t l = mt == TW_U32 ? base + (uint32_t)rnd(1u << 30) : 1 + rnd(maxl);
            int64_t x0 = rnd((uint32_t)w), y0 = rnd((uint32_t)h);
            int64_t bw = rnd(2) ? 1 : 1 + rnd(5), bh = rnd(2) ? 1 : 1 + rnd(5);
            bool clash = false;

            for (int64_t p = 0; p < n; p++)
                clash |= c.mark[p] == l;
            for (int64_t y = y0; y < y0 + bh && y < h; y++)
                for (int64_t x = x0; x < x0 + bw && x < w; x++)
                    clash |= c.mark[y * w + x] != 0;
            if (clash)
                continue;
            for (int64_t y = y0; y < y0 + bh && y < h; y++)
                for (int64_t x = x0; x < x0 + bw && x < w; x++)
                    c.mark[y * w + x] = l;
        }
    }
    for (int64_t p = 0; p < n; p++) {
        if (mt == TW_U8)
            ((uint8_t *)mark)[p] = (uint8_t)c.mark[p];
        else if (mt == TW_U16)
            ((uint16_t *)mark)[p] = (uint16_t)c.mark[p];
        else
            ((uint32_t *)mark)[p] = c.mark[p];
    }
    memset(c.in, 1, (size_t)n);
    if (rnd(2)) {
        mask = malloc((size_t)n);
        for (int64_t p = 0; p < n; p++)
            mask[p] = rnd(5) != 0 || c.mark[p] ? (uint8_t)(1 + rnd(255)) : 0;
        for (int64_t p = 0; p < n; p++)
            c.in[p] = mask[p] != 0;
    }
    want = reference(&c);
    got = calloc((size_t)n, sizeof *got);

    tw_watershed_opts_init(&o);
    o.negate = negate;
    o.image = (tw_host_image){img, w, h, 0, it};
    o.markers_image = (tw_host_image){mark, w, h, 0, mt};
    if (mask)
        o.mask_image = (tw_host_image){mask, w, h, 0, TW_U8};
    o.result = (tw_host_image){got, w, h, 0, TW_U32};
    o.conn = c.conn;
    o.lines = c.lines;
    /* Tiles from 1x1 to larger than the image. */
    switch (rnd(4)) {
    case 0: o.tile_w = o.tile_h = 1; break;
    case 1: o.tile_w = 1 + (int32_t)rnd(4); o.tile_h = 1 + (int32_t)rnd(4); break;
    case 2: o.tile_w = 1 + (int32_t)rnd(20); o.tile_h = 1 + (int32_t)rnd(20); break;
    default: o.tile_w = 64; o.tile_h = 64; break;
    }
    cr_assert(eq(int, run_ws(rt, &o, msg, sizeof msg), TW_OK), "case %d: %s", index, msg);
    for (int64_t p = 0; p < n; p++)
        cr_assert(eq(u32, got[p], want[p]),
                  "case %d (%lldx%lld, tiles %dx%d, conn %d, lines %d, kind %d, %d workers): "
                  "pixel (%lld, %lld) is %u, want %u",
                  index, (long long)w, (long long)h, (int)o.tile_w, (int)o.tile_h, c.conn,
                  (int)c.lines, kind, workers, (long long)(p % w), (long long)(p / w), got[p],
                  want[p]);
    if (c.lines)
        assert_separated(&c, got);
    else
        assert_regions(&c, got);
    free(c.lev);
    free(c.mark);
    free(c.in);
    free(img);
    free(mark);
    free(mask);
    free(want);
    free(got);
}

static void
random_cases(int workers, uint64_t seed, int count)
{
    tw_runtime *rt = make_runtime(workers);

    rng = seed;
    for (int i = 0; i < count; i++)
        random_case(rt, i, workers);
    tw_runtime_destroy(rt);
}

Test(watershed, random_cases_match_the_reference_one_worker)
{
    /* Random images, markers, masks, connectivities and tilings (down to 1x1) on one worker:
     * the exact labels of the naive reference; regions connected and holding their markers. */
    random_cases(1, 11, 150);
}

Test(watershed, random_cases_match_the_reference_two_workers)
{
    /* The same with two workers (tasks finish in other orders). */
    random_cases(2, 22, 150);
}

Test(watershed, random_cases_match_the_reference_four_workers)
{
    /* And with four workers on fewer cores. */
    random_cases(4, 33, 150);
}

Test(watershed, every_tiling_gives_the_same_bytes)
{
    /* One 70x45 blurred image with markers crossing tiles: every tile size from 1x1 to 70x45
     * (a sample of them) and 1 or 3 workers give the reference's bytes. */
    int64_t w = 70, h = 45, n = w * h;
    rcase c = {w, h, malloc((size_t)n * sizeof(double)), calloc((size_t)n, 4), malloc((size_t)n),
               8, false};
    uint16_t *img = malloc((size_t)n * 2);
    uint32_t *want, *got = malloc((size_t)n * 4);
    static const int32_t sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {2, 2}, {3, 5}, {8, 8},
                                       {16, 9}, {33, 20}, {70, 45}, {128, 128}};

    rng = 99;
    gen_levels(c.lev, w, h, 1);
    memset(c.in, 1, (size_t)n);
    for (int64_t p = 0; p < n; p++)
        img[p] = (uint16_t)c.lev[p];
    for (int64_t y = 5; y < 30; y++)
        for (int64_t x = 3; x < 6; x++)
            c.mark[y * w + x] = 7; /* a long bar across many tiles */
    c.mark[20 * w + 40] = 3;
    c.mark[40 * w + 66] = 12;
    c.mark[2 * w + 60] = 5;
    for (int conn = 4; conn <= 8; conn += 4) {
        c.conn = conn;
        want = reference(&c);
        for (int workers = 1; workers <= 3; workers += 2) {
            tw_runtime *rt = make_runtime(workers);

            for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                tw_watershed_opts o;
                char msg[512] = "";

                tw_watershed_opts_init(&o);
                o.image = (tw_host_image){img, w, h, 0, TW_U16};
                o.markers_image = (tw_host_image){c.mark, w, h, 0, TW_U32};
                o.result = (tw_host_image){got, w, h, 0, TW_U32};
                o.conn = conn;
                o.tile_w = sizes[s][0];
                o.tile_h = sizes[s][1];
                memset(got, 0xab, (size_t)n * 4);
                cr_assert(eq(int, run_ws(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
                cr_assert(memcmp(got, want, (size_t)n * 4) == 0,
                          "tiles %dx%d, conn %d, %d workers differ from the reference",
                          (int)o.tile_w, (int)o.tile_h, conn, workers);
            }
            tw_runtime_destroy(rt);
        }
        assert_regions(&c, want);
        free(want);
    }
    free(c.lev);
    free(c.mark);
    free(c.in);
    free(img);
    free(got);
}

Test(watershed, a_plateau_splits_at_the_middle_and_ties_go_to_the_smaller_label)
{
    /* A flat row of 7 with markers 9 (left end) and 4 (right end): the flood is a
     * breadth-first race, pixels 1-2 go to 9, 4-5 to 4, and pixel 3, reached by both at the
     * same step, to the smaller label 4. With lines it becomes 0. */
    uint8_t img[7] = {5, 5, 5, 5, 5, 5, 5};
    uint8_t mark[7] = {9, 0, 0, 0, 0, 0, 4};
    uint32_t got[7], want[7] = {9, 9, 9, 4, 4, 4, 4}, want_lines[7] = {9, 9, 9, 0, 4, 4, 4};
    tw_runtime *rt = make_runtime(2);
    tw_watershed_opts o;
    char msg[256] = "";

    for (int lines = 0; lines < 2; lines++) {
        tw_watershed_opts_init(&o);
        o.image = (tw_host_image){img, 7, 1, 0, TW_U8};
        o.markers_image = (tw_host_image){mark, 7, 1, 0, TW_U8};
        o.result = (tw_host_image){got, 7, 1, 0, TW_U32};
        o.lines = lines;
        o.tile_w = o.tile_h = 2;
        cr_assert(eq(int, run_ws(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        for (int i = 0; i < 7; i++)
            cr_assert(eq(u32, got[i], lines ? want_lines[i] : want[i]), "pixel %d, lines %d", i,
                      lines);
    }
    tw_runtime_destroy(rt);
}

Test(watershed, a_ridge_goes_to_the_lower_side)
{
    /* Levels 1 2 3 9 8 7 0 with markers at both ends: the flood from the right (level 0)
     * climbs 7, 8 before the left one reaches 3; the ridge 9 is reached from 3 (key (9,1) both
     * ways) and its best predecessor is the one of lowest key, 3 on the left: label 1. */
    uint8_t img[7] = {1, 2, 3, 9, 8, 7, 0};
    uint8_t mark[7] = {1, 0, 0, 0, 0, 0, 2};
    uint32_t got[7], want[7] = {1, 1, 1, 1, 2, 2, 2};
    tw_runtime *rt = make_runtime(1);
    tw_watershed_opts o;
    char msg[256] = "";

    tw_watershed_opts_init(&o);
    o.image = (tw_host_image){img, 7, 1, 0, TW_U8};
    o.markers_image = (tw_host_image){mark, 7, 1, 0, TW_U8};
    o.result = (tw_host_image){got, 7, 1, 0, TW_U32};
    o.tile_w = o.tile_h = 1;
    cr_assert(eq(int, run_ws(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    for (int i = 0; i < 7; i++)
        cr_assert(eq(u32, got[i], want[i]), "pixel %d", i);
    tw_runtime_destroy(rt);
}

Test(watershed, bad_inputs_are_refused_with_one_message)
{
    /* Sizes that differ, a float marker image, connectivity 6, no output, options not
     * initialised: TW_E_INVALID at submission with a message. A NaN level and a marker label
     * of 4294967295 fail the job, naming the first such pixel in raster order. */
    float fimg[6] = {1, 2, 3, 4, 5, 6};
    uint32_t mark[6] = {1, 0, 0, 0, 0, 2}, got[6];
    uint8_t small[4] = {0};
    tw_runtime *rt = make_runtime(2);
    tw_watershed_opts o;
    tw_job *job = NULL;
    tw_error err;
    char msg[256] = "";

    tw_watershed_opts_init(&o);
    o.image = (tw_host_image){fimg, 3, 2, 0, TW_F32};
    o.markers_image = (tw_host_image){small, 2, 2, 0, TW_U8};
    o.result = (tw_host_image){got, 3, 2, 0, TW_U32};
    cr_assert(eq(int, tw_watershed_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "markers image is 2x2 but the image is 3x2") != NULL, "%s", err.message);
    o.markers_image = (tw_host_image){fimg, 3, 2, 0, TW_F32};
    cr_assert(eq(int, tw_watershed_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "markers") != NULL, "%s", err.message);
    o.markers_image = (tw_host_image){mark, 3, 2, 0, TW_U32};
    o.conn = 6;
    cr_assert(eq(int, tw_watershed_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "connectivity 6") != NULL, "%s", err.message);
    o.conn = 4;
    o.result.data = NULL;
    cr_assert(eq(int, tw_watershed_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "no output") != NULL, "%s", err.message);
    o.result = (tw_host_image){got, 3, 2, 0, TW_U16};
    cr_assert(eq(int, tw_watershed_submit(rt, &o, &job, &err), TW_E_INVALID));
    o.result = (tw_host_image){got, 3, 2, 0, TW_U32};
    o.struct_size = 1;
    cr_assert(eq(int, tw_watershed_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "tw_watershed_opts_init") != NULL, "%s", err.message);
    o.struct_size = sizeof o;

    fimg[4] = NAN;
    fimg[2] = NAN;
    for (int32_t t = 1; t <= 3; t++) {
        o.tile_w = o.tile_h = t;
        cr_assert(eq(int, run_ws(rt, &o, msg, sizeof msg), TW_E_INVALID));
        cr_assert(strstr(msg, "watershed: the image is NaN at (2, 0)") != NULL, "%s", msg);
    }
    fimg[4] = fimg[2] = 1;
    mark[4] = UINT32_MAX;
    cr_assert(eq(int, run_ws(rt, &o, msg, sizeof msg), TW_E_INVALID));
    cr_assert(strstr(msg, "marker label 4294967295 at (1, 1): the flood reserves that value, "
                          "marker labels go up to 4294967294") != NULL, "%s", msg);
    tw_runtime_destroy(rt);
}
