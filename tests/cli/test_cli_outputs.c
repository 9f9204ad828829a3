/* SPDX-License-Identifier: MIT */
/* tilewave tests: the output flags of every command and `tilewave convert`, end to end. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_out.h"

TWTEST_CLI_SUITE(cli_outputs, .timeout = TWTEST_TIMEOUT(120));

/* A w x h input of ch x t samples at dir/name (mpp 0.5, one level); the pixels, malloc'd. */
static uint8_t *
input(const char *name, int64_t w, int64_t h, int ch, tw_sample_type t, bool smooth, char **path)
{
    uint8_t *img = twout_image(w, h, ch, t, 77, smooth);

    *path = twtest_path(dir, name);
    twout_write_input(*path, img, w, h, ch, t, 1, 0.5);
    return img;
}

/* Small written tiles and processing tiles, so that small images get pyramids. */
#define SMALL_TILES "--set", "io.tiff_tile=32x32", "--tile", "48x40", "--quiet"

Test(cli_outputs, bad_output_flags_exit_2_and_leave_nothing)
{
    /* A bad output flag (or combination) is one line on stderr, exit 2, and no file: an
     * unknown layout or compression, a quality out of range or without JPEG, an overlay over
     * the output or the input, flags a command does not take. JPEG where it cannot hold the
     * result (a mask, 16-bit samples) is refused by the library: exit 1, one line, no file. */
    char *in = NULL, *in16 = NULL, *out = twtest_path(dir, "out.tif");
    uint8_t *a = input("in.tif", 64, 48, 1, TW_U8, false, &in);
    uint8_t *b = input("in16.tif", 64, 48, 1, TW_U16, false, &in16);

    ERR_RUN(("gray", in, "-o", out, "--layout", "bigtiff"), 2, "--layout: unknown layout", out);
    ERR_RUN(("area-open", in, "--area", "5", "-o", out, "--compression", "lz4"), 2,
            "--compression: unknown compression 'lz4'", out);
    ERR_RUN(("convert", in, "-o", out, "--compression", "jpeg", "--quality", "0"), 2,
            "--quality: bad JPEG quality", out);
    ERR_RUN(("convert", in, "-o", out, "--compression", "jpeg", "--quality", "101"), 2,
            "--quality", out);
    ERR_RUN(("edt", in, "-o", out, "--quality", "high"), 2, "--quality", out);
    ERR_RUN(("convert", in, "-o", out, "--quality", "50"), 2, "--quality applies to JPEG", out);
    ERR_RUN(("hmax", in, "--h", "3", "-o", out, "--quality", "50", "--compression", "deflate"), 2,
            "--quality applies to JPEG", out);
    ERR_RUN(("gray", in, "-o", out, "--overlay", out), 2, "is the output itself", out);
    ERR_RUN(("fill-holes", in, "-o", out, "--overlay", in), 2, "would overwrite the input", out);
    ERR_RUN(("maxtree", in, "-o", out, "--layout"), 2, "--layout", out);
    ERR_RUN(("convert", in, "-o", out, "--overlay", "ov.tif"), 2, "unknown option '--overlay'",
            out);
    ERR_RUN(("convert", in, "-o", out, "--threshold", "9"), 2, "unknown option '--threshold'",
            out);
    ERR_RUN(("regional-max", in, "-o", out, "--compression", "jpeg"), 1, "JPEG is lossy", out);
    ERR_RUN(("convert", in16, "-o", out, "--compression", "jpeg"), 1, "8-bit", out);
    ERR_RUN(("gray", in, "-o", out, "--threshold", "100", "--compression", "jpeg"), 1,
            "would alter the mask", out);
    /* nothing but the two inputs: no output, no temporary file */
    cr_assert(eq(int, twtest_count_entries(dir), 2));
    free(a);
    free(b);
    free(in);
    free(in16);
    free(out);
}

