/* SPDX-License-Identifier: MIT */
/* tilewave: private structures of runtime/ (workers, scheduler, tasks, jobs, tiles, pools). */
#ifndef TW_RUNTIME_INTERNAL_H
#define TW_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>

#include <hwloc.h>

#include "tw_internal.h"

/* Only the sources of runtime/ include this header; nothing outside sees these layouts. */

typedef struct tw_worker tw_worker;
typedef struct tw_sched tw_sched;

/* ---- scheduling policies (house style rule 5). Every callback runs under the runtime's
 * scheduler lock, single-threaded; none may block. */
typedef struct tw_sched_policy {
    const char *name;                          /* "fcfs"; selected by runtime.policy */
    tw_status (*init)(tw_sched *s);            /* allocate s->data */
    void (*fini)(tw_sched *s);                 /* free s->data (the queue is empty by then) */
    void (*push)(tw_sched *s, tw_task *t);     /* t is ready: all its dependencies completed */
    tw_task *(*pop)(tw_sched *s, const tw_worker *w); /* NULL = nothing this worker can run */
    bool uses_models;                          /* the runtime records run times (model.c) */
} tw_sched_policy;

struct tw_sched {
    const tw_sched_policy *policy;
    tw_runtime *rt;
    void *data; /* the policy's state */
};

TWI_HIDDEN extern const tw_sched_policy twi_sched_fcfs;
TWI_HIDDEN extern const tw_sched_policy twi_sched_fair;
TWI_HIDDEN extern const tw_sched_policy twi_sched_pats;

/* The FIFOs both policies keep, indexed by a task's variant mask (1 = CPU only, 2 = CUDA
 * only, 3 = both), tasks linked through t->next and stamped with t->seq at push. */
#define TWI_SCHED_CLASSES 4
typedef struct twi_fifo {
    tw_task *head, *tail;
} twi_fifo;

TWI_HIDDEN void twi_fifo_put(twi_fifo *q, tw_task *t);
/* Unlink and return the oldest (smallest seq) task of q[1..3] that w can run, or any task of
 * a stopping job (dropped by the worker); NULL when there is none. (runtime/sched_fcfs.c) */
TWI_HIDDEN tw_task *twi_fifo_take_oldest(twi_fifo q[TWI_SCHED_CLASSES], const tw_worker *w);
/* Unlink t, which follows prev (NULL: t is the head) in q. */
TWI_HIDDEN void twi_fifo_unlink(twi_fifo *q, tw_task *prev, tw_task *t);

/* ---- cost models (runtime/model.c): seconds per unit (pixel of the task's tiles) of a task
 * kind on a device type, the median of the last runs. Thread-safe. */
typedef struct twi_models twi_models;

TWI_HIDDEN tw_status twi_models_create(twi_models **out);
TWI_HIDDEN void twi_models_destroy(twi_models *ms); /* NULL is a no-op */
TWI_HIDDEN int64_t twi_task_units(const tw_task *t);
/* Add one observation (ignored when units < 1 or seconds is negative or NaN). */
TWI_HIDDEN void twi_model_record(twi_models *ms, const tw_task_kind *kind, unsigned dev,
                                 int64_t units, double seconds);
/* Expected seconds for `units` units, or -1 while the model has fewer than 3 samples. */
TWI_HIDDEN double twi_model_estimate(twi_models *ms, const tw_task_kind *kind, unsigned dev,
                                     int64_t units);
/* A kind's expected CPU time over its GPU time (the same for any units), NAN while either
 * model is unknown. */
TWI_HIDDEN double twi_model_speedup(twi_models *ms, const tw_task_kind *kind);

/* ---- topology (runtime/topology.c) */
typedef struct twi_topo {
    hwloc_topology_t topo;
    int n_packages, n_numa_nodes, n_cores, n_pus;
    int n_units;          /* schedulable units: cores, or PUs when hwloc sees no cores */
    hwloc_bitmap_t *unit; /* n_units cpusets, in hwloc's logical order */
} twi_topo;

TWI_HIDDEN tw_status twi_topo_load(twi_topo *tp, tw_error *err);
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
typedef struct twi_devpool twi_devpool;

typedef struct twi_gpu {
    int ordinal;            /* CUDA device ordinal */
    tw_gpu_info info;
    hwloc_bitmap_t near;    /* cores near the device (may be empty when unknown) */
} twi_gpu;

/* CUDA devices present; 0 (and an INFO log) when the driver or device is missing. */
TWI_HIDDEN int twi_cuda_device_count(void);
TWI_HIDDEN tw_status twi_cuda_describe(hwloc_topology_t topo, int ordinal, twi_gpu *g,
                                       tw_error *err);
