/* SPDX-License-Identifier: MIT */
/* tilewave: gray kernel on the CPU: RGB to one channel (luminance, r, g, b, hematoxylin or
 * eosin by colour deconvolution), optionally thresholded, rows in parallel. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "omp_kernels.h"

/* tw_gray_mode (include/tilewave/ops.h) as plain ints: omp/ does not include the public op
 * headers beyond what the tile view brings. */
enum { GRAY_LUMINANCE = 0, GRAY_R = 1, GRAY_G = 2, GRAY_B = 3, GRAY_HEMA = 4, GRAY_EOSIN = 5 };

/* scikit-image's rgb_from_hed (Ruifrok & Johnston, "Quantification of histochemical staining
 * by color deconvolution", 2001): rows hematoxylin, eosin, DAB; columns R, G, B. */
const double twi_stains_hed[9] = {0.65, 0.70, 0.29, 0.07, 0.99, 0.11, 0.27, 0.57, 0.78};

tw_status
twi_gray_params_init(twi_gray_params *p, int mode, const double *stains)
{
    const double *m = stains ? stains : twi_stains_hed;
    double det, inv[9];
    int s;

    if (!p || mode < GRAY_LUMINANCE || mode > GRAY_EOSIN)
        return TW_E_INVALID;
    memset(p, 0, sizeof *p);
    p->mode = mode;
    if (mode < GRAY_HEMA)
        return TW_OK;
    for (int i = 0; i < 9; i++)
        if (!isfinite(m[i]))
            return TW_E_INVALID;
    /* The inverse by cofactors: c = od D, od = c M for row vectors (scikit-image's
     * separate_stains with hed_from_rgb = inv(rgb_from_hed)). */
    det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
          m[2] * (m[3] * m[7] - m[4] * m[6]);
    if (!isfinite(det) || fabs(det) < 1e-12)
        return TW_E_INVALID;
    inv[0] = (m[4] * m[8] - m[5] * m[7]) / det;
    inv[1] = (m[2] * m[7] - m[1] * m[8]) / det;
    inv[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    inv[3] = (m[5] * m[6] - m[3] * m[8]) / det;
    inv[4] = (m[0] * m[8] - m[2] * m[6]) / det;
    inv[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    inv[6] = (m[3] * m[7] - m[4] * m[6]) / det;
    inv[7] = (m[1] * m[6] - m[0] * m[7]) / det;
    inv[8] = (m[0] * m[4] - m[1] * m[3]) / det;
    s = mode - GRAY_HEMA;
    for (int i = 0; i < 3; i++) {
        double d = inv[3 * i + s];

        /* |d| <= 2^12: |w| < 2^36, od < 2^22, so od w < 2^58 and the sum of three fits int64. */
        if (!isfinite(d) || fabs(d) > 4096.0)
            return TW_E_INVALID;
        p->w[i] = (int64_t)llround(d * 255.0 * 65536.0);
    }
    for (int v = 0; v < 256; v++)
        p->od[v] = (int32_t)lround(-log10((v < 1 ? 1 : v) / 255.0) * 1048576.0);
    return TW_OK;
}

/* The gray contract (omp_kernels.h), checked on the host for both variants. */
tw_status
twi_gray_check_p(const tw_tile_view *in, const tw_tile_view *out, const twi_gray_params *p)
{
    size_t ss;

    if (!in || !out || !p || p->mode < GRAY_LUMINANCE || p->mode > GRAY_EOSIN)
        return TW_E_INVALID;
    if (in->w != out->w || in->h != out->h || in->type != out->type || out->channels != 1)
        return TW_E_INVALID;
    if ((ss = tw_sample_size(in->type)) == 0)
        return TW_E_INVALID;
    if (in->channels == 3) {
        if (in->type != TW_U8 && in->type != TW_U16)
            return TW_E_INVALID;
        if (p->mode >= GRAY_HEMA && in->type != TW_U8)
            return TW_E_INVALID;
    } else if (in->channels != 1 || p->mode >= GRAY_HEMA) {
        return TW_E_INVALID;
    }
    if (p->threshold && in->type != TW_U8 && in->type != TW_U16)
        return TW_E_INVALID;
    if (!twi_view_fits(in, (size_t)in->w * (size_t)in->channels * ss, ss) ||
        !twi_view_fits(out, (size_t)out->w * ss, ss))
        return TW_E_INVALID;
    return TW_OK;
}

tw_status
twi_gray_check(const tw_tile_view *in, const tw_tile_view *out, int mode)
{
    twi_gray_params p;

    if (twi_gray_params_init(&p, mode, NULL) != TW_OK)
        return TW_E_INVALID;
    return twi_gray_check_p(in, out, &p);
}

/* The exact integer rule shared with cuda/gray_cuda.cu: max 1000 * 65535 + 500 fits 32 bits. */
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

    if (p->mode == GRAY_LUMINANCE) {
        for (x = 0; x < w; x++)
            d[x] = (uint8_t)luminance(s[3 * x], s[3 * x + 1], s[3 * x + 2]);
    } else if (p->mode >= GRAY_HEMA) {
        for (x = 0; x < w; x++)
            d[x] = stain(p, s[3 * x], s[3 * x + 1], s[3 * x + 2]);
    } else {
        int c = p->mode - GRAY_R;

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
