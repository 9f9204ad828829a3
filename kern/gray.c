/* SPDX-License-Identifier: MIT */
/* tilewave: the gray kernels' parameters (the stain modes' fixed-point deconvolution) and the
 * argument checks both variants make, in plain C on the host. */
#include <math.h>
#include <string.h>

#include "gray.h"

/* scikit-image's rgb_from_hed (Ruifrok & Johnston, "Quantification of histochemical staining
 * by color deconvolution", 2001): rows hematoxylin, eosin, DAB; columns R, G, B. */
const double twi_stains_hed[9] = {0.65, 0.70, 0.29, 0.07, 0.99, 0.11, 0.27, 0.57, 0.78};

tw_status
twi_gray_params_init(twi_gray_params *p, int mode, const double *stains)
{
    const double *m = stains ? stains : twi_stains_hed;
    double det, inv[9];
    int s;

    if (!p || mode < TWI_GRAY_LUMINANCE || mode > TWI_GRAY_EOSIN)
        return TW_E_INVALID;
    memset(p, 0, sizeof *p);
    p->mode = mode;
    if (mode < TWI_GRAY_HEMA)
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
    s = mode - TWI_GRAY_HEMA;
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

/* The gray contract (kern/gray.h), checked on the host for both variants. */
tw_status
twi_gray_check_p(const tw_tile_view *in, const tw_tile_view *out, const twi_gray_params *p)
{
    size_t ss;

    if (!in || !out || !p || p->mode < TWI_GRAY_LUMINANCE || p->mode > TWI_GRAY_EOSIN)
        return TW_E_INVALID;
    if (in->w != out->w || in->h != out->h || in->type != out->type || out->channels != 1)
        return TW_E_INVALID;
    if ((ss = tw_sample_size(in->type)) == 0)
        return TW_E_INVALID;
    if (in->channels == 3) {
        if (in->type != TW_U8 && in->type != TW_U16)
            return TW_E_INVALID;
        if (p->mode >= TWI_GRAY_HEMA && in->type != TW_U8)
            return TW_E_INVALID;
    } else if (in->channels != 1 || p->mode >= TWI_GRAY_HEMA) {
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
