/* SPDX-License-Identifier: MIT */
/* tilewave tests: the objects job (tw_objects_submit): the same bytes for any workers and band
 * height, against a naive reference. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tilewave.h"
#include "twtest.h"
#include "twtest_label.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

/* The bands scan at once and their pieces merge in band order: whatever the workers and the
 * band height, the table must be the one the band-after-band scan wrote. */
static const int workers[] = {1, 2, 3, 7};
static const int bands[] = {1, 2, 7, 64};

enum { NW = sizeof workers / sizeof workers[0], NB = sizeof bands / sizeof bands[0] };

/* Run objects on the files lp (labels) and ip (intensity, or NULL) into out; the report too. */
static void
run_objects(tw_runtime *rt, const char *lp, const char *ip, const char *out, int band_h,
            tw_objects_report *rep)
{
    tw_objects_opts o;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;

    tw_objects_opts_init(&o);
    tw_objects_report_init(rep);
    o.labels.path = lp;
    o.intensity.path = ip;
    o.output = out;
    o.band_h = band_h;
    o.report = rep;
    cr_assert(eq(int, tw_objects_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    st = tw_job_wait(job, -1);
    cr_assert(eq(int, st, TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
}

/* The sides of pixel (x, y) between its label and anything else (the image's edge too). */
static uint64_t
sides(const uint32_t *lab, int w, int h, int x, int y)
{
    uint32_t l = lab[y * w + x];

    return (uint64_t)((x == 0 || lab[y * w + x - 1] != l) +
                      (x == w - 1 || lab[y * w + x + 1] != l) +
                      (y == 0 || lab[(y - 1) * w + x] != l) +
                      (y == h - 1 || lab[(y + 1) * w + x] != l));
}

/* The naive measures of label l: every pixel of the image looked at. */
typedef struct ref_obj {
    uint64_t area, sx, sy, perim, isum;
    int64_t x0, y0, x1, y1;
    uint32_t imin, imax;
} ref_obj;

/* One CSV row per label 1..n in order of (last row, label), every column equal to the naive
 * measures (labels connected: one row each). */
static void
check_csv(const char *csv, const uint32_t *lab, const uint16_t *in, int w, int h, uint32_t n)
{
    ref_obj *r = calloc((size_t)n + 1, sizeof *r);
    const char *p = strchr(csv, '\n');
    int64_t prev_last = -1;
    uint64_t prev_label = 0, rows = 0;

    cr_assert(r != NULL);
    for (uint32_t l = 1; l <= n; l++) {
        r[l].x0 = r[l].y0 = INT64_MAX;
        r[l].x1 = r[l].y1 = -1;
        r[l].imin = UINT32_MAX;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t l = lab[y * w + x];
            ref_obj *o = &r[l];

            if (!l)
                continue;
            o->area++;
            o->sx += (uint64_t)x;
            o->sy += (uint64_t)y;
            o->x0 = x < o->x0 ? x : o->x0;
            o->y0 = y < o->y0 ? y : o->y0;
            o->x1 = x > o->x1 ? x : o->x1;
            o->y1 = y;
            if (in) {
                o->isum += in[y * w + x];
                o->imin = in[y * w + x] < o->imin ? in[y * w + x] : o->imin;
                o->imax = in[y * w + x] > o->imax ? in[y * w + x] : o->imax;
            }
            o->perim += sides(lab, w, h, x, y);
        }
    cr_assert(p != NULL);
    for (p++; *p; p = strchr(p, '\n') + 1) {
        unsigned long long l, area, bx, by, bw, bh, per;
        double cx, cy, mean = 0;
        unsigned imin = 0, imax = 0;
        int k = sscanf(p, "%llu,%llu,,%lf,%lf,%llu,%llu,%llu,%llu,%llu,%lf,%u,%u", &l, &area, &cx,
                       &cy, &bx, &by, &bw, &bh, &per, &mean, &imin, &imax);
        ref_obj *o;

        cr_assert(eq(int, k, in ? 12 : 9), "row %s", p);
        cr_assert(l >= 1 && l <= n, "label %llu", l);
        o = &r[l];
        cr_assert(eq(u64, area, o->area), "label %llu", l);
        o->area = 0; /* seen */
        cr_assert(fabs(cx - (double)o->sx / (double)area) < 1e-9 * (1 + cx), "label %llu", l);
        cr_assert(fabs(cy - (double)o->sy / (double)area) < 1e-9 * (1 + cy), "label %llu", l);
        cr_assert(eq(i64, (int64_t)bx, o->x0), "label %llu", l);
        cr_assert(eq(i64, (int64_t)by, o->y0), "label %llu", l);
        cr_assert(eq(i64, (int64_t)bw, o->x1 - o->x0 + 1), "label %llu", l);
        cr_assert(eq(i64, (int64_t)bh, o->y1 - o->y0 + 1), "label %llu", l);
        cr_assert(eq(u64, per, o->perim), "label %llu", l);
        if (in) {
            cr_assert(fabs(mean - (double)o->isum / (double)area) < 1e-9 * (1 + mean));
            cr_assert(eq(u32, imin, o->imin), "label %llu", l);
            cr_assert(eq(u32, imax, o->imax), "label %llu", l);
        }
        cr_assert(o->y1 > prev_last || (o->y1 == prev_last && l > prev_label),
                  "label %llu out of order", l);
        prev_last = o->y1;
        prev_label = l;
        rows++;
    }
    cr_assert(eq(u64, rows, n));
    free(r);
}

/* Every feature's rings: the signed areas sum to the pixel count (holes negative) and the
 * lengths to the perimeter; a point is [x,y], a ring an array of points. */
static void
check_geojson(const char *g, const uint32_t *lab, int w, int h, uint32_t n)
{
    uint64_t *area = calloc((size_t)n + 1, sizeof *area), *per = calloc((size_t)n + 1, 8);
    const char *f = g;
    uint64_t features = 0;

    cr_assert(area && per);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t l = lab[y * w + x];

            if (!l)
                continue;
            area[l]++;
            per[l] += sides(lab, w, h, x, y);
        }
    while ((f = strstr(f, "\"coordinates\":"))) {
        const char *p = f + strlen("\"coordinates\":"), *end = strstr(p, "]},\"properties\"");
        double a2 = 0, len = 0, px = 0, py = 0;
        int npts = 0;
        unsigned long long l;

        cr_assert(end != NULL);
        cr_assert(eq(int, sscanf(strstr(end, "\"label\":"), "\"label\":%llu", &l), 1));
        cr_assert(l >= 1 && l <= n);
        for (; p < end; p++) {
            if (*p == '[' && (p[1] == '-' || (p[1] >= '0' && p[1] <= '9'))) {
                char *e;
                double x = strtod(p + 1, &e), y = strtod(e + 1, &e);

                if (npts > 0) {
                    a2 += px * y - x * py;
                    len += fabs(x - px) + fabs(y - py);
                }
                px = x;
                py = y;
                npts++;
                p = e;
            } else if (*p == ']' && npts > 0) { /* the ring ends: closed, 4 corners or more */
                cr_assert(npts >= 5, "label %llu: a ring of %d points", l, npts);
                npts = 0;
            }
        }
        /* the signed areas of shells and holes sum to the pixels; the lengths to the sides */
        cr_assert(eq(dbl, a2, 2.0 * (double)area[l]), "label %llu", l);
        cr_assert(eq(dbl, len, (double)per[l]), "label %llu", l);
        area[l] = 0;
        features++;
        f = end;
    }
    cr_assert(eq(u64, features, n));
    free(area);
    free(per);
}

/* Write labels (and intensity) to files, run every band height and worker count in both
 * formats: all outputs of one band height equal its one-worker output; with labels connected
 * (n of them) the one-worker outputs of all band heights are equal too (the order is last row,
 * label) and match the naive measures. */
static void
check_image(const uint32_t *lab, int w, int h, uint32_t n, bool connected, const char *what)
{
    char *dir = twtest_tmpdir(), *lp = twtest_path(dir, "lab.tif"),
         *ip = twtest_path(dir, "in.tif"), *out[2];
    uint16_t *in = malloc((size_t)w * (size_t)h * sizeof *in);
    tw_runtime *rt[NW];
    tw_error err;

    out[0] = twtest_path(dir, "o.csv");
    out[1] = twtest_path(dir, "o.geojson");
    cr_assert(in != NULL);
    for (int i = 0; i < w * h; i++)
        in[i] = (uint16_t)twtest_rnd(&rng, 65536);
    cr_assert(eq(int, twtest_write_image(lp, lab, w, h, TW_U32, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, twtest_write_image(ip, in, w, h, TW_U16, &err), TW_OK), "%s", err.message);
    for (int r = 0; r < NW; r++) {
        rt[r] = twtest_runtime(workers[r], "none", &err);
        cr_assert(rt[r] != NULL, "runtime: %s", err.message);
    }
    for (int fmt = 0; fmt < 2; fmt++)
        for (int inten = 0; inten < 2; inten++) {
            char *ref = NULL;
            int64_t max_active = -1;

            for (int b = 0; b < NB; b++) {
                char *one = NULL;

                for (int r = 0; r < NW; r++) {
                    tw_objects_report rep;
                    char *got;

                    run_objects(rt[r], lp, inten ? ip : NULL, out[fmt], bands[b], &rep);
                    got = twtest_slurp(out[fmt]);
                    cr_assert(got != NULL);
                    if (connected)
                        cr_assert(eq(u64, rep.objects, n), "%s", what);
                    cr_assert(eq(i32, rep.band_h, bands[b]));
                    if (!one) {
                        one = got;
                        max_active = rep.max_active;
                        continue;
                    }
                    cr_assert(eq(i64, rep.max_active, max_active), "%s", what);
                    cr_assert(strcmp(got, one) == 0,
                              "%s %s%s: %d workers, bands of %d rows: not the one-worker bytes",
                              what, fmt ? "geojson" : "csv", inten ? " intensity" : "",
                              workers[r], bands[b]);
                    free(got);
                }
                if (!connected) {
                    free(one);
                    continue;
                }
                if (!ref) {
                    ref = one;
                    if (fmt == 0)
                        check_csv(ref, lab, inten ? in : NULL, w, h, n);
                    else
                        check_geojson(ref, lab, w, h, n);
                    continue;
                }
                cr_assert(strcmp(one, ref) == 0, "%s %s: bands of %d rows give another table",
                          what, fmt ? "geojson" : "csv", bands[b]);
                free(one);
            }
            free(ref);
        }
    for (int r = 0; r < NW; r++)
        tw_runtime_destroy(rt[r]);
    twtest_rmtree(dir);
    free(in);
    free(lp);
    free(ip);
    free(out[0]);
    free(out[1]);
    free(dir);
}

/* Labels 1..n of a mask, 4- or 8-connected (the flood fill), as 32-bit; n returned. */
static uint32_t
label_mask(const uint8_t *m, int w, int h, int conn, uint32_t *lab)
{
    uint64_t *l64 = malloc((size_t)w * (size_t)h * 8);
    uint64_t n;

    cr_assert(l64 != NULL);
    n = twtest_label_naive(m, w, h, conn, l64);
    for (int i = 0; i < w * h; i++)
        lab[i] = (uint32_t)l64[i];
    free(l64);
    return (uint32_t)n;
}

/* One timeout for all (as test_mrecon.c): Criterion's runner leaks 48 bytes when a test's
 * deadline falls before one already pending (a shorter timeout started later, with --jobs 2),
 * which LeakSanitizer reports in the ci-asan build. */
TestSuite(objects, .timeout = TWTEST_TIMEOUT(300));

/* A square spiral, one pixel wide, and a comb whose teeth (U shapes) join only in its last
 * row: pieces of one object in many bands that meet only in a later one. */
Test(objects, spiral_and_comb_any_workers_any_bands)
{
    enum { W = 61, H = 47 };
    static uint8_t m[W * H];
    static uint32_t lab[W * H];

    for (int shape = 0; shape < 2; shape++) {
        memset(m, 0, sizeof m);
        if (shape == 0) {
            int x0 = 0, y0 = 0, x1 = W - 1, y1 = H - 1;

            while (x0 <= x1 && y0 <= y1) {
                for (int x = x0; x <= x1; x++)
                    m[y0 * W + x] = 1;
                for (int y = y0; y <= y1; y++)
                    m[y * W + x1] = 1;
                for (int x = x0; x <= x1; x++)
                    m[y1 * W + x] = 1;
                for (int y = y0 + 2; y <= y1; y++)
                    m[y * W + x0] = 1;
                x0 += 2;
                y0 += 2;
                x1 -= 2;
                y1 -= 2;
                if (x0 <= x1)
                    m[y0 * W + x0 - 1] = 1;
            }
        } else {
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    m[y * W + x] = (uint8_t)((x % 4 == 0 && y >= x % 9) || y == H - 1 ||
                                             (x % 4 == 2 && y % 5 == 1));
        }
        check_image(lab, W, H, label_mask(m, W, H, 4, lab), true, shape ? "comb" : "spiral");
    }
}

/* Rings with holes and islands in the holes (other labels), diagonal chains touching only at
 * corners (one 8-connected label: a MultiPolygon), a checkerboard of 8-connected pixels, and
 * a block crossing every band. */
Test(objects, holes_corners_and_tall_objects)
{
    enum { W = 53, H = 71 };
    static uint8_t m[W * H];
    static uint32_t lab[W * H];

    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int dx = x - 26, dy = y - 20;
            double d = sqrt((double)(dx * dx + dy * dy));
            bool ring = (d >= 4 && d < 7) || (d >= 11 && d < 14) || d < 1.5;
            bool diag = y >= 36 && y < 50 && x < 30 && ((x - y + 99) % 5 == 0 || (x + y) % 7 == 0);
            bool check = y >= 36 && y < 44 && x >= 34 && (x + y) % 2 == 0;
            bool tall = x >= 48 && x < 51 && y >= 2;

            m[y * W + x] = (uint8_t)(ring || diag || check || tall || (y >= 60 && x % 7 != 3));
        }
    check_image(lab, W, H, label_mask(m, W, H, 8, lab), true, "holes and corners");
}

/* Random masks of every kind (noise, blobs, winding stripes, full), 4- and 8-connected. */
Test(objects, random_labels_any_workers_any_bands)
{
    for (int it = 0; it < 6; it++) {
        int w = 20 + (int)twtest_rnd(&rng, 60), h = 20 + (int)twtest_rnd(&rng, 80);
        uint8_t *m = malloc((size_t)(w * h));
        uint32_t *lab = malloc((size_t)(w * h) * 4);
        char what[64];

        cr_assert(m && lab);
        twtest_label_mask(m, w, h, it % 4, 30 + (int)twtest_rnd(&rng, 40), &rng);
        snprintf(what, sizeof what, "random %d (%dx%d, mode %d)", it, w, h, it % 4);
        check_image(lab, w, h, label_mask(m, w, h, it % 2 ? 8 : 4, lab), true, what);
        free(m);
        free(lab);
    }
}

/* Labels that are not connected (pieces of one label apart by rows without it, whose objects
 * depend on the band height) and labels taken at random per pixel: whatever the workers, the
 * bytes of the band-after-band scan for each band height. */
Test(objects, labels_not_connected_any_workers)
{
    enum { W = 37, H = 59 };
    static uint32_t lab[W * H];

    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint32_t l = 0;

            if (y < 30)
                l = (uint32_t)(1 + (y / 4) % 3 + 3 * (x / 9)) *
                    (uint32_t)(y % 4 != 3 && x % 9 != 8);
            else if (twtest_rnd(&rng, 3))
                l = 1 + twtest_rnd(&rng, 5);
            lab[y * W + x] = l;
        }
    check_image(lab, W, H, 0, false, "not connected");
}

/* A label image whose middle tiles do not decode fails the job in a band mid-way, with the
 * scans and merges of other bands under way: whatever the workers, nothing is left at the
 * output's path. */
Test(objects, a_bad_band_fails_and_leaves_no_file)
{
    enum { W = 64, H = 96 };
    static uint32_t lab[W * H];
    char *dir = twtest_tmpdir(), *lp = twtest_path(dir, "lab.tif"),
         *out = twtest_path(dir, "o.geojson");
    tw_error err;
    FILE *f;
    long n;

    for (int i = 0; i < W * H; i++)
        lab[i] = (uint32_t)(1 + (i / W) / 5 * 8 + (i % W) / 8) * (uint32_t)((i / W) % 5 != 4);
    cr_assert(eq(int, twtest_write_image(lp, lab, W, H, TW_U32, &err), TW_OK), "%s", err.message);
    /* the middle third of the file's bytes (deflated tiles) made garbage */
    f = fopen(lp, "r+b");
    cr_assert(f != NULL);
    cr_assert(fseek(f, 0, SEEK_END) == 0);
    n = ftell(f);
    cr_assert(n > 0);
    cr_assert(fseek(f, n / 3, SEEK_SET) == 0);
    for (long i = n / 3; i < n / 2; i++)
        fputc(0xAB, f);
    cr_assert(fclose(f) == 0);
    for (int r = 0; r < NW; r++) {
        tw_runtime *rt = twtest_runtime(workers[r], "none", &err);

        cr_assert(rt != NULL, "runtime: %s", err.message);
        for (int b = 0; b < NB; b++) {
            tw_objects_opts o;
            tw_job *job = NULL;

            tw_objects_opts_init(&o);
            o.labels.path = lp;
            o.output = out;
            o.band_h = bands[b];
            cr_assert(eq(int, tw_objects_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
            cr_assert(ne(int, tw_job_wait(job, -1), TW_OK), "%d workers, bands of %d rows",
                      workers[r], bands[b]);
            tw_job_destroy(job);
            cr_assert(not(twtest_exists(out)), "%d workers, bands of %d rows: a file was left",
                      workers[r], bands[b]);
        }
        tw_runtime_destroy(rt);
    }
    twtest_rmtree(dir);
    free(lp);
    free(out);
    free(dir);
}

/* A job canceled while its bands are in flight ends canceled (or done, when it won the race)
 * and leaves no file unless it completed. */
Test(objects, cancel_leaves_no_file)
{
    enum { W = 300, H = 400 };
    static uint32_t lab[W * H];
    char *dir = twtest_tmpdir(), *lp = twtest_path(dir, "lab.tif"),
         *out = twtest_path(dir, "o.geojson");
    tw_error err;

    for (int i = 0; i < W * H; i++)
        lab[i] = (uint32_t)(1 + (i / W) / 3 * 100 + (i % W) / 3) * (uint32_t)((i / W) % 3 != 2);
    cr_assert(eq(int, twtest_write_image(lp, lab, W, H, TW_U32, &err), TW_OK), "%s", err.message);
    for (int r = 0; r < NW; r++) {
        tw_runtime *rt = twtest_runtime(workers[r], "none", &err);
        tw_objects_opts o;
        tw_job *job = NULL;
        tw_status st;

        cr_assert(rt != NULL, "runtime: %s", err.message);
        tw_objects_opts_init(&o);
        o.labels.path = lp;
        o.output = out;
        o.band_h = 1;
        cr_assert(eq(int, tw_objects_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
        tw_job_cancel(job);
        st = tw_job_wait(job, -1);
        tw_job_destroy(job);
        cr_assert(st == TW_E_CANCELED || st == TW_OK, "%d workers: %s", workers[r],
                  tw_status_string(st));
        cr_assert(eq(int, twtest_exists(out), st == TW_OK), "%d workers", workers[r]);
        if (st == TW_OK)
            remove(out);
        tw_runtime_destroy(rt);
    }
    twtest_rmtree(dir);
    free(lp);
    free(out);
    free(dir);
}
