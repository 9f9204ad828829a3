/* SPDX-License-Identifier: MIT */
/* tilewave: GPU manager threads: device discovery, stream and pool, execution of CUDA variants. */
#include <stdio.h>
#include <string.h>

#include "rt_core.h"
#include "rt_job.h"

#ifdef TW_HAVE_CUDA

#include <cuda_runtime_api.h>
#include <hwloc/cudart.h>

/*
 * One manager thread per GPU owns that device's three streams, its memory pool (which also
 * keeps the tiles' replicas, runtime/mem_cuda.c) and a two-slot pipeline:
 *
 *   upload stream    [B up]                    [C up]
 *   compute stream   [A variant ...........]   [B variant .......]
 *   download stream                 [A down]                 [B down]
 *
 * twi_cuda_run(A): A's buffers come from its staging (done while the previous task ran) or are
 * taken now; the compute stream waits for A's upload event, the variant enqueues its work (it
 * may synchronise mid-task through twi_ctx_copy_to_host, which waits on the compute stream
 * only), A's W/RW tiles are downloaded on the download stream after A's work, and meanwhile
 * the manager pops the next task B (twi_worker_prefetch: only a task whose tiles fit beside
 * A's in the budget and that no idle worker could start at once) and stages it: pins its
 * replicas and enqueues the uploads its R tiles still need. twi_cuda_run returns when A's
 * downloads are done, and task.c completes A (dependents released). B's variant is launched
 * next by the worker loop, its work waiting on its own upload event only.
 *
 * Buffers are tiles' replicas: a tile read by a task stays on the GPU after it, and a later task
 * on this GPU that reads the same version of the tile uploads nothing; a written tile keeps its
 * replica with the new version, so a dependent task here finds it resident, and is downloaded
 * at the end of the task only when downloads are eager; lazily, when a host consumer needs it
 * (runtime/tile.c). Replicas are pinned from staging to the end of the task and are never
 * evicted while pinned.
 *
 * This file is the only place that synchronises (launchers only enqueue), so variants and
 * launchers stay asynchronous.
 */

enum { EV_UP0, EV_UP, EV_K0, EV_DONE, EV_D0, EV_DOWN, SLOT_EVENTS };

/* One task in the pipeline: its tiles' device blocks (pinned replicas) and events. */
typedef struct gslot {
    tw_task *t;              /* staged for this task; NULL when the slot is free */
    int n;                   /* tiles pinned so far */
    void *d_tile[TW_TASK_MAX_TILES];
    uint64_t held[TW_TASK_MAX_TILES]; /* the tile version each block holds (0: none) */
    cudaEvent_t ev[SLOT_EVENTS]; /* EV_UP, EV_DONE, EV_DOWN always; the rest when tracing */
} gslot;

typedef struct gpipe {
    gslot slot[2];
    int pf_slot;             /* the slot of w->pf_task while it is staged */
    bool timed;              /* every event of both slots exists and keeps time */
} gpipe;

int
twi_cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    if (e != cudaSuccess) {
        /* No driver or no device: a CPU-only host is normal. */
        (void)cudaGetLastError();
        TW_INFO("cuda", "no CUDA device (%s); running on CPU workers", cudaGetErrorString(e));
        return 0;
    }
    return n;
}

tw_status
twi_cuda_describe(hwloc_topology_t topo, int ordinal, twi_gpu *g, tw_error *err)
{
    struct cudaDeviceProp prop;
    tw_gpu_info *info = &g->info;
    cudaError_t e;

    memset(info, 0, sizeof *info);
    info->ordinal = ordinal;
    if ((e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) {
        (void)cudaGetLastError();
        return twi_error_set(err, TW_E_DEVICE, "cuda: cannot query GPU %d (%s)", ordinal,
                             cudaGetErrorString(e));
    }
    snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof info->name - 1, prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->total_mem = (uint64_t)prop.totalGlobalMem;
    if (cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, ordinal) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        info->pci_bus_id[0] = '\0';
    }
    if (!(g->near = hwloc_bitmap_alloc()))
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
    /* Unknown locality (no sysfs entry) leaves the set empty: the manager goes anywhere. */
    if (hwloc_cudart_get_device_cpuset(topo, ordinal, g->near) != 0)
        hwloc_bitmap_zero(g->near);
    hwloc_bitmap_list_snprintf(info->near_cpuset, sizeof info->near_cpuset, g->near);
    return TW_OK;
}

