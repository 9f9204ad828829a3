/* SPDX-License-Identifier: MIT */
/* tilewave: the operations, each submitted as a job on a runtime. */
#ifndef TILEWAVE_OPS_H
#define TILEWAVE_OPS_H

#include "tilewave/common.h"
#include "tilewave/image.h"
#include "tilewave/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup tw_ops Operations
 *
 * Each operation reads its input images (a slide level and region, or a caller buffer), runs
 * tile by tile on the runtime's workers, and writes a tiled BigTIFF (or a caller buffer).
 * Options structs are initialised by their `_init` function (which sets struct_size) and then
 * edited. Submission validates the input synchronously (errors in @p err); failures while
 * running are the job's sticky error. Tiling never changes the result: any tile size and
 * CPU/GPU mix gives the same bytes.
 *
 * Every `tw_*_submit(rt, o, out, err)` works alike. @p rt, @p o and @p out are required. The
 * caller keeps @p o and everything it points to (paths, caller buffers (::tw_host_image),
 * stats, reports) valid and unchanged until the job has ended; they stay the caller's. On
 * TW_OK the job runs and the caller owns *@p out, to free with tw_job_destroy() (before
 * tw_runtime_destroy()). On failure nothing runs, *@p out is untouched and nothing is left at
 * the output paths. #TW_E_INVALID: a NULL @p rt, @p o or @p out ("OP: NULL argument"), a
 * struct_size not set by the options' `_init` ("OP: options not initialised with ..."), an
 * enum out of range, a negative tile size or only one side 0, a connectivity other than 4 or
 * 8, no input or no output given (or both a file and an image), an input level or region
 * outside the slide, host images of the wrong size, type or stride, an output over its own
 * input, a report or stats struct not initialised. #TW_E_IO / #TW_E_FORMAT: the input cannot
 * be opened or read, the output cannot be created. All submit functions are thread-safe:
 * several threads may submit to one runtime.
 * @{
 */

/** How `gray` (and every operation's RGB input) makes one channel from RGB. @since 0.1 */
typedef enum tw_gray_mode {
    TW_GRAY_LUMINANCE = 0, /**< (299 R + 587 G + 114 B + 500) / 1000, ITU-R BT.601, exact integer */
    TW_GRAY_R,
    TW_GRAY_G,
    TW_GRAY_B,
    TW_GRAY_HEMATOXYLIN, /**< colour deconvolution (8-bit RGB only): the hematoxylin
                              concentration, 0..255, more stain = higher (docs/io.md, "Gray from
                              colour"). @since 0.5 */
    TW_GRAY_EOSIN        /**< the same, eosin. @since 0.5 */
} tw_gray_mode;

/** How an input becomes a mask. @since 0.5 */
typedef enum tw_threshold_mode {
    TW_THRESHOLD_NONE = 0, /**< gray values as they are (default) */
    TW_THRESHOLD_VALUE,    /**< 0 / the type's maximum: foreground = value > threshold */
    TW_THRESHOLD_OTSU      /**< the same with Otsu's threshold of the input: scikit-image
                                threshold_otsu of the histogram of every pixel of the level and
                                region, after RGB to one channel (docs/io.md, "Otsu"; before 0.7,
                                of a low-resolution level) */
} tw_threshold_mode;

/**
 * What was done to an input, filled by the operation: the threshold at submission, the
 * counts when the job ends (added to what the struct already holds, so inputs may share one).
 * Zero it before use. @since 0.5
 */
typedef struct tw_input_report {
    double threshold;        /**< the threshold applied (Otsu's when asked for); -1: none */
    int otsu_level;          /**< the slide level Otsu was computed on: the input's own level
                                  (since 0.7; before, a low-resolution level, which
                                  tissue_level now reports) */
    double tissue_fraction;  /**< --tissue: tissue share of the low-resolution level (before the
                                  margin) */
    int64_t reads;           /**< regions the operation read (tiles, bands, rows of tiles) */
    int64_t skipped;         /**< of which had no tissue and were not read from the slide */
    int level;               /**< the slide level read. @since 0.6 */
    int reduce;              /**< 1, or k: that level was reduced k x k by area average
                                  (tw_input.mpp, .magnification). @since 0.6 */
    double mpp_x, mpp_y;     /**< microns per pixel of the image the operation saw, 0 when
                                  unknown. @since 0.6 */
    int tissue_level;        /**< --tissue: the slide level the tissue mask was computed on.
                                  @since 0.7 */
} tw_input_report;

/** The input of an operation. @since 0.1 */
typedef struct tw_input {
    const char *path;
    tw_reader_kind reader; /**< default TW_READER_AUTO */
    int level;             /**< default 0 */
    int64_t x, y, w, h;    /**< region in the level's frame; w = h = 0: the whole level */
    /* @since 0.5: colour slides to gray and masks (docs/io.md, "Gray from colour"). All zero
     * (the default) reads RGB as luminance, unthresholded, every tile. */
    tw_gray_mode gray;          /**< how RGB becomes one channel (ignored by `gray`, which has
                                     its own mode) */
    bool stains_set;            /**< use `stains` instead of the config's gray.stain_vectors */
    double stains[9];           /**< hematoxylin, eosin, residual: (R, G, B) optical densities */
    tw_threshold_mode threshold_mode; /**< 8- and 16-bit inputs only */
    double threshold;           /**< TW_THRESHOLD_VALUE: foreground = gray value > it */
    bool invert;                /**< foreground = gray value <= the threshold instead */
    bool tissue;                /**< skip regions without tissue: not read, given the value a
                                     glass pixel gets (RGB slides) */
    const char *tissue_mask_path; /**< optional: write the low-resolution tissue mask there */
    tw_input_report *report;    /**< optional, zeroed by the caller */
    /* @since 0.6: the level by resolution (docs/io.md, "Resolution and metadata"). */
    double mpp;                 /**< > 0: read the level for this many microns per pixel, the
                                     coarsest at least as fine, reduced k x k by area average
                                     when it is k >= 2 times finer (tw_slide_choose_level());
                                     `level` must then be 0 and the region is in the frame of
                                     that image; the slide's mpp must be known. 0: `level` */
    double magnification;       /**< > 0: the same for an objective magnification (5 for 5x;
                                     the slide's objective power must be known); not with mpp */
    const char *channel;        /**< the channel of a multi-channel image to read (qptiff,
                                     OME-TIFF; tw_slide_get_channel_count()): its name or index
                                     (tw_slide_set_channel()). NULL: none, and such an image is
                                     refused (TW_E_INVALID naming its channels), never read as
                                     one of them silently; set for an image without channels,
                                     TW_E_INVALID too. @since 0.7 */
} tw_input;

/** The output of an operation. @since 0.1 */
typedef struct tw_output {
    const char *path;
    tw_compression compression; /**< default: the config's io.compression */
    bool compression_set;       /**< false: use the config */
    bool pyramid;               /**< write downsampled levels too (built while streaming,
                                     halving while a level still covers a whole tile both
                                     ways); false: the config's io.pyramid. @since 0.3 */
    tw_layout layout;           /**< used when layout_set; else the config's io.layout */
    bool layout_set;
    int quality;                /**< JPEG quality 1..100; 0: the config's io.jpeg_quality;
                                     set without JPEG compression: TW_E_INVALID */
    const char *description;    /**< e.g. the command line, kept in the file's metadata after
                                     "tilewave VERSION OP ..."; may be NULL. @since 0.3 */
    const char *overlay;        /**< also write the result blended over the input slide as an
                                     8-bit RGB pyramid here (docs/io.md); NULL: none. Needs a
                                     file input. @since 0.3 */
    bool overlay_deflate;       /**< the overlay in deflate instead of JPEG */
} tw_output;

/** Parse "luminance", "r", "g", "b", "hematoxylin", "eosin". @return TW_OK, TW_E_INVALID
 *  (NULL argument, unknown name; *@p out untouched). Thread-safe. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_gray_mode_parse(const char *name, tw_gray_mode *out);

/** Options of tw_gray_submit(). @since 0.1 */
typedef struct tw_gray_opts {
    size_t struct_size;      /**< set by tw_gray_opts_init() */
    tw_input input;
    tw_output output;
    tw_gray_mode mode;
    int32_t tile_w, tile_h; /**< 0: the config's gray.tile (or tile.size) */
} tw_gray_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.1 */
TW_API void tw_gray_opts_init(tw_gray_opts *o);

/**
 * Convert the input to one channel of the same sample type (RGB: by @p mode; gray input is
 * copied) and write it. The input's threshold and tissue options apply (its `gray` field does
 * not: @p mode does). CPU (OpenMP) and CUDA variants give identical bytes.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_gray_submit(tw_runtime *rt, const tw_gray_opts *o,
                                            tw_job **out, tw_error *err);

/** Options of tw_convert_submit(). Initialise with tw_convert_opts_init(). @since 0.3 */
typedef struct tw_convert_opts {
    size_t struct_size;      /**< set by tw_convert_opts_init() */
    tw_input input;         /**< the slide or TIFF, its level and region; its gray, threshold
                                 and tissue fields must stay zero (pixels are copied as read) */
    tw_output output;       /**< the copy: compression, pyramid, layout, quality, description;
                                 no overlay (there is no result to blend) */
    int32_t tile_w, tile_h; /**< processing tiles; 0: the config's tile.size */
} tw_convert_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.3 */
TW_API void tw_convert_opts_init(tw_convert_opts *o);

/**
 * Copy a level (or a region of it) of any slide tilewave reads into a tiled BigTIFF, streaming
 * tile by tile: the pixels as read (channels and sample type kept: RGB stays RGB, 16-bit stays
 * 16-bit), optionally as a pyramid (TIFF pages or OME-TIFF SubIFDs) and with the input's
 * resolution. A no-op operation: what it measures is read plus write throughput. CPU workers
 * only. Memory stays bounded by a window of tiles in flight.
 * @return TW_OK (the job runs), TW_E_INVALID (bad options, gray/threshold/tissue set, an
 * overlay asked for, JPEG for a sample type it cannot hold), TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.3
 */
TW_API TW_NODISCARD tw_status tw_convert_submit(tw_runtime *rt, const tw_convert_opts *o,
                                               tw_job **out, tw_error *err);

/**
 * @name Morphological reconstruction and the operations built on it
 *
 * Grayscale reconstruction by dilation rho_I(J): the marker J dilated under the mask I until
 * nothing changes (J <= I required), with 4- or 8-connectivity; by erosion: the dual
 * (J >= I required; MAX - rho_{MAX-I}(MAX-J)). 8- and 16-bit, marker and mask of one type and
 * size; RGB inputs are first converted to luminance as tw_gray_submit() does. Equal to
 * scikit-image `reconstruction(J, I, method, footprint)` with the 3x3 square (8) or the cross
 * (4) as footprint.
 *
 * The image is cut into tiles; each tile is reconstructed on its own by a Tile Propagation
 * task (CPU or GPU), and Border Propagation tasks exchange the shared borders between tiles
 * and re-run propagation, seeded with the changed border pixels only, on the tiles that
 * receive some, until nothing changes (see ops/mrecon.c). The result does not depend on the
 * tile size, the number of workers or the CPU/GPU mix.
 *
 * Inputs and outputs are files (tw_input / tw_output, as for gray) or caller buffers
 * (tw_host_image). The whole marker and mask are held in memory as tiles (about 2 bytes per
 * pixel for 8-bit images, 4 for 16-bit); spilling to disk for slides beyond memory comes
 * later.
 * @{
 */

/**
 * A one-channel image in host memory, owned by the caller, which keeps it valid until the job
 * that uses it has ended. No alignment is required. @since 0.2
 */
typedef struct tw_host_image {
    void *data;          /**< first sample of row 0; NULL: not given */
    int64_t w, h;        /**< pixels */
    size_t stride;       /**< bytes between rows; 0: packed (w * sample size) */
    tw_sample_type type; /**< TW_U8 or TW_U16 for these operations */
} tw_host_image;

/** Reconstruction by dilation or by erosion. @since 0.2 */
typedef enum tw_mrecon_method {
    TW_MRECON_DILATION = 0, /**< rho_I(J): marker below the mask, raised under it */
    TW_MRECON_EROSION       /**< the dual: marker above the mask, lowered over it */
} tw_mrecon_method;

/** Rounds recorded one by one in ::tw_mrecon_stats; later rounds are added to the last. */
#define TW_MRECON_STATS_ROUNDS 64

/**
 * What a reconstruction job did, for benchmarks and tuning. Round 0 is the first pass (one
 * full TP task per tile); round r >= 1 holds the seeded TP tasks created by BP task r - 1.
 * Initialise with tw_mrecon_stats_init(). @since 0.2
 */
typedef struct tw_mrecon_stats {
    size_t struct_size;      /**< set by tw_mrecon_stats_init() */
    int64_t tiles;           /**< tiles of the grid */
    int32_t tile_w, tile_h;  /**< their size */
    int64_t rounds;          /**< BP tasks run; the last one found nothing to propagate */
    int64_t tp_tasks;        /**< TP tasks run, every round */
    int64_t tp_cpu, tp_cuda; /**< of which on CPU workers / on GPU workers */
    int64_t seeds;           /**< border pixels raised by BP and re-seeded, every round */
    int64_t pairs_compared;  /**< shared borders (edges and corners) compared by BP */
    double load_s;           /**< from submission until every tile was read and prepared */
    double propagate_s;      /**< from then until the last BP task found nothing to do */
    double store_s;          /**< from then until the output was complete */
    double bp_s;             /**< time spent inside BP tasks (part of propagate_s) */
    int64_t tp_per_round[TW_MRECON_STATS_ROUNDS];    /**< TP tasks of each round */
    int64_t seeds_per_round[TW_MRECON_STATS_ROUNDS]; /**< seeds given to each round's TPs */
} tw_mrecon_stats;

/** Zero @p s and set its struct_size; NULL is a no-op. Thread-safe. @since 0.2 */
TW_API void tw_mrecon_stats_init(tw_mrecon_stats *s);

/** Options of tw_mrecon_submit(). Initialise with tw_mrecon_opts_init(). @since 0.2 */
typedef struct tw_mrecon_opts {
    size_t struct_size;      /**< set by tw_mrecon_opts_init() */
    tw_input marker;            /**< the marker file, when marker_image.data is NULL */
    tw_input mask;              /**< the mask file, when mask_image.data is NULL */
    tw_host_image marker_image; /**< the marker in memory (data != NULL: used instead) */
    tw_host_image mask_image;   /**< the mask in memory (data != NULL: used instead) */
    tw_output output;           /**< the output file, when result.data is NULL */
    tw_host_image result;       /**< the result in memory: the mask's size and type; may be
                                     the marker's or the mask's own buffer (every input pixel
                                     is read before any output pixel is written) */
    tw_mrecon_method method;    /**< default TW_MRECON_DILATION */
    int conn;                   /**< 4 or 8 (default 8) */
    bool clamp_marker;          /**< clamp a marker above the mask (below, for erosion) to it
                                     instead of failing */
    int32_t tile_w, tile_h;     /**< 0: the config's mrecon.tile_size, else tile.size */
    int64_t queue_capacity;     /**< GPU queue elements; 0: the config's mrecon.queue_capacity */
    tw_mrecon_stats *stats;     /**< optional, initialised with tw_mrecon_stats_init(); filled
                                     when the job ends, before tw_job_wait() returns */
} tw_mrecon_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.2 */
TW_API void tw_mrecon_opts_init(tw_mrecon_opts *o);

/**
 * Reconstruct @p o->marker under @p o->mask and write the result. The inputs are checked
 * synchronously (open, same size and sample type, 8 or 16 bits, 1 or 3 channels); a marker
 * pixel above the mask (below it, for erosion) is found while the job runs and fails it with
 * "mrecon: marker V above mask W at (X, Y)" naming the first such pixel in raster order (in
 * the mask's level frame), unless clamp_marker is set.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM, TW_E_NODEV.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.2
 */
TW_API TW_NODISCARD tw_status tw_mrecon_submit(tw_runtime *rt, const tw_mrecon_opts *o,
                                              tw_job **out, tw_error *err);

/** Parse "dilation" or "erosion". @return TW_OK, TW_E_INVALID (NULL argument, unknown name;
 *  *@p out untouched). Thread-safe. @since 0.2 */
TW_API TW_NODISCARD tw_status tw_mrecon_method_parse(const char *name, tw_mrecon_method *out);

/**
 * Options of the operations built on reconstruction (tw_fill_holes_submit() and the others
 * below); each reads the fields it needs. Initialise with tw_mrecon_filter_opts_init(). @since 0.2
 */
typedef struct tw_mrecon_filter_opts {
    size_t struct_size;      /**< set by tw_mrecon_filter_opts_init() */
    tw_input input;         /**< the image file, when image.data is NULL */
    tw_host_image image;    /**< the image in memory (data != NULL: used instead) */
    tw_output output;       /**< the output file, when result.data is NULL */
    tw_host_image result;   /**< the result in memory (its type: see each operation); may be
                                 the image's own buffer */
    int conn;               /**< 4 or 8; 0 (default): the operation's default */
    int64_t h;              /**< hmax: the height, >= 1 */
    bool dome;              /**< hmax: write the h-dome image instead of the maxima */
    int32_t radius;         /**< open-rec, close-rec: the square is 2 radius + 1 wide, >= 0 */
    int32_t tile_w, tile_h; /**< 0: the config's mrecon.tile_size, else tile.size */
    int64_t queue_capacity; /**< as in ::tw_mrecon_opts */
    tw_mrecon_stats *stats; /**< as in ::tw_mrecon_opts */
} tw_mrecon_filter_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.2 */
TW_API void tw_mrecon_filter_opts_init(tw_mrecon_filter_opts *o);

/** The names before 0.6 (tw_rfilter_opts, tw_rfilter_opts_init()): the same struct and the
 *  same function, kept so that code written against 0.5 builds and links. New code uses the
 *  names above. @deprecated since 0.6 */
typedef tw_mrecon_filter_opts tw_rfilter_opts;
TW_API void tw_rfilter_opts_init(tw_mrecon_filter_opts *o);

/**
 * Fill holes: reconstruction by erosion, under the image, of a marker equal to the image on
 * the image border and to the type's maximum inside; regional minima not connected to the
 * border are raised to the level where they would overflow. On a two-level image {0, v} this
 * is SciPy `binary_fill_holes` (v in the holes). @p conn is the connectivity of the flooded
 * background (default 4, as SciPy's default structure). The result has the image's type.
 * @return as tw_mrecon_submit().
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.2
 */
TW_API TW_NODISCARD tw_status tw_fill_holes_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o,
                                                  tw_job **out, tw_error *err);