Test(cli_outputs, description_has_version_and_command_line)
{
    /* The file's metadata says what made it: "tilewave VERSION convert ..." and the command
     * line as typed, quoted for a POSIX shell where needed, as the item "|Command = ..." of the
     * ImageDescription (tiff layout; 8-bit RGB: in Aperio's form, "Aperio Image Library (...)")
     * or of the OME-XML's Description (ome layout, whose Creator names the version); a '|' in
     * it is written %7C (docs/io.md, "Resolution and metadata"). */
    char *in = NULL, *out = twtest_path(dir, "it's.tif"), *ome = twtest_path(dir, "x.ome.tif");
    char *bar = twtest_path(dir, "p|q.tif");
    uint8_t *img = input("in.tif", 64, 48, 3, TW_U8, false, &in);
    char want[8192], head[128], *desc;

    snprintf(head, sizeof head, "Aperio Image Library (tilewave %s convert level 0 region "
             "0,0,64x48)", tw_version_string());
    OK_RUN("convert", in, "-o", out, "--compression", "lzw", "--quiet");
    desc = twout_description(out);
    cr_assert_not_null(desc);
    cr_assert(strncmp(desc, head, strlen(head)) == 0, "'%s' does not start with '%s'", desc,
              head);
    /* the path with a quote is quoted: 'DIR/it'\''s.tif' */
    snprintf(want, sizeof want, "|Command = %s convert %s -o '%s/it'\\''s.tif' --compression "
             "lzw --quiet", TW_CLI_PATH, in, dir);
    cr_assert(strstr(desc, want) != NULL, "'%s' lacks '%s'", desc, want);
    free(desc);

    OK_RUN("convert", in, "-o", bar, "--quiet");
    desc = twout_description(bar);
    cr_assert_not_null(desc);
    snprintf(want, sizeof want, "|Command = %s convert %s -o '%s/p%%7Cq.tif' --quiet",
             TW_CLI_PATH, in, dir);
    cr_assert(strstr(desc, want) != NULL, "'%s' lacks '%s'", desc, want);
    free(desc);

    snprintf(head, sizeof head, "tilewave %s convert level 0 region 0,0,64x48",
             tw_version_string());
    OK_RUN("convert", in, "-o", ome, "--layout", "ome", "--pyramid", "--quiet");
    desc = twout_description(ome);
    cr_assert_not_null(desc);
    snprintf(want, sizeof want, "Creator=\"tilewave %s\"", tw_version_string());
    cr_assert(strstr(desc, want) != NULL, "'%s' lacks '%s'", desc, want);
    snprintf(want, sizeof want, "<Description>%s|", head);
    cr_assert(strstr(desc, want) != NULL, "'%s' lacks '%s'", desc, want);
    snprintf(want, sizeof want, "|Command = %s convert %s -o %s --layout ome --pyramid "
             "--quiet</Description>", TW_CLI_PATH, in, ome);
    cr_assert(strstr(desc, want) != NULL, "'%s' lacks '%s'", desc, want);
    free(desc);
    free(img);
    free(in);
    free(out);
    free(bar);
    free(ome);
}

Test(cli_outputs, convert_copies_gray_and_rgb)
{
    /* convert keeps the pixels, channels and sample type of a gray, a 16-bit gray and an RGB
     * input, with and without --pyramid (whose levels are the 2x2 means), in both layouts;
     * --level and --region copy that part of a level. */
    char *g = NULL, *g16 = NULL, *rgb = NULL, *out = twtest_path(dir, "out.tif");
    const int64_t w = 211, h = 147;
    uint8_t *gi = input("g.tif", w, h, 1, TW_U8, false, &g);
    uint8_t *g16i = input("g16.tif", w, h, 1, TW_U16, false, &g16);
    uint8_t *ri = input("rgb.tif", w, h, 3, TW_U8, false, &rgb);
    const struct {
        const char *path;
        const uint8_t *img;
        int ch;
        tw_sample_type t;
    } in[] = {{g, gi, 1, TW_U8}, {g16, g16i, 1, TW_U16}, {rgb, ri, 3, TW_U8}};

    for (int k = 0; k < 3; k++) {
        OK_RUN("convert", in[k].path, "-o", out, SMALL_TILES);
        cr_assert(eq(int,
                     twout_check_pyramid(out, in[k].img, w, h, in[k].ch, in[k].t, TWOUT_MEAN),
                     1));
        OK_RUN("convert", in[k].path, "-o", out, "--pyramid", "--layout", k == 1 ? "ome" : "tiff",
               SMALL_TILES);
        cr_assert(eq(int,
                     twout_check_pyramid(out, in[k].img, w, h, in[k].ch, in[k].t, TWOUT_MEAN),
                     3));
    }
    {
        /* RGB stays RGB (photometric), region of level 0 */
        twout_level lv;

        OK_RUN("convert", rgb, "-o", out, "--region", "10,20,50x30", SMALL_TILES);
        twout_read_level(out, 0, &lv);
        cr_assert(eq(u16, lv.photometric, (uint16_t)PHOTOMETRIC_RGB));
        cr_assert(eq(i64, lv.w, 50));
        for (int64_t y = 0; y < 30; y++)
            cr_assert(memcmp(lv.px + y * 50 * 3, ri + ((y + 20) * w + 10) * 3, 50 * 3) == 0,
                      "row %ld of the region", (long)y);
        twout_level_free(&lv);
    }
    free(gi);
    free(g16i);
    free(ri);
    free(g);
    free(g16);
    free(rgb);
    free(out);
}

