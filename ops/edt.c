/* SPDX-License-Identifier: MIT */
/* tilewave: the exact Euclidean distance transform of a whole image, band by band. */
/* Why one file: the task kinds of one job (hist, otsu, scan, sync, load, band, store, and the
 * MPI exchanges of sync) share ed_job and the band bookkeeping the essay below explains; the
 * pixel work is in omp/edt_scan.c, omp/edt_omp.c and cuda/. */
/*
 * Why bands of rows are exact without halos. For a pixel p = (x, y) the squared distance to
 * the nearest background pixel is
 *     d2(p) = min over columns i of  sx^2 (x - i)^2 + sy^2 (y - r_i(y))^2,
 * where r_i(y) is the background row nearest to y in column i (the EDT is separable). For a
 * band of rows [y0, y1), r_i(y) is either inside the band or it is the last background row of
 * column i above y0, or the first one at or below y1: two numbers per column. So each band is
 * exact from its own pixels plus `above[i]` and `below[i]`, and those come from a cheap first
 * pass that records, for every tile, the first and last background row of each of its columns.
 *
 * The task graph (CPU = CPU workers only; CPU/GPU = either):
 *
 *     [edt.hist[i] --> edt.otsu]             (only with --threshold otsu; CPU)
 *          --> edt.scan[i]  (every tile: first/last background row per column; CPU)
 *          --> edt.sync     (per band: nearest background row above and below; CPU)
 *          --> edt.load[b]  (read and threshold band b's tiles into a binary band; CPU)
 *          --> edt.band[b]  (the exact EDT of the band: Meijster on CPU, PBA+ on GPU)
 *          --> edt.store[b, j] (slice j of the band into the output file or buffer; CPU)
 *
 * The tiles and tasks of band b are created by store[b - K] (K = workers + 1, or 3 per GPU when
 * bands run on GPUs), so at most K bands are held at once: memory stays bounded whatever the
 * image height. Inputs are read twice (scan and load)
 * rather than kept: the binary image of a slide need not fit in memory. A band is stored in
 * slices of STORE_SLICE output tiles (4096 columns by default), one task each, so that its
 * compression runs on several workers: with bands on a GPU the K bands in flight are mostly
 * waiting to be written, and one worker compressing a 100,000-pixel-wide band was the
 * bottleneck. The wavefront method
 * skips scan and sync and runs one band, the whole image (it has no exact band decomposition).
 *
 * Across MPI ranks (tw_mpi_edt_submit, docs/mpi.md) each rank takes a band of rows of tiles
 * (ops/dist_mpi.c) and runs the graph above on them alone. Only edt.sync needs the other
 * bands: the nearest background row above a rank's first band is the last one of all the
 * ranks above it, and below its last band the first one of the ranks below. Per column, that
 * is an exclusive scan (max of the last rows, downwards; min of the first rows, upwards) over
 * 4 bytes per column, done in sync; with Otsu, the histograms are summed first in edt.otsu.
 * Everything else stays in the band; each store slice goes to rank 0, which writes the file.
 */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

#define OP "edt"

typedef struct ed_job ed_job;

/* The argument of a per-tile task (hist, scan). */
typedef struct ed_cell {
    ed_job *e;
    int64_t i;
} ed_cell;

typedef struct ed_band {
    ed_job *e;
    int64_t index;
    int64_t y0;
    int32_t h;
    tw_tile *bin, *bounds, *out, *idx; /* the job's references; NULL once stored */
    atomic_int slices_left;            /* store slices not yet written */
} ed_band;

/* The argument of one store task: columns [x, x + w) of a band. */
typedef struct ed_slice {
    ed_band *b;
    int64_t x;
    int32_t w;
} ed_slice;

#define STORE_SLICE 8 /* output tiles per store slice: 4096 columns with 512-pixel tiles */

struct ed_job {
    tw_job *job;
    twi_src in;          /* the input; in.s also holds the output writer */
    twi_stream idx_s;    /* the indices writer (idx_file) */
    bool out_file, idx_file;
    tw_host_image result, indices;
    bool wrap_out;       /* the bands' output tiles are rows of `result` (runtime/tile.c,
                            "Wrapped tiles") */
    bool want_idx;
    int64_t W, H;
    int32_t tw, th;      /* scan tiles; bands are th rows */
    int64_t tiles_x, tiles_y, n_tiles;
    int64_t n_bands;
    ed_band *bands;
    int32_t slice_w, n_slices; /* store slices per band */
    ed_slice *slices;          /* n_bands * n_slices */
    ed_cell *cells;      /* n_tiles */
    tw_edt_method method;
    twi_edt_format format;
    tw_sample_type out_type;
    double sx, sy;       /* spacing divided by step */
    double step;         /* tw_edt_opts.step: spacing units a grey level (u8, u16) */
    char step_text[32];  /* the step in the output's description */
    bool otsu, invert;
    bool bands_on_gpu;   /* the runtime has GPU workers: bands run there only */
    double threshold;
    int32_t m1, m2, m3;
    /* first[ty * W + x] / last[...]: first and last background row of column x in tile row
     * ty (image rows, TWI_EDT_NONE when none); edt.sync turns them into below / above. */
    int32_t *first, *last;
    uint64_t *hist;      /* otsu: 256 or 65536 bins */
    size_t n_bins;
    pthread_mutex_t lock;
    bool lock_init;
    atomic_llong background;
    atomic_llong bands_cpu, bands_cuda;
    tw_edt_report *report;
    tw_runtime *rt;
    twi_window *window;  /* the bands, admitted by the runtime as workers free up */
    tw_task *after;      /* what every band's load waits for: sync, otsu or nothing (a
                            reference, released when the job finishes) */
    /* Each input tile decoded once (runtime.keep_input; file inputs): scan keeps its
     * foreground flags for the loads, packed 8 a byte, th rows of bits_row bytes a tile; with
     * Otsu, the histogram pass keeps the tiles it read for the scan, in memory (gray[i]) or in
     * a scratch file (gray_fd, tile i at i * tile_bytes). NULL / -1: read them again. */
    uint8_t *bits;
    int64_t bits_row;
    uint8_t *bits_ok;    /* per tile: its flags are in `bits` */
    void **gray;
    uint8_t *gray_ok;    /* per tile: in gray[i] or the scratch file */
    int gray_fd;
    int64_t tile_bytes;  /* a full tile of the input's type */
    twi_dist *dist;      /* across MPI ranks: this rank's band starts at row of tiles ty0; the
                            tiles, bands and column tables above are the band's */
    int64_t ty0;
};

static const tw_task_kind hist_kind, otsu_kind, scan_kind, sync_kind, load_kind, band_kind,
    wave_kind, store_kind;

/* Buffers for reading input tiles, allocated once per task and reused for every tile. */
typedef struct reader {
    void *px, *rgb;
} reader;

static tw_status
reader_init(tw_task_ctx *ctx, const ed_job *e, reader *rd)
{
    size_t bytes = (size_t)e->tw * (size_t)e->th * tw_sample_size(e->in.s.in_type);

    rd->rgb = NULL;
    if (!(rd->px = twi_ctx_scratch(ctx, bytes)) ||
        (e->in.s.in_channels == 3 && !(rd->rgb = twi_ctx_scratch(ctx, 3 * bytes))))
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory for a %dx%d tile",
                            (int)e->tw, (int)e->th);
    return TW_OK;
}

