/* SPDX-License-Identifier: MIT */
/* tilewave: `gray`, one channel from RGB, streamed tile by tile through the runtime. */
/*
 * The simplest operation, and the template of the streaming path every later one follows.
 *
 * Each processing tile is a pipeline of three tasks:
 *
 *     io.read (CPU) --> gray.tp (CPU or CUDA) --> io.write (CPU)
 *       [in: W]          [in: R, out: W]           [out: R]
 *
 * io.read decodes the tile's rectangle of the slide into a host tile; gray.tp converts it on
 * whichever worker takes it (the GPU worker uploads `in` and downloads `out` around the
 * kernel); io.write hands the result to the output assembler, which compresses and appends
 * every output TIFF tile that becomes complete.
 *
 * Memory stays bounded: the driver submits only a window of pipelines (a few per worker) and
 * each io.write submits the next pipeline from inside the running task, so tiles are read no
 * faster than they are written. The result does not depend on the tile size or on which
 * device converts which tile: the conversion is per pixel and integer-exact on both.
 *
 * The input's threshold is part of the kernel's parameters (ops/tissue.c); with --tissue,
 * io.read fills a tile without tissue with the glass colour instead of reading it.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

typedef struct gray_job {
    twi_stream s;
    tw_gray_mode mode;
    int64_t n_tiles;
    atomic_llong next;  /* next tile index without a pipeline */
    tw_job *job;        /* borrowed: the job owns this struct */
} gray_job;

/* The arguments of one pipeline's three tasks; owned (freed) by its io.write task, which
 * completes last. */
typedef struct gray_tile {
    gray_job *g;
    int64_t x, y; /* in the level's frame */
    int32_t w, h;
} gray_tile;

static tw_status submit_pipeline(gray_job *g, int64_t i);

static tw_status
read_cpu(tw_task_ctx *ctx, void *arg)
{
    gray_tile *t = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;

    if (twi_prep_skip(t->g->s.prep, t->x - t->g->s.x, t->y - t->g->s.y, t->w, t->h)) {
        /* --tissue: nothing but glass here; not read, converted as glass */
        twi_prep_fill_input(t->g->s.prep, &v);
        return TW_OK;
    }
    st = tw_slide_read_region(t->g->s.slide, t->g->s.level, t->x, t->y, t->w, t->h, v.data,
                              (size_t)v.stride, &err);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    return TW_OK;
}

static tw_status
gray_cpu(tw_task_ctx *ctx, void *arg)
{
    gray_tile *t = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);

    return twi_omp_gray_p(&in, &out, twi_prep_params(t->g->s.prep), twi_ctx_team(ctx));
}

#ifdef TW_HAVE_CUDA
static tw_status
gray_cuda(tw_task_ctx *ctx, void *arg)
{
    gray_tile *t = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);

    return twi_cuda_gray_p(&in, &out, twi_prep_params(t->g->s.prep), twi_ctx_stream(ctx));
}
#endif

static tw_status
write_cpu(tw_task_ctx *ctx, void *arg)
{
    gray_tile *t = arg;
    gray_job *g = t->g;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;
    int64_t next;

    st = twi_assembler_put(g->s.assembler, t->x - g->s.x, t->y - g->s.y, &v, &err);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    twi_job_add_done(g->job, 1);
    if (twi_ctx_canceled(ctx))
        return TW_OK;
    next = atomic_fetch_add(&g->next, 1);
    if (next < g->n_tiles && (st = submit_pipeline(g, next)) != TW_OK)
        return twi_ctx_fail(ctx, st, "gray: cannot submit tile %lld", (long long)next);
    return TW_OK;
}

/* Host budget (runtime.host_mem): a read waits until its tile and the output tile of its
 * conversion fit, so that reads never fill the memory the conversions need. */
static int64_t
read_host_bytes(const void *arg)
{
    const gray_tile *t = arg;

    return (int64_t)t->w * t->h * (int64_t)tw_sample_size(t->g->s.in_type);
}

static const tw_task_kind read_kind = {
    .name = "io.read",
    .devices = TW_DEVICE_CPU,
    .cpu = read_cpu,
    .host_bytes = read_host_bytes,
    .load = true,
};

static const tw_task_kind gray_kind = {
    .name = "gray.tp",
    .cpu = gray_cpu,
    TWI_CUDA_VARIANT(gray_cuda),
};

static const tw_task_kind write_kind = {
    .name = "io.write",
    .devices = TW_DEVICE_CPU,
    .cpu = write_cpu,
};

