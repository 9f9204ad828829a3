/* SPDX-License-Identifier: MIT */
/* tilewave: the tiled BigTIFF writer: parallel tile compression, serialised appends. */
/* Why one file: the BigTIFF writer's directory layout, offsets and tag order are one format
 * state machine; the parallel compression and the serialised appends work on the same private
 * writer struct, so a split would publish its layout for two readers. */

/*
 * Layout. One directory per level, level k being ceil(w / 2^k) x ceil(h / 2^k) pixels, levels
 * after the first marked FILETYPE_REDUCEDIMAGE. TW_LAYOUT_TIFF chains the directories (what
 * OpenSlide's generic-tiff, vips and libtiff read as a pyramid); TW_LAYOUT_OME writes level 0
 * as the only main directory, with the OME-XML as its ImageDescription and a SubIFD tag whose
 * n_levels - 1 entries libtiff fills in as the next directories are written (the SubIFDs).
 * Tiles are PlanarConfig contig.
 *
 * Parallelism. The caller's thread compresses its tile with libdeflate or zstd itself, with a
 * compressor taken from the writer's pool (one per thread compressing at once, kept until
 * close: they are not thread-safe, and libdeflate's take 200 KiB at level 1, 650 KiB at 2..9
 * and 8.6 MiB at 10..12 to set up); only the append (TIFFWriteRawTile) runs under the
 * writer's lock. LZW and JPEG use libtiff's codecs
 * (TIFFWriteEncodedTile), so they compress under the lock. Since libtiff can have only one
 * directory open for writing, a level's directory is written when its last tile arrives and
 * the next level is set up then. A tile of a later level (a pyramid level built while level 0
 * streams) is kept meanwhile in a scratch file beside the output, unlinked at once: as it will
 * be appended for deflate, zstd and none; zstd-packed (level 1) for LZW and JPEG, whose codec
 * runs at append time; its level's turn copies it in. A pyramid's reduced levels are a third
 * of its pixels: that is what the scratch file holds at most, on disk, not in memory.
 *
 * Edge tiles are padded with zeros, except for JPEG, where the last column and row are
 * repeated (pad_by_replication).
 *
 * Compression levels. 0 means the codec default: deflate DEFLATE_DEFAULT, zstd 3 (zstd's own
 * default, fast enough to keep up with the workers; libtiff uses 9). Deflate tiles are zlib
 * streams (Adobe deflate, compression 8, what every TIFF reader decodes) made by libdeflate,
 * whose levels run 1..12 (10..12: its slow near-optimal parser, for archives).
 *
 * Atomicity. The file is created in the output's folder without a name (O_TMPFILE), and
 * tw_writer_close() gives it one only once every tile of every level is written and the data
 * is synced: it links it as "<dir>/.<name>.tw-XXXXXX" and renames that over the output path at
 * once. Any failure, tw_writer_abort() and even kill -9 before that leave nothing behind: the
 * nameless file goes with its last descriptor. Where the file system has no O_TMPFILE, the file
 * is created securely under that temporary name instead (mkostemp), which failures and aborts
 * remove, but a killed process leaves. So the output path never holds a partial file, and an
 * existing file there is replaced only on success.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libdeflate.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>
#include <zstd.h>

#include "io_internal.h"
#include "tw_io.h"

/* The default deflate level, chosen by measurement (docs/io.md, "Deflate: libdeflate and the
 * default level"): the writer runs on every CPU worker at once and is usually what bounds a
 * job, so speed comes first. On real tiles libdeflate 1 compresses 3.4-5.7x faster than zlib's
 * 6 (the default before; masks 2.1x) and 1.4-1.7x faster than its own 4, for 8-bit images
 * 2-9% larger than zlib 6's (1.5-8% larger than 4's) and distance maps 42-69% larger (24-48%):
 * io.compression_level=4 suits those. */
#define DEFLATE_DEFAULT 1
#define DEFLATE_MAX 12
#define ZSTD_DEFAULT 3
#define TILE_MAX 16384

#define JPEG_QUALITY_DEFAULT 90

enum { TILE_FREE = 0, TILE_CLAIMED, TILE_WRITTEN, TILE_SPILLED };

typedef struct wr_level {
    int64_t w, h;             /* pixels */
    int64_t tiles_x, tiles_y;
    int64_t n_tiles, n_written;
    uint8_t *state;           /* TILE_* per tile, row-major */
    int64_t *spill_off;       /* TILE_SPILLED tiles: where in the scratch file, NULL until one */
    uint32_t *spill_len;      /* and how many bytes */
} wr_level;

/* A compressor of the pool: libdeflate's for deflate files (at clevel), zstd's for the others
 * (zstd files, and the zstd-packed scratch tiles of LZW and JPEG files). */
typedef struct cctx_node {
    ZSTD_CCtx *zstd;
    struct libdeflate_compressor *deflate;
    struct cctx_node *next;
} cctx_node;

struct tw_writer {
    char *path;
    char *dir;                /* the output's folder, "" or ending in '/' */
    char *tmp_path;           /* the file's temporary name; NULL while it has none */
    int keep_fd;              /* a nameless file (O_TMPFILE): our descriptor of it, else -1 */
    TIFF *tif;
    tw_writer_opts o;         /* description/software point at our copies */
    size_t px;                /* bytes per pixel */
    size_t tile_bytes;        /* one uncompressed tile */
    int clevel;               /* codec level actually used */
    wr_level *levels;
    pthread_mutex_t lock;     /* guards tif, levels, cur_level, failed, msg */
    pthread_mutex_t pool_lock; /* guards cctx_free */
    int cur_level;            /* level whose directory is open; n_levels when all are written */
    tw_status failed;         /* sticky: the file is unusable after a failed append */
    char fail_msg[TW_ERROR_MAX];
    char msg[256];            /* libtiff's first error */
    cctx_node *cctx_free;
    int spill_fd;             /* the scratch file of early tiles, -1 until needed */
    int64_t spill_end;        /* bytes in it */
    char *ome_xml;            /* TW_LAYOUT_OME: level 0's ImageDescription */
    twi_io_counts *io;        /* where tiles encoded and written are counted, or NULL */
    /* The writer thread (twi_writer_start_thread): encoded tiles wait in a ring for it */
    pthread_mutex_t q_lock;   /* guards the ring and q_stop */
    pthread_cond_t q_ready;   /* a tile or the stop arrived */
    pthread_cond_t q_space;   /* a slot freed */
    pthread_t thread;
    bool thread_on;
    bool q_stop;
    bool q_drop;              /* stop by discarding what waits (abort) */
    int q_head, q_n;
    twi_wr_tile q[TWI_WRITER_QUEUE];
};

