/* SPDX-License-Identifier: MIT */
/* tilewave: the 2x2 reduction of pyramid levels and the overlay blend (docs/io.md). */

/*
 * Reduction. Pixel (X, Y) of level k+1 comes from pixels (2X..2X+1, 2Y..2Y+1) of level k, as
 * many of them as exist (4 inside, 2 on the last column or row of an odd size, 1 in the odd
 * corner), channel by channel:
 *   TWI_PYR_MEAN     8/16 bits: (sum + n/2) / n, the mean rounded half up; float32: the sum in
 *                    double, in raster order, divided by n and rounded to float.
 *   TWI_PYR_MAX      the largest sample (masks: a set pixel stays visible at every level).
 *   TWI_PYR_NEAREST  the top-left sample (labels, indices, coordinates: values stay valid).
 * Every level is the reduction of the level above, not of level 0.
 */
#include <string.h>

#include "io_internal.h"
#include "tw_io.h"

#define REDUCE_INT(T)                                                                          \
    do {                                                                                       \
        for (int64_t y = 0; y < dh; y++) {                                                     \
            const T *r0 = (const T *)(src + (size_t)(2 * y) * src_stride);                     \
            const T *r1 = 2 * y + 1 < h ? (const T *)(src + (size_t)(2 * y + 1) * src_stride)  \
                                        : NULL;                                                \
            T *d = (T *)(dst + (size_t)y * dst_stride);                                        \
            for (int64_t x = 0; x < dw; x++) {                                                 \
                int64_t x1 = 2 * x + 1 < w ? 2 * x + 1 : -1;                                   \
                for (int c = 0; c < ch; c++) {                                                 \
                    uint64_t s[4];                                                             \
                    int n = 0;                                                                 \
                    s[n++] = r0[2 * x * ch + c];                                               \
                    if (x1 >= 0)                                                               \
                        s[n++] = r0[x1 * ch + c];                                              \
                    if (r1) {                                                                  \
                        s[n++] = r1[2 * x * ch + c];                                           \
                        if (x1 >= 0)                                                           \
                            s[n++] = r1[x1 * ch + c];                                          \
                    }                                                                          \
                    uint64_t v = s[0];                                                         \
                    if (rule == TWI_PYR_MEAN) {                                                \
                        for (int i = 1; i < n; i++)                                            \
                            v += s[i];                                                         \
                        v = (v + (uint64_t)n / 2) / (uint64_t)n;                               \
                    } else if (rule == TWI_PYR_MAX) {                                          \
                        for (int i = 1; i < n; i++)                                            \
                            v = s[i] > v ? s[i] : v;                                           \
                    }                                                                          \
                    d[x * ch + c] = (T)v;                                                      \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    } while (0)

void
twi_pyr_reduce(const uint8_t *src, size_t src_stride, int64_t w, int64_t h, int ch,
               tw_sample_type type, twi_pyr_rule rule, uint8_t *dst, size_t dst_stride)
{
    const int64_t dw = (w + 1) / 2, dh = (h + 1) / 2;

    switch (type) {
    case TW_U8: REDUCE_INT(uint8_t); break;
    case TW_U16: REDUCE_INT(uint16_t); break;
    case TW_U32: REDUCE_INT(uint32_t); break;
    case TW_U64: REDUCE_INT(uint64_t); break; /* never TWI_PYR_MEAN: the sum could overflow */
    case TW_F32:
        for (int64_t y = 0; y < dh; y++) {
            const float *r0 = (const float *)(src + (size_t)(2 * y) * src_stride);
            const float *r1 =
                2 * y + 1 < h ? (const float *)(src + (size_t)(2 * y + 1) * src_stride) : NULL;
            float *d = (float *)(dst + (size_t)y * dst_stride);

            for (int64_t x = 0; x < dw; x++) {
                int64_t x1 = 2 * x + 1 < w ? 2 * x + 1 : -1;

                for (int c = 0; c < ch; c++) {
                    float s[4];
                    int n = 0;
                    double sum;
                    float v;

                    s[n++] = r0[2 * x * ch + c];
                    if (x1 >= 0)
                        s[n++] = r0[x1 * ch + c];
                    if (r1) {
                        s[n++] = r1[2 * x * ch + c];
                        if (x1 >= 0)
                            s[n++] = r1[x1 * ch + c];
                    }
                    v = s[0];
                    if (rule == TWI_PYR_MEAN) {
                        sum = s[0];
                        for (int i = 1; i < n; i++)
                            sum += s[i];
                        v = (float)(sum / n);
                    } else if (rule == TWI_PYR_MAX) {
                        for (int i = 1; i < n; i++)
                            v = s[i] > v ? s[i] : v;
                    }
                    d[x * ch + c] = v;
                }
            }
        }
        break;
    }
}

/*
 * Overlay. Strength s of a result sample v: v / 255 (8-bit) or v / 65535 (16-bit), so a gray
 * result tints in proportion; masks (`binary`: hmax, regional-max, thresholded inputs, whose
 * set value may be 1 as well as 255), u32, u64 and float32 results: 1 where v != 0. Each
 * channel: out = base (1 - 0.4 s) + tint 0.4 s, rounded half up, tint TWI_OVERLAY_TINT; base
 * is the slide (gray repeated, 16-bit scaled to 8 bits rounded). Computed exactly in
 * integers: with den = 5 * max and wgt = 2 v (8/16-bit) or den = 5, wgt = 2 (the others),
 * out = (2 (base (den - wgt) + tint wgt) + den) / (2 den).
 */
static const uint8_t tint[3] = {TWI_OVERLAY_TINT};

void
twi_overlay_blend(const uint8_t *res, size_t res_stride, tw_sample_type res_type,
                  bool binary, const uint8_t *base, size_t base_stride, int base_ch,
                  tw_sample_type base_type, int64_t w, int64_t h, uint8_t *dst,
                  size_t dst_stride)
{
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *rr = res + (size_t)y * res_stride;
        const uint8_t *br = base + (size_t)y * base_stride;
        uint8_t *d = dst + (size_t)y * dst_stride;

        for (int64_t x = 0; x < w; x++) {
            uint64_t den, wgt;
            uint32_t b[3];

            switch (res_type) {
            case TW_U8:
                den = binary ? 5 : 5 * 255u;
                wgt = binary ? (rr[x] ? 2 : 0) : 2u * rr[x];
                break;
            case TW_U16: {
                const uint16_t v = ((const uint16_t *)rr)[x];

                den = binary ? 5 : 5 * 65535u;
                wgt = binary ? (v ? 2 : 0) : 2u * v;
                break;
            }
            case TW_U32:
                den = 5;
                wgt = ((const uint32_t *)rr)[x] ? 2 : 0;
                break;
            case TW_U64:
                den = 5;
                wgt = ((const uint64_t *)rr)[x] ? 2 : 0;
                break;
            default:
                den = 5;
                wgt = ((const float *)rr)[x] != 0.0f ? 2 : 0;
                break;
            }
            for (int c = 0; c < 3; c++) {
                int bc = base_ch == 3 ? c : 0;

                if (base_type == TW_U16)
                    b[c] = (((const uint16_t *)br)[x * base_ch + bc] * 255u + 32767u) / 65535u;
                else
                    b[c] = br[x * base_ch + bc];
            }
            for (int c = 0; c < 3; c++)
                d[3 * x + c] =
                    (uint8_t)((2 * (b[c] * (den - wgt) + tint[c] * wgt) + den) / (2 * den));
        }
    }
}
