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

/* ---- scheduling policies (each a const ops table). Every callback runs under the runtime's
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
TWI_HIDDEN extern const tw_sched_policy twi_sched_locality;

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
 * kind on a device, per size bucket (floor(log2(units))) and content-feature bucket (the kind's
 * `feature` hook), the median of the last TWI_MODEL_SAMPLES runs; kept in the runtime.models
 * file across runs. Thread-safe. Devices are slots: a type and a name (CPU model, GPU name). */
#define TWI_MODEL_SAMPLES 32
#define TWI_MODEL_MIN_SAMPLES 3
typedef struct twi_models twi_models;

TWI_HIDDEN tw_status twi_models_create(twi_models **out);
TWI_HIDDEN void twi_models_destroy(twi_models *ms); /* NULL is a no-op */
/* The slot of a device (registered on first use); -1 when out of memory or a bad type. */
TWI_HIDDEN int twi_models_device(twi_models *ms, tw_device_type type, const char *name);
/* This machine's devices: the CPU and the runtime's GPUs (rt->gpus order). Without GPUs a
 * placeholder GPU slot (never saved) stands for "the GPU" of twi_models_local. */
TWI_HIDDEN tw_status twi_models_set_local(twi_models *ms, const char *cpu_name, int n_gpus,
                                          const char *const *gpu_names);
/* The slot of the local CPU (type CPU), or of the runtime's GPU `gpu` (index into rt->gpus;
 * -1 or out of range: the first GPU, or the placeholder); -1 when not set. */
TWI_HIDDEN int twi_models_local(const twi_models *ms, tw_device_type type, int gpu);
/* Buckets: floor(log2(units)) (units < 1 count as 1); a feature in [0, 1] (0 = unknown for
 * negative or NaN, 1 = exactly 0, then (0, 4^-8], ..., (1/4, 1] up to 10; above 1 is 10). */
TWI_HIDDEN int twi_model_size_bucket(int64_t units);
TWI_HIDDEN int twi_model_feature_bucket(double feature);
TWI_HIDDEN int64_t twi_task_units(const tw_task *t);
/* Add one observation of `seconds` for a task of `units` units and content `feature` (< 0:
 * none) on device slot dev (ignored when dev < 0, units < 1, or seconds is negative or NaN). */
TWI_HIDDEN void twi_model_record(twi_models *ms, const tw_task_kind *kind, int dev,
                                 int64_t units, double feature, double seconds);
/* Expected seconds for `units` units: the exact bucket's median when it has 3 samples, else
 * the nearest size bucket's (any feature) scaled per unit; -1 when unknown. */
TWI_HIDDEN double twi_model_estimate(twi_models *ms, const tw_task_kind *kind, int dev,
                                     int64_t units, double feature);
/* Expected time on slot cpu_dev over time on slot gpu_dev for a task of size bucket sb and
 * feature bucket fb (with the fallback of twi_model_estimate); NAN while either is unknown. */
TWI_HIDDEN double twi_model_speedup(twi_models *ms, const tw_task_kind *kind, int cpu_dev,
                                    int gpu_dev, int sb, int fb);
/* A task's buckets, computed once (the feature hook is called here): when it becomes ready
 * (policies, under the scheduler lock) or before it runs. Then twi_model_key_size/_feature. */
TWI_HIDDEN void twi_model_task_key(tw_task *t);
TWI_HIDDEN int twi_model_key_size(const tw_task *t);
TWI_HIDDEN int twi_model_key_feature(const tw_task *t);
/* Record that t ran `variant` on w in `seconds` (w->rt->models must not be NULL). */
TWI_HIDDEN void twi_model_task_ran(tw_worker *w, tw_task *t, unsigned variant, double seconds);
/* At runtime creation: rt->models when the policy uses models or runtime.models names a file
 * (read now; a missing or bad file is a warning at most); else rt->models stays NULL. */
TWI_HIDDEN tw_status twi_models_open(tw_runtime *rt, tw_error *err);
/* At destruction, after the workers stopped: merge the new samples into the file, free. */
TWI_HIDDEN void twi_models_close(tw_runtime *rt);

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
typedef struct twi_devpool twi_devpool;

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
 * (runtime/runtime.c). */