/**
 * h-maxima, exactly as scikit-image 0.19 `h_maxima(image, h, footprint)`: R = reconstruction
 * by dilation of max(image - h, 0) under the image; the result is a TW_U8 mask, 1 where
 * image - R >= h and 0 elsewhere in a caller's image, 255 and 0 in a file (since 0.7; 1 before:
 * every 8-bit mask file is 0/255); all 0 when h exceeds max - min of the image. With
 * @p o->dome, the h-dome image image - R instead (the image's type). @p conn default 8.
 * @return as tw_mrecon_submit(); TW_E_INVALID for h < 1.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.2
 */
TW_API TW_NODISCARD tw_status tw_hmax_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o,
                                            tw_job **out, tw_error *err);

/**
 * Regional maxima: h-maxima with h = 1 (TW_U8, 1 on every connected plateau whose neighbours
 * are all lower (255 in a file, as tw_hmax_submit()), 0 elsewhere; all 0 on a constant image),
 * the same as scikit-image
 * `h_maxima(image, 1)` and `local_maxima(image)`. @p conn default 8.
 * @return as tw_mrecon_submit().
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.2
 */
TW_API TW_NODISCARD tw_status tw_regional_max_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o,
                                                    tw_job **out, tw_error *err);

/**
 * Opening by reconstruction: the image eroded by the (2 radius + 1)-square (the window
 * clipped to the image), then reconstructed by dilation under the image. Bright structures
 * the square does not fit in vanish; the others keep their exact shape. @p conn default 8.
 * The result has the image's type. @return as tw_mrecon_submit().
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.2
 */
