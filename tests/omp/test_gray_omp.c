/* SPDX-License-Identifier: MIT */
/* tilewave tests: the OpenMP gray kernel against a naive serial reference. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest_rnd.h"

#define PAD_BYTE 0xA5

static const int32_t sizes[][2] = {
    {1, 1}, {2, 1}, {1, 2}, {3, 5}, {7, 7}, {16, 16}, {31, 17}, {64, 3},
    {1, 200}, {300, 1}, {127, 129}, {256, 256}, {300, 200},
};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

typedef struct image {
    uint8_t *buf;
    tw_tile_view v;
} image;

/* A view of w x h pixels with `extra` padding bytes after each row, filled with random samples
 * (or PAD_BYTE when random is false). Strides stay multiples of the sample size. */
static image
image_make(int32_t w, int32_t h, int32_t ch, tw_sample_type t, int64_t extra, bool random,
           uint64_t *rng)
{
    image im;
    size_t ss = tw_sample_size(t);
    size_t bytes;

    im.v.stride = (int64_t)((size_t)w * (size_t)ch * ss) + extra * (int64_t)ss;
    bytes = (size_t)im.v.stride * (size_t)h + 1;
    im.buf = malloc(bytes);
    cr_assert_not_null(im.buf);
    memset(im.buf, PAD_BYTE, bytes);
    if (random) {
        for (size_t i = 0; i < bytes; i++)
            im.buf[i] = (uint8_t)(twtest_xorshift(rng) >> 56);
    }
    im.v.data = im.buf;
    im.v.w = w;
    im.v.h = h;
    im.v.channels = ch;
    im.v.type = t;
    im.v.x0 = 0;
    im.v.y0 = 0;
    return im;
}

static uint32_t
sample_at(const tw_tile_view *v, int32_t x, int32_t y, int32_t c)
{
    const uint8_t *p = (const uint8_t *)v->data + (int64_t)y * v->stride;
    size_t i = ((size_t)x * (size_t)v->channels + (size_t)c);

    if (v->type == TW_U8)
        return p[i];
    /* little or big endian alike: read the sample the way the kernel stored it */
    uint16_t s;
    memcpy(&s, p + 2 * i, 2);
    return s;
}

/* Naive reference: round((299 R + 587 G + 114 B) / 1000), halves up, written independently. */
static uint32_t
ref_pixel(const tw_tile_view *in, int32_t x, int32_t y, int mode)
{
    uint32_t r = sample_at(in, x, y, 0), g, b;

    if (in->channels == 1)
        return r;
    g = sample_at(in, x, y, 1);
    b = sample_at(in, x, y, 2);
    switch (mode) {
    case 1: return r;
    case 2: return g;
    case 3: return b;
    default: {
        uint64_t q = 299ull * r + 587ull * g + 114ull * b;
        return (uint32_t)((2 * q + 1000) / 2000);
    }
    }
}

static void
check_against_reference(const image *in, const image *out, int mode)
{
    size_t ss = tw_sample_size(in->v.type);
    size_t row = (size_t)in->v.w * ss;

    for (int32_t y = 0; y < in->v.h; y++) {
        const uint8_t *o = out->buf + (size_t)y * (size_t)out->v.stride;

        for (int32_t x = 0; x < in->v.w; x++) {
            uint32_t want = ref_pixel(&in->v, x, y, mode);
            uint32_t got = sample_at(&out->v, x, y, 0);

            if (got != want)
                cr_fatal("%dx%d %s mode %d: pixel (%d,%d) got %u want %u", in->v.w, in->v.h,
                         tw_sample_type_name(in->v.type), mode, x, y, got, want);
        }
        /* padding after the row is never written */
        for (size_t i = row; i < (size_t)out->v.stride; i++)
            cr_assert(eq(u8, o[i], PAD_BYTE), "padding written at row %d byte %zu", y, i);
    }
}