static int
on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    tw_writer *wr = user;

    int e = errno; /* a failed write()'s, when libtiff reports "Write error" */

    (void)tif;
    if (!wr || wr->msg[0])
        return 1;
    twi_tiff_keep_message(wr->msg, sizeof wr->msg, wr->path, module, fmt, ap);
    if (e && strstr(wr->msg, "Write error")) {
        size_t n = strlen(wr->msg);
        char ebuf[128];

        snprintf(wr->msg + n, sizeof wr->msg - n, ": %s", twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    return 1;
}

static int
on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    (void)user;
    twi_tiff_log_warning("io.writer", module, fmt, ap);
    return 1;
}

static const char *
lib_msg(const tw_writer *wr)
{
    return wr->msg[0] ? wr->msg : "no message from libtiff";
}

void
tw_writer_opts_init(tw_writer_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->channels = 1;
    o->type = TW_U8;
    o->tile_w = o->tile_h = 512;
    o->n_levels = 1;
    o->compression = TW_COMPRESS_DEFLATE;
}

tw_status
tw_compression_parse(const char *name, tw_compression *out)
{
    if (!name || !out)
        return TW_E_INVALID;
    if (strcmp(name, "none") == 0)
        *out = TW_COMPRESS_NONE;
    else if (strcmp(name, "deflate") == 0)
        *out = TW_COMPRESS_DEFLATE;
    else if (strcmp(name, "zstd") == 0)
        *out = TW_COMPRESS_ZSTD;
    else if (strcmp(name, "lzw") == 0)
        *out = TW_COMPRESS_LZW;
    else if (strcmp(name, "jpeg") == 0)
        *out = TW_COMPRESS_JPEG;
    else
        return TW_E_INVALID;
    return TW_OK;
}

tw_status
tw_layout_parse(const char *name, tw_layout *out)
{
    if (!name || !out)
        return TW_E_INVALID;
    if (strcmp(name, "tiff") == 0)
        *out = TW_LAYOUT_TIFF;
    else if (strcmp(name, "ome") == 0)
        *out = TW_LAYOUT_OME;
    else
        return TW_E_INVALID;
    return TW_OK;
}

int
twi_io_max_levels(int64_t w, int64_t h)
{
    int n = 1;

    if (w < 1 || h < 1)
        return 0;
    /* w - w / 2 is the ceiling of w / 2 without (w + 1) overflowing at INT64_MAX */
    while (w > 1 || h > 1) {
        w -= w / 2;
        h -= h / 2;
        n++;
    }
    return n;
}

int
twi_io_pyramid_levels(int64_t w, int64_t h, int32_t tile_w, int32_t tile_h)
{
    int n = 1;

    if (w < 1 || h < 1 || tile_w < 1 || tile_h < 1)
        return 0;
    /* Halve while the next level still covers a whole tile both ways, as tilewave sample
     * does: OpenSlide 3.4.1 with libtiff 4.5 reads a level narrower or shorter than one tile
     * as transparent black, without an error (tests/io/test_viewers.c). A 1x1 level is the
     * last whatever the tile (fuzz finding F1, docs/reliability.md). */
    while ((w > 1 || h > 1) && w - w / 2 >= tile_w && h - h / 2 >= tile_h) {
        w -= w / 2;
        h -= h / 2;
        n++;
    }
    return n;
}

int32_t
twi_io_out_tile(int32_t op_tile)
{
    int32_t t = op_tile, m, d;

    if (t < 1)
        return 512;
    if (t % 16 == 0 && t >= 256 && t <= 1024)
        return t;
    if (t < 256) {
        /* the smallest multiple of both t and 16 that reaches 256 */
        int32_t a = t, b = 16;

        while (b) {
            int32_t r = a % b;
            a = b;
            b = r;
        }
        m = t / a * 16; /* lcm(t, 16) */
        m *= (256 + m - 1) / m;
        return m <= 1024 ? m : 256;
    }
    if (t > 1024) {
        for (d = 1024; d >= 256; d -= 16)
            if (t % d == 0)
                return d;
    }
    return 512;
}

static tw_status
validate(const tw_writer_opts *o, tw_error *err)
{
    int max_levels;

    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: options not initialised (struct_size %zu, expected %zu; "
                             "call tw_writer_opts_init())",
                             o->struct_size, sizeof *o);
    if (o->w < 1 || o->h < 1 || o->w > UINT32_MAX || o->h > UINT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: image size %" PRId64 "x%" PRId64
                             " is invalid (width and height must be 1..4294967295)",
                             o->w, o->h);
    if (o->channels != 1 && o->channels != 2 && o->channels != 3)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: %d channels is not supported (1 = gray, 2 = u32 "
                             "coordinate pairs, 3 = RGB)",
                             o->channels);
    if (tw_sample_size(o->type) == 0)
        return twi_error_set(err, TW_E_INVALID, "io.writer: unknown sample type %d",
                             (int)o->type);
    if (o->channels == 2 && o->type != TW_U32)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: 2 channels (coordinate pairs) need u32 samples, not %s",
                             tw_sample_type_name(o->type));
    if (o->channels == 3 && o->type != TW_U8 && o->type != TW_U16)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: 3 channels (RGB) need u8 or u16 samples, not %s",
                             tw_sample_type_name(o->type));
    if (o->tile_w < 16 || o->tile_h < 16 || o->tile_w > TILE_MAX || o->tile_h > TILE_MAX ||
        o->tile_w % 16 || o->tile_h % 16)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: tile size %dx%d is invalid (multiples of 16 from 16 to "
                             "%d)",
                             (int)o->tile_w, (int)o->tile_h, TILE_MAX);
    /* libtiff numbers tiles with 32 bits */
    if (((o->w + o->tile_w - 1) / o->tile_w) * ((o->h + o->tile_h - 1) / o->tile_h) > UINT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: %" PRId64 "x%" PRId64 " in %dx%d tiles is too many tiles",
                             o->w, o->h, (int)o->tile_w, (int)o->tile_h);
    max_levels = twi_io_max_levels(o->w, o->h);
    if (o->n_levels < 1 || o->n_levels > max_levels)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: %d levels requested, a %" PRId64 "x%" PRId64
                             " image allows 1..%d",
                             o->n_levels, o->w, o->h, max_levels);
    switch (o->compression) {
    case TW_COMPRESS_NONE:
        break;
    case TW_COMPRESS_DEFLATE:
        if (o->level_of_compression < 0 || o->level_of_compression > DEFLATE_MAX)
            return twi_error_set(err, TW_E_INVALID,
                                 "io.writer: deflate level %d is out of range (1..%d, 0 = "
                                 "default %d)",
                                 o->level_of_compression, DEFLATE_MAX, DEFLATE_DEFAULT);
        break;
    case TW_COMPRESS_ZSTD:
        if (o->level_of_compression < 0 || o->level_of_compression > ZSTD_maxCLevel())
            return twi_error_set(err, TW_E_INVALID,
                                 "io.writer: zstd level %d is out of range (1..%d, 0 = default %d)",
                                 o->level_of_compression, ZSTD_maxCLevel(), ZSTD_DEFAULT);
        break;
    case TW_COMPRESS_LZW:
        break;
    case TW_COMPRESS_JPEG:
        if (o->type != TW_U8 || (o->channels != 1 && o->channels != 3))
            return twi_error_set(err, TW_E_INVALID,
                                 "io.writer: JPEG needs 8-bit gray or RGB samples, not %d x %s "
                                 "(use deflate, zstd or lzw)",
                                 o->channels, tw_sample_type_name(o->type));
        if (o->quality < 0 || o->quality > 100)
            return twi_error_set(err, TW_E_INVALID,
                                 "io.writer: JPEG quality %d is out of range (1..100, 0 = "
                                 "default %d)",
                                 o->quality, JPEG_QUALITY_DEFAULT);
        break;
    default:
        return twi_error_set(err, TW_E_INVALID, "io.writer: unknown compression %d",
                             (int)o->compression);
    }
    if (o->layout != TW_LAYOUT_TIFF && o->layout != TW_LAYOUT_OME)
        return twi_error_set(err, TW_E_INVALID, "io.writer: unknown layout %d", (int)o->layout);
    if (o->layout == TW_LAYOUT_OME && o->type == TW_U64)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: OME-TIFF has no 64-bit integer pixel type (use the tiff "
                             "layout)");
    if (!(o->mpp_x >= 0) || !(o->mpp_y >= 0) || !isfinite(o->mpp_x) || !isfinite(o->mpp_y))
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: mpp %g x %g is invalid (>= 0; 0 = unknown)", o->mpp_x,
                             o->mpp_y);
    return TW_OK;
}

