/* SPDX-License-Identifier: MIT */
/* tilewave tests: io helpers: a reference pixel pattern, writing and checking TIFFs. */
#ifndef IO_TESTUTIL_H
#define IO_TESTUTIL_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#include "tilewave.h"
#include "twtest.h"

/* The reference: sample c of pixel (x, y) of a level is a hash of (seed, x, y, c), so any
 * region can be produced on its own and compared with what a reader returns. */
static inline uint64_t
tu_hash(uint64_t x)
{
    return twtest_mix64(x + 0x9e3779b97f4a7c15ULL);
}

static inline uint64_t
tu_sample_bits(uint64_t seed, int64_t x, int64_t y, int c)
{
    return tu_hash(seed * 0x100000001b3ULL ^ tu_hash((uint64_t)x * 0x10001ULL + (uint64_t)c) ^
                   ((uint64_t)y << 32));
}

/* Store the reference sample of (x, y, c) at p, as type t. */
static inline void
tu_store(void *p, tw_sample_type t, uint64_t bits)
{
    /* memcpy: rows with odd strides leave samples unaligned */
    switch (t) {
    case TW_U8: *(uint8_t *)p = (uint8_t)bits; break;
    case TW_U16: {
        uint16_t v = (uint16_t)bits;
        memcpy(p, &v, 2);
        break;
    }
    case TW_U32: {
        uint32_t v = (uint32_t)bits;
        memcpy(p, &v, 4);
        break;
    }
    case TW_U64: memcpy(p, &bits, 8); break;
    case TW_F32: {
        /* finite values with fractions and signs, exact in float */
        float f = (float)(int32_t)(bits & 0xfffff) / 64.0f - 8000.0f;
        memcpy(p, &f, 4);
        break;
    }
    }
}

/* Fill a w x h buffer (rows `stride` bytes apart) with the reference of the region at
 * (x0, y0); pixels at or beyond (img_w, img_h) get zero (what a padded edge tile holds). */
static inline void
tu_fill(void *buf, size_t stride, int64_t x0, int64_t y0, int64_t w, int64_t h, int ch,
        tw_sample_type t, uint64_t seed, int64_t img_w, int64_t img_h)
{
    const size_t ss = tw_sample_size(t);
    int64_t x, y;
    int c;

    for (y = 0; y < h; y++) {
        uint8_t *row = (uint8_t *)buf + (size_t)y * stride;

        for (x = 0; x < w; x++)
            for (c = 0; c < ch; c++) {
                uint8_t *p = row + ((size_t)x * (size_t)ch + (size_t)c) * ss;

                if (x0 + x >= img_w || y0 + y >= img_h)
                    memset(p, 0, ss);
                else
                    tu_store(p, t, tu_sample_bits(seed, x0 + x, y0 + y, c));
            }
    }
}

static inline uint64_t
tu_level_seed(uint64_t seed, int level)
{
    return seed + 1000003ULL * (uint64_t)level;
}

/* Write every tile of every level of `o` with the reference (seed per level), in order,
 * from one thread. Returns the status of the first failure. */