/* A view of w x h input pixels at (x, y) held in `data`, rows packed, the input's type. */
static tw_tile_view
rect_view(const ed_job *e, int64_t x, int64_t y, int32_t w, int32_t h, void *data)
{
    tw_tile_view v;

    memset(&v, 0, sizeof v);
    v.w = w;
    v.h = h;
    v.channels = 1;
    v.type = e->in.s.in_type;
    v.stride = (int64_t)((size_t)w * tw_sample_size(v.type));
    v.x0 = x;
    v.y0 = y;
    v.data = data;
    return v;
}

/* Read w x h (at most a tile) input pixels at (x, y) into rd's buffer. */
static tw_status
read_rect(tw_task_ctx *ctx, const ed_job *e, const reader *rd, int64_t x, int64_t y, int32_t w,
          int32_t h, tw_tile_view *v)
{
    *v = rect_view(e, x, y, w, h, rd->px);
    return twi_src_read(ctx, OP, &e->in, x, y, v, rd->rgb);
}

/* The rectangle of tile i. */
static void
tile_rect(const ed_job *e, int64_t i, int64_t *x, int64_t *y, int32_t *w, int32_t *h)
{
    *x = (i % e->tiles_x) * e->tw;
    *y = (e->ty0 + i / e->tiles_x) * e->th;
    *w = (int32_t)(e->W - *x < e->tw ? e->W - *x : e->tw);
    *h = (int32_t)(e->H - *y < e->th ? e->H - *y : e->th);
}

/* ---- decoding each input tile once */

/* Keep tile i's pixels (the view read by the histogram pass) for the scan: in memory or in
 * the scratch file; a tile that cannot be kept is read again. */
static void
keep_gray(ed_job *e, int64_t i, const tw_tile_view *v)
{
    size_t bytes = (size_t)v->stride * (size_t)v->h;

    if (!e->gray_ok)
        return;
    if (e->gray) {
        if ((e->gray[i] = malloc(bytes))) {
            memcpy(e->gray[i], v->data, bytes);
            e->gray_ok[i] = 1;
        }
    } else if (twi_pwrite_all(e->gray_fd, v->data, bytes, i * e->tile_bytes) == 0) {
        e->gray_ok[i] = 1;
    }
}

static void
drop_gray(ed_job *e, int64_t i)
{
    if (e->gray) {
        free(e->gray[i]);
        e->gray[i] = NULL;
    }
}

/* Tile i's rectangle: as the histogram pass kept it (its memory copy, which drop_gray frees,
 * or read back from the scratch file into rd's buffer), else read from the input. */
static tw_status
tile_pixels(tw_task_ctx *ctx, ed_job *e, int64_t i, const reader *rd, int64_t x, int64_t y,
            int32_t w, int32_t h, tw_tile_view *v)
{
    if (!e->gray_ok || !e->gray_ok[i])
        return read_rect(ctx, e, rd, x, y, w, h, v);
    if (e->gray) {
        *v = rect_view(e, x, y, w, h, e->gray[i]);
        return TW_OK;
    }
    *v = rect_view(e, x, y, w, h, rd->px);
    if (twi_pread_all(e->gray_fd, v->data, (size_t)v->stride * (size_t)h, i * e->tile_bytes) != 0)
        return twi_ctx_fail(ctx, TW_E_IO, OP ": cannot read tile %lld back from the scratch "
                            "file (%s)", (long long)i, strerror(errno));
    return TW_OK;
}

static uint8_t *
bits_of(const ed_job *e, int64_t i, int32_t r)
{
    return e->bits + (i * e->th + r) * e->bits_row;
}

/* Where the input is kept between its passes (runtime.keep_input), file inputs only: the
 * scan's flags in memory when they fit the host room; with Otsu, the histogram pass's tiles in
 * memory when they fit it too, else in a scratch file. */
static void
keep_setup(ed_job *e, tw_runtime *rt, const tw_config *cfg)
{
    const char *want = "auto";
    int64_t room = twi_runtime_keep_host_bytes(rt), bits;

    e->gray_fd = -1;
    e->tile_bytes = (int64_t)e->tw * e->th * (int64_t)tw_sample_size(e->in.s.in_type);
    if (!e->in.s.slide)
        return; /* an image in memory: reading it again costs a copy, no decode */
    if (tw_config_get_string(cfg, "runtime.keep_input", &want) != TW_OK)
        want = "auto";
    if (strcmp(want, "reread") == 0)
        return;
    e->bits_row = (e->tw + 7) / 8;
    bits = e->n_tiles * e->th * e->bits_row;
    if (e->method == TW_EDT_EXACT && (bits <= room || strcmp(want, "host") == 0)) {
        if ((e->bits = malloc((size_t)bits)) && (e->bits_ok = calloc((size_t)e->n_tiles, 1)))
            room -= bits;
        else {
            free(e->bits);
            e->bits = NULL;
        }
    }
    if (!e->otsu || !(e->gray_ok = calloc((size_t)e->n_tiles, 1)))
        return;
    if ((e->n_tiles * e->tile_bytes <= room && strcmp(want, "scratch") != 0) ||
        strcmp(want, "host") == 0) {
        if ((e->gray = calloc((size_t)e->n_tiles, sizeof *e->gray)))
            return;
    } else if ((e->gray_fd = twi_scratch_open(twi_scratch_dir(cfg), "edt")) >= 0) {
        return;
    }
    free(e->gray_ok);
    e->gray_ok = NULL;
}

/* ---- Otsu's threshold (scikit-image threshold_otsu on integer images: twi_otsu) */

