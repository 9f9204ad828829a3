/* SPDX-License-Identifier: MIT */
/* tilewave bench: deflate of real TIFF tiles, zlib against libdeflate at every level. */

/*
 * What the writer does to a tile, measured alone: level 0 of a tiled TIFF is read through
 * libtiff (decoded, as a job hands tiles to tw_writer), a sample of its tiles spread over the
 * whole image is kept in memory, and each tile is compressed on its own as a zlib stream (TIFF
 * compression 8), single thread, by zlib's compress2 at levels 1..9 (what io/writer_tiff.c used
 * to call) and by libdeflate_zlib_compress at levels 1..12 (what it calls now, its compressor
 * made once per level as the writer's pool does). Every stream is then decompressed by
 * libdeflate (what libtiff uses to read deflate on Debian) and checked against the tile.
 * Speeds are MB (10^6 bytes) of raw tile per second of the thread's CPU time, best of R
 * passes over the sample: on an idle machine that is the wall time; on a shared one (a 2-core
 * CI machine building in the background) it leaves out the time spent waiting for a core.
 */
#include <getopt.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <time.h>
#include <zlib.h>

#include "bench.h"

static const char codec_help[] =
    "Usage: tw_bench codec --input FILE [--tiles N] [--repeat R] [--json]\n"
    "\n"
    "Compress N tiles of level 0 of the tiled TIFF FILE (decoded by libtiff, spread over the\n"
    "image) one by one, single thread, with zlib compress2 at levels 1..9 and libdeflate\n"
    "(zlib format, as TIFF deflate) at levels 1..12; decompress each result with libdeflate\n"
    "and check it. Prints a table: compression MB/s of raw input (best of R, the thread's CPU\n"
    "time), compressed size as a share of the raw size, and decompression MB/s of raw output.\n"
    "\n"
    "  --input FILE   tiled TIFF or BigTIFF (e.g. a tilewave output)\n"
    "  --tiles N      tiles sampled (default 32; all when the file has fewer)\n"
    "  --repeat R     passes, the best one counts (default 3)\n"
    "  --json         one JSON object per library and level instead of the table\n"
    "  --help         this help\n";

typedef struct codec_input {
    uint8_t *raw;           /* n tiles of tile_bytes each, back to back */
    size_t tile_bytes;
    int64_t n, n_file;      /* tiles sampled, tiles in level 0 */
    uint32_t w, h, tw, th;
    uint16_t spp, bits, fmt;
} codec_input;

static const char *
type_name(uint16_t fmt, uint16_t bits)
{
    if (fmt == SAMPLEFORMAT_IEEEFP)
        return bits == 32 ? "f32" : bits == 64 ? "f64" : "float";
    return bits == 8 ? "u8" : bits == 16 ? "u16" : bits == 32 ? "u32" : bits == 64 ? "u64" : "?";
}

/* n of level 0's tiles, decoded, into in->raw: rows evenly spaced, columns by the golden-ratio
 * sequence, so that the sample covers the image both ways (tissue, glass, edges) even when the
 * step would be a multiple of the row length; all tiles when the file has no more than n. */
