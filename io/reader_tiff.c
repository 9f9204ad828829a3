/* SPDX-License-Identifier: MIT */
/* tilewave: the libtiff reader: plain TIFF/BigTIFF, tiled or striped, samples kept as stored. */
/* Why one file: one libtiff backend behind the reader vtable (OpenSlide's vendor files are
 * as long); its parts (the message handler per handle, our own directory walk, the layout
 * checks, channels) share the handle's private struct, which no other file should see. */

/*
 * Levels. Directory 0 is level 0; then the SubIFDs of directory 0, in order (OME-TIFF,
 * vips --subifd and tifffile subifds= pyramids keep their reduced levels there); then each
 * later directory of the main chain. Each of those with the same sample layout (samples,
 * bits, sample format, photometric, tiled or striped) and a strictly smaller size than the
 * last level is the next level. Anything else (a thumbnail of another layout, a label, a mask,
 * the other channels or planes of an OME-TIFF) is skipped.
 *
 * Codecs. What libtiff decodes, and Aperio's JPEG 2000 (compressions 33003 and 33005, which
 * libtiff does not know): the tile's raw bytes are read with libtiff and decoded with OpenJPEG
 * (io/codec_j2k.c), as OpenSlide does.
 *
 * Checks at open. Before libtiff sees the file we walk the chain of directories ourselves and
 * check each lies inside the file, then check that every tile or strip of every level ends
 * inside the file, so that a truncated file is reported at open, naming what is missing,
 * rather than as a decode error in the middle of a job.
 *
 * Threads. A libtiff handle is not thread-safe and carries a current directory, so we keep a
 * pool: a reading thread takes a free handle (or opens a new one), selects the level's
 * directory if needed, decodes, and gives the handle back. The pool grows to the number of
 * threads that read at once. Each handle has its own libtiff error handler (TIFFOpenExt with
 * TIFFOpenOptions) that keeps libtiff's first message for our error: libtiff never prints,
 * and nothing process-wide (TIFFSetErrorHandler) is touched.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

#include "io_internal.h"

/* More directories than any pyramid has; bounds the walk of a corrupt, looping chain. */
#define MAX_DIRS 4096

typedef struct tiff_level {
    tdir_t dir;          /* directory number (of the main chain; the parent of a SubIFD) */
    uint64_t subifd;     /* file offset of the SubIFD that holds the level, 0: directory `dir` */
    uint16_t compression;
    int64_t w, h;        /* pixels */
    bool tiled;
    uint32_t tw, th;     /* tile size; strips: width x rows per strip */
    uint32_t n_across;   /* tiles per row (1 for strips) */
    uint32_t n_striles;  /* tiles or strips */
    int n_pages;         /* channels as pages: this directory and the n_pages - 1 after it,
                            of the same size, layout and subfile type (qptiff, OME planes);
                            else 1 */
    uint32_t subfile;    /* its SubfileType */
    size_t strile_bytes; /* decoded bytes of a full tile or strip */
    /* Decodes of each tile or strip while reads are counted (twi_slide_set_io): 0, 1, 2 =
     * more than once; made at the first counted decode (under the reader's lock). */
    _Atomic(atomic_uchar *) decodes;
    /* Tiles or strips filled as bad (io.on_bad_tile=fill), each counted once: made at the
     * first (under the reader's lock). */
    _Atomic(atomic_uchar *) bad;
} tiff_level;

typedef struct tiff_handle {
    TIFF *tif;
    const char *path;         /* the reader's; libtiff often uses it as the "module" */
    int level;                /* level whose directory is selected, -1 none */
    uint8_t *scratch;         /* one decoded tile or strip */
    size_t scratch_bytes;
    uint8_t *raw;             /* one compressed JPEG 2000 tile (io/codec_j2k.c) */
    size_t raw_bytes;
    char msg[256];            /* libtiff's first error since the last clear */
    char wmsg[256];           /* libtiff's first warning since the last clear */
    unsigned warnings;        /* libtiff warnings so far (corrupt data while decoding) */
    /* What `scratch` holds: tile or strip cached_idx of level cached_level, decoded cleanly
     * (cached_level -1: nothing). A region read that needs it again (the next tile of a
     * striped file, a processing tile that shares the file tile) does not decode it again. */
    int cached_level;
    uint32_t cached_idx;
    struct tiff_handle *next; /* free list */
} tiff_handle;

typedef struct tiff_reader {
    char *path;
    int spp;                  /* samples per pixel in the file (an alpha sample included) */
    size_t sample_bytes;
    bool jpeg_rgb;            /* YCbCr: JPEG levels decoded to RGB by libjpeg */
    /* The channel read (tw_slide_set_channel): a page after each level's directory (page), or
     * a sample of each pixel (sample_off bytes in); 0 without channels. */
    int page;
    size_t sample_off;
    int n_levels;
    tiff_level *levels;
    pthread_mutex_t lock;     /* guards free_list */
    bool lock_init;
    tiff_handle *free_list;
    /* Levels of tiles or strips over TWI_IO_SHARED_STRILE_BYTES decoded are read through this
     * one handle, under shared_lock: one buffer of that size per reader, not one per reading
     * thread, and a tile decoded once serves every region read that overlaps it (a 32768^2
     * 16-bit tile is 2 GiB: 4.3 GB RSS with two workers before issue 26). */
    pthread_mutex_t shared_lock;
    bool shared_lock_init;
    tiff_handle *shared;
} tiff_reader;

/* ---- libtiff's messages, per handle */

static int
on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    tiff_handle *h = user;

    (void)tif;
    if (h)
        twi_tiff_keep_message(h->msg, sizeof h->msg, h->path, module, fmt, ap);
    return 1; /* handled: the global handlers are not called */
}

static int
on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    tiff_handle *h = user;

    va_list copy;

    (void)tif;
    if (h) {
        h->warnings++;
        va_copy(copy, ap);
        twi_tiff_keep_message(h->wmsg, sizeof h->wmsg, h->path, module, fmt, copy);
        va_end(copy);
    }
    twi_tiff_log_warning("io.tiff", module, fmt, ap);
    return 1;
}

static const char *
handle_msg(const tiff_handle *h)
{
    return h->msg[0] ? h->msg : "no message from libtiff";
}

static void
handle_close(tiff_handle *h)
{
    if (!h)
        return;
    if (h->tif)
        TIFFClose(h->tif);
    free(h->scratch);
    free(h->raw);
    free(h);
}

static tw_status
handle_open(tiff_reader *r, tiff_handle **out, tw_error *err)
{
    tw_status st = TW_OK;
    tiff_handle *h = NULL;
    TIFFOpenOptions *opts = NULL;

    if (!(h = calloc(1, sizeof *h)) || !(opts = TIFFOpenOptionsAlloc())) {
        st = twi_error_set(err, TW_E_NOMEM, "io.tiff: out of memory opening '%s'", r->path);
        goto out;
    }
    h->level = -1;
    h->cached_level = -1;
    h->path = r->path;
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, h);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, h);
    /* "m": no memory mapping, so a file that shrinks under us gives a read error, not
     * SIGBUS. libtiff copies the handlers out of opts. */
    if (!(h->tif = TIFFOpenExt(r->path, "rm", opts))) {
        st = twi_error_set(err, TW_E_FORMAT, "io.tiff: cannot read '%s' (%s)", r->path,
                           handle_msg(h));
        goto out;
    }
    *out = h;
    h = NULL;
out:
    TIFFOpenOptionsFree(opts);
    handle_close(h);
    return st;
}

static tw_status
handle_select(tiff_reader *r, tiff_handle *h, int level, tw_error *err)
{
    if (h->level == level)
        return TW_OK;
    const tdir_t dir = (tdir_t)(r->levels[level].dir + (tdir_t)r->page);

    h->level = -1;
    h->msg[0] = '\0';
    if (r->levels[level].subifd) {
        /* SubIFD levels hold no channel pages (finish_channels keeps only levels with all) */
        if (!TIFFSetSubDirectory(h->tif, r->levels[level].subifd))
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: cannot read the SubIFD at byte %" PRIu64
                                 " of '%s' (%s)",
                                 r->levels[level].subifd, r->path, handle_msg(h));
    } else if (!TIFFSetDirectory(h->tif, dir)) {
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: cannot read directory %u of '%s' (%s)",
                             (unsigned)dir, r->path, handle_msg(h));
    }
    /* a pseudo-tag reset with every directory */
    if (r->jpeg_rgb && r->levels[level].compression == COMPRESSION_JPEG &&
        !TIFFSetField(h->tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB))
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: cannot decode JPEG as RGB in '%s' (%s)",
                             r->path, handle_msg(h));
    /* the level's size, not the largest of any level: only the shared handle holds a tile
     * of a level read through it */
    if (h->scratch_bytes < r->levels[level].strile_bytes) {
        const size_t need = r->levels[level].strile_bytes;
        uint8_t *p = NULL;

        /* no realloc: the old contents are not needed, and both at once could be 2 x 2 GiB */
        free(h->scratch);
        h->scratch = NULL;
        h->scratch_bytes = 0;
        h->cached_level = -1;
        if (!(p = malloc(need)))
            return twi_error_set(err, TW_E_NOMEM,
                                 "io.tiff: out of memory for a %zu-byte tile of '%s'", need,
                                 r->path);
        h->scratch = p;
        h->scratch_bytes = need;
    }
    h->level = level;
    return TW_OK;
}

