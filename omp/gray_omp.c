/* SPDX-License-Identifier: MIT */
/* tilewave: gray kernel on the CPU: RGB to one channel (luminance, r, g, b, hematoxylin or
 * eosin by colour deconvolution), optionally thresholded, rows in parallel. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "omp_kernels.h"

static inline uint32_t
luminance(uint32_t r, uint32_t g, uint32_t b)
{
    return (299u * r + 587u * g + 114u * b + 500u) / 1000u;
}

/* One stain concentration as 0..255 (omp_kernels.h); the same integers as the CUDA twin. */
static inline uint8_t
stain(const twi_gray_params *p, uint32_t r, uint32_t g, uint32_t b)
{
    int64_t c = p->od[r] * p->w[0] + p->od[g] * p->w[1] + p->od[b] * p->w[2];

    if (c <= 0)
        return 0;
    c = (c + ((int64_t)1 << 35)) >> 36;
    return (uint8_t)(c > 255 ? 255 : c);
}

static void
row_u8(const uint8_t *restrict s, uint8_t *restrict d, int32_t w, const twi_gray_params *p)
{
    int32_t x;

    if (p->mode == TWI_GRAY_LUMINANCE) {
        for (x = 0; x < w; x++)
            d[x] = (uint8_t)luminance(s[3 * x], s[3 * x + 1], s[3 * x + 2]);
    } else if (p->mode >= TWI_GRAY_HEMA) {
        for (x = 0; x < w; x++)
            d[x] = stain(p, s[3 * x], s[3 * x + 1], s[3 * x + 2]);
    } else {
        int c = p->mode - TWI_GRAY_R;

        for (x = 0; x < w; x++)
            d[x] = s[3 * x + c];
    }
}

static void
row_u16(const uint16_t *restrict s, uint16_t *restrict d, int32_t w, int mode)
{
    int32_t x;

    if (mode == TWI_GRAY_LUMINANCE) {
        for (x = 0; x < w; x++)
            d[x] = (uint16_t)luminance(s[3 * x], s[3 * x + 1], s[3 * x + 2]);
    } else {
        int c = mode - TWI_GRAY_R;

        for (x = 0; x < w; x++)
            d[x] = s[3 * x + c];
    }
}

/* Binarise a converted row in place: the type's maximum for foreground, else 0. */
static void
threshold_row(void *row, tw_sample_type t, int32_t w, const twi_gray_params *p)
{
    int32_t x;

    if (t == TW_U8) {
        uint8_t *d = row;

        for (x = 0; x < w; x++)
            d[x] = ((int64_t)d[x] > p->t) != (p->invert != 0) ? 255 : 0;
    } else {
        uint16_t *d = row;

        for (x = 0; x < w; x++)
            d[x] = ((int64_t)d[x] > p->t) != (p->invert != 0) ? 65535 : 0;
    }
}

static void
do_row(const tw_tile_view *in, tw_tile_view *out, const twi_gray_params *p, int32_t y)
{
    const uint8_t *s = (const uint8_t *)in->data + (int64_t)y * in->stride;
    uint8_t *d = (uint8_t *)out->data + (int64_t)y * out->stride;

    if (in->channels == 1) {
        if (d != s) /* in place: thresholding a 1-channel view */
            memcpy(d, s, (size_t)in->w * tw_sample_size(in->type));
    }
    else if (in->type == TW_U8)
        row_u8(s, d, in->w, p);
    else
        row_u16((const uint16_t *)(const void *)s, (uint16_t *)(void *)d, in->w, p->mode);
    if (p->threshold)
        threshold_row(d, in->type, in->w, p);
}

tw_status
twi_omp_gray_p(const tw_tile_view *in, tw_tile_view *out, const twi_gray_params *p,
               int nthreads)
{
    tw_status st;
    int32_t y;

    if ((st = twi_gray_check_p(in, out, p)) != TW_OK)
        return st;
    if (in->w == 0 || in->h == 0)
        return TW_OK;
    /* Rows are independent; a team only pays off when the worker owns several cores. */
    if (nthreads <= 1) {
        for (y = 0; y < in->h; y++)
            do_row(in, out, p, y);
    } else {
#pragma omp parallel for num_threads(nthreads) schedule(static)
        for (y = 0; y < in->h; y++)
            do_row(in, out, p, y);
    }
    return TW_OK;
}

tw_status
twi_omp_gray(const tw_tile_view *in, tw_tile_view *out, int mode, int nthreads)
{
    twi_gray_params p;

    if (twi_gray_params_init(&p, mode, NULL) != TW_OK)
        return TW_E_INVALID;
    return twi_omp_gray_p(in, out, &p, nthreads);
}
