/* SPDX-License-Identifier: MIT */
/* tilewave: helpers shared by the operation drivers in ops/ (private to ops/). */
#ifndef TW_OPS_INTERNAL_H
#define TW_OPS_INTERNAL_H

#include <stdatomic.h>

#include "tilewave/mpi.h"
#include "tw_internal.h"
#include "tw_io.h"

/* Designated initialisers of a task kind that has a CPU and, in CUDA builds, a CUDA variant:
 * `.cpu = f, TWI_CUDA_VARIANT(g)`. Without CUDA, g need not exist. */
#ifdef TW_HAVE_CUDA
#define TWI_CUDA_VARIANT(fn) .cuda = (fn), .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA
#else
#define TWI_CUDA_VARIANT(fn) .devices = TW_DEVICE_CPU
#endif

/* The streaming frame every per-tile operation shares: the input slide and region, the
 * output writer and its assembler, the tile grid. */
typedef struct twi_stream {
    tw_slide *slide;
    int level;                     /* of `slide` (0 of a reduced view) */
    int src_level;                 /* the file's level read (== level unless reduced) */
    int reduce;                    /* >= 2: `slide` is src_level reduced k x k (--mpp); else 1 */
    int64_t x, y, w, h;            /* region of the level processed */
    int32_t tile_w, tile_h;        /* processing tiles */
    int64_t tiles_x, tiles_y;
    tw_writer *writer;             /* NULL once closed or aborted */
    twi_assembler *assembler;
    int in_channels;
    tw_sample_type in_type;
    double downsample;             /* of the level read (scales the output mpp) */
    struct twi_prep *prep;         /* gray mode, threshold, tissue of a file input (tissue.c);
                                      freed by twi_stream_finish() */
    bool in_mask;                  /* the input is thresholded into a mask */
    bool prep_keep;                /* reads go through twi_src_read: Otsu's pass may keep the
                                      gray image for them (tissue.c, twi_prep_kept) */
    twi_io_counts setup_io;        /* decodes before the job (Otsu's pass): added to the
                                      job's by twi_stream_attach_io */
    const char *in_path;           /* the input's path (borrowed from the tw_input: valid
                                      during submission only), for twi_stream_open_output's
                                      checks; NULL: none */
    int64_t t_open;                /* CLOCK_MONOTONIC ns when the input began to open (the
                                      job's time counts from it: twi_stream_attach_io); 0 none */
    const tw_slide *meta;          /* a secondary output's stream (no slide of its own: EDT
                                      indices, max-tree areas): the main input's slide, borrowed,
                                      whose mpp it carries (with `downsample`); NULL: none */
    const char *desc_items[5];     /* items the operation adds to the output's description
                                      (key, value, key, value, NULL; static or alive until
                                      the output is open): e.g. the EDT's DistanceStep */
} twi_stream;


/* Stain vectors (gray.stain_vectors, ops/tissue.c): "" gives the standard H&E vectors
 * (twi_stains_hed); else 9 numbers (twi_parse_f64_list), rows hematoxylin, eosin, residual of
 * (R, G, B) optical densities, whose matrix inverts within the gray kernels' range (both
 * stains recoverable). TW_OK or TW_E_INVALID. */
TWI_HIDDEN tw_status twi_stains_parse(const char *s, double out[9]);

/* Resolve the processing tile size: explicit (w, h > 0), else the op's key (e.g.
 * "gray.tile_size", 0x0 = inherit), else tile.size. */
TWI_HIDDEN tw_status twi_ops_tile_size(const tw_config *cfg, const char *op_key, int32_t w,
                                       int32_t h, int32_t *out_w, int32_t *out_h, tw_error *err);

/* The cancel check of a CPU kernel's twi_stop (omp_kernels.h), its user the task's context:
 * the job canceled or failed. */
TWI_HIDDEN bool twi_ops_ctx_stop(const void *ctx);

/* Was the processing tile size left to the defaults (no size given to the call, tile.size and
 * the op's key at their built-in values)? Then twi_stream_align_tile may round it. */
TWI_HIDDEN bool twi_ops_tile_implicit(const tw_config *cfg, const char *op_key, int32_t given_w);
/* Round a default processing tile size (tw, th) to the nearest multiple of the input level's
 * file tiles (at least one), when the region starts on a file tile: then no file tile is
 * decoded by two processing tiles (a 1024 default over 240-pixel SVS tiles becomes 960). The
 * result does not depend on the tiling, only the reads do. No-op without a tiled file input. */