static tw_status
handle_acquire(tiff_reader *r, tiff_handle **out, tw_error *err)
{
    tiff_handle *h;

    pthread_mutex_lock(&r->lock);
    h = r->free_list;
    if (h)
        r->free_list = h->next;
    pthread_mutex_unlock(&r->lock);
    if (h) {
        h->next = NULL;
        *out = h;
        return TW_OK;
    }
    return handle_open(r, out, err);
}

static void
handle_release(tiff_reader *r, tiff_handle *h)
{
    pthread_mutex_lock(&r->lock);
    h->next = r->free_list;
    r->free_list = h;
    pthread_mutex_unlock(&r->lock);
}

/* ---- our own walk of the directory chain, to report truncation before libtiff does */

typedef struct raw_file {
    int fd;
    uint64_t size;
    bool big;    /* BigTIFF */
    bool motor;  /* big-endian ("MM") */
} raw_file;

static bool
raw_read(const raw_file *f, uint64_t off, void *buf, size_t n)
{
    uint8_t *p = buf;

    if (off > f->size || n > f->size - off)
        return false;
    while (n > 0) {
        int64_t got = pread(f->fd, p, n, (int64_t)off);

        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        p += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
    return true;
}

static uint64_t
raw_uint(const raw_file *f, const uint8_t *b, int n)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < n; i++)
        v |= (uint64_t)b[f->motor ? n - 1 - i : i] << (8 * i);
    return v;
}

/* The tile grid a directory claims, from its raw entries (inline SHORT / LONG / LONG8 values):
 * libtiff refuses more tiles than a 32-bit tile number reaches with only "Integer overflow",
 * so say it in the slide's terms first. */
static tw_status
check_tile_grid(const raw_file *f, const char *path, int d, const uint8_t *entries,
                uint64_t count, tw_error *err)
{
    const uint64_t entry = f->big ? 20 : 12;
    uint64_t w = 0, h = 0, tw = 0, th = 0, spp = 1, planar = 1, tiles;

    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *e = entries + i * entry;
        unsigned tag, type;
        uint64_t n, v;

        tag = (unsigned)raw_uint(f, e, 2);
        type = (unsigned)raw_uint(f, e + 2, 2);
        n = raw_uint(f, e + 4, f->big ? 8 : 4);
        if (n != 1 || (type != 3 && type != 4 && type != 16) || (type == 16 && !f->big))
            continue;
        v = raw_uint(f, e + (f->big ? 12 : 8), type == 3 ? 2 : type == 4 ? 4 : 8);
        switch (tag) {
        case 256: w = v; break;
        case 257: h = v; break;
        case 277: spp = v; break;
        case 284: planar = v; break;
        case 322: tw = v; break;
        case 323: th = v; break;
        default: break;
        }
    }
    if (!w || !h || !tw || !th || tw > UINT32_MAX || th > UINT32_MAX)
        return TW_OK; /* not tiled, or libtiff's own checks name the problem */
    tiles = ((w + tw - 1) / tw) * ((h + th - 1) / th);
    if (planar == 2 && spp > 1)
        tiles = tiles > UINT64_MAX / spp ? UINT64_MAX : tiles * spp;
    if (tiles > UINT32_MAX)
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: directory %d of '%s' claims %" PRIu64 "x%" PRIu64
                             " pixels in %" PRIu64 "x%" PRIu64 " tiles: %" PRIu64
                             " tiles, more than a TIFF can number (2^32 - 1)",
                             d, path, w, h, tw, th, tiles);
    return TW_OK;
}

/* Count the directories and check each lies inside the file. */
static tw_status
walk_directories(const char *path, int *n_dirs, tw_error *err)
{
    tw_status st = TW_OK;
    raw_file f = {.fd = -1};
    uint8_t b[16];
    struct stat sb;
    uint64_t off, count, entry, end;
    char ebuf[128];
    uint8_t *dir = NULL;
    size_t dir_cap = 0, need;
    uint64_t *seen = NULL; /* offsets of the directories so far, to name a loop */
    int n = 0;

    if ((f.fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(f.fd, &sb) != 0) {
        int e = errno;
        st = twi_error_set(err, TW_E_IO, "io.tiff: cannot open '%s' (%s)", path,
                           twi_io_strerror(e, ebuf, sizeof ebuf));
        goto out;
    }
    f.size = (uint64_t)sb.st_size;
    if (!raw_read(&f, 0, b, 8)) {
        st = twi_error_set(err, TW_E_FORMAT, "io.tiff: '%s' is truncated (no TIFF header)", path);
        goto out;
    }
    f.motor = b[0] == 'M';
    f.big = raw_uint(&f, b + 2, 2) == 43;
    if (f.big) {
        if (!raw_read(&f, 8, b + 8, 8)) {
            st = twi_error_set(err, TW_E_FORMAT,
                               "io.tiff: '%s' is truncated (no BigTIFF header)", path);
            goto out;
        }
        off = raw_uint(&f, b + 8, 8);
    } else {
        off = raw_uint(&f, b + 4, 4);
    }
    entry = f.big ? 20 : 12;
    if (!(seen = malloc(MAX_DIRS * sizeof *seen))) {
        st = twi_error_set(err, TW_E_NOMEM, "io.tiff: out of memory opening '%s'", path);
        goto out;
    }
    while (off != 0 && n < MAX_DIRS) {
        for (int k = 0; k < n; k++)
            if (seen[k] == off) {
                st = twi_error_set(err, TW_E_FORMAT,
                                   "io.tiff: directory %d of '%s' points back to directory %d "
                                   "(a loop)",
                                   n - 1, path, k);
                goto out;
            }
        seen[n] = off;
        /* count, entries, next offset */
        if (!raw_read(&f, off, b, f.big ? 8 : 2)) {
            st = twi_error_set(err, TW_E_FORMAT,
                               "io.tiff: '%s' is truncated (directory %d starts at byte %" PRIu64
                               ", the file has %" PRIu64 ")",
                               path, n, off, f.size);
            goto out;
        }
        count = raw_uint(&f, b, f.big ? 8 : 2);
        end = off + (f.big ? 8 : 2) + count * entry;
        /* the entries and the next directory's offset, in one read (at most 1.3 MB, and
         * only once the file is known to hold them) */
        need = (size_t)(count * entry) + (f.big ? 8 : 4);
        if (count > 65535 || end > f.size || f.size - end < (f.big ? 8 : 4)) {
            st = twi_error_set(err, TW_E_FORMAT,
                               "io.tiff: '%s' is truncated (directory %d ends at byte %" PRIu64
                               ", the file has %" PRIu64 ")",
                               path, n, end + (f.big ? 8 : 4), f.size);
            goto out;
        }
        if (need > dir_cap) {
            uint8_t *grown = realloc(dir, need);

            if (!grown) {
                st = twi_error_set(err, TW_E_NOMEM,
                                   "io.tiff: out of memory reading directory %d of '%s'", n, path);
                goto out;
            }
            dir = grown;
            dir_cap = need;
        }
        if (!raw_read(&f, off + (f.big ? 8 : 2), dir, need)) {
            st = twi_error_set(err, TW_E_IO, "io.tiff: cannot read directory %d of '%s'", n,
                               path);
            goto out;
        }
        if ((st = check_tile_grid(&f, path, n, dir, count, err)) != TW_OK)
            goto out;
        off = raw_uint(&f, dir + count * entry, f.big ? 8 : 4);
        n++;
    }
    *n_dirs = n;
out:
    free(seen);
    free(dir);
    if (f.fd >= 0)
        close(f.fd);
    return st;
}

/* ---- layout checks */

static const char *
photometric_name(uint16_t p)
{
    switch (p) {
    case PHOTOMETRIC_MINISWHITE: return "min-is-white";
    case PHOTOMETRIC_MINISBLACK: return "min-is-black";
    case PHOTOMETRIC_RGB: return "rgb";
    case PHOTOMETRIC_PALETTE: return "palette";
    case PHOTOMETRIC_MASK: return "transparency mask";
    case PHOTOMETRIC_SEPARATED: return "separated (CMYK)";
    case PHOTOMETRIC_YCBCR: return "ycbcr";
    case PHOTOMETRIC_CIELAB: return "cielab";
    case PHOTOMETRIC_ICCLAB: return "icclab";
    case PHOTOMETRIC_ITULAB: return "itulab";
    case PHOTOMETRIC_LOGL: return "logl";
    case PHOTOMETRIC_LOGLUV: return "logluv";
    }
    return "unknown";
}

/* The sample layout of the current directory; levels must all share it. */
typedef struct tiff_layout {
    uint16_t spp, bps, fmt, photometric, planar, compression;
    bool tiled;
} tiff_layout;

static bool
read_layout(TIFF *tif, tiff_layout *l)
{
    memset(l, 0, sizeof *l);
    if (!TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &l->spp) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &l->bps) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &l->fmt) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &l->planar) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &l->compression))
        return false;
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &l->photometric))
        l->photometric = 0xffff;
    l->tiled = TIFFIsTiled(tif) != 0;
    return true;
}

