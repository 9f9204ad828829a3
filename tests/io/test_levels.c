/* SPDX-License-Identifier: MIT */
/* tilewave tests: exact levels: every level equals OpenSlide's whole-level read, for any tiling. */
#include <openjpeg.h>
#include <openslide.h>
#include <sys/stat.h>

#include "io_testutil.h"
#include "tw_io.h" /* twi_slide_set_bad_tiles, twi_slide_get_bad_tiles */

/* The real slides of ../shared/data/slides (its README says what each is). */
#define SLIDES_DIR TW_SOURCE_DIR "/../shared/data/slides"

/* ---- references */

/* OpenSlide's read of the whole of `level` from (0, 0), as 8-bit RGB (the slide is opaque);
 * caller frees. (0, 0) maps to a whole pixel of every level, so this read is the level's own
 * pixels, whatever its downsample. */
static uint8_t *
os_whole_level(const char *path, int level, int64_t *w, int64_t *h)
{
    openslide_t *osr = openslide_open(path);
    uint32_t *argb;
    uint8_t *rgb;

    cr_assert_not_null(osr, "OpenSlide cannot open %s", path);
    cr_assert_null(openslide_get_error(osr), "%s", openslide_get_error(osr));
    openslide_get_level_dimensions(osr, level, w, h);
    cr_assert(*w > 0 && *h > 0);
    argb = malloc((size_t)(*w * *h) * 4);
    rgb = malloc((size_t)(*w * *h) * 3);
    cr_assert(argb && rgb);
    openslide_read_region(osr, argb, 0, 0, level, *w, *h);
    cr_assert_null(openslide_get_error(osr), "%s", openslide_get_error(osr));
    for (int64_t i = 0; i < *w * *h; i++) {
        cr_assert_eq(argb[i] >> 24, 255u, "pixel %ld of level %d of %s is not opaque", (long)i,
                     level, path);
        rgb[3 * i] = (uint8_t)(argb[i] >> 16);
        rgb[3 * i + 1] = (uint8_t)(argb[i] >> 8);
        rgb[3 * i + 2] = (uint8_t)argb[i];
    }
    free(argb);
    openslide_close(osr);
    return rgb;
}

/* Read `level` of s (w x h pixels of px bytes) region by region in tiles of tw x th into one
 * buffer, as a job's tiles are read; caller frees. */
static uint8_t *
read_tiled(tw_slide *s, int level, int64_t w, int64_t h, size_t px, int64_t tw, int64_t th)
{
    uint8_t *buf = malloc((size_t)(w * h) * px);
    tw_error err = {0};

    cr_assert_not_null(buf);
    for (int64_t y = 0; y < h; y += th)
        for (int64_t x = 0; x < w; x += tw) {
            const int64_t rw = w - x < tw ? w - x : tw, rh = h - y < th ? h - y : th;

            cr_assert_eq(tw_slide_read_region(s, level, x, y, rw, rh,
                                              buf + ((size_t)y * (size_t)w + (size_t)x) * px,
                                              (size_t)w * px, &err),
                         TW_OK, "%s", err.message);
        }
    return buf;
}

/* The tilings the written slides' levels are read in: whole, bands of 7 rows, odd sizes,
 * the file's tiles, columns. */
static const int64_t tilings[][2] = {{1 << 20, 1 << 20}, {1 << 20, 7}, {97, 61}, {64, 64},
                                     {256, 100}, {13, 200}};
#define N_TILINGS (sizeof tilings / sizeof tilings[0])

/* The tilings of the real slides (larger: their levels take seconds to decode). */
static const int64_t real_tilings[][2] = {{1 << 20, 1 << 20}, {512, 512}, {333, 201}};

/* Every level of s, read in each of the n tilings, gives the same bytes, equal to OpenSlide's
 * whole-level read of `path`. Not compared with OpenSlide: a level smaller than one of its
 * tiles in a direction, whose rows OpenSlide 3.4.1 with libtiff 4.5 misplaces (its
 * TIFFRGBAImage path; tests/io/test_reader.c, write_pyramid_sized): python/tests/
 * test_levels.py compares those with tifffile. */