static int
load_tiles(const char *path, int64_t want, codec_input *in)
{
    TIFF *tif = TIFFOpen(path, "r");
    int rc = BENCH_OK;

    if (!tif)
        return bench_fail("cannot open '%s' with libtiff", path);
    if (!TIFFIsTiled(tif)) {
        rc = bench_fail("'%s' is not tiled", path);
        goto out;
    }
    TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &in->w);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &in->h);
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &in->tw);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &in->th);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &in->spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &in->bits);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &in->fmt);
    in->tile_bytes = (size_t)TIFFTileSize64(tif);
    in->n_file = (int64_t)TIFFNumberOfTiles(tif);
    in->n = want < in->n_file ? want : in->n_file;
    if (in->tile_bytes == 0 || in->n == 0) {
        rc = bench_fail("'%s' has no tiles", path);
        goto out;
    }
    if (!(in->raw = malloc(in->tile_bytes * (size_t)in->n))) {
        rc = bench_fail("out of memory for %lld tiles", (long long)in->n);
        goto out;
    }
    for (int64_t i = 0; i < in->n; i++) {
        const int64_t tiles_x = (in->w + in->tw - 1) / in->tw, tiles_y = in->n_file / tiles_x;
        const double gold = 0.6180339887498949 * (double)i;
        uint32_t idx = (uint32_t)i;

        if (in->n < in->n_file)
            idx = (uint32_t)(((2 * i + 1) * tiles_y / (2 * in->n)) * tiles_x +
                             (int64_t)((gold - (double)(int64_t)gold) * (double)tiles_x));

        if (TIFFReadEncodedTile(tif, idx, in->raw + (size_t)i * in->tile_bytes,
                                (tmsize_t)in->tile_bytes) < 0) {
            rc = bench_fail("cannot decode tile %u of '%s'", idx, path);
            goto out;
        }
    }
out:
    TIFFClose(tif);
    return rc;
}

/* CPU seconds of the calling thread. */
static double
thread_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct codec_result {
    double comp_s, dec_s;   /* best pass */
    size_t out_bytes;       /* all sampled tiles */
} codec_result;

/* One library at one level over every sampled tile, R times; then libdeflate decompresses
 * each stream R times, the first time checked against the tile. */
static int
run_one(const codec_input *in, bool zlib, int level, int repeat, uint8_t **bufs, size_t *lens,
        size_t cap, uint8_t *check, codec_result *res)
{
    struct libdeflate_compressor *c = NULL;
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    int rc = BENCH_OK;

    res->comp_s = res->dec_s = 1e30;
    res->out_bytes = 0;
    if (!d || (!zlib && !(c = libdeflate_alloc_compressor(level)))) {
        rc = bench_fail("out of memory for a libdeflate (de)compressor");
        goto out;
    }
    for (int r = 0; r < repeat; r++) {
        double t0 = thread_seconds();

        for (int64_t i = 0; i < in->n; i++) {
            const uint8_t *src = in->raw + (size_t)i * in->tile_bytes;

            if (zlib) {
                uLongf n = (uLongf)cap;

                if (compress2(bufs[i], &n, src, (uLong)in->tile_bytes, level) != Z_OK) {
                    rc = bench_fail("compress2 failed at level %d", level);
                    goto out;
                }
                lens[i] = n;
            } else if (!(lens[i] = libdeflate_zlib_compress(c, src, in->tile_bytes, bufs[i],
                                                            cap))) {
                rc = bench_fail("libdeflate_zlib_compress failed at level %d", level);
                goto out;
            }
        }
        t0 = thread_seconds() - t0;
        if (t0 < res->comp_s)
            res->comp_s = t0;
    }
    for (int64_t i = 0; i < in->n; i++)
        res->out_bytes += lens[i];
    for (int r = 0; r < repeat; r++) {
        double t0 = thread_seconds();

        for (int64_t i = 0; i < in->n; i++) {
            size_t got = 0;

            if (libdeflate_zlib_decompress(d, bufs[i], lens[i], check, in->tile_bytes, &got) !=
                    LIBDEFLATE_SUCCESS ||
                got != in->tile_bytes ||
                (r == 0 && memcmp(check, in->raw + (size_t)i * in->tile_bytes, got) != 0)) {
                rc = bench_fail("tile %lld at level %d does not decompress to itself",
                                (long long)i, level);
                goto out;
            }
        }
        t0 = thread_seconds() - t0;
        if (t0 < res->dec_s)
            res->dec_s = t0;
    }
out:
    libdeflate_free_compressor(c);
    libdeflate_free_decompressor(d);
    return rc;
}

