/* SPDX-License-Identifier: MIT */
/* tilewave: reading slides and TIFFs, writing tiled BigTIFF, and the synthetic sample slide. */
#ifndef TILEWAVE_IMAGE_H
#define TILEWAVE_IMAGE_H

#include <stdbool.h>

#include "tilewave/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup tw_image Slides, TIFF reading and writing
 *
 * Input: anything OpenSlide opens (read as 8-bit RGB, premultiplied ARGB undone, fully
 * transparent pixels white), and plain TIFF/BigTIFF (tiled or striped; 8/16-bit, gray or RGB,
 * 32-bit and float32 gray) through libtiff, keeping the stored samples. The automatic choice:
 * files that OpenSlide recognises with a vendor format (Aperio, Hamamatsu, MIRAX, ...) go
 * through OpenSlide; plain and generic tiled TIFF go through libtiff; anything else that
 * OpenSlide opens goes through OpenSlide. A generic tiled TIFF whose layout libtiff's reader
 * does not keep (palette, 1-bit, ...) but OpenSlide reads is read through OpenSlide as RGB.
 *
 * Coordinates passed to tw_slide_read_region() are in the pixel frame of the level read.
 *
 * Output: tiled BigTIFF, one directory per level (a page chain, or OME-TIFF with the reduced
 * levels in SubIFDs), deflate, zstd, LZW, JPEG or none, written to a nameless file in the
 * destination folder (O_TMPFILE; a hidden temporary name where the file system lacks it) and
 * named on tw_writer_close(); nothing is left at the output path on failure. docs/io.md describes the files.
 * @{
 */

/** An opened slide or TIFF. Thread-safe: regions may be read from several threads. @since 0.1 */
typedef struct tw_slide tw_slide;

/** Which library reads a slide. #TW_READER_AUTO: OpenSlide for the vendor formats it
 *  recognises, libtiff for other TIFFs. Through OpenSlide, the levels of aperio and
 *  generic-tiff slides whose downsample is not an integer are read from their TIFF directory
 *  with libtiff when it decodes them (OpenSlide 3.4.1 resamples such levels at a region's
 *  fractional offset, so tiles would not match a whole-level read; since 0.6). @since 0.1 */
typedef enum tw_reader_kind {
    TW_READER_AUTO = 0,
    TW_READER_OPENSLIDE,
    TW_READER_TIFF
} tw_reader_kind;

/** One resolution level. @since 0.1 */
typedef struct tw_level_info {
    int64_t w, h;         /**< pixels */
    double downsample;    /**< level-0 width / this width */
    int32_t tile_w, tile_h; /**< native tile size; 0 when striped or unknown */
} tw_level_info;

/**
 * Open @p path with @p reader; the caller owns *@p out and closes it with tw_slide_close().
 * @return TW_OK, TW_E_INVALID (NULL @p path or @p out, @p reader outside the enum), TW_E_IO
 * (missing or unreadable file), TW_E_FORMAT (not an image, truncated, unsupported layout or
 * bit depth), TW_E_NOMEM. Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_slide_open(const char *path, tw_reader_kind reader,
                                           tw_slide **out, tw_error *err);

/** Close and free @p s; NULL is a no-op. No other call on @p s may be running, and the jobs
 *  given it must have ended. @since 0.1 */
TW_API void tw_slide_close(tw_slide *s);

/** Format name: the OpenSlide vendor ("aperio", "generic-tiff", ...) or "tiff"; NULL for a
 *  NULL slide. Owned by @p s. Thread-safe. @since 0.1 */
TW_API const char *tw_slide_get_format(const tw_slide *s);

/** Reader actually used (#TW_READER_AUTO for a NULL slide). Thread-safe. @since 0.1 */
TW_API tw_reader_kind tw_slide_get_reader(const tw_slide *s);

/** Number of levels (>= 1; 0 for a NULL slide). Thread-safe. @since 0.1 */
TW_API int tw_slide_get_level_count(const tw_slide *s);

/** Describe a level. @return TW_OK, TW_E_INVALID (NULL argument, no such level).
 *  Thread-safe. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_slide_get_level(const tw_slide *s, int level,
                                                tw_level_info *out);

/** Channels per pixel as read: 1 (gray, or the chosen channel of a multi-channel image), 2
 *  (u32 coordinate pairs) or 3 (RGB); 0 for a NULL slide. Thread-safe. @since 0.1 */
TW_API int tw_slide_get_channels(const tw_slide *s);

/**
 * Channels of a multi-channel image, which are not RGB colour: fluorescence channels stored as
 * pages of one size (PerkinElmer qptiff, OME-TIFF planes) or as the gray samples of each pixel.
 * Their number (>= 2), or 0 for an image of one channel or RGB colour (and a NULL slide). Such
 * an image is read one channel at a time, chosen with tw_slide_set_channel(); until then
 * tw_slide_read_region() refuses it, naming the channels. Thread-safe. @since 0.7
 */
TW_API int tw_slide_get_channel_count(const tw_slide *s);

/** Name of channel @p c ("DAPI": the qptiff page's name, the OME Channel's Name; "" when the
 *  file names none), or NULL (@p c out of range, NULL @p s). Owned by @p s. Thread-safe.
 *  @since 0.7 */
TW_API const char *tw_slide_get_channel_name(const tw_slide *s, int c);

/** The channel chosen with tw_slide_set_channel(), -1 when none is (or the image has no
 *  channels, or @p s is NULL). @since 0.7 */
TW_API int tw_slide_get_channel(const tw_slide *s);

/**
 * Read channel @p channel of a multi-channel image from now on: its name (exact) or its index
 * ("0", "1", ...; a name that is a number wins). Call before reading, not while regions are
 * read. tw_slide_get_channels() stays 1.
 * @return TW_OK, TW_E_INVALID (NULL argument; an image without channels; no such channel: the
 * message lists those there are). @since 0.7
 */
TW_API TW_NODISCARD tw_status tw_slide_set_channel(tw_slide *s, const char *channel,
                                                  tw_error *err);

/** Sample type as read (#TW_U8 for a NULL slide). Thread-safe. @since 0.1 */
TW_API tw_sample_type tw_slide_get_sample_type(const tw_slide *s);

/** Microns per pixel at level 0, 0 when unknown (or @p s NULL); a NULL @p mpp_x or @p mpp_y
 *  is skipped. Thread-safe. @since 0.1 */
TW_API void tw_slide_get_mpp(const tw_slide *s, double *mpp_x, double *mpp_y);

/** The objective's magnification at level 0 (20 for a 20x scan), 0 when unknown (or @p s
 *  NULL): OpenSlide's openslide.objective-power, Aperio's AppMag, OME's NominalMagnification.
 *  Thread-safe. @since 0.6 */
TW_API double tw_slide_get_objective_power(const tw_slide *s);

/** What tw_slide_choose_level() chose. @since 0.6 */
typedef struct tw_level_choice {
    int level;            /**< the level read */
    int reduce;           /**< 1, or k >= 2: that level is reduced k x k by area average */
    int64_t w, h;         /**< size of the image: the level's, or ceil(w / k) x ceil(h / k) */
    double mpp_x, mpp_y;  /**< microns per pixel of that image, 0 when unknown */
    double magnification; /**< objective power of that image, 0 when unknown */
} tw_level_choice;

/**
 * The level to read for a pixel size of @p mpp microns, or for an objective magnification of
 * @p magnification (give one, the other 0): the coarsest level at least as fine as asked (a
 * level up to 1% coarser counts as fine enough: real downsamples are 4.0003 and the like),
 * then, when that level is finer than asked by 2x or more, the whole factor k it is finer by:
 * the level is read reduced k x k by area average (docs/io.md, "Resolution and metadata").
 * @return TW_OK, TW_E_INVALID (NULL argument, both or neither given, not a positive number,
 * the slide's mpp (objective power) unknown, asked finer than level 0; a message naming the
 * file). Thread-safe. @since 0.6
 */
TW_API TW_NODISCARD tw_status tw_slide_choose_level(const tw_slide *s, double mpp,
                                                   double magnification, tw_level_choice *out,
                                                   tw_error *err);

/**
 * Property @p name ("openslide.vendor", "tiff.ImageDescription", ...), or NULL (no such
 * property, or a NULL argument). Owned by @p s, valid until it is closed. Properties are
 * listed with tw_slide_get_property_names(). Thread-safe. @since 0.1
 */
TW_API const char *tw_slide_get_property(const tw_slide *s, const char *name);

/** NULL-terminated list of property names, owned by @p s (NULL for a NULL slide).
 *  Thread-safe. @since 0.1 */
TW_API const char *const *tw_slide_get_property_names(const tw_slide *s);

/**
 * Read the region (x, y, w, h) of @p level into @p dst: h rows of w pixels of
 * tw_slide_get_channels() interleaved samples of tw_slide_get_sample_type(), rows
 * @p dst_stride bytes apart. The region must lie inside the level.
 * @return TW_OK, TW_E_INVALID (NULL @p s or @p dst, no such level, @p w or @p h below 1,
 * region outside the level, @p dst_stride below a row; @p dst untouched), TW_E_IO /
 * TW_E_FORMAT (decode failure), TW_E_NOMEM. Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_slide_read_region(tw_slide *s, int level, int64_t x, int64_t y,
                                                  int64_t w, int64_t h, void *dst,
                                                  size_t dst_stride, tw_error *err);

/** Compression of written tiles. @since 0.1 */
typedef enum tw_compression {
    TW_COMPRESS_NONE = 0,
    TW_COMPRESS_DEFLATE,
    TW_COMPRESS_ZSTD,
    TW_COMPRESS_LZW,  /**< @since 0.3 */
    TW_COMPRESS_JPEG  /**< lossy; 8-bit, 1 or 3 channels only. @since 0.3 */
} tw_compression;

/** Parse "none", "deflate", "zstd", "lzw", "jpeg" (exact, lower case).
 *  @return TW_OK, TW_E_INVALID (NULL argument, unknown name; *@p out untouched).
 *  Thread-safe. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_compression_parse(const char *name, tw_compression *out);

/** How the levels of a written pyramid are laid out. @since 0.3 */
typedef enum tw_layout {
    TW_LAYOUT_TIFF = 0, /**< every level a directory of the main chain, levels >= 1 marked
                             reduced-resolution (OpenSlide generic-tiff, vips, libtiff) */
    TW_LAYOUT_OME       /**< OME-TIFF: level 0 in the main directory with OME-XML in its
                             ImageDescription, levels >= 1 in its SubIFDs (QuPath, Bio-Formats) */
} tw_layout;

/** Parse "tiff", "ome". @return TW_OK, TW_E_INVALID (NULL argument, unknown name; *@p out
 *  untouched). Thread-safe. @since 0.3 */
TW_API TW_NODISCARD tw_status tw_layout_parse(const char *name, tw_layout *out);

/** A tiled BigTIFF being written. @since 0.1 */
typedef struct tw_writer tw_writer;

/** What to write. Initialise with tw_writer_opts_init(). @since 0.1 */
typedef struct tw_writer_opts {
    size_t struct_size;          /**< set by tw_writer_opts_init() */
    int64_t w, h;                /**< level 0 size in pixels */
    int channels;                /**< 1, 2 (TW_U32 coordinate pairs, e.g. EDT indices) or 3
                                      (RGB, TW_U8/TW_U16 only) */
    tw_sample_type type;
    int32_t tile_w, tile_h;      /**< multiples of 16 (TIFF rule), default 512 */
    int n_levels;                /**< >= 1; level k is ceil(w / 2^k) x ceil(h / 2^k) */
    tw_compression compression;  /**< default deflate */
    int level_of_compression;    /**< 0 = codec default (deflate 1, zstd 3); deflate 1..12
                                      (libdeflate's; zlib's 1..9 up to 0.6), zstd 1..22 */
    double mpp_x, mpp_y;         /**< 0 = unknown (no resolution tags) */
    const char *description;     /**< ImageDescription (TW_LAYOUT_OME: the OME Image's
                                      Description; the ImageDescription is the OME-XML), may
                                      be NULL */
    const char *software;        /**< Software tag, may be NULL */
    tw_layout layout;            /**< default TW_LAYOUT_TIFF. @since 0.3 */
    int quality;                 /**< JPEG quality 1..100, 0 = 90. @since 0.3 */
} tw_writer_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe. @since 0.1 */
TW_API void tw_writer_opts_init(tw_writer_opts *o);

/**
 * Create a temporary file beside @p path and write the headers. The caller owns *@p out and
 * ends it with tw_writer_close() or tw_writer_abort(); @p o is copied (its strings too).
 * @return TW_OK, TW_E_INVALID (NULL argument, struct_size not set by tw_writer_opts_init(), an
 * option out of range: size, channels, type, tile size, levels, compression and its level or
 * quality, layout, mpp; @p path a folder), TW_E_IO (cannot create), TW_E_NOMEM.
 * Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_writer_open(const char *path, const tw_writer_opts *o,
                                            tw_writer **out, tw_error *err);

/**
 * Compress and write tile (tx, ty) of @p level from @p data (tile_h rows of tile_w pixels,
 * @p stride bytes apart; edge tiles are padded by the writer, only the part inside the image
 * is read). Compression runs on the calling thread (LZW and JPEG: in libtiff, serialised);
 * only the file append is serialised. Tiles may come in any order, levels mixed: a tile of a
 * level after the one being written waits in a scratch file beside the output (on disk,
 * unlinked) until its level's turn (@since 0.3; before, all tiles of level k came first).
 * @p data stays the caller's. After a failed append (TW_E_IO), the writer keeps that error:
 * later writes and tw_writer_close() return it.
 * @return TW_OK, TW_E_INVALID (NULL @p wr or @p data, no such level, tile outside the level,
 * @p stride below a row, tile written twice), TW_E_IO, TW_E_NOMEM.
 * Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_writer_write_tile(tw_writer *wr, int level, int64_t tx,
                                                  int64_t ty, const void *data, size_t stride,
                                                  tw_error *err);

/**
 * Finish: check every tile of every level was written, close the file and rename it to the
 * output path. On failure the temporary file is removed. Frees @p wr in every case; no
 * tw_writer_write_tile() may be running.
 * @return TW_OK, TW_E_INVALID (NULL @p wr, missing tiles), TW_E_IO, or the writer's sticky
 * error. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_writer_close(tw_writer *wr, tw_error *err);

/** Abandon: remove the temporary file and free @p wr. NULL is a no-op; no
 *  tw_writer_write_tile() may be running. @since 0.1 */
TW_API void tw_writer_abort(tw_writer *wr);

/** Options of the synthetic sample slide. @since 0.1 */
typedef struct tw_sample_opts {
    size_t struct_size;    /**< set by tw_sample_opts_init() */
    int64_t w, h;          /**< level-0 size, default 8192 x 6144 */
    uint64_t seed;         /**< default 1 */
    int32_t tile;          /**< tile edge, default 256 */
    tw_compression compression; /**< default deflate */
} tw_sample_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe. @since 0.1 */
TW_API void tw_sample_opts_init(tw_sample_opts *o);

/**
 * Write the deterministic synthetic tissue-like slide: 8-bit RGB, tiled, pyramidal (levels
 * halve while the next still covers a whole tile both ways, each the 2x2 mean of the one
 * above, written through tw_writer while level 0 streams), mpp 0.25, glass background,
 * tissue regions with stroma texture and nuclei-like blobs. Same options give the same bytes
 * on any machine.
 * OpenSlide opens it as "generic-tiff". Nothing is left at @p path on failure.
 * @return TW_OK, TW_E_INVALID (NULL argument, struct_size not set by tw_sample_opts_init(),
 * size, tile or compression out of range), TW_E_IO, TW_E_NOMEM. Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_sample_write(const char *path, const tw_sample_opts *o,
                                             tw_error *err);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_IMAGE_H */
