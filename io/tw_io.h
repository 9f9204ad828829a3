/* SPDX-License-Identifier: MIT */
/* tilewave: io's internal interface for ops/: the tile assembler and output-tile helpers. */
#ifndef TW_IO_H
#define TW_IO_H

#include <stdint.h>

#include "tw_base.h"
#include "tile_view.h" /* the tile type: what ops put into an assembler */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The tile assembler. Operations work on tiles of any size (even 1x1); the written TIFF has
 * tiles whose sizes are multiples of 16. An assembler sits between the two for one level of
 * one tw_writer: puts copy operation tiles into the output tiles they overlap, and an output
 * tile is compressed and written (on the putting thread) as soon as it is completely covered.
 * Only output tiles that are partly covered hold a buffer. A put that covers whole output tiles
 * hands them to the writer straight from its own memory, without a copy.
 */
typedef struct twi_assembler twi_assembler;

/* Count the slide's reads (bytes, decodes, tiles decoded again) into `io` from now on (NULL:
 * stop). Not thread-safe against reads in flight: set it before the job reads. */
TWI_HIDDEN void twi_slide_set_io(tw_slide *s, twi_io_counts *io);
/* What a read does with an input tile whose decoder reports an error or a warning, or whose
 * offset is missing (io.on_bad_tile): fail (false, the default: the read fails naming the level
 * and tile) or fill it with zeros (true) and count it (twi_slide_get_bad_tiles, and the
 * io counts' tiles_bad). Set it before reads start. */
TWI_HIDDEN void twi_slide_set_bad_tiles(tw_slide *s, bool fill);
/* Bytes one decoded tile or strip of `level` takes while it is read (the libtiff reader; 0
 * when the backend does not say). Thread-safe. */
TWI_HIDDEN uint64_t twi_slide_decoded_tile_bytes(const tw_slide *s, int level);
/* A slide of several channels (tw_slide_get_channel_count) none of which was chosen
 * (tw_slide_set_channel): TW_E_INVALID "OP: 'PATH' has N channels (0 DAPI, 1 FITC, ...):
 * choose one with --channel N|NAME", never a silent pick; else TW_OK. */
TWI_HIDDEN tw_status twi_slide_channel_missing(const tw_slide *s, const char *op,
                                               tw_error *err);
/* Bad tiles filled so far. Thread-safe. */
TWI_HIDDEN uint64_t twi_slide_get_bad_tiles(const tw_slide *s);
/* Count the writer's encoded and written bytes into `io` (as twi_slide_set_io). */
TWI_HIDDEN void twi_writer_set_io(tw_writer *wr, twi_io_counts *io);

/* An assembler for `level` (level_w x level_h pixels) of `wr`, whose tiles are tile_w x
 * tile_h with `channels` samples of `type`: all must equal what wr was opened with.
 * TW_OK, TW_E_INVALID (a mismatch, with a message in no error: the caller's bug), TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_assembler_create(tw_writer *wr, int level, int64_t level_w,
                                          int64_t level_h, int32_t tile_w, int32_t tile_h,
                                          int channels, tw_sample_type type,
                                          twi_assembler **out);

/* Copy `src` (host memory), whose first pixel belongs at (x, y) of the level, into the output
 * tiles; write those it completes. src must lie inside the level and match channels/type.
 * Thread-safe: concurrent puts must cover disjoint pixels; each pixel is put once.
 * TW_OK, TW_E_INVALID (outside the level, wrong type, pixels put twice), TW_E_NOMEM, or the
 * writer's error (TW_E_IO ...), with a message in err. */
TWI_HIDDEN tw_status twi_assembler_put(twi_assembler *a, int64_t x, int64_t y,
                                       const tw_tile_view *src, tw_error *err);

/* Free the assembler and any partial tile buffers (tiles never completed are not written;
 * tw_writer_close() then reports them), its pyramid levels, and abort its overlay writer if
 * twi_assembler_close_overlay() did not close it. NULL is a no-op. */
TWI_HIDDEN void twi_assembler_destroy(twi_assembler *a);

/* How a pyramid level is reduced from the level above (io/pyramid.c, docs/io.md). */
typedef enum twi_pyr_rule {
    TWI_PYR_MEAN = 0, /* visual and gray 8/16-bit, float32: the mean (rounded half up) */
    TWI_PYR_MAX,      /* masks: the largest sample */
    TWI_PYR_NEAREST   /* labels, indices, coordinates: the top-left sample */
} twi_pyr_rule;