int
bench_codec(int argc, char **argv)
{
    enum { O_INPUT = 1, O_TILES, O_REPEAT, O_JSON, O_HELP };
    static const struct option opts[] = {{"input", required_argument, NULL, O_INPUT},
                                         {"tiles", required_argument, NULL, O_TILES},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"json", no_argument, NULL, O_JSON},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    const char *input = NULL;
    int64_t n_tiles = 32, repeat = 3;
    bool json = false;
    codec_input in = {0};
    uint8_t **bufs = NULL, *check = NULL;
    size_t *lens = NULL, cap;
    double mb;
    int opt, rc = BENCH_OK;

    optind = 1;
    opterr = 0;
    while (rc == BENCH_OK && (opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_INPUT: input = optarg; break;
        case O_TILES: rc = bench_parse_int("--tiles", optarg, 1, 1 << 20, &n_tiles); break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat); break;
        case O_JSON: json = true; break;
        case O_HELP:
        case 'h': fputs(codec_help, stdout); return BENCH_OK;
        default: return bench_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (rc != BENCH_OK)
        return rc;
    if (!input)
        return bench_usage("--input is required");
    TIFFSetWarningHandler(NULL);
    if ((rc = load_tiles(input, n_tiles, &in)) != BENCH_OK)
        goto out;
    /* zlib's bound is the larger of the two for stored blocks; one buffer per tile so that
     * every stream is still there to decompress */
    cap = compressBound((uLong)in.tile_bytes) + 64;
    if (!(bufs = calloc((size_t)in.n, sizeof *bufs)) ||
        !(lens = calloc((size_t)in.n, sizeof *lens)) || !(check = malloc(in.tile_bytes))) {
        rc = bench_fail("out of memory");
        goto out;
    }
    for (int64_t i = 0; i < in.n; i++)
        if (!(bufs[i] = malloc(cap))) {
            rc = bench_fail("out of memory");
            goto out;
        }
    mb = (double)in.tile_bytes * (double)in.n / 1e6;
    if (!json)
        printf("%s: %ux%u, %u x %s, %ux%u tiles, %lld of %lld tiles (%.1f MB raw), best of "
               "%lld, one thread (CPU time)\n"
               "%-10s %5s %10s %8s %10s\n",
               input, in.w, in.h, in.spp, type_name(in.fmt, in.bits), in.tw, in.th,
               (long long)in.n, (long long)in.n_file, mb, (long long)repeat, "library", "level",
               "comp MB/s", "size %", "dec MB/s");
    for (int lib = 0; lib < 2 && rc == BENCH_OK; lib++) {
        const bool zlib = lib == 0;
        const char *name = zlib ? "zlib" : "libdeflate";

        for (int level = 1; level <= (zlib ? 9 : 12); level++) {
            codec_result res;
            double share;

            if ((rc = run_one(&in, zlib, level, (int)repeat, bufs, lens, cap, check, &res)) !=
                BENCH_OK)
                break;
            share = 100.0 * (double)res.out_bytes / ((double)in.tile_bytes * (double)in.n);
            if (json) {
                printf("{\"bench\": \"codec\", \"input\": ");
                bench_json_str(stdout, input);
                printf(", \"type\": \"%ux%s\", \"tiles\": %lld, \"raw_bytes\": %.0f, "
                       "\"library\": \"%s\", \"level\": %d, \"comp_mbps\": %.2f, "
                       "\"out_bytes\": %zu, \"size_pct\": %.3f, \"dec_mbps\": %.2f}\n",
                       in.spp, type_name(in.fmt, in.bits), (long long)in.n, mb * 1e6, name,
                       level, mb / res.comp_s, res.out_bytes, share, mb / res.dec_s);
            } else {
                printf("%-10s %5d %10.1f %8.2f %10.1f\n", name, level, mb / res.comp_s, share,
                       mb / res.dec_s);
            }
            fflush(stdout);
        }
    }
out:
    if (bufs)
        for (int64_t i = 0; i < in.n; i++)
            free(bufs[i]);
    free(bufs);
    free(lens);
    free(check);
    free(in.raw);
    return rc;
}
