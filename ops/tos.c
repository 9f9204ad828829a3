/* SPDX-License-Identifier: MIT */
/* tilewave: the tree of shapes of an image in memory and the grain filter ([deVries24]). */
/* Why one file: the tree of shapes and the grain filter are one job (tos_job) whose task kinds
 * both submissions build; the pixel work is in omp/tos_omp.c and omp/maxtree_u32.c. */

/*
 * The job, as a task graph on the CPU workers (the kernels and the algorithm are in
 * omp/tos_omp.c and omp/maxtree_u32.c; docs/tos.md has the contract and the measurements):
 *
 *   load -> prep -> sort (root part) -> sort ... (parts split off while workers are idle)
 *        -> [the last sort to end submits:]
 *           mt.build (a block each) -> mt.merge (a binary tree) -> mt.finish (a block each)
 *        -> un.nodes (bands of rows) -> un.parents -> [area, grain:] attr.count -> attr.mark
 *        -> attr.climb -> attr.area | grain.reset -> grain -> store
 *
 * Load reads the whole image; prep computes the exterior level, allocates the grid (16 bytes
 * a pixel) and queues its border in the root part. The sort is [deVries24]'s algorithm 7 with
 * its load-balancing problem handled by the runtime: a running part splits off an independent
 * sub-propagation after a batch only while some CPU worker has nothing to do (fewer parts
 * than CPU workers), and that part is one more task any idle worker takes. [deVries24]'s threads
 * each recursed on one side and left one thread with most of the image; here every part can
 * split again, so work goes where the workers are, whatever the image. A part's large batch
 * (a level holding 4096 faces or more) is shared with "tos.sort.help" tasks while workers
 * are idle (omp/tos_omp.c, "Shared batches"): a helper that starts after the batch has
 * ended returns at once, so the part never waits for a task that has not started. The
 * number of parts is counted: the last to end (its commit hook, which runs once it has
 * succeeded) submits the rest of the graph, whose phases run over blocks (the max-tree of the
 * ranks) or bands of rows (un-interpolation and the attributes), a no-op "tos.sync" task
 * joining each phase before the next. Every step runs on any CPU worker with a one-thread
 * team: parallelism comes from the tasks, so the whole job scales with the runtime's workers
 * and shares them with other jobs.
 *
 * The GPU. With a GPU worker whose memory budget holds the grid (the ranks, the parent
 * records, the canonical bit map: about 13 bytes a face), the max-tree of the ranks is one
 * whole-grid task, tos.mt.gpu, instead of the blocks: its CUDA variant uploads the ranks, runs
 * cuda/maxtree_cuda.cu on 32-bit levels (64-bit parent records: a rank and a parent of 32 bits
 * each; the grid has fewer than 2^31 faces), and downloads the canonical bit map and then the
 * parent image over the ranks, the very bytes the blocks would have left (the canonical form
 * is unique). A failed attempt is retried on a CPU worker, whose variant does nothing but
 * let the commit hook submit the block tasks: the same bytes. The download of the bit map
 * comes first and synchronises, so a kernel fault is seen before the ranks are overwritten;
 * a failure of the last download (after twi_ctx_no_retry) fails the job. The sort stays on
 * the CPU workers: a sequential queue per part.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "ops_internal.h"

#define TOS "tos"
#define GRAIN "grain"
/* Bands of rows a worker gets in each band phase, at least; and at most this many pixels a
 * band: a band task is also the wait of a cancel (a tenth of a second or so). */
#define BANDS_PER_WORKER 4
#define BAND_PIXELS ((int64_t)1 << 21)

typedef struct tos_job {
    tw_job *job;
    const char *op;              /* TOS or GRAIN */
    twi_src in;                  /* in.s holds the main output's writer when out_file */
    twi_stream area_s;           /* tos: the area writer */
    bool out_file, area_file, want_area, grain;
    tw_host_image out_mem;       /* the parent image (tos) or the result (grain) in memory */
    tw_host_image area_mem;
    uint64_t grain_area;
    int64_t W, H, kw, kh;
    tw_sample_type type;
    int cpu_workers;
    tw_tos_report *report;
    tw_runtime *rt;
    bool gpu_tree;               /* the max-tree of the ranks as one task for a GPU worker */
    tw_device_type mt_device;    /* where it ran */

    void *img;                   /* W H samples, packed */
    tw_tile_view vin;
    uint32_t *a;                 /* the grid: ranks, then the grid's parent image */
    uint64_t *seen, *canon;      /* the sort's seen faces; canon: its part past the guard row,
                                    later the grid's canonical faces */
    uint32_t *par;               /* the parent image: the caller's when packed, else ours */
    uint32_t *par_own;
    uint32_t *area;              /* tos --area: the area image */
    void *gout;                  /* grain: the result */
    uint32_t *scratch;           /* attributes: 2 W H uint32 (the grid when large enough) */
    uint32_t *scratch_own;

    twi_tos_sort *sort;
    atomic_int parts;            /* parts submitted and not ended */
    atomic_int helpers;          /* helpers of shared batches submitted and not ended */
    twi_maxtree32 *mt;
    int32_t blocks, merges;
    twi_tos_un *un;
    int32_t gx, gy;              /* the max-tree's block grid */
    twi_tos_grain_rule rule;
    int64_t rows, bands;
    int64_t grid_nodes;
    size_t queue_bytes;
    int64_t labellings, comp_parts; /* the sort's sub-tree splits */

    double t_start, t_sorted, t_mt, t_tree, t_end;
} tos_job;

/* ---- small task arguments ---------------------------------------------------------------- */

typedef struct tos_arg {
    tos_job *j;
    int64_t i;                   /* block, merge or band; helpers: the batch's generation */
    twi_tos_part *part;          /* sort tasks: the part, until it has run */
    twi_tos_crew *crew;          /* helper tasks: a reference to the crew, until it has run */
} tos_arg;