TW_API TW_NODISCARD tw_status tw_open_rec_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o,
                                                tw_job **out, tw_error *err);

/**
 * Closing by reconstruction, the dual: dilation by the square, then reconstruction by erosion
 * over the image. @return as tw_mrecon_submit().
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.2
 */
TW_API TW_NODISCARD tw_status tw_close_rec_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o,
                                                 tw_job **out, tw_error *err);

/** @} */

/**
 * @name Euclidean distance transform
 *
 * Foreground = pixels above a threshold; every foreground pixel gets its Euclidean distance
 * to the nearest background pixel of the whole image, background pixels 0. Exact (squared
 * distances are integer-exact, the same as SciPy `distance_transform_edt`) whatever the tile
 * size: the image is processed in bands of rows the height of a tile; a first pass over the
 * tiles records, per column, the first and last background row of each tile; each band then
 * gets, per column, the nearest background row above and below it, and runs the separable
 * exact EDT (CPU: Meijster et al.; GPU: PBA+) on its rows alone. Memory: the bands in flight
 * (about 5 bytes a pixel, 13 with indices), plus 8 bytes per column and tile row.
 * @{
 */

/** Output sample format of the distance. @since 0.3 */
typedef enum tw_edt_format {
    TW_EDT_F32 = 0, /**< float32 distance in spacing units (default) */
    TW_EDT_U16,     /**< distance rounded to the nearest integer, saturating at 65535 */
    TW_EDT_SQ32,    /**< exact squared distance in pixels (uint32, saturating at 2^32 - 1);
                         isotropic only */
    TW_EDT_U8       /**< distance in steps (tw_edt_opts.step) rounded to the nearest integer,
                         saturating at 255: a map for viewers (OpenSlide, QuPath); the file's
                         description carries the step. CPU workers only. @since 0.7 */
} tw_edt_format;