/* runtime.gpu_mem, or when it is 0 the device's free memory now minus a headroom for the CUDA
 * context's own needs and other users (1/32 of the device, at least 256 MiB). */
static size_t
gpu_budget(const tw_worker *w)
{
    int64_t v = 0;
    size_t free_b = 0, total_b = 0, head;

    if (tw_config_get_int(w->rt->cfg, "runtime.gpu_mem", &v) == TW_OK && v > 0)
        return (size_t)v;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return SIZE_MAX; /* unknown: the driver's own limit applies */
    }
    head = total_b / 32 > ((size_t)256 << 20) ? total_b / 32 : (size_t)256 << 20;
    return free_b > 2 * head ? free_b - head : free_b / 2;
}

static void
destroy_events(gpipe *gp)
{
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < SLOT_EVENTS; i++)
            if (gp->slot[k].ev[i]) {
                (void)cudaEventDestroy(gp->slot[k].ev[i]);
                gp->slot[k].ev[i] = NULL;
            }
}

static cudaError_t
create_events(gpipe *gp, bool traced)
{
    cudaError_t e = cudaSuccess;

    gp->timed = traced;
    for (int k = 0; k < 2 && e == cudaSuccess; k++)
        for (int i = 0; i < SLOT_EVENTS && e == cudaSuccess; i++) {
            bool needed = i == EV_UP || i == EV_DONE || i == EV_DOWN;

            if (traced)
                e = cudaEventCreate(&gp->slot[k].ev[i]);
            else if (needed)
                /* Untimed events are cheaper to record and to wait for. */
                e = cudaEventCreateWithFlags(&gp->slot[k].ev[i], cudaEventDisableTiming);
        }
    return e;
}

tw_status
twi_cuda_worker_start(tw_worker *w, tw_error *err)
{
    cudaStream_t stream[3] = {NULL, NULL, NULL};
    gpipe *gp = NULL;
    size_t budget;
    cudaError_t e;
    tw_status st;
    int i;

    if ((e = cudaSetDevice(w->gpu)) != cudaSuccess)
        goto cuda_fail;
    for (i = 0; i < 3; i++)
        if ((e = cudaStreamCreateWithFlags(&stream[i], cudaStreamNonBlocking)) != cudaSuccess)
            goto cuda_fail;
    if (!(gp = calloc(1, sizeof *gp)))
        goto nomem;
    if ((e = create_events(gp, w->rt->trace_file != NULL)) != cudaSuccess)
        goto cuda_fail;
    budget = gpu_budget(w);
    if (twi_devpool_create(w->gpu, budget, &w->pool) != TW_OK)
        goto nomem;
    w->stream = stream[0];
    w->up_stream = stream[1];
    w->down_stream = stream[2];
    w->gpipe = gp;
    /* Published to other threads by the startup handshake (rt->lock). */
    w->g->pool = w->pool;
    w->g->budget = budget;
    twi_devpool_count_downloads(w->pool, &w->bytes_down);
    TW_INFO("cuda", "GPU %d: memory budget %zu MiB", w->gpu, budget >> 20);
    return TW_OK;
cuda_fail:
    (void)cudaGetLastError();
    st = twi_error_set(err, TW_E_DEVICE, "cuda: cannot start GPU %d (%s)", w->gpu,
                       cudaGetErrorString(e));
    goto undo;
nomem:
    st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
undo:
    for (i = 0; i < 3; i++)
        if (stream[i])
            (void)cudaStreamDestroy(stream[i]);
    if (gp)
        destroy_events(gp);
    free(gp);
    return st;
}

void
twi_cuda_worker_stop(tw_worker *w)
{
    void **streams[3] = {&w->stream, &w->up_stream, &w->down_stream};

    twi_cuda_unstage(w);
    for (int i = 0; i < 3; i++)
        if (*streams[i]) {
            (void)cudaStreamSynchronize((cudaStream_t)*streams[i]);
            (void)cudaStreamDestroy((cudaStream_t)*streams[i]);
            *streams[i] = NULL;
        }
    if (w->gpipe) {
        destroy_events(w->gpipe);
        free(w->gpipe);
        w->gpipe = NULL;
    }
    w->g->pool = NULL;
    twi_devpool_destroy(w->pool);
    w->pool = NULL;
}

