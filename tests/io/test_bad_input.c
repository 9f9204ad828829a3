/* SPDX-License-Identifier: MIT */
/* tilewave tests: bad input to the readers: each gives its status and a one-line message. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "io_testutil.h"

static char *tmp_dir;

static void
setup(void)
{
    tmp_dir = twtest_tmpdir();
    cr_assert_not_null(tmp_dir);
}

static void
teardown(void)
{
    twtest_rmtree(tmp_dir);
    free(tmp_dir);
}

TestSuite(bad_input, .init = setup, .fini = teardown);

static char *
tmp_path(const char *name)
{
    return twtest_path(tmp_dir, name);
}

/* Open with `kind`; it must fail with `st` and a one-line message containing each of the
 * NULL-terminated substrings. */
static void
expect_open_fails(const char *path, tw_reader_kind kind, tw_status st, ...)
{
    tw_slide *s = (tw_slide *)0x1;
    tw_error err = {0};
    const char *sub;
    va_list ap;

    cr_assert_eq(tw_slide_open(path, kind, &s, &err), st, "status %s: %s",
                 tw_status_string(err.status), err.message);
    cr_assert_eq(s, (tw_slide *)0x1, "out-parameter touched on failure");
    cr_assert_eq(err.status, st);
    TU_ASSERT_ONE_LINE(err);
    va_start(ap, st);
    while ((sub = va_arg(ap, const char *)))
        TU_ASSERT_MSG(err, sub);
    va_end(ap);
}

static void
write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");

    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void
write_small_tiff(const char *path, int n_levels, tw_compression c)
{
    tw_writer_opts o;
    tw_error err = {0};

    tw_writer_opts_init(&o);
    o.w = 300;
    o.h = 200;
    o.tile_w = o.tile_h = 64;
    o.n_levels = n_levels;
    o.compression = c;
    cr_assert_eq(tu_write(path, &o, 1, &err), TW_OK, "%s", err.message);
}

static int64_t
file_size(const char *path)
{
    struct stat sb;

    cr_assert_eq(stat(path, &sb), 0);
    return (int64_t)sb.st_size;
}

Test(bad_input, missing_file)
{
    /* A file that does not exist: TW_E_IO "io: cannot open '...' (No such file or
     * directory)", whichever reader is asked for. */
    char *p = tmp_path("x.tif");
    char want[4096];

    snprintf(want, sizeof want, "io: cannot open '%s' (%s)", p, strerror(ENOENT));
    expect_open_fails(p, TW_READER_AUTO, TW_E_IO, want, NULL);
    expect_open_fails(p, TW_READER_TIFF, TW_E_IO, want, NULL);
    expect_open_fails(p, TW_READER_OPENSLIDE, TW_E_IO, want, NULL);
    free(p);
}

Test(bad_input, folder_instead_of_file)
{
    /* A folder is not a slide: TW_E_IO naming it and what it is (not a stale errno). */
    expect_open_fails(tmp_dir, TW_READER_AUTO, TW_E_IO, "is a directory, not a regular file",
                      NULL);
}

Test(bad_input, devices_fifos_and_sockets_are_refused_without_blocking)
{
    /* Only regular files are opened: a character device says so (not the stale "No such file
     * or directory" of before), a FIFO with no writer is refused at once instead of blocking
     * in open(), a socket likewise; each is TW_E_IO naming the path and the kind of file. */
    char *fifo = twtest_path(tmp_dir, "fifo"), *sock = twtest_path(tmp_dir, "sock");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert(fd >= 0, "socket");
    cr_assert(strlen(sock) < sizeof sa.sun_path, "socket path too long: %s", sock);
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    expect_open_fails("/dev/zero", TW_READER_AUTO, TW_E_IO,
                      "'/dev/zero' is a character device, not a regular file", NULL);
    expect_open_fails("/dev/null", TW_READER_TIFF, TW_E_IO, "is a character device", NULL);
    expect_open_fails(fifo, TW_READER_AUTO, TW_E_IO, "is a FIFO, not a regular file", NULL);
    expect_open_fails(sock, TW_READER_OPENSLIDE, TW_E_IO, "is a socket, not a regular file",
                      NULL);
    close(fd);
    free(fifo);
    free(sock);
}

