/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CPU distance transforms (exact and wavefront) against brute force. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest_stop.h"
#include "twtest_rnd.h"

#define PAD_BYTE 0xA5

/* ---- the reference ------------------------------------------------------------------------ */

/* Squared distance with spacing, in the order the contract fixes. */
static double
d2_spacing(int64_t dx, int64_t dy, double sx, double sy)
{
    return (sx * sx) * (double)(dx * dx) + (sy * sy) * (double)(dy * dy);
}

/*
 * Brute force: every pixel against every background pixel (img[] compact, 0 = background).
 * Isotropic: exact int64 in d2i (INT64_MAX: no background). Anisotropic: the minimum of the
 * double formula in d2d (+inf: no background). Either pointer may be NULL.
 */
static void
ref_edt(const uint8_t *img, int32_t w, int32_t h, double sx, double sy, int64_t *d2i, double *d2d)
{
    size_t n = (size_t)w * (size_t)h, nb = 0;
    int32_t *bx = malloc((n + 1) * sizeof *bx), *by = malloc((n + 1) * sizeof *by);

    bool small = (int64_t)w * w + (int64_t)h * h < INT32_MAX;

    cr_assert(bx && by);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            if (img[(size_t)y * (size_t)w + (size_t)x] == 0) {
                bx[nb] = x;
                by[nb++] = y;
            }
    /* Two plain loops (no test inside) so that the compiler vectorises the inner one. */
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            size_t p = (size_t)y * (size_t)w + (size_t)x;

            if (d2i && small) {
                /* every d2 is below 2^31 here: int32 is exact and vectorises better */
                int32_t bi = INT32_MAX;

                for (size_t k = 0; k < nb; k++) {
                    int32_t dx = x - bx[k], dy = y - by[k], d = dx * dx + dy * dy;

                    bi = d < bi ? d : bi;
                }
                d2i[p] = nb ? bi : INT64_MAX;
            } else if (d2i) {
                int64_t bi = INT64_MAX;

                for (size_t k = 0; k < nb; k++) {
                    int64_t dx = x - bx[k], dy = y - by[k], d = dx * dx + dy * dy;

                    bi = d < bi ? d : bi;
                }
                d2i[p] = bi;
            }
            if (d2d) {
                double bd = INFINITY;

                for (size_t k = 0; k < nb; k++) {
                    double d = d2_spacing(x - bx[k], y - by[k], sx, sy);

                    bd = d < bd ? d : bd;
                }
                d2d[p] = bd;
            }
        }
    }
    free(bx);
    free(by);
}

/* The contract's conversions of an exact squared distance. */
static float
want_f32(double d2)
{
    return (float)sqrt(d2);
}

static uint16_t
want_u16(double d2)
{
    double r = floor(sqrt(d2) + 0.5);

    return r >= 65535.0 ? 65535 : (uint16_t)r;
}

/* ---- views with padded rows ----------------------------------------------------------------- */

typedef struct image {
    uint8_t *buf;
    size_t bytes;
    tw_tile_view v;
} image;

/* A w x h view with `extra` padding samples per row, every byte PAD_BYTE. */
static image
image_new(int32_t w, int32_t h, int32_t ch, tw_sample_type t, int64_t extra)
{
    image im;
    size_t ss = tw_sample_size(t);

    im.v.stride = (int64_t)(((size_t)w * (size_t)ch + (size_t)extra) * ss);
    im.bytes = (size_t)im.v.stride * (size_t)h + 1;
    im.buf = malloc(im.bytes);
    cr_assert_not_null(im.buf);
    memset(im.buf, PAD_BYTE, im.bytes);
    im.v.data = im.buf;
    im.v.w = w;
    im.v.h = h;
    im.v.channels = ch;
    im.v.type = t;
    im.v.x0 = 0;
    im.v.y0 = 0;
    return im;
}

static image
image_bin(const uint8_t *img, int32_t w, int32_t h, int64_t extra)
{
    image im = image_new(w, h, 1, TW_U8, extra);

    for (int32_t y = 0; y < h; y++)
        memcpy(im.buf + (size_t)y * (size_t)im.v.stride, img + (size_t)y * (size_t)w, (size_t)w);
    return im;
}

static void *
px(const image *im, int32_t x, int32_t y)
{
    return im->buf + (size_t)y * (size_t)im->v.stride +
           (size_t)x * (size_t)im->v.channels * tw_sample_size(im->v.type);
}

static float
at_f32(const image *im, int32_t x, int32_t y)
{
    float v;

    memcpy(&v, px(im, x, y), sizeof v);
    return v;
}

static uint32_t
at_u32(const image *im, int32_t x, int32_t y, int c)
{
    uint32_t v;

    memcpy(&v, (uint8_t *)px(im, x, y) + 4 * c, sizeof v);
    return v;
}

static uint16_t
at_u16(const image *im, int32_t x, int32_t y)
{
    uint16_t v;

    memcpy(&v, px(im, x, y), sizeof v);
    return v;
}

/* The bytes after each row and after the last one still hold PAD_BYTE. */
static void
check_padding(const image *im, const char *what)
{
    size_t row = (size_t)im->v.w * (size_t)im->v.channels * tw_sample_size(im->v.type);

    for (int32_t y = 0; y < im->v.h; y++)
        for (size_t i = row; i < (size_t)im->v.stride; i++)
            if (im->buf[(size_t)y * (size_t)im->v.stride + i] != PAD_BYTE)
                cr_fatal("%s: padding written at row %d byte %zu", what, y, i);
    cr_assert(eq(u8, im->buf[im->bytes - 1], PAD_BYTE), "%s: byte after the last row", what);
}

/* Two views hold the same samples (padding ignored). */
static void
check_same(const image *a, const image *b, const char *what)
{
    size_t row = (size_t)a->v.w * (size_t)a->v.channels * tw_sample_size(a->v.type);

    for (int32_t y = 0; y < a->v.h; y++)
        if (memcmp(a->buf + (size_t)y * (size_t)a->v.stride,
                   b->buf + (size_t)y * (size_t)b->v.stride, row) != 0)
            cr_fatal("%s: row %d differs", what, y);
}

static twi_edt_band
band_whole(int format, double sx, double sy)
{
    twi_edt_band b;

    memset(&b, 0, sizeof b);
    b.sx = sx;
    b.sy = sy;
    b.format = format;
    return b;
}

static const tw_sample_type fmt_type[] = {TW_F32, TW_U16, TW_U32};

/* ---- checking results --------------------------------------------------------------------- */

/* Every index is a background pixel at exactly the squared distance want (isotropic), or
 * (UINT32_MAX, UINT32_MAX) when there is no background. */
