/* SPDX-License-Identifier: MIT */
/* tilewave: runtime workers: topology and binding, GPUs, traces, the worker layout
 * (runtime/topology.c, worker_cpu.c, worker_cuda.c, trace.c). */
#ifndef TW_RT_WORKER_H
#define TW_RT_WORKER_H

#include <pthread.h>

#include <hwloc.h>

#include "rt_mem.h"

/* Only the sources of runtime/ include this header; nothing outside sees these layouts. */

typedef struct tw_worker tw_worker;

/* ---- topology (runtime/topology.c) */
typedef struct twi_topo {
    hwloc_topology_t topo;
    int n_packages, n_numa_nodes, n_cores, n_pus;
    int n_units;          /* schedulable units: cores, or PUs when hwloc sees no cores */
    hwloc_bitmap_t *unit; /* n_units cpusets, in hwloc's logical order */
} twi_topo;

TWI_HIDDEN tw_status twi_topo_load(twi_topo *tp, tw_error *err);
/* Keep only part k of the units cut into n equal parts (runtime.cpu_share); with fewer units
 * than parts, unit k % units. */
TWI_HIDDEN void twi_topo_restrict(twi_topo *tp, int64_t k, int64_t n);
TWI_HIDDEN void twi_topo_fini(twi_topo *tp);
/* Pick one unit inside `near` (NULL or empty: anywhere) for a GPU manager, preferring units not
 * already in `taken`; returns the unit index. */
TWI_HIDDEN int twi_topo_pick_gpu_unit(const twi_topo *tp, hwloc_const_bitmap_t near,
                                      hwloc_const_bitmap_t taken);
/* Cpusets of n_workers CPU workers of `team` units each. Units listed in `reserved_units`
 * (n_reserved of them, for GPU managers) are skipped while enough others remain; beyond the
 * machine's size units are reused round-robin and *oversubscribed is set. */
TWI_HIDDEN tw_status twi_topo_assign_cpu(const twi_topo *tp, int n_workers, int team,
                                         const int *reserved_units, int n_reserved,
                                         hwloc_bitmap_t *sets_out, bool *oversubscribed);
/* Bind the calling thread to `set` (a failure is a warning) and write the binding read back
 * in list syntax to `bound` ("" when the read-back is unsupported). */
TWI_HIDDEN void twi_topo_bind_self(const twi_topo *tp, hwloc_const_bitmap_t set,
                                   const char *who, char *bound, size_t bound_size);

/* ---- GPUs (runtime/worker_cuda.c; stubs without TW_HAVE_CUDA) */
typedef struct twi_gpu {
    int ordinal;            /* CUDA device ordinal */
    tw_gpu_info info;
    hwloc_bitmap_t near;    /* cores near the device (may be empty when unknown) */
    /* Set by the manager thread before it reports ready, then constant: its pool (which
     * also holds the tiles' replicas on this GPU) and that pool's budget in bytes. */
    twi_devpool *pool;
    size_t budget;
} twi_gpu;

/* CUDA devices present; 0 (and an INFO log) when the driver or device is missing. */
TWI_HIDDEN int twi_cuda_device_count(void);
TWI_HIDDEN tw_status twi_cuda_describe(hwloc_topology_t topo, int ordinal, twi_gpu *g,
                                       tw_error *err);
/* On the manager thread: make the device current, create the stream and the pool. */
TWI_HIDDEN tw_status twi_cuda_worker_start(tw_worker *w, tw_error *err);
TWI_HIDDEN void twi_cuda_worker_stop(tw_worker *w);
/* Run the CUDA variant of t on w: its uploads (or the ones staged while the previous task
 * ran), launch, downloads of W/RW tiles; meanwhile pop and stage the next task
 * (w->pf_task). Returns once t's downloads are done (runtime/worker_cuda.c). */