Test(bad_input, text_file)
{
    /* A text file: TW_E_FORMAT "is not a TIFF or a slide OpenSlide can open"; forcing a
     * reader names that reader. */
    char *p = tmp_path("x.txt");
    char want[4096];

    write_bytes(p, "hello, this is not an image\n", 28);
    snprintf(want, sizeof want, "io: '%s' is not a TIFF or a slide OpenSlide can open", p);
    expect_open_fails(p, TW_READER_AUTO, TW_E_FORMAT, want, NULL);
    expect_open_fails(p, TW_READER_TIFF, TW_E_FORMAT, "io.tiff: ", "is not a TIFF", NULL);
    expect_open_fails(p, TW_READER_OPENSLIDE, TW_E_FORMAT, "io.openslide: ",
                      "is not a slide OpenSlide can open", NULL);
    free(p);
}

Test(bad_input, empty_file)
{
    /* An empty file: TW_E_FORMAT saying so. */
    char *p = tmp_path("empty.tif");

    write_bytes(p, "", 0);
    expect_open_fails(p, TW_READER_AUTO, TW_E_FORMAT, "is not a TIFF", "(empty file)", NULL);
    expect_open_fails(p, TW_READER_TIFF, TW_E_FORMAT, "(empty file)", NULL);
    free(p);
}

Test(bad_input, tiff_header_without_directory)
{
    /* A TIFF header whose first directory is empty: TW_E_FORMAT from libtiff's reading,
     * not a crash. */
    static const uint8_t bytes[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    char *p = tmp_path("nodir.tif");

    write_bytes(p, bytes, sizeof bytes);
    expect_open_fails(p, TW_READER_AUTO, TW_E_FORMAT, "io.tiff: ", NULL);
    free(p);
}

Test(bad_input, truncated_tiff)
{
    /* A valid TIFF cut in half, and one cut just before its end: TW_E_FORMAT "is truncated"
     * naming where the missing part starts and the file's size. */
    static const double cuts[] = {0.5, 0.97};
    char *p = tmp_path("trunc.tif");
    size_t i;

    for (i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int64_t n;
        char size_txt[64];

        write_small_tiff(p, 2, TW_COMPRESS_DEFLATE);
        n = (int64_t)((double)file_size(p) * cuts[i]);
        cr_assert_eq(truncate(p, n), 0);
        snprintf(size_txt, sizeof size_txt, "the file has %ld)", (long)n);
        expect_open_fails(p, TW_READER_AUTO, TW_E_FORMAT, "io.tiff: ", "is truncated", size_txt,
                          NULL);
        expect_open_fails(p, TW_READER_TIFF, TW_E_FORMAT, "is truncated", NULL);
    }
    free(p);
}

/* A classic TIFF built by hand with its directory before its pixels (libtiff puts it after),
 * so that truncation cuts pixels but leaves the directory whole: gray 8-bit, one strip. */
static void
write_dir_first_tiff(const char *path, uint16_t w, uint16_t h, size_t keep)
{
    enum { N = 9, IFD = 8, DATA = IFD + 2 + N * 12 + 4 };
    static const uint16_t tags[N] = {256, 257, 258, 259, 262, 273, 277, 278, 279};
    const uint32_t values[N] = {w, h, 8, 1, 1, DATA, 1, h, (uint32_t)w * h};
    const size_t total = DATA + (size_t)w * h;
    uint8_t *b = calloc(1, total);
    size_t i, o = IFD + 2;

    cr_assert_not_null(b);
    memcpy(b, "II*\0", 4);
    b[4] = IFD;
    b[IFD] = N;
    for (i = 0; i < N; i++, o += 12) {
        const bool is_long = tags[i] == 273 || tags[i] == 279;

        b[o] = (uint8_t)(tags[i] & 0xff);
        b[o + 1] = (uint8_t)(tags[i] >> 8);
        b[o + 2] = is_long ? 4 : 3; /* LONG or SHORT */
        b[o + 4] = 1;               /* count */
        b[o + 8] = (uint8_t)(values[i] & 0xff);
        b[o + 9] = (uint8_t)((values[i] >> 8) & 0xff);
        b[o + 10] = (uint8_t)((values[i] >> 16) & 0xff);
        b[o + 11] = (uint8_t)(values[i] >> 24);
    }
    for (i = 0; i < (size_t)w * h; i++)
        b[DATA + i] = (uint8_t)(i * 7);
    write_bytes(path, b, keep < total ? keep : total);
    free(b);
}

Test(bad_input, truncated_pixels_with_whole_directory)
{
    /* The directory is intact but the strip runs past the end of the file: reported at open
     * as "strip 0 of level 0 ends at byte N, the file has M". The whole file reads. */
    char *p = tmp_path("dirfirst.tif");
    tw_slide *s = NULL;
    tw_error err = {0};
    uint8_t px[4] = {0};

    write_dir_first_tiff(p, 40, 30, SIZE_MAX);
    cr_assert_eq(tw_slide_open(p, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_read_region(s, 0, 1, 0, 4, 1, px, 4, &err), TW_OK, "%s", err.message);
    cr_assert_eq(px[0], 7);
    cr_assert_eq(px[3], 28);
    tw_slide_close(s);

    write_dir_first_tiff(p, 40, 30, 600);
    /* the strip starts at 122 and has 1200 bytes */
    expect_open_fails(p, TW_READER_AUTO, TW_E_FORMAT,
                      "is truncated (strip 0 of level 0 ends at byte 1322, the file has 600)",
                      NULL);
    free(p);
}

/* A one-directory striped TIFF made by libtiff with the given layout. */
static void
write_layout(const char *path, uint16_t spp, uint16_t bps, uint16_t fmt, uint16_t photometric,
             uint16_t planar)
{
    const uint32_t w = 16, h = 8;
    const size_t row = ((size_t)w * (planar == PLANARCONFIG_SEPARATE ? 1 : spp) * bps + 7) / 8;
    uint8_t buf[16 * 8 * 8] = {0};
    TIFF *tif = TIFFOpen(path, "w");
    uint16_t s;

    cr_assert_not_null(tif);
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, spp);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, bps);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, fmt);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, photometric);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, planar);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, h);
    if (photometric == PHOTOMETRIC_PALETTE) {
        uint16_t *map = calloc(3u << bps, sizeof *map);

        cr_assert_not_null(map);
        TIFFSetField(tif, TIFFTAG_COLORMAP, map, map + (1u << bps), map + (2u << bps));
        free(map);
    }
    for (s = 0; s < (planar == PLANARCONFIG_SEPARATE ? spp : 1); s++)
        cr_assert(TIFFWriteEncodedStrip(tif, s, buf, (tmsize_t)(row * h)) >= 0);
    TIFFClose(tif);
}