void *
twi_cuda_scratch(tw_task_ctx *ctx, size_t bytes)
{
    void *d_ptr = twi_devpool_alloc(ctx->w->pool, bytes);

    if (!d_ptr)
        return NULL;
    ctx->scratch[ctx->n_scratch] = d_ptr;
    ctx->scratch_bytes[ctx->n_scratch] = bytes;
    ctx->n_scratch++;
    return d_ptr;
}

int
twi_gpu_fit(const tw_worker *w, const tw_task *t)
{
    const twi_gpu *g = w->g;
    size_t need = 0, hard;

    if (!g || !g->pool)
        return 1;
    for (int i = 0; i < t->n_tiles; i++)
        need += t->tiles[i]->dev_bytes;
    if (need > g->budget)
        return -1;
    /* Idle replicas and cached blocks can always be evicted: only pinned memory counts. */
    hard = twi_devpool_hard_bytes(g->pool);
    return hard <= g->budget && need <= g->budget - hard ? 1 : 0;
}

/* The variant-side copies of twi_ctx_copy_to_device / _to_host (runtime/tw_internal.h). */
tw_status
twi_cuda_copy(tw_task_ctx *ctx, void *dst, const void *src, size_t bytes, bool to_host)
{
    cudaStream_t stream = (cudaStream_t)ctx->w->stream;
    cudaError_t e;

    if (to_host) {
        if ((e = cudaStreamSynchronize(stream)) == cudaSuccess)
            e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    } else {
        e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
    }
    atomic_fetch_add_explicit(to_host ? &ctx->w->bytes_down : &ctx->w->bytes_up, bytes,
                              memory_order_relaxed);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return twi_ctx_fail(ctx, TW_E_DEVICE,
                            "cuda: copying %zu bytes %s the GPU in task %s failed (%s)", bytes,
                            to_host ? "from" : "to", ctx->task->kind->name,
                            cudaGetErrorString(e));
    }
    return TW_OK;
}

/* Unpin the slot's blocks, each kept as a replica when it holds its tile's current version. */
static void
release_slot(tw_worker *w, gslot *s)
{
    int gi = twi_gpu_index(w);

    for (int i = 0; i < s->n; i++)
        twi_replica_unpin(w->pool, s->t->tiles[i], gi, s->held[i]);
    s->n = 0;
    s->t = NULL;
}

/* Why t's tile i got no block (twi_ctx_fail message when ctx is set). */
static tw_status
stage_fail(tw_worker *w, tw_task_ctx *ctx, const tw_task *t, int i)
{
    size_t need = 0;

    if (!ctx)
        return TW_E_DEVICE;
    for (int k = 0; k < t->n_tiles; k++)
        need += t->tiles[k]->dev_bytes;
    if (need > w->g->budget)
        return twi_ctx_fail(ctx, TW_E_DEVICE,
                            "cuda: task %s needs %zu bytes of tiles on GPU %d, more than its "
                            "budget of %zu bytes (runtime.gpu_mem)", t->kind->name, need,
                            w->gpu, w->g->budget);
    return twi_ctx_fail(ctx, TW_E_DEVICE,
                        "cuda: out of memory for a %zu-byte tile in task %s on GPU %d",
                        t->tiles[i]->bytes, t->kind->name, w->gpu);
}

/* May a prefetch upload tile i of t now? Under a host budget (runtime/budget.c) a tile's
 * pixels are safe to read only while pinned: the dispatch pinned the tiles that were resident
 * then; the others get their pixels when t starts, and t is staged only then. */
static bool
host_ready(const tw_task *t, int i)
{
    if (!t->job->rt->budget)
        return true;
    for (int j = 0; j <= i; j++)
        if (t->tiles[j] == t->tiles[i])
            return (t->mem.pinned >> j) & 1u;
    return false;
}

/*
 * Pin a block for each of t's tiles in slot s and enqueue the uploads of the R/RW tiles that
 * are not resident in their current version, then record EV_UP on the upload stream. On
 * failure everything is given back (a message goes to ctx when it is set, i.e. when t is the
 * task about to run rather than a prefetched one).
 */
