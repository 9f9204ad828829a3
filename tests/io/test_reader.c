/* SPDX-License-Identifier: MIT */
/* tilewave tests: the slide readers: libtiff (tiled, striped, JPEG, pyramids) and OpenSlide. */
#include <fcntl.h>
#include <glib.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>

#include "io_testutil.h"

/* A TIFF written with libtiff directly, whole image in memory, striped or tiled. */
typedef struct lt_image {
    const char *mode;   /* "w", "w8", "wb" (big-endian) ... */
    uint32_t w, h;
    uint16_t spp, bps, fmt, photometric, compression;
    uint16_t extra;     /* EXTRASAMPLE_* of a 4th sample, or 0xffff for none */
    uint32_t rps;       /* rows per strip; 0 = tiled */
    uint32_t tw, th;    /* tile size when tiled */
    uint32_t subfile;
    const char *description;
} lt_image;

/* Write one directory of `im` holding `data` (rows packed) to an open TIFF. */
static void
lt_write_dir(TIFF *tif, const lt_image *im, const uint8_t *data)
{
    const size_t px = (size_t)im->spp * im->bps / 8;
    const size_t row = (size_t)im->w * px;

    cr_assert(TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, im->w));
    cr_assert(TIFFSetField(tif, TIFFTAG_IMAGELENGTH, im->h));
    cr_assert(TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, im->spp));
    cr_assert(TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, im->bps));
    cr_assert(TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, im->fmt));
    cr_assert(TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, im->photometric));
    cr_assert(TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG));
    cr_assert(TIFFSetField(tif, TIFFTAG_COMPRESSION, im->compression));
    if (im->subfile)
        cr_assert(TIFFSetField(tif, TIFFTAG_SUBFILETYPE, im->subfile));
    if (im->description)
        cr_assert(TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, im->description));
    if (im->extra != 0xffff) {
        uint16_t e = im->extra;

        cr_assert(TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, 1, &e));
    }
    if (im->rps) {
        uint32_t s;

        cr_assert(TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, im->rps));
        for (s = 0; s * im->rps < im->h; s++) {
            uint32_t rows = im->h - s * im->rps < im->rps ? im->h - s * im->rps : im->rps;

            cr_assert(TIFFWriteEncodedStrip(tif, s, (void *)(data + (size_t)s * im->rps * row),
                                            (tmsize_t)(rows * row)) >= 0);
        }
    } else {
        const size_t trow = (size_t)im->tw * px;
        uint8_t *tile = malloc(trow * im->th);
        uint32_t tx, ty, r;

        cr_assert(TIFFSetField(tif, TIFFTAG_TILEWIDTH, im->tw));
        cr_assert(TIFFSetField(tif, TIFFTAG_TILELENGTH, im->th));
        for (ty = 0; ty < im->h; ty += im->th)
            for (tx = 0; tx < im->w; tx += im->tw) {
                memset(tile, 0, trow * im->th);
                for (r = 0; r < im->th && ty + r < im->h; r++) {
                    uint32_t n = im->w - tx < im->tw ? im->w - tx : im->tw;

                    memcpy(tile + r * trow, data + (size_t)(ty + r) * row + tx * px, n * px);
                }
                cr_assert(TIFFWriteEncodedTile(tif, TIFFComputeTile(tif, tx, ty, 0, 0), tile,
                                               (tmsize_t)(trow * im->th)) >= 0);
            }
        free(tile);
    }
    cr_assert(TIFFWriteDirectory(tif));
}

/* The reference image for `im` with `seed`, rows packed; caller frees. */
static uint8_t *
lt_reference(const lt_image *im, uint64_t seed)
{
    tw_sample_type t = im->fmt == SAMPLEFORMAT_IEEEFP ? TW_F32
                       : im->bps == 8                 ? TW_U8
                       : im->bps == 16                ? TW_U16
                                                      : TW_U32;
    const size_t row = (size_t)im->w * im->spp * tw_sample_size(t);
    uint8_t *d = malloc(row * im->h);

    cr_assert_not_null(d);
    tu_fill(d, row, 0, 0, im->w, im->h, im->spp, t, seed, INT64_MAX, INT64_MAX);
    return d;
}