TWI_HIDDEN tw_task *twi_worker_prefetch(tw_worker *w, unsigned *variant);
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
/* The device pool also keeps the tiles' replicas on its GPU (see the tile section) and never
 * holds more than `budget` bytes, in use and cached together: an allocation that would go
 * beyond first frees idle blocks and evicts idle replicas (least recently used first), then
 * fails. */
TWI_HIDDEN tw_status twi_devpool_create(int ordinal, size_t budget, twi_devpool **out);
TWI_HIDDEN void twi_devpool_destroy(twi_devpool *p);
/* The same allocator over pinned host memory (cudaHostAlloc, portable), keeping at most
 * `cache_cap` bytes idle (runtime.pinned_cache); one per runtime with GPUs, for host tiles.
 * No budget, no replicas. */
TWI_HIDDEN tw_status twi_hostpool_create(int ordinal, size_t cache_cap, twi_devpool **out);
TWI_HIDDEN void *twi_devpool_alloc(twi_devpool *p, size_t bytes); /* NULL: out of memory */
TWI_HIDDEN void twi_devpool_free(twi_devpool *p, void *d_ptr, size_t bytes);
/* The block size the pool hands out for a request of `bytes` (its size class). */
TWI_HIDDEN size_t twi_devpool_class_bytes(size_t bytes);
/* Instrumentation, lock-free: the most bytes the pool ever held (in use + cached), the bytes
 * in use that cannot be evicted (pinned replicas, task buffers, scratch), replicas evicted. */
TWI_HIDDEN size_t twi_devpool_high_water(const twi_devpool *p);
TWI_HIDDEN size_t twi_devpool_hard_bytes(const twi_devpool *p);
TWI_HIDDEN uint64_t twi_devpool_evictions(const twi_devpool *p);
/* Pin tile's replica on the pool's GPU (index gi), allocating its block when it has none
 * (NULL: no room under the budget, or out of memory). *current: the block holds the tile's
 * current version (no upload needed). The pool's own thread only. */
TWI_HIDDEN void *twi_replica_pin(twi_devpool *p, tw_tile *tile, int gi, bool *current);
/* Unpin; `version` is what the block holds now (0: nothing worth keeping). An unpinned
 * replica holding the tile's current version stays cached (LRU); any other goes back. */
TWI_HIDDEN void twi_replica_unpin(twi_devpool *p, tw_tile *tile, int gi, uint64_t version);
/* Free tile's replica on that pool (the tile is being freed; any thread). */
TWI_HIDDEN void twi_replica_drop(twi_devpool *p, tw_tile *tile, int gi);
/* Bytes an evicted replica writes back to the host (lazy downloads) are added to *counter
 * (the manager's bytes_down). */
TWI_HIDDEN void twi_devpool_count_downloads(twi_devpool *p, atomic_uint_fast64_t *counter);

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
};

/* Per-thread OpenMP setup of any worker (team size), and execution of a CPU variant. */
TWI_HIDDEN void twi_cpu_worker_start(tw_worker *w);
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

/* ---- host memory budget (runtime/budget.c): runtime.host_mem, docs/runtime.md "Memory
 * budgets". Without a budget rt->budget is NULL and only host_live / host_peak are kept. */
typedef struct twi_budget twi_budget;

/* A tile's residency under a budget (under the budget's lock; pins is also read lock-free by
 * assertions). */
typedef struct twi_tile_mem {
    atomic_int pins;        /* running tasks using it + twi_tile_pin() holders */
    uint8_t io;             /* a spill or a reload of it is under way (budget.c) */
    bool filled;            /* its pixels are worth keeping (a writer ran or pinned it) */
    bool in_lru;            /* resident and idle: may be spilled */
    int64_t off;            /* its current copy in the scratch file, -1 when none */
    tw_tile *lru_prev, *lru_next;
} twi_tile_mem;