static void
check_levels_tiled(tw_slide *s, const char *path, const int64_t (*tl)[2], size_t n_tl,
                   bool cmp_os)
{
    const size_t px =
        (size_t)tw_slide_get_channels(s) * tw_sample_size(tw_slide_get_sample_type(s));

    for (int l = 0; l < tw_slide_get_level_count(s); l++) {
        tw_level_info li;
        int64_t ow = 0, oh = 0;
        uint8_t *want = NULL, *first = NULL;

        cr_assert_eq(tw_slide_get_level(s, l, &li), TW_OK);
        if (cmp_os && !(li.tile_w > 0 && (li.w < li.tile_w || li.h < li.tile_h))) {
            want = os_whole_level(path, l, &ow, &oh);
            cr_assert_eq(ow, li.w, "level %d of %s", l, path);
            cr_assert_eq(oh, li.h, "level %d of %s", l, path);
        }
        for (size_t k = 0; k < n_tl; k++) {
            uint8_t *got = read_tiled(s, l, li.w, li.h, px, tl[k][0], tl[k][1]);
            const size_t n = (size_t)(li.w * li.h) * px;

            if (want) {
                size_t diff = 0;

                for (size_t i = 0; i < n; i++)
                    diff += got[i] != want[i];
                cr_assert_eq(diff, 0, "%s level %d (downsample %.6f) in %ldx%ld tiles: %zu of "
                                      "%zu samples differ from OpenSlide's whole-level read",
                             path, l, li.downsample, (long)tl[k][0], (long)tl[k][1], diff, n);
            }
            if (!first) {
                first = got;
            } else {
                cr_assert(memcmp(first, got, n) == 0, "%s level %d: %ldx%ld tiles differ", path,
                          l, (long)tl[k][0], (long)tl[k][1]);
                free(got);
            }
        }
        free(first);
        free(want);
    }
}

/* ---- a JPEG 2000 SVS-like pyramid, written with libtiff and OpenJPEG */

typedef struct membuf {
    uint8_t *p;
    size_t n, cap, pos;
} membuf;

static OPJ_SIZE_T
mb_write(void *buf, OPJ_SIZE_T n, void *user)
{
    membuf *m = user;

    if (m->pos + n > m->cap) {
        m->cap = (m->pos + n) * 2;
        m->p = realloc(m->p, m->cap);
        cr_assert_not_null(m->p);
    }
    memcpy(m->p + m->pos, buf, n);
    m->pos += n;
    if (m->pos > m->n)
        m->n = m->pos;
    return n;
}

static OPJ_OFF_T
mb_skip(OPJ_OFF_T n, void *user)
{
    membuf *m = user;

    m->pos = (size_t)((OPJ_OFF_T)m->pos + n);
    return n;
}

static OPJ_BOOL
mb_seek(OPJ_OFF_T off, void *user)
{
    ((membuf *)user)->pos = (size_t)off;
    return OPJ_TRUE;
}

/* A lossless J2K codestream of three w x h 8-bit planes (interleaved at src); caller frees
 * out->p. `sub`: the second and third planes subsampled 2 x 1 (as Aperio's YCbCr 4:2:2). */
