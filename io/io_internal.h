/* SPDX-License-Identifier: MIT */
/* tilewave: private to io/: the slide object, the reader backends' ops table, helpers. */
#ifndef TW_IO_INTERNAL_H
#define TW_IO_INTERNAL_H

#include <stdint.h>

#include "tw_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A reader backend (a const ops table). slide.c picks one, checks every argument and region
 * before calling it, and owns the tw_slide; the backend keeps its state in s->priv. */
typedef struct twi_reader_ops {
    const char *name;    /* "tiff", "openslide": the domain of its messages is "io.<name>" */
    tw_reader_kind kind; /* what tw_slide_get_reader() reports */
    /* Open `path` (known to exist and be a readable regular file) and fill s: levels,
     * n_levels, channels, type, mpp, format, properties, priv. On failure s->priv must be
     * NULL or still closable by close(), and s->layout_unsupported says whether the file is
     * sound but of a layout this backend does not read (another backend may). */
    tw_status (*open)(tw_slide *s, const char *path, tw_error *err);
    /* Read a region known to lie inside `level`, w, h >= 1, into dst (rows `stride` bytes
     * apart, stride >= w * channels * sample size). Called concurrently from any thread. */
    tw_status (*read_region)(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h,
                             uint8_t *dst, size_t stride, tw_error *err);
    /* Read channel c (0 <= c < s->n_channels) from now on (NULL: the backend has none). */
    void (*set_channel)(tw_slide *s, int c);
    /* Bytes one decoded tile or strip of `level` takes in the reader (NULL: not known). */
    uint64_t (*decoded_tile_bytes)(const tw_slide *s, int level);
    /* Free s->priv (may be NULL). */
    void (*close)(tw_slide *s);
} twi_reader_ops;

TWI_HIDDEN extern const twi_reader_ops twi_reader_tiff_ops;      /* reader_tiff.c */
TWI_HIDDEN extern const twi_reader_ops twi_reader_openslide_ops; /* reader_openslide.c */

/* The slide; read-only after open, so regions can be read from any thread. */
struct tw_slide {
    const twi_reader_ops *ops;
    void *priv;             /* the backend's state */
    char *path;
    char *format;           /* "tiff" or the OpenSlide vendor */
    int n_levels;
    tw_level_info *levels;  /* n_levels entries, level 0 first */
    int channels;           /* 1 or 3 */
    tw_sample_type type;
    double mpp_x, mpp_y;    /* microns per level-0 pixel, 0 when unknown */
    double objective_power; /* the objective's magnification at level 0, 0 when unknown */
    tw_slide *inner;        /* a reduced view (io/reduce.c): the slide it reads, which it owns */
    char **prop_names;      /* n_props names then NULL (what get_property_names returns) */
    char **prop_values;     /* n_props values */
    size_t n_props, cap_props;
    bool layout_unsupported; /* set by a failing open: a valid file of a layout not kept */
    /* Several channels that are not RGB colour (fluorescence: qptiff pages, OME planes, gray
     * samples): n_channels >= 2 and their names ("" when the file names none), else 0 and
     * NULL. `channel` is the one read (tw_slide_set_channel), -1 until one is chosen: a read
     * before is refused, never a silent pick. `channels` above is then 1. */
    int n_channels;
    char **channel_names;
    int channel;
    twi_io_counts *io;      /* where reads are counted (a job's, twi_slide_set_io), or NULL */
    /* io.on_bad_tile (twi_slide_set_bad_tiles): false = a tile that does not decode cleanly
     * fails the read; true = it reads as zeros and is counted in bad_tiles (and io). */
    bool fill_bad_tiles;
    atomic_uint_fast64_t bad_tiles;
    /* For twi_tiff_open_levels only (NULL otherwise): the TIFF backend takes as level k the
     * directory of exactly want[k]'s size, and sets want_map[k] to it or -1. */
    const tw_level_info *want;
    int n_want;
    int *want_map;
};

/* The channel names of a multi-channel file (io/channels.c). The name in a PerkinElmer qptiff
 * page's ImageDescription (its first <Name> element), copied into out (n bytes); false when
 * there is none. */
TWI_HIDDEN bool twi_channel_name_qptiff(const char *desc, char *out, size_t n);
/* The Name attributes of the <Channel> elements of an OME-XML description, in order, into
 * names[0..n) (malloc'ed; entries without a name stay NULL). The number of <Channel> elements
 * (-1 when `xml` is not OME-XML); names are filled only when it is n. */