/* Build the writer's levels a->level + 1 .. n_levels - 1 while a's tiles come in: each output
 * tile completed (and written) is reduced 2x2 by `rule` into the next level's assembler,
 * whose completed tiles are written and reduced in turn. Call before the first put.
 * TW_OK, TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_assembler_set_pyramid(twi_assembler *a, twi_pyr_rule rule);

/* Also write an overlay: each completed output tile of level 0 is blended over the same
 * region of `slide` (level `slide_level`, origin (x0, y0); 1 or 3 channels of u8 or u16) by
 * twi_overlay_blend() (`binary`: the result is a mask) and put into level 0 of `ov` (w x h
 * like a's, 3 x u8, same tiles; its reduced levels are built by the mean rule). The assembler
 * owns ov from here on, also on failure. TW_OK, TW_E_INVALID (mismatch), TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_assembler_set_overlay(twi_assembler *a, tw_writer *ov, tw_slide *slide,
                                               int slide_level, int64_t x0, int64_t y0,
                                               bool binary);

/* Close the overlay writer (rename it into place); TW_OK when there is none. */
TWI_HIDDEN tw_status twi_assembler_close_overlay(twi_assembler *a, tw_error *err);

/* Keep partly covered output tiles in a nameless scratch file in `dir` instead of memory, for
 * a and every assembler under it (its pyramid levels, its overlay and theirs): memory then
 * holds only the tiles being completed, whatever the width of the level (partial tiles span a
 * row of output tiles, about w x tile_h x pixel bytes per level, while tiles come in raster
 * order). Call after twi_assembler_set_pyramid/_set_overlay and before the first put.
 * TW_OK, TW_E_IO (the file cannot be created, with a message in err). */
TWI_HIDDEN tw_status twi_assembler_set_scratch(twi_assembler *a, const char *dir, tw_error *err);
/* Bytes the partial tiles of a and the assemblers under it can take in memory at once while
 * tiles come in raster order (one row of output tiles per level, of the level's width). */
TWI_HIDDEN int64_t twi_assembler_partial_bytes(const twi_assembler *a);

/* Reduce w x h pixels of `ch` samples of `type` at src into ceil(w/2) x ceil(h/2) at dst. */
TWI_HIDDEN void twi_pyr_reduce(const uint8_t *src, size_t src_stride, int64_t w, int64_t h,
                               int ch, tw_sample_type type, twi_pyr_rule rule, uint8_t *dst,
                               size_t dst_stride);

/* The overlay's tint, R, G, B. */
#define TWI_OVERLAY_TINT 0, 255, 0

/* Blend w x h result samples (one channel of res_type; `binary`: a mask, any nonzero value
 * tints fully) over the base pixels (base_ch = 1 or 3 samples of u8 or u16) into 8-bit RGB at
 * dst (rule in io/pyramid.c). */
TWI_HIDDEN void twi_overlay_blend(const uint8_t *res, size_t res_stride,
                                  tw_sample_type res_type, bool binary, const uint8_t *base,
                                  size_t base_stride, int base_ch, tw_sample_type base_type,
                                  int64_t w, int64_t h, uint8_t *dst, size_t dst_stride);

/* The number of levels of a pyramid over w x h in tile_w x tile_h tiles: halving while the
 * next level still covers a whole tile both ways (the smallest level OpenSlide 3.4.1 reads);
 * 1 when level 0 is already narrower or shorter than a tile. */
TWI_HIDDEN int twi_io_pyramid_levels(int64_t w, int64_t h, int32_t tile_w, int32_t tile_h);

/* For building tw_writer_opts from an operation's tile edge: the output TIFF tile edge, a
 * multiple of 16 in 256..1024 chosen to line up with operation tiles where it can: op_tile
 * itself when it is such a multiple; a multiple of op_tile for small tiles; a divisor of
 * op_tile for large ones (whole output tiles inside an operation tile are written without a
 * copy); 512 when nothing lines up. op_tile < 1 gives 512. */
TWI_HIDDEN int32_t twi_io_out_tile(int32_t op_tile);

/* A tile on its way into a tw_writer: tw_writer_write_tile() is twi_writer_encode() (checks,
 * claims the tile, gathers and compresses it on the caller's thread, no lock held) followed by
 * twi_writer_append() (under the writer's lock: appends it to the file, or to the scratch file
 * for a later level). A caller that needs the file's tile order fixed (the same bytes for any
 * thread count) encodes in parallel and appends in order. Uncompressed full tiles point into
 * the caller's data, which must stay alive until the append. */
typedef struct twi_wr_tile {
    int level;
    int64_t idx;
    const uint8_t *src;      /* what the append writes: n bytes */
    size_t n;
    uint8_t *contig, *packed, *spill;
    size_t spill_n;
} twi_wr_tile;

/* On failure nothing is claimed and *t holds nothing. */
TWI_HIDDEN tw_status twi_writer_encode(tw_writer *wr, int level, int64_t tx, int64_t ty,
                                       const void *data, size_t stride, twi_wr_tile *t,
                                       tw_error *err);