static void
check_idx_iso(const image *idx, const uint8_t *img, const int64_t *want, const char *what)
{
    int32_t w = idx->v.w, h = idx->v.h;

    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            uint32_t r = at_u32(idx, x, y, 0), c = at_u32(idx, x, y, 1);
            int64_t wd = want[(size_t)y * (size_t)w + (size_t)x];

            if (wd == INT64_MAX) {
                if (r != UINT32_MAX || c != UINT32_MAX)
                    cr_fatal("%s: (%d,%d) index (%u,%u) without background", what, x, y, r, c);
                continue;
            }
            if (r >= (uint32_t)h || c >= (uint32_t)w || img[(size_t)r * (size_t)w + c] != 0)
                cr_fatal("%s: (%d,%d) index (%u,%u) is not background", what, x, y, r, c);
            int64_t dx = (int64_t)x - c, dy = (int64_t)y - r;

            if (dx * dx + dy * dy != wd)
                cr_fatal("%s: (%d,%d) index (%u,%u) at d2 %lld, want %lld", what, x, y, r, c,
                         (long long)(dx * dx + dy * dy), (long long)wd);
        }
    }
}

/* Output of format `format` against the exact isotropic d2. */
static void
check_out_iso(const image *out, int format, const int64_t *want, const char *what)
{
    int32_t w = out->v.w, h = out->v.h;

    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            int64_t wd = want[(size_t)y * (size_t)w + (size_t)x];
            double d = wd == INT64_MAX ? INFINITY : (double)wd;

            if (format == TWI_EDT_SQ32) {
                uint32_t got = at_u32(out, x, y, 0);
                uint32_t exp = wd > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)wd;

                if (got != exp)
                    cr_fatal("%s: sq32 (%d,%d) got %u want %u", what, x, y, got, exp);
            } else if (format == TWI_EDT_F32) {
                float got = at_f32(out, x, y), exp = want_f32(d);

                if (memcmp(&got, &exp, sizeof got) != 0)
                    cr_fatal("%s: f32 (%d,%d) got %.9g want %.9g", what, x, y, got, exp);
            } else {
                uint16_t got = at_u16(out, x, y), exp = want_u16(d);

                if (got != exp)
                    cr_fatal("%s: u16 (%d,%d) got %u want %u", what, x, y, got, exp);
            }
        }
    }
}

/* ---- generated images --------------------------------------------------------------------- */

enum { IMG_NOISE, IMG_SINGLE, IMG_DISKS, IMG_LINES, IMG_RECTS, N_IMG_KINDS };

/* A random foreground value: anything nonzero is foreground. */
static uint8_t
fg(uint64_t *rng)
{
    return (uint8_t)(1 + twtest_rnd(rng, 255));
}

/* Background fraction in permille, from "almost none" to 99 %. */
static uint32_t
bg_permille(uint64_t *rng)
{
    static const uint32_t pm[] = {1, 5, 10, 50, 200, 500, 800, 950, 990};

    if (twtest_rnd(rng, 4))
        return pm[twtest_rnd(rng, sizeof pm / sizeof pm[0])];
    return twtest_rnd(rng, 1000);
}

static void
gen_image(uint8_t *img, int32_t w, int32_t h, int kind, uint32_t pm, uint64_t *rng)
{
    size_t n = (size_t)w * (size_t)h;

    switch (kind) {
    case IMG_NOISE:
        for (size_t k = 0; k < n; k++)
            img[k] = twtest_rnd(rng, 1000) < pm ? 0 : fg(rng);
        break;
    case IMG_SINGLE: {
        /* one background pixel, often in a corner (the largest distances) */
        static const int corner[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
        int32_t x = (int32_t)twtest_rnd(rng, (uint32_t)w);
        int32_t y = (int32_t)twtest_rnd(rng, (uint32_t)h);
        uint32_t c = twtest_rnd(rng, 6);

        for (size_t k = 0; k < n; k++)
            img[k] = fg(rng);
        if (c < 4) {
            x = corner[c][0] ? w - 1 : 0;
            y = corner[c][1] ? h - 1 : 0;
        }
        img[(size_t)y * (size_t)w + (size_t)x] = 0;
        break;
    }
    case IMG_DISKS: {
        /* foreground disks on background, or background disks in foreground */
        int nd = 1 + (int)twtest_rnd(rng, 5);
        bool holes = twtest_rnd(rng, 2);

        for (size_t k = 0; k < n; k++)
            img[k] = holes ? fg(rng) : 0;
        for (int d = 0; d < nd; d++) {
            int64_t cx = twtest_rnd(rng, (uint32_t)w), cy = twtest_rnd(rng, (uint32_t)h);
            int64_t r = 1 + twtest_rnd(rng, (uint32_t)(w > h ? w : h) / 2 + 1);

            for (int32_t y = 0; y < h; y++)
                for (int32_t x = 0; x < w; x++)
                    if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r)
                        img[(size_t)y * (size_t)w + (size_t)x] = holes ? 0 : fg(rng);
        }
        break;
    }
    case IMG_LINES: {
        /* background lines: rows, columns, diagonals, in foreground */
        int nl = 1 + (int)twtest_rnd(rng, 3);

        for (size_t k = 0; k < n; k++)
            img[k] = fg(rng);
        for (int l = 0; l < nl; l++) {
            uint32_t t = twtest_rnd(rng, 3);
            int32_t p = (int32_t)twtest_rnd(rng, (uint32_t)(t == 0 ? h : w));

            for (int32_t y = 0; y < h; y++)
                for (int32_t x = 0; x < w; x++)
                    if ((t == 0 && y == p) || (t == 1 && x == p) || (t == 2 && x - y == p))
                        img[(size_t)y * (size_t)w + (size_t)x] = 0;
        }
        break;
    }
    case IMG_RECTS: {
        /* background rectangles (ties between equidistant sites along their sides) */
        int nr = 1 + (int)twtest_rnd(rng, 4);

        for (size_t k = 0; k < n; k++)
            img[k] = fg(rng);
        for (int r = 0; r < nr; r++) {
            int32_t x0 = (int32_t)twtest_rnd(rng, (uint32_t)w);
            int32_t y0 = (int32_t)twtest_rnd(rng, (uint32_t)h);
            int32_t x1 = x0 + 1 + (int32_t)twtest_rnd(rng, (uint32_t)(w - x0 < 8 ? w - x0 : 8));
            int32_t y1 = y0 + 1 + (int32_t)twtest_rnd(rng, (uint32_t)(h - y0 < 8 ? h - y0 : 8));

            for (int32_t y = y0; y < y1; y++)
                for (int32_t x = x0; x < x1; x++)
                    img[(size_t)y * (size_t)w + (size_t)x] = 0;
        }
        break;
    }
    }
}

/* Keep brute force affordable: on images where pixels x background pixels would exceed
 * 1e8, keep each background pixel with the probability that brings it down to that (the
 * shapes stay, sparser). */
static void
thin_background(uint8_t *img, int32_t w, int32_t h, uint64_t *rng)
{
    size_t n = (size_t)w * (size_t)h, nb = 0, keep;

    for (size_t k = 0; k < n; k++)
        nb += img[k] == 0;
    keep = (size_t)1e8 / n;
    if (nb <= keep)
        return;
    for (size_t k = 0; k < n; k++)
        if (img[k] == 0 && twtest_rnd(rng, (uint32_t)nb) >= keep)
            img[k] = fg(rng);
}