static bool
same_layout(const tiff_layout *a, const tiff_layout *b)
{
    return a->spp == b->spp && a->bps == b->bps && a->fmt == b->fmt &&
           a->photometric == b->photometric && a->planar == b->planar && a->tiled == b->tiled;
}

/* Whether a directory of layout l is read: libtiff decodes its compression, or it is Aperio's
 * JPEG 2000 (tiled, three 8-bit samples) that io/codec_j2k.c decodes. */
static bool
can_decode(const tiff_layout *l)
{
    if (twi_is_aperio_j2k(l->compression))
        return l->tiled && l->spp == 3 && l->bps == 8 && l->fmt == SAMPLEFORMAT_UINT &&
               l->planar == PLANARCONFIG_CONTIG;
    if (l->photometric == PHOTOMETRIC_YCBCR && l->compression != COMPRESSION_JPEG)
        return false;
    return TIFFIsCODECConfigured(l->compression) != 0;
}

/* What level 0's layout reads as; TW_E_FORMAT naming the first unsupported property. */
static tw_status
check_layout(tw_slide *s, tiff_reader *r, const tiff_layout *l, tw_error *err)
{
    const char *p = r->path;
    const bool j2k = twi_is_aperio_j2k(l->compression);

    /* before the photometric: such files are YCbCr, which is not what is wrong with them */
    if (l->compression == COMPRESSION_OJPEG)
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: old-style JPEG (compression 6) is not supported ('%s'; "
                             "rewrite it with new-style JPEG, compression 7)",
                             p);
    if (l->photometric == 0xffff)
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: no photometric interpretation in '%s'",
                             p);
    if (j2k && (l->photometric != PHOTOMETRIC_RGB && l->photometric != PHOTOMETRIC_YCBCR))
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: unsupported photometric %s for JPEG 2000 in '%s'",
                             photometric_name(l->photometric), p);
    if (j2k && !can_decode(l))
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: unsupported JPEG 2000 layout (%s, %u samples of %u bits) "
                             "in '%s'",
                             l->tiled ? "tiled" : "striped", (unsigned)l->spp, (unsigned)l->bps,
                             p);
    if (l->photometric != PHOTOMETRIC_MINISBLACK && l->photometric != PHOTOMETRIC_RGB &&
        !(l->photometric == PHOTOMETRIC_YCBCR && (l->compression == COMPRESSION_JPEG || j2k)))
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: unsupported photometric %s in '%s'",
                             l->photometric == PHOTOMETRIC_YCBCR ? "ycbcr without JPEG"
                                                                 : photometric_name(l->photometric),
                             p);
    if (l->spp > 1 && l->planar == PLANARCONFIG_SEPARATE)
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: unsupported planar configuration separate in '%s'", p);
    if (l->bps != 8 && l->bps != 16 && l->bps != 32 &&
        !(l->bps == 64 && l->fmt == SAMPLEFORMAT_UINT && l->spp == 1))
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: unsupported bits per sample %u in '%s'",
                             (unsigned)l->bps, p);
    if (l->fmt != SAMPLEFORMAT_UINT && l->fmt != SAMPLEFORMAT_IEEEFP)
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: unsupported sample format %s in '%s'",
                             l->fmt == SAMPLEFORMAT_INT ? "signed integer" : "other", p);
    if (l->fmt == SAMPLEFORMAT_IEEEFP && (l->bps != 32 || l->photometric != PHOTOMETRIC_MINISBLACK))
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: unsupported floating-point layout (%u bits, %u samples) "
                             "in '%s'",
                             (unsigned)l->bps, (unsigned)l->spp, p);
    if (!can_decode(l))
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: unsupported compression %u in '%s'",
                             (unsigned)l->compression, p);

    if (l->photometric == PHOTOMETRIC_MINISBLACK) {
        /* 2 samples of u32: the (row, column) pairs tilewave writes for EDT indices; other
         * gray samples are channels (fluorescence), one read at a time */
        const bool pairs = l->spp == 2 && l->bps == 32 && l->fmt == SAMPLEFORMAT_UINT;

        if (l->spp != 1 && !pairs && l->bps != 8 && l->bps != 16)
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: unsupported samples per pixel %u for gray in '%s'",
                                 (unsigned)l->spp, p);
        s->channels = pairs ? 2 : 1;
        if (l->spp > 1 && !pairs)
            s->n_channels = l->spp;
        s->type = l->fmt == SAMPLEFORMAT_IEEEFP ? TW_F32
                  : l->bps == 8                 ? TW_U8
                  : l->bps == 16                ? TW_U16
                  : l->bps == 64                ? TW_U64
                                                : TW_U32;
    } else {
        /* RGB, or YCbCr JPEG that libjpeg converts to RGB; a 4th sample (alpha) is dropped */
        if (l->spp != 3 && l->spp != 4)
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: unsupported samples per pixel %u for RGB in '%s'",
                                 (unsigned)l->spp, p);
        if (l->bps == 32)
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: unsupported bits per sample 32 for RGB in '%s'", p);
        if (l->photometric == PHOTOMETRIC_YCBCR && !j2k && (l->bps != 8 || l->spp != 3))
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: unsupported YCbCr JPEG layout (%u bits, %u samples) "
                                 "in '%s'",
                                 (unsigned)l->bps, (unsigned)l->spp, p);
        s->channels = 3;
        s->type = l->bps == 8 ? TW_U8 : TW_U16;
        r->jpeg_rgb = l->photometric == PHOTOMETRIC_YCBCR;
    }
    r->spp = l->spp;
    r->sample_bytes = tw_sample_size(s->type);
    return TW_OK;
}

/* Geometry of the current directory as a level: TW_OK, or TW_E_FORMAT naming what makes it
 * unusable (a zero size, a tile or strip decoding to more than TWI_IO_MAX_STRILE_BYTES, a
 * tile count that does not match the size). */