static tw_status
submit_pipeline(gray_job *g, int64_t i)
{
    tw_status st = TW_OK;
    tw_runtime *rt = twi_job_runtime(g->job);
    gray_tile *t = NULL;
    tw_tile *in = NULL, *out = NULL;
    tw_task *rd = NULL, *cv = NULL, *wr = NULL;

    if (!(t = calloc(1, sizeof *t)))
        return TW_E_NOMEM;
    t->g = g;
    twi_stream_tile_rect(&g->s, i, &t->x, &t->y, &t->w, &t->h);
    if ((st = twi_tile_create(rt, t->w, t->h, g->s.in_channels, g->s.in_type, &in)) != TW_OK ||
        (st = twi_tile_create(rt, t->w, t->h, 1, g->s.in_type, &out)) != TW_OK)
        goto out;
    twi_tile_set_origin(in, t->x, t->y);
    twi_tile_set_origin(out, t->x, t->y);
    /* io.write owns `t`: it is the last of the three to complete, even when they are dropped
     * by a cancel, so the other two never see it freed. */
    if ((st = twi_task_create(g->job, &write_kind, t, free, &wr)) != TW_OK) {
        free(t);
        goto out;
    }
    if ((st = twi_task_create(g->job, &read_kind, t, NULL, &rd)) != TW_OK ||
        (st = twi_task_create(g->job, &gray_kind, t, NULL, &cv)) != TW_OK ||
        (st = twi_task_add_tile(rd, in, TW_W)) != TW_OK ||
        (st = twi_task_add_tile(cv, in, TW_R)) != TW_OK ||
        (st = twi_task_add_tile(cv, out, TW_W)) != TW_OK ||
        (st = twi_task_add_tile(wr, out, TW_R)) != TW_OK ||
        (st = twi_task_depend(cv, rd)) != TW_OK || (st = twi_task_depend(wr, cv)) != TW_OK)
        goto out;
    if ((st = twi_task_submit(wr)) != TW_OK || (st = twi_task_submit(cv)) != TW_OK ||
        (st = twi_task_submit(rd)) != TW_OK)
        goto out;
out:
    twi_task_release(rd);
    twi_task_release(cv);
    twi_task_release(wr);
    twi_tile_release(in);
    twi_tile_release(out);
    return st;
}

static tw_status
gray_finish(tw_job *job, tw_status st, void *user)
{
    gray_job *g = user;
    tw_error err;

    st = twi_stream_finish(&g->s, st, &err);
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

static void
gray_free(void *user)
{
    gray_job *g = user;

    twi_stream_finish(&g->s, TW_E_CANCELED, NULL);
    free(g);
}

tw_status
tw_gray_mode_parse(const char *name, tw_gray_mode *out)
{
    static const char *const names[] = {"luminance", "r", "g", "b", "hematoxylin", "eosin"};

    if (!name || !out)
        return TW_E_INVALID;
    for (int i = 0; i < 6; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (tw_gray_mode)i;
            return TW_OK;
        }
    return TW_E_INVALID;
}

void
tw_gray_opts_init(tw_gray_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->mode = TW_GRAY_LUMINANCE;
}

tw_status
tw_gray_submit(tw_runtime *rt, const tw_gray_opts *o, tw_job **out, tw_error *err)
{
    tw_status st = TW_OK;
    const tw_config *cfg;
    gray_job *g = NULL;
    tw_job *job = NULL;
    int32_t tw = 0, th = 0;
    int64_t window;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, "gray: NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             "gray: options not initialised with tw_gray_opts_init()");
    if ((int)o->mode < TW_GRAY_LUMINANCE || o->mode > TW_GRAY_EOSIN)
        return twi_error_set(err, TW_E_INVALID, "gray: unknown mode %d", (int)o->mode);
    cfg = tw_runtime_get_config(rt);
    if ((st = twi_ops_tile_size(cfg, "gray.tile_size", o->tile_w, o->tile_h, &tw, &th, err)) !=
        TW_OK)
        return st;
    if (!(g = calloc(1, sizeof *g)))
        return twi_error_set(err, TW_E_NOMEM, "gray: out of memory");
    g->mode = o->mode;
    /* Output: one channel of the input's sample type (0 = same as the input). */
    if ((st = twi_stream_open(&g->s, cfg, "gray", &o->input, &o->output, tw, th, 1,
                              (tw_sample_type)0, err)) != TW_OK) {
        free(g);
        return st;
    }
    if (g->s.in_channels != 1 && g->s.in_channels != 3) {
        st = twi_error_set(err, TW_E_FORMAT, "gray: '%s' has %d channels (1 or 3 supported)",
                           o->input.path, g->s.in_channels);
        twi_stream_finish(&g->s, st, NULL);
        free(g);
        return st;
    }
    /* The mode, the stains, a threshold, the tissue mask (ops/tissue.c). */
    if ((st = twi_prep_create(cfg, "gray", &o->input, (int)o->mode, &g->s, &g->s.prep, err)) !=
        TW_OK) {
        twi_stream_finish(&g->s, st, NULL);
        free(g);
        return st;
    }
    g->n_tiles = g->s.tiles_x * g->s.tiles_y;
    if ((st = twi_job_create(rt, "gray", &job)) != TW_OK) {
        twi_stream_finish(&g->s, st, NULL);
        free(g);
        return twi_error_set(err, st, "gray: cannot create the job");
    }
    g->job = job;
    twi_job_set_finish(job, gray_finish, g, gray_free); /* the job owns g from here */
    twi_job_add_total(job, g->n_tiles);
    /* A window of a few pipelines per worker; each io.write submits the next one. */
    window = 2 * (int64_t)tw_runtime_get_worker_count(rt) + 2;
    if (window > g->n_tiles)
        window = g->n_tiles;
    atomic_store(&g->next, window);
    for (int64_t i = 0; i < window && st == TW_OK; i++)
        st = submit_pipeline(g, i);
    if (st != TW_OK)
        twi_job_fail(job, st, "gray: cannot submit the first tiles (%s)", tw_status_string(st));
    twi_job_seal(job);
    if (st != TW_OK) {
        tw_job_wait(job, -1);
        twi_error_set(err, st, "%s", tw_job_get_error(job));
        tw_job_destroy(job);
        return st;
    }
    *out = job;
    return TW_OK;
}