static inline tw_status
tu_write(const char *path, const tw_writer_opts *o, uint64_t seed, tw_error *err)
{
    const size_t px = (size_t)o->channels * tw_sample_size(o->type);
    const size_t stride = (size_t)o->tile_w * px;
    uint8_t *tile = malloc(stride * (size_t)o->tile_h);
    tw_writer *wr = NULL;
    tw_status st;
    int64_t lw = o->w, lh = o->h, tx, ty;
    int l;

    cr_assert_not_null(tile);
    if ((st = tw_writer_open(path, o, &wr, err)) != TW_OK) {
        free(tile);
        return st;
    }
    for (l = 0; l < o->n_levels; l++) {
        for (ty = 0; ty * o->tile_h < lh; ty++)
            for (tx = 0; tx * o->tile_w < lw; tx++) {
                /* beyond the image the pattern goes on: the writer must pad with zeros */
                tu_fill(tile, stride, tx * o->tile_w, ty * o->tile_h, o->tile_w, o->tile_h,
                        o->channels, o->type, tu_level_seed(seed, l), INT64_MAX, INT64_MAX);
                if ((st = tw_writer_write_tile(wr, l, tx, ty, tile, stride, err)) != TW_OK) {
                    tw_writer_abort(wr);
                    free(tile);
                    return st;
                }
            }
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    free(tile);
    return tw_writer_close(wr, err);
}

/* Read back with libtiff alone: tags of every directory and every tile, padding included. */
static inline void
tu_check_with_libtiff(const char *path, const tw_writer_opts *o, uint64_t seed)
{
    TIFF *tif = TIFFOpen(path, "r");
    const size_t px = (size_t)o->channels * tw_sample_size(o->type);
    const size_t tbytes = (size_t)o->tile_w * (size_t)o->tile_h * px;
    uint8_t *got = malloc(tbytes), *want = malloc(tbytes);
    int64_t lw = o->w, lh = o->h, tx, ty;
    int l;

    cr_assert_not_null(tif, "libtiff cannot open %s", path);
    cr_assert(got && want);
    cr_assert_eq(TIFFNumberOfDirectories(tif), o->n_levels);
    for (l = 0; l < o->n_levels; l++) {
        uint32_t w = 0, h = 0, tw = 0, th = 0, sub = 0;
        uint16_t bps = 0, spp = 0, fmt = 0, comp = 0, photo = 0, planar = 0;
        uint16_t want_comp = o->compression == TW_COMPRESS_DEFLATE ? COMPRESSION_ADOBE_DEFLATE
                             : o->compression == TW_COMPRESS_ZSTD  ? COMPRESSION_ZSTD
                             : o->compression == TW_COMPRESS_LZW   ? COMPRESSION_LZW
                                                                   : COMPRESSION_NONE;

        cr_assert(TIFFSetDirectory(tif, (tdir_t)l));
        cr_assert(TIFFIsTiled(tif));
        TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
        TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
        TIFFGetFieldDefaulted(tif, TIFFTAG_SUBFILETYPE, &sub);
        TIFFGetField(tif, TIFFTAG_BITSPERSAMPLE, &bps);
        TIFFGetField(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
        TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
        TIFFGetField(tif, TIFFTAG_COMPRESSION, &comp);
        TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photo);
        TIFFGetField(tif, TIFFTAG_PLANARCONFIG, &planar);
        cr_assert_eq(w, (uint32_t)lw);
        cr_assert_eq(h, (uint32_t)lh);
        cr_assert_eq(tw, (uint32_t)o->tile_w);
        cr_assert_eq(th, (uint32_t)o->tile_h);
        cr_assert_eq(sub, l > 0 ? (uint32_t)FILETYPE_REDUCEDIMAGE : 0u);
        cr_assert_eq(bps, (uint16_t)(8 * tw_sample_size(o->type)));
        cr_assert_eq(spp, (uint16_t)o->channels);
        cr_assert_eq(fmt, o->type == TW_F32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT);
        cr_assert_eq(comp, want_comp);
        cr_assert_eq(photo, o->channels == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
        cr_assert_eq(planar, PLANARCONFIG_CONTIG);
        for (ty = 0; ty * o->tile_h < lh; ty++)
            for (tx = 0; tx * o->tile_w < lw; tx++) {
                uint32_t idx = TIFFComputeTile(tif, (uint32_t)(tx * o->tile_w),
                                               (uint32_t)(ty * o->tile_h), 0, 0);
                tmsize_t n = TIFFReadEncodedTile(tif, idx, got, (tmsize_t)tbytes);

                cr_assert_eq(n, (tmsize_t)tbytes, "tile %u of level %d: %ld bytes", idx, l,
                             (long)n);
                tu_fill(want, (size_t)o->tile_w * px, tx * o->tile_w, ty * o->tile_h,
                        o->tile_w, o->tile_h, o->channels, o->type, tu_level_seed(seed, l), lw,
                        lh);
                cr_assert(memcmp(got, want, tbytes) == 0,
                          "tile (%ld,%ld) of level %d differs (padding included)", (long)tx,
                          (long)ty, l);
            }
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    TIFFClose(tif);
    free(got);
    free(want);
}

#define TU_WHY (TW_ERROR_MAX + 128)

/* Read (x, y, w, h) of `level` with tw_slide and compare with the reference; false with a
 * reason in why[TU_WHY] on any difference. No assertion inside: usable from any thread. */
static inline bool
tu_region_matches(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h,
                  uint64_t seed, char *why)
{
    const int ch = tw_slide_get_channels(s);
    const tw_sample_type t = tw_slide_get_sample_type(s);
    /* an odd stride with slack: the reader must honour dst_stride */
    const size_t stride = (size_t)w * (size_t)ch * tw_sample_size(t) + 7;
    const size_t n = (size_t)w * (size_t)ch * tw_sample_size(t);
    uint8_t *got = malloc(stride * (size_t)h), *want = malloc(stride * (size_t)h);
    tw_error err = {0};
    bool ok = true;
    int64_t r;

    if (!got || !want) {
        snprintf(why, TU_WHY, "out of memory");
        ok = false;
        goto out;
    }
    memset(got, 0xa5, stride * (size_t)h);
    if (tw_slide_read_region(s, level, x, y, w, h, got, stride, &err) != TW_OK) {
        snprintf(why, TU_WHY, "read_region: %s", err.message);
        ok = false;
        goto out;
    }
    tu_fill(want, stride, x, y, w, h, ch, t, seed, INT64_MAX, INT64_MAX);
    for (r = 0; r < h && ok; r++) {
        if (memcmp(got + (size_t)r * stride, want + (size_t)r * stride, n) != 0) {
            snprintf(why, TU_WHY, "level %d region %ld,%ld,%ldx%ld: row %ld differs", level,
                     (long)x, (long)y, (long)w, (long)h, (long)r);
            ok = false;
        } else if (got[(size_t)r * stride + n] != 0xa5) {
            snprintf(why, TU_WHY, "level %d region %ld,%ld,%ldx%ld: wrote past row %ld", level,
                     (long)x, (long)y, (long)w, (long)h, (long)r);
            ok = false;
        }
    }
out:
    free(got);
    free(want);
    return ok;
}

static inline void
tu_check_region(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h,
                uint64_t seed)
{
    char why[TU_WHY] = "";

    cr_assert(tu_region_matches(s, level, x, y, w, h, seed, why), "%s", why);
}

/* Substring check with a readable failure. */
#define TU_ASSERT_MSG(err, sub)                                                                 \
    cr_assert(strstr((err).message, (sub)) != NULL, "message '%s' lacks '%s'", (err).message,   \
              (sub))

/* One line: "domain: what (values)". */
#define TU_ASSERT_ONE_LINE(err)                                                                 \
    do {                                                                                        \
        cr_assert((err).message[0] != '\0', "empty message");                                   \
        cr_assert(strchr((err).message, '\n') == NULL, "message has a newline: '%s'",           \
                  (err).message);                                                               \
    } while (0)

#endif /* IO_TESTUTIL_H */