static tw_status
read_geometry(TIFF *tif, tiff_reader *r, int dir, tiff_level *lv, tw_error *err)
{
    uint32_t w = 0, h = 0, tw = 0, th = 0, rps = 0;
    uint64_t row_bytes, expect;

    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h) ||
        w == 0 || h == 0)
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: bad image size %ux%u in directory %d of '%s'", (unsigned)w,
                             (unsigned)h, dir, r->path);
    lv->w = w;
    lv->h = h;
    lv->tiled = TIFFIsTiled(tif) != 0;
    if (lv->tiled) {
        if (!TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw) ||
            !TIFFGetField(tif, TIFFTAG_TILELENGTH, &th) || tw == 0 || th == 0)
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: bad tile size %ux%u in directory %d of '%s'",
                                 (unsigned)tw, (unsigned)th, dir, r->path);
        lv->tw = tw;
        lv->th = th;
        lv->n_across = (uint32_t)((w + (uint64_t)tw - 1) / tw);
        lv->n_striles = TIFFNumberOfTiles(tif);
    } else {
        if (!TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps) || rps == 0)
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: bad rows per strip 0 in directory %d of '%s'", dir,
                                 r->path);
        lv->tw = w;
        lv->th = rps < h ? rps : h;
        lv->n_across = 1;
        lv->n_striles = TIFFNumberOfStrips(tif);
    }
    /* decoded layout: rows of tw pixels of spp samples (JPEG YCbCr comes out as RGB); each
     * factor is below 2^32, so the first product cannot overflow */
    row_bytes = (uint64_t)lv->tw * (uint64_t)r->spp * r->sample_bytes;
    if (row_bytes > TWI_IO_MAX_STRILE_BYTES || row_bytes * lv->th > TWI_IO_MAX_STRILE_BYTES)
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: %s of %ux%u pixels in directory %d of '%s' is too large "
                             "(more than %llu MiB decoded)",
                             lv->tiled ? "tile" : "strip", (unsigned)lv->tw, (unsigned)lv->th,
                             dir, r->path, (unsigned long long)(TWI_IO_MAX_STRILE_BYTES >> 20));
    lv->strile_bytes = (size_t)(row_bytes * lv->th);
    expect = (((uint64_t)h + lv->th - 1) / lv->th) * lv->n_across;
    if (lv->n_striles != expect)
        return twi_error_set(err, TW_E_FORMAT,
                             "io.tiff: %u %s in directory %d of '%s', a %ux%u image needs "
                             "%llu",
                             (unsigned)lv->n_striles, lv->tiled ? "tiles" : "strips", dir,
                             r->path, (unsigned)w, (unsigned)h, (unsigned long long)expect);
    return TW_OK;
}

/* Where a tile or strip at `off` of `n` bytes ends, for a message: "ends at byte E", or, when
 * off + n does not fit in 64 bits, "starts at byte OFF" (a BigTIFF offset of 2^64 - 1 once
 * read "ends at byte 255": the sum wrapped). */
static const char *
strile_end(char *buf, size_t size, uint64_t off, uint64_t n)
{
    if (n > UINT64_MAX - off)
        snprintf(buf, size, "starts at byte %" PRIu64 " and claims %" PRIu64 " bytes", off, n);
    else if (n == 0)
        snprintf(buf, size, "starts at byte %" PRIu64, off);
    else
        snprintf(buf, size, "ends at byte %" PRIu64, off + n);
    return buf;
}

/* Every tile or strip of the current directory must end inside the file. */
static tw_status
check_striles(TIFF *tif, tiff_reader *r, int level, uint64_t file_size, tw_error *err)
{
    const tiff_level *lv = &r->levels[level];
    uint16_t compression = COMPRESSION_NONE;
    bool uncompressed;
    uint32_t i;

    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    uncompressed = compression == COMPRESSION_NONE;
    for (i = 0; i < lv->n_striles; i++) {
        uint64_t off = TIFFGetStrileOffset(tif, i);
        uint64_t n = TIFFGetStrileByteCount(tif, i);

        if (off == 0 && n == 0)
            continue; /* sparse: reads as zeros */
        if (off > file_size || n > file_size - off) {
            char where[96];

            return twi_error_set(err, TW_E_FORMAT,
                                 "io.tiff: '%s' is truncated (%s %u of level %d %s, the file has "
                                 "%" PRIu64 ")",
                                 r->path, lv->tiled ? "tile" : "strip", i, level,
                                 strile_end(where, sizeof where, off, n), file_size);
        }
        if (uncompressed) {
            /* stored as is: the bytes must all be there (a last strip has fewer rows) */
            uint64_t rows = lv->th;

            if (!lv->tiled && i == lv->n_striles - 1)
                rows = (uint64_t)lv->h - (uint64_t)i * lv->th;
            if (n < rows * (lv->strile_bytes / lv->th))
                return twi_error_set(err, TW_E_FORMAT,
                                     "io.tiff: %s %u of level %d of '%s' has %" PRIu64
                                     " bytes, uncompressed it needs %" PRIu64,
                                     lv->tiled ? "tile" : "strip", i, level, r->path, n,
                                     rows * (lv->strile_bytes / lv->th));
        }
    }
    return TW_OK;
}

static tw_status
add_string_prop(tw_slide *s, TIFF *tif, uint32_t tag, const char *name)
{
    const char *v = NULL;

    if (TIFFGetField(tif, tag, &v) && v)
        return twi_slide_set_property(s, name, v);
    return TW_OK;
}

static tw_status
read_properties(tw_slide *s, TIFF *tif)
{
    static const struct {
        uint32_t tag;
        const char *name;
    } strs[] = {
        {TIFFTAG_IMAGEDESCRIPTION, "tiff.ImageDescription"},
        {TIFFTAG_MAKE, "tiff.Make"},
        {TIFFTAG_MODEL, "tiff.Model"},
        {TIFFTAG_SOFTWARE, "tiff.Software"},
        {TIFFTAG_DATETIME, "tiff.DateTime"},
        {TIFFTAG_ARTIST, "tiff.Artist"},
        {TIFFTAG_HOSTCOMPUTER, "tiff.HostComputer"},
        {TIFFTAG_COPYRIGHT, "tiff.Copyright"},
    };
    tw_status st;
    float xres = 0, yres = 0;
    uint16_t unit = RESUNIT_INCH; /* the TIFF default when the tag is absent */
    bool has_unit;
    char buf[64];
    size_t i;

    for (i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if ((st = add_string_prop(s, tif, strs[i].tag, strs[i].name)) != TW_OK)
            return st;
    has_unit = TIFFGetField(tif, TIFFTAG_RESOLUTIONUNIT, &unit) != 0;
    if (!has_unit)
        unit = RESUNIT_INCH;
    if (TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xres)) {
        snprintf(buf, sizeof buf, "%.10g", (double)xres);
        if ((st = twi_slide_set_property(s, "tiff.XResolution", buf)) != TW_OK)
            return st;
    }
    if (TIFFGetField(tif, TIFFTAG_YRESOLUTION, &yres)) {
        snprintf(buf, sizeof buf, "%.10g", (double)yres);
        if ((st = twi_slide_set_property(s, "tiff.YResolution", buf)) != TW_OK)
            return st;
    }
    if (has_unit &&
        (st = twi_slide_set_property(s, "tiff.ResolutionUnit",
                                     unit == RESUNIT_CENTIMETER ? "centimeter"
                                     : unit == RESUNIT_INCH     ? "inch"
                                                                : "none")) != TW_OK)
        return st;
    /* The pixel size: the vendor's metadata first (Aperio's MPP, OME's PhysicalSize), else
     * the resolution tags in centimetres (first for tilewave's own outputs, whose tags are
     * exact and may differ in x and y). Tags in inches (or without a unit) are what image
     * editors write by default (72, 96, 300 dpi: 353, 265, 85 um per pixel) and say nothing of
     * a microscope, nor do those values in centimetres: the size stays unknown (docs/io.md,
     * "Resolution and metadata"). */
    {
        const char *desc = NULL;
        twi_meta m;

        TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &desc);
        if ((st = twi_meta_from_description(s, desc, &m)) != TW_OK)
            return st;
        s->objective_power = m.objective_power;
        if (m.mpp_x > 0 && m.mpp_y > 0 && !m.own) {
            s->mpp_x = m.mpp_x;
            s->mpp_y = m.mpp_y;
        } else if (!(has_unit && unit == RESUNIT_CENTIMETER &&
                     twi_meta_mpp_from_cm((double)xres, (double)yres, &s->mpp_x, &s->mpp_y))) {
            /* tilewave's MPP item (one value) when its tags are gone */
            s->mpp_x = m.mpp_x;
            s->mpp_y = m.mpp_y;
        } else {
            twi_meta_exact_own_mpp(&m, &s->mpp_x, &s->mpp_y);
        }
    }
    return TW_OK;
}

/* ---- for other backends */

/* check_striles() for a directory another library will decode: every tile or strip ends
 * inside the file, and an uncompressed one holds all its bytes (otherwise OpenSlide's libtiff
 * prints to stderr and fails with a message that names neither). */
