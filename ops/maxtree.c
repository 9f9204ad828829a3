/* SPDX-License-Identifier: MIT */
/* tilewave: the max-tree of an image in memory (the maxtree job), and the helpers it shares
 * with the attribute filters (attr_filter.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

/* Read rectangle (x, y, v->w, v->h) of src into v, in chunks of rows so that an RGB input
 * needs little scratch (one buffer, reused). */
tw_status
twi_maxtree_read_rows(tw_task_ctx *ctx, const char *op, const twi_src *src, int64_t x, int64_t y,
                      tw_tile_view *v)
{
    int32_t step = v->h;
    void *rgb = NULL;
    tw_status st;

    if (src->s.slide && src->s.in_channels == 3) {
        if ((int64_t)v->w * step > (1 << 22))
            step = (int32_t)((1 << 22) / v->w > 0 ? (1 << 22) / v->w : 1);
        if (!(rgb = twi_ctx_scratch(ctx, 3 * (size_t)v->w * (size_t)step *
                                             tw_sample_size(v->type))))
            return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory reading %dx%d pixels", op,
                                (int)v->w, (int)step);
    }
    for (int32_t r = 0; r < v->h; r += step) {
        tw_tile_view part = *v;

        if (r > 0 && twi_ctx_canceled(ctx)) /* a whole image takes seconds: see a cancel */
            return TW_E_CANCELED;
        part.h = v->h - r < step ? v->h - r : step;
        part.data = TWI_ROW(v, char, r);
        if ((st = twi_src_read(ctx, op, src, x, y + r, &part, rgb)) != TW_OK)
            return st;
    }
    return TW_OK;
}

tw_status
twi_maxtree_conn_check(const char *op, int conn, tw_error *err)
{
    if (conn != 4 && conn != 8)
        return twi_error_set(err, TW_E_INVALID, "%s: connectivity %d (4 or 8)", op, conn);
    return TW_OK;
}

/* The canonical max-tree of `in` into `par` (views of the task: tiles or scratch) on a CPU
 * worker's team; `what` names the image in messages. */
tw_status
twi_maxtree_tree_cpu(tw_task_ctx *ctx, int conn, const char *op, const char *what,
                     const tw_tile_view *in, tw_tile_view *par)
{
    const twi_stop stop = {twi_ops_ctx_stop, ctx};
    tw_status st = twi_omp_maxtree_stop(in, conn, par, twi_ctx_team(ctx), &stop);

    if (st == TW_E_CANCELED)
        return st;
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: the max-tree of %s failed (%s)", op, what,
                            tw_status_string(st));
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
/* The same on a GPU worker: `in` and `par` in device memory, the kernel's scratch from the
 * worker's pool. */
tw_status
twi_maxtree_tree_cuda(tw_task_ctx *ctx, int conn, const char *op, const char *what,
                      const tw_tile_view *in, tw_tile_view *par)
{
    size_t bytes = twi_cuda_maxtree_scratch_size(in->w, in->h, in->type, conn);
    void *scratch = twi_ctx_scratch(ctx, bytes ? bytes : 1);
    tw_status st;

    if (!scratch)
        return twi_ctx_fail(ctx, TW_E_DEVICE, "%s: no GPU memory for %s (%zu bytes)", op, what,
                            bytes);
    st = twi_cuda_maxtree(in, conn, par, scratch, bytes, twi_ctx_stream(ctx));
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: the max-tree of %s failed (%s)", op, what,
                            tw_status_string(st));
    return TW_OK;
}
#endif

/* ---- The max-tree of an image in memory */

#define MX "maxtree"

typedef struct mx_job {
    tw_job *job;
    twi_src in;                  /* in.s holds the parent writer when out_file */
    twi_stream area_s;           /* the area writer */
    bool out_file, area_file, want_area;
    tw_host_image parent, area;
    int64_t W, H;
    int conn;
    tw_sample_type ptype;        /* TW_U32 or TW_U64 */
    bool on_gpu;
    tw_tile *img, *par;
} mx_job;