static tw_status
stage(tw_worker *w, gslot *s, tw_task *t, tw_task_ctx *ctx)
{
    gpipe *gp = w->gpipe;
    cudaStream_t up = (cudaStream_t)w->up_stream;
    int gi = twi_gpu_index(w);
    uint64_t up_bytes = 0, hit_bytes = 0;
    cudaError_t e = cudaSuccess;
    tw_status st = TW_OK;

    for (int i = 0; !ctx && i < t->n_tiles; i++)
        if ((t->modes[i] & TW_R) && !host_ready(t, i))
            return TW_E_NOMEM; /* not staged now: at its start */
    s->t = t;
    s->n = 0;
    if (gp->timed)
        (void)cudaEventRecord(s->ev[EV_UP0], up);
    for (int i = 0; i < t->n_tiles; i++) {
        tw_tile *tile = t->tiles[i];
        size_t row = tile->row; /* device rows packed; host rows tile->stride apart */
        bool current;

        if (!(s->d_tile[i] = twi_replica_pin(w->pool, tile, gi, &current))) {
            st = stage_fail(w, ctx, t, i);
            goto fail;
        }
        s->n = i + 1;
        s->held[i] = current ? atomic_load_explicit(&tile->version, memory_order_relaxed) : 0;
        if (!(t->modes[i] & TW_R))
            continue;
        if (current) {
            hit_bytes += tile->bytes;
            continue;
        }
        /* Lazy downloads: the current pixels may be on another GPU only. */
        if ((st = twi_tile_sync_host(tile, ctx ? ctx->msg : NULL, ctx ? sizeof ctx->msg : 0)) !=
            TW_OK) {
            if (ctx)
                ctx->failed = true;
            goto fail;
        }
        if ((e = cudaMemcpy2DAsync(s->d_tile[i], row, tile->h_data, (size_t)tile->stride, row,
                                   (size_t)tile->h, cudaMemcpyHostToDevice, up)) != cudaSuccess)
            goto fail;
        up_bytes += tile->bytes;
        /* Valid from now on for this GPU's later work: it all waits for upload events
         * recorded after this copy on the same stream. */
        s->held[i] = atomic_load_explicit(&tile->version, memory_order_relaxed);
        atomic_store_explicit(&tile->rep[gi].version, s->held[i], memory_order_relaxed);
    }
    if ((e = cudaEventRecord(s->ev[EV_UP], up)) != cudaSuccess)
        goto fail;
    atomic_fetch_add_explicit(&w->bytes_up, up_bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->bytes_hit, hit_bytes, memory_order_relaxed);
    return TW_OK;
fail:
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (ctx)
            st = twi_ctx_fail(ctx, TW_E_DEVICE, "cuda: upload for task %s on GPU %d failed (%s)",
                              t->kind->name, w->gpu, cudaGetErrorString(e));
        else
            st = TW_E_DEVICE;
    }
    /* The blocks go back only once the copies already enqueued into them are done. */
    if (cudaStreamSynchronize(up) != cudaSuccess || e != cudaSuccess) {
        (void)cudaGetLastError();
        for (int i = 0; i < s->n; i++)
            s->held[i] = 0;
    }
    release_slot(w, s);
    return st;
}

void
twi_cuda_unstage(tw_worker *w)
{
    gpipe *gp = w->gpipe;

    if (!w->pf_staged || !gp)
        return;
    w->pf_staged = false;
    /* Its uploads may still be reading host tiles and writing the blocks. */
    if (cudaStreamSynchronize((cudaStream_t)w->up_stream) != cudaSuccess) {
        (void)cudaGetLastError();
        for (int i = 0; i < gp->slot[gp->pf_slot].n; i++)
            gp->slot[gp->pf_slot].held[i] = 0;
    }
    release_slot(w, &gp->slot[gp->pf_slot]);
}

/* Pop the next task for this GPU while the current one runs and stage it in `slot`. A task
 * for which staging fails is kept in hand unstaged: it runs next and reports then. */
static void
prefetch(tw_worker *w, int slot)
{
    gpipe *gp = w->gpipe;
    unsigned variant = 0;
    tw_task *n = twi_worker_prefetch(w, &variant);

    if (!n)
        return;
    /* The worker loop runs it next and then lets go of this reference. */
    atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
    w->pf_task = n;
    w->pf_variant = variant;
    w->pf_staged = false;
    if (variant == TW_DEVICE_CUDA && !twi_job_stopping(n->job) &&
        stage(w, &gp->slot[slot], n, NULL) == TW_OK) {
        w->pf_staged = true;
        gp->pf_slot = slot;
    }
}