/* Shapes: most tiny, some up to 80, a few up to 256 (brute force is O(pixels x background)). */
static void
random_shape(uint64_t *rng, int32_t *w, int32_t *h)
{
    uint32_t pick = twtest_rnd(rng, 100);

    if (pick < 2) {
        *w = 128 + (int32_t)twtest_rnd(rng, 129);
        *h = 128 + (int32_t)twtest_rnd(rng, 129);
    } else if (pick < 10) {
        *w = 1;
        *h = 1 + (int32_t)twtest_rnd(rng, 120);
        if (twtest_rnd(rng, 2)) {
            *w = *h;
            *h = 1;
        }
    } else if (pick < 30) {
        *w = 1 + (int32_t)twtest_rnd(rng, 80);
        *h = 1 + (int32_t)twtest_rnd(rng, 80);
    } else {
        *w = 1 + (int32_t)twtest_rnd(rng, 24);
        *h = 1 + (int32_t)twtest_rnd(rng, 24);
    }
}

/* Run the exact kernel on img in every format (idx with sq32), check against the brute force
 * d2 `want`, and return the sq32 and idx views (caller frees) for further comparisons. */
static void
run_iso_all(const uint8_t *img, int32_t w, int32_t h, const int64_t *want, int nthreads,
            uint64_t *rng, const char *what, image *sq_out, image *idx_out)
{
    image b = image_bin(img, w, h, twtest_rnd(rng, 2) ? 0 : twtest_rnd(rng, 9));
    char label[160];

    for (int f = TWI_EDT_F32; f <= TWI_EDT_SQ32; f++) {
        twi_edt_band band = band_whole(f, 1.0, 1.0);
        image o = image_new(w, h, 1, fmt_type[f], twtest_rnd(rng, 2) ? 0 : 1 + twtest_rnd(rng, 5));
        bool with_idx = f == TWI_EDT_SQ32 || twtest_rnd(rng, 2);
        image ix = image_new(w, h, 2, TW_U32, twtest_rnd(rng, 2) ? 0 : 1 + twtest_rnd(rng, 3));
        tw_status st;

        snprintf(label, sizeof label, "%s %dx%d format %d threads %d", what, w, h, f, nthreads);
        st = twi_omp_edt(&b.v, &band, &o.v, with_idx ? &ix.v : NULL, nthreads);
        cr_assert(eq(int, st, TW_OK), "%s", label);
        check_out_iso(&o, f, want, label);
        check_padding(&o, label);
        if (with_idx) {
            check_idx_iso(&ix, img, want, label);
            check_padding(&ix, label);
        }
        if (f == TWI_EDT_SQ32) {
            *sq_out = o;
            *idx_out = ix;
        } else {
            free(o.buf);
            free(ix.buf);
        }
    }
    free(b.buf);
}

/* n random images: every format against brute force, and 1 vs 2 (or 3) threads identical. */
static void
random_iso_cases(int n, uint64_t seed)
{
    uint64_t rng = seed;

    for (int c = 0; c < n; c++) {
        int32_t w, h;
        int kind = (int)twtest_rnd(&rng, N_IMG_KINDS);
        uint32_t pm = bg_permille(&rng);
        uint8_t *img;
        int64_t *want;
        image s1, i1, s2, i2;
        char what[96];

        random_shape(&rng, &w, &h);
        img = malloc((size_t)w * (size_t)h);
        want = malloc((size_t)w * (size_t)h * sizeof *want);
        cr_assert(img && want);
        gen_image(img, w, h, kind, pm, &rng);
        thin_background(img, w, h, &rng);
        ref_edt(img, w, h, 1.0, 1.0, want, NULL);
        snprintf(what, sizeof what, "case %d kind %d bg %u/1000", c, kind, pm);
        run_iso_all(img, w, h, want, 1, &rng, what, &s1, &i1);
        run_iso_all(img, w, h, want, 2 + (int)twtest_rnd(&rng, 2), &rng, what, &s2, &i2);
        check_same(&s1, &s2, what);
        check_same(&i1, &i2, what);
        free(s1.buf);
        free(i1.buf);
        free(s2.buf);
        free(i2.buf);
        free(img);
        free(want);
    }
}

Test(edt_omp, random_images_match_brute_force_a)
{
    /* 1100 random images (1x1 to 256x256, noise from one background pixel to 99 %, single
     * pixels in corners, disks, lines, rectangles): sq32 equals brute force exactly, f32 is
     * (float)sqrt of the exact d2, u16 rounds and saturates as specified, every index is a
     * background pixel at exactly d2, padding untouched, 1 and 2-3 threads identical. */
    random_iso_cases(1100, 0x9E3779B97F4A7C15ull);
}

Test(edt_omp, random_images_match_brute_force_b)
{
    /* The same with another seed: together more than 2000 random images. */
    random_iso_cases(1100, 0xD1B54A32D192ED03ull);
}

/* ---- special images ----------------------------------------------------------------------- */

static void
check_special(const uint8_t *img, int32_t w, int32_t h, const char *what)
{
    uint64_t rng = 0x1234567ull + (uint64_t)w * 31u + (uint64_t)h;
    int64_t *want = malloc((size_t)w * (size_t)h * sizeof *want);
    image s1, i1, s2, i2;

    cr_assert_not_null(want);
    ref_edt(img, w, h, 1.0, 1.0, want, NULL);
    run_iso_all(img, w, h, want, 1, &rng, what, &s1, &i1);
    run_iso_all(img, w, h, want, 2, &rng, what, &s2, &i2);
    check_same(&s1, &s2, what);
    check_same(&i1, &i2, what);
    free(s1.buf);
    free(i1.buf);
    free(s2.buf);
    free(i2.buf);
    free(want);
}

Test(edt_omp, special_images_match_brute_force)
{
    /* Rows and columns of one pixel, one background pixel in each corner, full background
     * lines (row, column, diagonal), no background at all (+inf / 65535 / UINT32_MAX and
     * index UINT32_MAX twice), all background (0, own coordinates), checkerboards. */
    static const int32_t sizes[][2] = {{1, 1}, {1, 2}, {2, 1}, {1, 97}, {97, 1}, {2, 2},
                                       {3, 7}, {64, 1}, {1, 64}, {33, 65}, {100, 37}};

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int32_t w = sizes[s][0], h = sizes[s][1];
        size_t n = (size_t)w * (size_t)h;
        uint8_t *img = malloc(n);
        char what[96];

        cr_assert_not_null(img);
        for (int c = 0; c < 4; c++) {
            memset(img, 7, n);
            img[(size_t)(c & 2 ? h - 1 : 0) * (size_t)w + (size_t)(c & 1 ? w - 1 : 0)] = 0;
            snprintf(what, sizeof what, "corner %d", c);
            check_special(img, w, h, what);
        }
        memset(img, 255, n);
        check_special(img, w, h, "no background");
        memset(img, 0, n);
        check_special(img, w, h, "all background");
        for (size_t k = 0; k < n; k++)
            img[k] = (uint8_t)((k % (size_t)w + k / (size_t)w) % 2);
        check_special(img, w, h, "checkerboard");
        memset(img, 1, n);
        for (int32_t x = 0; x < w; x++)
            img[(size_t)(h / 2) * (size_t)w + (size_t)x] = 0;
        check_special(img, w, h, "row line");
        memset(img, 1, n);
        for (int32_t y = 0; y < h; y++)
            img[(size_t)y * (size_t)w + (size_t)(w / 3)] = 0;
        check_special(img, w, h, "column line");
        memset(img, 1, n);
        for (int32_t y = 0; y < h && y < w; y++)
            img[(size_t)y * (size_t)w + (size_t)y] = 0;
        check_special(img, w, h, "diagonal");
        free(img);
    }
}