/* Always releases t's buffers. */
TWI_HIDDEN tw_status twi_writer_append(tw_writer *wr, twi_wr_tile *t, tw_error *err);
/* Give up an encoded tile without appending it: the tile may be written again. */
TWI_HIDDEN void twi_writer_tile_discard(tw_writer *wr, twi_wr_tile *t);

/* Encoded tiles that wait for the writer thread, at most. */
#define TWI_WRITER_QUEUE 32

/* From now on tw_writer_write_tile() encodes on the caller's thread and hands the tile to a
 * writer thread of wr's own, which appends in the order tiles come (waiting when
 * TWI_WRITER_QUEUE are queued): workers never wait for the file or for each other's appends
 * (LZW and JPEG run there, in libtiff). A failed append is sticky: the next write and
 * tw_writer_close() report it. tw_writer_close() and tw_writer_abort() stop the thread. Call
 * once, before the first tile; not with twi_writer_append() by the caller. */
TWI_HIDDEN tw_status twi_writer_start_thread(tw_writer *wr, tw_error *err);

/* A one-level view of `level` of src reduced k x k (k >= 2) by area average (io/reduce.c): its
 * level 0 is ceil(w / k) x ceil(h / k) with downsample (level's downsample) x k, its mpp and
 * objective power src's level-0 ones, its properties src's. On TW_OK the view owns src (closed
 * with it) and reads through it; on failure src stays the caller's. TW_E_INVALID for
 * coordinate pairs and 64-bit samples (an average would not keep them), TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_slide_reduce(tw_slide *src, int level, int k, tw_slide **out,
                                      tw_error *err);
/* The area average of k x k blocks: sw x sh pixels of ch samples of `type` (u8, u16, u32,
 * f32) at src into ceil(sw / k) x ceil(sh / k) at dst. Each output sample is the sum of the
 * block's samples inside the image divided by their count, rounded half up (integers, exact),
 * or the double sum divided, rounded to float (f32). acc: ceil(sw / k) * ch * 8 bytes of
 * scratch. */
TWI_HIDDEN void twi_reduce_area(const uint8_t *src, size_t src_stride, int64_t sw, int64_t sh,
                                int k, int ch, tw_sample_type type, void *acc, uint8_t *dst,
                                size_t dst_stride);

/* The ImageDescription of an operation's output (io/metadata.c, docs/io.md): `head` (one line:
 * "tilewave VERSION OP level L region ..."), then items "|KEY = VALUE": AppMag and MPP of the
 * output when known (> 0), Command (may be NULL), and the vendor properties of `src` (may be
 * NULL) under their names. `aperio`: prefixed "Aperio Image Library (head)" so that OpenSlide's
 * aperio reader shows the MPP and AppMag (8-bit gray or RGB outputs of the page layout). '|', CR
 * and LF inside keys and values are written %7C, %0D, %0A. `items`: NULL, or key, value, ...,
 * NULL, written after the MPP (the operation's own, such as the EDT's DistanceStep). NULL when
 * out of memory; the caller frees it. */
TWI_HIDDEN char *twi_meta_describe(const tw_slide *src, const char *head, const char *command,
                                   double mpp, double objective_power, bool aperio,
                                   const char *const *items);

/* The most levels tw_writer_open() accepts for a w x h image: halving until 1x1. */
TWI_HIDDEN int twi_io_max_levels(int64_t w, int64_t h);

/* ---- text outputs (io/outfile.c): a file written through a buffered stream that appears at
 * its path only when twi_text_out_close() succeeds (created nameless in the path's folder, or
 * under a hidden temporary name where the file system cannot; links at the path followed; only
 * a regular file is replaced). Not thread-safe: one writer at a time. `domain` prefixes the
 * messages. */
typedef struct twi_text_out twi_text_out;
TWI_HIDDEN tw_status twi_text_out_open(const char *path, const char *domain, twi_text_out **out,
                                       tw_error *err);
/* Formatted text (the caller picks the locale); a write error is kept for close. */
TWI_HIDDEN void twi_text_out_printf(twi_text_out *t, const char *fmt, ...) TW_PRINTF(2, 3);
TWI_HIDDEN void twi_text_out_vprintf(twi_text_out *t, const char *fmt, va_list ap);
/* Flush, sync, name and rename into place; frees t whatever the result. */
TWI_HIDDEN tw_status twi_text_out_close(twi_text_out *t, const char *domain, tw_error *err);
/* Discard: nothing is left at the path (NULL is a no-op); frees t. */
TWI_HIDDEN void twi_text_out_abort(twi_text_out *t);

#ifdef __cplusplus
}
#endif

#endif /* TW_IO_H */
