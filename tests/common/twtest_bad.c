/* SPDX-License-Identifier: MIT */
/* tilewave tests: hand-made bad TIFFs and other bad slides (twtest_bad.h). */
#include "twtest_bad.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest.h"

void
twtest_bad_tiff(const char *path, twtest_tag *tags, size_t n, size_t pad)
{
    size_t size = TWTEST_PIXELS_AT + pad, o = 10;
    uint8_t *b = calloc(1, size);
    FILE *f;

    cr_assert_not_null(b);
    for (size_t i = 1; i < n; i++) /* insertion sort: directories are sorted by tag */
        for (size_t j = i; j > 0 && tags[j - 1].tag > tags[j].tag; j--) {
            twtest_tag t = tags[j];

            tags[j] = tags[j - 1];
            tags[j - 1] = t;
        }
    memcpy(b, "II*\0", 4);
    b[4] = 8;
    b[8] = (uint8_t)n;
    for (size_t i = 0; i < n; i++, o += 12) {
        /* LONG for sizes and offsets, SHORT for the rest */
        bool is_long = tags[i].tag == 256 || tags[i].tag == 257 || tags[i].tag == 273 ||
                       tags[i].tag == 278 || tags[i].tag == 279 || tags[i].tag >= 322;

        b[o] = (uint8_t)(tags[i].tag & 0xff);
        b[o + 1] = (uint8_t)(tags[i].tag >> 8);
        b[o + 2] = is_long ? 4 : 3;
        b[o + 4] = 1;
        for (int k = 0; k < (is_long ? 4 : 2); k++)
            b[o + 8 + (size_t)k] = (uint8_t)(tags[i].value >> (8 * k));
    }
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, size, f), size);
    fclose(f);
    free(b);
}

void
twtest_bad_image(const char *path, uint32_t w, uint32_t h, uint16_t spp, uint16_t bps,
                 uint16_t compression, int64_t tile, uint32_t offset, uint32_t count)
{
    twtest_tag t[12] = {
        {256, w}, {257, h}, {258, bps}, {259, compression}, {262, spp >= 3 ? 2 : 1}, {277, spp},
    };
    size_t n = 6;

    if (tile >= 0) {
        t[n++] = (twtest_tag){322, (uint32_t)tile};
        t[n++] = (twtest_tag){323, (uint32_t)tile};
        t[n++] = (twtest_tag){324, offset};
        t[n++] = (twtest_tag){325, count};
    } else {
        t[n++] = (twtest_tag){273, offset};
        t[n++] = (twtest_tag){278, h};
        t[n++] = (twtest_tag){279, count};
    }
    twtest_bad_tiff(path, t, n, 300);
}

bool
twtest_bad_slide(int i, const char *path, const char **what)
{
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                  'I', 'H', 'D', 'R', 0, 0, 1, 0, 0, 0, 1, 0, 8, 2, 0, 0, 0};
    static const uint8_t jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0, 1, 1,
                                   0, 0, 1, 0, 1, 0, 0, 0xff, 0xd9};
    const uint32_t big = (uint32_t)1 << 31;
    FILE *f;

    switch (i) {
    case 0:
        *what = "zero-size file";
        f = fopen(path, "wb");
        cr_assert_not_null(f);
        fclose(f);
        return true;
    case 1:
    case 2:
    case 3: {
        /* the sample slide cut to a third, just inside its first directory, after its header */
        static const int64_t keep[] = {-3, 300, 16};
        tw_sample_opts o;
        tw_error err = {0};
        struct stat sb;

        *what = i == 1 ? "sample cut to a third" : i == 2 ? "sample cut at 300 bytes"
                                                          : "sample cut after its header";
        tw_sample_opts_init(&o);
        o.w = 700;
        o.h = 600;
        cr_assert_eq(tw_sample_write(path, &o, &err), TW_OK, "%s", err.message);
        cr_assert_eq(stat(path, &sb), 0);
        cr_assert_eq(truncate(path, keep[i - 1] < 0 ? sb.st_size / 3 : keep[i - 1]), 0);
        return true;
    }
    case 4:
        *what = "2^31 x 2^31 striped";
        twtest_bad_image(path, big, big, 3, 8, 1, -1, TWTEST_PIXELS_AT, 16);
        return true;
    case 5:
        *what = "2^31 x 2^31 tiled 256";
        twtest_bad_image(path, big, big, 3, 8, 8, 256, TWTEST_PIXELS_AT, 16);
        return true;
    case 6:
        *what = "tile of 0";
        twtest_bad_image(path, 100, 100, 3, 8, 8, 0, TWTEST_PIXELS_AT, 16);
        return true;
    case 7:
        *what = "tile of 65536 on a 100 x 100 image";
        twtest_bad_image(path, 100, 100, 3, 8, 8, 65536, TWTEST_PIXELS_AT, 16);
        return true;
    case 8:
        *what = "tile of 4096 on a 100 x 100 image, 16 bytes of it";
        twtest_bad_image(path, 100, 100, 3, 8, 1, 4096, TWTEST_PIXELS_AT, 16);
        return true;
    case 9:
        *what = "unknown compression 12345";
        twtest_bad_image(path, 16, 16, 3, 8, 12345, 16, TWTEST_PIXELS_AT, 16);
        return true;
    case 10:
        *what = "JPEG 2000 compression 33003 on one gray sample";
        twtest_bad_image(path, 16, 16, 1, 8, 33003, 16, TWTEST_PIXELS_AT, 16);
        return true;
    case 11:
        *what = "a PNG named .tif";
        f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(png, 1, sizeof png, f), sizeof png);
        fclose(f);
        return true;
    case 12:
        *what = "a JPEG named .tif";
        f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(jpeg, 1, sizeof jpeg, f), sizeof jpeg);
        fclose(f);
        return true;
    case 13:
        *what = "text named .tif";
        f = fopen(path, "wb");
        cr_assert_not_null(f);
        fputs("this is not a slide\n", f);
        fclose(f);
        return true;
    case 14:
        *what = "TIFF magic then noise";
        f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite("II*\0", 1, 4, f), 4);
        for (uint64_t k = 0, r = 12345; k < 4096; k++)
            fputc((int)(twtest_xorshift(&r) & 255), f);
        fclose(f);
        return true;
    default: return false;
    }
}