/* After a traced task: its uploads, device work and downloads from the slot's events, placed
 * so that the last one (EV_DOWN, just waited for) is now. */
static void
trace_slot(tw_worker *w, const char *name, const gslot *s)
{
    static const int lane[3] = {TWI_TRACE_UPLOADS, TWI_TRACE_KERNELS, TWI_TRACE_DOWNLOADS};
    static const char *const what[3] = {"upload", NULL, "download"};
    int64_t end = twi_trace_now(), at[SLOT_EVENTS];

    for (int i = 0; i < SLOT_EVENTS; i++) {
        float ms = 0;

        if (i != EV_DOWN && cudaEventElapsedTime(&ms, s->ev[i], s->ev[EV_DOWN]) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
        }
        at[i] = end - (int64_t)((double)ms * 1e6);
    }
    for (int k = 0; k < 3; k++)
        if (at[2 * k + 1] > at[2 * k] || k == 1)
            twi_trace_add(w, lane[k], what[k] ? what[k] : name, at[2 * k], at[2 * k + 1]);
}

tw_status
twi_cuda_run(tw_worker *w, tw_task_ctx *ctx)
{
    gpipe *gp = w->gpipe;
    tw_task *t = ctx->task;
    cudaStream_t cs = (cudaStream_t)w->stream, ds = (cudaStream_t)w->down_stream;
    gslot *s = NULL;
    tw_status st = TW_OK;
    cudaError_t e = cudaSuccess;
    int gi = twi_gpu_index(w), i;
    bool written[TW_TASK_MAX_TILES] = {false}, ok;

    if (w->pf_task == t) {
        /* Popped while the previous task ran: usually staged already. */
        w->pf_task = NULL;
        if (w->pf_staged) {
            w->pf_staged = false;
            s = &gp->slot[gp->pf_slot];
        }
    }
    for (i = 0; i < t->n_tiles; i++)
        for (int k = 0; k < t->n_tiles; k++)
            if (t->tiles[k] == t->tiles[i] && (t->modes[k] & TW_W))
                written[i] = true;
    if (!s) {
        s = &gp->slot[w->pf_staged ? 1 - gp->pf_slot : 0];
        if ((st = stage(w, s, t, ctx)) != TW_OK)
            return st; /* nothing changed: a retry elsewhere starts from the same pixels */
    }
    /* Lazy downloads: a tile this task writes comes back to the host first when only a GPU
     * holds it, so that a CPU retry after a failure starts from the same pixels (an in-place
     * task's input; for a write-only one, what a variant leaves unwritten). */
    for (i = 0; i < t->n_tiles; i++)
        if (written[i] &&
            (st = twi_tile_sync_host(t->tiles[i], ctx->msg, sizeof ctx->msg)) != TW_OK) {
            ctx->failed = true;
            release_slot(w, s);
            return st;
        }
    /* The pixels of written tiles change from here on: no replica of them is current, and
     * this task's blocks hold the new version only once it succeeds. The host copy keeps the
     * previous version, the input of a retry, until the download (eager) or a sync (lazy). */
    twi_task_bump_written(t);
    for (i = 0; i < t->n_tiles; i++) {
        if (written[i]) {
            s->held[i] = 0;
            atomic_store_explicit(&t->tiles[i]->rep[gi].version, 0, memory_order_relaxed);
        }
        ctx->views[i] = twi_tile_host_view(t->tiles[i]);
        ctx->views[i].data = s->d_tile[i];
        ctx->views[i].stride = (int64_t)t->tiles[i]->row; /* device rows are packed */
    }
    if ((e = cudaStreamWaitEvent(cs, s->ev[EV_UP], 0)) != cudaSuccess)
        goto out;
    if (gp->timed)
        (void)cudaEventRecord(s->ev[EV_K0], cs);
    st = t->kind->cuda(ctx, t->arg);
    /* A launch error the variant did not check would otherwise surface in a later task. */
    if ((e = cudaGetLastError()) != cudaSuccess || st != TW_OK)
        goto out;
    if ((e = cudaEventRecord(s->ev[EV_DONE], cs)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(ds, s->ev[EV_DONE], 0)) != cudaSuccess)
        goto out;
    if (gp->timed)
        (void)cudaEventRecord(s->ev[EV_D0], ds);
    for (i = 0; i < t->n_tiles; i++) {
        tw_tile *tile = t->tiles[i];
        size_t row = tile->row;

        if (!(t->modes[i] & TW_W) || w->rt->lazy_down)
            continue;
        if ((e = cudaMemcpy2DAsync(tile->h_data, (size_t)tile->stride, s->d_tile[i], row, row,
                                   (size_t)tile->h, cudaMemcpyDeviceToHost, ds)) != cudaSuccess)
            goto out;
        atomic_fetch_add_explicit(&w->bytes_down, tile->bytes, memory_order_relaxed);
    }
    if ((e = cudaEventRecord(s->ev[EV_DOWN], ds)) != cudaSuccess)
        goto out;
    /* While this task's work and downloads run, the next task's uploads go in. */
    if (!w->pf_task)
        prefetch(w, (int)(s == &gp->slot[0]));
    e = cudaEventSynchronize(s->ev[EV_DOWN]);
out:
    ok = st == TW_OK && e == cudaSuccess;
    if (!ok) {
        /* Buffers go back only once idle: wait for everything the task enqueued (its
         * uploads too, when the compute stream never got to wait for them). */
        cudaError_t e2 = cudaStreamSynchronize(cs), e3 = cudaStreamSynchronize(ds);
        cudaError_t e4 = cudaStreamSynchronize((cudaStream_t)w->up_stream);

        if (e == cudaSuccess)
            e = e2 != cudaSuccess ? e2 : e3 != cudaSuccess ? e3 : e4;
    }
    if (ok && gp->timed)
        trace_slot(w, t->kind->name, s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (st == TW_OK || !ctx->failed)
            st = twi_ctx_fail(ctx, TW_E_DEVICE, "cuda: %s in task %s on GPU %d",
                              cudaGetErrorString(e), t->kind->name, w->gpu);
    }
    for (i = 0; i < s->n; i++) {
        if (e != cudaSuccess)
            s->held[i] = 0; /* the device's state is unknown */
        else if (written[i])
            s->held[i] = ok ? atomic_load_explicit(&t->tiles[i]->version, memory_order_relaxed)
                            : 0;
        /* Written tiles: the host holds the new pixels after an eager download, and after a
         * failure the input, which a CPU retry starts from (it was synced above when read). */
        if (written[i] && (!ok || !w->rt->lazy_down))
            twi_tile_host_set_current(t->tiles[i]);
    }
    release_slot(w, s);
    for (i = 0; i < ctx->n_scratch; i++)
        twi_devpool_free(w->pool, ctx->scratch[i], ctx->scratch_bytes[i]);
    ctx->n_scratch = 0;
    return st;
}