TWI_HIDDEN tw_status twi_cuda_run(tw_worker *w, tw_task_ctx *ctx);
/* Give back what staging took for w->pf_task (waits for its uploads); w->pf_task stays. */
TWI_HIDDEN void twi_cuda_unstage(tw_worker *w);
/* Does t fit on w's GPU: 1 its tiles fit in what the budget leaves beside the tasks in
 * flight, 0 not now, -1 never (its tiles exceed the whole budget). Under the scheduler lock;
 * lock-free. Always 1 without CUDA. */
TWI_HIDDEN int twi_gpu_fit(const tw_worker *w, const tw_task *t);
/* Pop the next task for a GPU manager while its current task runs (its variant in *variant,
 * 0 to drop it). NULL when nothing fits, when an idle worker could start each candidate now
 * (it would wait here), or when the runtime is stopping. Takes the scheduler lock
 * (runtime/sched.c). */
TWI_HIDDEN tw_task *twi_worker_prefetch(tw_worker *w, unsigned *variant);
TWI_HIDDEN void *twi_cuda_scratch(tw_task_ctx *ctx, size_t bytes);
TWI_HIDDEN tw_status twi_cuda_copy(tw_task_ctx *ctx, void *dst, const void *src, size_t bytes,
                                  bool to_host);

/* ---- traces (runtime/trace.c): Chrome trace-event JSON of every task and GPU transfer */
typedef struct twi_trace_ev {
    const char *name;       /* static: a task kind's name, "upload", "download" */
    int64_t t0, t1;         /* CLOCK_MONOTONIC ns */
} twi_trace_ev;

typedef struct twi_trace_lane {
    twi_trace_ev *ev;
    size_t n, cap;
    int64_t dropped;
} twi_trace_lane;

/* Lanes of a worker: its thread's tasks; on GPU managers also its streams: uploads, device
 * work, downloads (uploads of the next task overlap the downloads of the current one). */
enum {
    TWI_TRACE_TASKS = 0,
    TWI_TRACE_UPLOADS,
    TWI_TRACE_KERNELS,
    TWI_TRACE_DOWNLOADS,
    TWI_TRACE_LANES
};

TWI_HIDDEN int64_t twi_trace_now(void);
/* Create the trace's file, without a name yet, in the folder of `path` (TW_E_IO with a message
 * when it cannot be written there, or when `path` is not a regular file). */
TWI_HIDDEN tw_status twi_trace_open(tw_runtime *rt, const char *path, tw_error *err);
/* Append an event to a lane of w (w's own thread only). */
TWI_HIDDEN void twi_trace_add(tw_worker *w, int lane, const char *name, int64_t t0, int64_t t1);
/* After the workers stopped: write the JSON, give it its name at once, free the events. Once
 * only; later calls return what the first gave (TW_OK, or TW_E_IO with err filled). */
TWI_HIDDEN tw_status twi_trace_close(tw_runtime *rt, tw_error *err);
/* At destruction: close and remove what is left, free the events and names. */
TWI_HIDDEN void twi_trace_free(tw_runtime *rt);

/* ---- workers */
#define TWI_WORKER_KEEP 8 /* scratch blocks a worker keeps between tasks */

struct tw_worker {
    tw_runtime *rt;
    int index;
    tw_device_type type;
    int gpu;                /* CUDA ordinal, -1 for CPU workers */
    twi_gpu *g;             /* the GPU a manager drives, NULL for CPU workers */
    int team;               /* OpenMP threads a CPU variant may use */
    unsigned runs;          /* TW_DEVICE_* variants this worker executes */
    hwloc_bitmap_t cpuset;  /* assigned */
    char cpuset_str[256];
    char bound_str[256];
    pthread_t thread;
    bool thread_started;
    atomic_uint_fast64_t tasks_run;
    atomic_int_fast64_t busy_ns;        /* time in twi_task_execute running variants */
    atomic_uint_fast64_t bytes_up, bytes_down; /* GPU workers: host <-> device copies */
    atomic_uint_fast64_t tasks_retried; /* GPU workers: failed CUDA runs handed to a CPU variant */
    atomic_uint_fast64_t bytes_hit;     /* GPU workers: R tile bytes found resident */
    int64_t start_ns;                   /* twi_trace_now() when the worker was planned */