Test(cli_outputs, flags_and_config_keys_reach_the_file)
{
    /* --pyramid, --layout and --compression on an operation (a thresholded area opening:
     * a mask, reduced by the maximum), and the same through the config keys io.pyramid,
     * io.layout and io.compression (--set); EDT's float distances reduce by the mean. */
    char *in = NULL, *m1 = twtest_path(dir, "m1.tif"), *m2 = twtest_path(dir, "m2.tif"),
         *d = twtest_path(dir, "d.tif");
    const int64_t w = 160, h = 130;
    uint8_t *img = input("in.tif", w, h, 1, TW_U8, false, &in);
    twout_level lv;
    bool ome = false;

    OK_RUN("area-open", in, "--area", "3", "--threshold", "128", "-o", m1, "--pyramid",
           "--layout", "ome", "--compression", "zstd", SMALL_TILES);
    OK_RUN("area-open", in, "--area", "3", "--threshold", "128", "-o", m2, "--set",
           "io.pyramid=yes", "--set", "io.layout=ome", "--set", "io.compression=zstd",
           SMALL_TILES);
    for (int k = 0; k < 2; k++) {
        const char *p = k ? m2 : m1;

        cr_assert(eq(int, twout_level_count(p, &ome), 3));
        cr_assert(ome);
        twout_read_level(p, 0, &lv);
        cr_assert(eq(u16, lv.compression, (uint16_t)COMPRESSION_ZSTD));
        cr_assert(eq(int, twout_check_pyramid(p, lv.px, w, h, 1, TW_U8, TWOUT_MAX), 3));
        twout_level_free(&lv);
    }
    OK_RUN("edt", in, "--threshold", "100", "-o", d, "--pyramid", "--compression", "lzw",
           SMALL_TILES);
    twout_read_level(d, 0, &lv);
    cr_assert(eq(int, (int)lv.type, (int)TW_F32));
    cr_assert(eq(u16, lv.compression, (uint16_t)COMPRESSION_LZW));
    cr_assert(eq(int, twout_check_pyramid(d, lv.px, w, h, 1, TW_F32, TWOUT_MEAN), 3));
    twout_level_free(&lv);
    free(img);
    free(in);
    free(m1);
    free(m2);
    free(d);
}

Test(cli_outputs, overlay_from_the_command_line)
{
    /* gray --overlay: an 8-bit RGB JPEG pyramid of the slide's size whose pixels are, within
     * the JPEG tolerance of tests/io/test_outputs.c (smooth input, quality 90: max 16, mean
     * 2.0), the result blended over the slide: base (1 - 0.4 v/255) + (0, 255, 0) 0.4 v/255. */
    char *in = NULL, *res = twtest_path(dir, "res.tif"), *ov = twtest_path(dir, "ov.tif");
    const int64_t w = 200, h = 150;
    uint8_t *img = input("in.tif", w, h, 3, TW_U8, true, &in);
    twout_level r, o;
    double sum = 0;
    int mx = 0;

    OK_RUN("gray", in, "-o", res, "--overlay", ov, "--pyramid", SMALL_TILES);
    twout_read_level(res, 0, &r);
    twout_read_level(ov, 0, &o);
    cr_assert(eq(int, o.channels, 3));
    cr_assert(eq(i64, o.w, w));
    cr_assert(eq(i64, o.h, h));
    cr_assert(eq(u16, o.compression, (uint16_t)COMPRESSION_JPEG));
    cr_assert(eq(int, twout_level_count(ov, NULL), twout_level_count(res, NULL)));
    for (int64_t i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++) {
            const int64_t v = r.px[i], base = img[i * 3 + c], tint = c == 1 ? 255 : 0;
            const int64_t want = (2 * (base * (1275 - 2 * v) + tint * 2 * v) + 1275) / 2550;
            const int d = abs((int)o.px[i * 3 + c] - (int)want);

            mx = d > mx ? d : mx;
            sum += d;
        }
    cr_assert(mx <= 16 && sum / (double)(w * h * 3) <= 2.0, "overlay error: max %d, mean %.3f",
              mx, sum / (double)(w * h * 3));
    twout_level_free(&r);
    twout_level_free(&o);
    free(img);
    free(in);
    free(res);
    free(ov);
}