static void
arg_free(void *p)
{
    tos_arg *a = p;

    if (a && a->part) /* a part that never ran (the job failed first) */
        twi_tos_part_free(a->j->sort, a->part);
    if (a && a->crew) {
        twi_tos_crew_release(a->crew);
        atomic_fetch_sub_explicit(&a->j->helpers, 1, memory_order_relaxed);
    }
    free(a);
}

static tw_status
task_new(tos_job *j, const tw_task_kind *kind, int64_t i, tw_task **out)
{
    tos_arg *a = calloc(1, sizeof *a);
    tw_status st;

    if (!a)
        return TW_E_NOMEM;
    a->j = j;
    a->i = i;
    if ((st = twi_task_create(j->job, kind, a, arg_free, out)) != TW_OK)
        free(a);
    return st;
}

/* A sort task for part p, which it owns from here (freed with it if it never runs). */
static tw_status
sort_task_new(tos_job *j, const tw_task_kind *kind, twi_tos_part *p, tw_task **out)
{
    tos_arg *a = calloc(1, sizeof *a);
    tw_status st;

    if (!a) {
        twi_tos_part_free(j->sort, p);
        return TW_E_NOMEM;
    }
    a->j = j;
    a->part = p;
    if ((st = twi_task_create(j->job, kind, a, arg_free, out)) != TW_OK)
        arg_free(a);
    return st;
}

static void
band_rows(const tos_job *j, int64_t b, int64_t *y0, int64_t *y1)
{
    *y0 = b * j->rows;
    *y1 = *y0 + j->rows < j->H ? *y0 + j->rows : j->H;
}

/* ---- load and prep ------------------------------------------------------------------------- */