TWI_HIDDEN void twi_stream_align_tile(const twi_stream *s, int32_t *tw, int32_t *th);

/* Open the input, check level and region, open the writer for an output of `out_channels`
 * samples of `out_type` (0: the input's type) over the region (tiles from io.tiff_tile, compression from the
 * output or io.compression, mpp scaled to the level). */
TWI_HIDDEN tw_status twi_stream_open(twi_stream *s, const tw_config *cfg, const char *op,
                                     const tw_input *in, const tw_output *out,
                                     int32_t tile_w, int32_t tile_h, bool align,
                                     int out_channels, tw_sample_type out_type, tw_error *err);

/* The two halves of twi_stream_open(), for operations with several inputs or with inputs and
 * outputs in memory. open_input fills slide, level, x, y, w, h, in_channels, in_type,
 * downsample, in_mask and in_path of a zeroed `s` (on failure nothing stays open).
 * open_output opens the writer and its assembler over s->w x s->h (mpp from s->slide, else
 * s->meta, else unknown; pyramid, layout, JPEG quality and metadata from `out` and the
 * config; the overlay when `out` asks for one); on failure nothing stays open. */
TWI_HIDDEN tw_status twi_stream_open_input(twi_stream *s, const tw_config *cfg, const char *op,
                                           const tw_input *in, tw_error *err);
TWI_HIDDEN tw_status twi_stream_open_output(twi_stream *s, const tw_config *cfg, const char *op,
                                            const tw_output *out, int out_channels,
                                            tw_sample_type out_type, tw_error *err);

/* A caller's image for an output: TW_OK when it is w x h of type t with a stride of at least
 * a row (0 = packed), else TW_E_INVALID with "OP: the WHAT image is ..., ... needed". */
TWI_HIDDEN tw_status twi_host_image_check(const char *op, const char *what,
                                          const tw_host_image *r, int64_t w, int64_t h,
                                          tw_sample_type t, tw_error *err);

/* Caller's images as tiles (twi_tile_wrap). twi_host_image_wrappable: a has data the runtime
 * wraps (twi_tile_can_wrap), one channel, its rows and samples aligned to its sample size.
 * twi_host_image_overlap: the bytes of a and b (spans from the first to the last sample)
 * overlap; false when either has no data.
 * twi_host_image_same: the same pixels at the same place (data, size, type, stride).
 * twi_host_image_wrap: the w x h pixels of a at (x, y) as a tile. */
TWI_HIDDEN bool twi_host_image_wrappable(const tw_runtime *rt, const tw_host_image *a);
/* The same for an image only CPU tasks will touch (twi_tile_can_wrap_cpu). */
TWI_HIDDEN bool twi_host_image_wrappable_cpu(const tw_runtime *rt, const tw_host_image *a);
TWI_HIDDEN bool twi_host_image_overlap(const tw_host_image *a, const tw_host_image *b);
TWI_HIDDEN bool twi_host_image_same(const tw_host_image *a, const tw_host_image *b);
TWI_HIDDEN tw_status twi_host_image_wrap(tw_runtime *rt, const tw_host_image *a, int64_t x,
                                         int64_t y, int32_t w, int32_t h, tw_tile **out);
/* A wrapped image of job: page-locked for its GPU copies until it ends when the runtime says
 * so (runtime.caller_memory = register, twi_job_register_host). */
TWI_HIDDEN void twi_host_image_register(tw_job *job, const tw_host_image *a);
/* Copy the pixels of v (channels x sample size each) into the caller's image at (x, y); a
 * stride of 0 means packed rows. */
TWI_HIDDEN void twi_host_image_put(const tw_host_image *dst, const tw_tile_view *v, int64_t x,
                                   int64_t y);

/* Non-zero when the paths name the same existing file (by device and inode). */
TWI_HIDDEN int twi_ops_same_file(const char *a, const char *b);

/* Position and size of processing tile `i` (raster order) in the level's frame. */
TWI_HIDDEN void twi_stream_tile_rect(const twi_stream *s, int64_t i, int64_t *x, int64_t *y,
                                     int32_t *w, int32_t *h);