static void
lt_write(const char *path, const lt_image *im, uint64_t seed)
{
    TIFF *tif = TIFFOpen(path, im->mode);
    uint8_t *d = lt_reference(im, seed);

    cr_assert_not_null(tif);
    lt_write_dir(tif, im, d);
    TIFFClose(tif);
    free(d);
}

static lt_image
lt_default(void)
{
    return (lt_image){.mode = "w", .w = 64, .h = 64, .spp = 1, .bps = 8,
                      .fmt = SAMPLEFORMAT_UINT, .photometric = PHOTOMETRIC_MINISBLACK,
                      .compression = COMPRESSION_NONE, .extra = 0xffff, .rps = 8};
}

/* Regions of all shapes against the reference: whole, crossing strip/tile borders, single
 * pixels, single rows and columns. */
static void
check_many_regions(tw_slide *s, int level, int64_t w, int64_t h, uint64_t seed)
{
    tu_check_region(s, level, 0, 0, w, h, seed);
    tu_check_region(s, level, 1, 3, w - 2, h - 5, seed);
    tu_check_region(s, level, w / 2, h / 3, w - w / 2, 9 < h - h / 3 ? 9 : h - h / 3, seed);
    tu_check_region(s, level, 0, h - 1, w, 1, seed);
    tu_check_region(s, level, w - 1, 0, 1, h, seed);
    tu_check_region(s, level, w / 3, h / 2, 1, 1, seed);
}