    /* startup handshake, under rt->lock */
    bool ready;
    tw_status start_status;
    tw_error start_err;

    /* idle waiting, under rt->lock */
    pthread_cond_t cond;
    bool cond_init;
    bool idle;

    /* GPU manager state, touched only by the manager thread after startup */
    void *stream;           /* cudaStream_t the variants use (compute) */
    void *up_stream, *down_stream; /* cudaStream_t of the uploads and downloads */
    twi_devpool *pool;
    void *gpipe;            /* worker_cuda.c's pipeline (two task slots and their events) */
    /* The next task, popped while the current one ran (holds a reference on it); staged:
     * its buffers are taken and its uploads enqueued. */
    tw_task *pf_task;
    unsigned pf_variant;
    bool pf_staged;
    bool prefetching;       /* under rt->lock: the pop of twi_worker_prefetch() is under way */

    twi_trace_lane trace[TWI_TRACE_LANES]; /* written by the worker's thread only */

    /* Lending cores (runtime/worker_cpu.c): idle CPU workers lent to this one while it runs a
     * task of a `team` kind, under rt->lock; the team of the task it runs. */
    tw_worker **lent;       /* n_workers slots */
    int n_lent;
    int team_now;           /* its own thread: w->team plus the lent workers' teams */
    bool running;           /* under rt->lock: running a task or admitting a unit */
    bool on_loan;           /* under rt->lock: lent to another worker; sleeps until returned */
    /* CPU scratch blocks kept between this worker's tasks (twi_cpu_scratch), its thread only */
    void *keep[TWI_WORKER_KEEP];
    size_t keep_bytes[TWI_WORKER_KEEP];
    int n_keep;
};

/* Per-thread OpenMP setup of any worker (team size), and execution of a CPU variant. */
TWI_HIDDEN void twi_cpu_worker_start(tw_worker *w);
/* At the end of w's thread: free the scratch blocks it kept. */
TWI_HIDDEN void twi_cpu_worker_stop(tw_worker *w);
/* A CPU variant's scratch of at least `bytes` (64-byte aligned) on w's thread: a block w kept
 * from an earlier task when one is large enough (its pages are mapped already: no page faults
 * on first touch), else a new one; *cap the block's size. NULL when out of memory. */
TWI_HIDDEN void *twi_cpu_scratch(tw_worker *w, size_t bytes, size_t *cap);
/* Under rt->lock, as CPU worker w starts task t with its CPU variant: when t's kind runs a
 * team and no other task is ready, lend it every CPU worker that runs nothing (idle, or woken
 * and not yet looking: they sleep until given back), and give them back, awake, after the run
 * (twi_cpu_return). */
TWI_HIDDEN void twi_cpu_borrow(tw_worker *w, const tw_task *t);
TWI_HIDDEN void twi_cpu_return(tw_worker *w);
TWI_HIDDEN tw_status twi_cpu_run(tw_worker *w, tw_task_ctx *ctx);

/* The variant w would run for t: TW_DEVICE_CPU, TW_DEVICE_CUDA, or 0 when it has none (or
 * can_run refuses). Under the scheduler lock. */
TWI_HIDDEN unsigned twi_worker_variant(const tw_worker *w, const tw_task *t);

/* The worker the calling thread is (NULL: not a worker thread). */
TWI_HIDDEN tw_worker *twi_worker_self(void);

/* runtime/worker.c: start rt->n_workers threads and wait until each is bound and its device
 * initialised (the first failure in *err); stop them and join them (once, later calls do
 * nothing). */
TWI_HIDDEN tw_status twi_workers_start(tw_runtime *rt, tw_error *err);
TWI_HIDDEN void twi_workers_stop(tw_runtime *rt);

#endif /* TW_RT_WORKER_H */