Test(gray_omp, rgb_matches_reference_all_modes_sizes_types_threads)
{
    /* Every mode, u8 and u16 RGB, 13 sizes from 1x1 to 300x200, tight and odd strides,
     * 1 and 2 threads: each output pixel equals the naive reference, padding is untouched. */
    static const tw_sample_type types[] = {TW_U8, TW_U16};
    uint64_t rng = 0x9E3779B97F4A7C15ull;

    for (size_t t = 0; t < 2; t++) {
        for (size_t s = 0; s < N_SIZES; s++) {
            for (int extra = 0; extra < 2; extra++) {
                for (int mode = 0; mode < 4; mode++) {
                    for (int nt = 1; nt <= 2; nt++) {
                        int32_t w = sizes[s][0], h = sizes[s][1];
                        /* odd paddings: 5 samples after each input row, 3 after each output */
                        image in = image_make(w, h, 3, types[t], extra ? 5 : 0, true, &rng);
                        image out = image_make(w, h, 1, types[t], extra ? 3 : 0, false, &rng);
                        tw_status st = twi_omp_gray(&in.v, &out.v, mode, nt);

                        cr_assert(eq(int, st, TW_OK));
                        check_against_reference(&in, &out, mode);
                        free(in.buf);
                        free(out.buf);
                    }
                }
            }
        }
    }
}

Test(gray_omp, u8_luminance_extremes_exact)
{
    /* Hand-computed values: black, white, pure primaries and a rounding-half case. */
    static const uint8_t px[][3] = {{0, 0, 0}, {255, 255, 255}, {255, 0, 0}, {0, 255, 0},
                                    {0, 0, 255}, {1, 1, 1}, {10, 20, 30}};
    static const uint8_t want[] = {0, 255, 76, 150, 29, 1, 18};
    uint8_t in[sizeof px], out[7];
    tw_tile_view vi = {in, sizeof in, 7, 1, 3, TW_U8, 0, 0};
    tw_tile_view vo = {out, sizeof out, 7, 1, 1, TW_U8, 0, 0};

    /* 299*255 + 500 = 76745 -> 76; 587*255 + 500 = 150185 -> 150; 114*255 + 500 -> 29;
     * 10,20,30: 2990 + 11740 + 3420 + 500 = 18650 -> 18 */
    memcpy(in, px, sizeof px);
    cr_assert(eq(int, twi_omp_gray(&vi, &vo, 0, 1), TW_OK));
    for (int i = 0; i < 7; i++)
        cr_assert(eq(u8, out[i], want[i]), "pixel %d", i);
}

Test(gray_omp, u16_white_stays_white)
{
    /* The 16-bit extreme does not overflow: 65535 in every channel gives 65535. */
    uint16_t in[6] = {65535, 65535, 65535, 65535, 0, 0}, out[2] = {0, 0};
    tw_tile_view vi = {in, sizeof in, 2, 1, 3, TW_U16, 0, 0};
    tw_tile_view vo = {out, sizeof out, 2, 1, 1, TW_U16, 0, 0};

    cr_assert(eq(int, twi_omp_gray(&vi, &vo, 0, 2), TW_OK));
    cr_assert(eq(u16, out[0], 65535));
    cr_assert(eq(u16, out[1], 19595)); /* (299 * 65535 + 500) / 1000 = 19595 */
}

Test(gray_omp, one_channel_is_copied_for_every_type)
{
    /* 1-channel u8, u16, u32 and f32 inputs are copied unchanged whatever the mode. */
    static const tw_sample_type types[] = {TW_U8, TW_U16, TW_U32, TW_F32};
    uint64_t rng = 12345;

    for (size_t t = 0; t < 4; t++) {
        for (int mode = 0; mode < 4; mode++) {
            image in = image_make(37, 23, 1, types[t], 3, true, &rng);
            image out = image_make(37, 23, 1, types[t], 1, false, &rng);
            size_t row = 37 * tw_sample_size(types[t]);

            cr_assert(eq(int, twi_omp_gray(&in.v, &out.v, mode, mode % 2 + 1), TW_OK));
            for (int y = 0; y < 23; y++)
                cr_assert(eq(int, memcmp(in.buf + (size_t)y * (size_t)in.v.stride,
                                         out.buf + (size_t)y * (size_t)out.v.stride, row), 0),
                          "type %s row %d", tw_sample_type_name(types[t]), y);
            free(in.buf);
            free(out.buf);
        }
    }
}