Test(bad_input, unsupported_layouts)
{
    /* 12-bit and 1-bit samples, a palette, separate planes, signed integers, 64-bit floats,
     * CMYK, two float samples: TW_E_FORMAT naming the unsupported property and the file. */
    static const struct {
        uint16_t spp, bps, fmt, photometric, planar;
        const char *sub;
    } cases[] = {
        {1, 12, SAMPLEFORMAT_UINT, PHOTOMETRIC_MINISBLACK, PLANARCONFIG_CONTIG,
         "io.tiff: unsupported bits per sample 12 in '"},
        {1, 1, SAMPLEFORMAT_UINT, PHOTOMETRIC_MINISBLACK, PLANARCONFIG_CONTIG,
         "io.tiff: unsupported bits per sample 1 in '"},
        {1, 8, SAMPLEFORMAT_UINT, PHOTOMETRIC_PALETTE, PLANARCONFIG_CONTIG,
         "io.tiff: unsupported photometric palette in '"},
        {3, 8, SAMPLEFORMAT_UINT, PHOTOMETRIC_RGB, PLANARCONFIG_SEPARATE,
         "io.tiff: unsupported planar configuration separate in '"},
        {1, 16, SAMPLEFORMAT_INT, PHOTOMETRIC_MINISBLACK, PLANARCONFIG_CONTIG,
         "io.tiff: unsupported sample format signed integer in '"},
        {1, 64, SAMPLEFORMAT_IEEEFP, PHOTOMETRIC_MINISBLACK, PLANARCONFIG_CONTIG,
         "io.tiff: unsupported bits per sample 64 in '"},
        {4, 8, SAMPLEFORMAT_UINT, PHOTOMETRIC_SEPARATED, PLANARCONFIG_CONTIG,
         "io.tiff: unsupported photometric separated (CMYK) in '"},
        /* several gray samples of 8 or 16 bits are channels (tests/cli/test_cli_channels.c);
         * of floats, not */
        {2, 32, SAMPLEFORMAT_IEEEFP, PHOTOMETRIC_MINISBLACK, PLANARCONFIG_CONTIG,
         "io.tiff: unsupported samples per pixel 2 for gray in '"},
    };
    char *p = tmp_path("layout.tif");
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_layout(p, cases[i].spp, cases[i].bps, cases[i].fmt, cases[i].photometric,
                     cases[i].planar);
        expect_open_fails(p, TW_READER_AUTO, TW_E_FORMAT, cases[i].sub, p, NULL);
    }
    /* OpenSlide does not take a striped TIFF */
    expect_open_fails(p, TW_READER_OPENSLIDE, TW_E_FORMAT, "is not a slide OpenSlide can open",
                      NULL);
    free(p);
}