Test(edt_omp, no_background_gives_inf_and_none)
{
    /* An image without background: f32 +inf, u16 65535, sq32 UINT32_MAX, index UINT32_MAX
     * twice, with 1 and 2 threads (checked literally, not through the reference). */
    int32_t w = 19, h = 11;
    uint8_t img[19 * 11];

    memset(img, 3, sizeof img);
    for (int nt = 1; nt <= 2; nt++) {
        for (int f = TWI_EDT_F32; f <= TWI_EDT_SQ32; f++) {
            image b = image_bin(img, w, h, 0), o = image_new(w, h, 1, fmt_type[f], 0);
            image ix = image_new(w, h, 2, TW_U32, 0);
            twi_edt_band band = band_whole(f, 1.0, 1.0);

            cr_assert(eq(int, twi_omp_edt(&b.v, &band, &o.v, &ix.v, nt), TW_OK));
            for (int32_t y = 0; y < h; y++) {
                for (int32_t x = 0; x < w; x++) {
                    if (f == TWI_EDT_F32)
                        cr_assert(isinf(at_f32(&o, x, y)) && at_f32(&o, x, y) > 0);
                    else if (f == TWI_EDT_U16)
                        cr_assert(eq(u16, at_u16(&o, x, y), 65535));
                    else
                        cr_assert(eq(u32, at_u32(&o, x, y, 0), UINT32_MAX));
                    cr_assert(eq(u32, at_u32(&ix, x, y, 0), UINT32_MAX));
                    cr_assert(eq(u32, at_u32(&ix, x, y, 1), UINT32_MAX));
                }
            }
            free(b.buf);
            free(o.buf);
            free(ix.buf);
        }
    }
}

Test(edt_omp, large_distances_saturate)
{
    /* One background pixel in the corner of a 1 x 70000 row and a 300 x 300 image:
     * sq32 exact up to 4.9e9 > UINT32_MAX saturates, u16 saturates at 65535 beyond 65534.5,
     * f32 is (float)sqrt of the exact d2. */
    int32_t w = 70000;
    uint8_t *img = malloc((size_t)w);
    int64_t *want = malloc((size_t)w * sizeof *want);
    uint64_t rng = 5;
    image s, ix;

    cr_assert(img && want);
    memset(img, 1, (size_t)w);
    img[0] = 0;
    for (int32_t x = 0; x < w; x++)
        want[x] = (int64_t)x * x;
    run_iso_all(img, w, 1, want, 2, &rng, "long row", &s, &ix);
    free(s.buf);
    free(ix.buf);
    /* the same as a column */
    run_iso_all(img, 1, w, want, 2, &rng, "long column", &s, &ix);
    free(s.buf);
    free(ix.buf);
    free(img);
    free(want);
}

/* ---- bands -------------------------------------------------------------------------------- */

/* Run twi_omp_edt on the band [y0, y0 + hb) of img with above / below computed naively from
 * the whole image, writing into the band's rows of the whole-image views o and ix. */
static void
run_band(const image *b, const uint8_t *img, int32_t w, int32_t h, int32_t y0, int32_t hb,
         twi_edt_band band, image *o, image *ix, int nthreads, bool null_arrays, const char *what)
{
    int32_t *above = malloc((size_t)w * sizeof *above), *below = malloc((size_t)w * sizeof *below);
    bool any_above = false, any_below = false;
    tw_tile_view bv = b->v, ov = o->v, iv;
    tw_status st;

    cr_assert(above && below);
    for (int32_t x = 0; x < w; x++) {
        above[x] = below[x] = TWI_EDT_NONE;
        for (int32_t y = 0; y < y0; y++)
            if (img[(size_t)y * (size_t)w + (size_t)x] == 0)
                above[x] = y;
        for (int32_t y = h - 1; y >= y0 + hb; y--)
            if (img[(size_t)y * (size_t)w + (size_t)x] == 0)
                below[x] = y;
        any_above |= above[x] != TWI_EDT_NONE;
        any_below |= below[x] != TWI_EDT_NONE;
    }
    band.y0 = y0;
    /* all-NONE arrays may be passed as NULL */
    band.above = null_arrays && !any_above ? NULL : above;
    band.below = null_arrays && !any_below ? NULL : below;
    bv.data = b->buf + (size_t)y0 * (size_t)b->v.stride;
    bv.h = hb;
    bv.y0 = y0;
    ov.data = o->buf + (size_t)y0 * (size_t)o->v.stride;
    ov.h = hb;
    ov.y0 = y0;
    if (ix) {
        iv = ix->v;
        iv.data = ix->buf + (size_t)y0 * (size_t)ix->v.stride;
        iv.h = hb;
        iv.y0 = y0;
    }
    st = twi_omp_edt(&bv, &band, &ov, ix ? &iv : NULL, nthreads);
    cr_assert(eq(int, st, TW_OK), "%s band %d+%d", what, y0, hb);
    free(above);
    free(below);
}

/* Cut img into bands of random heights; every format (and indices) must equal the whole-image
 * run. Indices too: the nearest row above and below a pixel in its column does not depend on
 * where the bands are, and the kernel breaks ties the same way, so the bytes are identical. */
static void
check_bands(const uint8_t *img, int32_t w, int32_t h, double sx, double sy, uint64_t *rng,
            const char *what)
{
    /* sq32 only without spacing */
    int nf = sx == 1.0 && sy == 1.0 ? 3 : 2;

    for (int f = TWI_EDT_F32; f < nf; f++) {
        twi_edt_band band = band_whole(f, sx, sy);
        image b = image_bin(img, w, h, twtest_rnd(rng, 3));
        image ow = image_new(w, h, 1, fmt_type[f], 0), ob = image_new(w, h, 1, fmt_type[f], 2);
        image iw = image_new(w, h, 2, TW_U32, 0), ib = image_new(w, h, 2, TW_U32, 1);
        bool with_idx = twtest_rnd(rng, 2);
        char label[160];

        cr_assert(eq(int, twi_omp_edt(&b.v, &band, &ow.v, &iw.v, 1), TW_OK));
        for (int32_t y0 = 0; y0 < h;) {
            int32_t hb = 1 + (int32_t)twtest_rnd(rng, twtest_rnd(rng, 2) ? 4 : (uint32_t)h);

            if (hb > h - y0)
                hb = h - y0;
            snprintf(label, sizeof label, "%s %dx%d format %d", what, w, h, f);
            run_band(&b, img, w, h, y0, hb, band, &ob, with_idx ? &ib : NULL,
                     1 + (int)twtest_rnd(rng, 3), twtest_rnd(rng, 2), label);
            y0 += hb;
        }
        snprintf(label, sizeof label, "%s %dx%d format %d bands", what, w, h, f);
        check_same(&ow, &ob, label);
        check_padding(&ob, label);
        if (with_idx) {
            check_same(&iw, &ib, label);
            check_padding(&ib, label);
        }
        free(b.buf);
        free(ow.buf);
        free(ob.buf);
        free(iw.buf);
        free(ib.buf);
    }
}