/** Parse "f32", "u16", "sq32", "u8" (since 0.7). @return TW_OK, TW_E_INVALID (NULL argument, unknown name;
 *  *@p out untouched). Thread-safe. @since 0.3 */
TW_API TW_NODISCARD tw_status tw_edt_format_parse(const char *name, tw_edt_format *out);

/** The algorithm. @since 0.3 */
typedef enum tw_edt_method {
    TW_EDT_EXACT = 0, /**< separable exact EDT, tiled (default) */
    TW_EDT_WAVEFRONT  /**< the IWPP propagation of [Teodoro13] (Danielsson-like, 8 neighbours):
                           APPROXIMATE (never below the exact distance); the whole image is
                           one tile; for comparison */
} tw_edt_method;

/** Parse "exact", "wavefront". @return TW_OK, TW_E_INVALID (NULL argument, unknown name;
 *  *@p out untouched). Thread-safe. @since 0.3 */
TW_API TW_NODISCARD tw_status tw_edt_method_parse(const char *name, tw_edt_method *out);

/** What an EDT job found, filled when the job ends (before tw_job_wait() returns). @since 0.3 */
typedef struct tw_edt_report {
    size_t struct_size;   /**< set by tw_edt_report_init() */
    double threshold;     /**< the threshold applied (Otsu's when asked for) */
    int64_t background;   /**< background pixels found */
    int64_t bands;        /**< bands of rows processed */
    int64_t bands_cpu, bands_cuda; /**< of which on CPU workers / GPU workers */
} tw_edt_report;

/** Zero @p r and set its struct_size; NULL is a no-op. Thread-safe. @since 0.3 */
TW_API void tw_edt_report_init(tw_edt_report *r);