static tw_status
mx_load(tw_task_ctx *ctx, void *arg)
{
    mx_job *m = arg;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    tw_status st;

    if ((st = twi_maxtree_read_rows(ctx, MX, &m->in, 0, 0, &v)) != TW_OK)
        return st;
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

static tw_status
mx_tree_cpu(tw_task_ctx *ctx, void *arg)
{
    mx_job *m = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), par = twi_ctx_view(ctx, 1);

    return twi_maxtree_tree_cpu(ctx, m->conn, MX, "the image", &in, &par);
}

#ifdef TW_HAVE_CUDA
static tw_status
mx_tree_cuda(tw_task_ctx *ctx, void *arg)
{
    mx_job *m = arg;
    tw_tile_view in = twi_ctx_view(ctx, 0), par = twi_ctx_view(ctx, 1);

    return twi_maxtree_tree_cuda(ctx, m->conn, MX, "the image", &in, &par);
}
#endif

/* Progress moves only once the tree is final: a failed CUDA run is retried on a CPU worker
 * (runtime.md, "Faults and cancellation"). */
static tw_status
mx_tree_commit(tw_task_ctx *ctx, void *arg)
{
    mx_job *m = arg;

    (void)ctx;
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

static bool
mx_tree_can_run(const void *arg, tw_device_type dev)
{
    const mx_job *m = arg;

    /* The GPU kernel takes 32-bit parents; with a GPU it runs there (tens of times faster). */
    return dev == TW_DEVICE_CUDA ? m->ptype == TW_U32 : !m->on_gpu;
}

static tw_status
mx_put(tw_task_ctx *ctx, twi_stream *s, bool file, const tw_host_image *mem,
       const tw_tile_view *v)
{
    tw_error err;
    tw_status st;

    if (!file) {
        twi_host_image_put(mem, v, 0, 0);
        return TW_OK;
    }
    if ((st = twi_put_cancelable(ctx, s->assembler, 0, 0, v, &err)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    return TW_OK;
}

static tw_status
mx_store(tw_task_ctx *ctx, void *arg)
{
    mx_job *m = arg;
    tw_tile_view a = twi_ctx_view(ctx, 0), p = twi_ctx_view(ctx, 1);
    tw_status st;

    if ((st = mx_put(ctx, &m->in.s, m->out_file, &m->parent, &p)) != TW_OK)
        return st;
    if (m->want_area) {
        size_t ss = tw_sample_size(m->ptype);
        tw_tile_view av = p;

        av.stride = (int64_t)((size_t)a.w * ss);
        if (!(av.data = twi_ctx_scratch(ctx, (size_t)a.w * (size_t)a.h * ss)))
            return twi_ctx_fail(ctx, TW_E_NOMEM, MX ": out of memory for the area image");
        if ((st = twi_maxtree_area_map(&a, &p, &av)) != TW_OK)
            return twi_ctx_fail(ctx, st, MX ": the area image failed (%s)", tw_status_string(st));
        if ((st = mx_put(ctx, &m->area_s, m->area_file, &m->area, &av)) != TW_OK)
            return st;
    }
    twi_tile_release(m->img);
    twi_tile_release(m->par);
    m->img = m->par = NULL;
    twi_job_add_done(m->job, 1);
    return TW_OK;
}

/* Host budget (runtime.host_mem): the load waits until the image and its parent image fit. */
static int64_t
mx_load_host_bytes(const void *arg)
{
    const mx_job *m = arg;

    return m->W * m->H * (int64_t)tw_sample_size(m->ptype);
}

static const tw_task_kind mx_load_kind = {
    .name = "maxtree.load",
    .devices = TW_DEVICE_CPU,
    .cpu = mx_load,
    .host_bytes = mx_load_host_bytes,
    .load = true,
};
static const tw_task_kind mx_tree_kind = {
    .name = "maxtree.tree",
    .cpu = mx_tree_cpu,
    TWI_CUDA_VARIANT(mx_tree_cuda),
    .can_run = mx_tree_can_run,
    .commit = mx_tree_commit,
    .team = true,
};
static const tw_task_kind mx_store_kind = {
    .name = "maxtree.store",
    .devices = TW_DEVICE_CPU,
    .cpu = mx_store,
};

static tw_status
mx_finish(tw_job *job, tw_status st, void *user)
{
    mx_job *m = user;

    return twi_stream_finish_two(job, &m->in.s, &m->area_s, st);
}

static void
mx_free(void *user)
{
    mx_job *m = user;

    if (!m)
        return;
    twi_stream_finish(&m->area_s, TW_E_CANCELED, NULL);
    twi_stream_finish(&m->in.s, TW_E_CANCELED, NULL);
    twi_tile_release(m->img);
    twi_tile_release(m->par);
    free(m);
}

static tw_status
mx_setup(mx_job *m, tw_runtime *rt, const tw_maxtree_opts *o, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    tw_status st;
    int64_t n;

    if ((st = twi_src_open(cfg, MX, TWI_SRC_U8 | TWI_SRC_U16, "input", &o->input, &o->image,
                           &m->in, err)) != TW_OK)
        return st;
    m->W = m->in.s.w;
    m->H = m->in.s.h;
    n = m->W * m->H;
    if (m->W > INT32_MAX || m->H > INT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             MX ": the image is %lldx%lld; sides up to %d pixels are supported",
                             (long long)m->W, (long long)m->H, INT32_MAX);
    m->ptype = o->index_bits == 64 || (o->index_bits == 0 && n > (int64_t)UINT32_MAX) ? TW_U64
                                                                                     : TW_U32;
    if (m->ptype == TW_U32 && n > (int64_t)UINT32_MAX)
        return twi_error_set(err, TW_E_INVALID,
                             MX ": %lld pixels do not fit 32-bit indices (use 64)", (long long)n);
#ifdef TW_HAVE_CUDA
    m->on_gpu = twi_runtime_gpu_count(rt) > 0 && m->ptype == TW_U32;
#endif
    if (o->output.path) {
        if (m->in.path && twi_ops_same_file(m->in.path, o->output.path))
            return twi_error_set(err, TW_E_INVALID,
                                 MX ": the output '%s' would overwrite the input", o->output.path);
        m->out_file = true;
    } else {
        if ((st = twi_host_image_check(MX, "parent", &o->parent, m->W, m->H, m->ptype, err)) !=
            TW_OK)
            return st;
        m->parent = o->parent;
    }
    if (o->area_path) {
        if ((m->in.path && twi_ops_same_file(m->in.path, o->area_path)) ||
            (o->output.path && (strcmp(o->output.path, o->area_path) == 0 ||
                                twi_ops_same_file(o->output.path, o->area_path))))
            return twi_error_set(err, TW_E_INVALID,
                                 MX ": the area file '%s' would overwrite the input or the output",
                                 o->area_path);
        m->area_file = m->want_area = true;
    } else if (o->area.data) {
        if ((st = twi_host_image_check(MX, "area", &o->area, m->W, m->H, m->ptype, err)) != TW_OK)
            return st;
        m->area = o->area;
        m->want_area = true;
    }
    if (m->out_file && (st = twi_stream_open_output(&m->in.s, cfg, MX, &o->output, 1, m->ptype,
                                                    err)) != TW_OK)
        return st;
    if (m->area_file) {
        tw_output ao = o->output;

        m->area_s.w = m->W;
        m->area_s.h = m->H;
        m->area_s.level = m->in.s.level;
        m->area_s.src_level = m->in.s.src_level;
        m->area_s.reduce = m->in.s.reduce;
        m->area_s.x = m->in.s.x;
        m->area_s.y = m->in.s.y;
        /* the resolution tags of the main output (the slide stays the main stream's) */
        m->area_s.meta = m->in.s.slide;
        m->area_s.downsample = m->in.s.downsample;
        ao.path = o->area_path;
        if ((st = twi_stream_open_output(&m->area_s, cfg, MX, &ao, 1, m->ptype, err)) != TW_OK)
            return st;
    }
    return TW_OK;
}

static tw_status
mx_graph(mx_job *m, tw_runtime *rt)
{
    tw_task *ld = NULL, *tr = NULL, *sto = NULL;
    tw_status st;

    twi_job_add_total(m->job, 3);
    if ((st = twi_tile_create(rt, (int32_t)m->W, (int32_t)m->H, 1, m->in.s.in_type, &m->img)) !=
            TW_OK ||
        (st = twi_tile_create(rt, (int32_t)m->W, (int32_t)m->H, 1, m->ptype, &m->par)) != TW_OK)
        return st;
    if ((st = twi_task_create(m->job, &mx_load_kind, m, NULL, &ld)) != TW_OK ||
        (st = twi_task_add_tile(ld, m->img, TW_W)) != TW_OK ||
        (st = twi_task_create(m->job, &mx_tree_kind, m, NULL, &tr)) != TW_OK ||
        (st = twi_task_add_tile(tr, m->img, TW_R)) != TW_OK ||
        (st = twi_task_add_tile(tr, m->par, TW_W)) != TW_OK ||
        (st = twi_task_depend(tr, ld)) != TW_OK ||
        (st = twi_task_create(m->job, &mx_store_kind, m, NULL, &sto)) != TW_OK ||
        (st = twi_task_add_tile(sto, m->img, TW_R)) != TW_OK ||
        (st = twi_task_add_tile(sto, m->par, TW_R)) != TW_OK ||
        (st = twi_task_depend(sto, tr)) != TW_OK)
        goto out;
    if ((st = twi_task_submit(sto)) == TW_OK && (st = twi_task_submit(tr)) == TW_OK)
        st = twi_task_submit(ld);
out:
    twi_task_release(ld);
    twi_task_release(tr);
    twi_task_release(sto);
    return st;
}

tw_status
tw_maxtree_submit(tw_runtime *rt, const tw_maxtree_opts *o, tw_job **out, tw_error *err)
{
    mx_job *m;
    tw_job *job = NULL;
    tw_status st;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, MX ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             MX ": options not initialised with tw_maxtree_opts_init()");
    if ((st = twi_maxtree_conn_check(MX, o->connectivity, err)) != TW_OK)
        return st;
    if (o->index_bits != 0 && o->index_bits != 32 && o->index_bits != 64)
        return twi_error_set(err, TW_E_INVALID, MX ": index bits %d (0, 32 or 64)",
                             o->index_bits);
    if (!o->output.path && !o->parent.data)
        return twi_error_set(err, TW_E_INVALID, MX ": no output given (a file or an image)");
    if (o->output.path && o->parent.data)
        return twi_error_set(err, TW_E_INVALID, MX ": both an output file and a parent image");
    if (o->area_path && o->area.data)
        return twi_error_set(err, TW_E_INVALID, MX ": both an area file and an area image");
    if (!(m = calloc(1, sizeof *m)))
        return twi_error_set(err, TW_E_NOMEM, MX ": out of memory");
    m->conn = o->connectivity;
    if ((st = mx_setup(m, rt, o, err)) != TW_OK) {
        mx_free(m);
        return st;
    }
    if ((st = twi_job_create(rt, MX, &job)) != TW_OK) {
        mx_free(m);
        return twi_error_set(err, st, MX ": cannot create the job");
    }
    m->job = job;
    twi_job_set_finish(job, mx_finish, m, mx_free);
    twi_stream_attach_io(&m->in.s, job);
    twi_stream_attach_io(&m->area_s, job);
    return twi_ops_job_launch(job, MX, mx_graph(m, rt), out, err);
}

void
tw_maxtree_opts_init(tw_maxtree_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->connectivity = 4;
}