Test(bad_input, level_that_does_not_exist)
{
    /* Reading level 5 (or -1) of a 3-level file: TW_E_INVALID "io: level 5 does not exist
     * ('...' has 3 levels)"; tw_slide_get_level says TW_E_INVALID too. */
    char *p = tmp_path("levels.tif");
    tw_slide *s = NULL;
    tw_error err = {0};
    tw_level_info li;
    uint8_t px[1];
    char want[4096];

    write_small_tiff(p, 3, TW_COMPRESS_ZSTD);
    cr_assert_eq(tw_slide_open(p, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_read_region(s, 5, 0, 0, 1, 1, px, 1, &err), TW_E_INVALID);
    snprintf(want, sizeof want, "io: level 5 does not exist ('%s' has 3 levels)", p);
    TU_ASSERT_MSG(err, want);
    TU_ASSERT_ONE_LINE(err);
    cr_assert_eq(tw_slide_read_region(s, -1, 0, 0, 1, 1, px, 1, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "level -1 does not exist");
    cr_assert_eq(tw_slide_get_level(s, 3, &li), TW_E_INVALID);
    cr_assert_eq(tw_slide_get_level(s, -1, &li), TW_E_INVALID);
    tw_slide_close(s);
    free(p);
}

Test(bad_input, regions_outside_or_empty)
{
    /* Regions outside the level (also with huge or negative values that could overflow),
     * empty regions and a short row stride: TW_E_INVALID naming the region and the level. */
    static const struct {
        int level;
        int64_t x, y, w, h;
        const char *sub;
    } cases[] = {
        {0, 0, 0, 5000, 5000, "io: region 0,0,5000x5000 is outside level 0 (300x200)"},
        {0, 299, 0, 2, 1, "region 299,0,2x1 is outside level 0 (300x200)"},
        {0, -1, 0, 10, 10, "region -1,0,10x10 is outside"},
        {0, 0, 200, 1, 1, "region 0,200,1x1 is outside"},
        {1, 100, 0, 51, 1, "region 100,0,51x1 is outside level 1 (150x100)"},
        {0, 1, 1, INT64_MAX, 1, "is outside level 0"},
        {0, INT64_MAX, INT64_MAX, 1, 1, "is outside level 0"},
        {0, 0, 0, 0, 10, "io: region 0,0,0x10 is empty"},
        {0, 0, 0, 10, 0, "region 0,0,10x0 is empty"},
        {0, 0, 0, -3, 10, "region 0,0,-3x10 is empty"},
    };
    char *p = tmp_path("regions.tif");
    uint8_t buf[64];
    tw_slide *s = NULL;
    tw_error err = {0};
    size_t i;

    write_small_tiff(p, 2, TW_COMPRESS_NONE);
    cr_assert_eq(tw_slide_open(p, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&err, 0, sizeof err);
        cr_assert_eq(tw_slide_read_region(s, cases[i].level, cases[i].x, cases[i].y, cases[i].w,
                                          cases[i].h, buf, sizeof buf, &err),
                     TW_E_INVALID, "case %zu", i);
        TU_ASSERT_MSG(err, cases[i].sub);
        TU_ASSERT_ONE_LINE(err);
    }
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, 10, 1, buf, 9, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "stride 9");
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, 1, 1, NULL, 1, &err), TW_E_INVALID);
    cr_assert_eq(tw_slide_read_region(NULL, 0, 0, 0, 1, 1, buf, 1, &err), TW_E_INVALID);
    /* the slide still reads after all that */
    cr_assert_eq(tw_slide_read_region(s, 0, 299, 199, 1, 1, buf, 1, &err), TW_OK);
    tw_slide_close(s);
    free(p);
}