/* A growing string for the OME-XML; `failed` once an allocation failed. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool failed;
} sbuf;

static void TW_PRINTF(2, 3)
sb_add(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (b->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = true;
            return;
        }
        if (b->p && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)k;
        char *q = realloc(b->p, cap);

        if (!q) {
            b->failed = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* `text` with XML's special characters escaped and control characters dropped. */
static void
sb_add_escaped(sbuf *b, const char *text)
{
    for (const char *c = text; *c; c++) {
        switch (*c) {
        case '&': sb_add(b, "&amp;"); break;
        case '<': sb_add(b, "&lt;"); break;
        case '>': sb_add(b, "&gt;"); break;
        case '"': sb_add(b, "&quot;"); break;
        default:
            if ((unsigned char)*c >= 0x20 || *c == '\n' || *c == '\t')
                sb_add(b, "%c", *c);
        }
    }
}

/* The OME-XML of a TW_LAYOUT_OME file: one Image whose one plane is the main IFD (the reduced
 * levels in its SubIFDs are found by Bio-Formats without being described); interleaved
 * samples are one Channel of SamplesPerPixel = channels. NULL when out of memory. */
static char *
build_ome_xml(const tw_writer_opts *o)
{
    static const char *const types[] = {[TW_U8] = "uint8", [TW_U16] = "uint16",
                                        [TW_U32] = "uint32", [TW_F32] = "float",
                                        [TW_U64] = "uint64"};
    sbuf b = {0};

    sb_add(&b,
           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           "<OME xmlns=\"http://www.openmicroscopy.org/Schemas/OME/2016-06\" "
           "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
           "xsi:schemaLocation=\"http://www.openmicroscopy.org/Schemas/OME/2016-06 "
           "http://www.openmicroscopy.org/Schemas/OME/2016-06/ome.xsd\" Creator=\"");
    sb_add_escaped(&b, o->software ? o->software : "tilewave");
    sb_add(&b, "\">\n<Image ID=\"Image:0\" Name=\"tilewave\">");
    if (o->description) {
        sb_add(&b, "<Description>");
        sb_add_escaped(&b, o->description);
        sb_add(&b, "</Description>");
    }
    sb_add(&b,
           "\n<Pixels ID=\"Pixels:0\" DimensionOrder=\"XYCZT\" Type=\"%s\" SizeX=\"%" PRId64
           "\" SizeY=\"%" PRId64 "\" SizeC=\"%d\" SizeZ=\"1\" SizeT=\"1\" BigEndian=\"false\" "
           "Interleaved=\"%s\"",
           types[o->type], o->w, o->h, o->channels, o->channels > 1 ? "true" : "false");
    if (o->mpp_x > 0 && o->mpp_y > 0)
        sb_add(&b,
               " PhysicalSizeX=\"%.17g\" PhysicalSizeXUnit=\"\xC2\xB5m\" PhysicalSizeY=\"%.17g\" "
               "PhysicalSizeYUnit=\"\xC2\xB5m\"",
               o->mpp_x, o->mpp_y);
    sb_add(&b,
           ">\n<Channel ID=\"Channel:0:0\" SamplesPerPixel=\"%d\"><LightPath/></Channel>\n"
           "<TiffData IFD=\"0\" PlaneCount=\"1\"/>\n</Pixels>\n</Image>\n</OME>\n",
           o->channels);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* Set the tags of `level`'s directory; called with the lock held (or before any tile). */
static tw_status
setup_directory(tw_writer *wr, int level, tw_error *err)
{
    const tw_writer_opts *o = &wr->o;
    const wr_level *lv = &wr->levels[level];
    TIFF *tif = wr->tif;
    uint16_t compression = o->compression == TW_COMPRESS_DEFLATE ? COMPRESSION_ADOBE_DEFLATE
                           : o->compression == TW_COMPRESS_ZSTD  ? COMPRESSION_ZSTD
                           : o->compression == TW_COMPRESS_LZW   ? COMPRESSION_LZW
                           : o->compression == TW_COMPRESS_JPEG  ? COMPRESSION_JPEG
                                                                 : COMPRESSION_NONE;
    bool ycbcr = o->compression == TW_COMPRESS_JPEG && o->channels == 3;
    uint16_t bps = (uint16_t)(8 * tw_sample_size(o->type));
    int ok = 1;

    wr->msg[0] = '\0';
    ok &= TIFFSetField(tif, TIFFTAG_SUBFILETYPE, level > 0 ? FILETYPE_REDUCEDIMAGE : 0);
    ok &= TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)lv->w);
    ok &= TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (uint32_t)lv->h);
    ok &= TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, bps);
    ok &= TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)o->channels);
    ok &= TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT,
                       o->type == TW_F32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT);
    /* JPEG RGB is stored as YCbCr 4:2:0 (what slide scanners write and every reader decodes);
     * libtiff converts from the RGB we hand it */
    ok &= TIFFSetField(tif, TIFFTAG_PHOTOMETRIC,
                       ycbcr ? PHOTOMETRIC_YCBCR
                       : o->channels == 3 ? PHOTOMETRIC_RGB
                                          : PHOTOMETRIC_MINISBLACK);
    if (o->channels == 2) {
        /* (row, column) pairs: a gray sample plus one unspecified extra sample */
        uint16_t extra = EXTRASAMPLE_UNSPECIFIED;

        ok &= TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, (uint16_t)1, &extra);
    }
    ok &= TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    ok &= TIFFSetField(tif, TIFFTAG_COMPRESSION, compression);
    if (o->compression == TW_COMPRESS_JPEG) {
        ok &= TIFFSetField(tif, TIFFTAG_JPEGQUALITY,
                           o->quality ? o->quality : JPEG_QUALITY_DEFAULT);
        if (ycbcr)
            ok &= TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    }
    ok &= TIFFSetField(tif, TIFFTAG_TILEWIDTH, (uint32_t)o->tile_w);
    ok &= TIFFSetField(tif, TIFFTAG_TILELENGTH, (uint32_t)o->tile_h);
    if (level == 0 && o->layout == TW_LAYOUT_OME) {
        ok &= TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, wr->ome_xml);
        if (o->n_levels > 1) {
            /* placeholders: libtiff writes the next n_levels - 1 directories as SubIFDs of
             * this one and fills the offsets in (at most 64 levels: 2^63 pixels) */
            uint64_t zeros[64] = {0};

            ok &= TIFFSetField(tif, TIFFTAG_SUBIFD, (uint16_t)(o->n_levels - 1), zeros);
        }
    } else if (level == 0 && o->description) {
        ok &= TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, o->description);
    }
    if (level == 0 && o->software)
        ok &= TIFFSetField(tif, TIFFTAG_SOFTWARE, o->software);
    if (o->mpp_x > 0 && o->mpp_y > 0) {
        /* pixels per cm of this level: level-0 resolution scaled by the level's size */
        double rx = 10000.0 / o->mpp_x * (double)lv->w / (double)wr->levels[0].w;
        double ry = 10000.0 / o->mpp_y * (double)lv->h / (double)wr->levels[0].h;

        ok &= TIFFSetField(tif, TIFFTAG_XRESOLUTION, rx);
        ok &= TIFFSetField(tif, TIFFTAG_YRESOLUTION, ry);
        ok &= TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, RESUNIT_CENTIMETER);
    }
    if (!ok)
        return twi_error_set(err, TW_E_IO,
                             "io.writer: cannot set up level %d of '%s' (%s)", level, wr->path,
                             lib_msg(wr));
    return TW_OK;
}

