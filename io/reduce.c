/* SPDX-License-Identifier: MIT */
/* tilewave: the level chosen by resolution (--mpp, --magnification) and the reduced view of a
 * level: a one-level slide whose pixel (x, y) is the area average of the k x k block of the
 * level at (k x, k y) (docs/io.md, "Resolution and metadata"). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "tw_io.h"

/* A level up to 1% coarser than asked counts as fine enough: real pyramids have downsamples
 * such as 4.0003 or 2.0005 (odd level sizes rounded), and their mpp is rounded too. */
#define CHOOSE_TOLERANCE 1.01

tw_status
tw_slide_choose_level(const tw_slide *s, double mpp, double magnification, tw_level_choice *out,
                      tw_error *err)
{
    double want, best_ds = 1.0, k;
    int best = 0;

    if (!s || !out)
        return twi_error_set(err, TW_E_INVALID, "io: tw_slide_choose_level: NULL argument");
    if (!(mpp >= 0) || !(magnification >= 0) || !isfinite(mpp) || !isfinite(magnification) ||
        (mpp > 0) == (magnification > 0))
        return twi_error_set(err, TW_E_INVALID,
                             "io: give either an mpp or a magnification, a positive number "
                             "(mpp %g, magnification %g)",
                             mpp, magnification);
    if (mpp > 0) {
        if (!(s->mpp_x > 0))
            return twi_error_set(err, TW_E_INVALID,
                                 "io: the pixel size (mpp) of '%s' is unknown, so no level can "
                                 "be chosen by mpp (its metadata gives none: docs/io.md)",
                                 s->path);
        want = mpp / s->mpp_x;
        if (want * CHOOSE_TOLERANCE < 1.0)
            return twi_error_set(err, TW_E_INVALID,
                                 "io: mpp %g is finer than level 0 of '%s' (%.4g um per pixel); "
                                 "levels are never enlarged",
                                 mpp, s->path, s->mpp_x);
    } else {
        if (!(s->objective_power > 0))
            return twi_error_set(err, TW_E_INVALID,
                                 "io: the objective power of '%s' is unknown, so no level can "
                                 "be chosen by magnification (its metadata gives none: "
                                 "docs/io.md)",
                                 s->path);
        want = s->objective_power / magnification;
        if (want * CHOOSE_TOLERANCE < 1.0)
            return twi_error_set(err, TW_E_INVALID,
                                 "io: magnification %g is above the objective power of '%s' "
                                 "(%gx); levels are never enlarged",
                                 magnification, s->path, s->objective_power);
    }
    /* the coarsest level at least as fine as asked */
    for (int i = 1; i < s->n_levels; i++)
        if (s->levels[i].downsample <= want * CHOOSE_TOLERANCE &&
            s->levels[i].downsample > best_ds) {
            best = i;
            best_ds = s->levels[i].downsample;
        }
    /* then the whole factor it is finer by, when 2 or more */
    k = floor(want * CHOOSE_TOLERANCE / best_ds);
    if (k < 2)
        k = 1;
    {
        const tw_level_info *l = &s->levels[best];

        /* a block of 65535^2 pixels of 32-bit samples still sums within 64 bits */
        if (k > 65535)
            return twi_error_set(err, TW_E_INVALID,
                                 "io: %s %g would reduce level %d of '%s' by %.0f, more than "
                                 "65535",
                                 mpp > 0 ? "mpp" : "magnification",
                                 mpp > 0 ? mpp : magnification, best, s->path, k);
        out->level = best;
        out->reduce = (int)k;
        out->w = (l->w + (int64_t)k - 1) / (int64_t)k;
        out->h = (l->h + (int64_t)k - 1) / (int64_t)k;
        out->mpp_x = s->mpp_x * best_ds * k;
        out->mpp_y = s->mpp_y * best_ds * k;
        out->magnification = s->objective_power > 0 ? s->objective_power / (best_ds * k) : 0;
    }
    return TW_OK;
}

/* ---- the reduced view */