Test(bad_input, corrupt_tile_data)
{
    /* A deflate tile overwritten with garbage: the file opens, reading that tile is
     * TW_E_FORMAT "level 0 tile (0, 0) at x=0, y=0: corrupt data" with libtiff's reason; other tiles read. */
    char *p = tmp_path("corrupt.tif");
    uint8_t junk[32], *buf = malloc(300 * 200);
    tw_slide *s = NULL;
    tw_error err = {0};
    uint64_t off;
    TIFF *tif;
    FILE *f;

    write_small_tiff(p, 1, TW_COMPRESS_DEFLATE);
    tif = TIFFOpen(p, "r");
    cr_assert_not_null(tif);
    off = TIFFGetStrileOffset(tif, 0);
    TIFFClose(tif);
    memset(junk, 0xff, sizeof junk);
    f = fopen(p, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, (long)off, SEEK_SET), 0);
    cr_assert_eq(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    fclose(f);

    cr_assert_eq(tw_slide_open(p, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, 300, 200, buf, 300, &err), TW_E_FORMAT);
    TU_ASSERT_MSG(err, "corrupt.tif': level 0 tile (0, 0) at x=0, y=0: corrupt data (ZIPDecode: ");
    TU_ASSERT_ONE_LINE(err);
    tu_check_region(s, 0, 64, 64, 200, 100, tu_level_seed(1, 0));
    tw_slide_close(s);
    free(buf);
    free(p);
}

Test(bad_input, null_and_unknown_arguments)
{
    /* NULL path or out-parameter, an unknown reader kind: TW_E_INVALID; NULL getters are
     * harmless. */
    tw_slide *s = NULL;
    tw_error err = {0};

    cr_assert_eq(tw_slide_open(NULL, TW_READER_AUTO, &s, &err), TW_E_INVALID);
    cr_assert_eq(tw_slide_open("x.tif", TW_READER_AUTO, NULL, &err), TW_E_INVALID);
    cr_assert_eq(tw_slide_open("x.tif", (tw_reader_kind)9, &s, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "unknown reader kind 9");
    cr_assert_eq(tw_slide_open("x.tif", TW_READER_AUTO, &s, NULL), TW_E_IO);
    tw_slide_close(NULL);
    cr_assert_null(tw_slide_get_format(NULL));
    cr_assert_eq(tw_slide_get_level_count(NULL), 0);
    cr_assert_null(tw_slide_get_property(NULL, "x"));
}

/* A one-directory tiled (256x256, two tiles) TIFF of the given gray layout: what OpenSlide's
 * generic-tiff reader takes. */
static void
write_tiled_layout(const char *path, uint16_t bps, uint16_t fmt)
{
    const uint32_t w = 512, h = 256;
    size_t bytes = (size_t)256 * 256 * bps / 8;
    uint8_t *buf = calloc(bytes, 1);
    TIFF *tif = TIFFOpen(path, "w");

    cr_assert_not_null(tif);
    cr_assert_not_null(buf);
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, bps);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, fmt);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_TILEWIDTH, 256);
    TIFFSetField(tif, TIFFTAG_TILELENGTH, 256);
    for (uint32_t t = 0; t < 2; t++)
        cr_assert(TIFFWriteEncodedTile(tif, t, buf, (tmsize_t)bytes) >= 0);
    TIFFClose(tif);
    free(buf);
}

Test(bad_input, measurements_are_not_read_as_rgb)
{
    /* Tiled signed-integer and 64-bit float images: the libtiff reader refuses them, and the
     * automatic reader does not turn to OpenSlide, whose 8-bit RGB read would give wrong
     * values with success (a palette image still does: tests/io/test_reader.c). */
    static const struct {
        uint16_t bps, fmt;
        const char *sub;
    } cases[] = {
        {16, SAMPLEFORMAT_INT, "io.tiff: unsupported sample format signed integer in '"},
        {8, SAMPLEFORMAT_INT, "io.tiff: unsupported sample format signed integer in '"},
        {32, SAMPLEFORMAT_INT, "io.tiff: unsupported sample format signed integer in '"},
        {64, SAMPLEFORMAT_IEEEFP, "io.tiff: unsupported bits per sample 64 in '"},
    };
    char *p = tmp_path("tiled-layout.tif");

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_tiled_layout(p, cases[i].bps, cases[i].fmt);
        expect_open_fails(p, TW_READER_AUTO, TW_E_FORMAT, cases[i].sub, p, NULL);
    }
    free(p);
}