/* A task's share of the budget: set at dispatch under the scheduler lock, then used by the
 * worker that runs it. */
typedef struct twi_task_mem {
    bool dispatched;        /* twi_budget_dispatch() ran; twi_budget_task_end() undoes it */
    bool escape;            /* its working set exceeds what spilling can free: runs alone */
    unsigned pinned;        /* bit i: tiles[i] pinned for it */
    int worker;             /* index of the worker it was dispatched to */
    int64_t need;           /* bytes reserved at dispatch */
    int64_t reserved;       /* of which not yet allocated */
    int64_t taken;          /* taken from the reservation by pins in its variant */
    int64_t frees;          /* bytes expected to be freed when it ends */
    int64_t promise;        /* a load's host_bytes, kept for its consumers when it ends */
} twi_task_mem;

/* At creation (after plan_workers: it needs the worker count) and destruction. */
TWI_HIDDEN tw_status twi_budget_create(tw_runtime *rt, tw_error *err);
TWI_HIDDEN void twi_budget_destroy(tw_runtime *rt);
/* Count host tile bytes allocated (> 0) or freed (< 0) without a budget. */
TWI_HIDDEN void twi_mem_count(tw_runtime *rt, int64_t delta);
/* A tile with a budget is freed: its pixels and its scratch copy (tile.c). */
TWI_HIDDEN void twi_budget_tile_free(tw_tile *t);
/* Under the scheduler lock (rt->budget set): may t be dispatched to w now? */
TWI_HIDDEN bool twi_budget_fits(const tw_worker *w, const tw_task *t);
/* Under the scheduler lock, right after the pop that took t for w (rt->budget set): reserve
 * its need and pin its resident tiles. */
TWI_HIDDEN void twi_budget_dispatch(tw_worker *w, tw_task *t);
/* Under the scheduler lock, when a pop found nothing (rt->budget set): with `on`, true when
 * nothing runs and a task waits for memory; then the caller pops again and every task fits
 * (the oldest runs, spilling what it must, alone over the budget when even that is not
 * enough), and calls it again with `on` false. */
TWI_HIDDEN bool twi_budget_stall(tw_runtime *rt, bool on);
/* Under the scheduler lock: nothing runs and a task was refused for memory. */
TWI_HIDDEN bool twi_budget_stalled(tw_runtime *rt);
/* On the worker, before the variant of a dispatched task: pin (allocate, read back) the rest
 * of its tiles. On failure `msg` gets the message; twi_budget_task_end() must follow either
 * way. A no-op for tasks not dispatched with a budget. */
TWI_HIDDEN tw_status twi_budget_task_begin(tw_task *t, char *msg, size_t n);
/* After the variant (and its commit), or instead of it: unpin, give back the reservation,
 * wake idle workers when a task waits for memory. Before the task is completed or requeued. */
TWI_HIDDEN void twi_budget_task_end(tw_task *t);
/* Wake every idle worker (memory was freed). Takes the scheduler lock, unless this thread holds
 * it: then the wake-up happens when it releases it (runtime/runtime.c). */
TWI_HIDDEN void twi_sched_wake_idle(tw_runtime *rt);

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
    int64_t n_ready;        /* tasks in the policy's queues */
    atomic_bool wake_pending; /* memory was freed under the lock: wake the idle workers
                                 before releasing it */
    bool lazy_down;          /* runtime.gpu_downloads = lazy, with GPUs and no host budget */
    pthread_mutex_t sync_lock[16]; /* twi_tile_sync_host: one copy per tile at a time */

    /* runtime.trace: where the trace goes (NULL: no trace) */
    FILE *trace_file;       /* nameless (O_TMPFILE) or trace_part, open from creation to
                             * the end */
    char *trace_path;       /* where the trace goes (symbolic links followed) */
    char *trace_part;       /* its temporary name: NULL while the file is nameless */
    bool trace_done;        /* written (or failed) by twi_trace_close: nothing more to do */
    bool finished;          /* the workers are stopped and joined */
    bool trace_reported;    /* tw_runtime_finish returned the trace's status to the caller */
    tw_status trace_status; /* what that gave, for tw_runtime_finish */
    char trace_error[TW_ERROR_MAX];
    int64_t trace_t0;
    bool started;           /* creation succeeded (a failed one leaves no trace file) */

    /* faults (runtime/task.c): runtime.fault_inject, and the first retry's log line */
    int64_t fault_every;    /* fail every Nth CUDA attempt (0: no injection) */
    char fault_kind[TWI_FAULT_KIND_MAX]; /* only attempts of this kind count ("" = any) */
    atomic_int_fast64_t fault_attempts; /* CUDA attempts counted for injection */
    atomic_bool fault_logged;

    /* host memory (runtime/budget.c): tile pixel bytes allocated now and at most; the budget
     * (NULL: runtime.host_mem = 0, unlimited) */
    atomic_int_fast64_t host_live, host_peak;
    twi_budget *budget;

    /* streaming windows with units left to admit (runtime/window.c), under rt->lock */
    twi_window *windows;
};

