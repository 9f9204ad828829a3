/* SPDX-License-Identifier: MIT */
/* tilewave tests: colour deconvolution, thresholds and Otsu of the gray kernel, against
 * independent double-precision and exhaustive references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "ops_internal.h"
#include "twtest.h"

/* scikit-image 0.26 rgb_from_hed, typed in again rather than taken from the library. */
static const double hed[9] = {0.65, 0.70, 0.29, 0.07, 0.99, 0.11, 0.27, 0.57, 0.78};

/* Inverse by Gauss-Jordan with partial pivoting (the library uses cofactors). */
static void
invert3(const double *m, double *inv)
{
    double a[3][6];

    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++)
            a[i][j] = j < 3 ? m[3 * i + j] : (j - 3 == i);
    for (int c = 0; c < 3; c++) {
        int p = c;
        for (int r = c + 1; r < 3; r++)
            if (fabs(a[r][c]) > fabs(a[p][c]))
                p = r;
        for (int j = 0; j < 6; j++) {
            double t = a[c][j];
            a[c][j] = a[p][j];
            a[p][j] = t;
        }
        double d = a[c][c];
        for (int j = 0; j < 6; j++)
            a[c][j] /= d;
        for (int r = 0; r < 3; r++) {
            if (r == c)
                continue;
            double f = a[r][c];
            for (int j = 0; j < 6; j++)
                a[r][j] -= f * a[c][j];
        }
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            inv[3 * i + j] = a[i][j + 3];
}

/* docs/io.md in double: c = sum_i OD_i D[i][s], OD = -log10(max(v, 1) / 255);
 * out = clamp(round(255 c), 0, 255). */
static int
ref_stain(const double *inv, int s, const uint8_t *rgb)
{
    double c = 0;

    for (int i = 0; i < 3; i++)
        c += -log10((rgb[i] < 1 ? 1 : rgb[i]) / 255.0) * inv[3 * i + s];
    c = floor(255.0 * c + 0.5);
    return c < 0 ? 0 : c > 255 ? 255 : (int)c;
}

/* Every RGB value (or every `step`-th per channel) through the kernel against ref_stain:
 * never more than 1 apart, and equal for all but a handful (fixed-point rounding). */
static void
check_cube(const double *stains, int mode, int step)
{
    double inv[9];
    twi_gray_params p;
    int n = (255 + step) / step, s = mode - 4;
    uint8_t *in = malloc((size_t)n * n * 3), *out = malloc((size_t)n * n);
    int64_t total = 0, off = 0;

    cr_assert(in && out);
    invert3(stains, inv);
    cr_assert(eq(int, twi_gray_params_init(&p, mode, stains), TW_OK));
    for (int b = 0; b < 256; b += step) {
        for (int g = 0; g < n; g++)
            for (int r = 0; r < n; r++) {
                uint8_t *q = in + 3 * ((size_t)g * n + r);
                q[0] = (uint8_t)(r * step);
                q[1] = (uint8_t)(g * step);
                q[2] = (uint8_t)b;
            }
        tw_tile_view vi = {in, 3 * n, n, n, 3, TW_U8, 0, 0};
        tw_tile_view vo = {out, n, n, n, 1, TW_U8, 0, 0};
        cr_assert(eq(int, twi_omp_gray_p(&vi, &vo, &p, 2), TW_OK));
        for (int i = 0; i < n * n; i++) {
            int want = ref_stain(inv, s, in + 3 * i), got = out[i];
            cr_assert(abs(want - got) <= 1, "mode %d rgb %d,%d,%d: got %d want %d", mode,
                      in[3 * i], in[3 * i + 1], in[3 * i + 2], got, want);
            off += want != got;
            total++;
        }
    }
    cr_assert(off * 10000 <= total, "%lld of %lld differ by one", (long long)off,
              (long long)total);
    free(in);
    free(out);
}

Test(gray_stain, hematoxylin_and_eosin_match_double_reference_on_all_colours)
{
    /* All 2^24 colours, both stains, standard vectors: within 1 of the double-precision
     * formula, equal for all but 1 in 10^4. */
    check_cube(hed, 4, 1);
    check_cube(hed, 5, 1);
}

Test(gray_stain, custom_stain_vectors)
{
    /* Random near-unit stain vectors (a perturbed H&E matrix): the same agreement. */
    uint64_t rng = 77;

    for (int k = 0; k < 4; k++) {
        double m[9];
        for (int i = 0; i < 9; i++)
            m[i] = hed[i] + (twtest_rnd(&rng, 2001) - 1000.0) / 10000.0;
        check_cube(m, 4, 3);
        check_cube(m, 5, 3);
    }
}

