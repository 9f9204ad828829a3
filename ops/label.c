/* SPDX-License-Identifier: MIT */
/* tilewave: `label`, connected components of a whole slide, tile by tile, exact. */
/* Why one file: the whole-image GPU path (label.whole, at the end) is the same job as the tile
 * passes: it shares their job struct, report and finish, and its fallback after a failed GPU
 * attempt is their entry (the pass windows), so splitting it would put lb_job in a header. */
/*
 * Two passes over the tiles and one merge between them ([Teodoro13]'s TP/BP shape):
 *
 *   pass 1, per tile:  label.load (CPU) --> label.tp1 (the tile's labels, its border labels
 *                      and per-row counts of first pixels; the labels themselves are dropped)
 *   BP, once:          label.merge (CPU): a union-find over every tile's border labels, keyed
 *                      by the global raster index of each one's first pixel; the final
 *                      numbers (omp/label_omp.c, twi_label_merge)
 *   pass 2, per tile:  label.load --> label.tp2 (the tile labelled again, the same bytes, and
 *                      mapped to the final numbers) --> label.store
 *
 * Both passes stream through windows (runtime/window.c): memory holds the tiles in flight,
 * the border labels (bounded by the tiles' border pixels) and one count per image row and tile
 * column, never the image. A file input is decoded once (runtime.keep_input): pass 1 keeps
 * each tile's mask as bits, 1 bit a pixel, in host memory while they fit its keep room
 * (twi_runtime_keep_host_bytes), and pass 2 unpacks them; when they do not fit, pass 2 reads
 * the input again (said by --summary). A single tile needs no merge: pass 2 alone, its
 * labels final.
 *
 * An image in memory that fits a GPU whole (lb_whole_fits) skips all that: label.whole_load
 * (unless the mask is the tile itself) --> label.whole, one CUDA task over the whole image
 * (cuda/label_cuda.cu, twi_cuda_label_image: the labels final, no merge) --> label.whole_store.
 * When the GPU attempt fails, the runtime retries label.whole on a CPU worker, whose variant does
 * nothing: its commit starts the tile passes above instead (same bytes, bounded memory).
 * Without GPUs, an image in memory with no tile size asked for (lb_whole_cpu) goes whole too:
 * label.whole on a team of the CPU workers labels the runs of the whole image
 * (omp/label_runs.c) and writes the labels once into the caller's buffer.
 *
 * Numbering: as scikit-image's measure.label, components in raster order of their first pixel
 * (the smallest y, then x, of the whole image), 0 the background; TW_U32 labels, or TW_U64
 * when the image could hold more than 2^32 - 1 components (or label_bits says so). The result
 * depends on nothing but the mask and the connectivity.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

#define OP "label"

typedef struct lb_job lb_job;

typedef struct lb_cell {
    lb_job *a;
    int64_t i;
    int64_t x, y;
    int32_t w, h;
    unsigned sides;
    tw_tile *img, *out;   /* the job's references while the cell's pass runs */
    int pass;
    twi_label_border b;   /* pass 1's border labels and row counts, until pass 2 */
    uint64_t *map;        /* pass 2 on a GPU: the host map being uploaded, until the commit */
} lb_cell;

struct lb_job {
    tw_job *job;
    twi_src in;           /* in.s holds the writer when out_file */
    bool out_file;
    tw_host_image result;
    /* The tiles are windows of the caller's images (runtime/tile.c, "Wrapped tiles"): the
     * mask's, the result's. */
    bool wrap_in, wrap_out;
    int64_t W, H;
    int32_t tw, th;
    int64_t tiles_x, tiles_y, n_tiles;
    lb_cell *cells;
    int conn;
    tw_sample_type out_type;
    twi_window *win[3];   /* the cells of pass 1 and pass 2 (win[pass]) */
    tw_runtime *rt;
    atomic_llong labelled;
    atomic_llong tp_cpu, tp_cuda;
    twi_label_merged merged;
    uint64_t objects;
    double t0, t1, t2;
    tw_label_report *report;
    /* the input kept between the passes (lb_keep_setup): bits_ok[i] once tile i's mask is in
     * bits (rows of bits_row bytes, tile i at i * th rows); NULL: read again */
    uint8_t *bits, *bits_ok;
    int64_t bits_row;
    /* the whole image on a GPU (lb_whole_fits) or on the CPU workers (lb_whole_cpu,
     * whole_cpu): its two tiles, and the count */
    bool whole, whole_cpu;
    tw_tile *w_img, *w_out;
    uint64_t whole_n;
};

static tw_status lb_submit_cell(lb_job *a, lb_cell *c, int pass);

/* Row r of tile i's kept mask. */
static uint8_t *
lb_bits(const lb_job *a, int64_t i, int32_t r)
{
    return a->bits + (i * a->th + r) * a->bits_row;
}