/* ---- the streaming window (runtime/window.c) */
typedef struct twi_window_claim {
    twi_window *w;          /* NULL: nothing to do */
    int64_t unit;           /* the unit to admit, -1 none (the window closed) */
    bool unhold;            /* the window closed: release its hold on the job */
} twi_window_claim;

/* Under the scheduler lock, for worker wk about to go idle: claim the next unit of an open
 * window with room, or close a window whose job stopped. false: nothing. */
TWI_HIDDEN bool twi_window_take(tw_runtime *rt, const tw_worker *wk, twi_window_claim *c);
/* Outside every lock: admit the claimed unit (a failure fails the job), then release the
 * job's hold if the claim closed the window (which may end the job on this thread). */
TWI_HIDDEN void twi_window_admit(twi_window_claim *c);
/* A new task of job: the window unit whose admission is making it, if any (t->win). */
TWI_HIDDEN void twi_window_tag(tw_task *t);
/* Task t (t->win set) starts: the first of its unit makes the unit no longer waiting. */
TWI_HIDDEN void twi_window_task_starts(tw_task *t);
/* The job is being freed: its windows too (all closed by then). */
TWI_HIDDEN void twi_window_free_all(tw_job *job);

/* The machine's memory in bytes, 0 when unknown (runtime/runtime.c). */
TWI_HIDDEN int64_t twi_phys_bytes(void);

/* The scheduler lock (runtime/runtime.c), for the files of runtime/ that share its state. */
TWI_HIDDEN void twi_sched_lock(tw_runtime *rt);
TWI_HIDDEN void twi_sched_unlock(tw_runtime *rt);
/* Under the scheduler lock: wake every idle worker, or the most recently idle one. */
TWI_HIDDEN void twi_sched_wake_all_locked(tw_runtime *rt);
TWI_HIDDEN void twi_sched_wake_one_locked(tw_runtime *rt);

/* Read runtime.fault_inject into rt (tw_runtime_create). */
TWI_HIDDEN tw_status twi_fault_setup(tw_runtime *rt, tw_error *err);

/* The worker the calling thread is (NULL: not a worker thread). */
TWI_HIDDEN tw_worker *twi_worker_self(void);

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
    unsigned variants;      /* TW_DEVICE_* variants the kind has (mask and function present);
                             * CUDA cleared when a failed CUDA run is retried on a CPU worker */
    bool cpu_retry;         /* that retry: the kind's can_run() is not asked for the CPU */
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
    int16_t model_key;      /* cost-model buckets, -1 until twi_model_task_key() (model.c) */
    twi_window *win;        /* made by the admission of unit win_unit of that window, or NULL */
    int64_t win_unit;
    twi_task_mem mem;       /* host budget (runtime/budget.c) */
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
    bool no_retry;          /* twi_ctx_no_retry was called: a failure is not retried */
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
/* A tile's copy on one GPU (runtime/mem_cuda.c). `version` is read anywhere (the locality
 * policy, fit checks) and written under the GPU pool's lock; the rest is under that lock. */