/* Seal a job whose task graph was just submitted with status `st`. TW_OK: *out = job. Else
 * the job is failed ("OP: cannot submit the tasks"), what was submitted is waited for, the
 * job's error is copied into err and the job destroyed; returns st. */
TWI_HIDDEN tw_status twi_ops_job_launch(tw_job *job, const char *op, tw_status st, tw_job **out,
                                        tw_error *err);

/* Count the stream's reads and writes (its slide and writer, when open) into the job's I/O
 * counts (tw_job_get_io); before the job's first task. */
TWI_HIDDEN void twi_stream_attach_io(twi_stream *s, tw_job *job);

/* Finish: on TW_OK close the writer (rename into place), otherwise abort it; close the
 * slide. Returns the status of the close. */
TWI_HIDDEN tw_status twi_stream_finish(twi_stream *s, tw_status st, tw_error *err);
/* A job's end with two outputs: `second` (an area or indices image) is finished first, then
 * `main` (whose writer renames the main output into place only if the second succeeded).
 * The first failure fails the job (twi_job_fail) with its message; returns the job's status. */
TWI_HIDDEN tw_status twi_stream_finish_two(tw_job *job, twi_stream *main, twi_stream *second,
                                           tw_status st);

/* ---- tile pipelines (ops/stream.c), the driver of the per-pixel operations (gray, convert).
 * Each processing tile is a pipeline of tasks sharing one twi_pipe_tile argument:
 *
 *     io.read (CPU) --> [tp, the op's per-tile task] --> io.write (CPU)
 *       [in: W]          [in: R, out: W]                  [out: R, or in: R without tp]
 *
 * io.read decodes the tile's rectangle of the slide (with --tissue, a tile without tissue
 * becomes the glass colour unread); io.write hands its tile to the output assembler. The
 * pipelines are the units of a streaming window (runtime/window.c): the runtime admits the
 * next one when a worker would otherwise idle, and io.write retires its own, so tiles are read
 * no faster than they are written and memory stays bounded whatever the slide's size. */
typedef struct twi_pipes {
    twi_stream s;               /* opened by the operation */
    const char *op;             /* job name and message domain */
    const tw_task_kind *tp;     /* NULL: io.write takes io.read's tile (a copy) */
    int out_channels;           /* of the tile io.write takes (the input's sample type) */
    int64_t n_tiles;
    twi_window *window;         /* the pipelines, admitted by the runtime */
    tw_job *job;                /* borrowed: the job owns this struct */
} twi_pipes;

/* The argument of one pipeline's tasks; owned (freed) by its io.write, which completes last. */
typedef struct twi_pipe_tile {
    twi_pipes *p;
    int64_t x, y; /* in the level's frame */
    int32_t w, h;
} twi_pipe_tile;

/* Create the job p->op over p (calloc'd, p->s open, op, tp and out_channels set), submit the
 * first window of pipelines and seal it (twi_ops_job_launch). The job owns p from here
 * whatever the result: it finishes the stream with the job's status and frees p. */
TWI_HIDDEN tw_status twi_pipes_launch(tw_runtime *rt, twi_pipes *p, tw_job **out,
                                      tw_error *err);

/* One input of an operation: a slide region (s.slide open) or a caller buffer (mem.data). */
typedef struct twi_src {
    twi_stream s;       /* file: slide, level, region (and, for one input, the writer) */
    tw_host_image mem;  /* memory: data != NULL */
    const char *path;   /* for messages; NULL in memory */
} twi_src;

/* Sample types an operation accepts, for twi_src_open(). */
#define TWI_SRC_U8 (1u << TW_U8)
#define TWI_SRC_U16 (1u << TW_U16)
#define TWI_SRC_U32 (1u << TW_U32)
#define TWI_SRC_F32 (1u << TW_F32)
#define TWI_SRC_U64 (1u << TW_U64)
/* With the types: Otsu's pass keeps no gray image (a job across MPI ranks reads its band
 * only; every rank would keep the whole image). */
#define TWI_SRC_NO_KEEP (1u << 30)

/* Open one input (`what`: "mask", "input" ... for messages): the file, or `mem` when its data
 * is set. Files may be gray (1 channel) or RGB (3 channels, read by the input's gray mode);
 * their threshold and tissue options are prepared here (twi_prep_create: Otsu and the tissue
 * mask read a low level now). `types` is the mask of accepted sample types. On failure
 * nothing stays open. */
