/* SPDX-License-Identifier: MIT */
/* tilewave: `convert`, a slide level copied as it is into a tiled BigTIFF or OME-TIFF. */
/*
 * The no-op of the streaming path: gray.c's pipeline without its conversion. Each processing
 * tile is two tasks,
 *
 *     io.read (CPU) --> io.write (CPU)
 *       [in: W]          [in: R]
 *
 * io.read decodes the tile's rectangle of the slide (every channel, the stored sample type)
 * into a host tile; io.write hands it to the output assembler, which compresses and appends
 * every output TIFF tile it completes and feeds the pyramid levels. A window of a few
 * pipelines per worker is in flight; each io.write submits the next, so tiles are read no
 * faster than they are written and memory stays bounded whatever the slide's size.
 *
 * What it is for: turning any slide tilewave reads (OpenSlide vendor formats, striped or
 * tiled TIFF) into a pyramidal tiled BigTIFF or OME-TIFF; and measuring read + write
 * throughput alone (bench/io.sh).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define OP "convert"

typedef struct cv_job {
    twi_stream s;
    int64_t n_tiles;
    atomic_llong next; /* next tile index without a pipeline */
    tw_job *job;       /* borrowed: the job owns this struct */
} cv_job;

/* The arguments of one pipeline's two tasks; owned (freed) by its io.write task, which
 * completes last. */
typedef struct cv_tile {
    cv_job *c;
    int64_t x, y; /* in the level's frame */
    int32_t w, h;
} cv_tile;

static tw_status submit_pipeline(cv_job *c, int64_t i);

static tw_status
read_cpu(tw_task_ctx *ctx, void *arg)
{
    cv_tile *t = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;

    st = tw_slide_read_region(t->c->s.slide, t->c->s.level, t->x, t->y, t->w, t->h, v.data,
                              (size_t)v.stride, &err);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    return TW_OK;
}

static tw_status
write_cpu(tw_task_ctx *ctx, void *arg)
{
    cv_tile *t = arg;
    cv_job *c = t->c;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;
    int64_t next;

    st = twi_assembler_put(c->s.assembler, t->x - c->s.x, t->y - c->s.y, &v, &err);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    twi_job_add_done(c->job, 1);
    if (twi_ctx_canceled(ctx))
        return TW_OK;
    next = atomic_fetch_add(&c->next, 1);
    if (next < c->n_tiles && (st = submit_pipeline(c, next)) != TW_OK)
        return twi_ctx_fail(ctx, st, OP ": cannot submit tile %lld", (long long)next);
    return TW_OK;
}

/* Host budget (runtime.host_mem): a read waits until its tile fits. */
static int64_t
read_host_bytes(const void *arg)
{
    const cv_tile *t = arg;

    return (int64_t)t->w * t->h * (int64_t)t->c->s.in_channels *
           (int64_t)tw_sample_size(t->c->s.in_type);
}

static const tw_task_kind read_kind = {
    .name = "io.read",
    .devices = TW_DEVICE_CPU,
    .cpu = read_cpu,
    .host_bytes = read_host_bytes,
    .load = true,
};

static const tw_task_kind write_kind = {
    .name = "io.write",
    .devices = TW_DEVICE_CPU,
    .cpu = write_cpu,
};

static tw_status
submit_pipeline(cv_job *c, int64_t i)
{
    tw_status st = TW_OK;
    tw_runtime *rt = twi_job_runtime(c->job);
    cv_tile *t = NULL;
    tw_tile *tile = NULL;
    tw_task *rd = NULL, *wr = NULL;

    if (!(t = calloc(1, sizeof *t)))
        return TW_E_NOMEM;
    t->c = c;
    twi_stream_tile_rect(&c->s, i, &t->x, &t->y, &t->w, &t->h);
    if ((st = twi_tile_create(rt, t->w, t->h, c->s.in_channels, c->s.in_type, &tile)) !=
        TW_OK) {
        free(t);
        goto out;
    }
    twi_tile_set_origin(tile, t->x, t->y);
    /* io.write owns `t`: it completes last, even when a cancel drops both tasks */
    if ((st = twi_task_create(c->job, &write_kind, t, free, &wr)) != TW_OK) {
        free(t);
        goto out;
    }
    if ((st = twi_task_create(c->job, &read_kind, t, NULL, &rd)) != TW_OK ||
        (st = twi_task_add_tile(rd, tile, TW_W)) != TW_OK ||
        (st = twi_task_add_tile(wr, tile, TW_R)) != TW_OK ||
        (st = twi_task_depend(wr, rd)) != TW_OK)
        goto out;
    if ((st = twi_task_submit(wr)) != TW_OK || (st = twi_task_submit(rd)) != TW_OK)
        goto out;
out:
    twi_task_release(rd);
    twi_task_release(wr);
    twi_tile_release(tile);
    return st;
}