static tw_status
precheck_striles(TIFF *tif, const char *path, const char *domain, int dir, uint64_t file_size,
                 tw_error *err)
{
    uint16_t compression = COMPRESSION_NONE;
    uint32_t h = 0, rps = 0, n;
    bool tiled = TIFFIsTiled(tif) != 0;

    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
    n = tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t off = TIFFGetStrileOffset(tif, i), bytes = TIFFGetStrileByteCount(tif, i), need;

        if (off == 0 && bytes == 0)
            continue; /* sparse */
        if (off > file_size || bytes > file_size - off) {
            char where[96];

            return twi_error_set(err, TW_E_FORMAT,
                                 "%s: '%s' is truncated (%s %u of directory %d %s, the file has "
                                 "%" PRIu64 ")",
                                 domain, path, tiled ? "tile" : "strip", i, dir,
                                 strile_end(where, sizeof where, off, bytes), file_size);
        }
        if (compression != COMPRESSION_NONE)
            continue;
        if (tiled) {
            need = TIFFTileSize64(tif);
        } else {
            /* rows of this strip: the last of a plane may be short */
            uint64_t r = rps == 0 || rps > h ? h : rps, per_plane = r ? (h + r - 1) / r : 1;
            uint64_t first = (uint64_t)i % (per_plane ? per_plane : 1) * r;

            need = TIFFVStripSize64(tif, (uint32_t)(h - first < r ? h - first : r));
        }
        if (bytes < need)
            return twi_error_set(err, TW_E_FORMAT,
                                 "%s: %s %u of directory %d of '%s' has %" PRIu64 " bytes, "
                                 "uncompressed it needs %" PRIu64,
                                 domain, tiled ? "tile" : "strip", i, dir, path, bytes, need);
    }
    return TW_OK;
}

tw_status
twi_tiff_precheck(const char *path, const char *domain, size_t px_bytes,
                  uint64_t max_tile_bytes, tw_error *err)
{
    tw_status st = TW_OK;
    tiff_handle h = {.level = -1, .path = path};
    TIFFOpenOptions *opts = NULL;
    unsigned char hdr[4] = {0};
    struct stat sb;
    uint64_t file_size = UINT64_MAX; /* unknown: no strile is found beyond it */
    tw_error werr = {0};
    int n_dirs = 0, fd;
    uint32_t w0 = 0, h0 = 0;
    uint64_t prev_across = 0, prev_down = 0;
    int prev_dir = -1;
    int64_t got;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return TW_OK; /* the backend reports it */
    got = read(fd, hdr, sizeof hdr);
    if (fstat(fd, &sb) == 0)
        file_size = (uint64_t)sb.st_size;
    close(fd);
    if (got != 4 ||
        !((hdr[0] == 'I' && hdr[1] == 'I' && (hdr[2] == 42 || hdr[2] == 43) && hdr[3] == 0) ||
          (hdr[0] == 'M' && hdr[1] == 'M' && hdr[2] == 0 && (hdr[3] == 42 || hdr[3] == 43))))
        return TW_OK;
    if (walk_directories(path, &n_dirs, &werr) != TW_OK) {
        const char *m = strncmp(werr.message, "io.tiff: ", 9) == 0 ? werr.message + 9
                                                                    : werr.message;

        return twi_error_set(err, werr.status, "%s: %s", domain, m);
    }
    if (!(opts = TIFFOpenOptionsAlloc()))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory opening '%s'", domain, path);
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, &h);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, &h);
    if (!(h.tif = TIFFOpenExt(path, "rm", opts))) {
        st = twi_error_set(err, TW_E_FORMAT, "%s: cannot read '%s' (%s)", domain, path,
                           handle_msg(&h));
        goto out;
    }
    for (int d = 0; d < n_dirs; d++) {
        uint32_t tw = 0, th = 0, w = 0, ht = 0;

        if (d > 0 && !TIFFReadDirectory(h.tif)) {
            st = twi_error_set(err, TW_E_FORMAT, "%s: cannot read directory %d of '%s' (%s)",
                               domain, d, path, handle_msg(&h));
            goto out;
        }
        /* A tiled directory after the first is a pyramid level: one larger than the base is
         * no reduced level (the inputs of fuzz finding T3 were such levels; what made
         * OpenSlide divide by zero on them is their tile count, checked below). */
        TIFFGetField(h.tif, TIFFTAG_IMAGEWIDTH, &w);
        TIFFGetField(h.tif, TIFFTAG_IMAGELENGTH, &ht);
        if (d == 0) {
            w0 = w;
            h0 = ht;
        } else if (TIFFIsTiled(h.tif) && (w > w0 || ht > h0)) {
            st = twi_error_set(err, TW_E_FORMAT,
                               "%s: directory %d of '%s' (%ux%u) is larger than the base "
                               "image (%ux%u)",
                               domain, d, path, (unsigned)w, (unsigned)ht, (unsigned)w0,
                               (unsigned)h0);
            goto out;
        }
        if (TIFFIsTiled(h.tif) && TIFFGetField(h.tif, TIFFTAG_TILEWIDTH, &tw) &&
            TIFFGetField(h.tif, TIFFTAG_TILELENGTH, &th) &&
            (uint64_t)tw * th > max_tile_bytes / (px_bytes ? px_bytes : 1)) {
            st = twi_error_set(err, TW_E_FORMAT,
                               "%s: tile of %ux%u pixels in directory %d of '%s' is too large "
                               "(more than %llu MiB decoded)",
                               domain, (unsigned)tw, (unsigned)th, d, path,
                               (unsigned long long)(max_tile_bytes >> 20));
            goto out;
        }
        /* OpenSlide 3.4.1 (aperio) maps the missing tiles of a level onto the next tiled
         * directory's grid dividing by round(its tiles across / the next's), and the same
         * down: zero when the next level has more than twice as many tiles across or down,
         * a SIGFPE in openslide_open (fuzz findings T3, T4). Real pyramids have fewer tiles
         * level after level. */
        if (TIFFIsTiled(h.tif) && tw && th) {
            uint64_t across = ((uint64_t)w + tw - 1) / tw, down = ((uint64_t)ht + th - 1) / th;

            if (prev_dir >= 0 && (across > 2 * prev_across || down > 2 * prev_down)) {
                st = twi_error_set(err, TW_E_FORMAT,
                                   "%s: directory %d of '%s' has %" PRIu64 "x%" PRIu64
                                   " tiles, more than twice as many across or down as "
                                   "directory %d (%" PRIu64 "x%" PRIu64 ")",
                                   domain, d, path, across, down, prev_dir, prev_across,
                                   prev_down);
                goto out;
            }
            prev_dir = d;
            prev_across = across;
            prev_down = down;
        }
        if ((st = precheck_striles(h.tif, path, domain, d, file_size, err)) != TW_OK)
            goto out;
    }
out:
    if (h.tif)
        TIFFClose(h.tif);
    TIFFOpenOptionsFree(opts);
    return st;
}

/* ---- channels */

/* Keep the name of channel `c` (a page's qptiff <Name>) in names[c]; NULL when none. */
static void
page_name(TIFF *tif, char **names, int c)
{
    const char *desc = NULL;
    char buf[256];

    if (TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &desc) && desc &&
        twi_channel_name_qptiff(desc, buf, sizeof buf))
        names[c] = strdup(buf);
}

/* After the levels are known: level 0's pages (or samples) as the slide's channels, named by
 * OME-XML or the pages' qptiff names (else ""), and only the levels that have every channel as
 * a page kept. The names of names[] (the pages', n_names of them) that are used are taken (set
 * to NULL). */
static tw_status
finish_channels(tw_slide *s, tiff_reader *r, char **names, int n_names)
{
    int n = r->levels[0].n_pages > 1 ? r->levels[0].n_pages : s->n_channels, kept = 0;
    char **ome = NULL;
    tw_status st = TW_OK;

    if (n < 2) {
        s->n_channels = 0;
        goto out;
    }
    /* a multi-sample image whose levels are pages too is not a layout anyone writes */
    if (r->levels[0].n_pages > 1 && s->n_channels > 1) {
        st = TW_E_FORMAT;
        goto out;
    }
    for (int i = 0; i < r->n_levels; i++)
        if (r->levels[i].n_pages == r->levels[0].n_pages)
            r->levels[kept++] = r->levels[i];
    r->n_levels = kept;
    s->n_channels = n;
    if (!(s->channel_names = calloc((size_t)n, sizeof *s->channel_names)) ||
        !(ome = calloc((size_t)n, sizeof *ome))) {
        st = TW_E_NOMEM;
        goto out;
    }
    if (twi_channel_names_ome(tw_slide_get_property(s, "tiff.ImageDescription"), ome, n) == n)
        for (int c = 0; c < n; c++) {
            s->channel_names[c] = ome[c];
            ome[c] = NULL;
        }
    for (int c = 0; c < n; c++) {
        if (!s->channel_names[c] && c < n_names && names[c]) {
            s->channel_names[c] = names[c];
            names[c] = NULL;
        }
        if (!s->channel_names[c] && !(s->channel_names[c] = strdup(""))) {
            st = TW_E_NOMEM;
            goto out;
        }
    }
out:
    for (int c = 0; ome && c < n; c++)
        free(ome[c]);
    free(ome);
    return st;
}