TWI_HIDDEN tw_status twi_src_open(const tw_config *cfg, const char *op, unsigned types,
                                  const char *what, const tw_input *file,
                                  const tw_host_image *mem, twi_src *src, tw_error *err);

/* A mask operation (fill-holes, edt) on a colour (RGB) file that no threshold makes a mask
 * (`thresholded` false): TW_E_INVALID naming the file and the options to add (the luminance
 * of an H&E slide is no mask: every non-black pixel would be foreground). TW_OK otherwise. */
TWI_HIDDEN tw_status twi_src_mask_check(const char *op, const twi_src *src, bool thresholded,
                                        tw_error *err);

/* Read the v->w x v->h pixels of src at (x, y) of its frame into v (1 channel of the source's
 * type): a region of the slide, converted by the gray kernel (mode, threshold) when RGB or
 * thresholded, or the glass value without reading when --tissue finds no tissue there; or
 * rows of the caller's buffer. RGB is decoded into `rgb` (3 v->w v->h samples) or, when NULL, into
 * scratch from ctx. Failures fail the task's job. */
TWI_HIDDEN tw_status twi_src_read(tw_task_ctx *ctx, const char *op, const twi_src *src,
                                  int64_t x, int64_t y, tw_tile_view *v, void *rgb);

/* twi_assembler_put of a large view (a band of rows, a whole image) in chunks of about 1M
 * pixels, whole columns of chunks for a wide view, rows for a tall one, returning
 * TW_E_CANCELED between chunks once the task's job is stopping: compressing a band of a 64K
 * wide slide takes seconds, and a cancel must take effect within one (runtime.md). */
TWI_HIDDEN tw_status twi_put_cancelable(tw_task_ctx *ctx, twi_assembler *a, int64_t x, int64_t y,
                                        const tw_tile_view *v, tw_error *err);

/* ---- how a file input becomes one channel (ops/tissue.c): the gray mode and stain vectors,
 * the threshold (Otsu's over a low-resolution level), the tissue mask whose empty regions are
 * not read. Made by twi_src_open() for every file input (and by gray for its own). */
typedef struct twi_prep twi_prep;

/* Build the preparation of `in`, open in `s` (level, region, channels, type known). `mode` is
 * the gray mode (tw_gray_mode) to use. Otsu and the tissue mask read a low-resolution level
 * now, synchronously; the tissue mask file is written now. Sets in->report's threshold. */
TWI_HIDDEN tw_status twi_prep_create(const tw_config *cfg, const char *op, const tw_input *in,
                                     int mode, twi_stream *s, twi_prep **out, tw_error *err);
/* Add the counts to the input's report and free. NULL is a no-op. */
TWI_HIDDEN void twi_prep_destroy(twi_prep *p);
/* The gray image Otsu's pass kept (s->prep_keep, no tissue mask, no host budget, at most an
 * eighth of the machine's memory), at (x, y) of the stream's region, when it holds the w x h
 * block there: *stride its row bytes; else NULL (read the slide). Thresholding is left to the
 * caller (twi_src_read). */
TWI_HIDDEN const void *twi_prep_kept(const twi_prep *p, int64_t x, int64_t y, int64_t w,
                                     int64_t h, size_t *stride);
/* The kernel parameters (mode, stains, threshold). */
TWI_HIDDEN const struct twi_gray_params *twi_prep_params(const twi_prep *p);
/* With --tissue: true when the rectangle (x, y, w, h) of the region (region-relative) holds no
 * tissue, counting the read either way; false without tissue. Thread-safe. */
TWI_HIDDEN bool twi_prep_skip(twi_prep *p, int64_t x, int64_t y, int64_t w, int64_t h);
/* Fill a view of the input's channels and type (the slide's pixels) with the glass colour. */
TWI_HIDDEN void twi_prep_fill_input(const twi_prep *p, tw_tile_view *v);
/* Fill a 1-channel view of the input's type with what a glass pixel becomes. */
TWI_HIDDEN void twi_prep_fill_output(const twi_prep *p, tw_tile_view *v);
/* Otsu's threshold of a histogram of n unit bins (scikit-image threshold_otsu on integer
 * images): the first k maximising the between-class variance of {<= k} and {> k}; the value
 * itself when one bin holds everything; 0 for an empty histogram. Foreground: > it. */