#else /* !TW_HAVE_CUDA: no GPU worker ever exists */

int
twi_cuda_device_count(void)
{
    return 0;
}

tw_status
twi_cuda_describe(hwloc_topology_t topo, int ordinal, twi_gpu *g, tw_error *err)
{
    (void)topo;
    (void)g;
    return twi_error_set(err, TW_E_NODEV, "runtime: GPU %d: this build has no CUDA support",
                         ordinal);
}

tw_status
twi_cuda_worker_start(tw_worker *w, tw_error *err)
{
    return twi_error_set(err, TW_E_NODEV, "runtime: GPU %d: this build has no CUDA support",
                         w->gpu);
}

void
twi_cuda_worker_stop(tw_worker *w)
{
    (void)w;
}

void *
twi_cuda_scratch(tw_task_ctx *ctx, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    return NULL;
}

tw_status
twi_cuda_copy(tw_task_ctx *ctx, void *dst, const void *src, size_t bytes, bool to_host)
{
    (void)dst;
    (void)src;
    (void)bytes;
    (void)to_host;
    return twi_ctx_fail(ctx, TW_E_NODEV, "runtime: a GPU copy in a build without CUDA");
}

tw_status
twi_cuda_run(tw_worker *w, tw_task_ctx *ctx)
{
    (void)w;
    return twi_ctx_fail(ctx, TW_E_NODEV, "runtime: task %s needs CUDA, not in this build",
                        ctx->task->kind->name);
}

void
twi_cuda_unstage(tw_worker *w)
{
    (void)w;
}

int
twi_gpu_fit(const tw_worker *w, const tw_task *t)
{
    (void)w;
    (void)t;
    return 1;
}

#endif /* TW_HAVE_CUDA */