static void
tiff_set_channel(tw_slide *s, int c)
{
    tiff_reader *r = s->priv;

    if (r->levels[0].n_pages > 1)
        r->page = c;
    else
        r->sample_off = (size_t)c * r->sample_bytes;
}

/* ---- the backend */

static void
tiff_close(tw_slide *s)
{
    tiff_reader *r = s->priv;

    if (!r)
        return;
    while (r->free_list) {
        tiff_handle *h = r->free_list;

        r->free_list = h->next;
        handle_close(h);
    }
    handle_close(r->shared);
    if (r->shared_lock_init)
        pthread_mutex_destroy(&r->shared_lock);
    if (r->lock_init)
        pthread_mutex_destroy(&r->lock);
    for (int i = 0; r->levels && i < r->n_levels; i++) {
        free(atomic_load(&r->levels[i].decodes));
        free(atomic_load(&r->levels[i].bad));
    }
    free(r->levels);
    free(r->path);
    free(r);
    s->priv = NULL;
}

/* Count a decode of tile idx of level `level` (twi_slide_set_io): its compressed and decoded
 * bytes, and whether the tile was decoded before. */
static void
count_decode(tw_slide *s, tiff_reader *r, tiff_handle *hd, int level, uint32_t idx)
{
    tiff_level *lv = &r->levels[level];
    atomic_uchar *seen = atomic_load(&lv->decodes);

    twi_io_add(&s->io->bytes_read, TIFFGetStrileByteCount(hd->tif, idx));
    twi_io_add(&s->io->bytes_decoded, lv->strile_bytes);
    twi_io_add(&s->io->tiles_decoded, 1);
    if (!seen) {
        pthread_mutex_lock(&r->lock);
        if (!(seen = atomic_load(&lv->decodes)) &&
            (seen = calloc(lv->n_striles ? lv->n_striles : 1, sizeof *seen)))
            atomic_store(&lv->decodes, seen);
        pthread_mutex_unlock(&r->lock);
        if (!seen)
            return; /* out of memory: the repeats go uncounted */
    }
    if (idx < lv->n_striles && atomic_load_explicit(&seen[idx], memory_order_relaxed) < 2 &&
        atomic_fetch_add_explicit(&seen[idx], 1, memory_order_relaxed) == 1)
        twi_io_add(&s->io->tiles_redecoded, 1);
}

/* Take the current directory (directory d of the main chain, or the SubIFD at byte `subifd`)
 * as the next level when it is one: readable geometry, and strictly smaller than the last
 * level (or of a wanted size, twi_tiff_open_levels); or, in the main chain, as one more channel
 * page of the last level: a page of its size, layout and SubfileType right after its pages
 * (gray only: an RGB page of the same size is no fluorescence channel). r->levels has room
 * for it; names[] gets level 0's pages' qptiff names. */