typedef struct twi_replica {
    atomic_uint_fast64_t version; /* the tile version its block holds; 0 = nothing valid */
    void *d_ptr;            /* device block of tile->dev_bytes, NULL = none */
    int pins;               /* GPU tasks using it (running or staged); 0: in the pool's LRU */
    struct twi_replica *lru_prev, *lru_next;
    tw_tile *tile;
} twi_replica;

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
    twi_tile_mem mem;       /* host budget (runtime/budget.c); h_data is NULL while spilled */
    /* Bumped when the pixels change: a task that writes the tile starts (W/RW), or
     * twi_tile_host_written(). Starts at 1; a replica is current when it holds this. */
    atomic_uint_fast64_t version;
    /* The version h_data holds (rt->lazy_down only; see runtime/tile.c): the host copy is
     * current when it equals `version`, else the current pixels are in a GPU replica. */
    atomic_uint_fast64_t host_version;
    size_t dev_bytes;       /* its block on a GPU: the pool's size class of `bytes` */
    int n_rep;              /* rt->n_gpus when it was made */
    twi_replica rep[];      /* one per GPU of the runtime, in rt->gpus order */
};

/* Bytes of t's R/RW tiles resident and current on the runtime's GPU `gi`; lock-free. */
TWI_HIDDEN int64_t twi_task_resident_bytes(const tw_task *t, int gi);
/* A task that writes tiles is starting: bump their versions (invalidates every replica). */
TWI_HIDDEN void twi_task_bump_written(const tw_task *t);
/* A CPU variant of t is starting: bring its tiles' current pixels to the host, then bump the
 * versions of those it writes (whose host copies then stay current). TW_OK, or TW_E_DEVICE
 * with a message in msg. */
TWI_HIDDEN tw_status twi_task_host_begin(const tw_task *t, char *msg, size_t n);
/* Is t's host copy current? Always true unless downloads are lazy. */
static inline bool
twi_tile_host_current(const tw_tile *t)
{
    return !t->rt->lazy_down || atomic_load_explicit(&t->host_version, memory_order_acquire) ==
                                    atomic_load_explicit(&t->version, memory_order_relaxed);
}
/* Lazy downloads: when t's current pixels are only in a GPU replica, copy them to h_data
 * (synchronously, on the calling thread, any device) and mark the host copy current. No-op
 * when the host copy is current. Thread-safe; callers follow the task graph (no task writes t
 * meanwhile). TW_OK, or TW_E_DEVICE with a message in msg (may be NULL when n is 0)
 * (runtime/mem_cuda.c). */
TWI_HIDDEN tw_status twi_tile_sync_host(tw_tile *t, char *msg, size_t n);
/* The host copy of t holds its current version (written there, or kept as the input of a
 * failed GPU task that the CPU retries). */
static inline void
twi_tile_host_set_current(tw_tile *t)
{
    atomic_store_explicit(&t->host_version,
                          atomic_load_explicit(&t->version, memory_order_relaxed),
                          memory_order_release);
}
/* The GPU index (in rt->gpus) of a GPU manager. */
static inline int
twi_gpu_index(const tw_worker *w)
{
    return (int)(w->g - w->rt->gpus);
}

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
    bool final_taken;        /* job_end read the callback for its last call (guarded by lock) */
    atomic_int_fast64_t progress_interval_ns, progress_last_ns;

    twi_window *windows;     /* its streaming windows, freed with it (under rt->lock) */
    atomic_bool streaming;   /* it opened a window: a stop wakes the idle workers */
    twi_io_counts io;        /* tw_job_get_io */
};

TWI_HIDDEN void twi_job_acquire(tw_job *job);
TWI_HIDDEN void twi_job_release(tw_job *job);
/* Count a submitted task; TW_E_INVALID when the job has already ended. */
TWI_HIDDEN tw_status twi_job_task_begin(tw_job *job);
/* A submitted task completed (ran or was dropped); may end the job. No lock held. */
TWI_HIDDEN void twi_job_task_end(tw_job *job);

#endif /* TW_RUNTIME_INTERNAL_H */