static tw_status
cv_finish(tw_job *job, tw_status st, void *user)
{
    cv_job *c = user;
    tw_error err;

    st = twi_stream_finish(&c->s, st, &err);
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

static void
cv_free(void *user)
{
    cv_job *c = user;

    twi_stream_finish(&c->s, TW_E_CANCELED, NULL);
    free(c);
}

void
tw_convert_opts_init(tw_convert_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

/* The input options that would change pixels have no place in a copy. */
static tw_status
check_input(const tw_input *in, tw_error *err)
{
    const char *what = in->gray != TW_GRAY_LUMINANCE         ? "a gray mode"
                       : in->stains_set                       ? "stain vectors"
                       : in->threshold_mode != TW_THRESHOLD_NONE ? "a threshold"
                       : in->invert                           ? "invert"
                       : in->tissue || in->tissue_mask_path   ? "tissue skipping"
                                                              : NULL;

    if (what)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": copies pixels as they are read; %s does not apply (use gray "
                             "for one channel or a mask)",
                             what);
    return TW_OK;
}

tw_status
tw_convert_submit(tw_runtime *rt, const tw_convert_opts *o, tw_job **out, tw_error *err)
{
    tw_status st = TW_OK;
    const tw_config *cfg;
    cv_job *c = NULL;
    tw_job *job = NULL;
    int32_t tw = 0, th = 0;
    int64_t window;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, OP ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": options not initialised with tw_convert_opts_init()");
    if ((st = check_input(&o->input, err)) != TW_OK)
        return st;
    if (o->output.overlay)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": an overlay blends an operation's result over the slide; a "
                             "copy has none");
    cfg = tw_runtime_get_config(rt);
    if ((st = twi_ops_tile_size(cfg, NULL, o->tile_w, o->tile_h, &tw, &th, err)) != TW_OK)
        return st;
    if (!(c = calloc(1, sizeof *c)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    /* The output has the input's channels and sample type. twi_stream_open() opens the slide
     * first, so the channel count is known only there: open the two halves here. */
    if (!o->input.path || !o->output.path) {
        free(c);
        return twi_error_set(err, TW_E_INVALID, OP ": input and output paths are required");
    }
    if (twi_ops_same_file(o->input.path, o->output.path)) {
        free(c);
        return twi_error_set(err, TW_E_INVALID, OP ": the output '%s' would overwrite the input",
                             o->output.path);
    }
    if ((st = twi_stream_open_input(&c->s, cfg, OP, &o->input, err)) != TW_OK) {
        free(c);
        return st;
    }
    c->s.tile_w = tw;
    c->s.tile_h = th;
    c->s.tiles_x = (c->s.w + tw - 1) / tw;
    c->s.tiles_y = (c->s.h + th - 1) / th;
    if ((st = twi_stream_open_output(&c->s, cfg, OP, &o->output, c->s.in_channels,
                                     c->s.in_type, err)) != TW_OK) {
        twi_stream_finish(&c->s, st, NULL);
        free(c);
        return st;
    }
    c->n_tiles = c->s.tiles_x * c->s.tiles_y;
    if ((st = twi_job_create(rt, OP, &job)) != TW_OK) {
        twi_stream_finish(&c->s, st, NULL);
        free(c);
        return twi_error_set(err, st, OP ": cannot create the job");
    }
    c->job = job;
    twi_job_set_finish(job, cv_finish, c, cv_free); /* the job owns c from here */
    twi_job_add_total(job, c->n_tiles);
    /* A window of a few pipelines per worker; each io.write submits the next one. */
    window = 2 * (int64_t)tw_runtime_get_worker_count(rt) + 2;
    if (window > c->n_tiles)
        window = c->n_tiles;
    atomic_store(&c->next, window);
    for (int64_t i = 0; i < window && st == TW_OK; i++)
        st = submit_pipeline(c, i);
    return twi_ops_job_launch(job, OP, st, out, err);
}