Test(cli_outputs, every_command_documents_the_output_flags)
{
    /* Every command that writes an image lists the output flags in its --help (convert all
     * but --overlay, which needs a result to blend). */
    static const char *const cmds[] = {"gray",        "convert",     "reconstruct", "fill-holes",
                                       "hmax",        "regional-max", "open-rec",   "close-rec",
                                       "edt",         "maxtree",     "area-open",   "area-close",
                                       "height-open", "height-close"};

    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        twtest_run r = RUN(cmds[k], "--help");
        static const char *const flags[] = {"--pyramid", "--layout tiff|ome", "--quality Q",
                                            "deflate, zstd, lzw, none, or jpeg"};

        cr_assert(eq(int, r.status, 0), "%s --help", cmds[k]);
        for (int f = 0; f < 4; f++)
            cr_assert(strstr(r.out, flags[f]) != NULL, "%s --help lacks %s", cmds[k], flags[f]);
        cr_assert(eq(int, strstr(r.out, "--overlay FILE") != NULL, strcmp(cmds[k], "convert") != 0),
                  "%s --help and --overlay", cmds[k]);
        twtest_run_free(&r);
    }
}

/* Every level of two files has the same pixels. */
static void
same_levels(const char *a, const char *b)
{
    int n = twout_level_count(a, NULL);

    cr_assert(eq(int, twout_level_count(b, NULL), n));
    for (int l = 0; l < n; l++) {
        twout_level la, lb;

        twout_read_level(a, l, &la);
        twout_read_level(b, l, &lb);
        cr_assert(la.w == lb.w && la.h == lb.h && la.channels == lb.channels, "level %d", l);
        cr_assert(eq(int,
                     memcmp(la.px, lb.px,
                            (size_t)(la.w * la.h * la.channels) * tw_sample_size(la.type)),
                     0),
                  "level %d of %s and %s differ", l, a, b);
        twout_level_free(&la);
        twout_level_free(&lb);
    }
}

Test(cli_outputs, partial_tiles_in_a_scratch_file_give_the_same_pyramids)
{
    /* gray --pyramid --overlay with operation tiles (48x40) that cut the output tiles (32x32):
     * level 0's partial tiles and every reduced level's, of the result and of the overlay,
     * kept in a scratch file (io.partial_tiles=file, and auto under a budget they exceed a
     * quarter of) give the pixels they give in memory, and leave nothing in the scratch
     * folder. */
    char *in = NULL, *scratch = twtest_tmpdir();
    char set_dir[4200];
    const int64_t w = 300, h = 190;
    uint8_t *img = input("in.tif", w, h, 3, TW_U8, true, &in);
    const char *modes[] = {"memory", "file", "auto"};
    char *res[3], *ov[3];

    cr_assert(scratch != NULL);
    snprintf(set_dir, sizeof set_dir, "runtime.scratch_dir=%s", scratch);
    for (int k = 0; k < 3; k++) {
        char name[32], set[64];

        snprintf(name, sizeof name, "res-%s.tif", modes[k]);
        res[k] = twtest_path(dir, name);
        snprintf(name, sizeof name, "ov-%s.tif", modes[k]);
        ov[k] = twtest_path(dir, name);
        snprintf(set, sizeof set, "io.partial_tiles=%s", modes[k]);
        if (k < 2) {
            OK_RUN("gray", in, "-o", res[k], "--overlay", ov[k], "--pyramid", "--set", set,
                   "--set", set_dir, SMALL_TILES);
        } else {
            /* about 91 KiB of partial tiles (result and overlay, every level) over a quarter
             * of a 256 KiB budget */
            twtest_run r = RUN("gray", in, "-o", res[k], "--overlay", ov[k], "--pyramid",
                               "--mem-budget", "256K", "--set", set_dir, "--set",
                               "io.tiff_tile=32x32", "--tile", "48x40", "--set",
                               "log.level=info");

            cr_assert(eq(int, r.status, 0), "%s", r.err);
            cr_assert(strstr(r.err, "kept in a scratch file") != NULL, "%s", r.err);
            twtest_run_free(&r);
        }
        cr_assert(eq(int, twtest_count_entries(scratch), 0), "files left in the scratch folder");
    }
    for (int k = 1; k < 3; k++) {
        same_levels(res[0], res[k]);
        same_levels(ov[0], ov[k]);
    }
    for (int k = 0; k < 3; k++) {
        free(res[k]);
        free(ov[k]);
    }
    twtest_rmtree(scratch);
    free(scratch);
    free(img);
    free(in);
}