typedef struct reduce_view {
    int level; /* of s->inner */
    int k;
} reduce_view;

/* The most bytes of the level read at once for one region (a band of whole blocks). */
#define REDUCE_BAND_BYTES ((size_t)32 << 20)

/* Average the k x k blocks of `rows` source rows (sw pixels of ch samples each, at src, rows
 * src_stride apart) into one output row of ceil(sw / k) pixels: the sum of the block's
 * pixels inside the level, divided by their count, rounded half up (exact integers); float32:
 * the sum in double, divided, rounded to the nearest float. */
static void
reduce_row(const uint8_t *src, size_t src_stride, int64_t sw, int rows, int k, int ch,
           tw_sample_type type, void *acc, uint8_t *dst)
{
    int64_t ow = (sw + k - 1) / k, n = ow * ch;
    uint64_t *ai = acc;
    double *ad = acc;

    if (type == TW_F32)
        memset(ad, 0, (size_t)n * sizeof *ad);
    else
        memset(ai, 0, (size_t)n * sizeof *ai);
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = src + (size_t)r * src_stride;

        for (int64_t x = 0; x < sw; x++) {
            int64_t o = (x / k) * ch;

            for (int c = 0; c < ch; c++) {
                int64_t i = x * ch + c;

                switch (type) {
                case TW_U8: ai[o + c] += row[i]; break;
                case TW_U16: ai[o + c] += ((const uint16_t *)(const void *)row)[i]; break;
                case TW_U32: ai[o + c] += ((const uint32_t *)(const void *)row)[i]; break;
                case TW_F32: ad[o + c] += ((const float *)(const void *)row)[i]; break;
                default: break;
                }
            }
        }
    }
    for (int64_t ox = 0; ox < ow; ox++) {
        int64_t bw = sw - ox * k < k ? sw - ox * k : k;
        uint64_t cnt = (uint64_t)bw * (uint64_t)rows;

        for (int c = 0; c < ch; c++) {
            int64_t i = ox * ch + c;

            switch (type) {
            case TW_U8: dst[i] = (uint8_t)((ai[i] + cnt / 2) / cnt); break;
            case TW_U16:
                ((uint16_t *)(void *)dst)[i] = (uint16_t)((ai[i] + cnt / 2) / cnt);
                break;
            case TW_U32:
                ((uint32_t *)(void *)dst)[i] = (uint32_t)((ai[i] + cnt / 2) / cnt);
                break;
            case TW_F32: ((float *)(void *)dst)[i] = (float)(ad[i] / (double)cnt); break;
            default: break;
            }
        }
    }
}

void
twi_reduce_area(const uint8_t *src, size_t src_stride, int64_t sw, int64_t sh, int k, int ch,
                tw_sample_type type, void *acc, uint8_t *dst, size_t dst_stride)
{
    for (int64_t y = 0; y * k < sh; y++) {
        int rows = (int)(sh - y * k < k ? sh - y * k : k);

        reduce_row(src + (size_t)(y * k) * src_stride, src_stride, sw, rows, k, ch, type, acc,
                   dst + (size_t)y * dst_stride);
    }
}

static tw_status
reduce_read_region(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h,
                   uint8_t *dst, size_t stride, tw_error *err)
{
    const reduce_view *v = s->priv;
    tw_slide *in = s->inner;
    const tw_level_info *L = &in->levels[v->level];
    size_t px = twi_pixel_size(s->channels, s->type);
    int64_t k = v->k, sx = x * k, sw = w * k < L->w - sx ? w * k : L->w - sx;
    int64_t rows_total = h * k < L->h - y * k ? h * k : L->h - y * k;
    size_t src_stride = (size_t)sw * px;
    int64_t band = (int64_t)(REDUCE_BAND_BYTES / (src_stride * (size_t)k)) * k;
    uint8_t *buf = NULL;
    void *acc = NULL;
    tw_status st = TW_OK;

    (void)level;
    if (band < k)
        band = k;
    if (band > rows_total)
        band = (rows_total + k - 1) / k * k;
    if (!(buf = malloc(src_stride * (size_t)band)) ||
        !(acc = malloc((size_t)w * (size_t)s->channels * sizeof(uint64_t)))) {
        st = twi_error_set(err, TW_E_NOMEM, "io: out of memory reducing level %d of '%s'",
                           v->level, in->path);
        goto out;
    }
    for (int64_t r = 0; r < rows_total; r += band) {
        int64_t n = rows_total - r < band ? rows_total - r : band;

        if ((st = tw_slide_read_region(in, v->level, sx, y * k + r, sw, n, buf, src_stride,
                                       err)) != TW_OK)
            goto out;
        twi_reduce_area(buf, src_stride, sw, n, (int)k, s->channels, s->type, acc,
                        dst + (size_t)(r / k) * stride, stride);
    }
out:
    free(buf);
    free(acc);
    return st;
}