/** Options of tw_edt_submit(). Initialise with tw_edt_opts_init(). @since 0.3 */
typedef struct tw_edt_opts {
    size_t struct_size;      /**< set by tw_edt_opts_init() */
    tw_input input;            /**< the image file, when image.data is NULL; RGB is converted
                                    to luminance first */
    tw_host_image image;       /**< the image in memory (data != NULL: used instead); TW_U8,
                                    TW_U16, TW_U32 or TW_F32 */
    tw_output output;          /**< the distance file, when result.data is NULL */
    tw_host_image result;      /**< the distance in memory: the image's size, the format's
                                    type (TW_F32, TW_U16, TW_U32) */
    const char *indices_path;  /**< optional: also write the nearest background pixel of every
                                    pixel, a 2-channel TW_U32 BigTIFF (row, column) */
    tw_host_image indices;     /**< optional, in memory instead: type TW_U32, the image's size,
                                    each row 2 w samples (row, column interleaved); stride 0 =
                                    8 w bytes */
    double threshold;          /**< foreground = value > threshold (default 0: nonzero) */
    bool threshold_otsu;       /**< use Otsu's threshold of the image's histogram instead
                                    (8- and 16-bit images; the same as scikit-image
                                    threshold_otsu, foreground = value > it) */
    bool invert;               /**< foreground = value <= threshold instead (e.g. dark tissue
                                    on bright glass) */
    double spacing_x, spacing_y; /**< pixel size along columns and rows (default 1, 1) */
    bool spacing_auto;         /**< use the input's mpp (an error when it has none) */
    tw_edt_format format;      /**< default TW_EDT_F32 */
    tw_edt_method method;      /**< default TW_EDT_EXACT */
    int32_t tile_w, tile_h;    /**< 0: the config's edt.tile_size, else tile.size */
    tw_edt_report *report;     /**< optional, initialised with tw_edt_report_init() */
    double step;               /**< TW_EDT_U8 and TW_EDT_U16: spacing units a grey level
                                    (default 1): the value is floor(d / step + 0.5) with d in
                                    spacing units, computed as the distance with the spacing
                                    divided by step. Files written with a step other than 1, or
                                    as u8, carry it in their description (DistanceStep,
                                    DistanceUnit). @since 0.7 */
} tw_edt_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.3 */
TW_API void tw_edt_opts_init(tw_edt_opts *o);

/**
 * Distance transform of @p o->input (or image) into @p o->output (or result). With no
 * background pixel at all, every distance is +inf (f32) or the format's maximum and every
 * index (2^32 - 1, 2^32 - 1); the job logs a warning and succeeds. Image sides are limited to
 * 2^20 pixels. Bad options (spacing <= 0, sq32 with spacing, otsu on a float image,
 * spacing_auto without mpp, indices of the wrong size) are TW_E_INVALID before anything runs.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.3
 */
TW_API TW_NODISCARD tw_status tw_edt_submit(tw_runtime *rt, const tw_edt_opts *o, tw_job **out,
                                           tw_error *err);

/** @} */

/**
 * @defgroup maxtree Max-tree and attribute filters
 * The canonical max-tree of an 8- or 16-bit image ([Blin21], [Blin22]) and the connected
 * filters built on it. Color inputs are converted to luminance (8-bit) first.
 *
 * Canonical form: with p < q iff f(p) < f(q), or f(p) = f(q) and index(p) > index(q), every
 * pixel but the root has a parent below it, every parent is a canonical pixel, and the
 * canonical pixel of a node is its pixel of largest raster index (y * w + x) at the node's
 * level. The root points to itself. Indices are 32-bit up to 2^32 - 1 pixels, 64-bit above.
 * @{
 */

/** Options of tw_maxtree_submit(). Initialise with tw_maxtree_opts_init(). @since 0.4 */
typedef struct tw_maxtree_opts {
    size_t struct_size;      /**< set by tw_maxtree_opts_init() */
    tw_input input;           /**< the image file, when image.data is NULL */
    tw_host_image image;      /**< the image in memory (data != NULL: used instead); TW_U8 or
                                   TW_U16 */
    tw_output output;         /**< the parent image file (TW_U32 or TW_U64 raster indices) */
    tw_host_image parent;     /**< the parent image in memory instead (data != NULL): the
                                   image's size, type TW_U32 or TW_U64 as index_bits says */
    const char *area_path;    /**< optional: also write, for every pixel, the area (pixels) of
                                   the node it belongs to, same type as the parent image */
    tw_host_image area;       /**< optional, in memory instead: the image's size, same type */
    int connectivity;         /**< 4 (default) or 8 */
    int index_bits;           /**< 0 (default): 32 up to 2^32 - 1 pixels, else 64; or 32, 64 */
} tw_maxtree_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.4 */
TW_API void tw_maxtree_opts_init(tw_maxtree_opts *o);

/**
 * Canonical max-tree of @p o->input (or image), which must fit in memory (the image, its
 * parent image and, on a GPU worker, both on the device): on a GPU worker when the runtime
 * has one and the image has at most 2^32 - 1 pixels, else on the CPU workers.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.4
 */
TW_API TW_NODISCARD tw_status tw_maxtree_submit(tw_runtime *rt, const tw_maxtree_opts *o,
                                               tw_job **out, tw_error *err);

/** Attribute filters. @since 0.4 */
typedef enum tw_attr_filter {
    TW_AREA_OPENING = 0, /**< = scikit-image area_opening(image, threshold, connectivity): a
                              node survives iff its area >= threshold; every pixel takes the
                              level of its nearest surviving ancestor, or the type's minimum
                              when none survives (threshold above the image's area) */
    TW_AREA_CLOSING,     /**< the dual (= scikit-image area_closing): the opening of the
                              inverted image, inverted */
    TW_HEIGHT_OPENING,   /**< a node survives iff its height (contrast), the highest level
                              inside it minus its parent's level, is >= threshold (Higra's
                              attribute_height); the root always survives */
    TW_HEIGHT_CLOSING    /**< the dual */
} tw_attr_filter;

/** Parse "area-open", "area-close", "height-open", "height-close". @return TW_OK,
 *  TW_E_INVALID (NULL argument, unknown name; *@p out untouched). Thread-safe. @since 0.4 */
TW_API TW_NODISCARD tw_status tw_attr_filter_parse(const char *name, tw_attr_filter *out);

/** What an attribute-filter job did, filled when the job ends. @since 0.4 */
typedef struct tw_attr_filter_report {
    size_t struct_size;          /**< set by tw_attr_filter_report_init() */
    int64_t tiles;               /**< tiles of the grid */
    int32_t tile_w, tile_h;      /**< their size */
    int64_t tp_cpu, tp_cuda;     /**< tile tasks (both passes) on CPU / GPU workers */
    int64_t border_nodes;        /**< nodes of all border max-trees together */
    int64_t border_edges;        /**< links between adjacent tiles' border nodes merged */
    tw_device_type merge_device; /**< the device of the worker that merged (BP); TW_DEVICE_CPU
                                      when there was a single tile */
    double tree_s;               /**< first pass: local trees and border max-trees */
    double merge_s;              /**< the border max-tree merge (BP) */
    double filter_s;             /**< second pass: filtering and writing */
} tw_attr_filter_report;

