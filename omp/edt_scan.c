/* SPDX-License-Identifier: MIT */
/* tilewave: the EDT's tile passes on the CPU: histogram, threshold, first and last background
 * rows of each column, and the per-column bounds of the bands (ops/edt.c runs them). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "omp_kernels.h"

/* Run BODY with T the C type of `type` (the input's sample type). */
#define IN_TYPED(type, ...)                                                                    \
    do {                                                                                       \
        switch (type) {                                                                        \
        case TW_U8: {                                                                          \
            typedef uint8_t T;                                                                 \
            __VA_ARGS__                                                                        \
        } break;                                                                               \
        case TW_U16: {                                                                         \
            typedef uint16_t T;                                                                \
            __VA_ARGS__                                                                        \
        } break;                                                                               \
        case TW_U32: {                                                                         \
            typedef uint32_t T;                                                                \
            __VA_ARGS__                                                                        \
        } break;                                                                               \
        default: {                                                                             \
            typedef float T;                                                                   \
            __VA_ARGS__                                                                        \
        } break;                                                                               \
        }                                                                                      \
    } while (0)

void
twi_edt_hist_tile(const tw_tile_view *v, uint64_t *hist)
{
    if (v->type == TW_U8) {
        for (int32_t r = 0; r < v->h; r++)
            for (int32_t c = 0; c < v->w; c++)
                hist[TWI_ROW(v, uint8_t, r)[c]]++;
    } else {
        for (int32_t r = 0; r < v->h; r++)
            for (int32_t c = 0; c < v->w; c++)
                hist[TWI_ROW(v, uint16_t, r)[c]]++;
    }
}

/* For integer samples, s > t is s > floor(t): the comparison runs in the sample's own type,
 * which the compiler vectorises, rather than converting every sample to double (the scan and
 * load tasks are most of the host work of a job whose bands run on GPUs). */
int64_t
twi_edt_threshold_row(const tw_tile_view *v, int32_t r, double t, bool invert, uint8_t *out)
{
    const uint8_t inv = invert;
    int64_t fgs = 0;

    IN_TYPED(v->type, {
        const T *p = TWI_ROW(v, T, r);

        if ((T)0.5 != 0) { /* float */
            _Pragma("omp simd reduction(+ : fgs)")
            for (int32_t c = 0; c < v->w; c++)
                fgs += out[c] = (uint8_t)(((double)p[c] > t) ^ inv);
        } else if (!(t < (double)(T)-1)) { /* t NaN or at least the type's maximum */
            memset(out, inv, (size_t)v->w);
            fgs = inv ? v->w : 0;
        } else if (t < 0) {
            memset(out, !inv, (size_t)v->w);
            fgs = inv ? 0 : v->w;
        } else {
            const T ti = (T)floor(t);

            _Pragma("omp simd reduction(+ : fgs)")
            for (int32_t c = 0; c < v->w; c++)
                fgs += out[c] = (uint8_t)((p[c] > ti) ^ inv);
        }
    });
    return v->w - fgs;
}

int64_t
twi_edt_threshold_rows(const tw_tile_view *v, double t, bool invert, uint8_t *out,
                       int64_t out_stride)
{
    int64_t bg = 0;

    for (int32_t r = 0; r < v->h; r++)
        bg += twi_edt_threshold_row(v, r, t, invert, out + r * out_stride);
    return bg;
}

/* Over arrays that cannot alias, so that the loop vectorises (as a branchy loop it was the
 * largest host cost of an EDT whose bands run on GPUs: 15 ns a pixel). */
static void
scan_row(const uint8_t *restrict fg, int32_t *restrict first, int32_t *restrict last, int32_t w,
         int32_t row)
{
#pragma omp simd
    for (int32_t c = 0; c < w; c++) {
        /* masks, not ?: (which GCC treats as control flow here) */
        const int32_t m = -(int32_t)(fg[c] == 0), f = first[c];
        const int32_t mf = m & -(int32_t)(f == TWI_EDT_NONE);

        first[c] = (f & ~mf) | (row & mf);
        last[c] = (last[c] & ~m) | (row & m);
    }
}

int64_t
twi_edt_scan_tile(const tw_tile_view *v, double t, bool invert, int32_t y0, uint8_t *fg,
                  int32_t *first, int32_t *last, uint8_t *bits, int64_t bits_row)
{
    int64_t bg = 0;

    for (int32_t c = 0; c < v->w; c++)
        first[c] = last[c] = TWI_EDT_NONE;
    for (int32_t r = 0; r < v->h; r++) {
        bg += twi_edt_threshold_row(v, r, t, invert, fg);
        scan_row(fg, first, last, v->w, y0 + r);
        if (bits)
            twi_bits_pack_row(fg, v->w, bits + r * bits_row);
    }
    return bg;
}

void
twi_edt_band_ends(const int32_t *first, const int32_t *last, int64_t W, int64_t n, int32_t *a,
                  int32_t *b)
{
    for (int64_t x = 0; x < W; x++) {
        a[x] = TWI_EDT_NONE;
        b[x] = INT32_MAX;
        for (int64_t t = n - 1; t >= 0 && a[x] == TWI_EDT_NONE; t--)
            a[x] = last[t * W + x];
        for (int64_t t = 0; t < n && b[x] == INT32_MAX; t++)
            if (first[t * W + x] != TWI_EDT_NONE)
                b[x] = first[t * W + x];
    }
}

void
twi_edt_bounds_sweep(int32_t *first, int32_t *last, int64_t W, int64_t n,
                     const int32_t *from_above, const int32_t *from_below)
{
    for (int64_t x = 0; x < W; x++) {
        int32_t run = from_above ? from_above[x] : TWI_EDT_NONE, cur;

        for (int64_t b = 0; b < n; b++) {
            cur = last[b * W + x];
            last[b * W + x] = run;
            if (cur != TWI_EDT_NONE)
                run = cur;
        }
        run = from_below ? from_below[x] : TWI_EDT_NONE;
        for (int64_t b = n - 1; b >= 0; b--) {
            cur = first[b * W + x];
            first[b * W + x] = run;
            if (cur != TWI_EDT_NONE)
                run = cur;
        }
    }
}