TWI_HIDDEN int64_t twi_otsu(const uint64_t *hist, size_t n);

/* ---- the reconstruction engine (ops/mrecon.c), shared by tw_mrecon_submit() and the
 * operations built on it (ops/mrecon_filter.c). Everything runs in "dilation space": with
 * `complement` every loaded value v becomes MAX - v and every stored one is turned back, which
 * is how reconstruction by erosion and the dual filters reuse the dilation kernels. */

/* How the marker is made, per tile, from the inputs (in dilation space). */
typedef enum twi_mrecon_prep {
    TWI_MRECON_PREP_MARKER = 0, /* read from the marker input; checked (or clamped) <= mask */
    TWI_MRECON_PREP_BORDER,     /* the mask on the image border, 0 inside (fill-holes) */
    TWI_MRECON_PREP_SUB_H,      /* max(mask - h, 0) (h-maxima, h-dome) */
    TWI_MRECON_PREP_ERODE       /* the mask eroded by the (2 radius + 1)-square (open-rec) */
} twi_mrecon_prep;

/* What is written, per tile, from the reconstruction R and the mask I (in dilation space). */
typedef enum twi_mrecon_out {
    TWI_MRECON_OUT_RESULT = 0, /* R (complemented back when `complement`) */
    TWI_MRECON_OUT_MAXIMA,     /* u8: I - R >= h, all 0 when h > max I - min I */
    TWI_MRECON_OUT_DOME        /* I - R */
} twi_mrecon_out;

/* One reconstruction job. An input is a file or, when its tw_host_image has data, memory. */
typedef struct twi_mrecon_spec {
    const char *op;                  /* job name and message domain: "mrecon", "hmax" ... */
    const tw_input *marker_file;     /* PREP_MARKER only */
    const tw_host_image *marker_mem;
    const tw_input *mask_file;       /* the mask, or the image of a derived operation */
    const tw_host_image *mask_mem;
    const tw_output *out_file;
    const tw_host_image *out_mem;
    bool complement;
    int conn;                        /* 4 or 8 */
    bool clamp;                      /* PREP_MARKER: clamp instead of failing */
    twi_mrecon_prep prep;
    twi_mrecon_out out;
    bool mask_op;                    /* the input is a mask (fill-holes): a colour file needs a
                                        threshold (twi_src_mask_check) */
    int64_t h;                       /* PREP_SUB_H, OUT_MAXIMA */
    int32_t radius;                  /* PREP_ERODE */
    int32_t tile_w, tile_h;          /* 0: mrecon.tile_size, else tile.size */
    int64_t queue_capacity;          /* 0: mrecon.queue_capacity */
    tw_mrecon_stats *stats;          /* optional */
    tw_mpi *mpi;                     /* distributed over these ranks (docs/mpi.md); NULL: not */
    tw_mpi_report *mpi_report;       /* optional, with mpi */
} twi_mrecon_spec;

/* Validate the spec and the inputs, open them and the output, and submit the job. */
TWI_HIDDEN tw_status twi_mrecon_submit(tw_runtime *rt, const twi_mrecon_spec *spec,
                                       tw_job **out, tw_error *err);

/* The attribute-filter pipeline (ops/attr_filter.c) run with the "area map" rule: every pixel
 * gets the global area of its node (TW_U64 output), from border max-trees. For tests. */
TWI_HIDDEN tw_status twi_area_map_submit(tw_runtime *rt, const tw_attr_filter_opts *o,
                                         tw_job **out, tw_error *err);

/* ---- distributed jobs (docs/mpi.md): a job's share of a run over MPI ranks. ops/dist_mpi.c
 * (builds with TW_ENABLE_MPI) implements them; without MPI ops/dist.c makes twi_dist_create()
 * fail with TW_E_NODEV, so no job has a twi_dist and the rest is never reached. An operation
 * calls these only where its job's twi_dist is set.
 *
 * Waits inside them poll: they end early, with the task failed, when the job stops (cancel,
 * another failure) or when another rank reports a failure (TW_E_CANCELED, "mpi: rank K
 * failed: ..."). Collectives (allreduce, exscan, allgather, gather, scatter) are called by one
 * task (or thread) of the job at a time, in the same order on every rank. */
typedef struct twi_dist twi_dist;