static void stop_thread(tw_writer *wr, bool drop);

static void
writer_free(tw_writer *wr)
{
    int i;

    if (!wr)
        return;
    if (wr->levels)
        for (i = 0; i < wr->o.n_levels; i++) {
            free(wr->levels[i].state);
            free(wr->levels[i].spill_off);
            free(wr->levels[i].spill_len);
        }
    if (wr->spill_fd >= 0)
        close(wr->spill_fd);
    free(wr->ome_xml);
    while (wr->cctx_free) {
        cctx_node *n = wr->cctx_free;

        wr->cctx_free = n->next;
        ZSTD_freeCCtx(n->zstd);
        libdeflate_free_compressor(n->deflate);
        free(n);
    }
    pthread_mutex_destroy(&wr->lock);
    pthread_mutex_destroy(&wr->pool_lock);
    pthread_mutex_destroy(&wr->q_lock);
    pthread_cond_destroy(&wr->q_ready);
    pthread_cond_destroy(&wr->q_space);
    free(wr->levels);
    free((char *)wr->o.description);
    free((char *)wr->o.software);
    if (wr->keep_fd >= 0)
        close(wr->keep_fd); /* a nameless file not linked is gone with its last descriptor */
    free(wr->tmp_path);
    free(wr->dir);
    free(wr->path);
    free(wr);
}

/* Close the TIFF and remove the temporary file: every failure path. */
static void
writer_discard(tw_writer *wr)
{
    stop_thread(wr, true);
    if (wr->tif) {
        TIFFClose(wr->tif);
        wr->tif = NULL;
    }
    if (wr->tmp_path)
        unlink(wr->tmp_path);
    writer_free(wr);
}

