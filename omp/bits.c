/* SPDX-License-Identifier: MIT */
/* tilewave: rows of flags packed 8 a byte and back (the masks multi-pass operations keep
 * between their passes: edt, label). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "omp_kernels.h"

void
twi_bits_pack_row(const uint8_t *restrict fg, int32_t w, uint8_t *restrict out)
{
    int32_t c = 0;

    for (; c + 8 <= w; c += 8) {
        uint8_t b = 0;

        for (int k = 0; k < 8; k++)
            b |= (uint8_t)((fg[c + k] != 0) << k);
        out[c >> 3] = b;
    }
    if (c < w) {
        uint8_t b = 0;

        for (int k = 0; c + k < w; k++)
            b |= (uint8_t)((fg[c + k] != 0) << k);
        out[c >> 3] = b;
    }
}

/* Eight flags of each byte value, as 8 bytes (little-endian: bit k is byte k). */
static uint64_t unpack_lut[256];
static pthread_once_t unpack_once = PTHREAD_ONCE_INIT;

static void
unpack_lut_init(void)
{
    for (int v = 0; v < 256; v++)
        for (int k = 0; k < 8; k++)
            unpack_lut[v] |= (uint64_t)((v >> k) & 1) << (8 * k);
}

void
twi_bits_unpack_row(const uint8_t *restrict in, int32_t w, uint8_t *restrict fg)
{
    int32_t c = 0;

    pthread_once(&unpack_once, unpack_lut_init);
    for (; c + 8 <= w; c += 8) {
        uint64_t v = unpack_lut[in[c >> 3]];

        memcpy(fg + c, &v, 8); /* little-endian hosts (x86-64, arm64) */
    }
    for (; c < w; c++)
        fg[c] = (uint8_t)((in[c >> 3] >> (c & 7)) & 1);
}

void
twi_bits_unpack_rows(const uint8_t *in, int64_t in_stride, int32_t w, int32_t h, uint8_t *fg,
                     int64_t fg_stride)
{
    for (int32_t r = 0; r < h; r++)
        twi_bits_unpack_row(in + r * in_stride, w, fg + r * fg_stride);
}

void
twi_bits_pack_view(const tw_tile_view *v, uint8_t *bits, int64_t bits_row, uint8_t *row)
{
    for (int32_t r = 0; r < v->h; r++) {
        const uint8_t *src = (const uint8_t *)v->data + (int64_t)r * v->stride;

        if (v->type == TW_U16) {
            const uint16_t *r16 = (const uint16_t *)(const void *)src;

            for (int32_t x = 0; x < v->w; x++)
                row[x] = r16[x] != 0;
            src = row;
        }
        twi_bits_pack_row(src, v->w, bits + r * bits_row);
    }
}

void
twi_bits_unpack_view(const uint8_t *bits, int64_t bits_row, tw_tile_view *v, uint8_t *row)
{
    for (int32_t r = 0; r < v->h; r++) {
        uint8_t *dst = (uint8_t *)v->data + (int64_t)r * v->stride;

        twi_bits_unpack_row(bits + r * bits_row, v->w, v->type == TW_U16 ? row : dst);
        if (v->type == TW_U16) {
            uint16_t *r16 = (uint16_t *)(void *)dst;

            for (int32_t x = 0; x < v->w; x++)
                r16[x] = row[x];
        }
    }
}