static void
j2k_encode(const uint8_t *src, uint32_t w, uint32_t h, bool sub, membuf *out)
{
    opj_image_cmptparm_t cp[3];
    opj_cparameters_t par;
    opj_image_t *im;
    opj_codec_t *c;
    opj_stream_t *st;

    memset(cp, 0, sizeof cp);
    for (int k = 0; k < 3; k++) {
        cp[k].dx = sub && k > 0 ? 2 : 1;
        cp[k].dy = 1;
        cp[k].w = (w + cp[k].dx - 1) / cp[k].dx;
        cp[k].h = h;
        cp[k].prec = 8;
    }
    im = opj_image_create(3, cp, OPJ_CLRSPC_SRGB);
    cr_assert_not_null(im);
    im->x1 = w;
    im->y1 = h;
    for (int k = 0; k < 3; k++)
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < cp[k].w; x++)
                im->comps[k].data[y * cp[k].w + x] = src[((size_t)y * w + x * cp[k].dx) * 3 + k];
    opj_set_default_encoder_parameters(&par);
    par.tcp_numlayers = 1;
    par.tcp_rates[0] = 0; /* lossless */
    par.cp_disto_alloc = 1;
    par.numresolution = 4;
    par.tcp_mct = 0;
    c = opj_create_compress(OPJ_CODEC_J2K);
    cr_assert(c && opj_setup_encoder(c, &par, im));
    memset(out, 0, sizeof *out);
    st = opj_stream_create(1 << 16, OPJ_FALSE);
    opj_stream_set_user_data(st, out, NULL);
    opj_stream_set_write_function(st, mb_write);
    opj_stream_set_skip_function(st, mb_skip);
    opj_stream_set_seek_function(st, mb_seek);
    cr_assert(opj_start_compress(c, im, st) && opj_encode(c, st) && opj_end_compress(c, st));
    opj_stream_destroy(st);
    opj_destroy_codec(c);
    opj_image_destroy(im);
}

/* Sample k of pixel (x, y) of level l: smooth (so that colour conversions see ordinary
 * chroma) plus noise, and different on every level. */
static uint8_t
j2k_sample(int l, int64_t x, int64_t y, int k)
{
    return (uint8_t)((x * (3 + k) + y * (5 - k) + 40 * l) / 4 +
                     (tu_sample_bits(77 + (uint64_t)l, x, y, k) & 31));
}

/* The level sizes of the written pyramid: downsamples 2.002, 4.005, 8.04 for OpenSlide. */
static const uint32_t j2k_dims[][2] = {{1001, 757}, {500, 378}, {250, 189}, {124, 94}};
#define J2K_TILE 64u
#define J2K_LEVELS 4

/* How write_j2k_svs spoils one tile: none, bytes that are no codestream, a codestream of
 * the wrong size. */
typedef enum { J2K_GOOD, J2K_GARBAGE, J2K_SMALL } j2k_bad;

/* An Aperio-like SVS: every level tiled J2K_TILE, compression `comp` (33003 with photometric
 * YCbCr and 4:2:2 chroma planes, 33005 RGB), the base's description such that OpenSlide
 * takes it for aperio; `bad` spoils tile (1, 2) of level 1. */