tw_status
tw_writer_open(const char *path, const tw_writer_opts *o, tw_writer **out, tw_error *err)
{
    tw_status st = TW_OK;
    tw_writer *wr = NULL;
    TIFFOpenOptions *topts = NULL;
    const char *slash, *base;
    char *followed = NULL;
    char ebuf[128];
    struct stat sb;
    int fd = -1, i;
    int64_t w, h;

    if (!path || !o || !out)
        return twi_error_set(err, TW_E_INVALID, "io.writer: tw_writer_open: NULL argument");
    if ((st = validate(o, err)) != TW_OK)
        return st;
    slash = strrchr(path, '/');
    base = slash ? slash + 1 : path;
    if (!*base)
        return twi_error_set(err, TW_E_INVALID, "io.writer: '%s' names a folder, not a file",
                             path);
    /* Only a regular file is replaced: renaming over a device, a FIFO or a socket would turn
     * /dev/null into a file. */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return twi_error_set(err, TW_E_IO, "io.writer: '%s' is %s, not a regular file", path,
                             twi_file_kind((unsigned)sb.st_mode));
    /* A symbolic link is followed: the file it names is replaced, the link stays. */
    if (!(followed = twi_path_follow(path))) {
        int e = errno;

        return twi_error_set(err, e == ENOMEM ? TW_E_NOMEM : TW_E_IO,
                             "io.writer: cannot write '%s' (%s)", path,
                             twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    path = followed;
    slash = strrchr(path, '/');

    if (!(wr = calloc(1, sizeof *wr))) {
        st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
        goto out;
    }
    pthread_mutex_init(&wr->lock, NULL);
    pthread_mutex_init(&wr->pool_lock, NULL);
    pthread_mutex_init(&wr->q_lock, NULL);
    pthread_cond_init(&wr->q_ready, NULL);
    pthread_cond_init(&wr->q_space, NULL);
    wr->spill_fd = -1;
    wr->keep_fd = -1;
    wr->o = *o;
    wr->o.description = NULL;
    wr->o.software = NULL;
    if (!(wr->path = strdup(path)) ||
        (o->description && !(wr->o.description = strdup(o->description))) ||
        (o->software && !(wr->o.software = strdup(o->software))) ||
        !(wr->levels = calloc((size_t)o->n_levels, sizeof *wr->levels))) {
        st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
        goto out;
    }
    wr->px = twi_pixel_size(o->channels, o->type);
    wr->tile_bytes = (size_t)o->tile_w * (size_t)o->tile_h * wr->px;
    wr->clevel = o->level_of_compression ? o->level_of_compression
                 : o->compression == TW_COMPRESS_ZSTD ? ZSTD_DEFAULT
                                                      : DEFLATE_DEFAULT;
    w = o->w;
    h = o->h;
    for (i = 0; i < o->n_levels; i++) {
        wr_level *lv = &wr->levels[i];

        lv->w = w;
        lv->h = h;
        lv->tiles_x = (w + o->tile_w - 1) / o->tile_w;
        lv->tiles_y = (h + o->tile_h - 1) / o->tile_h;
        lv->n_tiles = lv->tiles_x * lv->tiles_y;
        if (!(lv->state = calloc((size_t)lv->n_tiles, 1))) {
            st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
            goto out;
        }
        w = (w + 1) / 2;
        h = (h + 1) / 2;
    }

    /* In the output's folder, so that the final rename stays in one file system: nameless
     * (O_TMPFILE), else "<dir>/.<name>.tw-XXXXXX" */
    if (!(wr->dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(""))) {
        st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
        goto out;
    }
    if ((fd = twi_out_nameless(wr->dir)) >= 0) {
        if ((wr->keep_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            int e = errno;

            st = twi_error_set(err, TW_E_IO, "io.writer: cannot create '%s' (%s)", path,
                               twi_io_strerror(e, ebuf, sizeof ebuf));
            goto out;
        }
    } else if ((fd = twi_out_beside(wr->dir, wr->path, ".tw-", &wr->tmp_path)) < 0) {
        int e = errno;

        st = twi_error_set(err, TW_E_IO, "io.writer: cannot create '%s' (%s)", path,
                           twi_io_strerror(e, ebuf, sizeof ebuf));
        goto out;
    }
    /* both make 0600; the output is an ordinary file */
    if (fchmod(fd, 0644) != 0) {
        int e = errno;

        st = twi_error_set(err, TW_E_IO, "io.writer: cannot set the mode of '%s' (%s)", path,
                           twi_io_strerror(e, ebuf, sizeof ebuf));
        goto out;
    }
    if (!(topts = TIFFOpenOptionsAlloc())) {
        st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
        goto out;
    }
    TIFFOpenOptionsSetErrorHandlerExtR(topts, on_error, wr);
    TIFFOpenOptionsSetWarningHandlerExtR(topts, on_warning, wr);
    /* "w8": BigTIFF, since a level may pass 4 GiB */
    if (!(wr->tif = TIFFFdOpenExt(fd, path, "w8", topts))) {
        st = twi_error_set(err, TW_E_IO, "io.writer: cannot create '%s' (%s)", path, lib_msg(wr));
        goto out;
    }
    fd = -1; /* TIFFClose closes it */
    if (o->layout == TW_LAYOUT_OME && !(wr->ome_xml = build_ome_xml(&wr->o))) {
        st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
        goto out;
    }
    if ((st = setup_directory(wr, 0, err)) != TW_OK)
        goto out;
    *out = wr;
    wr = NULL;
out:
    TIFFOpenOptionsFree(topts);
    free(followed);
    if (fd >= 0)
        close(fd);
    if (wr)
        writer_discard(wr);
    return st;
}

/* A compressor for this thread from the pool, made on first need: `level` for deflate files,
 * zstd (any level; the level is per call) for the others. NULL when out of memory. Nodes go
 * back with cctx_put and are freed at close, so the pool holds as many compressors as threads
 * ever compressed at once and steady state allocates nothing. */
static cctx_node *
cctx_get(tw_writer *wr, int level)
{
    cctx_node *n;

    pthread_mutex_lock(&wr->pool_lock);
    n = wr->cctx_free;
    if (n)
        wr->cctx_free = n->next;
    pthread_mutex_unlock(&wr->pool_lock);
    if (n)
        return n;
    if (!(n = calloc(1, sizeof *n)))
        return NULL;
    if (wr->o.compression == TW_COMPRESS_DEFLATE)
        n->deflate = libdeflate_alloc_compressor(level);
    else
        n->zstd = ZSTD_createCCtx();
    if (!n->deflate && !n->zstd) {
        free(n);
        return NULL;
    }
    return n;
}

static void
cctx_put(tw_writer *wr, cctx_node *n)
{
    pthread_mutex_lock(&wr->pool_lock);
    n->next = wr->cctx_free;
    wr->cctx_free = n;
    pthread_mutex_unlock(&wr->pool_lock);
}

/* Compress `src` (tile_bytes) at `level` into a new buffer *out of *out_n bytes: with the
 * file's codec (deflate or zstd), or zstd when the file's codec runs in libtiff (LZW, JPEG: a
 * tile packed for the scratch file). A deflate file's level is always wr->clevel, the level
 * its pooled compressors were made for. */
static tw_status
compress_tile(tw_writer *wr, const uint8_t *src, int level, uint8_t **out, size_t *out_n,
              tw_error *err)
{
    uint8_t *buf = NULL;
    size_t n = wr->tile_bytes, cap, r;
    cctx_node *c = cctx_get(wr, level);

    TW_ASSERT(wr->o.compression != TW_COMPRESS_DEFLATE || level == wr->clevel);
    if (!c)
        return twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory compressing a tile");
    cap = c->deflate ? libdeflate_zlib_compress_bound(c->deflate, n) : ZSTD_compressBound(n);
    if (!(buf = malloc(cap))) {
        cctx_put(wr, c);
        return twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory compressing a tile");
    }
    if (c->deflate) {
        /* 0 only when the output does not fit, which the bound rules out */
        r = libdeflate_zlib_compress(c->deflate, src, n, buf, cap);
        cctx_put(wr, c);
        if (r == 0) {
            free(buf);
            return twi_error_set(err, TW_E_INTERNAL,
                                 "io.writer: deflate failed (a %zu-byte tile did not fit in "
                                 "%zu bytes)",
                                 n, cap);
        }
    } else {
        r = ZSTD_compressCCtx(c->zstd, buf, cap, src, n, level);
        cctx_put(wr, c);
        if (ZSTD_isError(r)) {
            free(buf);
            return twi_error_set(err, TW_E_INTERNAL, "io.writer: zstd failed (%s)",
                                 ZSTD_getErrorName(r));
        }
    }
    *out_n = r;
    *out = buf;
    return TW_OK;
}

/* LZW and JPEG tiles go through libtiff's codec; the others are appended as they are. */
static bool
libtiff_encodes(const tw_writer *wr)
{
    return wr->o.compression == TW_COMPRESS_LZW || wr->o.compression == TW_COMPRESS_JPEG;
}

static tw_status
append_failed(tw_writer *wr, int level, int64_t idx, tw_error *err)
{
    const wr_level *lv = &wr->levels[level];

    return twi_error_set(err, TW_E_IO,
                         "io.writer: cannot write tile (%" PRId64 ",%" PRId64 ") of level %d "
                         "to '%s' (%s)",
                         idx % lv->tiles_x, idx / lv->tiles_x, level, wr->path, lib_msg(wr));
}

/* Append tile idx of the level being written: `n` bytes of payload (compressed, or the whole
 * padded tile when libtiff encodes). Lock held. */
static tw_status
append_tile(tw_writer *wr, int64_t idx, uint8_t *src, size_t n, tw_error *err)
{
    wr_level *lv = &wr->levels[wr->cur_level];
    tmsize_t r;

    wr->msg[0] = '\0';
    if (libtiff_encodes(wr))
        r = TIFFWriteEncodedTile(wr->tif, (uint32_t)idx, src, (tmsize_t)n);
    else
        r = TIFFWriteRawTile(wr->tif, (uint32_t)idx, src, (tmsize_t)n);
    if (r < 0)
        return append_failed(wr, wr->cur_level, idx, err);
    lv->state[idx] = TILE_WRITTEN;
    lv->n_written++;
    if (wr->io)
        twi_io_add(&wr->io->bytes_written, TIFFGetStrileByteCount(wr->tif, (uint32_t)idx));
    return TW_OK;
}

/* Keep a tile of a level after the current one in the scratch file. Lock held. */
static tw_status
spill_tile(tw_writer *wr, int level, int64_t idx, const uint8_t *src, size_t n, tw_error *err)
{
    wr_level *lv = &wr->levels[level];
    char ebuf[128];
    size_t done = 0;

    if (wr->spill_fd < 0) {
        char *name = NULL;

        /* nameless from the start (or unlinked at once): nothing is left behind */
        if ((wr->spill_fd = twi_out_nameless(wr->dir)) < 0 &&
            (wr->spill_fd = twi_out_beside(wr->dir, wr->path, ".tw-s-", &name)) < 0) {
            int e = errno;

            return twi_error_set(err, TW_E_IO, "io.writer: cannot create a scratch file beside "
                                 "'%s' (%s)", wr->path, twi_io_strerror(e, ebuf, sizeof ebuf));
        }
        if (name)
            unlink(name);
        free(name);
    }
    if (!lv->spill_off) {
        lv->spill_off = malloc((size_t)lv->n_tiles * sizeof *lv->spill_off);
        lv->spill_len = malloc((size_t)lv->n_tiles * sizeof *lv->spill_len);
        if (!lv->spill_off || !lv->spill_len) {
            free(lv->spill_off);
            free(lv->spill_len);
            lv->spill_off = NULL;
            lv->spill_len = NULL;
            return twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
        }
    }
    while (done < n) {
        int64_t k = (int64_t)pwrite(wr->spill_fd, src + done, n - done,
                                    wr->spill_end + (int64_t)done);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : ENOSPC;

            return twi_error_set(err, TW_E_IO, "io.writer: cannot write the scratch file "
                                 "beside '%s' (%s)", wr->path,
                                 twi_io_strerror(e, ebuf, sizeof ebuf));
        }
        done += (size_t)k;
    }
    lv->spill_off[idx] = wr->spill_end;
    lv->spill_len[idx] = (uint32_t)n;
    wr->spill_end += (int64_t)n;
    lv->state[idx] = TILE_SPILLED;
    return TW_OK;
}

/* While the current level is complete: write its directory, set up the next one and copy in
 * the tiles of it kept in the scratch file. Lock held. */
static tw_status
advance(tw_writer *wr, tw_error *err)
{
    tw_status st = TW_OK;
    uint8_t *buf = NULL, *raw = NULL;
    size_t cap = 0;
    char ebuf[128];

    while (wr->cur_level < wr->o.n_levels &&
           wr->levels[wr->cur_level].n_written == wr->levels[wr->cur_level].n_tiles) {
        wr_level *lv;

        wr->msg[0] = '\0';
        if (!TIFFWriteDirectory(wr->tif)) {
            st = twi_error_set(err, TW_E_IO,
                               "io.writer: cannot write the directory of level %d to '%s' (%s)",
                               wr->cur_level, wr->path, lib_msg(wr));
            goto out;
        }
        if (++wr->cur_level == wr->o.n_levels)
            break;
        if ((st = setup_directory(wr, wr->cur_level, err)) != TW_OK)
            goto out;
        lv = &wr->levels[wr->cur_level];
        for (int64_t k = 0; lv->spill_off && k < lv->n_tiles; k++) {
            size_t n, got = 0;

            if (lv->state[k] != TILE_SPILLED)
                continue;
            n = lv->spill_len[k];
            if (n > cap) {
                uint8_t *b = realloc(buf, n);

                if (!b) {
                    st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
                    goto out;
                }
                buf = b;
                cap = n;
            }
            while (got < n) {
                int64_t r = (int64_t)pread(wr->spill_fd, buf + got, n - got,
                                           lv->spill_off[k] + (int64_t)got);

                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0) {
                    st = twi_error_set(err, TW_E_IO, "io.writer: cannot read back the scratch "
                                       "file beside '%s' (%s)", wr->path,
                                       twi_io_strerror(r < 0 ? errno : EIO, ebuf, sizeof ebuf));
                    goto out;
                }
                got += (size_t)r;
            }
            if (libtiff_encodes(wr)) {
                /* kept zstd-packed (tw_writer_write_tile): unpack for libtiff's codec */
                size_t r;

                if (!raw && !(raw = malloc(wr->tile_bytes))) {
                    st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory");
                    goto out;
                }
                r = ZSTD_decompress(raw, wr->tile_bytes, buf, n);
                if (ZSTD_isError(r) || r != wr->tile_bytes) {
                    st = twi_error_set(err, TW_E_IO, "io.writer: the scratch file beside '%s' "
                                       "is corrupt (tile %" PRId64 " of level %d)",
                                       wr->path, k, wr->cur_level);
                    goto out;
                }
                st = append_tile(wr, k, raw, wr->tile_bytes, err);
            } else {
                st = append_tile(wr, k, buf, n, err);
            }
            if (st != TW_OK)
                goto out;
        }
    }
out:
    free(buf);
    free(raw);
    return st;
}

/* The part of an edge tile outside the image, for JPEG: the last column and row repeated.
 * Zeros there would enter the image's pixels near its right and bottom edges through the 8x8
 * DCT blocks and the 2x2 chroma subsampling that straddle the edge (errors of tens of levels,
 * and a dark or tinted fringe in viewers); repeated pixels keep those blocks smooth. */
static void
pad_by_replication(uint8_t *tile, int32_t tw, int32_t th, int64_t in_w, int64_t in_h, size_t px)
{
    const size_t row = (size_t)tw * px;

    for (int64_t r = 0; r < in_h; r++) {
        uint8_t *p = tile + (size_t)r * row;

        for (int64_t x = in_w; x < tw; x++)
            memcpy(p + (size_t)x * px, p + (size_t)(in_w - 1) * px, px);
    }
    for (int64_t r = in_h; r < th; r++)
        memcpy(tile + (size_t)r * row, tile + (size_t)(in_h - 1) * row, row);
}

/* Put a claimed tile back to free (its encode or append failed), so that the caller may retry. */
static void
unclaim(tw_writer *wr, int level, int64_t idx)
{
    pthread_mutex_lock(&wr->lock);
    if (wr->levels[level].state[idx] == TILE_CLAIMED)
        wr->levels[level].state[idx] = TILE_FREE;
    pthread_mutex_unlock(&wr->lock);
}

static void
wr_tile_free(twi_wr_tile *t)
{
    free(t->contig);
    free(t->packed);
    free(t->spill);
    t->contig = t->packed = t->spill = NULL;
    t->src = NULL;
}

tw_status
twi_writer_encode(tw_writer *wr, int level, int64_t tx, int64_t ty, const void *data,
                  size_t stride, twi_wr_tile *t, tw_error *err)
{
    tw_status st = TW_OK;
    wr_level *lv;
    int64_t idx, in_w, in_h, r;

    memset(t, 0, sizeof *t);
    if (!wr || !data)
        return twi_error_set(err, TW_E_INVALID, "io.writer: tw_writer_write_tile: NULL argument");
    if (level < 0 || level >= wr->o.n_levels)
        return twi_error_set(err, TW_E_INVALID, "io.writer: level %d does not exist (%d levels)",
                             level, wr->o.n_levels);
    lv = &wr->levels[level];
    if (tx < 0 || ty < 0 || tx >= lv->tiles_x || ty >= lv->tiles_y)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: tile (%" PRId64 ",%" PRId64
                             ") is outside level %d (%" PRId64 "x%" PRId64 " tiles)",
                             tx, ty, level, lv->tiles_x, lv->tiles_y);
    in_w = lv->w - tx * wr->o.tile_w < wr->o.tile_w ? lv->w - tx * wr->o.tile_w : wr->o.tile_w;
    in_h = lv->h - ty * wr->o.tile_h < wr->o.tile_h ? lv->h - ty * wr->o.tile_h : wr->o.tile_h;
    if (stride < (size_t)in_w * wr->px)
        return twi_error_set(err, TW_E_INVALID,
                             "io.writer: stride %zu is below a row of %" PRId64 " pixels", stride,
                             in_w);
    idx = ty * lv->tiles_x + tx;

    pthread_mutex_lock(&wr->lock);
    if (wr->failed) {
        st = twi_error_set(err, wr->failed, "%s", wr->fail_msg);
    } else if (lv->state[idx] != TILE_FREE) {
        st = twi_error_set(err, TW_E_INVALID,
                           "io.writer: tile (%" PRId64 ",%" PRId64 ") of level %d is written twice",
                           tx, ty, level);
    } else {
        lv->state[idx] = TILE_CLAIMED;
    }
    pthread_mutex_unlock(&wr->lock);
    if (st != TW_OK)
        return st;
    t->level = level;
    t->idx = idx;
    if (wr->io)
        twi_io_add(&wr->io->bytes_encoded, wr->tile_bytes);

    /* Outside the lock: gather the tile (padding edges with zeros) and compress it. libtiff's
     * codecs may change the buffer they encode, so they always get our copy. */
    if (in_w == wr->o.tile_w && in_h == wr->o.tile_h && stride == (size_t)in_w * wr->px &&
        !libtiff_encodes(wr)) {
        t->src = data;
    } else {
        if (!(t->contig = calloc(1, wr->tile_bytes))) {
            st = twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory for a tile");
            goto out;
        }
        for (r = 0; r < in_h; r++)
            memcpy(t->contig + (size_t)r * (size_t)wr->o.tile_w * wr->px,
                   (const uint8_t *)data + (size_t)r * stride, (size_t)in_w * wr->px);
        if (wr->o.compression == TW_COMPRESS_JPEG && (in_w < wr->o.tile_w || in_h < wr->o.tile_h))
            pad_by_replication(t->contig, wr->o.tile_w, wr->o.tile_h, in_w, in_h, wr->px);
        t->src = t->contig;
    }
    if (wr->o.compression == TW_COMPRESS_NONE || libtiff_encodes(wr)) {
        t->n = wr->tile_bytes;
        /* A reduced level's tile usually arrives while an earlier level is still open and
         * waits in the scratch file. LZW and JPEG run in libtiff at append time, so such a
         * tile would wait there raw, a third of the raw slide on disk for a JPEG file a
         * tenth of it: keep it zstd-packed instead (fast level 1, outside the lock). */
        if (libtiff_encodes(wr) && level > 0 &&
            (st = compress_tile(wr, t->src, 1, &t->spill, &t->spill_n, err)) != TW_OK)
            goto out;
    } else {
        if ((st = compress_tile(wr, t->src, wr->clevel, &t->packed, &t->n, err)) != TW_OK)
            goto out;
        t->src = t->packed;
    }
out:
    if (st != TW_OK) {
        unclaim(wr, level, idx);
        wr_tile_free(t);
    }
    return st;
}

tw_status
twi_writer_append(tw_writer *wr, twi_wr_tile *t, tw_error *err)
{
    tw_status st;
    wr_level *lv = &wr->levels[t->level];
    tw_error local;

    if (!err)
        err = &local;
    pthread_mutex_lock(&wr->lock);
    if (wr->failed) {
        st = twi_error_set(err, wr->failed, "%s", wr->fail_msg);
    } else {
        if (t->level > wr->cur_level) {
            st = spill_tile(wr, t->level, t->idx, t->spill ? t->spill : t->src,
                            t->spill ? t->spill_n : t->n, err);
        } else {
            /* TIFFWriteEncodedTile takes a non-const buffer: ours (contig) when it encodes */
            st = append_tile(wr, t->idx, (uint8_t *)(uintptr_t)t->src, t->n, err);
            if (st == TW_OK && lv->n_written == lv->n_tiles)
                st = advance(wr, err);
        }
        if (st != TW_OK) {
            /* libtiff's state is unknown after a failed append or directory, and a level
             * cannot be finished without the tile: refuse everything after */
            wr->failed = st;
            snprintf(wr->fail_msg, sizeof wr->fail_msg, "%s", err->message);
        }
    }
    pthread_mutex_unlock(&wr->lock);
    if (st != TW_OK)
        unclaim(wr, t->level, t->idx);
    wr_tile_free(t);
    return st;
}

void
twi_writer_set_io(tw_writer *wr, twi_io_counts *io)
{
    if (wr)
        wr->io = io;
}

void
twi_writer_tile_discard(tw_writer *wr, twi_wr_tile *t)
{
    if (t->src)
        unclaim(wr, t->level, t->idx);
    wr_tile_free(t);
}

tw_status
tw_writer_write_tile(tw_writer *wr, int level, int64_t tx, int64_t ty, const void *data,
                     size_t stride, tw_error *err)
{
    twi_wr_tile t;
    tw_error local;
    tw_status st;

    /* the message is kept as the sticky failure even when the caller passes no err */
    if (!err)
        err = &local;
    st = twi_writer_encode(wr, level, tx, ty, data, stride, &t, err);
    if (st != TW_OK)
        return st;
    if (!wr->thread_on)
        return twi_writer_append(wr, &t, err);
    /* The writer thread appends it later: a tile still pointing at the caller's pixels gets
     * its own copy (uncompressed output only) */
    if (t.src != t.contig && t.src != t.packed) {
        if (!(t.contig = malloc(t.n))) {
            twi_writer_tile_discard(wr, &t);
            return twi_error_set(err, TW_E_NOMEM, "io.writer: out of memory for a tile");
        }
        memcpy(t.contig, t.src, t.n);
        t.src = t.contig;
    }
    pthread_mutex_lock(&wr->q_lock);
    while (wr->q_n == TWI_WRITER_QUEUE && !wr->q_stop)
        pthread_cond_wait(&wr->q_space, &wr->q_lock);
    if (!wr->q_stop) {
        wr->q[(wr->q_head + wr->q_n) % TWI_WRITER_QUEUE] = t;
        wr->q_n++;
        pthread_cond_signal(&wr->q_ready);
        t.src = NULL;
    }
    pthread_mutex_unlock(&wr->q_lock);
    if (t.src) {
        twi_writer_tile_discard(wr, &t);
        return twi_error_set(err, TW_E_INVALID, "io.writer: tile written after the writer "
                             "was closed");
    }
    /* a failed append of an earlier tile is reported here, as soon as it is known */
    pthread_mutex_lock(&wr->lock);
    st = wr->failed ? twi_error_set(err, wr->failed, "%s", wr->fail_msg) : TW_OK;
    pthread_mutex_unlock(&wr->lock);
    return st;
}

/* The writer thread: appends the encoded tiles in the order they were queued. A failure is
 * sticky in the writer (wr->failed), so the next write and tw_writer_close() report it. */
static void *
writer_thread(void *arg)
{
    tw_writer *wr = arg;

    pthread_mutex_lock(&wr->q_lock);
    for (;;) {
        twi_wr_tile t;
        tw_error err;

        while (wr->q_n == 0 && !wr->q_stop)
            pthread_cond_wait(&wr->q_ready, &wr->q_lock);
        if (wr->q_n == 0)
            break;
        t = wr->q[wr->q_head];
        wr->q_head = (wr->q_head + 1) % TWI_WRITER_QUEUE;
        wr->q_n--;
        pthread_cond_signal(&wr->q_space);
        pthread_mutex_unlock(&wr->q_lock);
        if (wr->q_drop)
            twi_writer_tile_discard(wr, &t);
        else
            (void)twi_writer_append(wr, &t, &err);
        pthread_mutex_lock(&wr->q_lock);
    }
    pthread_mutex_unlock(&wr->q_lock);
    return NULL;
}

tw_status
twi_writer_start_thread(tw_writer *wr, tw_error *err)
{
    int e;

    if (wr->thread_on)
        return TW_OK;
    if ((e = pthread_create(&wr->thread, NULL, writer_thread, wr)) != 0)
        return twi_error_set(err, e == EAGAIN ? TW_E_NOMEM : TW_E_INTERNAL,
                             "io.writer: cannot start the writer thread (error %d)", e);
    wr->thread_on = true;
    return TW_OK;
}

/* Let the writer thread append (or, with drop, discard) what waits, and join it. */
static void
stop_thread(tw_writer *wr, bool drop)
{
    if (!wr->thread_on)
        return;
    pthread_mutex_lock(&wr->q_lock);
    wr->q_stop = true;
    wr->q_drop = wr->q_drop || drop;
    pthread_cond_broadcast(&wr->q_ready);
    pthread_cond_broadcast(&wr->q_space);
    pthread_mutex_unlock(&wr->q_lock);
    pthread_join(wr->thread, NULL);
    wr->thread_on = false;
}

tw_status
tw_writer_close(tw_writer *wr, tw_error *err)
{
    tw_status st = TW_OK;
    char ebuf[128];
    int i, fd;

    if (!wr)
        return twi_error_set(err, TW_E_INVALID, "io.writer: tw_writer_close: NULL writer");
    stop_thread(wr, false);
    if (wr->failed) {
        st = twi_error_set(err, wr->failed, "%s", wr->fail_msg);
        goto fail;
    }
    for (i = 0; i < wr->o.n_levels; i++) {
        const wr_level *lv = &wr->levels[i];
        int64_t k;

        if (lv->n_written == lv->n_tiles)
            continue;
        for (k = 0; k < lv->n_tiles && lv->state[k] == TILE_WRITTEN; k++)
            ;
        st = twi_error_set(err, TW_E_INVALID,
                           "io.writer: tile (%" PRId64 ",%" PRId64 ") of level %d was never "
                           "written (%" PRId64 " of %" PRId64 " tiles of the level missing); "
                           "nothing written to '%s'",
                           k % lv->tiles_x, k / lv->tiles_x, i, lv->n_tiles - lv->n_written,
                           lv->n_tiles, wr->path);
        goto fail;
    }
    /* every directory is written; sync the data before the rename makes it visible */
    wr->msg[0] = '\0';
    fd = TIFFFileno(wr->tif);
    if (!TIFFFlush(wr->tif) || fsync(fd) != 0) {
        int e = errno;

        st = twi_error_set(err, TW_E_IO, "io.writer: cannot write '%s' (%s)", wr->path,
                           wr->msg[0] ? wr->msg : twi_io_strerror(e, ebuf, sizeof ebuf));
        goto fail;
    }
    TIFFClose(wr->tif);
    wr->tif = NULL;
    if (wr->msg[0]) {
        st = twi_error_set(err, TW_E_IO, "io.writer: cannot write '%s' (%s)", wr->path,
                           wr->msg);
        goto fail;
    }
    if (wr->keep_fd >= 0 && twi_out_link(wr->keep_fd, wr->dir, wr->path, &wr->tmp_path) != 0) {
        int e = errno;

        st = twi_error_set(err, TW_E_IO, "io.writer: cannot name the file for '%s' (%s)",
                           wr->path, twi_io_strerror(e, ebuf, sizeof ebuf));
        goto fail;
    }
    if (rename(wr->tmp_path, wr->path) != 0) {
        int e = errno;

        st = twi_error_set(err, TW_E_IO, "io.writer: cannot rename '%s' to '%s' (%s)",
                           wr->tmp_path, wr->path, twi_io_strerror(e, ebuf, sizeof ebuf));
        goto fail;
    }
    free(wr->tmp_path);
    wr->tmp_path = NULL;
    writer_free(wr);
    return TW_OK;
fail:
    writer_discard(wr);
    return st;
}

void
tw_writer_abort(tw_writer *wr)
{
    if (wr)
        writer_discard(wr);
}

/* ---- for the assembler (io_internal.h) */

const tw_writer_opts *
twi_writer_opts(const tw_writer *wr)
{
    return &wr->o;
}

void
twi_writer_level_size(const tw_writer *wr, int level, int64_t *w, int64_t *h)
{
    *w = wr->levels[level].w;
    *h = wr->levels[level].h;
}