/** Zero @p r and set its struct_size; NULL is a no-op. Thread-safe. @since 0.4 */
TW_API void tw_attr_filter_report_init(tw_attr_filter_report *r);

/** Options of tw_attr_filter_submit(). Initialise with tw_attr_filter_opts_init(). @since 0.4 */
typedef struct tw_attr_filter_opts {
    size_t struct_size;      /**< set by tw_attr_filter_opts_init() */
    tw_input input;          /**< the image file, when image.data is NULL */
    tw_host_image image;     /**< the image in memory (data != NULL: used instead); TW_U8 or
                                  TW_U16 */
    tw_output output;        /**< the filtered image file (the input's type) */
    tw_host_image result;    /**< in memory instead: the image's size and type */
    tw_attr_filter filter;   /**< default TW_AREA_OPENING */
    uint64_t threshold;      /**< area in pixels or height in levels (default 1) */
    int connectivity;        /**< 4 (default) or 8 */
    int32_t tile_w, tile_h;  /**< 0: the config's maxtree.tile_size, else tile.size */
    tw_attr_filter_report *report; /**< optional, initialised with tw_attr_filter_report_init() */
} tw_attr_filter_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.4 */
TW_API void tw_attr_filter_opts_init(tw_attr_filter_opts *o);

/**
 * Attribute filter of a whole slide, tile by tile, exact: each tile's local max-tree gives its
 * border max-tree (the nodes touching the tile's border and their ancestors); the border
 * max-trees of all tiles are merged into the attributes of every node that crosses tiles; a
 * second pass filters each tile with its local tree and those merged attributes. No
 * whole-image tree is built; the result equals the in-memory filter for every tile size.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.4
 */
TW_API TW_NODISCARD tw_status tw_attr_filter_submit(tw_runtime *rt,
                                                   const tw_attr_filter_opts *o, tw_job **out,
                                                   tw_error *err);

/** @} */

/**
 * @defgroup tos Tree of shapes and the grain filter
 * The tree of shapes ([deVries24]) of an 8- or 16-bit image in memory, as Géraud et al. compute
 * it on the plain map of the image in the Khalimsky grid, with an exterior at level m = the
 * floor of the mean of the image's border pixels (Higra's
 * component_tree_tree_of_shapes_image2d with its default "mean" padding: the same tree). A
 * shape is a saturated (hole-filled) connected component of a strict level cut {f < t} or
 * {f > t}: 4-connected, holes 8-connected, on images without saddles; at a saddle (a 2 x 2
 * block whose diagonals are strictly separated) the propagation from the exterior decides
 * which diagonal connects. Colour inputs are converted to one channel first (tw_input.gray).
 * Computed on the CPU workers: a parallel sort whose independent sub-propagations are tasks,
 * the max-tree of the sorted ranks (on a GPU worker when the runtime has one whose memory
 * budget holds about 13 bytes a face of the grid: the same bytes), un-interpolation
 * (docs/tos.md). Images up to about 2^29
 * pixels ((2w - 1)(2h - 1) below 2^31); 19 to 31 bytes of scratch a pixel (docs/tos.md,
 * "Memory").
 *
 * Representation (a parent image of uint32 raster indices y * w + x): a node is a shape's
 * pixels that lie in no smaller shape, all of one level, the node's level; its canonical pixel
 * is its pixel of largest raster index; every other pixel of the node points to it, and it
 * points to the canonical pixel of the parent node (the smallest larger shape). The root, the
 * whole image at level m, points to itself. When no pixel has the root as its node (no border
 * pixel at level m connected to the exterior), the root is implicit: its children's canonical
 * pixels point to themselves (there are then at least two), and the tree's root is the whole
 * image at level m. A node's area is the number of pixels of its shape (itself and its
 * descendants).
 * @{
 */

/** What a tree-of-shapes or grain job found, filled when the job ends. @since 0.5 */
typedef struct tw_tos_report {
    size_t struct_size;         /**< set by tw_tos_report_init() */
    uint32_t exterior;          /**< m, the exterior's (and the root's) level */
    bool implicit_root;         /**< the root holds no pixel (see @ref tos) */
    int64_t nodes;              /**< nodes holding pixels (an implicit root is not counted) */
    int64_t parts;              /**< independent sub-propagations the sort ran (1 + splits) */
    int64_t blocks;             /**< blocks of the max-tree of the ranks */
    int64_t scratch_bytes;      /**< the job's peak scratch, from the sizes of its arrays
                                     (the grid, bit map, queues, tree nodes; the image and
                                     the outputs not counted; allocator overhead neither) */
    double sort_s;              /**< interpolation, immersion and the parallel sort */
    double tree_s;              /**< the max-tree of the ranks and un-interpolation */
    double attr_s;              /**< areas and the grain filter */
    tw_device_type mt_device;   /**< where the max-tree of the ranks ran: TW_DEVICE_CUDA (one
                                     whole-grid task on a GPU worker, when one holds the grid)
                                     or TW_DEVICE_CPU (blocks). @since 0.7 */
    double mt_s;                /**< the max-tree of the ranks, part of tree_s (on a GPU: the
                                     uploads and downloads included). @since 0.7 */
    int64_t comp_parts;         /**< of @c parts, those the sub-tree split made (a part's
                                     queue divided by the components of its remaining
                                     region; 16-bit images, see @ref tos). @since 0.7 */
} tw_tos_report;

/** Zero @p r and set its struct_size; NULL is a no-op. Thread-safe. @since 0.5 */
TW_API void tw_tos_report_init(tw_tos_report *r);

/** Options of tw_tos_submit(). Initialise with tw_tos_opts_init(). @since 0.5 */
typedef struct tw_tos_opts {
    size_t struct_size;      /**< set by tw_tos_opts_init() */
    tw_input input;          /**< the image file, when image.data is NULL */
    tw_host_image image;     /**< the image in memory (data != NULL: used instead); TW_U8 or
                                  TW_U16 */
    tw_output output;        /**< the parent image file (TW_U32 raster indices) */
    tw_host_image parent;    /**< the parent image in memory instead (data != NULL): the
                                  image's size, TW_U32 */
    const char *area_path;   /**< optional: also write, for every pixel, the area (pixels) of
                                  its node, TW_U32 */
    tw_host_image area;      /**< optional, in memory instead: the image's size, TW_U32 */
    tw_tos_report *report;   /**< optional, initialised with tw_tos_report_init() */
} tw_tos_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.5 */
TW_API void tw_tos_opts_init(tw_tos_opts *o);