TWI_HIDDEN int twi_channel_names_ome(const char *xml, char **names, int n);

/* Count one bad tile that was filled with zeros (fill_bad_tiles); `what` says which and why,
 * logged at debug level (the caller reports the count). */
TWI_HIDDEN void twi_slide_count_bad_tile(tw_slide *s, const char *what);

/* Add (or replace) property `name` = `value` on s; copies both. TW_OK or TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_slide_set_property(tw_slide *s, const char *name, const char *value);

/* What a file's own metadata says of its resolution (io/metadata.c); 0 = not said. */
typedef struct twi_meta {
    double mpp_x, mpp_y;
    double objective_power;
    bool own; /* tilewave's description: its resolution tags, exact, come first */
} twi_meta;

/* Read the ImageDescription of a TIFF's first directory: Aperio's "Aperio ...|KEY = VALUE|..."
 * (and tilewave's "tilewave ...|KEY = VALUE|...") items become properties aperio.KEY
 * (tilewave.KEY), as OpenSlide's aperio reader names them, MPP and AppMag the pixel size and
 * objective power; OME-XML gives PhysicalSizeX/Y (in their units) and NominalMagnification.
 * TW_OK or TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_meta_from_description(tw_slide *s, const char *desc, twi_meta *m);

/* The pixel size from resolution tags in centimetres (rx, ry pixels per cm): true and the
 * microns per pixel, or false (left untouched) when they are not positive numbers or are an
 * image editor's default printing resolution (72, 96, 100, 150, 200, 240, 300, 600 or 1200
 * dpi, within 0.1%: boxes.tiff's 28.3465 pixels per cm is 72 dpi), which says nothing of a
 * microscope (io/metadata.c). */
TWI_HIDDEN bool twi_meta_mpp_from_cm(double rx, double ry, double *mpp_x, double *mpp_y);
/* The pixel size of a tilewave output read from its resolution tags (*mpp_x, *mpp_y: a 32-bit
 * float's precision) made exact: when its description's MPP (10 digits) agrees with both to
 * that precision, it replaces them; otherwise (tags edited, x != y) they stay. */
TWI_HIDDEN void twi_meta_exact_own_mpp(const twi_meta *m, double *mpp_x, double *mpp_y);

/* Whether the TIFF at `path` says it was written by tilewave (its Software tag): such files,
 * whose 8-bit outputs carry an Aperio-style description for OpenSlide, are read through
 * libtiff by the automatic choice (reader_tiff.c). */
TWI_HIDDEN bool twi_tiff_written_by_tilewave(const char *path);

/* The writer as the assembler sees it (writer_tiff.c): its options and level sizes. */
TWI_HIDDEN const tw_writer_opts *twi_writer_opts(const tw_writer *wr);
TWI_HIDDEN void twi_writer_level_size(const tw_writer *wr, int level, int64_t *w, int64_t *h);

/* Open `path` with the libtiff backend, taking as levels the directories whose sizes are those
 * of want[0..n_want) (an OpenSlide slide's levels), whatever else the file holds (an Aperio
 * thumbnail between them, labels): map[k] is the new slide's level of want[k], or -1 when no
 * directory of that size has the base's sample layout. For levels OpenSlide 3.4.1 resamples
 * (non-integer downsamples: docs/reliability.md, T2). */
TWI_HIDDEN tw_status twi_tiff_open_levels(const char *path, const tw_level_info *want,
                                          int n_want, int *map, tw_slide **out, tw_error *err);

/* The most bytes one decoded tile or strip may take: 2 GiB, a 16384 x 16384 tile of 8-byte
 * pixels (the largest tw_writer writes). A header that claims more is corrupt or beyond what
 * tilewave reads, and is refused at open, before a buffer that size is allocated. */
#define TWI_IO_MAX_STRILE_BYTES ((uint64_t)1 << 31)

/* Tiles or strips that decode to more than this (16 MiB, a 2048 x 2048 RGBA tile) are read
 * through one libtiff handle per slide, decoded once for all the threads reading them. */
#define TWI_IO_SHARED_STRILE_BYTES ((size_t)16 << 20)

/* The most bytes one tile OpenSlide decodes may take: 256 MiB of ARGB, an 8192 x 8192 tile.
 * OpenSlide 3.4.1 allocates each tile it reads whole (g_malloc, which aborts the process when
 * the allocation fails) and keeps it in its cache: vendor slides use tiles of 240-1024 pixels,
 * and a header claiming gigabyte tiles is refused before OpenSlide sees it. */
