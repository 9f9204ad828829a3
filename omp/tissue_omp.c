/* SPDX-License-Identifier: MIT */
/* tilewave: the pixel steps of the input preparation (ops/tissue.c): the low-resolution box
 * average, the tissue mask (chroma, dilation, summed-area table), gray histograms and the
 * glass fills of skipped regions. ops/tissue.c's header comment states the rules. */
#include <stdint.h>
#include <string.h>

#include "omp_kernels.h"

void
twi_omp_tissue_box_band(const void *band, size_t ss, size_t ch, int64_t w, int64_t rows,
                        int64_t k, int64_t lw, uint64_t *sum, void *out)
{
    memset(sum, 0, (size_t)lw * ch * sizeof *sum);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < w; x++)
            for (size_t c = 0; c < ch; c++) {
                size_t i = (size_t)r * (size_t)w * ch + (size_t)x * ch + c;
                uint64_t v = ss == 1 ? ((const uint8_t *)band)[i] : ((const uint16_t *)band)[i];

                sum[(size_t)(x / k) * ch + c] += v;
            }
    for (int64_t bx = 0; bx < lw; bx++) {
        uint64_t cols = (uint64_t)(w - bx * k < k ? w - bx * k : k);
        uint64_t n = cols * (uint64_t)rows;

        for (size_t c = 0; c < ch; c++) {
            uint64_t v = (sum[(size_t)bx * ch + c] + n / 2) / n;
            size_t i = (size_t)bx * ch + c;

            if (ss == 1)
                ((uint8_t *)out)[i] = (uint8_t)v;
            else
                ((uint16_t *)out)[i] = (uint16_t)v;
        }
    }
}

/* 8-bit view of sample c of pixel i. */
static unsigned
px8(const void *px, tw_sample_type type, int channels, int64_t i, int c)
{
    size_t k = (size_t)i * (size_t)channels + (size_t)c;

    return type == TW_U8 ? ((const uint8_t *)px)[k] : (unsigned)(((const uint16_t *)px)[k] >> 8);
}

void
twi_omp_tissue_chroma_hist(const void *px, tw_sample_type type, int channels, int64_t n,
                           uint64_t hist[256])
{
    for (int64_t i = 0; i < n; i++) {
        unsigned r = px8(px, type, channels, i, 0), g = px8(px, type, channels, i, 1),
                 b = px8(px, type, channels, i, 2);
        unsigned hi = r > g ? (r > b ? r : b) : (g > b ? g : b);
        unsigned lo = r < g ? (r < b ? r : b) : (g < b ? g : b);

        hist[hi - lo]++;
    }
}

int64_t
twi_omp_tissue_classify(const void *px, tw_sample_type type, int channels, int64_t n, int64_t t,
                        unsigned dark, uint8_t *tis, uint64_t gsum[3], int64_t *glass_n)
{
    int64_t count = 0;

    for (int64_t i = 0; i < n; i++) {
        unsigned r = px8(px, type, channels, i, 0), g = px8(px, type, channels, i, 1),
                 b = px8(px, type, channels, i, 2);
        unsigned hi = r > g ? (r > b ? r : b) : (g > b ? g : b);
        unsigned lo = r < g ? (r < b ? r : b) : (g < b ? g : b);
        unsigned lum = (299u * r + 587u * g + 114u * b + 500u) / 1000u;

        tis[i] = (int64_t)(hi - lo) > t || lum < dark;
        count += tis[i];
        if (!tis[i]) {
            for (int c = 0; c < 3; c++) {
                size_t k = (size_t)i * 3 + (size_t)c;

                gsum[c] += type == TW_U8 ? ((const uint8_t *)px)[k] : ((const uint16_t *)px)[k];
            }
            (*glass_n)++;
        }
    }
    return count;
}

/* dst[i] = any of src in [i - m, i + m] along a line of n with step `step`. */
static void
dilate_line(const uint8_t *src, uint8_t *dst, int64_t n, int64_t step, int64_t m)
{
    int64_t last = -((int64_t)1 << 40); /* the last set position seen */

    /* forward: positions within m after a set one; backward: within m before */
    for (int64_t i = 0; i < n; i++) {
        if (src[i * step])
            last = i;
        dst[i * step] = i - last <= m;
    }
    last = (int64_t)1 << 40;
    for (int64_t i = n - 1; i >= 0; i--) {
        if (src[i * step])
            last = i;
        if (last - i <= m)
            dst[i * step] = 1;
    }
}

void
twi_omp_tissue_dilate(const uint8_t *tis, uint8_t *tmp, uint8_t *dil, int64_t w, int64_t h,
                      int64_t m)
{
    for (int64_t y = 0; y < h; y++)
        dilate_line(tis + y * w, tmp + y * w, w, 1, m);
    for (int64_t x = 0; x < w; x++)
        dilate_line(tmp + x, dil + x, h, w, m);
}

void
twi_omp_tissue_sat(const uint8_t *dil, int64_t w, int64_t h, int32_t *sat)
{
    for (int64_t y = 0; y < h; y++) {
        int32_t rs = 0;

        for (int64_t x = 0; x < w; x++) {
            rs += dil[y * w + x];
            sat[(y + 1) * (w + 1) + x + 1] = sat[y * (w + 1) + x + 1] + rs;
        }
    }
}

void
twi_omp_tissue_mask_image(const uint8_t *tis, const uint8_t *dil, int64_t n, uint8_t *img)
{
    for (int64_t i = 0; i < n; i++)
        img[i] = tis[i] ? 255 : dil[i] ? 128 : 0;
}

void
twi_omp_tissue_hist(const void *g, size_t ss, int64_t n, uint64_t *hist)
{
    if (ss == 1)
        for (int64_t i = 0; i < n; i++)
            hist[((const uint8_t *)g)[i]]++;
    else
        for (int64_t i = 0; i < n; i++)
            hist[((const uint16_t *)g)[i]]++;
}

void
twi_omp_tissue_fill_input(const uint16_t glass[3], tw_tile_view *v)
{
    for (int32_t r = 0; r < v->h; r++) {
        char *row = (char *)v->data + (int64_t)r * v->stride;

        for (int32_t x = 0; x < v->w; x++)
            for (int c = 0; c < v->channels; c++) {
                size_t i = (size_t)x * (size_t)v->channels + (size_t)c;

                if (v->type == TW_U8)
                    ((uint8_t *)row)[i] = (uint8_t)glass[c < 3 ? c : 0];
                else
                    ((uint16_t *)(void *)row)[i] = glass[c < 3 ? c : 0];
            }
    }
}

void
twi_omp_tissue_fill_output(uint16_t bg, tw_tile_view *v)
{
    for (int32_t r = 0; r < v->h; r++) {
        char *row = (char *)v->data + (int64_t)r * v->stride;

        if (v->type == TW_U8) {
            memset(row, bg, (size_t)v->w);
        } else {
            for (int32_t x = 0; x < v->w; x++)
                ((uint16_t *)(void *)row)[x] = bg;
        }
    }
}