/**
 * Tree of shapes of @p o->input (or image) as a parent image (see @ref tos), which must fit
 * in memory with its scratch, on the CPU workers (the max-tree of the ranks on a GPU worker
 * when there is one, see @ref tos).
 * @return TW_OK (the job runs), TW_E_INVALID (also: an image of more than about 2^29
 * pixels), TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.5
 */
TW_API TW_NODISCARD tw_status tw_tos_submit(tw_runtime *rt, const tw_tos_opts *o, tw_job **out,
                                           tw_error *err);

/** Options of tw_grain_submit(). Initialise with tw_grain_opts_init(). @since 0.5 */
typedef struct tw_grain_opts {
    size_t struct_size;      /**< set by tw_grain_opts_init() */
    tw_input input;          /**< the image file, when image.data is NULL */
    tw_host_image image;     /**< the image in memory (data != NULL: used instead); TW_U8 or
                                  TW_U16 */
    tw_output output;        /**< the filtered image file (the input's type) */
    tw_host_image result;    /**< in memory instead: the image's size and type */
    uint64_t area;           /**< shapes of fewer pixels are removed (default 1: none) */
    tw_tos_report *report;   /**< optional, initialised with tw_tos_report_init() */
} tw_grain_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.5 */
TW_API void tw_grain_opts_init(tw_grain_opts *o);

/**
 * Grain filter (the self-dual area filter) of @p o->input (or image): every shape of fewer
 * than @p o->area pixels is removed, so every pixel takes the level of its node's nearest
 * ancestor, itself included, whose area is at least @p o->area; the root is never removed
 * (an area above the image's gives every pixel the level m). Equal to Higra's
 * reconstruct_leaf_data(tree, altitudes, attribute_area(tree) < area) on its tree of shapes.
 * In memory, on the CPU workers, as tw_tos_submit().
 * @return TW_OK (the job runs), TW_E_INVALID (also: area 0), TW_E_IO, TW_E_FORMAT,
 * TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.5
 */
TW_API TW_NODISCARD tw_status tw_grain_submit(tw_runtime *rt, const tw_grain_opts *o,
                                             tw_job **out, tw_error *err);

/** @} */

/**
 * @defgroup label Connected components
 * Connected components of a mask across a whole slide, exact whatever the tiling: foreground
 * is every nonzero pixel of an 8- or 16-bit input (or of the mask an input's threshold makes,
 * tw_input.threshold_mode). Labels are numbered as scikit-image's `measure.label` numbers
 * them: 1, 2, ... in raster order of each component's first pixel (smallest row, then
 * column, in the whole image), 0 the background. docs/objects.md.
 * @{
 */

/** What a label job did, filled when the job ends. An image in memory labelled whole on a GPU
 * (docs/objects.md, "Whole images on a GPU") reports one tile of the image's size, one GPU
 * tile task and no border labels; label_s then ends when the labels are on the device and
 * write_s is their download. @since 0.7 */
typedef struct tw_label_report {
    size_t struct_size;      /**< set by tw_label_report_init() */
    uint64_t objects;        /**< components found (the largest label) */
    int label_bits;          /**< 32 or 64: the labels' type */
    int64_t tiles;           /**< tiles of the grid */
    int32_t tile_w, tile_h;  /**< their size */
    int64_t border_labels;   /**< tile labels on shared tile sides, merged by BP */
    int64_t tp_cpu, tp_cuda; /**< tile tasks (both passes) on CPU / GPU workers */
    double label_s;          /**< first pass: every tile labelled, its border labels kept */
    double merge_s;          /**< the merge of the border labels (BP) */
    double write_s;          /**< second pass: tiles labelled again, numbered and written */
} tw_label_report;

/** Zero @p r and set its struct_size; NULL is a no-op. Thread-safe. @since 0.7 */
TW_API void tw_label_report_init(tw_label_report *r);

/** Options of tw_label_submit(). Initialise with tw_label_opts_init(). @since 0.7 */
typedef struct tw_label_opts {
    size_t struct_size;      /**< set by tw_label_opts_init() */
    tw_input input;          /**< the mask file (any input with its threshold options), when
                                  image.data is NULL */
    tw_host_image image;     /**< the mask in memory (data != NULL: used instead); TW_U8 or
                                  TW_U16, nonzero = foreground */
    tw_output output;        /**< the label image file (TW_U32, or TW_U64: see label_bits) */
    tw_host_image result;    /**< in memory instead: the mask's size, TW_U32 or TW_U64 (its
                                  type gives the label width when label_bits is 0) */
    int connectivity;        /**< 4 or 8 (default 8, scikit-image's default in 2D) */
    int label_bits;          /**< 0 (default): a file gets 32-bit labels unless the image could
                                  hold more than 2^32 - 1 components (4: half its pixels, 8: a
                                  quarter), else 64; or 32, 64 */
    int32_t tile_w, tile_h;  /**< 0: the config's tile.size */
    tw_label_report *report; /**< optional, initialised with tw_label_report_init() */
} tw_label_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.7 */
TW_API void tw_label_opts_init(tw_label_opts *o);

/**
 * Label the connected components of @p o->input (or image) into @p o->output (or result),
 * tile by tile: each tile is labelled (TP), the labels touching shared tile sides are merged
 * once (BP, a union-find over the border labels keyed by their first pixels: memory bounded by
 * the tiles' borders, not the image), and each tile is labelled again and numbered. The same
 * bytes for any tile size, worker count and device. More components than the labels' width
 * holds (32-bit labels asked for) fails the job.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.7
 */
TW_API TW_NODISCARD tw_status tw_label_submit(tw_runtime *rt, const tw_label_opts *o,
                                             tw_job **out, tw_error *err);

/** Format of tw_objects_submit()'s table. @since 0.7 */
typedef enum tw_objects_format {
    TW_OBJECTS_AUTO = 0, /**< from the output's name: .geojson or .json, .csv */
    TW_OBJECTS_GEOJSON,  /**< a FeatureCollection of QuPath detections with their outlines */
    TW_OBJECTS_CSV       /**< one row per object, no outline */
} tw_objects_format;

