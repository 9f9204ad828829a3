/* SPDX-License-Identifier: MIT */
/* tilewave: gray kernel on the CPU: RGB to one channel (luminance, r, g or b), rows in parallel. */
#include <stdbool.h>
#include <string.h>

#include "omp_kernels.h"

/* tw_gray_mode (include/tilewave/ops.h) as plain ints: omp/ does not include the public op
 * headers beyond what the tile view brings. */
enum { GRAY_LUMINANCE = 0, GRAY_R = 1, GRAY_G = 2, GRAY_B = 3 };

/* The gray contract (omp_kernels.h), checked on the host for both variants. */
tw_status
twi_gray_check(const tw_tile_view *in, const tw_tile_view *out, int mode)
{
    size_t ss;

    if (!in || !out || mode < GRAY_LUMINANCE || mode > GRAY_B)
        return TW_E_INVALID;
    if (in->w != out->w || in->h != out->h || in->type != out->type || out->channels != 1)
        return TW_E_INVALID;
    if ((ss = tw_sample_size(in->type)) == 0)
        return TW_E_INVALID;
    if (in->channels == 3) {
        if (in->type != TW_U8 && in->type != TW_U16)
            return TW_E_INVALID;
    } else if (in->channels != 1) {
        return TW_E_INVALID;
    }
    if (!twi_view_fits(in, (size_t)in->w * (size_t)in->channels * ss, ss) ||
        !twi_view_fits(out, (size_t)out->w * ss, ss))
        return TW_E_INVALID;
    return TW_OK;
}

/* The exact integer rule shared with cuda/gray_cuda.cu: max 1000 * 65535 + 500 fits 32 bits. */
static inline uint32_t
luminance(uint32_t r, uint32_t g, uint32_t b)
{
    return (299u * r + 587u * g + 114u * b + 500u) / 1000u;
}

static void
row_u8(const uint8_t *restrict s, uint8_t *restrict d, int32_t w, int mode)
{
    int32_t x;

    if (mode == GRAY_LUMINANCE) {
        for (x = 0; x < w; x++)
            d[x] = (uint8_t)luminance(s[3 * x], s[3 * x + 1], s[3 * x + 2]);
    } else {
        int c = mode - GRAY_R;

        for (x = 0; x < w; x++)
            d[x] = s[3 * x + c];
    }
}

static void
row_u16(const uint16_t *restrict s, uint16_t *restrict d, int32_t w, int mode)
{
    int32_t x;

    if (mode == GRAY_LUMINANCE) {
        for (x = 0; x < w; x++)
            d[x] = (uint16_t)luminance(s[3 * x], s[3 * x + 1], s[3 * x + 2]);
    } else {
        int c = mode - GRAY_R;

        for (x = 0; x < w; x++)
            d[x] = s[3 * x + c];
    }
}

static void
do_row(const tw_tile_view *in, tw_tile_view *out, int mode, int32_t y)
{
    const uint8_t *s = (const uint8_t *)in->data + (int64_t)y * in->stride;
    uint8_t *d = (uint8_t *)out->data + (int64_t)y * out->stride;

    if (in->channels == 1)
        memcpy(d, s, (size_t)in->w * tw_sample_size(in->type));
    else if (in->type == TW_U8)
        row_u8(s, d, in->w, mode);
    else
        row_u16((const uint16_t *)(const void *)s, (uint16_t *)(void *)d, in->w, mode);
}

tw_status
twi_omp_gray(const tw_tile_view *in, tw_tile_view *out, int mode, int nthreads)
{
    tw_status st;
    int32_t y;

    if ((st = twi_gray_check(in, out, mode)) != TW_OK)
        return st;
    if (in->w == 0 || in->h == 0)
        return TW_OK;
    /* Rows are independent; a team only pays off when the worker owns several cores. */
    if (nthreads <= 1) {
        for (y = 0; y < in->h; y++)
            do_row(in, out, mode, y);
    } else {
#pragma omp parallel for num_threads(nthreads) schedule(static)
        for (y = 0; y < in->h; y++)
            do_row(in, out, mode, y);
    }
    return TW_OK;
}
