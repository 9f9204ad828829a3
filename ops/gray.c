/* SPDX-License-Identifier: MIT */
/* tilewave: `gray`, one channel from RGB, streamed tile by tile through the runtime. */
/*
 * The simplest operation, and the template of the streaming path every later one follows.
 *
 * Each processing tile is a pipeline of three tasks (twi_pipes, ops/stream.c):
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
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

static tw_status
gray_cpu(tw_task_ctx *ctx, void *arg)
{
    twi_pipe_tile *t = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);

    return twi_omp_gray_p(&in, &out, twi_prep_params(t->p->s.prep), twi_ctx_team(ctx));
}

#ifdef TW_HAVE_CUDA
static tw_status
gray_cuda(tw_task_ctx *ctx, void *arg)
{
    twi_pipe_tile *t = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), out = twi_ctx_view(ctx, 1);

    return twi_cuda_gray_p(&in, &out, twi_prep_params(t->p->s.prep), twi_ctx_stream(ctx));
}
#endif

/* The conversion costs a CPU worker less than its tile's copies to and from a GPU cost the
 * pipeline: the 1 GPix sample's gray took 1.63 s on 16 CPU workers and 1.90 s when the H100
 * took its share of the tiles (2026-11-28, docs/benchmarks.md). The GPU variant is for
 * runtimes without CPU workers. */
static bool
gray_can_run(const void *arg, tw_device_type dev)
{
    const twi_pipe_tile *t = arg;
    tw_runtime *rt = twi_job_runtime(t->p->job);

    return dev == TW_DEVICE_CPU || tw_runtime_get_worker_count(rt) == twi_runtime_gpu_count(rt);
}

static const tw_task_kind gray_kind = {
    .name = "gray.tp",
    .cpu = gray_cpu,
    TWI_CUDA_VARIANT(gray_cuda),
    .can_run = gray_can_run,
    .team = true,
};

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
    twi_pipes *g = NULL;
    int32_t tw = 0, th = 0;

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
    g->op = "gray";
    g->tp = &gray_kind;
    g->out_channels = 1;
    /* Output: one channel of the input's sample type (0 = same as the input). */
    if ((st = twi_stream_open(&g->s, cfg, "gray", &o->input, &o->output, tw, th,
                              twi_ops_tile_implicit(cfg, "gray.tile_size", o->tile_w), 1,
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
    return twi_pipes_launch(rt, g, out, err); /* owns g */
}