Test(edt_omp, bands_equal_whole_image)
{
    /* 1000 random images cut into bands of random heights (1 row up to the whole image), each
     * band run alone with `above` / `below` from the whole image (NULL when all NONE, half of
     * the time), into its rows of the whole output: identical to the whole-image run in every
     * format, indices included, isotropic and with spacing. This is what makes tiles exact. */
    uint64_t rng = 0xA0761D6478BD642Full;
    static const double sp[][2] = {{1, 1}, {1, 1}, {0.5, 1.25}, {2, 3}};

    for (int c = 0; c < 1000; c++) {
        int32_t w = 1 + (int32_t)twtest_rnd(&rng, 60), h = 1 + (int32_t)twtest_rnd(&rng, 60);
        int kind = (int)twtest_rnd(&rng, N_IMG_KINDS);
        uint8_t *img = malloc((size_t)w * (size_t)h);
        int s = (int)twtest_rnd(&rng, 4);
        char what[64];

        cr_assert_not_null(img);
        gen_image(img, w, h, kind, bg_permille(&rng), &rng);
        snprintf(what, sizeof what, "case %d kind %d spacing %g,%g", c, kind, sp[s][0], sp[s][1]);
        check_bands(img, w, h, sp[s][0], sp[s][1], &rng, what);
        free(img);
    }
}

Test(edt_omp, band_with_only_outside_background)
{
    /* A band with no background of its own: distances come from above / below only, and
     * from NONE on one side, including rows far outside (y0 near TWI_EDT_MAX_SIDE). */
    int32_t w = 9, hb = 5;
    uint8_t img[9 * 5];
    int32_t above[9], below[9];
    int64_t y0 = TWI_EDT_MAX_SIDE - 40;

    memset(img, 1, sizeof img);
    for (int32_t x = 0; x < w; x++) {
        above[x] = x == 4 ? (int32_t)y0 - 3 : TWI_EDT_NONE;
        below[x] = x == 0 ? (int32_t)y0 + hb + 2 : TWI_EDT_NONE;
    }
    for (int nt = 1; nt <= 2; nt++) {
        image b = image_bin(img, w, hb, 0), o = image_new(w, hb, 1, TW_U32, 0);
        image ix = image_new(w, hb, 2, TW_U32, 0);
        twi_edt_band band = band_whole(TWI_EDT_SQ32, 1.0, 1.0);

        band.y0 = y0;
        band.above = above;
        band.below = below;
        cr_assert(eq(int, twi_omp_edt(&b.v, &band, &o.v, &ix.v, nt), TW_OK));
        for (int32_t y = 0; y < hb; y++) {
            for (int32_t x = 0; x < w; x++) {
                int64_t yi = y0 + y, da = (x - 4) * (x - 4) + (yi - above[4]) * (yi - above[4]);
                int64_t db = (int64_t)x * x + (below[0] - yi) * (below[0] - yi);
                int64_t want = da < db ? da : db;

                cr_assert(eq(u32, at_u32(&o, x, y, 0), (uint32_t)want), "(%d,%d)", x, y);
                cr_assert(eq(u32, at_u32(&ix, x, y, 0), (uint32_t)(da < db ? above[4] : below[0])));
                cr_assert(eq(u32, at_u32(&ix, x, y, 1), da < db ? 4u : 0u));
            }
        }
        free(b.buf);
        free(o.buf);
        free(ix.buf);
    }
}

/* ---- anisotropic spacing ------------------------------------------------------------------ */

/* f32 and u16 with spacing against brute force in double. exact: the spacings are small
 * integers, every d2 is an exact integer, and the output must be the exact conversion. Else
 * f32 within a relative 1e-6. Either way, every index is a background pixel whose distance
 * (the contract's formula) gives exactly the f32 written. */
static void
check_aniso(const uint8_t *img, int32_t w, int32_t h, double sx, double sy, bool exact,
            uint64_t *rng, const char *what)
{
    double *want = malloc((size_t)w * (size_t)h * sizeof *want);
    image b = image_bin(img, w, h, twtest_rnd(rng, 3));
    image o1 = image_new(w, h, 1, TW_F32, 0), o2 = image_new(w, h, 1, TW_F32, 1);
    image i1 = image_new(w, h, 2, TW_U32, 0), i2 = image_new(w, h, 2, TW_U32, 0);
    image u = image_new(w, h, 1, TW_U16, 0);
    twi_edt_band band = band_whole(TWI_EDT_F32, sx, sy);
    twi_edt_band band16 = band_whole(TWI_EDT_U16, sx, sy);

    cr_assert_not_null(want);
    ref_edt(img, w, h, sx, sy, NULL, want);
    cr_assert(eq(int, twi_omp_edt(&b.v, &band, &o1.v, &i1.v, 1), TW_OK));
    cr_assert(eq(int, twi_omp_edt(&b.v, &band, &o2.v, &i2.v, 2), TW_OK));
    cr_assert(eq(int, twi_omp_edt(&b.v, &band16, &u.v, NULL, 2), TW_OK));
    check_same(&o1, &o2, what);
    check_same(&i1, &i2, what);
    check_padding(&o2, what);
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            double wd = want[(size_t)y * (size_t)w + (size_t)x];
            float got = at_f32(&o1, x, y), exp = want_f32(wd);
            uint32_t r = at_u32(&i1, x, y, 0), c = at_u32(&i1, x, y, 1);

            if (isinf(wd)) {
                cr_assert(isinf(got) && r == UINT32_MAX && c == UINT32_MAX, "%s", what);
                cr_assert(eq(u16, at_u16(&u, x, y), 65535));
                continue;
            }
            if (exact) {
                if (got != exp)
                    cr_fatal("%s: (%d,%d) got %.9g want %.9g", what, x, y, got, exp);
                if (at_u16(&u, x, y) != want_u16(wd))
                    cr_fatal("%s: u16 (%d,%d) got %u want %u", what, x, y, at_u16(&u, x, y),
                             want_u16(wd));
            } else if (fabs((double)got - (double)exp) > 1e-6 * (double)exp) {
                cr_fatal("%s: (%d,%d) got %.9g want %.9g", what, x, y, got, exp);
            }
            if (img[(size_t)y * (size_t)w + (size_t)x] == 0)
                cr_assert(got == 0.0f && r == (uint32_t)y && c == (uint32_t)x, "%s", what);
            if (r >= (uint32_t)h || c >= (uint32_t)w || img[(size_t)r * (size_t)w + c] != 0)
                cr_fatal("%s: (%d,%d) index (%u,%u) is not background", what, x, y, r, c);
            float di = (float)sqrt(d2_spacing((int64_t)x - c, (int64_t)y - r, sx, sy));

            if (di != got)
                cr_fatal("%s: (%d,%d) index (%u,%u) at %.9g, wrote %.9g", what, x, y, r, c, di,
                         got);
        }
    }
    free(want);
    free(b.buf);
    free(o1.buf);
    free(o2.buf);
    free(i1.buf);
    free(i2.buf);
    free(u.buf);
}