static tw_status
try_level(tw_slide *s, tiff_reader *r, tiff_handle *h, int d, uint64_t subifd, uint32_t subfile,
          char **names, uint64_t file_size, tw_error *err)
{
    tiff_level lv = {.dir = (tdir_t)d, .subifd = subifd};
    tw_status st;

    TIFFGetFieldDefaulted(h->tif, TIFFTAG_COMPRESSION, &lv.compression);
    if (r->jpeg_rgb && lv.compression == COMPRESSION_JPEG)
        TIFFSetField(h->tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    if ((st = read_geometry(h->tif, r, d, &lv, err)) != TW_OK) {
        if (d == 0 && !subifd)
            return st;
        /* not a level we can read: skip it, as any other odd directory */
        TW_DEBUG("io.tiff", "skipping directory %d%s: %s", d, subifd ? " (a SubIFD)" : "",
                 err ? err->message : "");
        if (err)
            memset(err, 0, sizeof *err);
        return TW_OK;
    }
    if (s->want) {
        /* the directory of one wanted level's size, the first one only */
        int k;

        for (k = 0; k < s->n_want; k++)
            if (s->want_map[k] < 0 && s->want[k].w == (int64_t)lv.w &&
                s->want[k].h == (int64_t)lv.h)
                break;
        if (k == s->n_want)
            return TW_OK;
        s->want_map[k] = r->n_levels;
    } else if (r->n_levels > 0) {
        tiff_level *prev = &r->levels[r->n_levels - 1];

        if (!subifd && !prev->subifd && lv.w == prev->w && lv.h == prev->h && r->spp == 1 &&
            subfile == prev->subfile && (tdir_t)d == prev->dir + (tdir_t)prev->n_pages) {
            if ((st = check_striles(h->tif, r, r->n_levels - 1, file_size, err)) != TW_OK)
                return st;
            if (r->n_levels == 1)
                page_name(h->tif, names, prev->n_pages);
            prev->n_pages++;
            return TW_OK;
        }
        if (lv.w > prev->w || lv.h > prev->h || (lv.w == prev->w && lv.h == prev->h))
            return TW_OK;
    }
    lv.n_pages = 1;
    lv.subfile = subfile;
    if (d == 0 && !subifd && !s->want)
        page_name(h->tif, names, 0);
    r->levels[r->n_levels] = lv;
    if ((st = check_striles(h->tif, r, r->n_levels, file_size, err)) != TW_OK)
        return st;
    r->n_levels++;
    return TW_OK;
}

/* The reduced levels an OME-TIFF, vips (--subifd) or tifffile (subifds=) pyramid keeps in the
 * SubIFDs of directory 0 (the current directory): each, in order, is a level when its layout
 * is level 0's. The handle is back at directory 0 afterwards. */
static tw_status
add_subifd_levels(tw_slide *s, tiff_reader *r, tiff_handle *h, const tiff_layout *l0,
                  int n_dirs, uint64_t file_size, tw_error *err)
{
    uint16_t n = 0;
    toff_t *offs = NULL;
    uint64_t *copy = NULL;
    tiff_level *grown;
    tiff_layout l;
    tw_status st = TW_OK;

    if (!TIFFGetField(h->tif, TIFFTAG_SUBIFD, &n, &offs) || n == 0 || !offs)
        return TW_OK;
    /* the tag's array belongs to the directory, which the SubIFDs replace */
    if (!(copy = malloc(n * sizeof *copy)) ||
        !(grown = realloc(r->levels, ((size_t)n_dirs + n) * sizeof *r->levels))) {
        free(copy);
        return twi_error_set(err, TW_E_NOMEM, "io.tiff: out of memory opening '%s'", r->path);
    }
    r->levels = grown;
    memset(r->levels + r->n_levels, 0, ((size_t)n_dirs + n - (size_t)r->n_levels) *
                                           sizeof *r->levels);
    for (uint16_t i = 0; i < n; i++)
        copy[i] = offs[i];
    for (uint16_t i = 0; i < n; i++) {
        uint32_t subfile = 0;

        h->msg[0] = '\0';
        if (copy[i] == 0 || copy[i] >= file_size || !TIFFSetSubDirectory(h->tif, copy[i])) {
            st = twi_error_set(err, TW_E_FORMAT,
                               "io.tiff: cannot read SubIFD %u of directory 0 of '%s' (%s)",
                               (unsigned)i, r->path,
                               copy[i] >= file_size ? "it starts beyond the end of the file"
                                                    : handle_msg(h));
            goto out;
        }
        TIFFGetField(h->tif, TIFFTAG_SUBFILETYPE, &subfile);
        if (!read_layout(h->tif, &l) || !same_layout(&l, l0) || (subfile & FILETYPE_MASK) ||
            !can_decode(&l))
            continue;
        if ((st = try_level(s, r, h, 0, copy[i], subfile, NULL, file_size, err)) != TW_OK)
            goto out;
    }
    h->msg[0] = '\0';
    if (!TIFFSetDirectory(h->tif, 0))
        st = twi_error_set(err, TW_E_FORMAT, "io.tiff: cannot read directory 0 of '%s' (%s)",
                           r->path, handle_msg(h));
out:
    free(copy);
    return st;
}

static tw_status
tiff_open(tw_slide *s, const char *path, tw_error *err)
{
    tw_status st = TW_OK;
    tiff_reader *r = NULL;
    tiff_handle *h = NULL;
    tiff_layout l0, l;
    struct stat sb;
    int n_dirs = 0, d, i;
    char ebuf[128];
    char **names = NULL; /* the qptiff names of level 0's pages */

    if (!(r = calloc(1, sizeof *r)) || !(r->path = strdup(path))) {
        free(r);
        return twi_error_set(err, TW_E_NOMEM, "io.tiff: out of memory opening '%s'", path);
    }
    s->priv = r;
    if (pthread_mutex_init(&r->lock, NULL) != 0)
        return twi_error_set(err, TW_E_NOMEM, "io.tiff: cannot create a mutex");
    r->lock_init = true;
    if (pthread_mutex_init(&r->shared_lock, NULL) != 0)
        return twi_error_set(err, TW_E_NOMEM, "io.tiff: cannot create a mutex");
    r->shared_lock_init = true;
    if (stat(path, &sb) != 0) {
        int e = errno;
        return twi_error_set(err, TW_E_IO, "io.tiff: cannot open '%s' (%s)", path,
                             twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    if ((st = walk_directories(path, &n_dirs, err)) != TW_OK)
        return st;
    if (n_dirs == 0)
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: '%s' has no image directory", path);
    if ((st = handle_open(r, &h, err)) != TW_OK)
        return st;
    if (!read_layout(h->tif, &l0)) {
        st = twi_error_set(err, TW_E_FORMAT, "io.tiff: cannot read the layout of '%s' (%s)",
                           path, handle_msg(h));
        goto out;
    }
    if ((st = check_layout(s, r, &l0, err)) != TW_OK) {
        /* OpenSlide may still read it as RGB (palette, 1-bit, CMYK, separate planes): pictures,
         * which an 8-bit RGB read keeps. Not measurements: signed, floating-point or wider
         * samples made 8-bit RGB would be wrong values with exit 0, so their error stands. */
        s->layout_unsupported = l0.fmt == SAMPLEFORMAT_UINT && l0.bps <= 16;
        goto out;
    }
    if ((st = read_properties(s, h->tif)) != TW_OK) {
        twi_error_set(err, st, "io.tiff: out of memory reading the tags of '%s'", path);
        goto out;
    }
    if (!(r->levels = calloc((size_t)n_dirs, sizeof *r->levels)) ||
        !(names = calloc((size_t)n_dirs, sizeof *names))) {
        st = twi_error_set(err, TW_E_NOMEM, "io.tiff: out of memory opening '%s'", path);
        goto out;
    }

    for (d = 0; d < n_dirs; d++) {
        uint32_t subfile = 0;

        if (d > 0) {
            h->msg[0] = '\0';
            if (!TIFFReadDirectory(h->tif)) {
                st = twi_error_set(err, TW_E_FORMAT,
                                   "io.tiff: cannot read directory %d of '%s' (%s)", d, path,
                                   handle_msg(h));
                goto out;
            }
            TIFFGetField(h->tif, TIFFTAG_SUBFILETYPE, &subfile);
            if (!read_layout(h->tif, &l) || !same_layout(&l, &l0) || (subfile & FILETYPE_MASK))
                continue;
            if (!can_decode(&l))
                continue;
        } else {
            TIFFGetField(h->tif, TIFFTAG_SUBFILETYPE, &subfile);
        }
        if ((st = try_level(s, r, h, d, 0, subfile, names, (uint64_t)sb.st_size, err)) !=
            TW_OK)
            goto out;
        if (d == 0 && (st = add_subifd_levels(s, r, h, &l0, n_dirs, (uint64_t)sb.st_size,
                                              err)) != TW_OK)
            goto out;
    }

    if (r->n_levels > 0 && !s->want &&
        (st = finish_channels(s, r, names, n_dirs)) != TW_OK) {
        if (st == TW_E_FORMAT)
            twi_error_set(err, st, "io.tiff: '%s' has channels both as samples and as pages",
                          path);
        else
            twi_error_set(err, st, "io.tiff: out of memory opening '%s'", path);
        goto out;
    }
    if (!(s->levels = calloc((size_t)r->n_levels, sizeof *s->levels)) ||
        !(s->format = strdup("tiff"))) {
        st = twi_error_set(err, TW_E_NOMEM, "io.tiff: out of memory opening '%s'", path);
        goto out;
    }
    s->n_levels = r->n_levels;
    if (r->n_levels == 0) {
        st = twi_error_set(err, TW_E_FORMAT, "io.tiff: no directory of '%s' has a wanted size",
                           path);
        goto out;
    }
    for (i = 0; i < r->n_levels; i++) {
        const tiff_level *lv = &r->levels[i];

        s->levels[i].w = lv->w;
        s->levels[i].h = lv->h;
        s->levels[i].downsample = (double)r->levels[0].w / (double)lv->w;
        s->levels[i].tile_w = lv->tiled ? (int32_t)lv->tw : 0;
        s->levels[i].tile_h = lv->tiled ? (int32_t)lv->th : 0;
    }
    /* the handle is at the last directory read; the next read selects its level */
    h->level = -1;
    handle_release(r, h);
    h = NULL;
out:
    for (i = 0; names && i < n_dirs; i++)
        free(names[i]);
    free(names);
    handle_close(h);
    return st;
}

/* A JPEG 2000 tile: its raw bytes through libtiff, decoded by OpenJPEG (io/codec_j2k.c). */
static tmsize_t
decode_j2k(tiff_handle *hd, const tiff_level *lv, uint32_t idx)
{
    const uint64_t n = TIFFGetStrileByteCount(hd->tif, idx);
    tmsize_t got;

    if (n == 0 || n > TWI_IO_MAX_STRILE_BYTES) {
        snprintf(hd->msg, sizeof hd->msg, "%" PRIu64 " compressed bytes", n);
        return -1;
    }
    if (hd->raw_bytes < n) {
        uint8_t *p = realloc(hd->raw, (size_t)n);

        if (!p) {
            snprintf(hd->msg, sizeof hd->msg, "out of memory for %" PRIu64 " bytes", n);
            return -1;
        }
        hd->raw = p;
        hd->raw_bytes = (size_t)n;
    }
    got = TIFFReadRawTile(hd->tif, idx, hd->raw, (tmsize_t)n);
    if (got != (tmsize_t)n) {
        if (!hd->msg[0])
            snprintf(hd->msg, sizeof hd->msg, "read %lld of its %" PRIu64 " bytes",
                     (long long)got, n);
        return -1;
    }
    if (!twi_j2k_decode(hd->raw, (size_t)n,
                        lv->compression == TWI_TIFF_COMPRESSION_APERIO_J2K_YCBCR, lv->tw, lv->th,
                        hd->scratch, hd->msg, sizeof hd->msg))
        return -1;
    return (tmsize_t)lv->strile_bytes;
}

/* One tile or strip of a level into the handle's scratch buffer: its decoded size or -1. */
static tmsize_t
decode(tiff_handle *hd, const tiff_level *lv, uint32_t idx)
{
    if (twi_is_aperio_j2k(lv->compression))
        return decode_j2k(hd, lv, idx);
    return lv->tiled
               ? TIFFReadEncodedTile(hd->tif, idx, hd->scratch, (tmsize_t)lv->strile_bytes)
               : TIFFReadEncodedStrip(hd->tif, idx, hd->scratch, (tmsize_t)lv->strile_bytes);
}

/* Whether tile idx of `level` is filled as bad for the first time (each is counted once,
 * whichever handle reads it and however often). */
static bool
first_bad(tiff_reader *r, int level, uint32_t idx)
{
    tiff_level *lv = &r->levels[level];
    atomic_uchar *bad = atomic_load(&lv->bad);

    if (!bad) {
        pthread_mutex_lock(&r->lock);
        if (!(bad = atomic_load(&lv->bad)) &&
            (bad = calloc(lv->n_striles ? lv->n_striles : 1, sizeof *bad)))
            atomic_store(&lv->bad, bad);
        pthread_mutex_unlock(&r->lock);
        if (!bad)
            return true; /* out of memory: counted each time */
    }
    return idx < lv->n_striles && atomic_exchange(&bad[idx], 1) == 0;
}

/* Tile or strip idx (at tx, ty in the grid) of `level` into hd->scratch, decoded cleanly, or
 * zeros: a sparse one (no offset and no bytes) always; a bad one (no offset, or the decoder
 * reported an error or a warning) when the slide fills bad tiles (io.on_bad_tile=fill),
 * counted; otherwise TW_E_FORMAT naming the level and tile. */
static tw_status
decode_strile(tw_slide *s, tiff_reader *r, tiff_handle *hd, int level, uint32_t idx, int64_t tx,
              int64_t ty, tw_error *err)
{
    const tiff_level *lv = &r->levels[level];
    const uint64_t off = TIFFGetStrileOffset(hd->tif, idx);
    const uint64_t bytes = TIFFGetStrileByteCount(hd->tif, idx);
    char why[300], what[600];
    tw_status st;
    tmsize_t got;
    unsigned warned;

    hd->cached_level = -1;
    /* libtiff can report a whole tile yet leave its end unwritten (a deflate stream that ends
     * early, found by tests/fuzz): stale bytes of the previous tile must never reach dst, so
     * start from zeros. All of the tile: zeroing only the rows copied out is not enough, what
     * libtiff leaves in them can depend on the rest of the buffer (tests/fuzz/regress/
     * tiff_deflate_rows_depend_on_buffer.tif). */
    memset(hd->scratch, 0, lv->strile_bytes);
    if (off == 0 && bytes == 0)
        return TW_OK; /* sparse (GDAL's SPARSE_OK): reads as zeros */
    if (off == 0) {
        snprintf(why, sizeof why, "no offset (%" PRIu64 " bytes)", bytes);
    } else if (bytes == 0) {
        snprintf(why, sizeof why, "no bytes (offset %" PRIu64 ")", off);
    } else {
        if ((st = handle_select(r, hd, level, err)) != TW_OK)
            return st;
        hd->msg[0] = '\0';
        hd->wmsg[0] = '\0';
        warned = hd->warnings;
        got = decode(hd, lv, idx);
        if (s->io)
            count_decode(s, r, hd, level, idx);
        if (got >= 0 && hd->warnings == warned && !hd->msg[0]) {
            hd->cached_level = level;
            hd->cached_idx = idx;
            return TW_OK;
        }
        /* Corrupt data (libjpeg's "premature end of data segment" is a warning, zstd's and
         * zlib's errors are errors): whatever the codec made of it is not the tile. The
         * decoder's state may be off too (JPEG tables a corrupt tile redefined: fuzz finding
         * T6), so the next decode starts from a freshly selected directory. */
        hd->level = -1;
        memset(hd->scratch, 0, lv->strile_bytes);
        snprintf(why, sizeof why, "corrupt data (%s)",
                 hd->msg[0] ? hd->msg : hd->wmsg[0] ? hd->wmsg : "the decoder gave up");
    }
    if (lv->tiled)
        snprintf(what, sizeof what,
                 "io.tiff: '%s': level %d tile (%" PRId64 ", %" PRId64 ") at x=%" PRId64
                 ", y=%" PRId64 ": %s",
                 r->path, level, tx, ty, tx * (int64_t)lv->tw, ty * (int64_t)lv->th, why);
    else
        snprintf(what, sizeof what, "io.tiff: '%s': level %d strip %u at y=%" PRId64 ": %s",
                 r->path, level, idx, ty * (int64_t)lv->th, why);
    if (!s->fill_bad_tiles)
        return twi_error_set(err, TW_E_FORMAT, "%s", what);
    if (first_bad(r, level, idx))
        twi_slide_count_bad_tile(s, what);
    /* zeros from now on, whoever reads it: no second decode */
    hd->cached_level = level;
    hd->cached_idx = idx;
    return TW_OK;
}

static tw_status
tiff_read_region(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h,
                 uint8_t *dst, size_t stride, tw_error *err)
{
    tiff_reader *r = s->priv;
    const tiff_level *lv = &r->levels[level];
    tiff_handle *hd = NULL;
    tw_status st = TW_OK;
    const size_t src_px = (size_t)r->spp * r->sample_bytes;
    const size_t dst_px = twi_pixel_size(s->channels, s->type);
    const size_t src_row = (size_t)lv->tw * src_px;
    int64_t tx0 = x / lv->tw, tx1 = (x + w - 1) / lv->tw;
    int64_t ty0 = y / lv->th, ty1 = (y + h - 1) / lv->th;
    int64_t tx, ty;
    const bool shared = lv->strile_bytes > TWI_IO_SHARED_STRILE_BYTES;

    if (shared) {
        pthread_mutex_lock(&r->shared_lock);
        if (!r->shared && (st = handle_open(r, &r->shared, err)) != TW_OK) {
            pthread_mutex_unlock(&r->shared_lock);
            return st;
        }
        hd = r->shared;
    } else if ((st = handle_acquire(r, &hd, err)) != TW_OK) {
        return st;
    }
    if ((st = handle_select(r, hd, level, err)) != TW_OK)
        goto out;
    for (ty = ty0; ty <= ty1; ty++) {
        for (tx = tx0; tx <= tx1; tx++) {
            const uint32_t idx = (uint32_t)(ty * lv->n_across + tx);
            const int64_t ox = tx * lv->tw, oy = ty * lv->th; /* tile origin */
            const int64_t cx0 = x > ox ? x : ox, cy0 = y > oy ? y : oy;
            const int64_t cx1 = x + w < ox + lv->tw ? x + w : ox + lv->tw;
            const int64_t cy1 = y + h < oy + lv->th ? y + h : oy + lv->th;
            int64_t row;

            if (hd->cached_level == level && hd->cached_idx == idx) {
                /* still in the scratch buffer from this handle's last decode */
            } else if ((st = decode_strile(s, r, hd, level, idx, tx, ty, err)) != TW_OK) {
                goto out;
            }
            for (row = cy0; row < cy1; row++) {
                const uint8_t *sp = hd->scratch + (size_t)(row - oy) * src_row +
                                    (size_t)(cx0 - ox) * src_px + r->sample_off;
                uint8_t *dp = dst + (size_t)(row - y) * stride + (size_t)(cx0 - x) * dst_px;

                if (src_px == dst_px) {
                    memcpy(dp, sp, (size_t)(cx1 - cx0) * dst_px);
                } else {
                    int64_t i;

                    for (i = cx0; i < cx1; i++, sp += src_px, dp += dst_px)
                        memcpy(dp, sp, dst_px);
                }
            }
        }
    }
out:
    if (st != TW_OK && hd) {
        hd->level = -1; /* reselect the directory next time: libtiff's state may be off */
        hd->cached_level = -1;
    }
    if (shared)
        pthread_mutex_unlock(&r->shared_lock);
    else if (hd)
        handle_release(r, hd);
    return st;
}

static uint64_t
tiff_decoded_tile_bytes(const tw_slide *s, int level)
{
    const tiff_reader *r = s->priv;

    return r && level >= 0 && level < r->n_levels ? r->levels[level].strile_bytes : 0;
}

const twi_reader_ops twi_reader_tiff_ops = {
    .name = "tiff",
    .kind = TW_READER_TIFF,
    .open = tiff_open,
    .read_region = tiff_read_region,
    .set_channel = tiff_set_channel,
    .decoded_tile_bytes = tiff_decoded_tile_bytes,
    .close = tiff_close,
};

tw_status
twi_tiff_open_levels(const char *path, const tw_level_info *want, int n_want, int *map,
                     tw_slide **out, tw_error *err)
{
    tw_slide *s = NULL;
    tw_status st;

    *out = NULL;
    for (int k = 0; k < n_want; k++)
        map[k] = -1;
    if (!(s = calloc(1, sizeof *s)) || !(s->path = strdup(path))) {
        free(s);
        return twi_error_set(err, TW_E_NOMEM, "io.tiff: out of memory opening '%s'", path);
    }
    s->ops = &twi_reader_tiff_ops;
    s->want = want;
    s->n_want = n_want;
    s->want_map = map;
    st = tiff_open(s, path, err);
    s->want = NULL;
    s->want_map = NULL;
    if (st != TW_OK) {
        for (int k = 0; k < n_want; k++)
            map[k] = -1;
        tw_slide_close(s);
        return st;
    }
    *out = s;
    return TW_OK;
}

bool
twi_tiff_written_by_tilewave(const char *path)
{
    tiff_handle h = {.level = -1, .path = path};
    TIFFOpenOptions *opts = NULL;
    const char *sw = NULL;
    bool yes = false;

    if (!(opts = TIFFOpenOptionsAlloc()))
        return false;
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, &h);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, &h);
    if ((h.tif = TIFFOpenExt(path, "rm", opts))) {
        yes = TIFFGetField(h.tif, TIFFTAG_SOFTWARE, &sw) && sw && strncmp(sw, "tilewave", 8) == 0;
        TIFFClose(h.tif);
    }
    TIFFOpenOptionsFree(opts);
    return yes;
}