static tw_status
hist_cpu(tw_task_ctx *ctx, void *arg)
{
    const ed_cell *cell = arg;
    ed_job *e = cell->e;
    int64_t x, y;
    int32_t w, h;
    uint64_t *local;
    reader rd;
    tw_tile_view v;
    tw_status st;

    tile_rect(e, cell->i, &x, &y, &w, &h);
    if ((st = reader_init(ctx, e, &rd)) != TW_OK ||
        (st = read_rect(ctx, e, &rd, x, y, w, h, &v)) != TW_OK)
        return st;
    keep_gray(e, cell->i, &v);
    if (!(local = twi_ctx_scratch(ctx, e->n_bins * sizeof *local)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory");
    memset(local, 0, e->n_bins * sizeof *local);
    twi_edt_hist_tile(&v, local);
    pthread_mutex_lock(&e->lock);
    for (size_t b = 0; b < e->n_bins; b++)
        e->hist[b] += local[b];
    pthread_mutex_unlock(&e->lock);
    twi_job_add_done(e->job, 1);
    return TW_OK;
}

static tw_status
otsu_cpu(tw_task_ctx *ctx, void *arg)
{
    ed_job *e = arg;
    tw_status st;

    /* Across ranks: Otsu's threshold of the whole image's histogram. */
    if (e->dist && (st = twi_dist_allreduce(e->dist, ctx, e->hist, (int64_t)e->n_bins,
                                            TWI_DIST_U64, TWI_DIST_SUM)) != TW_OK)
        return st;
    e->threshold = (double)twi_otsu(e->hist, e->n_bins);
    TW_LOG(TW_LOG_INFO, OP, "Otsu threshold %g", e->threshold);
    twi_job_add_done(e->job, 1);
    return TW_OK;
}

/* ---- scan: first and last background row of every column of a tile */

static tw_status
scan_cpu(tw_task_ctx *ctx, void *arg)
{
    const ed_cell *cell = arg;
    ed_job *e = cell->e;
    int64_t x, y, ty = cell->i / e->tiles_x;
    int32_t w, h, *first, *last;
    int64_t bg;
    uint8_t *fg;
    reader rd;
    tw_tile_view v;
    tw_status st;

    tile_rect(e, cell->i, &x, &y, &w, &h);
    first = e->first + ty * e->W + x;
    last = e->last + ty * e->W + x;
    if ((st = reader_init(ctx, e, &rd)) != TW_OK ||
        (st = tile_pixels(ctx, e, cell->i, &rd, x, y, w, h, &v)) != TW_OK)
        return st;
    if (!(fg = twi_ctx_scratch(ctx, (size_t)w)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory");
    bg = twi_edt_scan_tile(&v, e->threshold, e->invert, (int32_t)y, fg, first, last,
                           e->bits ? bits_of(e, cell->i, 0) : NULL, e->bits_row);
    if (e->bits)
        e->bits_ok[cell->i] = 1;
    drop_gray(e, cell->i);
    atomic_fetch_add(&e->background, bg);
    twi_job_add_done(e->job, 1);
    return TW_OK;
}

/* Across ranks, per column: the last background row of the ranks above this one (*above) and
 * the first of those below (*below), TWI_EDT_NONE where none; and the image's background
 * count. */
static tw_status
sync_dist(tw_task_ctx *ctx, ed_job *e, int32_t **above, int32_t **below)
{
    int64_t W = e->W, n = e->tiles_y;
    long long bg = atomic_load(&e->background);
    int64_t total = bg;
    int32_t *a, *b;
    tw_status st;

    if (!(a = malloc((size_t)W * sizeof *a)) || !(b = malloc((size_t)W * sizeof *b))) {
        free(a);
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory");
    }
    *above = a;
    *below = b;
    /* This band's own last and first background row per column; none is INT32_MAX for the
     * minimum. */
    twi_edt_band_ends(e->first, e->last, W, n, a, b);
    twi_dist_count_round(e->dist);
    if ((st = twi_dist_exscan_i32(e->dist, ctx, a, W, false, TWI_DIST_MAX, TWI_EDT_NONE)) !=
            TW_OK ||
        (st = twi_dist_exscan_i32(e->dist, ctx, b, W, true, TWI_DIST_MIN, INT32_MAX)) != TW_OK ||
        (st = twi_dist_allreduce(e->dist, ctx, &total, 1, TWI_DIST_I64, TWI_DIST_SUM)) != TW_OK)
        return st;
    for (int64_t x = 0; x < W; x++)
        if (b[x] == INT32_MAX)
            b[x] = TWI_EDT_NONE;
    atomic_store(&e->background, (long long)total);
    return TW_OK;
}

/* Turn first/last of every tile row into, for every band, the nearest background row below
 * and above it: below[b][x] = first background row of column x in tile rows > b, above[b][x]
 * = last background row in tile rows < b. In place: `last` becomes above, `first` below.
 * Across ranks the scans start from the other bands' rows (sync_dist). */
static tw_status
sync_cpu(tw_task_ctx *ctx, void *arg)
{
    ed_job *e = arg;
    int64_t W = e->W, n = e->tiles_y;
    int32_t *from_above = NULL, *from_below = NULL;
    tw_status st;

    if (e->dist && (st = sync_dist(ctx, e, &from_above, &from_below)) != TW_OK) {
        free(from_above); /* the scans worked on copies of them */
        free(from_below);
        return st;
    }
    twi_edt_bounds_sweep(e->first, e->last, W, n, from_above, from_below);
    free(from_above);
    free(from_below);
    twi_job_add_done(e->job, 1);
    return TW_OK;
}

/* ---- load: the binary band and its bounds */

static tw_status
load_cpu(tw_task_ctx *ctx, void *arg)
{
    ed_band *b = arg;
    ed_job *e = b->e;
    tw_tile_view bv = twi_ctx_view(ctx, 0), v;
    int64_t bg = 0;
    reader rd;
    tw_status st;

    if ((st = reader_init(ctx, e, &rd)) != TW_OK)
        return st;
    for (int64_t tx = 0; tx < e->tiles_x; tx++) {
        int64_t x = tx * e->tw;
        int32_t w = (int32_t)(e->W - x < e->tw ? e->W - x : e->tw);

        /* A band of a 64K-wide slide takes a second or more to read: look for a cancel. */
        if (twi_ctx_canceled(ctx))
            return TW_E_CANCELED;
        /* One tile-sized read at a time keeps the scratch small; the same rectangles as scan
         * (for the wavefront's single band, every tile row of it). */
        for (int64_t y = b->y0; y < b->y0 + b->h; y += e->th) {
            int32_t h = (int32_t)(b->y0 + b->h - y < e->th ? b->y0 + b->h - y : e->th);
            int64_t i = (y / e->th - e->ty0) * e->tiles_x + tx;

            if (e->bits && e->bits_ok[i]) { /* the scan's flags: no read, no threshold */
                twi_bits_unpack_rows(bits_of(e, i, 0), e->bits_row, w, h,
                                     TWI_ROW(&bv, uint8_t, y - b->y0) + x, bv.stride);
                continue;
            }
            if ((st = tile_pixels(ctx, e, i, &rd, x, y, w, h, &v)) != TW_OK)
                return st;
            bg += twi_edt_threshold_rows(&v, e->threshold, e->invert,
                                         TWI_ROW(&bv, uint8_t, y - b->y0) + x, bv.stride);
            drop_gray(e, i);
        }
    }
    if (e->method == TW_EDT_WAVEFRONT)
        atomic_fetch_add(&e->background, bg);
    if (b->bounds) {
        tw_tile_view ab = twi_ctx_view(ctx, 1);

        memcpy(TWI_ROW(&ab, int32_t, 0), e->last + b->index * e->W,
               (size_t)e->W * sizeof(int32_t));
        memcpy(TWI_ROW(&ab, int32_t, 1), e->first + b->index * e->W,
               (size_t)e->W * sizeof(int32_t));
    }
    twi_job_add_done(e->job, 1);
    return TW_OK;
}

/* ---- band: the EDT of one band */

static twi_edt_band
band_args(const ed_band *b, const tw_tile_view *bounds)
{
    const ed_job *e = b->e;
    twi_edt_band a;

    memset(&a, 0, sizeof a);
    a.y0 = b->y0;
    if (bounds) {
        a.above = TWI_ROW(bounds, const int32_t, 0);
        a.below = TWI_ROW(bounds, const int32_t, 1);
    }
    a.sx = e->sx;
    a.sy = e->sy;
    a.format = (int)e->format;
    a.m1 = e->m1;
    a.m2 = e->m2;
    a.m3 = e->m3;
    return a;
}

static tw_status
band_fail(tw_task_ctx *ctx, const ed_band *b, tw_status st)
{
    return twi_ctx_fail(ctx, st, OP ": the band of rows %lld..%lld failed (%s)",
                        (long long)b->y0, (long long)(b->y0 + b->h - 1), tw_status_string(st));
}

/* Views of a band task: 0 bin, 1 out, then bounds (exact method) and idx when present. */
typedef struct band_views {
    tw_tile_view bin, out, bounds, idx;
    bool has_bounds, has_idx;
} band_views;

static band_views
views_of(tw_task_ctx *ctx, const ed_band *b)
{
    band_views v;
    int k = 2;

    memset(&v, 0, sizeof v);
    v.bin = twi_ctx_view(ctx, 0);
    v.out = twi_ctx_view(ctx, 1);
    if ((v.has_bounds = b->bounds != NULL))
        v.bounds = twi_ctx_view(ctx, k++);
    if ((v.has_idx = b->idx != NULL))
        v.idx = twi_ctx_view(ctx, k);
    return v;
}

static tw_status
band_cpu(tw_task_ctx *ctx, void *arg)
{
    ed_band *b = arg;
    ed_job *e = b->e;
    band_views v = views_of(ctx, b);
    twi_edt_band a = band_args(b, v.has_bounds ? &v.bounds : NULL);
    tw_status st;

    if (e->method == TW_EDT_WAVEFRONT)
        st = twi_omp_edt_wavefront(&v.bin, &a, &v.out, v.has_idx ? &v.idx : NULL,
                                   twi_ctx_team(ctx));
    else {
        const twi_stop stop = {twi_ops_ctx_stop, ctx};

        st = twi_omp_edt_stop(&v.bin, &a, &v.out, v.has_idx ? &v.idx : NULL, twi_ctx_team(ctx),
                              &stop);
    }
    if (st == TW_E_CANCELED)
        return st;
    if (st != TW_OK)
        return band_fail(ctx, b, st);
    return TW_OK;
}

/* After a band succeeded, wherever it ran: a failed CUDA run is retried on a CPU worker, so the
 * counts and the progress move only here (runtime.md, "Faults and cancellation"). */
static tw_status
band_commit(tw_task_ctx *ctx, void *arg)
{
    ed_band *b = arg;
    ed_job *e = b->e;

    atomic_fetch_add(twi_ctx_device(ctx) == TW_DEVICE_CUDA ? &e->bands_cuda : &e->bands_cpu, 1);
    twi_job_add_done(e->job, 1);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
static tw_status
band_cuda(tw_task_ctx *ctx, void *arg)
{
    ed_band *b = arg;
    ed_job *e = b->e;
    band_views v = views_of(ctx, b);
    twi_edt_band a = band_args(b, v.has_bounds ? &v.bounds : NULL);
    bool wave = e->method == TW_EDT_WAVEFRONT;
    size_t bytes = wave ? twi_cuda_edt_wavefront_scratch_size(v.bin.w, v.bin.h)
                        : twi_cuda_edt_scratch_size(v.bin.w, v.bin.h, &a);
    void *scratch;
    tw_status st;

    if (!(scratch = twi_ctx_scratch(ctx, bytes)))
        return twi_ctx_fail(ctx, TW_E_DEVICE,
                            OP ": no GPU memory for the band of rows %lld..%lld (%zu bytes)",
                            (long long)b->y0, (long long)(b->y0 + b->h - 1), bytes);
    if (wave)
        st = twi_cuda_edt_wavefront(&v.bin, &a, &v.out, v.has_idx ? &v.idx : NULL, scratch,
                                    bytes, twi_ctx_stream(ctx));
    else
        st = twi_cuda_edt(&v.bin, &a, &v.out, v.has_idx ? &v.idx : NULL, scratch, bytes,
                          twi_ctx_stream(ctx));
    if (st != TW_OK)
        return band_fail(ctx, b, st);
    return TW_OK;
}
#endif

/* ---- store */

/* Columns [x, x + w) of a band's view. */
static tw_tile_view
slice_view(tw_tile_view v, int64_t x, int32_t w)
{
    v.data = (char *)v.data + x * v.channels * (int64_t)tw_sample_size(v.type);
    v.w = w;
    v.x0 += x;
    return v;
}

static tw_status
store_cpu(tw_task_ctx *ctx, void *arg)
{
    ed_slice *sl = arg;
    ed_band *b = sl->b;
    ed_job *e = b->e;
    tw_tile_view ov = slice_view(twi_ctx_view(ctx, 0), sl->x, sl->w);
    tw_error err;
    tw_status st;

    if (e->dist) {
        if ((st = twi_dist_put(e->dist, ctx, 0, sl->x, b->y0, &ov)) != TW_OK)
            return st;
    } else if (e->out_file) {
        if ((st = twi_put_cancelable(ctx, e->in.s.assembler, sl->x, b->y0, &ov, &err)) != TW_OK)
            return twi_ctx_fail(ctx, st, "%s", err.message);
    } else if (!e->wrap_out) { /* wrapped: the distances are there already */
        twi_host_image_put(&e->result, &ov, sl->x, b->y0);
    }
    if (b->idx) {
        tw_tile_view iv = slice_view(twi_ctx_view(ctx, 1), sl->x, sl->w);

        if (e->dist) {
            if ((st = twi_dist_put(e->dist, ctx, 1, sl->x, b->y0, &iv)) != TW_OK)
                return st;
        } else if (e->idx_file) {
            if ((st = twi_put_cancelable(ctx, e->idx_s.assembler, sl->x, b->y0, &iv, &err)) !=
                TW_OK)
                return twi_ctx_fail(ctx, st, "%s", err.message);
        } else {
            twi_host_image_put(&e->indices, &iv, sl->x, b->y0);
        }
    }
    /* The last slice written retires the band. */
    if (atomic_fetch_sub(&b->slices_left, 1) != 1)
        return TW_OK;
    /* The tasks keep their own references until they end; the job no longer needs the band. */
    twi_tile_release(b->bin);
    twi_tile_release(b->bounds);
    twi_tile_release(b->out);
    twi_tile_release(b->idx);
    b->bin = b->bounds = b->out = b->idx = NULL;
    /* Only now may another band be admitted: memory holds the window's bands whatever the
     * image height. */
    twi_job_add_done(e->job, 1);
    twi_window_retire(e->window);
    return TW_OK;
}

/*
 * Where bands run. A band is the whole image width and a tile high: on an H100 the PBA+ kernel
 * does 50-60 GPix/s, one CPU core about 0.1 GPix/s (docs/benchmarks.md), so a band a CPU worker
 * takes first-come-first-served ends long after the GPU would have done all the rest. With GPU
 * workers present, bands therefore run on them only, and CPU workers do the reading, scanning
 * and writing around them. (The runtime's cost-model policies are to make this choice in
 * general; until then it is made here, from those measurements.)
 */
static bool
band_can_run(const void *arg, tw_device_type dev)
{
    const ed_band *b = arg;

    if (dev == TW_DEVICE_CUDA)
        return b->e->format != TWI_EDT_U8;
    return !b->e->bands_on_gpu;
}

/* ---- kinds */

static const tw_task_kind hist_kind = {
    .name = "edt.hist",
    .devices = TW_DEVICE_CPU,
    .cpu = hist_cpu,
};
static const tw_task_kind otsu_kind = {
    .name = "edt.otsu",
    .devices = TW_DEVICE_CPU,
    .cpu = otsu_cpu,
};
static const tw_task_kind scan_kind = {
    .name = "edt.scan",
    .devices = TW_DEVICE_CPU,
    .cpu = scan_cpu,
};
static const tw_task_kind sync_kind = {
    .name = "edt.sync",
    .devices = TW_DEVICE_CPU,
    .cpu = sync_cpu,
};
/* Host budget (runtime.host_mem): a load waits until its band and the band's outputs fit, so
 * that loads never fill the memory the band transforms need. */
static int64_t
load_host_bytes(const void *arg)
{
    const ed_band *b = arg;
    const ed_job *e = b->e;
    int64_t px = e->W * (int64_t)b->h;

    return px * (int64_t)tw_sample_size(e->out_type) + (e->want_idx ? 8 * px : 0);
}

static const tw_task_kind load_kind = {
    .name = "edt.load",
    .devices = TW_DEVICE_CPU,
    .cpu = load_cpu,
    .host_bytes = load_host_bytes,
    .load = true,
};
static const tw_task_kind band_kind = {
    .name = "edt.band",
    .cpu = band_cpu,
    TWI_CUDA_VARIANT(band_cuda),
    .can_run = band_can_run,
    .commit = band_commit,
    .team = true,
};
static const tw_task_kind wave_kind = {
    .name = "edt.wavefront",
    .cpu = band_cpu,
    TWI_CUDA_VARIANT(band_cuda),
    .can_run = band_can_run,
    .commit = band_commit,
    .team = true,
};
static const tw_task_kind store_kind = {
    .name = "edt.store",
    .devices = TW_DEVICE_CPU,
    .cpu = store_cpu,
};

/* ---- the job */

static tw_status
ed_finish(tw_job *job, tw_status st, void *user)
{
    ed_job *e = user;
    tw_error err;

    for (int64_t k = 0; k < e->n_bands; k++) /* wrapped tiles let go of the caller's image */
        twi_tile_detach(e->bands[k].out);
    /* Every band was admitted (or none will be): the task holds a reference on the job. */
    twi_task_release(e->after);
    e->after = NULL;
    if (e->dist) {
        /* Across ranks: the run's totals, or tell the others; before the outputs are renamed. */
        tw_status ds = twi_dist_finish(e->dist, st, tw_job_get_error(job), &err);

        if (st == TW_OK && ds != TW_OK) {
            twi_stream_finish(&e->idx_s, ds, NULL);
            twi_stream_finish(&e->in.s, ds, NULL);
            return twi_job_fail(job, ds, "%s", err.message);
        }
    }
    if (st == TW_OK && atomic_load(&e->background) == 0 &&
        (!e->dist || twi_dist_rank(e->dist) == 0))
        TW_WARN(OP, "no background pixel (none %s the threshold %g): every distance is infinite",
                e->invert ? "above" : "at or below", e->threshold);
    if (e->report) {
        e->report->threshold = e->threshold;
        e->report->background = atomic_load(&e->background);
        e->report->bands = e->n_bands;
        e->report->bands_cpu = atomic_load(&e->bands_cpu);
        e->report->bands_cuda = atomic_load(&e->bands_cuda);
    }
    /* The input's stream holds the writer: closing it renames the output into place. */
    return twi_stream_finish_two(job, &e->in.s, &e->idx_s, st);
}

static void
ed_free(void *user)
{
    ed_job *e = user;

    if (!e)
        return;
    twi_stream_finish(&e->idx_s, TW_E_CANCELED, NULL);
    twi_stream_finish(&e->in.s, TW_E_CANCELED, NULL);
    twi_dist_destroy(e->dist);
    for (int64_t i = 0; e->bands && i < e->n_bands; i++) {
        twi_tile_release(e->bands[i].bin);
        twi_tile_release(e->bands[i].bounds);
        twi_tile_release(e->bands[i].out);
        twi_tile_release(e->bands[i].idx);
    }
    for (int64_t i = 0; e->gray && i < e->n_tiles; i++)
        free(e->gray[i]);
    free(e->gray);
    free(e->gray_ok);
    if (e->gray_fd >= 0)
        close(e->gray_fd);
    free(e->bits);
    free(e->bits_ok);
    free(e->bands);
    free(e->slices);
    free(e->cells);
    free(e->first);
    free(e->last);
    free(e->hist);
    if (e->lock_init)
        pthread_mutex_destroy(&e->lock);
    free(e);
}

static tw_status
check_opts(const tw_edt_opts *o, tw_error *err)
{
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": options not initialised with tw_edt_opts_init()");
    if (o->format != TW_EDT_F32 && o->format != TW_EDT_U16 && o->format != TW_EDT_SQ32 &&
        o->format != TW_EDT_U8)
        return twi_error_set(err, TW_E_INVALID, OP ": unknown format %d", (int)o->format);
    if (!(o->step > 0) || !isfinite(o->step))
        return twi_error_set(err, TW_E_INVALID, OP ": step %g (it must be positive and finite)",
                             o->step);
    if (o->step != 1.0 && o->format != TW_EDT_U8 && o->format != TW_EDT_U16)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": a step (%g) applies to the u8 and u16 formats only", o->step);
    if (o->method != TW_EDT_EXACT && o->method != TW_EDT_WAVEFRONT)
        return twi_error_set(err, TW_E_INVALID, OP ": unknown method %d", (int)o->method);
    if (!o->spacing_auto &&
        (!(o->spacing_x > 0) || !(o->spacing_y > 0) || !isfinite(o->spacing_x) ||
         !isfinite(o->spacing_y)))
        return twi_error_set(err, TW_E_INVALID,
                             OP ": spacing %g,%g (both must be positive and finite)",
                             o->spacing_x, o->spacing_y);
    if (o->format == TW_EDT_SQ32 &&
        (o->spacing_auto || o->spacing_x != 1.0 || o->spacing_y != 1.0))
        return twi_error_set(err, TW_E_INVALID,
                             OP ": the sq32 format is in pixels; it cannot take a spacing");
    if (!o->threshold_otsu && !isfinite(o->threshold))
        return twi_error_set(err, TW_E_INVALID, OP ": threshold %g is not finite", o->threshold);
    if (!o->output.path && !o->result.data)
        return twi_error_set(err, TW_E_INVALID, OP ": no output given (a file or an image)");
    if (o->output.path && o->result.data)
        return twi_error_set(err, TW_E_INVALID, OP ": both an output file and an output image");
    if (o->indices_path && o->indices.data)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": both an indices file and an indices image");
    if (o->report && o->report->struct_size != sizeof *o->report)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": report not initialised with tw_edt_report_init()");
    return TW_OK;
}

static const tw_sample_type format_type[] = {
    [TW_EDT_F32] = TW_F32, [TW_EDT_U16] = TW_U16, [TW_EDT_SQ32] = TW_U32, [TW_EDT_U8] = TW_U8};

/* Inputs, outputs, parameters and the band table: everything up to the job. */
static tw_status
ed_setup(ed_job *e, tw_runtime *rt, const tw_edt_opts *o, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    int64_t v = 0, tdw = 0, tdh = 0;
    tw_status st;

    e->method = o->method;
    e->format = (twi_edt_format)o->format;
    e->out_type = format_type[o->format];
    e->otsu = o->threshold_otsu;
    e->invert = o->invert;
    e->threshold = o->threshold;
    e->report = o->report;
#ifdef TW_HAVE_CUDA
    /* u8 has no GPU variant yet: its bands run on CPU workers (band_can_run) */
    e->bands_on_gpu = twi_runtime_gpu_count(rt) > 0 && e->format != TWI_EDT_U8;
#endif
    if (pthread_mutex_init(&e->lock, NULL) != 0)
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    e->lock_init = true;
    if (e->dist && (o->image.data || !o->output.path || o->indices.data))
        return twi_error_set(err, TW_E_INVALID,
                             OP ": a job across MPI ranks reads and writes files, not images in "
                             "memory");
    if (e->dist && o->method == TW_EDT_WAVEFRONT)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": method TW_EDT_WAVEFRONT runs the whole image as one band; "
                             "across MPI ranks only the exact method runs");
    if ((st = twi_src_open(cfg, OP, TWI_SRC_U8 | TWI_SRC_U16 | TWI_SRC_U32 | TWI_SRC_F32,
                           "input", &o->input, &o->image, &e->in, err)) != TW_OK)
        return st;
    /* threshold 0 ("nonzero") on colour measures to the slide's black pixels: refused */
    if ((st = twi_src_mask_check(OP, &e->in, e->otsu || e->threshold != 0 || e->in.s.in_mask,
                                 err)) != TW_OK)
        return st;
    e->W = e->in.s.w;
    e->H = e->in.s.h;
    if (e->W > TWI_EDT_MAX_SIDE || e->H > TWI_EDT_MAX_SIDE)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": the image is %lldx%lld; sides up to %d pixels are supported",
                             (long long)e->W, (long long)e->H, TWI_EDT_MAX_SIDE);
    if (e->otsu && e->in.s.in_type != TW_U8 && e->in.s.in_type != TW_U16)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": threshold_otsu needs an 8- or 16-bit image, not %s",
                             tw_sample_type_name(e->in.s.in_type));
    if (o->spacing_auto) {
        double mx = 0, my = 0;

        if (e->in.s.slide)
            tw_slide_get_mpp(e->in.s.slide, &mx, &my);
        if (!(mx > 0) || !(my > 0))
            return twi_error_set(err, TW_E_INVALID,
                                 OP ": spacing_auto, but %s has no pixel size (mpp)",
                                 e->in.path ? e->in.path : "the image in memory");
        e->sx = mx * e->in.s.downsample;
        e->sy = my * e->in.s.downsample;
    } else {
        e->sx = o->spacing_x;
        e->sy = o->spacing_y;
    }
    /* d / step is the distance with the spacing divided by step (step 1: the exact integer
     * path of unit spacing is kept) */
    e->step = o->step;
    e->sx /= o->step;
    e->sy /= o->step;
    /* The kernels square the spacing and divide by it: a square that underflows or overflows
     * (--step 1e300, a crafted mpp) makes 0/0 and a wild index, not a distance. 1e-12 to 1e12
     * keeps the squares normal and every f32 distance finite. */
    if (!(e->sx >= 1e-12 && e->sx <= 1e12 && e->sy >= 1e-12 && e->sy <= 1e12))
        return twi_error_set(err, TW_E_INVALID,
                             OP ": spacing / step %g,%g is out of range (1e-12 to 1e12)", e->sx,
                             e->sy);

    /* Outputs. */
    if (o->output.path) {
        if (e->in.path && twi_ops_same_file(e->in.path, o->output.path))
            return twi_error_set(err, TW_E_INVALID, OP ": the output '%s' would overwrite the input",
                                 o->output.path);
        e->out_file = true;
    } else {
        if ((st = twi_host_image_check(OP, "result", &o->result, e->W, e->H, e->out_type,
                                       err)) != TW_OK)
            return st;
        e->result = o->result;
    }
    if (o->indices_path) {
        if ((e->in.path && twi_ops_same_file(e->in.path, o->indices_path)) ||
            (o->output.path && (strcmp(o->output.path, o->indices_path) == 0 ||
                                twi_ops_same_file(o->output.path, o->indices_path))))
            return twi_error_set(err, TW_E_INVALID,
                                 OP ": the indices file '%s' would overwrite the input or the "
                                 "output",
                                 o->indices_path);
        e->idx_file = e->want_idx = true;
    } else if (o->indices.data) {
        const tw_host_image *r = &o->indices;

        if (r->w != e->W || r->h != e->H || r->type != TW_U32 ||
            (r->stride && r->stride < (size_t)r->w * 8))
            return twi_error_set(err, TW_E_INVALID,
                                 OP ": the indices image is %lldx%lld %s (stride %zu); %lldx%lld "
                                 "u32 with 2 samples a pixel needed",
                                 (long long)r->w, (long long)r->h, tw_sample_type_name(r->type),
                                 r->stride, (long long)e->W, (long long)e->H);
        e->indices = *r;
        e->want_idx = true;
    }
    if (!e->out_file && twi_host_image_wrappable(rt, &e->result)) {
        /* the indices image as the u32 samples it holds, two a pixel */
        tw_host_image idx = e->indices;

        idx.stride = idx.stride ? idx.stride : (size_t)idx.w * 8;
        idx.w *= 2;
        e->wrap_out = !twi_host_image_overlap(&e->result, &e->in.mem) &&
                      !twi_host_image_overlap(&e->result, &idx);
    }

    /* Tiles, bands, PBA+ parameters. */
    if ((st = twi_ops_tile_size(cfg, "edt.tile_size", o->tile_w, o->tile_h, &e->tw, &e->th,
                                err)) != TW_OK)
        return st;
    if (twi_ops_tile_implicit(cfg, "edt.tile_size", o->tile_w))
        twi_stream_align_tile(&e->in.s, &e->tw, &e->th);
    if (tw_config_get_int(cfg, "edt.pba_m1", &v) == TW_OK)
        e->m1 = (int32_t)v;
    if (tw_config_get_int(cfg, "edt.pba_m2", &v) == TW_OK)
        e->m2 = (int32_t)v;
    if (tw_config_get_int(cfg, "edt.pba_m3", &v) == TW_OK)
        e->m3 = (int32_t)v;
    e->tiles_x = (e->W + e->tw - 1) / e->tw;
    e->tiles_y = (e->H + e->th - 1) / e->th;
    if (e->dist) {
        int64_t ty1;

        /* This rank's band of rows of tiles; tiles and bands keep their place in the image. */
        if ((st = twi_dist_partition(e->dist, rt, TW_OK, NULL, e->W, e->H, e->tw, e->th,
                                     &band_kind, err)) != TW_OK)
            return st;
        twi_dist_band(e->dist, &e->ty0, &ty1);
        e->tiles_y = ty1 - e->ty0;
    }
    e->n_tiles = e->tiles_x * e->tiles_y;
    e->n_bands = e->method == TW_EDT_WAVEFRONT ? 1 : e->tiles_y;
    if (!(e->bands = calloc((size_t)e->n_bands, sizeof *e->bands)) ||
        !(e->cells = calloc((size_t)e->n_tiles, sizeof *e->cells)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    for (int64_t i = 0; i < e->n_tiles; i++) {
        e->cells[i].e = e;
        e->cells[i].i = i;
    }
    keep_setup(e, rt, cfg);
    if (e->method == TW_EDT_EXACT &&
        (!(e->first = malloc((size_t)(e->tiles_y * e->W) * sizeof *e->first)) ||
         !(e->last = malloc((size_t)(e->tiles_y * e->W) * sizeof *e->last))))
        return twi_error_set(err, TW_E_NOMEM,
                             OP ": out of memory for the column table (%lld tile rows of %lld)",
                             (long long)e->tiles_y, (long long)e->W);
    if (e->otsu) {
        e->n_bins = e->in.s.in_type == TW_U8 ? 256 : 65536;
        if (!(e->hist = calloc(e->n_bins, sizeof *e->hist)))
            return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    }
    for (int64_t i = 0; i < e->n_bands; i++) {
        ed_band *b = &e->bands[i];

        b->e = e;
        b->index = i;
        b->y0 = (e->ty0 + i) * e->th;
        b->h = e->method == TW_EDT_WAVEFRONT ? (int32_t)e->H
                                             : (int32_t)(e->H - b->y0 < e->th ? e->H - b->y0 : e->th);
    }

    /* Store slices: STORE_SLICE output tiles (io.tiff_tile) wide. */
    e->slice_w = STORE_SLICE * 512;
    if (tw_config_get_dims(cfg, "io.tiff_tile", &tdw, &tdh) == TW_OK && tdw > 0)
        e->slice_w = STORE_SLICE * (int32_t)tdw;
    e->n_slices = (int32_t)((e->W + e->slice_w - 1) / e->slice_w);
    if (!(e->slices = calloc((size_t)(e->n_bands * e->n_slices), sizeof *e->slices)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    for (int64_t i = 0; i < e->n_bands; i++)
        for (int32_t j = 0; j < e->n_slices; j++) {
            ed_slice *sl = &e->slices[i * e->n_slices + j];

            sl->b = &e->bands[i];
            sl->x = (int64_t)j * e->slice_w;
            sl->w = (int32_t)(e->W - sl->x < e->slice_w ? e->W - sl->x : e->slice_w);
        }

    /* Output files last: on failure before this point nothing was created. Across ranks,
     * rank 0 writes them. */
    if (e->dist && twi_dist_rank(e->dist) != 0)
        return TW_OK;
    if (e->out_file && (e->format == TWI_EDT_U8 || e->step != 1.0)) {
        /* a scaled map says what a grey level is (docs/edt.md, "Formats") */
        locale_t old = uselocale(twi_c_locale());

        snprintf(e->step_text, sizeof e->step_text, "%.10g", e->step);
        uselocale(old);
        e->in.s.desc_items[0] = "DistanceStep";
        e->in.s.desc_items[1] = e->step_text;
        e->in.s.desc_items[2] = "DistanceUnit";
        e->in.s.desc_items[3] = o->spacing_auto ? "um"
                                : o->spacing_x == 1.0 && o->spacing_y == 1.0 ? "pixel"
                                                                              : "spacing";
    }
    if (e->out_file &&
        (st = twi_stream_open_output(&e->in.s, cfg, OP, &o->output, 1, e->out_type, err)) !=
            TW_OK)
        return st;
    if (e->idx_file) {
        tw_output io = o->output;

        e->idx_s.w = e->W;
        e->idx_s.h = e->H;
        e->idx_s.level = e->in.s.level;
        e->idx_s.src_level = e->in.s.src_level;
        e->idx_s.reduce = e->in.s.reduce;
        e->idx_s.x = e->in.s.x;
        e->idx_s.y = e->in.s.y;
        /* the resolution tags of the main output (the slide stays the main stream's) */
        e->idx_s.meta = e->in.s.slide;
        e->idx_s.downsample = e->in.s.downsample;
        io.path = o->indices_path;
        if ((st = twi_stream_open_output(&e->idx_s, cfg, OP, &io, 2, TW_U32, err)) != TW_OK)
            return st;
    }
    return TW_OK;
}

/* Create band k's tiles and its load, band and store tasks; load waits for e->after (sync,
 * otsu or nothing). The bands are the units of the job's streaming window: the runtime admits
 * them as workers free up, and the last store of a band retires it. */
static tw_status
submit_band(void *arg, int64_t k)
{
    ed_job *e = arg;
    ed_band *b = &e->bands[k];
    tw_task *after = e->after;
    tw_task *ld = NULL, *bd = NULL, *sto = NULL;
    bool wave = e->method == TW_EDT_WAVEFRONT;
    int32_t W = (int32_t)e->W;
    tw_runtime *rt = e->rt;
    tw_status st;

    if ((st = twi_tile_create(rt, W, b->h, 1, TW_U8, &b->bin)) != TW_OK ||
        (st = e->wrap_out ? twi_host_image_wrap(rt, &e->result, 0, b->y0, W, b->h, &b->out)
                          : twi_tile_create(rt, W, b->h, 1, e->out_type, &b->out)) != TW_OK ||
        (!wave && (st = twi_tile_create(rt, W, 2, 1, TW_U32, &b->bounds)) != TW_OK) ||
        (e->want_idx && (st = twi_tile_create(rt, W, b->h, 2, TW_U32, &b->idx)) != TW_OK))
        return st;
    twi_tile_set_origin(b->bin, 0, b->y0);
    twi_tile_set_origin(b->out, 0, b->y0);
    if (b->idx)
        twi_tile_set_origin(b->idx, 0, b->y0);
    if ((st = twi_task_create(e->job, &load_kind, b, NULL, &ld)) != TW_OK ||
        (st = twi_task_add_tile(ld, b->bin, TW_W)) != TW_OK ||
        (b->bounds && (st = twi_task_add_tile(ld, b->bounds, TW_W)) != TW_OK) ||
        (after && (st = twi_task_depend(ld, after)) != TW_OK))
        goto out;
    if ((st = twi_task_create(e->job, wave ? &wave_kind : &band_kind, b, NULL, &bd)) != TW_OK ||
        (st = twi_task_add_tile(bd, b->bin, TW_R)) != TW_OK ||
        (st = twi_task_add_tile(bd, b->out, TW_W)) != TW_OK ||
        (b->bounds && (st = twi_task_add_tile(bd, b->bounds, TW_R)) != TW_OK) ||
        (b->idx && (st = twi_task_add_tile(bd, b->idx, TW_W)) != TW_OK) ||
        (st = twi_task_depend(bd, ld)) != TW_OK)
        goto out;
    atomic_store(&b->slices_left, e->n_slices);
    for (int32_t j = 0; j < e->n_slices; j++) {
        if ((st = twi_task_create(e->job, &store_kind, &e->slices[b->index * e->n_slices + j],
                                  NULL, &sto)) != TW_OK ||
            (st = twi_task_add_tile(sto, b->out, TW_R)) != TW_OK ||
            (b->idx && (st = twi_task_add_tile(sto, b->idx, TW_R)) != TW_OK) ||
            (st = twi_task_depend(sto, bd)) != TW_OK || (st = twi_task_submit(sto)) != TW_OK)
            goto out;
        twi_task_release(sto);
        sto = NULL;
    }
    if ((st = twi_task_submit(bd)) == TW_OK)
        st = twi_task_submit(ld);
out:
    twi_task_release(ld);
    twi_task_release(bd);
    twi_task_release(sto);
    return st;
}

static tw_status
submit_graph(ed_job *e, tw_runtime *rt)
{
    bool exact = e->method == TW_EDT_EXACT;
    tw_task *otsu = NULL, *sync = NULL;
    tw_status st = TW_OK;

    e->rt = rt;
    twi_job_add_total(e->job, 3 * e->n_bands + (exact ? e->n_tiles + 1 : 0) +
                                  (e->otsu ? e->n_tiles + 1 : 0));
    if (e->otsu) {
        if ((st = twi_task_create(e->job, &otsu_kind, e, NULL, &otsu)) != TW_OK)
            goto out;
        for (int64_t i = 0; i < e->n_tiles && st == TW_OK; i++) {
            tw_task *h = NULL;

            if ((st = twi_task_create(e->job, &hist_kind, &e->cells[i], NULL, &h)) ==
                    TW_OK &&
                (st = twi_task_depend(otsu, h)) == TW_OK)
                st = twi_task_submit(h);
            twi_task_release(h);
        }
    }
    if (exact && st == TW_OK) {
        if ((st = twi_task_create(e->job, &sync_kind, e, NULL, &sync)) != TW_OK)
            goto out;
        for (int64_t i = 0; i < e->n_tiles && st == TW_OK; i++) {
            tw_task *sc = NULL;

            if ((st = twi_task_create(e->job, &scan_kind, &e->cells[i], NULL, &sc)) ==
                    TW_OK &&
                (!otsu || (st = twi_task_depend(sc, otsu)) == TW_OK) &&
                (st = twi_task_depend(sync, sc)) == TW_OK)
                st = twi_task_submit(sc);
            twi_task_release(sc);
        }
    }
    /* otsu and sync first: making the bands' tiles can take seconds (pinned host memory with
     * GPUs, 1.3 GB a band of a 64K-wide image), and the first band's load may start while
     * the later bands are made (a dependency on a task already done is met at once). */
    if (st == TW_OK && otsu)
        st = twi_task_submit(otsu);
    if (st == TW_OK && sync)
        st = twi_task_submit(sync);
    if (st == TW_OK) {
        int64_t px = e->W * (int64_t)e->th;

        /* the reference moves to e */
        e->after = exact ? sync : otsu;
        if (exact)
            sync = NULL;
        else
            otsu = NULL;
        st = twi_window_open(e->job, e->n_bands,
                             px * (1 + (int64_t)tw_sample_size(e->out_type) +
                                   (e->want_idx ? 8 : 0)),
                             submit_band, e, &e->window);
    }
out:
    twi_task_release(otsu);
    twi_task_release(sync);
    return st;
}

/* One process (mpi NULL) or across MPI ranks (tilewave/mpi.h). */
static tw_status
edt_submit(tw_runtime *rt, const tw_edt_opts *o, tw_mpi *mpi, tw_mpi_report *report,
           tw_job **out, tw_error *err)
{
    tw_status st;
    ed_job *e = NULL;
    tw_job *job = NULL;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, OP ": NULL argument");
    if ((st = check_opts(o, err)) != TW_OK)
        return st;
    if (!(e = calloc(1, sizeof *e)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    e->gray_fd = -1;
    atomic_init(&e->background, 0);
    atomic_init(&e->bands_cpu, 0);
    atomic_init(&e->bands_cuda, 0);
    if (mpi && (st = twi_dist_create(mpi, OP, report, &e->dist, err)) != TW_OK) {
        ed_free(e);
        return st;
    }
    if ((st = ed_setup(e, rt, o, err)) != TW_OK) {
        twi_dist_abandon(e->dist, st, err); /* the other ranks fail too, not wait */
        ed_free(e); /* aborts opened writers: nothing is left at the output paths */
        return st;
    }
    if ((st = twi_job_create(rt, OP, &job)) != TW_OK) {
        ed_free(e);
        return twi_error_set(err, st, OP ": cannot create the job");
    }
    e->job = job;
    twi_job_set_finish(job, ed_finish, e, ed_free); /* the job owns e from here */
    if (e->wrap_out)
        twi_host_image_register(job, &e->result);
    twi_stream_attach_io(&e->in.s, job);
    twi_stream_attach_io(&e->idx_s, job);
    if (e->dist) {
        twi_stream *outs[2] = {&e->in.s, &e->idx_s};

        st = twi_dist_launch(e->dist, job, outs, e->want_idx ? 2 : 1, err);
    }
    return twi_ops_job_launch(job, OP, st == TW_OK ? submit_graph(e, rt) : st, out, err);
}

tw_status
tw_edt_submit(tw_runtime *rt, const tw_edt_opts *o, tw_job **out, tw_error *err)
{
    return edt_submit(rt, o, NULL, NULL, out, err);
}

tw_status
tw_mpi_edt_submit(tw_mpi *c, tw_runtime *rt, const tw_edt_opts *o, tw_mpi_report *report,
                  tw_job **out, tw_error *err)
{
    if (!c)
        return twi_error_set(err, TW_E_INVALID, OP ": NULL MPI context");
    return edt_submit(rt, o, c, report, out, err);
}

/* ---- options and names */

void
tw_edt_opts_init(tw_edt_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->spacing_x = 1.0;
    o->spacing_y = 1.0;
    o->format = TW_EDT_F32;
    o->method = TW_EDT_EXACT;
    o->step = 1.0;
}

void
tw_edt_report_init(tw_edt_report *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
}

tw_status
tw_edt_format_parse(const char *name, tw_edt_format *out)
{
    static const char *const names[] = {"f32", "u16", "sq32", "u8"};

    for (int i = 0; name && out && i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (tw_edt_format)i;
            return TW_OK;
        }
    }
    return TW_E_INVALID;
}

tw_status
tw_edt_method_parse(const char *name, tw_edt_method *out)
{
    if (!name || !out)
        return TW_E_INVALID;
    if (strcmp(name, "exact") == 0)
        *out = TW_EDT_EXACT;
    else if (strcmp(name, "wavefront") == 0)
        *out = TW_EDT_WAVEFRONT;
    else
        return TW_E_INVALID;
    return TW_OK;
}