Test(edt_omp, anisotropic_spacing_matches_brute_force)
{
    /* 600 random images with spacing (0.5, 1.25), (1.25, 0.5), (0.3, 0.7), (1, 1.1) within
     * 1e-6 relative; (2, 3), (3, 2), (1, 2), (2, 1), (1, 4) and (2, 2) exactly (integer d2);
     * indices consistent with the written distance; 1 and 2 threads identical. */
    static const double sp[][3] = {{0.5, 1.25, 0}, {1.25, 0.5, 0}, {0.3, 0.7, 0}, {1, 1.1, 0},
                                   {2, 3, 1},      {3, 2, 1},      {1, 2, 1},     {2, 1, 1},
                                   {1, 4, 1},      {2, 2, 1}};
    uint64_t rng = 0xE7037ED1A0B428DBull;

    for (int c = 0; c < 600; c++) {
        int32_t w, h;
        int kind = (int)twtest_rnd(&rng, N_IMG_KINDS), s = (int)twtest_rnd(&rng, 10);
        uint32_t pm = bg_permille(&rng);
        uint8_t *img;
        char what[96];

        random_shape(&rng, &w, &h);
        img = malloc((size_t)w * (size_t)h);
        cr_assert_not_null(img);
        gen_image(img, w, h, kind, pm, &rng);
        thin_background(img, w, h, &rng);
        snprintf(what, sizeof what, "case %d %dx%d kind %d spacing %g,%g", c, w, h, kind,
                 sp[s][0], sp[s][1]);
        check_aniso(img, w, h, sp[s][0], sp[s][1], sp[s][2] != 0, &rng, what);
        free(img);
    }
}

Test(edt_omp, extreme_spacing_ratios)
{
    /* Spacing ratios of 10^4 and 10^-4 (squared: 10^8), on images with columns and rows that
     * hold no background: still within 1e-6 of brute force, indices consistent. */
    static const double sp[][2] = {{1e4, 1e-4}, {1e-4, 1e4}, {1000, 1}, {1, 1000}};
    uint64_t rng = 0x5851F42D4C957F2Dull;

    for (int c = 0; c < 80; c++) {
        int32_t w = 1 + (int32_t)twtest_rnd(&rng, 40), h = 1 + (int32_t)twtest_rnd(&rng, 40);
        uint8_t *img = malloc((size_t)w * (size_t)h);
        int s = c % 4;
        char what[96];

        cr_assert_not_null(img);
        gen_image(img, w, h, (int)twtest_rnd(&rng, N_IMG_KINDS), bg_permille(&rng), &rng);
        snprintf(what, sizeof what, "extreme case %d %dx%d spacing %g,%g", c, w, h, sp[s][0],
                 sp[s][1]);
        check_aniso(img, w, h, sp[s][0], sp[s][1], false, &rng, what);
        free(img);
    }
}

/* ---- the wavefront variant ---------------------------------------------------------------- */

/* Run the wavefront in f32 / u16 / sq32 (as applicable) with indices; check d2 >= exact, the
 * index is background and gives the written distance; `exact`: equal to brute force. Returns
 * the number of pixels whose sq32 differs from the exact value (isotropic only). */
static int64_t
check_wavefront(const uint8_t *img, int32_t w, int32_t h, double sx, double sy, bool exact,
                const char *what)
{
    bool iso = sx == 1.0 && sy == 1.0;
    int64_t *wi = malloc((size_t)w * (size_t)h * sizeof *wi), wrong = 0;
    double *wd = malloc((size_t)w * (size_t)h * sizeof *wd);
    image b = image_bin(img, w, h, 1);

    cr_assert(wi && wd);
    ref_edt(img, w, h, sx, sy, wi, wd);
    for (int f = TWI_EDT_F32; f <= (iso ? TWI_EDT_SQ32 : TWI_EDT_U16); f++) {
        twi_edt_band band = band_whole(f, sx, sy);
        image o = image_new(w, h, 1, fmt_type[f], 1), ix = image_new(w, h, 2, TW_U32, 1);

        cr_assert(eq(int, twi_omp_edt_wavefront(&b.v, &band, &o.v, &ix.v, 2), TW_OK), "%s",
                  what);
        check_padding(&o, what);
        check_padding(&ix, what);
        for (int32_t y = 0; y < h; y++) {
            for (int32_t x = 0; x < w; x++) {
                size_t p = (size_t)y * (size_t)w + (size_t)x;
                uint32_t r = at_u32(&ix, x, y, 0), c = at_u32(&ix, x, y, 1);
                double d, dr = iso ? (wi[p] == INT64_MAX ? INFINITY : (double)wi[p]) : wd[p];

                if (isinf(dr)) {
                    cr_assert(r == UINT32_MAX && c == UINT32_MAX, "%s", what);
                    continue;
                }
                if (r >= (uint32_t)h || c >= (uint32_t)w || img[(size_t)r * (size_t)w + c] != 0)
                    cr_fatal("%s: (%d,%d) index (%u,%u) is not background", what, x, y, r, c);
                d = d2_spacing((int64_t)x - c, (int64_t)y - r, sx, sy);
                if (d < dr)
                    cr_fatal("%s: (%d,%d) wavefront d2 %g below exact %g", what, x, y, d, dr);
                if (exact && d != dr)
                    cr_fatal("%s: (%d,%d) wavefront d2 %g, exact %g", what, x, y, d, dr);
                if (f == TWI_EDT_F32 && at_f32(&o, x, y) != want_f32(d))
                    cr_fatal("%s: (%d,%d) f32 %.9g for index d2 %g", what, x, y,
                             at_f32(&o, x, y), d);
                if (f == TWI_EDT_U16 && at_u16(&o, x, y) != want_u16(d))
                    cr_fatal("%s: (%d,%d) u16 %u for index d2 %g", what, x, y, at_u16(&o, x, y),
                             d);
                if (f == TWI_EDT_SQ32) {
                    cr_assert(eq(u32, at_u32(&o, x, y, 0), (uint32_t)d), "%s", what);
                    wrong += d != dr;
                }
            }
        }
        free(o.buf);
        free(ix.buf);
    }
    free(b.buf);
    free(wi);
    free(wd);
    return wrong;
}