static tw_status
lb_load(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;
    lb_job *a = c->a;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    uint8_t *row = NULL;
    tw_status st;

    if (a->bits && v.type == TW_U16 && !(row = malloc((size_t)v.w)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory for tile %lld",
                            (long long)c->i);
    /* pass 2 of a kept tile: its bits (written by pass 1's load, which every pass-2 task
     * follows through the merge) */
    if (c->pass == 2 && a->bits && a->bits_ok[c->i]) {
        twi_bits_unpack_view(lb_bits(a, c->i, 0), a->bits_row, &v, row);
        free(row);
        twi_job_add_done(a->job, 1);
        return TW_OK;
    }
    if (!a->wrap_in && (st = twi_src_read(ctx, OP, &a->in, c->x, c->y, &v, NULL)) != TW_OK) {
        free(row);
        return st;
    }
    if (c->pass == 1 && a->bits) {
        twi_bits_pack_view(&v, lb_bits(a, c->i, 0), a->bits_row, row);
        a->bits_ok[c->i] = 1;
    }
    free(row);
    twi_job_add_done(a->job, 1);
    return TW_OK;
}

/* The tile's runs and local labels (view 0 the mask, omp/label_runs.c), in scratch. */
static tw_status
lb_label(tw_task_ctx *ctx, lb_cell *c, twi_label_runs *r)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);
    void *sc = twi_ctx_scratch(ctx, twi_label_runs_scratch(v.w, v.h));
    tw_status st;

    if (!sc)
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory labelling tile %lld",
                            (long long)c->i);
    if ((st = twi_omp_label_runs(&v, c->a->conn, sc, r, twi_ctx_team(ctx))) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": labelling tile %lld failed (%s)", (long long)c->i,
                            tw_status_string(st));
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
/* The same on a GPU worker: view 0 and *lab in device memory, *n copied back. */
static tw_status
lb_label_cuda(tw_task_ctx *ctx, lb_cell *c, tw_tile_view *lab, int64_t *n)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);
    size_t px = (size_t)v.w * (size_t)v.h, sb = twi_cuda_label_scratch_size(v.w, v.h);
    uint32_t *d_n, hn = 0;
    void *sc;
    tw_status st;

    *lab = v;
    lab->type = TW_U32;
    lab->stride = (int64_t)v.w * 4;
    if (!(lab->data = twi_ctx_scratch(ctx, px * 4 + 4)) || !(sc = twi_ctx_scratch(ctx, sb)) ||
        !(d_n = twi_ctx_scratch(ctx, 4)))
        return twi_ctx_fail(ctx, TW_E_DEVICE, OP ": no GPU memory to label tile %lld",
                            (long long)c->i);
    if ((st = twi_cuda_label(&v, c->a->conn, lab, d_n, sc, sb, twi_ctx_stream(ctx))) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": labelling tile %lld on the GPU failed (%s)",
                            (long long)c->i, tw_status_string(st));
    if ((st = twi_ctx_copy_to_host(ctx, &hn, d_n, 4)) != TW_OK)
        return st;
    *n = hn;
    return TW_OK;
}
#endif

static void
lb_count_tp(tw_task_ctx *ctx, lb_job *a)
{
    atomic_fetch_add(twi_ctx_device(ctx) == TW_DEVICE_CUDA ? &a->tp_cuda : &a->tp_cpu, 1);
}

/* Let go of a cell's tiles and retire it from its pass's window. */
static void
lb_cell_done(lb_cell *c, int pass)
{
    twi_tile_release(c->img);
    c->img = NULL;
    twi_tile_release(c->out);
    c->out = NULL;
    twi_job_add_done(c->a->job, 1);
    twi_window_retire(c->a->win[pass]);
}

static tw_status
lb_admit1(void *arg, int64_t k)
{
    lb_job *a = arg;

    return lb_submit_cell(a, &a->cells[k], 1);
}

static tw_status
lb_admit2(void *arg, int64_t k)
{
    lb_job *a = arg;

    return lb_submit_cell(a, &a->cells[k], 2);
}

/* Host bytes a cell holds while its pass runs: its mask tile, in pass 2 its labels. */
static int64_t
lb_unit_bytes(const lb_job *a, int pass)
{
    int64_t px = (int64_t)a->tw * a->th;

    return px * (int64_t)tw_sample_size(a->in.s.in_type) +
           (pass == 2 ? px * (int64_t)tw_sample_size(a->out_type) : 0);
}

static const tw_task_kind lb_merge_kind;

static tw_status
lb_tp1_fail(tw_task_ctx *ctx, const lb_cell *c, tw_status st)
{
    return twi_ctx_fail(ctx, st, OP ": the border labels of tile %lld failed (%s)",
                        (long long)c->i, tw_status_string(st));
}