Test(gray_stain, known_values_and_polarity)
{
    /* White is 0 for both stains (no stain); a hematoxylin-dark nucleus is bright in the H
     * channel and darker than pink stroma in the E channel; pure black saturates H. */
    static const uint8_t px[] = {255, 255, 255, 60, 40, 120, 204, 104, 158, 0, 0, 0};
    uint8_t h[4], e[4];
    twi_gray_params ph, pe;
    tw_tile_view vi = {(void *)px, 12, 4, 1, 3, TW_U8, 0, 0};
    tw_tile_view vh = {h, 4, 4, 1, 1, TW_U8, 0, 0}, ve = {e, 4, 4, 1, 1, TW_U8, 0, 0};

    cr_assert(eq(int, twi_gray_params_init(&ph, 4, NULL), TW_OK));
    cr_assert(eq(int, twi_gray_params_init(&pe, 5, NULL), TW_OK));
    cr_assert(eq(int, twi_omp_gray_p(&vi, &vh, &ph, 1), TW_OK));
    cr_assert(eq(int, twi_omp_gray_p(&vi, &ve, &pe, 1), TW_OK));
    cr_assert(eq(u8, h[0], 0));
    cr_assert(eq(u8, e[0], 0));
    /* 255 x 0.930042 (scikit-image rgb2hed x 6 for (60, 40, 120)) */
    cr_assert(eq(u8, h[1], 237));
    cr_assert(h[1] > h[2] + 150);
    cr_assert(e[2] > e[1]);
    cr_assert(eq(u8, h[3], 255));
}