static void
write_j2k_svs(const char *path, unsigned comp, j2k_bad bad)
{
    TIFF *tif = TIFFOpen(path, "w");
    uint8_t *tile = malloc(J2K_TILE * J2K_TILE * 3);

    cr_assert(tif && tile);
    for (int l = 0; l < J2K_LEVELS; l++) {
        const uint32_t w = j2k_dims[l][0], h = j2k_dims[l][1];
        char desc[256];

        snprintf(desc, sizeof desc,
                 "Aperio Image Library vTEST\r\n%ux%u (%ux%u) %s%ux%u J2K/KDU Q=70|AppMag = 20|"
                 "MPP = 0.5",
                 j2k_dims[0][0], j2k_dims[0][1], J2K_TILE, J2K_TILE, l ? "-> " : "", w, h);
        cr_assert(TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w));
        cr_assert(TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h));
        cr_assert(TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3));
        cr_assert(TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8));
        cr_assert(TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG));
        cr_assert(TIFFSetField(tif, TIFFTAG_PHOTOMETRIC,
                               comp == 33003 ? PHOTOMETRIC_YCBCR : PHOTOMETRIC_RGB));
        cr_assert(TIFFSetField(tif, TIFFTAG_COMPRESSION, comp));
        cr_assert(TIFFSetField(tif, TIFFTAG_TILEWIDTH, J2K_TILE));
        cr_assert(TIFFSetField(tif, TIFFTAG_TILELENGTH, J2K_TILE));
        cr_assert(TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, desc));
        for (uint32_t ty = 0; ty < h; ty += J2K_TILE)
            for (uint32_t tx = 0; tx < w; tx += J2K_TILE) {
                const uint32_t idx = TIFFComputeTile(tif, tx, ty, 0, 0);
                const bool spoil = l == 1 && tx == J2K_TILE && ty == 2 * J2K_TILE;
                membuf m;

                /* whole tiles, the pattern going on beyond the level's edge (cut off by the
                 * readers) */
                for (uint32_t y = 0; y < J2K_TILE; y++)
                    for (uint32_t x = 0; x < J2K_TILE; x++)
                        for (int k = 0; k < 3; k++)
                            tile[((size_t)y * J2K_TILE + x) * 3 + k] =
                                j2k_sample(l, tx + x, ty + y, k);
                if (spoil && bad == J2K_GARBAGE) {
                    memset(tile, 0x5a, 200);
                    cr_assert(TIFFWriteRawTile(tif, idx, tile, 200) == 200);
                    continue;
                }
                if (spoil && bad == J2K_SMALL)
                    j2k_encode(tile, J2K_TILE / 2, J2K_TILE / 2, comp == 33003, &m);
                else
                    j2k_encode(tile, J2K_TILE, J2K_TILE, comp == 33003, &m);
                cr_assert(TIFFWriteRawTile(tif, idx, m.p, (tmsize_t)m.n) == (tmsize_t)m.n);
                free(m.p);
            }
        cr_assert(TIFFWriteDirectory(tif));
    }
    TIFFClose(tif);
    free(tile);
}