Test(edt_omp, wavefront_never_below_exact)
{
    /* 600 random images, isotropic and with spacing: the wavefront's d2 is never below the
     * exact one, every index is a background pixel whose distance is the one written, and on
     * random images most pixels are exact (at least 90 % here). */
    static const double sp[][2] = {{1, 1}, {1, 1}, {1, 1}, {0.5, 1.25}, {2, 3}};
    uint64_t rng = 0x8EBC6AF09C88C6E3ull;
    int64_t wrong = 0, total = 0;

    for (int c = 0; c < 600; c++) {
        int32_t w, h;
        int kind = (int)twtest_rnd(&rng, N_IMG_KINDS), s = (int)twtest_rnd(&rng, 5);
        uint32_t pm = bg_permille(&rng);
        uint8_t *img;
        char what[96];

        random_shape(&rng, &w, &h);
        img = malloc((size_t)w * (size_t)h);
        cr_assert_not_null(img);
        gen_image(img, w, h, kind, pm, &rng);
        thin_background(img, w, h, &rng);
        snprintf(what, sizeof what, "wavefront case %d %dx%d kind %d spacing %g,%g", c, w, h,
                 kind, sp[s][0], sp[s][1]);
        wrong += check_wavefront(img, w, h, sp[s][0], sp[s][1], false, what);
        if (sp[s][0] == 1.0 && sp[s][1] == 1.0)
            total += (int64_t)w * h;
        free(img);
    }
    cr_assert(wrong * 10 <= total, "wavefront: %lld of %lld pixels not exact", (long long)wrong,
              (long long)total);
}

Test(edt_omp, wavefront_exact_on_simple_images)
{
    /* One background pixel anywhere, full background rows and columns, all background and no
     * background: the wavefront is exact there. */
    uint64_t rng = 77;

    for (int c = 0; c < 60; c++) {
        int32_t w = 1 + (int32_t)twtest_rnd(&rng, 70), h = 1 + (int32_t)twtest_rnd(&rng, 70);
        size_t n = (size_t)w * (size_t)h;
        uint8_t *img = malloc(n);
        int32_t px = (int32_t)twtest_rnd(&rng, (uint32_t)w);
        int32_t py = (int32_t)twtest_rnd(&rng, (uint32_t)h);
        double sx = c % 3 == 2 ? 2 : 1, sy = c % 3 == 2 ? 3 : 1;

        cr_assert_not_null(img);
        memset(img, 1, n);
        img[(size_t)py * (size_t)w + (size_t)px] = 0;
        check_wavefront(img, w, h, sx, sy, true, "single pixel");
        memset(img, 1, n);
        for (int32_t x = 0; x < w; x++)
            img[(size_t)py * (size_t)w + (size_t)x] = 0;
        check_wavefront(img, w, h, sx, sy, true, "row");
        memset(img, 1, n);
        for (int32_t y = 0; y < h; y++)
            img[(size_t)y * (size_t)w + (size_t)px] = 0;
        check_wavefront(img, w, h, sx, sy, true, "column");
        memset(img, 0, n);
        check_wavefront(img, w, h, sx, sy, true, "all background");
        memset(img, 9, n);
        check_wavefront(img, w, h, sx, sy, true, "no background");
        free(img);
    }
}

Test(edt_omp, wavefront_rejects_bands)
{
    /* The wavefront works on whole images only: y0 != 0 or above / below set is invalid, and
     * it shares the exact kernel's argument check. */
    uint8_t img[4 * 3] = {0};
    int32_t nb[4] = {TWI_EDT_NONE, TWI_EDT_NONE, TWI_EDT_NONE, TWI_EDT_NONE};
    image b = image_bin(img, 4, 3, 0), o = image_new(4, 3, 1, TW_F32, 0);
    twi_edt_band band = band_whole(TWI_EDT_F32, 1.0, 1.0);

    cr_assert(eq(int, twi_omp_edt_wavefront(&b.v, &band, &o.v, NULL, 1), TW_OK));
    band.y0 = 1;
    cr_assert(eq(int, twi_omp_edt_wavefront(&b.v, &band, &o.v, NULL, 1), TW_E_INVALID));
    band.y0 = 0;
    band.above = nb;
    cr_assert(eq(int, twi_omp_edt_wavefront(&b.v, &band, &o.v, NULL, 1), TW_E_INVALID));
    band.above = NULL;
    band.below = nb;
    cr_assert(eq(int, twi_omp_edt_wavefront(&b.v, &band, &o.v, NULL, 1), TW_E_INVALID));
    band.below = NULL;
    band.sx = 0;
    cr_assert(eq(int, twi_omp_edt_wavefront(&b.v, &band, &o.v, NULL, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_edt_wavefront(NULL, &band, &o.v, NULL, 1), TW_E_INVALID));
    free(b.buf);
    free(o.buf);
}

/* ---- argument check ----------------------------------------------------------------------- */

Test(edt_omp, check_rejects_bad_arguments)
{
    /* twi_edt_check (and so twi_omp_edt) rejects each bad argument alone: NULL views or band,
     * wrong types and channels, mismatched sizes, bad strides, sides above TWI_EDT_MAX_SIDE,
     * y0 < 0 or y0 + h beyond it, spacing 0 / negative / NaN / inf, sq32 with spacing, bad
     * format; it accepts the good ones, empty views included, and never reads pixels. */
    uint8_t img[5 * 4] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    image b = image_bin(img, 5, 4, 0), o = image_new(5, 4, 1, TW_F32, 0);
    image ix = image_new(5, 4, 2, TW_U32, 0), o16 = image_new(5, 4, 1, TW_U16, 0);
    image o32 = image_new(5, 4, 1, TW_U32, 0);
    twi_edt_band good = band_whole(TWI_EDT_F32, 1.0, 1.0), bd;
    tw_tile_view v, vo, vi;

    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o.v, NULL), TW_OK));
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o.v, &ix.v), TW_OK));
    bd = good;
    bd.format = TWI_EDT_U16;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o16.v, &ix.v), TW_OK));
    bd.format = TWI_EDT_SQ32;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o32.v, &ix.v), TW_OK));
    /* the check never dereferences data: device pointers pass */
    v = b.v;
    vo = o.v;
    vi = ix.v;
    v.data = (void *)(uintptr_t)0x1000;
    vo.data = (void *)(uintptr_t)0x2000;
    vi.data = (void *)(uintptr_t)0x3000;
    bd = good;
    bd.above = (const int32_t *)(uintptr_t)0x4000;
    bd.below = (const int32_t *)(uintptr_t)0x5000;
    cr_assert(eq(int, twi_edt_check(&v, &bd, &vo, &vi), TW_OK));

    cr_assert(eq(int, twi_edt_check(NULL, &good, &o.v, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_edt_check(&b.v, NULL, &o.v, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_edt_check(&b.v, &good, NULL, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_edt(NULL, &good, &o.v, NULL, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_edt(&b.v, &good, NULL, NULL, 2), TW_E_INVALID));
    /* formats and output types */
    bd = good;
    bd.format = -1;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID));
    bd.format = 3;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID));
    bd.format = TWI_EDT_U16;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID));
    bd.format = TWI_EDT_SQ32;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o16.v, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o32.v, NULL), TW_E_INVALID));
    /* spacing */
    {
        const double bad[] = {0.0, -1.0, -0.0, NAN, INFINITY, -INFINITY};

        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            bd = good;
            bd.sx = bad[k];
            cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID), "sx %g",
                      bad[k]);
            bd = good;
            bd.sy = bad[k];
            cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID), "sy %g",
                      bad[k]);
        }
        bd = good;
        bd.sx = 0.5;
        cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_OK));
        bd.format = TWI_EDT_SQ32;
        cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o32.v, NULL), TW_E_INVALID));
        bd.sx = 1.0;
        bd.sy = 2.0;
        cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o32.v, NULL), TW_E_INVALID));
        bd.sy = 1.0 + 1e-15;
        cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o32.v, NULL), TW_E_INVALID));
    }
    /* bin: type, channels */
    v = b.v;
    v.type = TW_U16;
    cr_assert(eq(int, twi_edt_check(&v, &good, &o.v, NULL), TW_E_INVALID));
    v = b.v;
    v.channels = 2;
    cr_assert(eq(int, twi_edt_check(&v, &good, &o.v, NULL), TW_E_INVALID));
    /* out: channels, size */
    vo = o.v;
    vo.channels = 2;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &vo, NULL), TW_E_INVALID));
    vo = o.v;
    vo.w = 4;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &vo, NULL), TW_E_INVALID));
    vo = o.v;
    vo.h = 3;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &vo, NULL), TW_E_INVALID));
    /* strides and data */
    v = b.v;
    v.stride = 4;
    cr_assert(eq(int, twi_edt_check(&v, &good, &o.v, NULL), TW_E_INVALID));
    v = b.v;
    v.data = NULL;
    cr_assert(eq(int, twi_edt_check(&v, &good, &o.v, NULL), TW_E_INVALID));
    vo = o.v;
    vo.stride = 19;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &vo, NULL), TW_E_INVALID));
    vo = o.v;
    vo.data = o.buf + 2;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &vo, NULL), TW_E_INVALID));
    /* idx: type, channels, size, stride */
    vi = ix.v;
    vi.type = TW_U16;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o.v, &vi), TW_E_INVALID));
    vi = ix.v;
    vi.channels = 1;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o.v, &vi), TW_E_INVALID));
    vi = ix.v;
    vi.w = 6;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o.v, &vi), TW_E_INVALID));
    vi = ix.v;
    vi.h = 5;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o.v, &vi), TW_E_INVALID));
    vi = ix.v;
    vi.stride = 36;
    cr_assert(eq(int, twi_edt_check(&b.v, &good, &o.v, &vi), TW_E_INVALID));
    /* sides and rows: w, h up to TWI_EDT_MAX_SIDE, y0 >= 0, y0 + h <= TWI_EDT_MAX_SIDE */
    v = b.v;
    vo = o.v;
    v.w = vo.w = TWI_EDT_MAX_SIDE + 1;
    v.h = vo.h = 1;
    v.stride = vo.stride = (int64_t)4 * (TWI_EDT_MAX_SIDE + 1);
    cr_assert(eq(int, twi_edt_check(&v, &good, &vo, NULL), TW_E_INVALID));
    v.w = vo.w = TWI_EDT_MAX_SIDE;
    cr_assert(eq(int, twi_edt_check(&v, &good, &vo, NULL), TW_OK));
    v = b.v;
    vo = o.v;
    v.w = vo.w = 1;
    v.h = vo.h = TWI_EDT_MAX_SIDE + 1;
    cr_assert(eq(int, twi_edt_check(&v, &good, &vo, NULL), TW_E_INVALID));
    v.h = vo.h = TWI_EDT_MAX_SIDE;
    cr_assert(eq(int, twi_edt_check(&v, &good, &vo, NULL), TW_OK));
    bd = good;
    bd.y0 = 1;
    cr_assert(eq(int, twi_edt_check(&v, &bd, &vo, NULL), TW_E_INVALID));
    bd.y0 = -1;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID));
    bd.y0 = TWI_EDT_MAX_SIDE - 4;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_OK));
    bd.y0 = TWI_EDT_MAX_SIDE - 3;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID));
    bd.y0 = INT64_MAX;
    cr_assert(eq(int, twi_edt_check(&b.v, &bd, &o.v, NULL), TW_E_INVALID));
    /* negative sizes */
    v = b.v;
    vo = o.v;
    v.w = vo.w = -1;
    cr_assert(eq(int, twi_edt_check(&v, &good, &vo, NULL), TW_E_INVALID));
    /* empty views are fine and a no-op */
    v = b.v;
    vo = o.v;
    v.h = vo.h = 0;
    v.data = vo.data = NULL;
    cr_assert(eq(int, twi_edt_check(&v, &good, &vo, NULL), TW_OK));
    cr_assert(eq(int, twi_omp_edt(&v, &good, &vo, NULL, 2), TW_OK));
    cr_assert(eq(int, twi_omp_edt_wavefront(&v, &good, &vo, NULL, 2), TW_OK));
    free(b.buf);
    free(o.buf);
    free(ix.buf);
    free(o16.buf);
    free(o32.buf);
}