Test(gray_stain, stain_modes_need_8bit_rgb)
{
    /* u16 RGB and 1-channel inputs are refused in the stain modes; luminance still works. */
    uint16_t in16[6] = {0}, out16[2];
    uint8_t in8[2] = {0}, out8[2];
    tw_tile_view a = {in16, 12, 2, 1, 3, TW_U16, 0, 0}, b = {out16, 4, 2, 1, 1, TW_U16, 0, 0};
    tw_tile_view c = {in8, 2, 2, 1, 1, TW_U8, 0, 0}, d = {out8, 2, 2, 1, 1, TW_U8, 0, 0};

    cr_assert(eq(int, twi_omp_gray(&a, &b, 4, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_gray(&c, &d, 5, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_gray(&a, &b, 0, 1), TW_OK));
    cr_assert(eq(int, twi_omp_gray(&c, &d, 6, 1), TW_E_INVALID));
}

Test(gray_stain, threshold_and_invert)
{
    /* out = max where gray > t (<= t with invert), 0 elsewhere; u8 and u16, RGB and 1
     * channel, in place on 1 channel; t = -1 makes everything foreground. */
    uint64_t rng = 5;
    uint8_t rgb[3 * 500], g8[500], o8[500];
    uint16_t g16[500], o16[500];
    twi_gray_params p;

    for (int i = 0; i < 1500; i++)
        rgb[i] = (uint8_t)twtest_rnd(&rng, 256);
    for (int i = 0; i < 500; i++)
        g16[i] = (uint16_t)twtest_rnd(&rng, 65536);
    for (int inv = 0; inv < 2; inv++)
        for (int64_t t = -1; t < 256; t += 37) {
            tw_tile_view vi = {rgb, 1500, 500, 1, 3, TW_U8, 0, 0};
            tw_tile_view vg = {g8, 500, 500, 1, 1, TW_U8, 0, 0};
            tw_tile_view vo = {o8, 500, 500, 1, 1, TW_U8, 0, 0};

            cr_assert(eq(int, twi_gray_params_init(&p, 0, NULL), TW_OK));
            cr_assert(eq(int, twi_omp_gray_p(&vi, &vg, &p, 1), TW_OK));
            p.threshold = 1;
            p.t = t;
            p.invert = inv;
            cr_assert(eq(int, twi_omp_gray_p(&vi, &vo, &p, 2), TW_OK));
            for (int i = 0; i < 500; i++)
                cr_assert(eq(u8, o8[i], ((g8[i] > t) != inv) ? 255 : 0));
            cr_assert(eq(int, twi_omp_gray_p(&vg, &vg, &p, 1), TW_OK)); /* in place */
            cr_assert(eq(int, memcmp(vg.data, o8, 500), 0));
        }
    for (int64_t t = 0; t < 65536; t += 9999) {
        tw_tile_view vi = {g16, 1000, 500, 1, 1, TW_U16, 0, 0};
        tw_tile_view vo = {o16, 1000, 500, 1, 1, TW_U16, 0, 0};

        cr_assert(eq(int, twi_gray_params_init(&p, 0, NULL), TW_OK));
        p.threshold = 1;
        p.t = t;
        cr_assert(eq(int, twi_omp_gray_p(&vi, &vo, &p, 1), TW_OK));
        for (int i = 0; i < 500; i++)
            cr_assert(eq(u16, o16[i], g16[i] > t ? 65535 : 0));
    }
}

Test(gray_stain, stain_vector_parsing)
{
    /* Nine numbers with blanks are accepted; the empty text gives the standard vectors;
     * eight or ten numbers, junk, NaN and a singular matrix are refused. */
    double v[9];

    cr_assert(eq(int, twi_stains_parse("", v), TW_OK));
    cr_assert(eq(int, memcmp(v, hed, sizeof v), 0));
    cr_assert(eq(int, twi_stains_parse(" 0.65, 0.7 ,0.29,0.07,0.99,0.11,0.27,0.57,0.78", v),
                 TW_OK));
    cr_assert(eq(dbl, v[1], 0.7));
    cr_assert(eq(int, twi_stains_parse("1,0,0,0,1,0,0,0", v), TW_E_INVALID));
    cr_assert(eq(int, twi_stains_parse("1,0,0,0,1,0,0,0,1,0", v), TW_E_INVALID));
    cr_assert(eq(int, twi_stains_parse("1,0,0,0,1,0,0,0,x", v), TW_E_INVALID));
    cr_assert(eq(int, twi_stains_parse("1,0,0,0,1,0,0,0,nan", v), TW_E_INVALID));
    cr_assert(eq(int, twi_stains_parse("1,2,3,2,4,6,0,0,1", v), TW_E_INVALID));
    cr_assert(eq(int, twi_stains_parse("1,0,0,0,1,0,0,0,1", v), TW_OK));
}

/* Between-class variance of splitting at t, from the pixel values themselves. */
static double
naive_variance(const uint32_t *px, size_t n, int64_t t)
{
    double n0 = 0, n1 = 0, s0 = 0, s1 = 0;

    for (size_t i = 0; i < n; i++) {
        if ((int64_t)px[i] <= t) {
            n0++;
            s0 += px[i];
        } else {
            n1++;
            s1 += px[i];
        }
    }
    if (n0 == 0 || n1 == 0)
        return -1;
    return n0 * n1 * (s0 / n0 - s1 / n1) * (s0 / n0 - s1 / n1);
}

Test(gray_stain, otsu_equals_exhaustive_search)
{
    /* Random images (uniform, bimodal, few-valued, 16-bit sparse): twi_otsu's threshold has
     * the largest between-class variance of every split between the min and the max found
     * by trying them all on the pixels, and is the first such; a one-valued image gives its
     * value. */
    uint64_t rng = 11;
    static uint32_t px[4000];
    static uint64_t hist[65536];

    for (int trial = 0; trial < 60; trial++) {
        size_t bins = trial % 4 == 3 ? 65536 : 256, n = 200 + twtest_rnd(&rng, 3800);
        uint32_t lo = UINT32_MAX, hi = 0;
        int64_t got, best = -1;
        double best_v = -1;

        memset(hist, 0, sizeof hist);
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            switch (trial % 4) {
            case 0: v = twtest_rnd(&rng, 256); break;
            case 1:
                v = twtest_rnd(&rng, 2) ? 40 + twtest_rnd(&rng, 30) : 170 + twtest_rnd(&rng, 60);
                break;
            case 2: v = 10 * twtest_rnd(&rng, 4); break;
            default: v = 1000 * twtest_rnd(&rng, 60) + twtest_rnd(&rng, 3); break;
            }
            px[i] = v;
            hist[v]++;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        got = twi_otsu(hist, bins);
        for (int64_t t = lo; t < hi; t++) {
            double v = naive_variance(px, n, t);
            if (v > best_v * (1 + 1e-12)) {
                best_v = v;
                best = t;
            }
        }
        if (lo == hi)
            best = lo;
        cr_assert(eq(i64, got, best), "trial %d: otsu %lld, exhaustive %lld", trial,
                  (long long)got, (long long)best);
    }
    memset(hist, 0, sizeof hist);
    hist[77] = 10;
    cr_assert(eq(i64, twi_otsu(hist, 256), 77));
    memset(hist, 0, sizeof hist);
    cr_assert(eq(i64, twi_otsu(hist, 256), 0));
}

Test(gray_stain, mode_names)
{
    /* The six mode names parse to their enum values; others are refused. */
    static const char *const names[] = {"luminance", "r", "g", "b", "hematoxylin", "eosin"};
    tw_gray_mode m;

    for (int i = 0; i < 6; i++) {
        cr_assert(eq(int, tw_gray_mode_parse(names[i], &m), TW_OK));
        cr_assert(eq(int, (int)m, i));
    }
    cr_assert(eq(int, tw_gray_mode_parse("dab", &m), TW_E_INVALID));
    cr_assert(eq(int, (int)TW_GRAY_HEMATOXYLIN, 4));
    cr_assert(eq(int, (int)TW_GRAY_EOSIN, 5));
}