Test(levels, j2k_svs_levels_equal_openslide_whole_level_reads)
{
    /* Issue 27: an Aperio-like JPEG 2000 pyramid (33005 RGB, 33003 YCbCr with 4:2:2 chroma)
     * with non-integer downsamples (2.002, 4.005, 8.04): every level read through tilewave,
     * in every tiling, equals OpenSlide's read of the whole level from (0, 0); the RGB
     * levels also equal the written samples. Before, such levels were read with
     * openslide_read_region at fractional level-0 offsets, resampled, tile by tile. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "j2k.svs");
    const unsigned comps[2] = {33005, 33003};

    for (int c = 0; c < 2; c++) {
        tw_slide *s = NULL;
        tw_error err = {0};

        write_j2k_svs(path, comps[c], J2K_GOOD);
        cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
        cr_assert_str_eq(tw_slide_get_format(s), "aperio");
        cr_assert_eq(tw_slide_get_level_count(s), J2K_LEVELS);
        for (int l = 1; l < J2K_LEVELS; l++) {
            tw_level_info li;

            cr_assert_eq(tw_slide_get_level(s, l, &li), TW_OK);
            cr_assert(li.downsample != floor(li.downsample), "level %d downsample %.6f", l,
                      li.downsample);
        }
        check_levels_tiled(s, path, tilings, N_TILINGS, true);
        if (comps[c] == 33005) {
            /* the written samples themselves, level by level */
            for (int l = 0; l < J2K_LEVELS; l++) {
                const int64_t w = j2k_dims[l][0], h = j2k_dims[l][1];
                uint8_t *got = read_tiled(s, l, w, h, 3, 100, 70);

                for (int64_t y = 0; y < h; y++)
                    for (int64_t x = 0; x < w; x++)
                        for (int k = 0; k < 3; k++)
                            cr_assert_eq(got[((size_t)y * (size_t)w + (size_t)x) * 3 + k],
                                         j2k_sample(l, x, y, k),
                                         "level %d pixel (%ld, %ld) sample %d", l, (long)x,
                                         (long)y, k);
                free(got);
            }
        }
        tw_slide_close(s);

        /* the libtiff reader alone reads every level, level 0 too, with OpenJPEG */
        cr_assert_eq(tw_slide_open(path, TW_READER_TIFF, &s, &err), TW_OK, "%s", err.message);
        cr_assert_eq(tw_slide_get_level_count(s), J2K_LEVELS);
        cr_assert_eq(tw_slide_get_channels(s), 3);
        check_levels_tiled(s, path, tilings, N_TILINGS, true);
        tw_slide_close(s);
    }
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(levels, bad_j2k_tile_fails_naming_level_and_tile_or_fills)
{
    /* A J2K tile that does not decode, or decodes to the wrong size, is a bad tile like any
     * other: the read fails naming the level and the tile; with io.on_bad_tile=fill it reads
     * as zeros, counted once, and the tiles around it are intact. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "bad.svs");
    const j2k_bad kinds[2] = {J2K_GARBAGE, J2K_SMALL};
    const char *why[2] = {"corrupt data (OpenJPEG", "a 32x32 image in a 64x64 tile"};

    for (int k = 0; k < 2; k++) {
        const int64_t w = j2k_dims[1][0], h = j2k_dims[1][1];
        tw_slide *s = NULL;
        tw_error err = {0};
        uint8_t *buf = malloc((size_t)(w * h) * 3);

        write_j2k_svs(path, 33005, kinds[k]);
        for (int r = 0; r < 2; r++) {
            cr_assert_eq(tw_slide_open(path, r ? TW_READER_TIFF : TW_READER_AUTO, &s, &err),
                         TW_OK, "%s", err.message);
            cr_assert_eq(tw_slide_read_region(s, 1, 0, 0, w, h, buf, (size_t)w * 3, &err),
                         TW_E_FORMAT);
            cr_assert(strstr(err.message, "level 1 tile (1, 2) at x=64, y=128"), "%s",
                      err.message);
            cr_assert(strstr(err.message, why[k]), "%s", err.message);
            /* a region beside it reads */
            cr_assert_eq(tw_slide_read_region(s, 1, 0, 0, 64, 64, buf, 64 * 3, &err), TW_OK,
                         "%s", err.message);
            tw_slide_close(s);
        }

        cr_assert_eq(tw_slide_open(path, TW_READER_TIFF, &s, &err), TW_OK, "%s", err.message);
        twi_slide_set_bad_tiles(s, true);
        cr_assert_eq(tw_slide_read_region(s, 1, 0, 0, w, h, buf, (size_t)w * 3, &err), TW_OK,
                     "%s", err.message);
        cr_assert_eq(twi_slide_get_bad_tiles(s), 1);
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++)
                for (int c = 0; c < 3; c++) {
                    const bool in_bad = x >= 64 && x < 128 && y >= 128 && y < 192;

                    cr_assert_eq(buf[((size_t)y * (size_t)w + (size_t)x) * 3 + c],
                                 in_bad ? 0 : j2k_sample(1, x, y, c), "(%ld, %ld)", (long)x,
                                 (long)y);
                }
        tw_slide_close(s);
        free(buf);
    }
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

/* ---- the real slides */

Test(levels, real_slides_every_level_equals_openslide_in_every_tiling)
{
    /* Every level of every real slide OpenSlide opens (the JPEG 2000 SVS with its level at
     * downsample 2.0005, the JPEG SVS, the generic pyramidal TIFFs at 4.016 and 8.086) equals
     * OpenSlide's whole-level read, in every tiling (issue 27: level 1 of the JPEG 2000 SVS
     * differed in 1.5 M pixels between --tile 512x512 and the default). */
    static const char *const names[] = {"tcga-cr-7395-01a-01-ts1.svs", "CMU-1-Small-Region.svs",
                                        "boxes.tiff", "small_HE_levels.tiff"};
    struct stat sb;

    if (stat(SLIDES_DIR, &sb) != 0)
        cr_skip_test("no %s", SLIDES_DIR);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *path = twtest_path(SLIDES_DIR, names[i]);
        tw_slide *s = NULL;
        tw_error err = {0};

        cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
        cr_assert_eq(tw_slide_get_channels(s), 3, "%s", path);
        cr_assert_eq(tw_slide_get_sample_type(s), TW_U8, "%s", path);
        check_levels_tiled(s, path, real_tilings, sizeof real_tilings / sizeof real_tilings[0],
                           true);
        tw_slide_close(s);
        free(path);
    }
}