/* A 16x12 u8 label image in one strip whose description says MPP = `mpp` (Aperio's form). */
static char *
write_labels_with_mpp(const char *name, const char *mpp)
{
    char *path = twtest_path(dir, name), desc[128];
    uint8_t row[16];
    TIFF *t = TIFFOpen(path, "w");

    cr_assert(t != NULL);
    snprintf(desc, sizeof desc, "Aperio Image Library |MPP = %s", mpp);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 16);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, 12);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 12);
    TIFFSetField(t, TIFFTAG_IMAGEDESCRIPTION, desc);
    for (uint32_t y = 0; y < 12; y++) {
        for (int x = 0; x < 16; x++)
            row[x] = (uint8_t)(x / 4 + 1);
        cr_assert(TIFFWriteScanline(t, row, y, 0) == 1);
    }
    TIFFClose(t);
    return path;
}

Test(cli_outputs, objects_refuses_a_pixel_size_without_finite_areas)
{
    /* A label image whose mpp is 1e300 (a crafted description): its areas in um^2 overflow
     * to inf, which JSON cannot hold. One line, exit 1, no table; mpp 0.5 runs. */
    char *bad = write_labels_with_mpp("mpp_huge.tif", "1e300");
    char *good = write_labels_with_mpp("mpp_half.tif", "0.5");
    char *out = twtest_path(dir, "o.geojson");

    ERR_RUN(("objects", bad, "-o", out), 1, "makes no finite area", out);
    OK_RUN("objects", good, "-o", out, "--quiet");
    free(bad);
    free(good);
    free(out);
}

Test(cli_outputs, objects_takes_a_pixel_size_instead_of_the_files)
{
    /* --pixel-size X,Y replaces the file's mpp (even an unusable one) for the areas in um^2:
     * each label of write_labels_with_mpp is 4 x 12 = 48 pixels, 48 * 0.25 * 0.5 = 6 um^2;
     * anything but one or two numbers above 0 is a usage error naming the option */
    char *bad = write_labels_with_mpp("mpp_huge2.tif", "1e300");
    char *out = twtest_path(dir, "px.csv"), *csv;

    OK_RUN("objects", bad, "-o", out, "--pixel-size", "0.25,0.5", "--quiet");
    csv = twtest_slurp(out);
    cr_assert(csv != NULL);
    cr_expect(strstr(csv, "\n1,48,6,") != NULL, "%s", csv);
    cr_expect(strstr(csv, "\n4,48,6,") != NULL, "%s", csv);
    free(csv);
    OK_RUN("objects", bad, "-o", out, "--pixel-size", "0.5", "--quiet");
    csv = twtest_slurp(out);
    cr_assert(csv != NULL);
    cr_expect(strstr(csv, "\n1,48,12,") != NULL, "%s", csv);
    free(csv);
    remove(out);
    ERR_RUN(("objects", bad, "-o", out, "--pixel-size", "0"), 2, "--pixel-size", out);
    ERR_RUN(("objects", bad, "-o", out, "--pixel-size", "0.5,"), 2, "--pixel-size", out);
    ERR_RUN(("objects", bad, "-o", out, "--pixel-size", "x"), 2, "--pixel-size", out);
    ERR_RUN(("objects", bad, "-o", out, "--pixel-size", "inf"), 2, "--pixel-size", out);
    ERR_RUN(("objects", bad, "-o", out, "--pixel-size", "1e300"), 1, "makes no finite area",
            out);
    free(bad);
    free(out);
}

Test(cli_outputs, objects_wants_a_name_before_the_extension_and_a_region_of_pixels)
{
    /* -o .csv or DIR/.geojson names no table (a hidden file): refused unless --format says
     * what to write; an empty --region is a usage error, not "outside" */
    char *labels = write_labels_with_mpp("labels.tif", "0.5");
    char *hidden = twtest_path(dir, ".csv"), *hidden_geo = twtest_path(dir, ".geojson");
    char *out = twtest_path(dir, "o.csv");

    ERR_RUN(("objects", labels, "-o", hidden), 1, "cannot tell the format of", hidden);
    ERR_RUN(("objects", labels, "-o", hidden_geo), 1, "cannot tell the format of", hidden_geo);
    OK_RUN("objects", labels, "-o", hidden, "--format", "csv", "--quiet");
    ERR_RUN(("objects", labels, "-o", out, "--region", "0,0,0,10"), 2, "W,H >= 1", out);
    ERR_RUN(("objects", labels, "-o", out, "--region", "0,0,5,-1"), 2, "W,H >= 1", out);
    OK_RUN("objects", labels, "-o", out, "--region", "0,0,5,4", "--quiet");
    free(labels);
    free(hidden);
    free(hidden_geo);
    free(out);
}