/* Outputs (main, secondary) a distributed job writes through rank 0. */
#define TWI_DIST_MAX_OUTS 2

typedef enum twi_dist_type { TWI_DIST_I32, TWI_DIST_I64, TWI_DIST_U64 } twi_dist_type;
typedef enum twi_dist_op { TWI_DIST_SUM, TWI_DIST_MIN, TWI_DIST_MAX } twi_dist_op;

/* The share of this rank in a distributed job `op` over the ranks of c (no MPI call yet). */
TWI_HIDDEN tw_status twi_dist_create(tw_mpi *c, const char *op, tw_mpi_report *report,
                                     twi_dist **out, tw_error *err);

/* Collective, at submission, once the operation knows its image (W x H) and tiles (tw x th):
 * every rank says whether its own setup succeeded so far (local_st, with local_err's
 * message), the ranks check that they see the same image and tiles, and the image's rows of
 * tiles are split into one band per rank in proportion to the ranks' rates for `kind` on
 * tw x th tiles (twi_runtime_rate; by rows when a rank does not know it). Returns TW_OK, or
 * on every rank an error in err: local_st on the rank that failed (err left as local_err),
 * TW_E_CANCELED "mpi: rank K failed: ..." on the others; TW_E_INVALID when the ranks disagree
 * or the image has fewer rows of tiles than there are ranks; TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_dist_partition(twi_dist *d, tw_runtime *rt, tw_status local_st,
                                        const tw_error *local_err, int64_t W, int64_t H,
                                        int32_t tw, int32_t th, const tw_task_kind *kind,
                                        tw_error *err);
/* A submission that failed: when the partition has not run yet, run it with the failure so
 * that the other ranks end too; after it, twi_dist_destroy() tells them. */
TWI_HIDDEN void twi_dist_abandon(twi_dist *d, tw_status st, const tw_error *err);
TWI_HIDDEN int twi_dist_rank(const twi_dist *d);
TWI_HIDDEN int twi_dist_size(const twi_dist *d);
/* This rank's band: rows of tiles [*ty0, *ty1) of the image's grid (after the partition). */
TWI_HIDDEN void twi_dist_band(const twi_dist *d, int64_t *ty0, int64_t *ty1);
/* The largest band of any rank, in rows of tiles. */
TWI_HIDDEN int64_t twi_dist_max_band(const twi_dist *d);

/* Once the job exists: outs[0 .. n_outs) are its output streams, in the same order on every
 * rank, open on rank 0 only. Rank 0 starts a thread that receives the other ranks' result
 * tiles and puts them into those streams (one CPU task each), holding the job until all have
 * come (twi_job_hold). TW_OK, TW_E_NOMEM, TW_E_INVALID (the job already ended). */
TWI_HIDDEN tw_status twi_dist_launch(twi_dist *d, tw_job *job, twi_stream *const *outs,
                                     int n_outs, tw_error *err);
/* In a store task: the pixels of v belong at (x, y) of output `out` (the image's frame):
 * rank 0 puts them into its stream's assembler, another rank copies them into messages to rank
 * 0 and returns once they are sent off (waiting only while a window of sends is in flight).
 * Fails the task with a message on error. */
TWI_HIDDEN tw_status twi_dist_put(twi_dist *d, tw_task_ctx *ctx, int out, int64_t x, int64_t y,
                                  const tw_tile_view *v);

/* buf[0 .. n) of type t becomes its reduction `op` over the ranks. */
TWI_HIDDEN tw_status twi_dist_allreduce(twi_dist *d, tw_task_ctx *ctx, void *buf, int64_t n,
                                        twi_dist_type t, twi_dist_op op);
/* Exclusive scan of buf[0 .. n) over the ranks by `op` (TWI_DIST_MIN or _MAX): rank r gets the
 * reduction over the ranks above it (r' < r), or with `up` over those below it (r' > r); a
 * rank with none gets `none` everywhere. */
TWI_HIDDEN tw_status twi_dist_exscan_i32(twi_dist *d, tw_task_ctx *ctx, int32_t *buf, int64_t n,
                                         bool up, twi_dist_op op, int32_t none);
/* Every rank's `bytes` bytes at `mine` into all[rank * bytes ...]. */
TWI_HIDDEN tw_status twi_dist_allgather(twi_dist *d, tw_task_ctx *ctx, const void *mine,
                                        size_t bytes, void *all);