Test(reader_tiff, striped_rgba_drops_alpha)
{
    /* A striped 8-bit RGBA TIFF (deflate, 7 rows per strip) reads as RGB: the alpha sample is
     * dropped and regions crossing strips match the reference. AUTO picks libtiff. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "rgba.tif");
    lt_image im = lt_default();
    tw_slide *s = NULL;
    tw_error err = {0};
    tw_level_info li;

    im.w = 123;
    im.h = 61;
    im.spp = 4;
    im.photometric = PHOTOMETRIC_RGB;
    im.extra = EXTRASAMPLE_UNASSALPHA;
    im.rps = 7;
    im.compression = COMPRESSION_ADOBE_DEFLATE;
    lt_write(path, &im, 5);
    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_get_reader(s), TW_READER_TIFF);
    cr_assert_str_eq(tw_slide_get_format(s), "tiff");
    cr_assert_eq(tw_slide_get_channels(s), 3);
    cr_assert_eq(tw_slide_get_sample_type(s), TW_U8);
    cr_assert_eq(tw_slide_get_level_count(s), 1);
    cr_assert_eq(tw_slide_get_level(s, 0, &li), TW_OK);
    cr_assert_eq(li.w, 123);
    cr_assert_eq(li.h, 61);
    cr_assert_eq(li.tile_w, 0, "striped: no tile size");
    cr_assert_eq(li.tile_h, 0);
    check_many_regions(s, 0, 123, 61, 5);
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(reader_tiff, striped_big_endian_16_32_float)
{
    /* Big-endian striped gray TIFFs of 16-bit, 32-bit and float samples read back as native
     * values, exactly (libtiff swaps; the reader must not). */
    static const struct {
        uint16_t bps, fmt;
        tw_sample_type t;
    } cases[] = {
        {16, SAMPLEFORMAT_UINT, TW_U16},
        {32, SAMPLEFORMAT_UINT, TW_U32},
        {32, SAMPLEFORMAT_IEEEFP, TW_F32},
    };
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "be.tif");
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_image im = lt_default();
        tw_slide *s = NULL;
        tw_error err = {0};

        im.mode = i == 1 ? "wb8" : "wb";
        im.w = 97;
        im.h = 43;
        im.bps = cases[i].bps;
        im.fmt = cases[i].fmt;
        im.rps = 5;
        im.compression = i == 2 ? COMPRESSION_ZSTD : COMPRESSION_NONE;
        lt_write(path, &im, 100 + i);
        cr_assert_eq(tw_slide_open(path, TW_READER_TIFF, &s, &err), TW_OK, "%s", err.message);
        cr_assert_eq(tw_slide_get_sample_type(s), cases[i].t);
        cr_assert_eq(tw_slide_get_channels(s), 1);
        check_many_regions(s, 0, 97, 43, 100 + i);
        tw_slide_close(s);
    }
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(reader_tiff, tiled_pyramid_skips_other_layouts)
{
    /* A classic (not Big) tiled LZW TIFF: directory 0 RGB, a gray thumbnail (other layout,
     * skipped), RGB at half size (level 1), the same size again (skipped: not smaller), a
     * quarter (level 2). Tiles are 32x16 and sizes are not multiples of them. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "pyr.tif");
    static const struct {
        uint32_t w, h;
        uint16_t spp, photometric;
        int level; /* expected level, -1 skipped */
    } dirs[] = {
        {200, 150, 3, PHOTOMETRIC_RGB, 0},
        {50, 40, 1, PHOTOMETRIC_MINISBLACK, -1},
        {100, 75, 3, PHOTOMETRIC_RGB, 1},
        {100, 75, 3, PHOTOMETRIC_RGB, -1},
        {50, 38, 3, PHOTOMETRIC_RGB, 2},
    };
    TIFF *tif = TIFFOpen(path, "w");
    tw_slide *s = NULL;
    tw_error err = {0};
    size_t i;

    cr_assert_not_null(tif);
    for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        lt_image im = lt_default();
        uint8_t *d;

        im.w = dirs[i].w;
        im.h = dirs[i].h;
        im.spp = dirs[i].spp;
        im.photometric = dirs[i].photometric;
        im.rps = 0;
        im.tw = 32;
        im.th = 16;
        im.compression = COMPRESSION_LZW;
        im.subfile = i > 0 ? FILETYPE_REDUCEDIMAGE : 0;
        d = lt_reference(&im, 300 + i);
        lt_write_dir(tif, &im, d);
        free(d);
    }
    TIFFClose(tif);

    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_get_reader(s), TW_READER_TIFF, "a generic tiled TIFF goes to libtiff");
    cr_assert_eq(tw_slide_get_level_count(s), 3);
    for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        tw_level_info li;

        if (dirs[i].level < 0)
            continue;
        cr_assert_eq(tw_slide_get_level(s, dirs[i].level, &li), TW_OK);
        cr_assert_eq(li.w, dirs[i].w);
        cr_assert_eq(li.h, dirs[i].h);
        cr_assert_eq(li.tile_w, 32);
        cr_assert_eq(li.tile_h, 16);
        cr_assert_float_eq(li.downsample, 200.0 / dirs[i].w, 1e-12);
        check_many_regions(s, dirs[i].level, dirs[i].w, dirs[i].h, 300 + i);
    }
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(reader_tiff, jpeg_ycbcr_reads_as_rgb)
{
    /* A tiled YCbCr JPEG TIFF (quality 95, 2x2 chroma subsampling) reads as RGB close to the
     * smooth image that was encoded. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "jpeg.tif");
    const uint32_t w = 150, h = 100, tw = 64, th = 64;
    uint8_t *img = malloc((size_t)w * h * 3), *got = malloc((size_t)w * h * 3);
    uint8_t tile[64 * 64 * 3];
    TIFF *tif = TIFFOpen(path, "w");
    tw_slide *s = NULL;
    tw_error err = {0};
    uint32_t x, y, tx, ty, r;
    int64_t sum = 0, maxd = 0;
    size_t i;

    cr_assert_not_null(tif);
    for (y = 0; y < h; y++)
        for (x = 0; x < w; x++) {
            uint8_t *p = img + ((size_t)y * w + x) * 3;

            p[0] = (uint8_t)(40 + x);
            p[1] = (uint8_t)(60 + y);
            p[2] = (uint8_t)(128 + (x + y) / 4);
        }
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_JPEG);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_YCBCR);
    TIFFSetField(tif, TIFFTAG_YCBCRSUBSAMPLING, 2, 2);
    TIFFSetField(tif, TIFFTAG_JPEGQUALITY, 95);
    TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    TIFFSetField(tif, TIFFTAG_TILEWIDTH, tw);
    TIFFSetField(tif, TIFFTAG_TILELENGTH, th);
    for (ty = 0; ty < h; ty += th)
        for (tx = 0; tx < w; tx += tw) {
            /* edge tiles repeat the last column and row: zeros there would put JPEG ringing
             * into the image */
            for (r = 0; r < th; r++)
                for (x = 0; x < tw; x++) {
                    uint32_t sx = tx + x < w ? tx + x : w - 1, sy = ty + r < h ? ty + r : h - 1;

                    memcpy(tile + (r * tw + x) * 3, img + ((size_t)sy * w + sx) * 3, 3);
                }
            cr_assert(TIFFWriteTile(tif, tile, tx, ty, 0, 0) >= 0);
        }
    TIFFClose(tif);

    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_get_channels(s), 3);
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, w, h, got, w * 3, &err), TW_OK, "%s",
                 err.message);
    for (i = 0; i < (size_t)w * h * 3; i++) {
        int64_t d = llabs((int64_t)got[i] - (int64_t)img[i]);

        sum += d;
        maxd = d > maxd ? d : maxd;
    }
    cr_assert(maxd <= 12, "max difference %ld", (long)maxd);
    cr_assert((double)sum / (double)(w * h * 3) < 2.0, "mean difference %g",
              (double)sum / (double)(w * h * 3));
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(img);
    free(got);
    free(path);
    free(dir);
}