/* ---- levels only OpenSlide reads */

Test(levels, openslide_only_levels_are_read_in_aligned_blocks)
{
    /* A level at a non-integer downsample with no directory the libtiff reader decodes
     * (here: an Aperio-like palette pyramid, a layout only OpenSlide reads) is read in blocks
     * of a fixed grid, each from the same level-0 corner: the same bytes in every tiling, and
     * the block at (0, 0) is OpenSlide's whole-level read there. Level 0 is OpenSlide's. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "palette.svs");
    TIFF *tif = TIFFOpen(path, "w");
    uint16_t cmap[3][256];
    uint8_t *tile = malloc(J2K_TILE * J2K_TILE);
    tw_slide *s = NULL;
    tw_error err = {0};

    cr_assert(tif && tile);
    for (int i = 0; i < 256; i++) {
        cmap[0][i] = (uint16_t)(i * 257);
        cmap[1][i] = (uint16_t)((255 - i) * 257);
        cmap[2][i] = (uint16_t)(((i * 7) & 255) * 257);
    }
    for (int l = 0; l < J2K_LEVELS; l++) {
        const uint32_t w = j2k_dims[l][0], h = j2k_dims[l][1];

        cr_assert(TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w));
        cr_assert(TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h));
        cr_assert(TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1));
        cr_assert(TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8));
        cr_assert(TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_PALETTE));
        cr_assert(TIFFSetField(tif, TIFFTAG_COLORMAP, cmap[0], cmap[1], cmap[2]));
        cr_assert(TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE));
        cr_assert(TIFFSetField(tif, TIFFTAG_TILEWIDTH, J2K_TILE));
        cr_assert(TIFFSetField(tif, TIFFTAG_TILELENGTH, J2K_TILE));
        cr_assert(TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION,
                               "Aperio Image Library vTEST\r\npalette|AppMag = 20|MPP = 0.5"));
        for (uint32_t ty = 0; ty < h; ty += J2K_TILE)
            for (uint32_t tx = 0; tx < w; tx += J2K_TILE) {
                for (uint32_t y = 0; y < J2K_TILE; y++)
                    for (uint32_t x = 0; x < J2K_TILE; x++)
                        tile[y * J2K_TILE + x] = j2k_sample(l, tx + x, ty + y, 0);
                cr_assert(TIFFWriteEncodedTile(tif, TIFFComputeTile(tif, tx, ty, 0, 0), tile,
                                               J2K_TILE * J2K_TILE) >= 0);
            }
        cr_assert(TIFFWriteDirectory(tif));
    }
    TIFFClose(tif);
    free(tile);

    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_str_eq(tw_slide_get_format(s), "aperio");
    cr_assert_eq(tw_slide_get_level_count(s), J2K_LEVELS);
    check_levels_tiled(s, path, tilings, N_TILINGS, false);
    for (int l = 0; l < J2K_LEVELS; l++) {
        const int64_t w = j2k_dims[l][0], h = j2k_dims[l][1];
        /* level 0 all of it; the others their first block (the tile edge, 64) */
        const int64_t bw = l ? J2K_TILE : w, bh = l ? J2K_TILE : h;
        int64_t ow, oh;
        uint8_t *want = os_whole_level(path, l, &ow, &oh);
        uint8_t *got = read_tiled(s, l, w, h, 3, 1 << 20, 1 << 20);

        for (int64_t y = 0; y < bh; y++)
            cr_assert(memcmp(got + (size_t)(y * w) * 3, want + (size_t)(y * w) * 3,
                             (size_t)bw * 3) == 0,
                      "level %d row %ld differs from OpenSlide's whole-level read", l, (long)y);
        free(got);
        free(want);
    }
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}