/* TP, pass 1: the tile's labels, its border labels and row counts. */
static tw_status
lb_tp1_cpu(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;
    twi_label_runs r;
    tw_status st;

    twi_label_border_free(&c->b); /* a retry starts from nothing */
    if ((st = lb_label(ctx, c, &r)) != TW_OK)
        return st;
    if ((st = twi_label_runs_border(&r, c->sides, &c->b)) != TW_OK)
        return lb_tp1_fail(ctx, c, st);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
static tw_status
lb_tp1_cuda(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;
    tw_tile_view lab;
    int64_t n;
    size_t words;
    uint32_t *d_sum, *sum;
    tw_status st;

    twi_label_border_free(&c->b);
    if ((st = lb_label_cuda(ctx, c, &lab, &n)) != TW_OK)
        return st;
    /* Only a summary comes back (each label's first pixel, the sides' labels: 2 to 10% of
     * the labels' bytes), from which the host makes the border labels. */
    words = (size_t)n + 1 + 2 * ((size_t)lab.w + (size_t)lab.h);
    if (!(d_sum = twi_ctx_scratch(ctx, words * sizeof *d_sum)))
        return twi_ctx_fail(ctx, TW_E_DEVICE, OP ": no GPU memory for the border of tile %lld",
                            (long long)c->i);
    if ((st = twi_cuda_label_summary(&lab, n, d_sum, twi_ctx_stream(ctx))) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": the border of tile %lld on the GPU failed (%s)",
                            (long long)c->i, tw_status_string(st));
    if (!(sum = malloc(words * sizeof *sum)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory for tile %lld",
                            (long long)c->i);
    if ((st = twi_ctx_copy_to_host(ctx, sum, d_sum, words * sizeof *sum)) == TW_OK)
        st = twi_label_border_from_first(lab.w, lab.h, n, c->sides, sum, sum + n + 1, &c->b);
    free(sum);
    if (st == TW_E_DEVICE)
        return st;
    if (st != TW_OK)
        return lb_tp1_fail(ctx, c, st);
    return TW_OK;
}
#endif

/* After pass 1 of a tile succeeded: the last one starts the merge. */
static tw_status
lb_tp1_commit(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;
    lb_job *a = c->a;
    tw_status st;

    lb_count_tp(ctx, a);
    lb_cell_done(c, 1);
    if (atomic_fetch_add(&a->labelled, 1) + 1 == a->n_tiles) {
        tw_task *t = NULL;

        a->t1 = twi_now_s();
        if ((st = twi_task_create(a->job, &lb_merge_kind, a, NULL, &t)) == TW_OK)
            st = twi_task_submit(t);
        twi_task_release(t);
        if (st != TW_OK)
            return twi_ctx_fail(ctx, st, OP ": cannot submit the merge (%s)",
                                tw_status_string(st));
    }
    return TW_OK;
}

/* BP: merge every tile's border labels into the final numbers. */
static tw_status
lb_merge(tw_task_ctx *ctx, void *arg)
{
    lb_job *a = arg;
    twi_label_border **bs;
    tw_status st;

    twi_label_merged_free(&a->merged);
    if (!(bs = malloc((size_t)a->n_tiles * sizeof *bs)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory for the merge");
    for (int64_t i = 0; i < a->n_tiles; i++)
        bs[i] = &a->cells[i].b;
    st = twi_label_merge(bs, a->tiles_x, a->tiles_y, a->tw, a->th, a->W, a->conn, &a->merged);
    free(bs);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": the merge of the border labels failed (%s)",
                            tw_status_string(st));
    if (a->out_type == TW_U32 && a->merged.total > UINT32_MAX)
        return twi_ctx_fail(ctx, TW_E_INVALID,
                            OP ": %llu objects do not fit 32-bit labels (64-bit labels needed)",
                            (unsigned long long)a->merged.total);
    return TW_OK;
}

/* After the merge: the sides go (pass 2 needs the row counts and border labels), pass 2
 * starts. */
static tw_status
lb_merge_commit(tw_task_ctx *ctx, void *arg)
{
    lb_job *a = arg;
    tw_status st;

    for (int64_t i = 0; i < a->n_tiles; i++)
        twi_label_border_free_sides(&a->cells[i].b);
    a->objects = a->merged.total;
    a->t2 = twi_now_s();
    twi_job_add_done(a->job, 1);
    if ((st = twi_window_open(a->job, a->n_tiles, lb_unit_bytes(a, 2), lb_admit2, a,
                              &a->win[2])) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": cannot submit the tile tasks (%s)",
                            tw_status_string(st));
    return TW_OK;
}

/* Pass 2's map of tile c's n local labels to the final numbers into map (n + 1 entries). */
static tw_status
lb_tp2_map(tw_task_ctx *ctx, lb_cell *c, int64_t n, uint64_t *map)
{
    lb_job *a = c->a;
    twi_label_border one = {0};
    const twi_label_border *b = a->n_tiles > 1 ? &c->b : &one;
    tw_status st;

    one.n = n;
    if (a->n_tiles == 1)
        c->b.n = n; /* no pass 1: the tile's count is the total (lb_tp2_commit) */
    if (b->n != n)
        return twi_ctx_fail(ctx, TW_E_INTERNAL,
                            OP ": tile %lld has %lld labels in pass 2, %lld in pass 1",
                            (long long)c->i, (long long)n, (long long)b->n);
    if (!map)
        return twi_ctx_fail(ctx, TW_E_NOMEM, OP ": out of memory for the labels of tile %lld",
                            (long long)c->i);
    if ((st = twi_label_map(b, a->n_tiles > 1 ? &a->merged : NULL, c->i, c->y, map)) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": numbering tile %lld failed (%s)", (long long)c->i,
                            tw_status_string(st));
    return TW_OK;
}

static tw_status
lb_tp2_fail(tw_task_ctx *ctx, const lb_cell *c, tw_status st)
{
    return twi_ctx_fail(ctx, st, OP ": numbering tile %lld failed (%s)", (long long)c->i,
                        tw_status_string(st));
}

/* TP, pass 2: the tile labelled again and mapped to the final numbers into view 1. */
static tw_status
lb_tp2_cpu(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;
    tw_tile_view o = twi_ctx_view(ctx, 1);
    twi_label_runs r;
    uint64_t *map;
    tw_status st;

    if ((st = lb_label(ctx, c, &r)) != TW_OK)
        return st;
    free(c->map); /* a retry after a failed CUDA run */
    c->map = NULL;
    map = twi_ctx_scratch(ctx, ((size_t)r.n + 1) * sizeof *map);
    if ((st = lb_tp2_map(ctx, c, r.n, map)) != TW_OK)
        return st;
    /* the final labels written once, from the runs */
    if ((st = twi_label_runs_write(&r, map, &o, twi_ctx_team(ctx))) != TW_OK)
        return lb_tp2_fail(ctx, c, st);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
static tw_status
lb_tp2_cuda(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;
    tw_tile_view lab, o = twi_ctx_view(ctx, 1);
    uint64_t *map, *d_map;
    int64_t n;
    tw_status st;

    if ((st = lb_label_cuda(ctx, c, &lab, &n)) != TW_OK)
        return st;
    free(c->map); /* a retry */
    c->map = NULL;
    /* the host map stays until the commit: the upload is asynchronous */
    map = c->map = malloc(((size_t)n + 1) * sizeof *map);
    if ((st = lb_tp2_map(ctx, c, n, map)) != TW_OK)
        return st;
    if (!(d_map = twi_ctx_scratch(ctx, ((size_t)n + 1) * sizeof *map)))
        return twi_ctx_fail(ctx, TW_E_DEVICE, OP ": no GPU memory for the labels of tile %lld",
                            (long long)c->i);
    if ((st = twi_ctx_copy_to_device(ctx, d_map, map, ((size_t)n + 1) * sizeof *map)) != TW_OK)
        return st;
    if ((st = twi_cuda_label_apply(&lab, d_map, &o, twi_ctx_stream(ctx))) != TW_OK)
        return lb_tp2_fail(ctx, c, st);
    return TW_OK;
}
#endif

static tw_status
lb_tp2_commit(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;

    lb_count_tp(ctx, c->a);
    free(c->map);
    c->map = NULL;
    if (c->a->n_tiles == 1)
        c->a->objects = (uint64_t)c->b.n;
    twi_job_add_done(c->a->job, 1);
    return TW_OK;
}

/* Write a numbered tile out (view 0). */
static tw_status
lb_store(tw_task_ctx *ctx, void *arg)
{
    lb_cell *c = arg;
    lb_job *a = c->a;
    tw_tile_view o = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;

    o.x0 = c->x;
    o.y0 = c->y;
    if (a->out_file) {
        if ((st = twi_assembler_put(a->in.s.assembler, c->x, c->y, &o, &err)) != TW_OK)
            return twi_ctx_fail(ctx, st, "%s", err.message);
    } else if (!a->wrap_out) { /* wrapped: the labels are there already */
        twi_host_image_put(&a->result, &o, c->x, c->y);
    }
    twi_label_border_free(&c->b);
    lb_cell_done(c, 2);
    return TW_OK;
}

/* Host budget: a load waits until its tile and, in pass 2, the labels it becomes fit. */
static int64_t
lb_load_host_bytes(const void *arg)
{
    const lb_cell *c = arg;

    return c->out ? (int64_t)c->w * c->h * (int64_t)tw_sample_size(c->a->out_type) : 0;
}

/* The tile tasks' scratch: the runs (omp/label_runs.c), at most about 8 bytes a pixel. */
static int64_t
lb_tp_host_bytes(const void *arg)
{
    const lb_cell *c = arg;

    return (int64_t)twi_label_runs_scratch(c->w, c->h);
}

static const tw_task_kind lb_load_kind = {
    .name = "label.load",
    .devices = TW_DEVICE_CPU,
    .cpu = lb_load,
    .host_bytes = lb_load_host_bytes,
    .load = true,
};
static const tw_task_kind lb_tp1_kind = {
    .name = "label.tp1",
    .cpu = lb_tp1_cpu,
    TWI_CUDA_VARIANT(lb_tp1_cuda),
    .host_bytes = lb_tp_host_bytes,
    .commit = lb_tp1_commit,
    .team = true,
};
static const tw_task_kind lb_merge_kind = {
    .name = "label.merge",
    .devices = TW_DEVICE_CPU,
    .cpu = lb_merge,
    .commit = lb_merge_commit,
};
static const tw_task_kind lb_tp2_kind = {
    .name = "label.tp2",
    .cpu = lb_tp2_cpu,
    TWI_CUDA_VARIANT(lb_tp2_cuda),
    .host_bytes = lb_tp_host_bytes,
    .commit = lb_tp2_commit,
    .team = true,
};
static const tw_task_kind lb_store_kind = {
    .name = "label.store",
    .devices = TW_DEVICE_CPU,
    .cpu = lb_store,
};

/* A cell's tiles and tasks: load -> tp1 (pass 1) or load -> tp2 -> store (pass 2). */
static tw_status
lb_submit_cell(lb_job *a, lb_cell *c, int pass)
{
    tw_task *ld = NULL, *tp = NULL, *sto = NULL;
    tw_status st;

    c->pass = pass;
    if ((st = a->wrap_in ? twi_host_image_wrap(a->rt, &a->in.mem, c->x, c->y, c->w, c->h,
                                               &c->img)
                         : twi_tile_create(a->rt, c->w, c->h, 1, a->in.s.in_type, &c->img)) !=
            TW_OK ||
        (pass == 2 &&
         (st = a->wrap_out ? twi_host_image_wrap(a->rt, &a->result, c->x, c->y, c->w, c->h,
                                                 &c->out)
                           : twi_tile_create(a->rt, c->w, c->h, 1, a->out_type, &c->out)) !=
             TW_OK))
        return st;
    twi_tile_set_origin(c->img, c->x, c->y);
    if (c->out)
        twi_tile_set_origin(c->out, c->x, c->y);
    if ((st = twi_task_create(a->job, &lb_load_kind, c, NULL, &ld)) != TW_OK ||
        (st = twi_task_add_tile(ld, c->img, a->wrap_in ? TW_R : TW_W)) != TW_OK ||
        (st = twi_task_create(a->job, pass == 1 ? &lb_tp1_kind : &lb_tp2_kind, c, NULL, &tp)) !=
            TW_OK ||
        (st = twi_task_add_tile(tp, c->img, TW_R)) != TW_OK ||
        (pass == 2 && (st = twi_task_add_tile(tp, c->out, TW_W)) != TW_OK) ||
        (st = twi_task_depend(tp, ld)) != TW_OK)
        goto out;
    if (pass == 2 && ((st = twi_task_create(a->job, &lb_store_kind, c, NULL, &sto)) != TW_OK ||
                      (st = twi_task_add_tile(sto, c->out, TW_RW)) != TW_OK ||
                      (st = twi_task_depend(sto, tp)) != TW_OK ||
                      (st = twi_task_submit(sto)) != TW_OK))
        goto out;
    if ((st = twi_task_submit(tp)) == TW_OK)
        st = twi_task_submit(ld);
out:
    twi_task_release(ld);
    twi_task_release(tp);
    twi_task_release(sto);
    return st;
}

/* ---- The whole image on a GPU */

/* Rows of the caller's image `img` into view v (to_view) or back, on the task's team. */
static void
lbw_copy(const tw_host_image *img, const tw_tile_view *v, bool to_view, int team)
{
    size_t ss = tw_sample_size(v->type), row = (size_t)v->w * ss;
    size_t stride = img->stride ? img->stride : (size_t)img->w * ss;
    int64_t h = v->h;

#pragma omp parallel for num_threads(team) schedule(static)
    for (int64_t y = 0; y < h; y++) {
        char *hp = (char *)img->data + (size_t)y * stride, *vp = (char *)v->data + y * v->stride;

        if (to_view)
            memcpy(vp, hp, row);
        else
            memcpy(hp, vp, row);
    }
}

static tw_status
lbw_load(tw_task_ctx *ctx, void *arg)
{
    lb_job *a = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0);

    lbw_copy(&a->in.mem, &v, true, twi_ctx_team(ctx));
    twi_job_add_done(a->job, 1);
    return TW_OK;
}

/* On the CPU workers (a->whole_cpu): the runs of the whole image (their exact room, a team of
 * the lent cores), the labels written once into the caller's buffer; when there is no room
 * for the runs (unbounded: 16 bytes a run), whole_cpu cleared and the commit falls back to the
 * tile passes (bounded memory, the same bytes). Else the CPU variant runs only when the CUDA
 * one failed (lbw_can_run) and does nothing: the commit falls back to the tile passes. */
static tw_status
lbw_label_cpu(tw_task_ctx *ctx, void *arg)
{
    lb_job *a = arg;
    tw_tile_view in, out;
    twi_label_runs r;
    tw_status st;

    if (!a->whole_cpu)
        return TW_OK;
    in = twi_ctx_view(ctx, 0);
    out = twi_ctx_view(ctx, 1);
    {
        const twi_stop stop = {twi_ops_ctx_stop, ctx};

        st = twi_omp_label_runs_alloc(&in, a->conn, &r, twi_ctx_team(ctx), &stop);
    }
    if (st == TW_E_NOMEM) {
        a->whole_cpu = false;
        return TW_OK;
    }
    if (st == TW_E_CANCELED)
        return st;
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": labelling the image failed (%s)",
                            tw_status_string(st));
    st = twi_label_runs_write(&r, NULL, &out, twi_ctx_team(ctx));
    a->whole_n = (uint64_t)r.n;
    twi_label_runs_free(&r);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": writing the labels failed (%s)",
                            tw_status_string(st));
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
static tw_status
lbw_label_cuda(tw_task_ctx *ctx, void *arg)
{
    lb_job *a = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);
    size_t sb = twi_cuda_label_image_scratch_size(in.w, in.h);
    void *sc = sb ? twi_ctx_scratch(ctx, sb) : NULL;
    uint32_t *d_n = twi_ctx_scratch(ctx, 4), n = 0;
    tw_status st;

    if (!sc || !d_n)
        return twi_ctx_fail(ctx, TW_E_DEVICE, OP ": no GPU memory to label the image (%zu bytes)",
                            sb);
    if ((st = twi_cuda_label_image(&in, a->conn, &out, d_n, sc, sb, twi_ctx_stream(ctx))) !=
        TW_OK)
        return twi_ctx_fail(ctx, st, OP ": labelling the image on the GPU failed (%s)",
                            tw_status_string(st));
    if ((st = twi_ctx_copy_to_host(ctx, &n, d_n, 4)) != TW_OK)
        return st;
    a->whole_n = n;
    return TW_OK;
}
#endif

/* On a GPU only (a CPU worker runs it after a failed GPU attempt: the runtime's retry), or
 * on a CPU worker only (a->whole_cpu). */
static bool
lbw_can_run(const void *arg, tw_device_type dev)
{
    const lb_job *a = arg;

    return a->whole_cpu ? dev == TW_DEVICE_CPU : dev == TW_DEVICE_CUDA;
}

static const tw_task_kind lbw_store_kind;

/* The GPU or the CPU workers (whole_cpu) labelled the image: the store. Else the tile passes,
 * from the start. */
static tw_status
lbw_label_commit(tw_task_ctx *ctx, void *arg)
{
    lb_job *a = arg;
    tw_task *t = NULL;
    int pass = a->n_tiles > 1 ? 1 : 2;
    tw_status st;

    twi_job_add_done(a->job, 1);
    if (twi_ctx_device(ctx) == TW_DEVICE_CUDA || a->whole_cpu) {
        a->objects = a->whole_n;
        atomic_fetch_add(a->whole_cpu ? &a->tp_cpu : &a->tp_cuda, 1);
        a->t1 = a->t2 = twi_now_s();
        if ((st = twi_task_create(a->job, &lbw_store_kind, a, NULL, &t)) == TW_OK &&
            (st = twi_task_add_tile(t, a->w_out, TW_R)) == TW_OK)
            st = twi_task_submit(t);
        twi_task_release(t);
        if (st != TW_OK)
            return twi_ctx_fail(ctx, st, OP ": cannot submit the store (%s)",
                                tw_status_string(st));
        return TW_OK;
    }
    /* Wrapped tiles stay until the job ends (lb_finish detaches them); copies go now. */
    a->whole = false;
    if (!a->wrap_in) {
        twi_tile_release(a->w_img);
        a->w_img = NULL;
    }
    if (!a->wrap_out) {
        twi_tile_release(a->w_out);
        a->w_out = NULL;
    }
    twi_job_add_total(a->job, 3 * a->n_tiles + (pass == 1 ? 2 * a->n_tiles + 1 : 0));
    a->t0 = twi_now_s();
    if ((st = twi_window_open(a->job, a->n_tiles, lb_unit_bytes(a, pass),
                              pass == 1 ? lb_admit1 : lb_admit2, a, &a->win[pass])) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": cannot submit the tile tasks (%s)",
                            tw_status_string(st));
    return TW_OK;
}

static tw_status
lbw_store(tw_task_ctx *ctx, void *arg)
{
    lb_job *a = arg;
    tw_tile_view o = twi_ctx_view(ctx, 0);

    if (!a->wrap_out) /* wrapped: the download put the labels there */
        lbw_copy(&a->result, &o, false, twi_ctx_team(ctx));
    twi_job_add_done(a->job, 1);
    return TW_OK;
}

static const tw_task_kind lbw_load_kind = {
    .name = "label.whole_load",
    .devices = TW_DEVICE_CPU,
    .cpu = lbw_load,
    .load = true,
    .team = true,
};
static const tw_task_kind lbw_label_kind = {
    .name = "label.whole",
    .cpu = lbw_label_cpu,
    TWI_CUDA_VARIANT(lbw_label_cuda),
    .can_run = lbw_can_run,
    .commit = lbw_label_commit,
    .team = true,
};
static const tw_task_kind lbw_store_kind = {
    .name = "label.whole_store",
    .devices = TW_DEVICE_CPU,
    .cpu = lbw_store,
    .team = true,
};

/* Does the job take the whole-image GPU path (docs/objects.md, "Whole images on a GPU")? An
 * image in memory into 32-bit labels in memory, fewer than 2^32 - 1 pixels, a runtime with GPUs
 * and no host budget, and the mask, the labels and the kernel's scratch (plus a quarter: the
 * pool's size classes) in 7/8 of the smallest GPU budget (label.gpu_whole = no: never). */
static bool
lb_whole_fits(const lb_job *a, tw_runtime *rt, const tw_config *cfg)
{
#ifdef TW_HAVE_CUDA
    const char *mode = "auto";
    int64_t host_mem = 0, px = a->W * a->H, need, budget = twi_runtime_gpu_budget(rt);
    size_t sb;

    if (tw_config_get_string(cfg, "label.gpu_whole", &mode) != TW_OK || !mode)
        mode = "auto";
    if (strcmp(mode, "no") == 0 || a->out_file || !a->in.mem.data || a->out_type != TW_U32 ||
        twi_runtime_gpu_count(rt) < 1 || a->W < 1 || a->H < 1 || a->W > INT32_MAX ||
        a->H > INT32_MAX || px >= (int64_t)UINT32_MAX)
        return false;
    if (tw_config_get_int(cfg, "runtime.host_mem", &host_mem) == TW_OK && host_mem > 0)
        return false;
    if (!(sb = twi_cuda_label_image_scratch_size((int32_t)a->W, (int32_t)a->H)))
        return false;
    /* three blocks (mask, labels, scratch), each rounded up by at most a quarter by the pool's
     * size classes (runtime/mem_cuda.c) */
    need = px * (int64_t)tw_sample_size(a->in.s.in_type) + px * 4 + (int64_t)sb;
    return need + need / 4 <= budget - budget / 8;
#else
    (void)a;
    (void)rt;
    (void)cfg;
    return false;
#endif
}

/* With GPUs, does an image in memory go to a GPU whole rather than to the CPU workers?
 * label.gpu_whole = yes: yes; no: no (tiles). auto: when the transfers are fast or the cores
 * few: the caller's buffers page-locked (or registered by the runtime), or fewer than
 * LB_CPU_WHOLE_MIN CPU workers. From pageable memory the GPU path moves 5 bytes a pixel over
 * the host link at pageable speed, where 16 cores label in memory as fast (16384^2: 0.066 s
 * on the CPU workers, 0.070 s on the GPU from pageable buffers, 0.033 s page-locked; the
 * lent H200 machine, docs/objects.md). */
#define LB_CPU_WHOLE_MIN 8

static bool
lb_gpu_first(const lb_job *a, tw_runtime *rt, const tw_config *cfg)
{
    const char *mode = "auto";

    if (tw_config_get_string(cfg, "label.gpu_whole", &mode) != TW_OK || !mode)
        mode = "auto";
    if (strcmp(mode, "auto") != 0)
        return strcmp(mode, "yes") == 0;
    return twi_runtime_cpu_count(rt) < LB_CPU_WHOLE_MIN || twi_runtime_registers_caller(rt) ||
           (twi_runtime_host_pinned(a->in.mem.data) && twi_runtime_host_pinned(a->result.data));
}

/* Does an image in memory go whole through the CPU workers (docs/objects.md, "Whole images")?
 * A runtime without GPUs (or one whose GPUs would not be faster: lb_gpu_first) and without a
 * host budget, the mask and 32-bit labels the caller's
 * own buffers (no copies), fewer than 2^32 - 1 pixels, and no tile size asked for (an
 * explicit one keeps the tile passes). Memory: the runs, 16 bytes each and 8 a row (a mask of
 * discs: about a byte a pixel; a checkerboard, the worst: 8). */
static bool
lb_whole_cpu(lb_job *a, tw_runtime *rt, const tw_config *cfg, const tw_label_opts *o)
{
    int64_t host_mem = 0;

    /* only CPU tasks touch the images: the caller's pageable buffers are used in place even
     * where GPU tasks would take copies (caller_memory = auto with GPUs) */
    if (a->out_file || !a->in.mem.data || a->out_type != TW_U32 ||
        !twi_host_image_wrappable_cpu(rt, &a->in.mem) ||
        !twi_host_image_wrappable_cpu(rt, &a->result) ||
        twi_host_image_overlap(&a->result, &a->in.mem) || a->W < 1 || a->H < 1 ||
        a->W > INT32_MAX || a->H > INT32_MAX || a->W * a->H >= (int64_t)UINT32_MAX ||
        !twi_ops_tile_implicit(cfg, NULL, o->tile_w) ||
        (twi_runtime_gpu_count(rt) > 0 && lb_gpu_first(a, rt, cfg)) ||
        (tw_config_get_int(cfg, "runtime.host_mem", &host_mem) == TW_OK && host_mem > 0))
        return false;
    a->wrap_in = a->wrap_out = true;
    return true;
}

/* The whole-image tasks: [label.whole_load] --> label.whole (its commit submits the store). */
static tw_status
lbw_graph(lb_job *a)
{
    tw_task *ld = NULL, *t = NULL;
    tw_status st;

    twi_job_add_total(a->job, a->wrap_in ? 2 : 3);
    if ((st = a->wrap_in ? twi_host_image_wrap(a->rt, &a->in.mem, 0, 0, (int32_t)a->W,
                                               (int32_t)a->H, &a->w_img)
                         : twi_tile_create(a->rt, (int32_t)a->W, (int32_t)a->H, 1,
                                           a->in.s.in_type, &a->w_img)) != TW_OK ||
        (st = a->wrap_out ? twi_host_image_wrap(a->rt, &a->result, 0, 0, (int32_t)a->W,
                                                (int32_t)a->H, &a->w_out)
                          : twi_tile_create(a->rt, (int32_t)a->W, (int32_t)a->H, 1, TW_U32,
                                            &a->w_out)) != TW_OK)
        return st;
    if ((st = twi_task_create(a->job, &lbw_label_kind, a, NULL, &t)) != TW_OK ||
        (st = twi_task_add_tile(t, a->w_img, TW_R)) != TW_OK ||
        (st = twi_task_add_tile(t, a->w_out, TW_W)) != TW_OK)
        goto out;
    if (!a->wrap_in && ((st = twi_task_create(a->job, &lbw_load_kind, a, NULL, &ld)) != TW_OK ||
                        (st = twi_task_add_tile(ld, a->w_img, TW_W)) != TW_OK ||
                        (st = twi_task_depend(t, ld)) != TW_OK))
        goto out;
    if ((st = twi_task_submit(t)) == TW_OK && ld)
        st = twi_task_submit(ld);
out:
    twi_task_release(ld);
    twi_task_release(t);
    return st;
}

static tw_status
lb_finish(tw_job *job, tw_status st, void *user)
{
    lb_job *a = user;
    tw_error err;
    double t3 = twi_now_s();

    for (int64_t i = 0; i < a->n_tiles; i++) { /* wrapped tiles let go of the caller's images */
        twi_tile_detach(a->cells[i].img);
        twi_tile_detach(a->cells[i].out);
    }
    twi_tile_detach(a->w_img);
    twi_tile_detach(a->w_out);
    st = twi_stream_finish(&a->in.s, st, &err);
    if (a->report) {
        tw_label_report *r = a->report;

        r->objects = st == TW_OK ? a->objects : 0;
        r->tiles = a->n_tiles;
        r->tile_w = a->tw;
        r->tile_h = a->th;
        r->label_bits = a->out_type == TW_U64 ? 64 : 32;
        r->border_labels = a->merged.n;
        r->tp_cpu = atomic_load(&a->tp_cpu);
        r->tp_cuda = atomic_load(&a->tp_cuda);
        r->label_s = a->t1 > 0 ? a->t1 - a->t0 : 0;
        r->merge_s = a->t2 > 0 ? a->t2 - a->t1 : 0;
        r->write_s = t3 - (a->t2 > 0 ? a->t2 : a->t0);
        if (a->whole) { /* one task over the image: label_s its upload, labelling, count */
            r->tiles = 1;
            r->tile_w = (int32_t)a->W;
            r->tile_h = (int32_t)a->H;
            r->border_labels = 0;
        }
    }
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

static void
lb_free(void *user)
{
    lb_job *a = user;

    if (!a)
        return;
    twi_stream_finish(&a->in.s, TW_E_CANCELED, NULL);
    for (int64_t i = 0; a->cells && i < a->n_tiles; i++) {
        twi_tile_release(a->cells[i].img);
        twi_tile_release(a->cells[i].out);
        twi_label_border_free(&a->cells[i].b);
        free(a->cells[i].map);
    }
    twi_tile_release(a->w_img);
    twi_tile_release(a->w_out);
    twi_label_merged_free(&a->merged);
    free(a->cells);
    free(a->bits);
    free(a->bits_ok);
    free(a);
}

/* Where pass 2 finds the mask (runtime.keep_input): kept as bits in host memory when the
 * input is a file, there are two passes, and the bits fit the keep room (or `host` is asked);
 * else (`reread`, too large, `scratch` or `gpu`, which label does not implement) read again. */
static tw_keep
lb_keep_setup(lb_job *a, tw_runtime *rt, const tw_config *cfg)
{
    const char *want = "auto";
    int64_t bytes;

    if (a->n_tiles < 2)
        return TW_KEEP_NONE;
    if (!a->in.s.slide)
        return TW_KEEP_REREAD; /* an image in memory: read again, a copy */
    if (tw_config_get_string(cfg, "runtime.keep_input", &want) != TW_OK)
        want = "auto";
    a->bits_row = (a->tw + 7) / 8;
    bytes = a->n_tiles * a->th * a->bits_row;
    if (strcmp(want, "reread") == 0 ||
        (bytes > twi_runtime_keep_host_bytes(rt) && strcmp(want, "host") != 0))
        return TW_KEEP_REREAD;
    if (!(a->bits = malloc((size_t)bytes)) || !(a->bits_ok = calloc((size_t)a->n_tiles, 1))) {
        free(a->bits);
        a->bits = NULL;
        return TW_KEEP_REREAD;
    }
    return TW_KEEP_HOST;
}

/* The most components a w x h image can hold: a checkerboard (4) or every other pixel of
 * every other row (8). */
static uint64_t
max_components(int64_t w, int64_t h, int conn)
{
    if (conn == 4)
        return ((uint64_t)w * (uint64_t)h + 1) / 2;
    return (uint64_t)((w + 1) / 2) * (uint64_t)((h + 1) / 2);
}

static tw_status
lb_setup(lb_job *a, tw_runtime *rt, const tw_label_opts *o, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    bool apart;
    tw_status st;

    if ((st = twi_src_open(cfg, OP, TWI_SRC_U8 | TWI_SRC_U16, "mask", &o->input, &o->image,
                           &a->in, err)) != TW_OK)
        return st;
    /* as edt: nonzero colour is nearly every pixel, one object, not what was meant */
    if ((st = twi_src_mask_check(OP, &a->in, a->in.s.in_mask, err)) != TW_OK)
        return st;
    a->W = a->in.s.w;
    a->H = a->in.s.h;
    if (o->label_bits == 64 ||
        (o->label_bits == 0 && (o->output.path ? max_components(a->W, a->H, a->conn) > UINT32_MAX
                                               : o->result.type == TW_U64)))
        a->out_type = TW_U64;
    else
        a->out_type = TW_U32;
    if (o->output.path) {
        if (a->in.path && twi_ops_same_file(a->in.path, o->output.path))
            return twi_error_set(err, TW_E_INVALID,
                                 OP ": the output '%s' would overwrite the input",
                                 o->output.path);
        a->out_file = true;
    } else {
        if ((st = twi_host_image_check(OP, "result", &o->result, a->W, a->H, a->out_type, err)) !=
            TW_OK)
            return st;
        a->result = o->result;
    }
    /* The caller's images as the tiles, when the result does not overlap the mask. */
    apart = a->out_file || !twi_host_image_overlap(&a->result, &a->in.mem);
    a->wrap_in = twi_host_image_wrappable(rt, &a->in.mem) && apart;
    a->wrap_out = !a->out_file && twi_host_image_wrappable(rt, &a->result) && apart;
    if ((st = twi_ops_tile_size(cfg, NULL, o->tile_w, o->tile_h, &a->tw, &a->th, err)) != TW_OK)
        return st;
    if (twi_ops_tile_implicit(cfg, NULL, o->tile_w))
        twi_stream_align_tile(&a->in.s, &a->tw, &a->th);
    if ((int64_t)a->tw * a->th >= (int64_t)UINT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": tiles of %dx%d pixels do not fit 32-bit tile indices",
                             (int)a->tw, (int)a->th);
    a->tiles_x = (a->W + a->tw - 1) / a->tw;
    a->tiles_y = (a->H + a->th - 1) / a->th;
    a->n_tiles = a->tiles_x * a->tiles_y;
    if (!(a->cells = calloc((size_t)a->n_tiles, sizeof *a->cells)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    for (int64_t i = 0; i < a->n_tiles; i++) {
        lb_cell *c = &a->cells[i];
        int64_t tx = i % a->tiles_x, ty = i / a->tiles_x;

        c->a = a;
        c->i = i;
        c->x = tx * a->tw;
        c->y = ty * a->th;
        c->w = (int32_t)(a->W - c->x < a->tw ? a->W - c->x : a->tw);
        c->h = (int32_t)(a->H - c->y < a->th ? a->H - c->y : a->th);
        c->sides = (ty > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0u) |
                   (ty + 1 < a->tiles_y ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM) : 0u) |
                   (tx > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0u) |
                   (tx + 1 < a->tiles_x ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0u);
    }
    if (a->out_file &&
        (st = twi_stream_open_output(&a->in.s, cfg, OP, &o->output, 1, a->out_type, err)) !=
            TW_OK)
        return st;
    return TW_OK;
}

tw_status
tw_label_submit(tw_runtime *rt, const tw_label_opts *o, tw_job **out, tw_error *err)
{
    lb_job *a;
    tw_job *job = NULL;
    tw_status st;
    int pass;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, OP ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": options not initialised with tw_label_opts_init()");
    if (o->connectivity != 4 && o->connectivity != 8)
        return twi_error_set(err, TW_E_INVALID, OP ": connectivity %d (4 or 8)",
                             o->connectivity);
    if (o->label_bits != 0 && o->label_bits != 32 && o->label_bits != 64)
        return twi_error_set(err, TW_E_INVALID, OP ": label bits %d (0, 32 or 64)",
                             o->label_bits);
    if (!o->output.path && !o->result.data)
        return twi_error_set(err, TW_E_INVALID, OP ": no output given (a file or an image)");
    if (o->output.path && o->result.data)
        return twi_error_set(err, TW_E_INVALID, OP ": both an output file and an output image");
    if (o->result.data && o->label_bits &&
        o->result.type != (o->label_bits == 64 ? TW_U64 : TW_U32))
        return twi_error_set(err, TW_E_INVALID,
                             OP ": the result image's type does not hold %d-bit labels",
                             o->label_bits);
    if (o->report && o->report->struct_size != sizeof *o->report)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": report not initialised with tw_label_report_init()");
    if (!(a = calloc(1, sizeof *a)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    a->conn = o->connectivity;
    a->report = o->report;
    atomic_init(&a->labelled, 0);
    atomic_init(&a->tp_cpu, 0);
    atomic_init(&a->tp_cuda, 0);
    if ((st = lb_setup(a, rt, o, err)) != TW_OK) {
        lb_free(a);
        return st;
    }
    if ((st = twi_job_create(rt, OP, &job)) != TW_OK) {
        lb_free(a);
        return twi_error_set(err, st, OP ": cannot create the job");
    }
    a->job = job;
    a->rt = rt;
    atomic_store(&twi_job_io(job)->kept,
                 (int)lb_keep_setup(a, rt, tw_runtime_get_config(rt)));
    twi_job_set_finish(job, lb_finish, a, lb_free);
    if (a->wrap_in)
        twi_host_image_register(job, &a->in.mem);
    if (a->wrap_out)
        twi_host_image_register(job, &a->result);
    twi_stream_attach_io(&a->in.s, job);
    a->t0 = twi_now_s();
    a->whole_cpu = lb_whole_cpu(a, rt, tw_runtime_get_config(rt), o);
    if ((a->whole = a->whole_cpu || lb_whole_fits(a, rt, tw_runtime_get_config(rt))))
        return twi_ops_job_launch(job, OP, lbw_graph(a), out, err);
    /* One tile: pass 2 alone. Progress: load, tp1 per tile; the merge; load, tp2, store. */
    pass = a->n_tiles > 1 ? 1 : 2;
    twi_job_add_total(job, 3 * a->n_tiles + (pass == 1 ? 2 * a->n_tiles + 1 : 0));
    st = twi_window_open(job, a->n_tiles, lb_unit_bytes(a, pass), pass == 1 ? lb_admit1 : lb_admit2,
                         a, &a->win[pass]);
    return twi_ops_job_launch(job, OP, st, out, err);
}

void
tw_label_opts_init(tw_label_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->connectivity = 8;
}

void
tw_label_report_init(tw_label_report *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
}