Test(reader_tiff, properties_and_inch_resolution)
{
    /* String tags become tiff.* properties (listed, NULL-terminated); a resolution in inches
     * (even a plausible 50800 dpi) gives no mpp: inches are what image editors write, and only
     * centimetres or vendor metadata are trusted (docs/io.md). The tags stay properties. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "props.tif");
    lt_image im = lt_default();
    TIFF *tif = TIFFOpen(path, "w");
    uint8_t *d = lt_reference(&im, 1);
    const char *const *names;
    tw_slide *s = NULL;
    tw_error err = {0};
    double mx = 0, my = 0;
    int found = 0;

    cr_assert_not_null(tif);
    TIFFSetField(tif, TIFFTAG_SOFTWARE, "unit test");
    TIFFSetField(tif, TIFFTAG_MAKE, "ACME");
    TIFFSetField(tif, TIFFTAG_MODEL, "Scanner 9");
    TIFFSetField(tif, TIFFTAG_XRESOLUTION, 50800.0);
    TIFFSetField(tif, TIFFTAG_YRESOLUTION, 25400.0);
    TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, RESUNIT_INCH);
    im.description = "a description";
    lt_write_dir(tif, &im, d);
    TIFFClose(tif);
    free(d);

    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    tw_slide_get_mpp(s, &mx, &my);
    /* inches are not a pixel size (docs/io.md, "Resolution and metadata"): unknown */
    cr_assert_float_eq(mx, 0.0, 1e-9);
    cr_assert_float_eq(my, 0.0, 1e-9);
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.ImageDescription"), "a description");
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.Software"), "unit test");
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.Make"), "ACME");
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.Model"), "Scanner 9");
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.ResolutionUnit"), "inch");
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.XResolution"), "50800");
    cr_assert_null(tw_slide_get_property(s, "tiff.Artist"));
    cr_assert_null(tw_slide_get_property(s, NULL));
    names = tw_slide_get_property_names(s);
    cr_assert_not_null(names);
    for (; *names; names++) {
        cr_assert_not_null(tw_slide_get_property(s, *names));
        found++;
    }
    cr_assert_eq(found, 7);
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

/* A generic tiled RGB pyramid from our writer, w x h. */
static void
write_pyramid_sized(const char *path, int64_t w, int64_t h, tw_compression c,
                    const char *description)
{
    tw_writer_opts o;
    tw_error err = {0};

    tw_writer_opts_init(&o);
    o.w = w;
    o.h = h;
    o.channels = 3;
    /* 128: every level is at least one tile in both directions. OpenSlide 3.4.1 with
     * libtiff 4.5 misplaces the rows of a level smaller than one tile (its TIFFRGBAImage
     * path), so such levels cannot be compared. */
    o.tile_w = o.tile_h = 128;
    o.n_levels = 3;
    o.compression = c;
    o.mpp_x = o.mpp_y = 0.25;
    o.description = description;
    cr_assert_eq(tu_write(path, &o, 11, &err), TW_OK, "%s", err.message);
}

static void
write_pyramid(const char *path, tw_compression c, const char *description)
{
    write_pyramid_sized(path, 1024, 768, c, description);
}

Test(reader_openslide, non_integer_downsample_levels_are_read_exactly)
{
    /* Fuzz finding T2: OpenSlide 3.4.1 resamples a level whose downsample is not an integer
     * at the fractional offset a region's level-0 corner maps back to, so the same pixel
     * differed with the region's origin. Such levels of TIFF-based vendors are read from their
     * directory with libtiff: a 1000x750 pyramid has level 2 at 250x188, downsample
     * (4 + 3.989) / 2 for OpenSlide, and every region of it, at any origin, is now exactly the
     * pixels written there; generic-tiff (--reader openslide) and aperio (automatic) alike. */
    const char *const desc[2] = {NULL, "Aperio Image Library vTEST\r\n1000x750 -> 1000x750|"
                                       "AppMag = 20|MPP = 0.5"};
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "nonint.tif");

    for (int k = 0; k < 2; k++) {
        tw_slide *s = NULL;
        tw_error err = {0};
        tw_level_info li;

        write_pyramid_sized(path, 1000, 750, TW_COMPRESS_DEFLATE, desc[k]);
        cr_assert_eq(tw_slide_open(path, k ? TW_READER_AUTO : TW_READER_OPENSLIDE, &s, &err),
                     TW_OK, "%s", err.message);
        cr_assert_eq(tw_slide_get_reader(s), TW_READER_OPENSLIDE);
        cr_assert_str_eq(tw_slide_get_format(s), k ? "aperio" : "generic-tiff");
        cr_assert_eq(tw_slide_get_level_count(s), 3);
        cr_assert_eq(tw_slide_get_level(s, 2, &li), TW_OK);
        cr_assert_eq(li.w, 250);
        cr_assert_eq(li.h, 188);
        cr_assert(li.downsample != floor(li.downsample), "downsample %.6f", li.downsample);
        tu_check_region(s, 2, 0, 0, 250, 188, tu_level_seed(11, 2));
        for (int64_t y = 0; y < 60; y += 7)
            for (int64_t x = 0; x < 60; x += 13)
                tu_check_region(s, 2, x, y, 48 + x % 5, 40 + y % 3, tu_level_seed(11, 2));
        /* levels at integer downsamples still come from OpenSlide, equal to the writer's */
        tu_check_region(s, 1, 33, 17, 100, 90, tu_level_seed(11, 1));
        tu_check_region(s, 0, 301, 5, 64, 64, tu_level_seed(11, 0));
        tw_slide_close(s);
    }
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(reader_openslide, generic_tiff_matches_tiff_reader)
{
    /* OpenSlide 3.4.1 (generic-tiff) and libtiff read the same pixels from a pyramid our
     * writer made with zstd (which this OpenSlide's libtiff decodes), at every level, with the
     * same geometry; mpp comes from the resolution tags. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "os.tif");
    tw_slide *os = NULL, *lt = NULL;
    tw_error err = {0};
    double mx = 0, my = 0;
    int l;

    write_pyramid(path, TW_COMPRESS_ZSTD, NULL);
    cr_assert_eq(tw_slide_open(path, TW_READER_OPENSLIDE, &os, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &lt, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_get_reader(os), TW_READER_OPENSLIDE);
    cr_assert_eq(tw_slide_get_reader(lt), TW_READER_TIFF);
    cr_assert_str_eq(tw_slide_get_format(os), "generic-tiff");
    cr_assert_str_eq(tw_slide_get_property(os, "openslide.vendor"), "generic-tiff");
    cr_assert_eq(tw_slide_get_channels(os), 3);
    cr_assert_eq(tw_slide_get_sample_type(os), TW_U8);
    tw_slide_get_mpp(os, &mx, &my);
    cr_assert_float_eq(mx, 0.25, 1e-9);
    cr_assert_float_eq(my, 0.25, 1e-9);
    cr_assert_eq(tw_slide_get_level_count(os), 3);
    for (l = 0; l < 3; l++) {
        tw_level_info a, b;

        cr_assert_eq(tw_slide_get_level(os, l, &a), TW_OK);
        cr_assert_eq(tw_slide_get_level(lt, l, &b), TW_OK);
        cr_assert_eq(a.w, b.w);
        cr_assert_eq(a.h, b.h);
        cr_assert_eq(a.tile_w, 128);
        cr_assert_eq(a.tile_h, 128);
        cr_assert_float_eq(a.downsample, b.downsample, 1e-12);
        /* both against the same reference */
        tu_check_region(os, l, 0, 0, a.w, a.h, tu_level_seed(11, l));
        tu_check_region(os, l, 200, 100, a.w - 200 - 1, a.h - 100 - 3, tu_level_seed(11, l));
        tu_check_region(lt, l, 0, 0, b.w, b.h, tu_level_seed(11, l));
    }
    tw_slide_close(os);
    tw_slide_close(lt);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(reader_openslide, vendor_format_goes_to_openslide)
{
    /* A TIFF that OpenSlide claims for a vendor (an Aperio-style description) goes through
     * OpenSlide under AUTO; format, mpp and properties come from it. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "fake.svs");
    tw_slide *s = NULL;
    tw_error err = {0};
    double mx = 0, my = 0;

    write_pyramid(path, TW_COMPRESS_DEFLATE,
                  "Aperio Image Library vTEST\r\n1024x768 -> 1024x768|AppMag = 40|MPP = 0.2468");
    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_get_reader(s), TW_READER_OPENSLIDE);
    cr_assert_str_eq(tw_slide_get_format(s), "aperio");
    cr_assert_str_eq(tw_slide_get_property(s, "aperio.AppMag"), "40");
    tw_slide_get_mpp(s, &mx, &my);
    cr_assert_float_eq(mx, 0.2468, 1e-9);
    tu_check_region(s, 0, 100, 200, 300, 50, tu_level_seed(11, 0));
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

/* What the log handler of the GLib test below saw. */
static char glib_seen[512];

static void
glib_log_capture(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)user;
    if (level == TW_LOG_DEBUG && strcmp(domain, "io.openslide") == 0 && strstr(message, "GdkPixbuf"))
        snprintf(glib_seen, sizeof glib_seen, "%s", message);
}

Test(reader_openslide, glib_messages_go_to_the_log_not_to_stderr)
{
    /* OpenSlide and the libraries under it log through GLib, whose default handler prints to
     * stderr (issue 26): after the first OpenSlide open, a GLib warning of any domain reaches
     * tilewave's log handler at debug level and nothing reaches stderr. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "fake.svs");
    char *errlog = twtest_path(dir, "stderr.txt");
    tw_slide *s = NULL;
    tw_error err = {0};
    int saved, fd;
    struct stat sb;

    write_pyramid(path, TW_COMPRESS_DEFLATE,
                  "Aperio Image Library vTEST\r\n1024x768 -> 1024x768|AppMag = 40|MPP = 0.25");
    cr_assert_eq(tw_slide_open(path, TW_READER_OPENSLIDE, &s, &err), TW_OK, "%s", err.message);
    tw_log_set_level(TW_LOG_DEBUG);
    tw_log_set_handler(glib_log_capture, NULL);
    fflush(stderr);
    saved = dup(2);
    fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
    g_log("GdkPixbuf", G_LOG_LEVEL_WARNING, "cannot load tile %d", 7);
    g_log(NULL, G_LOG_LEVEL_MESSAGE, "a message of no domain");
    fflush(stderr);
    cr_assert_eq(dup2(saved, 2), 2);
    close(saved);
    tw_log_set_handler(NULL, NULL);
    tw_log_set_level(TW_LOG_WARN);
    cr_assert_eq(stat(errlog, &sb), 0);
    cr_assert_eq(sb.st_size, 0, "GLib printed %lld bytes to stderr", (long long)sb.st_size);
    cr_assert_str_eq(glib_seen, "GdkPixbuf warning: cannot load tile 7");
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(errlog);
    free(path);
    free(dir);
}

Test(reader_openslide, alpha_is_unpremultiplied_and_transparent_is_white)
{
    /* Through OpenSlide, an RGBA TIFF comes back as premultiplied ARGB; the reader gives
     * opaque pixels as stored, fully transparent ones white, and divides partial alpha out
     * (to within premultiplication's rounding). */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "alpha.tif");
    lt_image im = lt_default();
    uint8_t *d, got[64 * 64 * 3];
    tw_slide *s = NULL;
    tw_error err = {0};
    TIFF *tif;
    size_t i;

    im.spp = 4;
    im.photometric = PHOTOMETRIC_RGB;
    im.extra = EXTRASAMPLE_UNASSALPHA;
    im.rps = 0;
    im.tw = im.th = 32;
    d = lt_reference(&im, 9);
    for (i = 0; i < 64 * 64; i++) {
        uint8_t *p = d + i * 4;

        p[3] = i % 3 == 0 ? 255 : i % 3 == 1 ? 0 : (uint8_t)(128 + (p[3] & 127));
    }
    tif = TIFFOpen(path, "w");
    cr_assert_not_null(tif);
    lt_write_dir(tif, &im, d);
    TIFFClose(tif);

    cr_assert_eq(tw_slide_open(path, TW_READER_OPENSLIDE, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, 64, 64, got, 64 * 3, &err), TW_OK, "%s",
                 err.message);
    for (i = 0; i < 64 * 64; i++) {
        const uint8_t *p = d + i * 4, *q = got + i * 3;
        int c;

        for (c = 0; c < 3; c++) {
            if (p[3] == 255)
                cr_assert_eq(q[c], p[c], "opaque pixel %zu", i);
            else if (p[3] == 0)
                cr_assert_eq(q[c], 255, "transparent pixel %zu is not white", i);
            else
                cr_assert(abs((int)q[c] - (int)p[c]) <= 2, "pixel %zu: %d vs %d (alpha %d)", i,
                          q[c], p[c], p[3]);
        }
    }
    tw_slide_close(s);
    free(d);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

typedef struct reader_thread {
    tw_slide *s;
    uint64_t rng; /* this thread's stream (twtest_rnd_stream) */
    int64_t w, h;
    int n;
    int failures;
    char why[TU_WHY];
} reader_thread;

static void *
reader_main(void *arg)
{
    reader_thread *t = arg;
    int i;

    for (i = 0; i < t->n; i++) {
        int64_t x = twtest_rnd(&t->rng, (uint32_t)t->w), y = twtest_rnd(&t->rng, (uint32_t)t->h);
        int64_t w = 1 + twtest_rnd(&t->rng, (uint32_t)(t->w - x < 150 ? t->w - x : 150));
        int64_t h = 1 + twtest_rnd(&t->rng, (uint32_t)(t->h - y < 150 ? t->h - y : 150));

        /* no cr_assert off the test's thread: count and report after the join */
        if (!tu_region_matches(t->s, 0, x, y, w, h, tu_level_seed(11, 0), t->why))
            t->failures++;
    }
    return NULL;
}

Test(reader, concurrent_regions_from_one_slide)
{
    /* Four threads read random regions from one slide at once, through libtiff's handle pool
     * and through the shared OpenSlide handle; every region matches the reference. */
    enum { T = 4 };
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "conc.tif");
    tw_reader_kind kinds[2] = {TW_READER_TIFF, TW_READER_OPENSLIDE};
    int k, i;

    write_pyramid(path, TW_COMPRESS_DEFLATE, NULL);
    for (k = 0; k < 2; k++) {
        pthread_t th[T];
        reader_thread rt[T];
        tw_slide *s = NULL;
        tw_error err = {0};

        cr_assert_eq(tw_slide_open(path, kinds[k], &s, &err), TW_OK, "%s", err.message);
        for (i = 0; i < T; i++) {
            rt[i] = (reader_thread){.s = s, .rng = twtest_rnd_stream((uint64_t)i), .w = 1024,
                                    .h = 768, .n = 40};
            pthread_create(&th[i], NULL, reader_main, &rt[i]);
        }
        for (i = 0; i < T; i++) {
            pthread_join(th[i], NULL);
            cr_assert_eq(rt[i].failures, 0, "%s reader, thread %d: %s",
                         k ? "openslide" : "tiff", i, rt[i].why);
        }
        tw_slide_close(s);
    }
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(reader, auto_falls_back_to_openslide_for_layouts_libtiff_reader_skips)
{
    /* A tiled palette TIFF is "generic-tiff" to OpenSlide but not a layout the libtiff reader
     * keeps: AUTO reads it through OpenSlide as RGB (the colour map applied); forcing the
     * libtiff reader still says what it does not support. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "pal.tif");
    lt_image im = lt_default();
    uint16_t map[3 * 256];
    uint8_t *d, got[64 * 64 * 3];
    tw_slide *s = NULL;
    tw_error err = {0};
    TIFF *tif;
    int i;

    for (i = 0; i < 256; i++) {
        map[i] = (uint16_t)(i * 257);
        map[256 + i] = (uint16_t)((255 - i) * 257);
        map[512 + i] = (uint16_t)(((3 * i) & 255) * 257);
    }
    im.photometric = PHOTOMETRIC_PALETTE;
    im.rps = 0;
    im.tw = im.th = 32;
    d = lt_reference(&im, 21);
    tif = TIFFOpen(path, "w");
    cr_assert_not_null(tif);
    /* the colour map's length follows the bits per sample set before it */
    cr_assert(TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8));
    cr_assert(TIFFSetField(tif, TIFFTAG_COLORMAP, map, map + 256, map + 512));
    lt_write_dir(tif, &im, d);
    TIFFClose(tif);

    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_get_reader(s), TW_READER_OPENSLIDE);
    cr_assert_str_eq(tw_slide_get_format(s), "generic-tiff");
    cr_assert_eq(tw_slide_get_channels(s), 3);
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, 64, 64, got, 64 * 3, &err), TW_OK, "%s",
                 err.message);
    for (i = 0; i < 64 * 64; i++) {
        cr_assert_eq(got[3 * i], d[i], "pixel %d", i);
        cr_assert_eq(got[3 * i + 1], 255 - d[i]);
        cr_assert_eq(got[3 * i + 2], (3 * d[i]) & 255);
    }
    tw_slide_close(s);
    s = NULL;
    cr_assert_eq(tw_slide_open(path, TW_READER_TIFF, &s, &err), TW_E_FORMAT);
    TU_ASSERT_MSG(err, "unsupported photometric palette");
    free(d);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}