/* ---- cancellation ------------------------------------------------------------------------- */

Test(edt_omp, a_stop_hook_ends_the_run_within_a_few_rows)
{
    /* A 1500 x 1000 random mask, f32 with indices, 1 and 2 threads: a hook that never stops
     * gives the same bytes as twi_omp_edt and is asked every 64 rows of both sweeps; one that
     * says stop at its 3rd answer ends the run with TW_E_CANCELED, asked at most once more by
     * the other thread. */
    const int32_t w = 1500, h = 1000;
    uint8_t *img = malloc((size_t)w * h);
    uint64_t rng = 0x45445453ull;

    cr_assert(img != NULL);
    for (size_t i = 0; i < (size_t)w * h; i++)
        img[i] = twtest_rnd(&rng, 100) < 3 ? 0 : 1;
    for (int nt = 1; nt <= 2; nt++) {
        image b = image_bin(img, w, h, 0), want = image_new(w, h, 1, TW_F32, 0),
              wix = image_new(w, h, 2, TW_U32, 0), got = image_new(w, h, 1, TW_F32, 0),
              gix = image_new(w, h, 2, TW_U32, 0);
        twi_edt_band band = band_whole(TWI_EDT_F32, 1.0, 1.0);
        stop_after never = { 0, 0 }, soon = { 0, 3 };
        twi_stop hn = { stop_after_n, &never }, hs = { stop_after_n, &soon };

        cr_assert(eq(int, twi_omp_edt(&b.v, &band, &want.v, &wix.v, nt), TW_OK));
        cr_assert(eq(int, twi_omp_edt_stop(&b.v, &band, &got.v, &gix.v, nt, &hn), TW_OK));
        cr_assert(eq(int, memcmp(want.buf, got.buf, want.bytes), 0), "%d threads", nt);
        cr_assert(eq(int, memcmp(wix.buf, gix.buf, wix.bytes), 0), "%d threads", nt);
        /* both sweeps, every 64 rows of each chunk */
        cr_assert(ge(int, atomic_load(&never.asked), 2 * (h / 64)), "asked %d times",
                  atomic_load(&never.asked));
        cr_assert(eq(int, twi_omp_edt_stop(&b.v, &band, &got.v, &gix.v, nt, &hs),
                     TW_E_CANCELED));
        cr_assert(ge(int, atomic_load(&soon.asked), 3));
        cr_assert(le(int, atomic_load(&soon.asked), 3 + nt - 1), "asked %d times",
                  atomic_load(&soon.asked));
        free(b.buf);
        free(want.buf);
        free(wix.buf);
        free(got.buf);
        free(gix.buf);
    }
    free(img);
}