/** What an objects job did, filled when it succeeded. @since 0.7 */
typedef struct tw_objects_report {
    size_t struct_size;      /**< set by tw_objects_report_init() */
    uint64_t objects;        /**< objects written */
    int64_t max_active;      /**< the most objects held at once (crossing the rows in flight) */
    int64_t bands;           /**< bands of rows the labels were read in */
    int32_t band_h;          /**< their height */
} tw_objects_report;

/** Zero @p r and set its struct_size; NULL is a no-op. Thread-safe. @since 0.7 */
TW_API void tw_objects_report_init(tw_objects_report *r);

/** Options of tw_objects_submit(). Initialise with tw_objects_opts_init(). @since 0.7 */
typedef struct tw_objects_opts {
    size_t struct_size;         /**< set by tw_objects_opts_init() */
    tw_input labels;            /**< the label image: 1 channel of TW_U8, TW_U16 or TW_U32, 0
                                     the background, every other value one object (as
                                     tw_label_submit() writes them; no threshold or tissue) */
    tw_input intensity;         /**< optional (path NULL: none): the image whose mean, minimum
                                     and maximum are measured per object, the labels' size
                                     (8/16-bit, RGB by its gray mode) */
    const char *output;         /**< the table's path */
    tw_objects_format format;   /**< default TW_OBJECTS_AUTO */
    const char *classification; /**< optional: the GeoJSON features' classification name */
    double downsample;          /**< outline coordinates are (x + region x) * downsample +
                                     offset; 0 (default): the level read's downsample, so that
                                     they are level-0 pixels of the slide read */
    double offset_x, offset_y;  /**< added to the outline coordinates (default 0) */
    double mpp_x, mpp_y;        /**< microns per pixel of the label image's level 0, for the
                                     areas in um^2; both 0 (default): its file's resolution
                                     (labels made from arrays have none) */
    int32_t band_h;             /**< rows read at a time; 0: the config's tile.size height
                                     (bands hold at most about 16M pixels) */
    tw_objects_report *report;  /**< optional, initialised with tw_objects_report_init() */
} tw_objects_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.7 */
TW_API void tw_objects_opts_init(tw_objects_opts *o);

/**
 * Measure every object of a label image and write the table (docs/objects.md): per object its
 * label, area (pixels, and square microns when the image has an mpp), centroid (mean column
 * and row), bounding box, perimeter (the number of pixel sides between the object and
 * anything else, the image's edge included), and with an intensity image the mean, minimum and
 * maximum there; in GeoJSON also its outline, a Polygon (MultiPolygon for pieces touching only
 * at corners) with holes, on the pixel-edge grid. Measurements are in the pixels of the level
 * read; outlines in level-0 pixels (see downsample). Streamed in bands of rows: an object is
 * written and freed once the scan passes its last row, in order of last row, then label.
 * Labels are expected to be connected (tw_label_submit()): pixels of one label separated by
 * whole rows without it make several objects of that label.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.7
 */
TW_API TW_NODISCARD tw_status tw_objects_submit(tw_runtime *rt, const tw_objects_opts *o,
                                               tw_job **out, tw_error *err);

/** @} */

/**
 * @name Watershed
 * Marker-controlled watershed by flooding (docs/watershed.md). Every pixel inside the mask
 * that a marker reaches gets a flooding key: the smallest, over the paths from a marker pixel
 * to it inside the mask, of (the highest level on the path, the steps since the path last rose
 * to that level); a marker pixel has (its level, 0). A marker pixel keeps its label; any other
 * reached pixel takes the smallest label among its best predecessors: the neighbours from
 * which one step gives its key, and among those the ones of lowest key. The result is a pure
 * function of the inputs: the same bytes for every tile size, worker count and device.
 * @{
 */

/** Options of tw_watershed_submit(). Initialise with tw_watershed_opts_init(). @since 0.7 */
typedef struct tw_watershed_opts {
    size_t struct_size;          /**< set by tw_watershed_opts_init() */
    tw_input input;              /**< the image flooded (8/16-bit, float32), when image.data
                                      is NULL */
    tw_host_image image;         /**< the image in memory (data != NULL: used instead) */
    tw_input markers;            /**< the marker labels (8/16/32-bit, 0 = no marker), when
                                      markers_image.data is NULL */
    tw_host_image markers_image; /**< the markers in memory (data != NULL: used instead) */
    tw_input mask;               /**< optional mask (8/16-bit, nonzero = flooded); neither a
                                      path nor mask_image.data: the whole image */
    tw_host_image mask_image;    /**< the mask in memory (data != NULL: used instead) */
    tw_output output;            /**< the output file (32-bit labels), when result.data is NULL */
    tw_host_image result;        /**< the labels in memory: TW_U32, the image's size */
    int conn;                    /**< 4 or 8 (default 8) */
    bool lines;                  /**< watershed lines as 0: of two touching pixels of different
                                      labels, the one flooded later (higher key, then higher
                                      label) */
    bool negate;                 /**< flood the negated image (from the maxima down: a distance
                                      map as it is) */
    int32_t tile_w, tile_h;      /**< 0: the config's tile.size */
    int64_t *rounds;             /**< optional: the border-propagation rounds run (both
                                      phases), written when the job ends */
} tw_watershed_opts;

/** Fill @p o with defaults and set its struct_size; NULL is a no-op. Thread-safe.
 *  @since 0.7 */
TW_API void tw_watershed_opts_init(tw_watershed_opts *o);

/**
 * Watershed of @p o->input from the labels of @p o->markers, inside @p o->mask: writes 32-bit
 * labels, 0 where no marker reaches (and outside the mask, and on the lines with
 * @p o->lines). The inputs are checked synchronously (open, same size, sample types); a NaN
 * in a float image, or a marker label of 4294967295, fails the job while it runs with a
 * message naming the first such pixel in raster order. Images of at most 2^32 - 1 pixels;
 * the job holds about 18 bytes per pixel in memory.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Misuse and ownership: as every submit function (@ref tw_ops).
 * Thread-safe. @since 0.7
 */
TW_API TW_NODISCARD tw_status tw_watershed_submit(tw_runtime *rt, const tw_watershed_opts *o,
                                                 tw_job **out, tw_error *err);

/** @} */

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_OPS_H */