/* Rank 0 receives every rank's buf (n bytes, in rank order) in *all (malloc'd: free) with
 * their sizes in lens[size]; other ranks get *all = NULL. */
TWI_HIDDEN tw_status twi_dist_gather(twi_dist *d, tw_task_ctx *ctx, const void *buf, int64_t n,
                                     void **all, int64_t *lens);
/* Rank 0 sends part r (lens[r] bytes of `all`, parts in rank order) to rank r: *part
 * (malloc'd: free) and *n on every rank. */
TWI_HIDDEN tw_status twi_dist_scatter(twi_dist *d, tw_task_ctx *ctx, const void *all,
                                      const int64_t *lens, void **part, int64_t *n);

/* Edge rows of the bands (reconstruction's BP, ops/mrecon.c). Each round posts this rank's
 * top and bottom rows (`bytes` each) to the ranks above and below, or an empty message where
 * the row has not changed since it was last sent (send_top / send_bottom false), and posts
 * the receives of theirs; the transfers run while the round's TP tasks do. The next round's
 * twi_dist_halo_wait() completes them: from_up (from_down) receives the bottom (top) row of
 * the rank above (below), *got_up (*got_down) says whether one came. */
TWI_HIDDEN tw_status twi_dist_halo_post(twi_dist *d, tw_task_ctx *ctx, const void *top,
                                        const void *bottom, size_t bytes, bool send_top,
                                        bool send_bottom);
TWI_HIDDEN tw_status twi_dist_halo_wait(twi_dist *d, tw_task_ctx *ctx, void *from_up,
                                        void *from_down, size_t bytes, bool *got_up,
                                        bool *got_down);
/* Count an exchange round (report.rounds). */
TWI_HIDDEN void twi_dist_count_round(twi_dist *d);
/* Every rank's job fails the same way now, because of rank `rank` (its report says so, and
 * the ranks need not tell each other). */
TWI_HIDDEN void twi_dist_failed_everywhere(twi_dist *d, int rank);

/* In the job's finish hook. st == TW_OK: the report's totals (collective; its failure is
 * returned, with err); else tell the other ranks that this one failed (msg, once). */
TWI_HIDDEN tw_status twi_dist_finish(twi_dist *d, tw_status st, const char *msg, tw_error *err);
/* In the job's free hook (NULL is a no-op): a rank that did not finish tells the others it
 * failed; rank 0's receiver thread is joined. */
TWI_HIDDEN void twi_dist_destroy(twi_dist *d);

/* (ops/dist.c) Split `rows` rows among n ranks, each at least one, in proportion to
 * weights[0 .. n) when every weight is > 0, else equally: rank r gets [starts[r],
 * starts[r + 1]), starts[0] = 0, starts[n] = rows. TW_E_INVALID when rows < n or n < 1. */
TWI_HIDDEN tw_status twi_dist_split(int64_t rows, int n, const double *weights,
                                    int64_t *starts);

/* (ops/maxtree.c) What the max-tree job and the attribute filters (attr_filter.c) share.
 * Read rectangle (x, y, v->w, v->h) of src into v in chunks of rows (an RGB input needs one
 * small scratch buffer). */
TWI_HIDDEN tw_status twi_maxtree_read_rows(tw_task_ctx *ctx, const char *op, const twi_src *src,
                                           int64_t x, int64_t y, tw_tile_view *v);
/* TW_E_INVALID with a message unless conn is 4 or 8. */
TWI_HIDDEN tw_status twi_maxtree_conn_check(const char *op, int conn, tw_error *err);
/* The canonical max-tree of `in` into `par` (views of the task: tiles or scratch), on a CPU
 * worker's team or, in CUDA builds, on a GPU worker; `what` names the image in messages.
 * Failures are reported on ctx. */
TWI_HIDDEN tw_status twi_maxtree_tree_cpu(tw_task_ctx *ctx, int conn, const char *op,
                                          const char *what, const tw_tile_view *in,
                                          tw_tile_view *par);
#ifdef TW_HAVE_CUDA
TWI_HIDDEN tw_status twi_maxtree_tree_cuda(tw_task_ctx *ctx, int conn, const char *op,
                                           const char *what, const tw_tile_view *in,
                                           tw_tile_view *par);
#endif

#endif /* TW_OPS_INTERNAL_H */