#define TWI_OPENSLIDE_MAX_TILE_BYTES ((uint64_t)1 << 28)

/* For backends that hand a TIFF-based file to another library (OpenSlide), which would print
 * libtiff's errors to stderr or allocate what a corrupt header claims: when `path` starts with
 * a TIFF header, walk its directories with libtiff under our own silent handlers and check
 * each tile's size (at most `max_tile_bytes` at `px_bytes` per decoded pixel), that every
 * tile or strip ends inside the file and that an uncompressed one holds all its bytes. TW_OK
 * when it is not a TIFF or looks sound; TW_E_FORMAT "<domain>: ... '<path>' ..." otherwise
 * (reader_tiff.c). */
TWI_HIDDEN tw_status twi_tiff_precheck(const char *path, const char *domain, size_t px_bytes,
                                       uint64_t max_tile_bytes, tw_error *err);

/* libtiff per-handle handlers share these (tiff_common.c). Keep libtiff's first error in
 * `buf` as one line, dropping the module name when it only repeats `path`; later messages are
 * consequences and are ignored until the caller clears buf[0]. */
TWI_HIDDEN void twi_tiff_keep_message(char *buf, size_t n, const char *path, const char *module,
                                      const char *fmt, va_list ap);
/* libtiff warnings go to the debug log under `domain`, never to stderr. */
TWI_HIDDEN void twi_tiff_log_warning(const char *domain, const char *module, const char *fmt,
                                     va_list ap);

/* strerror_r wrapper that always returns the text (thread-safe). */
TWI_HIDDEN const char *twi_io_strerror(int errnum, char *buf, size_t n);

/* Aperio's TIFF compressions for JPEG 2000 tiles (bare J2K codestreams): components Y, Cb, Cr
 * (33003) or R, G, B (33005). libtiff has no codec for them; io/codec_j2k.c decodes them. */
#define TWI_TIFF_COMPRESSION_APERIO_J2K_YCBCR 33003
#define TWI_TIFF_COMPRESSION_APERIO_J2K_RGB 33005

static inline bool
twi_is_aperio_j2k(unsigned compression)
{
    return compression == TWI_TIFF_COMPRESSION_APERIO_J2K_YCBCR ||
           compression == TWI_TIFF_COMPRESSION_APERIO_J2K_RGB;
}

/* Decode the JPEG 2000 codestream (or JP2 file) of n bytes at src, one tile of w x h pixels,
 * into 8-bit RGB at dst (w * h * 3 bytes, rows packed); `ycbcr`: its components are Y, Cb, Cr,
 * converted as OpenSlide converts them. false, with one line in msg, when it does not decode
 * or is not three 8-bit unsigned components of exactly w x h (io/codec_j2k.c). Thread-safe. */
TWI_HIDDEN bool twi_j2k_decode(const uint8_t *src, size_t n, bool ycbcr, uint32_t w, uint32_t h,
                               uint8_t *dst, char *msg, size_t msg_n);

/* Pixel size in bytes for `channels` samples of `type`. */
static inline size_t
twi_pixel_size(int channels, tw_sample_type type)
{
    return (size_t)channels * tw_sample_size(type);
}

/* ---- output files that appear only when complete (io/outfile.c) */
/* A nameless file in `dir` ("" = the current folder) that only linkat() can name, or -1 with
 * errno (EOPNOTSUPP, EISDIR, EINVAL where the file system or kernel lacks O_TMPFILE). */
TWI_HIDDEN int twi_out_nameless(const char *dir);
/* Create "<dir>.<base of path><suffix>XXXXXX" securely (mkostemp): its descriptor, and its name
 * in *name (malloc'ed); -1 with errno on failure. */
TWI_HIDDEN int twi_out_beside(const char *dir, const char *path, const char *suffix,
                              char **name);
/* Give the nameless file keep_fd a temporary name beside `path` (*tmp_path, malloc'ed), for the
 * rename over it: linkat through /proc (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH), to a
 * fresh name, retried if another process took it meanwhile. Returns 0, or -1 with errno. */
TWI_HIDDEN int twi_out_link(int keep_fd, const char *dir, const char *path, char **tmp_path);

#ifdef __cplusplus
}
#endif

#endif /* TW_IO_INTERNAL_H */