static uint64_t
reduce_decoded_tile_bytes(const tw_slide *s, int level)
{
    const reduce_view *v = s->priv;

    (void)level;
    return twi_slide_decoded_tile_bytes(s->inner, v->level);
}

static void
reduce_close(tw_slide *s)
{
    free(s->priv);
    s->priv = NULL;
    tw_slide_close(s->inner);
    s->inner = NULL;
}

static const twi_reader_ops reduce_ops = {
    .name = "reduce",
    .read_region = reduce_read_region,
    .decoded_tile_bytes = reduce_decoded_tile_bytes,
    .close = reduce_close,
};

tw_status
twi_slide_reduce(tw_slide *src, int level, int k, tw_slide **out, tw_error *err)
{
    tw_slide *s = NULL;
    reduce_view *v = NULL;
    const tw_level_info *L;
    size_t i;

    if (!src || !out || level < 0 || level >= src->n_levels || k < 2)
        return twi_error_set(err, TW_E_INVALID, "io: bad reduction (level %d, factor %d)",
                             level, k);
    if (src->channels == 2 || src->type == TW_U64 || tw_sample_size(src->type) == 0)
        return twi_error_set(err, TW_E_INVALID,
                             "io: '%s' holds %s, which an area average would not keep; read it "
                             "at a level instead of an mpp",
                             src->path,
                             src->channels == 2 ? "coordinate pairs" : "64-bit labels");
    L = &src->levels[level];
    if (!(s = calloc(1, sizeof *s)) || !(v = calloc(1, sizeof *v)) ||
        !(s->levels = calloc(1, sizeof *s->levels)) || !(s->path = strdup(src->path)) ||
        !(s->format = strdup(src->format)) ||
        !(s->prop_names = calloc(1, sizeof *s->prop_names)))
        goto nomem;
    s->cap_props = 1;
    for (i = 0; i < src->n_props; i++)
        if (twi_slide_set_property(s, src->prop_names[i], src->prop_values[i]) != TW_OK)
            goto nomem;
    v->level = level;
    v->k = k;
    s->ops = &reduce_ops;
    s->priv = v;
    s->n_levels = 1;
    s->levels[0].w = (L->w + k - 1) / k;
    s->levels[0].h = (L->h + k - 1) / k;
    s->levels[0].downsample = L->downsample * k;
    s->levels[0].tile_w = L->tile_w % k == 0 ? L->tile_w / k : 0;
    s->levels[0].tile_h = L->tile_h % k == 0 ? L->tile_h / k : 0;
    if (s->levels[0].tile_w == 0 || s->levels[0].tile_h == 0)
        s->levels[0].tile_w = s->levels[0].tile_h = 0;
    s->channels = src->channels;
    s->type = src->type;
    s->mpp_x = src->mpp_x; /* level 0 of the source: the level's downsample says the rest */
    s->mpp_y = src->mpp_y;
    s->objective_power = src->objective_power;
    s->inner = src;
    *out = s;
    return TW_OK;
nomem:
    if (s)
        s->ops = NULL;
    free(v);
    tw_slide_close(s);
    return twi_error_set(err, TW_E_NOMEM, "io: out of memory reducing '%s'", src->path);
}