/* On the manager thread: make the device current, create the stream and the pool. */
TWI_HIDDEN tw_status twi_cuda_worker_start(tw_worker *w, tw_error *err);
TWI_HIDDEN void twi_cuda_worker_stop(tw_worker *w);
/* Run the CUDA variant of t on w (transfers, launch, synchronise, write back). */
TWI_HIDDEN tw_status twi_cuda_run(tw_worker *w, tw_task_ctx *ctx);
TWI_HIDDEN void *twi_cuda_scratch(tw_task_ctx *ctx, size_t bytes);
TWI_HIDDEN tw_status twi_cuda_copy(tw_task_ctx *ctx, void *dst, const void *src, size_t bytes,
                                  bool to_host);

/* ---- memory (runtime/mem_cuda.c: the only file that calls cudaMalloc/cudaFree/cudaHostAlloc) */
/* Host tile memory, 64-byte aligned: pinned from `pinned_pool` when it is not NULL (falls back
 * to plain memory when pinning fails), plain otherwise. *pinned_out says which. */
TWI_HIDDEN void *twi_host_alloc(twi_devpool *pinned_pool, size_t bytes, bool *pinned_out);
TWI_HIDDEN void twi_host_free(twi_devpool *pinned_pool, void *p, size_t bytes, bool pinned);
/* A caching device allocator for one GPU: free lists by size class, cudaMalloc on a miss,
 * everything cudaFree'd at destroy. Thread-safe. Create and destroy with the device current. */
TWI_HIDDEN tw_status twi_devpool_create(int ordinal, twi_devpool **out);
TWI_HIDDEN void twi_devpool_destroy(twi_devpool *p);
/* The same allocator over pinned host memory (cudaHostAlloc, portable), keeping at most
 * 1 GiB idle; one per runtime with GPUs, for host tiles. */
TWI_HIDDEN tw_status twi_hostpool_create(int ordinal, twi_devpool **out);
TWI_HIDDEN void *twi_devpool_alloc(twi_devpool *p, size_t bytes); /* NULL: out of memory */
TWI_HIDDEN void twi_devpool_free(twi_devpool *p, void *d_ptr, size_t bytes);

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

/* Lanes of a worker: its thread's tasks; on GPU managers also the stream's copies and its
 * device work. */
enum { TWI_TRACE_TASKS = 0, TWI_TRACE_COPIES, TWI_TRACE_KERNELS, TWI_TRACE_LANES };
/* Events a traced GPU task records: before its uploads, before and after its work, after its
 * downloads. */
#define TWI_TRACE_EVENTS 4

TWI_HIDDEN int64_t twi_trace_now(void);
/* Open `path`.part for the trace (TW_E_IO with a message when it cannot be written). */
TWI_HIDDEN tw_status twi_trace_open(tw_runtime *rt, const char *path, tw_error *err);
/* Append an event to a lane of w (w's own thread only). */
TWI_HIDDEN void twi_trace_add(tw_worker *w, int lane, const char *name, int64_t t0, int64_t t1);
/* After the workers stopped: write the JSON, rename it into place, free the events. */
TWI_HIDDEN void twi_trace_close(tw_runtime *rt);

/* ---- workers */
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
    void *stream;           /* cudaStream_t */
    twi_devpool *pool;
    void *trace_ev[TWI_TRACE_EVENTS]; /* cudaEvent_t around a task's copies and work (tracing) */

    twi_trace_lane trace[TWI_TRACE_LANES]; /* written by the worker's thread only */
};

/* Per-thread OpenMP setup of any worker (team size), and execution of a CPU variant. */
TWI_HIDDEN void twi_cpu_worker_start(tw_worker *w);
TWI_HIDDEN tw_status twi_cpu_run(tw_worker *w, tw_task_ctx *ctx);

/* The variant w would run for t: TW_DEVICE_CPU, TW_DEVICE_CUDA, or 0 when it has none (or
 * can_run refuses). Under the scheduler lock. */
TWI_HIDDEN unsigned twi_worker_variant(const tw_worker *w, const tw_task *t);

/* ---- the runtime */
struct tw_runtime {
    tw_config *cfg;
    twi_topo topo;
    int n_gpus_present;
    int n_gpus;
    twi_gpu *gpus;
    int n_workers, n_cpu_workers;
    tw_worker *workers;
    unsigned runs;          /* union of the workers' `runs` masks */
    twi_devpool *host_pool; /* pinned host tiles when the runtime has GPUs, else NULL */

    pthread_mutex_t lock;   /* the scheduler lock: queue, idle list, startup, stop */
    pthread_cond_t ctl;     /* startup handshake */
    bool lock_init;
    bool stopping;
    tw_sched sched;
    bool sched_init;
    twi_models *models;     /* when the policy uses them, else NULL */
    tw_worker **idle;       /* idle workers, most recent last */
    int n_idle;