static tw_status
t_load(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;
    tos_job *j = a->j;
    int32_t step = (int32_t)(j->H > 0 ? ((1 << 22) / j->W > 0 ? (1 << 22) / j->W : 1) : 1);
    size_t ss = tw_sample_size(j->type);
    void *rgb = NULL;
    tw_status st;

    /* in chunks of rows: an RGB input needs little scratch, and a cancel is seen */
    if (j->in.s.slide && j->in.s.in_channels == 3 &&
        !(rgb = twi_ctx_scratch(ctx, 3 * (size_t)j->W * (size_t)step * ss)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory reading the image", j->op);
    for (int64_t y = 0; y < j->H; y += step) {
        tw_tile_view part = j->vin;

        if (y > 0 && twi_ctx_canceled(ctx))
            return TW_E_CANCELED;
        part.h = (int32_t)(j->H - y < step ? j->H - y : step);
        part.data = (char *)j->img + (size_t)y * (size_t)j->W * ss;
        if ((st = twi_src_read(ctx, j->op, &j->in, 0, y, &part, rgb)) != TW_OK)
            return st;
    }
    twi_job_add_done(j->job, 1);
    return TW_OK;
}

static tw_status spawn_part(void *user, twi_tos_part *p);

static tw_status
t_prep(tw_task_ctx *ctx, void *arg)
{
    tos_job *j = ((tos_arg *)arg)->j;
    const size_t nk = (size_t)(j->kw * j->kh), n = (size_t)(j->W * j->H);
    twi_tos_part *root = NULL;
    tw_status st;

    j->t_start = twi_now_s();
    if (!(j->a = malloc(nk * sizeof *j->a)) ||
        !(j->seen = malloc(twi_tos_seen_words(j->W, j->H) * sizeof *j->seen)) ||
        (!j->par && !(j->par = j->par_own = malloc(n * sizeof *j->par))))
        return twi_ctx_fail(ctx, TW_E_NOMEM,
                            "%s: out of memory for the grid of %lldx%lld faces", j->op,
                            (long long)j->kw, (long long)j->kh);
    j->canon = j->seen + (j->kw + 63) / 64;
    if ((st = twi_tos_sort_create(&j->vin, j->a, j->seen, &j->sort, &root)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot start the sort (%s)", j->op,
                            tw_status_string(st));
    if ((st = spawn_part(j, root)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot submit the sort (%s)", j->op,
                            tw_status_string(st));
    twi_job_add_done(j->job, 1);
    return TW_OK;
}

/* ---- the sort ------------------------------------------------------------------------------- */

/* CPU workers with nothing to do, as far as the job's parts and helpers tell. */
static int
idle_workers(void *user)
{
    tos_job *j = user;

    return j->cpu_workers - atomic_load_explicit(&j->parts, memory_order_relaxed) -
           atomic_load_explicit(&j->helpers, memory_order_relaxed);
}

static bool
want_split(void *user)
{
    return idle_workers(user) > 0;
}

static bool
progress(void *user, int64_t faces)
{
    tos_job *j = user;

    twi_job_add_done(j->job, faces);
    return !twi_job_stopping(j->job);
}

static tw_status t_sort(tw_task_ctx *ctx, void *arg);
static tw_status t_sort_commit(tw_task_ctx *ctx, void *arg);

static const tw_task_kind sort_kind = {
    .name = "tos.sort",
    .devices = TW_DEVICE_CPU,
    .cpu = t_sort,
    .commit = t_sort_commit,
};

static tw_status t_sort_help(tw_task_ctx *ctx, void *arg);

static const tw_task_kind help_kind = {
    .name = "tos.sort.help",
    .devices = TW_DEVICE_CPU,
    .cpu = t_sort_help,
};

/* A helper of a part's shared batch, as a task any idle worker takes (it returns at once if
 * the batch is over by then). */
static tw_status
spawn_helper(void *user, twi_tos_crew *c, uint64_t gen)
{
    tos_job *j = user;
    tos_arg *a = calloc(1, sizeof *a);
    tw_task *t = NULL;
    tw_status st;

    if (!a) {
        twi_tos_crew_release(c);
        return TW_E_NOMEM;
    }
    a->j = j;
    a->i = (int64_t)gen;
    a->crew = c;
    atomic_fetch_add_explicit(&j->helpers, 1, memory_order_relaxed);
    if ((st = twi_task_create(j->job, &help_kind, a, arg_free, &t)) != TW_OK) {
        arg_free(a);
        return st;
    }
    st = twi_task_submit(t);
    twi_task_release(t);
    return st;
}

static tw_status
t_sort_help(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;
    const twi_tos_hooks hk = { .user = a->j, .progress = progress };
    twi_tos_crew *c = a->crew;

    (void)ctx;
    a->crew = NULL; /* help gives the reference back */
    twi_tos_crew_help(c, (uint64_t)a->i, &hk);
    atomic_fetch_sub_explicit(&a->j->helpers, 1, memory_order_relaxed);
    return TW_OK;
}

/* A part as a task of its own (the root part from prep, the others split off by a part). */
static tw_status
spawn_part(void *user, twi_tos_part *p)
{
    tos_job *j = user;
    tw_task *t = NULL;
    tw_status st;

    if ((st = sort_task_new(j, &sort_kind, p, &t)) != TW_OK)
        return st;
    atomic_fetch_add_explicit(&j->parts, 1, memory_order_relaxed);
    if ((st = twi_task_submit(t)) != TW_OK)
        atomic_fetch_sub_explicit(&j->parts, 1, memory_order_relaxed);
    twi_task_release(t);
    return st;
}

static tw_status
t_sort(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;
    tos_job *j = a->j;
    const twi_tos_hooks hk = { .user = j, .want_split = want_split, .spawn = spawn_part,
                               .progress = progress, .idle = idle_workers,
                               .help = spawn_helper };
    twi_tos_part *p = a->part;
    tw_status st;

    a->part = NULL; /* run frees it, whatever happens */
    if ((st = twi_tos_sort_run(j->sort, p, &hk)) == TW_E_CANCELED)
        return st;
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: the sort failed (%s)", j->op, tw_status_string(st));
    return TW_OK;
}

static tw_status submit_tree(tos_job *j, bool blocks);
static tw_status submit_gpu_tree(tos_job *j);

/* The max-tree of the ranks in blocks on the CPU workers, and the rest of the graph. */
static tw_status
cpu_tree(tos_job *j)
{
    tw_status st;

    j->mt_device = TW_DEVICE_CPU;
    /* the plan of the max-tree (it clears the canonical bit map, the seen faces until now) */
    if ((st = twi_maxtree32_create(j->a, (int32_t)j->kw, (int32_t)j->kh, 4, j->gx, j->gy,
                                   j->canon, &j->mt)) != TW_OK)
        return st;
    return submit_tree(j, true);
}

static tw_status
t_sort_commit(tw_task_ctx *ctx, void *arg)
{
    tos_job *j = ((tos_arg *)arg)->j;
    tw_status st;

    if (atomic_fetch_sub_explicit(&j->parts, 1, memory_order_acq_rel) != 1)
        return TW_OK;
    /* the last part: every rank is written */
    j->t_sorted = twi_now_s();
    j->rule.exterior = twi_tos_sort_exterior(j->sort);
    j->rule.area = j->grain_area;
    twi_tos_sort_stats(j->sort, j->report ? &j->report->parts : NULL, NULL, NULL,
                       &j->queue_bytes);
    twi_tos_sort_comp_stats(j->sort, &j->labellings, &j->comp_parts, NULL, NULL);
    twi_tos_sort_destroy(j->sort);
    j->sort = NULL;
    if ((st = j->gpu_tree ? submit_gpu_tree(j) : cpu_tree(j)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot submit the tree (%s)", j->op,
                            tw_status_string(st));
    return TW_OK;
}

/* ---- the max-tree of the ranks, un-interpolation, attributes --------------------------------- */

static tw_status
t_build(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;
    tw_status st;

    if ((st = twi_maxtree32_build(a->j->mt, (int32_t)a->i)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: out of memory building block %lld of the tree",
                            a->j->op, (long long)a->i);
    twi_job_add_done(a->j->job, 1);
    return TW_OK;
}

static tw_status
t_merge(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;

    (void)ctx;
    twi_maxtree32_merge(a->j->mt, (int32_t)a->i);
    twi_job_add_done(a->j->job, 1);
    return TW_OK;
}

static tw_status
t_finish(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;
    tw_status st;

    if ((st = twi_maxtree32_finish(a->j->mt, (int32_t)a->i)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: out of memory finishing block %lld of the tree",
                            a->j->op, (long long)a->i);
    twi_job_add_done(a->j->job, 1);
    return TW_OK;
}

#ifdef TW_HAVE_CUDA
/* The whole grid's max-tree on a GPU worker (see the top of the file). */
static tw_status
t_gpu_tree_cuda(tw_task_ctx *ctx, void *arg)
{
    tos_job *j = ((tos_arg *)arg)->j;
    const int32_t kw = (int32_t)j->kw, kh = (int32_t)j->kh;
    const size_t n = (size_t)kw * (size_t)kh, words = (n + 63) / 64;
    const size_t sb = twi_cuda_maxtree_scratch_size(kw, kh, TW_U32, 4);
    void *d_a = twi_ctx_scratch(ctx, n * 4), *d_c = twi_ctx_scratch(ctx, words * 8),
         *d_s = twi_ctx_scratch(ctx, sb);
    tw_tile_view v = { .data = d_a, .stride = 4 * (int64_t)kw, .w = kw, .h = kh, .channels = 1,
                       .type = TW_U32 };
    tw_status st;

    if (!d_a || !d_c || !d_s)
        return twi_ctx_fail(ctx, TW_E_DEVICE,
                            "%s: no GPU memory for the max-tree of %dx%d faces (%zu bytes)",
                            j->op, (int)kw, (int)kh, n * 4 + words * 8 + sb);
    if ((st = twi_ctx_copy_to_device(ctx, d_a, j->a, n * 4)) != TW_OK)
        return st;
    if ((st = twi_cuda_maxtree_canon(&v, 4, &v, d_c, d_s, sb, twi_ctx_stream(ctx))) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: the GPU max-tree of the ranks failed (%s)", j->op,
                            tw_status_string(st));
    /* the bit map first: it waits for the kernels, whose faults a CPU retry still repairs
     * (the ranks are intact, and the blocks' plan clears the map) */
    if ((st = twi_ctx_copy_to_host(ctx, j->canon, d_c, words * 8)) != TW_OK)
        return st;
    /* the parent image replaces the ranks a retry would start from */
    twi_ctx_no_retry(ctx);
    return twi_ctx_copy_to_host(ctx, j->a, d_a, n * 4);
}

/* Run on a CPU worker only after a failed GPU attempt: the commit hook submits the blocks. */
static tw_status
t_gpu_tree_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_OK;
}

static tw_status
t_gpu_tree_commit(tw_task_ctx *ctx, void *arg)
{
    tos_job *j = ((tos_arg *)arg)->j;
    tw_status st;

    if (twi_ctx_device(ctx) == TW_DEVICE_CUDA) {
        j->mt_device = TW_DEVICE_CUDA;
        /* the progress units of the blocks, merges and finishes it stood for */
        twi_job_add_done(j->job, 2 * (int64_t)j->blocks + j->merges);
        st = submit_tree(j, false);
    } else {
        st = cpu_tree(j);
    }
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: cannot submit the tree (%s)", j->op,
                            tw_status_string(st));
    return TW_OK;
}

static bool
gpu_tree_can_run(const void *arg, tw_device_type dev)
{
    (void)arg;
    return dev == TW_DEVICE_CUDA; /* a CPU worker runs it only as a retry */
}

static const tw_task_kind gpu_tree_kind = {
    .name = "tos.mt.gpu",
    .cpu = t_gpu_tree_cpu,
    TWI_CUDA_VARIANT(t_gpu_tree_cuda),
    .can_run = gpu_tree_can_run,
    .commit = t_gpu_tree_commit,
};

static tw_status
submit_gpu_tree(tos_job *j)
{
    tw_task *t = NULL;
    tw_status st;

    if ((st = task_new(j, &gpu_tree_kind, 0, &t)) != TW_OK)
        return st;
    st = twi_task_submit(t);
    twi_task_release(t);
    return st;
}
#else
static tw_status
submit_gpu_tree(tos_job *j)
{
    return cpu_tree(j);
}
#endif

/* After the max-tree: its nodes go (the grid now holds the grid's parent image). */
static tw_status
t_un_create(tw_task_ctx *ctx, void *arg)
{
    tos_job *j = ((tos_arg *)arg)->j;
    tw_status st;

    j->t_mt = twi_now_s();
    twi_maxtree32_destroy(j->mt);
    j->mt = NULL;
    if ((st = twi_tos_un_create(&j->vin, j->a, j->canon, j->par, &j->un)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s: out of memory un-interpolating", j->op);
    j->grid_nodes = twi_tos_un_grid_nodes(j->un);
    twi_job_add_done(j->job, 1);
    return TW_OK;
}

static tw_status
t_un_nodes(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;
    int64_t y0, y1;

    (void)ctx;
    band_rows(a->j, a->i, &y0, &y1);
    twi_tos_un_nodes(a->j->un, y0, y1);
    twi_job_add_done(a->j->job, 1);
    return TW_OK;
}

static tw_status
t_un_parents(tw_task_ctx *ctx, void *arg)
{
    tos_arg *a = arg;
    int64_t y0, y1;

    (void)ctx;
    band_rows(a->j, a->i, &y0, &y1);
    twi_tos_un_parents(a->j->un, y0, y1);
    twi_job_add_done(a->j->job, 1);
    return TW_OK;
}

/* The tree is done: the grid's memory holds the attributes' counts from here. */
static tw_status
t_attr_prep(tw_task_ctx *ctx, void *arg)
{
    tos_job *j = ((tos_arg *)arg)->j;
    const size_t n = (size_t)(j->W * j->H);

    j->t_tree = twi_now_s();
    j->rule.implicit_root = twi_tos_un_root_implicit(j->un);
    twi_tos_un_destroy(j->un);
    j->un = NULL;
    free(j->seen);
    j->seen = j->canon = NULL;
    if (!j->want_area && !j->grain) {
        free(j->a);
        j->a = NULL;
    } else if ((size_t)(j->kw * j->kh) >= 2 * n) {
        j->scratch = j->a;
    } else if (!(j->scratch = j->scratch_own = malloc(2 * n * sizeof *j->scratch))) {
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for the areas", j->op);
    }
    twi_job_add_done(j->job, 1);
    return TW_OK;
}

/* The band steps of the attributes (each done for every band before the next). */
enum { A_INIT, A_COUNT, A_MARK, A_CLIMB, A_AREA, A_RESET, A_GRAIN };

static void
attr_step(tos_job *j, int step, int64_t band)
{
    tw_tile_view out = j->vin;
    int64_t y0, y1;

    band_rows(j, band, &y0, &y1);
    switch (step) {
    case A_INIT: twi_tos_attr_init(j->scratch, j->W, j->H, y0, y1); break;
    case A_COUNT: twi_tos_attr_count(&j->vin, j->par, j->scratch, y0, y1); break;
    case A_MARK: twi_tos_attr_mark(j->scratch, j->W, y0, y1); break;
    case A_CLIMB: twi_tos_attr_climb(&j->vin, j->par, j->scratch, y0, y1); break;
    case A_AREA:
        out = (tw_tile_view){ .data = j->area, .stride = 4 * j->W, .w = (int32_t)j->W,
                              .h = (int32_t)j->H, .channels = 1, .type = TW_U32 };
        twi_tos_attr_area(&j->vin, j->par, j->scratch, &out, y0, y1);
        break;
    case A_RESET: twi_tos_grain_reset(j->scratch, j->W, y0, y1); break;
    default:
        out.data = j->gout;
        twi_tos_grain(&j->vin, j->par, j->scratch, &j->rule, &out, y0, y1);
        break;
    }
    twi_job_add_done(j->job, 1);
}

#define ATTR_FN(NAME, STEP)                                                                        \
    static tw_status NAME(tw_task_ctx *ctx, void *arg)                                             \
    {                                                                                              \
        (void)ctx;                                                                                 \
        attr_step(((tos_arg *)arg)->j, (STEP), ((tos_arg *)arg)->i);                               \
        return TW_OK;                                                                              \
    }
ATTR_FN(t_attr_init, A_INIT)
ATTR_FN(t_attr_count, A_COUNT)
ATTR_FN(t_attr_mark, A_MARK)
ATTR_FN(t_attr_climb, A_CLIMB)
ATTR_FN(t_attr_area, A_AREA)
ATTR_FN(t_grain_reset, A_RESET)
ATTR_FN(t_grain, A_GRAIN)

static tw_status
t_sync(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_OK;
}

/* ---- store ----------------------------------------------------------------------------------- */

static tw_status
put(tw_task_ctx *ctx, twi_stream *s, bool file, const tw_host_image *mem, const tw_tile_view *v)
{
    tw_error err;
    tw_status st;

    if (!file) {
        if (mem->data != v->data)
            twi_host_image_put(mem, v, 0, 0);
        return TW_OK;
    }
    if ((st = twi_put_cancelable(ctx, s->assembler, 0, 0, v, &err)) != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    return TW_OK;
}

static tw_status
t_store(tw_task_ctx *ctx, void *arg)
{
    tos_job *j = ((tos_arg *)arg)->j;
    tw_tile_view v = { .w = (int32_t)j->W, .h = (int32_t)j->H, .channels = 1 };
    tw_status st;

    j->t_end = twi_now_s();
    if (j->grain) {
        v.data = j->gout;
        v.type = j->type;
        v.stride = (int64_t)((size_t)j->W * tw_sample_size(j->type));
    } else {
        v.data = j->par;
        v.type = TW_U32;
        v.stride = 4 * j->W;
    }
    if ((st = put(ctx, &j->in.s, j->out_file, &j->out_mem, &v)) != TW_OK)
        return st;
    if (j->want_area) {
        v.data = j->area;
        v.type = TW_U32;
        v.stride = 4 * j->W;
        if ((st = put(ctx, &j->area_s, j->area_file, &j->area_mem, &v)) != TW_OK)
            return st;
    }
    twi_job_add_done(j->job, 1);
    return TW_OK;
}

/* ---- the graph after the sort ---------------------------------------------------------------- */

#define KIND(NAME, FN) { .name = NAME, .devices = TW_DEVICE_CPU, .cpu = FN }
static const tw_task_kind build_kind = KIND("tos.mt.build", t_build);
static const tw_task_kind merge_kind = KIND("tos.mt.merge", t_merge);
static const tw_task_kind finish_kind = KIND("tos.mt.finish", t_finish);
static const tw_task_kind un_create_kind = KIND("tos.un.create", t_un_create);
static const tw_task_kind un_nodes_kind = KIND("tos.un.nodes", t_un_nodes);
static const tw_task_kind un_parents_kind = KIND("tos.un.parents", t_un_parents);
static const tw_task_kind attr_prep_kind = KIND("tos.attr.prep", t_attr_prep);
static const tw_task_kind attr_kinds[] = {
    [A_INIT] = KIND("tos.attr.init", t_attr_init),
    [A_COUNT] = KIND("tos.attr.count", t_attr_count),
    [A_MARK] = KIND("tos.attr.mark", t_attr_mark),
    [A_CLIMB] = KIND("tos.attr.climb", t_attr_climb),
    [A_AREA] = KIND("tos.attr.area", t_attr_area),
    [A_RESET] = KIND("tos.grain.reset", t_grain_reset),
    [A_GRAIN] = KIND("tos.grain", t_grain),
};
static const tw_task_kind sync_kind = KIND("tos.sync", t_sync);
static const tw_task_kind store_kind = KIND("tos.store", t_store);
static int64_t load_host_bytes(const void *arg);
static const tw_task_kind load_kind = { .name = "tos.load",
                                        .devices = TW_DEVICE_CPU,
                                        .cpu = t_load,
                                        .host_bytes = load_host_bytes,
                                        .load = true };
static const tw_task_kind prep_kind = KIND("tos.prep", t_prep);

/* Submit `n` tasks of `kind` (args 0 .. n - 1) after `dep` (may be NULL), and a sync task
 * after all of them, returned in *sync (a reference the caller releases). */
static tw_status
phase(tos_job *j, const tw_task_kind *kind, int64_t n, tw_task *dep, tw_task **sync)
{
    tw_task *s = NULL, *t = NULL;
    tw_status st;

    if ((st = task_new(j, &sync_kind, 0, &s)) != TW_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        if ((st = task_new(j, kind, i, &t)) != TW_OK ||
            (dep && (st = twi_task_depend(t, dep)) != TW_OK) ||
            (st = twi_task_depend(s, t)) != TW_OK || (st = twi_task_submit(t)) != TW_OK)
            goto out;
        twi_task_release(t);
        t = NULL;
    }
    if (n == 0 && dep && (st = twi_task_depend(s, dep)) != TW_OK)
        goto out;
    if ((st = twi_task_submit(s)) != TW_OK)
        goto out;
    *sync = s;
    s = NULL;
out:
    twi_task_release(t);
    twi_task_release(s);
    return st;
}

/* The max-tree's tasks: builds, merges after their children, finishes after the root merge. */
static tw_status
tree_tasks(tos_job *j, tw_task **sync)
{
    tw_task **bt = NULL, **mt = NULL, *root, *s = NULL;
    tw_status st = TW_OK;

    if (!(bt = calloc((size_t)j->blocks, sizeof *bt)) ||
        !(mt = calloc((size_t)j->merges + 1, sizeof *mt))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (int32_t b = 0; b < j->blocks; b++)
        if ((st = task_new(j, &build_kind, b, &bt[b])) != TW_OK)
            goto out;
    for (int32_t k = 0; k < j->merges; k++) {
        int32_t c[2];

        twi_maxtree32_merge_children(j->mt, k, &c[0], &c[1]);
        if ((st = task_new(j, &merge_kind, k, &mt[k])) != TW_OK)
            goto out;
        for (int i = 0; i < 2; i++)
            if ((st = twi_task_depend(mt[k], c[i] < 0 ? bt[~c[i]] : mt[c[i]])) != TW_OK)
                goto out;
    }
    root = j->merges > 0 ? mt[j->merges - 1] : bt[0];
    if ((st = phase(j, &finish_kind, j->blocks, root, &s)) != TW_OK)
        goto out;
    for (int32_t k = j->merges; k-- > 0;)
        if ((st = twi_task_submit(mt[k])) != TW_OK)
            goto out;
    for (int32_t b = 0; b < j->blocks; b++)
        if ((st = twi_task_submit(bt[b])) != TW_OK)
            goto out;
    *sync = s;
    s = NULL;
out:
    for (int32_t b = 0; bt && b < j->blocks; b++)
        twi_task_release(bt[b]);
    for (int32_t k = 0; mt && k < j->merges; k++)
        twi_task_release(mt[k]);
    free(bt);
    free(mt);
    twi_task_release(s);
    return st;
}

/* The max-tree's tasks when `blocks` (else it is done), then the rest of the graph. */
static tw_status
submit_tree(tos_job *j, bool blocks)
{
    tw_task *s = NULL, *t = NULL;
    tw_status st;

    /* each step waits for the previous one's sync task */
#define STEP(KIND, N)                                                                              \
    do {                                                                                           \
        t = s;                                                                                     \
        s = NULL;                                                                                  \
        st = phase(j, (KIND), (N), t, &s);                                                         \
        twi_task_release(t);                                                                       \
        t = NULL;                                                                                  \
        if (st != TW_OK)                                                                           \
            goto out;                                                                              \
    } while (0)
    if (blocks && (st = tree_tasks(j, &s)) != TW_OK)
        goto out;
    STEP(&un_create_kind, 1);
    STEP(&un_nodes_kind, j->bands);
    STEP(&un_parents_kind, j->bands);
    STEP(&attr_prep_kind, 1);
    if (j->want_area || j->grain) {
        for (int k = A_INIT; k <= A_GRAIN; k++)
            if ((k != A_AREA || j->want_area) && (k < A_RESET || j->grain))
                STEP(&attr_kinds[k], j->bands);
    }
    STEP(&store_kind, 1);
#undef STEP
out:
    twi_task_release(s);
    return st;
}

/* ---- the job --------------------------------------------------------------------------------- */

/* A report of this version, or of 0.5-0.6 (without mt_device and mt_s, added in 0.7: a program
 * built against 0.6 keeps working and gets the fields it knows). */
static bool
report_size_ok(const tw_tos_report *r)
{
    return r->struct_size == sizeof *r || r->struct_size == offsetof(tw_tos_report, mt_device);
}

static tw_status
tos_end(tw_job *job, tw_status st, void *user)
{
    tos_job *j = user;

    if (st == TW_OK && j->report) {
        tw_tos_report *r = j->report;
        size_t n = (size_t)(j->W * j->H), nk = (size_t)(j->kw * j->kh);
        size_t un = (nk + 63) / 64 * 4 + (size_t)j->grid_nodes * 4;
        /* the sort's (its queues and, when it labelled, the sub-tree split's map of queued
         * faces), then the tree's nodes (12 bytes each) or the un-interpolation's index */
        size_t sq = j->queue_bytes + (j->labellings ? twi_tos_seen_words(j->W, j->H) * 8 : 0);
        size_t later = (size_t)j->grid_nodes * 12 > un ? (size_t)j->grid_nodes * 12 : un;

        r->exterior = j->rule.exterior;
        r->implicit_root = j->rule.implicit_root;
        r->nodes = j->grid_nodes - (j->rule.implicit_root ? 1 : 0);
        r->blocks = j->mt_device == TW_DEVICE_CUDA ? 1 : j->blocks;
        /* at the peak: the grid, its canonical bit map, the parent image when not the
         * caller's, and the larger of the sort's scratch and the tree's */
        r->scratch_bytes = (int64_t)(nk * 4 + twi_tos_seen_words(j->W, j->H) * 8 +
                                     (j->par_own ? n * 4 : 0) + (sq > later ? sq : later) +
                                     (j->scratch_own ? 2 * n * 4 : 0));
        r->sort_s = j->t_sorted - j->t_start;
        r->tree_s = j->t_tree - j->t_sorted;
        r->attr_s = j->t_end - j->t_tree;
        if (r->struct_size == sizeof *r) { /* a report of 0.7 or later */
            r->mt_device = j->mt_device;
            r->mt_s = j->t_mt - j->t_sorted;
            r->comp_parts = j->comp_parts;
        }
    }
    return twi_stream_finish_two(job, &j->in.s, &j->area_s, st);
}

static void
tos_free(void *user)
{
    tos_job *j = user;

    if (!j)
        return;
    twi_stream_finish(&j->area_s, TW_E_CANCELED, NULL);
    twi_stream_finish(&j->in.s, TW_E_CANCELED, NULL);
    twi_tos_sort_destroy(j->sort);
    twi_maxtree32_destroy(j->mt);
    twi_tos_un_destroy(j->un);
    free(j->img);
    free(j->a);
    free(j->seen);
    free(j->par_own);
    free(j->area);
    free(j->gout);
    free(j->scratch_own);
    free(j);
}

/* Host budget (runtime.host_mem): the load waits until the image, the grid and the outputs
 * fit. */
static int64_t
load_host_bytes(const void *arg)
{
    const tos_job *j = ((const tos_arg *)arg)->j;
    int64_t n = j->W * j->H;

    return n * (int64_t)tw_sample_size(j->type) * (j->grain ? 2 : 1) + j->kw * j->kh * 4 +
           n * (j->want_area ? 8 : 4);
}

static tw_status
setup(tos_job *j, tw_runtime *rt, const tw_input *in, const tw_host_image *image,
      const tw_output *output, const tw_host_image *out_mem, const char *area_path,
      const tw_host_image *area_mem, tw_error *err)
{
    const tw_config *cfg = tw_runtime_get_config(rt);
    tw_tile_view *v = &j->vin;
    size_t ss, n;
    int workers = tw_runtime_get_worker_count(rt);
    tw_status st;

    if ((st = twi_src_open(cfg, j->op, TWI_SRC_U8 | TWI_SRC_U16, "input", in, image, &j->in,
                           err)) != TW_OK)
        return st;
    j->W = j->in.s.w;
    j->H = j->in.s.h;
    j->type = j->in.s.in_type;
    j->kw = 2 * j->W - 1;
    j->kh = 2 * j->H - 1;
    if (j->W < 1 || j->H < 1 || j->W > INT32_MAX || j->H > INT32_MAX ||
        (uint64_t)j->kw * (uint64_t)j->kh >= TWI_TOS_MAX_FACES)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: the image is %lldx%lld; its grid of (2w - 1) x (2h - 1) "
                             "faces must stay below 2^31 (about 536 million pixels)",
                             j->op, (long long)j->W, (long long)j->H);
    for (int i = 0; i < workers; i++) {
        tw_worker_info wi;

        if (tw_runtime_get_worker(rt, i, &wi) == TW_OK && wi.type == TW_DEVICE_CPU)
            j->cpu_workers++;
    }
    if (j->cpu_workers == 0)
        return twi_error_set(err, TW_E_NODEV, "%s: the runtime has no CPU worker", j->op);
#ifdef TW_HAVE_CUDA
    {
        /* the ranks, the bit map and the kernel's records on one GPU, with room for the
         * pool's rounding of its blocks (up to a quarter) */
        const uint64_t nk = (uint64_t)(j->kw * j->kh),
                       need = nk * 4 + (nk + 63) / 64 * 8 +
                              twi_cuda_maxtree_scratch_size((int32_t)j->kw, (int32_t)j->kh,
                                                            TW_U32, 4);

        j->gpu_tree = twi_runtime_gpu_count(rt) > 0 &&
                      need + need / 4 <= (uint64_t)twi_runtime_gpu_budget(rt);
    }
#endif
    ss = tw_sample_size(j->type);
    n = (size_t)(j->W * j->H);
    if (!(j->img = malloc(n * ss)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory for the image", j->op);
    *v = (tw_tile_view){ .data = j->img, .stride = (int64_t)(j->W * (int64_t)ss),
                         .w = (int32_t)j->W, .h = (int32_t)j->H, .channels = 1,
                         .type = j->type };
    if (output->path) {
        if (j->in.path && twi_ops_same_file(j->in.path, output->path))
            return twi_error_set(err, TW_E_INVALID, "%s: the output '%s' would overwrite the input",
                                 j->op, output->path);
        j->out_file = true;
    } else {
        tw_sample_type ot = j->grain ? j->type : TW_U32;

        if ((st = twi_host_image_check(j->op, j->grain ? "result" : "parent", out_mem, j->W,
                                       j->H, ot, err)) != TW_OK)
            return st;
        j->out_mem = *out_mem;
        /* a packed caller's parent image is the kernels' own */
        if (!j->grain && (out_mem->stride == 0 || out_mem->stride == (size_t)j->W * 4))
            j->par = out_mem->data;
    }
    if (area_path) {
        if ((j->in.path && twi_ops_same_file(j->in.path, area_path)) ||
            (output->path && (strcmp(output->path, area_path) == 0 ||
                              twi_ops_same_file(output->path, area_path))))
            return twi_error_set(err, TW_E_INVALID,
                                 "%s: the area file '%s' would overwrite the input or the output",
                                 j->op, area_path);
        j->area_file = j->want_area = true;
    } else if (area_mem && area_mem->data) {
        if ((st = twi_host_image_check(j->op, "area", area_mem, j->W, j->H, TW_U32, err)) !=
            TW_OK)
            return st;
        j->area_mem = *area_mem;
        j->want_area = true;
    }
    if ((j->want_area && !(j->area = malloc(n * 4))) || (j->grain && !(j->gout = malloc(n * ss))))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory for the outputs", j->op);
    if (j->out_file && (st = twi_stream_open_output(&j->in.s, cfg, j->op, output, 1,
                                                    j->grain ? j->type : TW_U32, err)) != TW_OK)
        return st;
    if (j->area_file) {
        tw_output ao = *output;

        j->area_s.w = j->W;
        j->area_s.h = j->H;
        j->area_s.level = j->in.s.level;
        j->area_s.src_level = j->in.s.src_level;
        j->area_s.reduce = j->in.s.reduce;
        j->area_s.x = j->in.s.x;
        j->area_s.y = j->in.s.y;
        j->area_s.meta = j->in.s.slide;
        j->area_s.downsample = j->in.s.downsample;
        ao.path = area_path;
        if ((st = twi_stream_open_output(&j->area_s, cfg, j->op, &ao, 1, TW_U32, err)) != TW_OK)
            return st;
    }
    j->rule.exterior = 0;
    j->rows = j->H / (BANDS_PER_WORKER * (int64_t)j->cpu_workers);
    if (j->W > 0 && j->rows > BAND_PIXELS / j->W)
        j->rows = BAND_PIXELS / j->W;
    j->rows = j->rows < 1 ? 1 : j->rows;
    j->bands = (j->H + j->rows - 1) / j->rows;
    j->rt = rt;
    return TW_OK;
}

/* Load and prep; the rest is submitted as the sort goes. */
static tw_status
graph(tos_job *j)
{
    tw_task *ld = NULL, *pr = NULL;
    tw_status st;
    int64_t total;

    /* the tree's blocks now (prep plans them over the grid): the progress total is known */
    twi_maxtree32_auto_grid((int32_t)j->kw, (int32_t)j->kh, j->cpu_workers, &j->gx, &j->gy);
    j->blocks = j->gx * j->gy;
    j->merges = j->blocks - 1;
    /* load, prep, the faces sorted, build and finish a block, merges, un.create and
     * attr.prep, un.nodes and un.parents a band, the attribute steps a band, store */
    total = 2 + j->kw * j->kh + 2 * j->blocks + j->merges + 2 + 2 * j->bands +
            (j->want_area || j->grain ? 4 * j->bands : 0) + (j->want_area ? j->bands : 0) +
            (j->grain ? 2 * j->bands : 0) + 1;
    twi_job_add_total(j->job, total);
    if ((st = task_new(j, &load_kind, 0, &ld)) != TW_OK ||
        (st = task_new(j, &prep_kind, 0, &pr)) != TW_OK ||
        (st = twi_task_depend(pr, ld)) != TW_OK || (st = twi_task_submit(pr)) != TW_OK)
        goto out;
    st = twi_task_submit(ld);
out:
    twi_task_release(ld);
    twi_task_release(pr);
    return st;
}

static tw_status
submit(tos_job *j, tw_runtime *rt, tw_job **out, tw_error *err)
{
    tw_job *job = NULL;
    tw_status st;

    if ((st = twi_job_create(rt, j->op, &job)) != TW_OK) {
        tos_free(j);
        return twi_error_set(err, st, "%s: cannot create the job", j->op);
    }
    j->job = job;
    twi_job_set_finish(job, tos_end, j, tos_free);
    twi_stream_attach_io(&j->in.s, job);
    twi_stream_attach_io(&j->area_s, job);
    return twi_ops_job_launch(job, j->op, graph(j), out, err);
}

/* ---- public entry points --------------------------------------------------------------------- */

void
tw_tos_report_init(tw_tos_report *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
}

void
tw_tos_opts_init(tw_tos_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

void
tw_grain_opts_init(tw_grain_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->area = 1;
}

tw_status
tw_tos_submit(tw_runtime *rt, const tw_tos_opts *o, tw_job **out, tw_error *err)
{
    tos_job *j;
    tw_status st;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, TOS ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             TOS ": options not initialised with tw_tos_opts_init()");
    if (o->report && !report_size_ok(o->report))
        return twi_error_set(err, TW_E_INVALID,
                             TOS ": report not initialised with tw_tos_report_init()");
    if (!o->output.path && !o->parent.data)
        return twi_error_set(err, TW_E_INVALID, TOS ": no output given (a file or an image)");
    if (o->output.path && o->parent.data)
        return twi_error_set(err, TW_E_INVALID, TOS ": both an output file and a parent image");
    if (o->area_path && o->area.data)
        return twi_error_set(err, TW_E_INVALID, TOS ": both an area file and an area image");
    if (!(j = calloc(1, sizeof *j)))
        return twi_error_set(err, TW_E_NOMEM, TOS ": out of memory");
    j->op = TOS;
    j->report = o->report;
    atomic_init(&j->parts, 0);
    atomic_init(&j->helpers, 0);
    if ((st = setup(j, rt, &o->input, &o->image, &o->output, &o->parent, o->area_path, &o->area,
                    err)) != TW_OK) {
        tos_free(j);
        return st;
    }
    return submit(j, rt, out, err);
}

tw_status
tw_grain_submit(tw_runtime *rt, const tw_grain_opts *o, tw_job **out, tw_error *err)
{
    tos_job *j;
    tw_status st;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, GRAIN ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             GRAIN ": options not initialised with tw_grain_opts_init()");
    if (o->report && !report_size_ok(o->report))
        return twi_error_set(err, TW_E_INVALID,
                             GRAIN ": report not initialised with tw_tos_report_init()");
    if (o->area < 1)
        return twi_error_set(err, TW_E_INVALID, GRAIN ": area 0 (at least 1 pixel)");
    if (!o->output.path && !o->result.data)
        return twi_error_set(err, TW_E_INVALID, GRAIN ": no output given (a file or an image)");
    if (o->output.path && o->result.data)
        return twi_error_set(err, TW_E_INVALID, GRAIN ": both an output file and a result image");
    if (!(j = calloc(1, sizeof *j)))
        return twi_error_set(err, TW_E_NOMEM, GRAIN ": out of memory");
    j->op = GRAIN;
    j->grain = true;
    j->grain_area = o->area;
    j->report = o->report;
    atomic_init(&j->parts, 0);
    atomic_init(&j->helpers, 0);
    if ((st = setup(j, rt, &o->input, &o->image, &o->output, &o->result, NULL, NULL, err)) !=
        TW_OK) {
        tos_free(j);
        return st;
    }
    return submit(j, rt, out, err);
}