Test(gray_omp, empty_views_are_a_no_op)
{
    /* w = 0 or h = 0 succeeds without touching memory (data may be NULL). */
    tw_tile_view vi = {NULL, 0, 0, 5, 3, TW_U8, 0, 0};
    tw_tile_view vo = {NULL, 0, 0, 5, 1, TW_U8, 0, 0};

    cr_assert(eq(int, twi_omp_gray(&vi, &vo, 0, 2), TW_OK));
    vi.w = vo.w = 5;
    vi.h = vo.h = 0;
    cr_assert(eq(int, twi_omp_gray(&vi, &vo, 0, 1), TW_OK));
}

Test(gray_omp, rejects_mismatched_views)
{
    /* Shapes, types, channel counts, modes and strides that break the contract give
     * TW_E_INVALID and leave the output alone. */
    uint16_t in[4 * 3 * 2], out[4 * 2 + 1];
    tw_tile_view vi = {in, 4 * 3 * 2, 4, 2, 3, TW_U16, 0, 0};
    tw_tile_view vo = {out, 4 * 2, 4, 2, 1, TW_U16, 0, 0};
    tw_tile_view a, b;

    memset(in, 1, sizeof in);
    memset(out, 0, sizeof out);
    cr_assert(eq(int, twi_omp_gray(&vi, &vo, 0, 1), TW_OK));
    cr_assert(eq(int, twi_omp_gray(NULL, &vo, 0, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_gray(&vi, NULL, 0, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_gray(&vi, &vo, 4, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_gray(&vi, &vo, -1, 1), TW_E_INVALID));
    b = vo, b.w = 3;
    cr_assert(eq(int, twi_omp_gray(&vi, &b, 0, 1), TW_E_INVALID));
    b = vo, b.h = 1;
    cr_assert(eq(int, twi_omp_gray(&vi, &b, 0, 1), TW_E_INVALID));
    b = vo, b.type = TW_U8;
    cr_assert(eq(int, twi_omp_gray(&vi, &b, 0, 1), TW_E_INVALID));
    b = vo, b.channels = 3;
    cr_assert(eq(int, twi_omp_gray(&vi, &b, 0, 1), TW_E_INVALID));
    a = vi, a.channels = 2;
    cr_assert(eq(int, twi_omp_gray(&a, &vo, 0, 1), TW_E_INVALID));
    a = vi, a.channels = 4;
    cr_assert(eq(int, twi_omp_gray(&a, &vo, 0, 1), TW_E_INVALID));
    a = vi, a.type = TW_U32, a.w = 2, b = vo, b.type = TW_U32, b.w = 2;
    cr_assert(eq(int, twi_omp_gray(&a, &b, 0, 1), TW_E_INVALID)); /* RGB only for u8/u16 */
    a = vi, a.type = (tw_sample_type)0, b = vo, b.type = (tw_sample_type)0;
    cr_assert(eq(int, twi_omp_gray(&a, &b, 0, 1), TW_E_INVALID));
    a = vi, a.stride = 4 * 3 * 2 - 2;
    cr_assert(eq(int, twi_omp_gray(&a, &vo, 0, 1), TW_E_INVALID)); /* stride too small */
    a = vi, a.stride = 4 * 3 * 2 + 1;
    cr_assert(eq(int, twi_omp_gray(&a, &vo, 0, 1), TW_E_INVALID)); /* misaligned u16 rows */
    b = vo, b.data = (uint8_t *)(void *)out + 1;
    cr_assert(eq(int, twi_omp_gray(&vi, &b, 0, 1), TW_E_INVALID)); /* misaligned u16 data */
    a = vi, a.data = NULL;
    cr_assert(eq(int, twi_omp_gray(&a, &vo, 0, 1), TW_E_INVALID));
    a = vi, a.w = -1, b = vo, b.w = -1;
    cr_assert(eq(int, twi_omp_gray(&a, &b, 0, 1), TW_E_INVALID));
}