    /* runtime.trace: where the trace goes (NULL: no trace) */
    FILE *trace_file;       /* path.part, open from creation to destruction */
    char *trace_path, *trace_part;
    int64_t trace_t0;
    bool started;           /* creation succeeded (a failed one leaves no trace file) */
};

/* Hand ready tasks (linked through t->next) to the policy and wake idle workers able to run
 * them. Takes the scheduler lock. */
TWI_HIDDEN void twi_sched_push_list(tw_runtime *rt, tw_task *head);

/* ---- tasks */
typedef struct twi_edge {
    struct twi_edge *next;
    tw_task *task;          /* the dependent; the edge holds a reference on it */
    bool heap;              /* malloc'd (else one of task->inline_edges) */
} twi_edge;

#define TWI_TASK_INLINE_EDGES 4
#define TWI_CTX_MAX_SCRATCH 8

struct tw_task {
    atomic_int refs;
    atomic_int state;       /* TWI_TASK_CREATED, TWI_TASK_SUBMITTED */
    atomic_int deps_left;   /* unfinished dependencies, +1 until submitted */
    _Atomic(twi_edge *) dependents; /* lock-free stack; task.c's CLOSED marker once done */
    const tw_task_kind *kind;
    unsigned variants;      /* TW_DEVICE_* variants the kind has (mask and function present) */
    void *arg;
    void (*arg_free)(void *);
    tw_job *job;
    int n_tiles;
    tw_tile *tiles[TW_TASK_MAX_TILES];
    tw_access modes[TW_TASK_MAX_TILES];
    int n_inline_edges;     /* inline edges handed out (stored in the dependencies' lists) */
    twi_edge inline_edges[TWI_TASK_INLINE_EDGES];
    /* scheduler fields, under the scheduler lock */
    tw_task *next;
    uint64_t seq;           /* push order */
};

enum { TWI_TASK_CREATED = 0, TWI_TASK_SUBMITTED = 1 };

/* What a running variant sees; lives on the worker's stack for one task. */
struct tw_task_ctx {
    tw_task *task;
    tw_worker *w;
    tw_device_type dev;
    tw_tile_view views[TW_TASK_MAX_TILES];
    tw_status fail_status;
    bool failed;            /* twi_ctx_fail was called: `msg` holds the first message */
    char msg[TW_ERROR_MAX];
    int n_scratch;
    void *scratch[TWI_CTX_MAX_SCRATCH];
    size_t scratch_bytes[TWI_CTX_MAX_SCRATCH];
};

/* Run the `variant` (TW_DEVICE_*) of t on w, or drop t when variant is 0 or its job is
 * stopping, then complete it and release the scheduler's reference. On the worker thread,
 * without any lock. */
TWI_HIDDEN void twi_task_execute(tw_worker *w, tw_task *t, unsigned variant);

/* ---- tiles */
struct tw_tile {
    atomic_int refs;
    tw_runtime *rt;
    void *h_data;           /* host pixels, 64-byte aligned, rows packed */
    bool pinned;            /* h_data came from cudaHostAlloc */
    int64_t stride;         /* bytes between rows = w * channels * sample size */
    size_t bytes;           /* stride * h */
    int32_t w, h, channels;
    tw_sample_type type;
    int64_t x0, y0;
};

/* ---- jobs (runtime/job.c) */
struct tw_job {
    tw_runtime *rt;
    char *name;
    atomic_int refs;        /* the creator's + one per task */
    /* Submitted tasks not yet completed, + 1 until sealed: the job ends when it reaches 0. */
    atomic_int_fast64_t outstanding;
    atomic_bool sealed;
    atomic_bool stopping;   /* canceled or failed */
    atomic_int_fast64_t total, done;
    struct timespec t0;

    pthread_mutex_t lock;   /* guards everything below */
    pthread_cond_t cond;    /* signalled when finished */
    tw_status stop_status;  /* TW_OK, TW_E_CANCELED or the first error */
    bool has_message;
    char message[TW_ERROR_MAX];
    bool finished;
    double end_s;           /* elapsed seconds at the end */
    twi_job_finish_fn finish;
    void *finish_user;
    void (*finish_user_free)(void *);

    /* tw_job_set_progress_callback: fn and user under `lock`; the rest lock-free */
    tw_progress_fn progress_fn;
    void *progress_user;
    atomic_bool has_progress;
    atomic_int_fast64_t progress_interval_ns, progress_last_ns;
};

TWI_HIDDEN void twi_job_acquire(tw_job *job);
TWI_HIDDEN void twi_job_release(tw_job *job);
/* Count a submitted task; TW_E_INVALID when the job has already ended. */
TWI_HIDDEN tw_status twi_job_task_begin(tw_job *job);
/* A submitted task completed (ran or was dropped); may end the job. No lock held. */
TWI_HIDDEN void twi_job_task_end(tw_job *job);

#endif /* TW_RUNTIME_INTERNAL_H */
