/* SPDX-License-Identifier: MIT */
/* tilewave: GPU manager threads: device discovery, stream and pool, execution of CUDA variants. */
#include <stdio.h>
#include <string.h>

#include "runtime_internal.h"

#ifdef TW_HAVE_CUDA

#include <cuda_runtime_api.h>
#include <hwloc/cudart.h>

/*
 * One manager thread per GPU owns that device's stream and memory pool. A CUDA task runs as:
 * take a device buffer per tile from the pool (rows packed), copy R/RW tiles in, call the
 * variant (which only enqueues on the stream), catch launch errors, copy W/RW tiles back,
 * synchronise, return the buffers. This file is the only place that synchronises (house style
 * rule 31), so variants and launchers stay asynchronous; a variant that must read a small
 * result mid-task asks for it with twi_ctx_copy_to_host(), which synchronises here. The
 * skeleton writes back after every task, which keeps the host copy current; keeping tiles
 * resident comes with the locality policy.
 */

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

tw_status
twi_cuda_worker_start(tw_worker *w, tw_error *err)
{
    cudaStream_t stream = NULL;
    cudaError_t e;

    if ((e = cudaSetDevice(w->gpu)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) {
        (void)cudaGetLastError();
        return twi_error_set(err, TW_E_DEVICE, "cuda: cannot start GPU %d (%s)", w->gpu,
                             cudaGetErrorString(e));
    }
    if (twi_devpool_create(w->gpu, &w->pool) != TW_OK) {
        (void)cudaStreamDestroy(stream);
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
    }
    w->stream = stream;
    /* Tracing times each task's uploads, device work and downloads with events. */
    for (int i = 0; w->rt->trace_file && i < TWI_TRACE_EVENTS; i++)
        if (cudaEventCreate((cudaEvent_t *)&w->trace_ev[i]) != cudaSuccess) {
            (void)cudaGetLastError();
            w->trace_ev[i] = NULL;
        }
    return TW_OK;
}

void
twi_cuda_worker_stop(tw_worker *w)
{
    if (w->stream) {
        (void)cudaStreamSynchronize((cudaStream_t)w->stream);
        (void)cudaStreamDestroy((cudaStream_t)w->stream);
        w->stream = NULL;
    }
    for (int i = 0; i < TWI_TRACE_EVENTS; i++)
        if (w->trace_ev[i]) {
            (void)cudaEventDestroy((cudaEvent_t)w->trace_ev[i]);
            w->trace_ev[i] = NULL;
        }
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

/* After a traced task: its uploads, device work and downloads from the stream's events,
 * placed so that the last event is now (the stream has just been synchronised). */
static void
trace_copies(tw_worker *w, const char *name, cudaEvent_t *ev)
{
    float ms[3];
    int64_t end = twi_trace_now(), at[4];

    for (int i = 0; i < 3; i++)
        if (cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
        }
    at[3] = end;
    for (int i = 2; i >= 0; i--)
        at[i] = at[i + 1] - (int64_t)((double)ms[i] * 1e6);
    if (at[1] > at[0])
        twi_trace_add(w, TWI_TRACE_COPIES, "upload", at[0], at[1]);
    twi_trace_add(w, TWI_TRACE_KERNELS, name, at[1], at[2]);
    if (at[3] > at[2])
        twi_trace_add(w, TWI_TRACE_COPIES, "download", at[2], at[3]);
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

tw_status
twi_cuda_run(tw_worker *w, tw_task_ctx *ctx)
{
    tw_task *t = ctx->task;
    cudaStream_t stream = (cudaStream_t)w->stream;
    void *d_tile[TW_TASK_MAX_TILES] = {0};
    tw_status st = TW_OK;
    cudaError_t e = cudaSuccess, e2;
    cudaEvent_t *ev = (cudaEvent_t *)w->trace_ev;
    bool timed = ev[0] && ev[1] && ev[2] && ev[3];
    int i;

    if (timed)
        (void)cudaEventRecord(ev[0], stream);
    for (i = 0; i < t->n_tiles; i++) {
        tw_tile *tile = t->tiles[i];
        size_t row = (size_t)tile->stride; /* host rows are packed; device rows too */

        if (!(d_tile[i] = twi_devpool_alloc(w->pool, tile->bytes))) {
            st = twi_ctx_fail(ctx, TW_E_DEVICE,
                              "cuda: out of memory for a %zu-byte tile in task %s on GPU %d",
                              tile->bytes, t->kind->name, w->gpu);
            goto out;
        }
        if ((t->modes[i] & TW_R) &&
            (e = cudaMemcpy2DAsync(d_tile[i], row, tile->h_data, (size_t)tile->stride, row,
                                   (size_t)tile->h, cudaMemcpyHostToDevice, stream)) !=
                cudaSuccess)
            goto out;
        if (t->modes[i] & TW_R)
            atomic_fetch_add_explicit(&w->bytes_up, tile->bytes, memory_order_relaxed);
        ctx->views[i] = twi_tile_host_view(tile);
        ctx->views[i].data = d_tile[i];
        ctx->views[i].stride = (int64_t)row;
    }
    if (timed)
        (void)cudaEventRecord(ev[1], stream);
    st = t->kind->cuda(ctx, t->arg);
    /* A launch error the variant did not check would otherwise surface in a later task. */
    if ((e = cudaGetLastError()) != cudaSuccess || st != TW_OK)
        goto out;
    if (timed)
        (void)cudaEventRecord(ev[2], stream);
    for (i = 0; i < t->n_tiles; i++) {
        tw_tile *tile = t->tiles[i];

        if ((t->modes[i] & TW_W) &&
            (e = cudaMemcpy2DAsync(tile->h_data, (size_t)tile->stride, d_tile[i],
                                   (size_t)tile->stride, (size_t)tile->stride, (size_t)tile->h,
                                   cudaMemcpyDeviceToHost, stream)) != cudaSuccess)
            goto out;
        if (t->modes[i] & TW_W)
            atomic_fetch_add_explicit(&w->bytes_down, tile->bytes, memory_order_relaxed);
    }
    if (timed)
        (void)cudaEventRecord(ev[3], stream);
out:
    /* Synchronise even after a failure: buffers go back to the pool only once idle. */
    e2 = cudaStreamSynchronize(stream);
    if (e == cudaSuccess)
        e = e2;
    if (timed && e == cudaSuccess && st == TW_OK)
        trace_copies(w, t->kind->name, ev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (st == TW_OK || !ctx->failed)
            st = twi_ctx_fail(ctx, TW_E_DEVICE, "cuda: %s in task %s on GPU %d",
                              cudaGetErrorString(e), t->kind->name, w->gpu);
    }
    for (i = 0; i < t->n_tiles; i++)
        twi_devpool_free(w->pool, d_tile[i], t->tiles[i]->bytes);
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

#endif /* TW_HAVE_CUDA */
