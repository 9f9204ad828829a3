/* SPDX-License-Identifier: MIT */
/* tilewave: runtime tasks and scheduling: scheduling policies and their FIFOs, cost
 * models, the task layout, the streaming window, the scheduler lock (runtime/task.c,
 * sched_*.c, model.c, window.c, sched.c). */
#ifndef TW_RT_SCHED_H
#define TW_RT_SCHED_H

#include "rt_mem.h"

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


/* The scheduler lock (runtime/sched.c), for the files of runtime/ that share its state. */
TWI_HIDDEN void twi_sched_lock(tw_runtime *rt);
TWI_HIDDEN void twi_sched_unlock(tw_runtime *rt);
/* Under the scheduler lock: wake every idle worker, or the most recently idle one. */
TWI_HIDDEN void twi_sched_wake_all_locked(tw_runtime *rt);
TWI_HIDDEN void twi_sched_wake_one_locked(tw_runtime *rt);

/* Read runtime.fault_inject into rt (tw_runtime_create). */
TWI_HIDDEN tw_status twi_fault_setup(tw_runtime *rt, tw_error *err);


/* Hand ready tasks (linked through t->next) to the policy and wake idle workers able to run
 * them. Takes the scheduler lock. */
TWI_HIDDEN void twi_sched_push_list(tw_runtime *rt, tw_task *head);

/* Wake every idle worker (memory was freed). Takes the scheduler lock, unless this thread holds
 * it: then the wake-up happens when it releases it (runtime/sched.c). */
TWI_HIDDEN void twi_sched_wake_idle(tw_runtime *rt);
/* Under the scheduler lock, for worker w (runtime/worker.c): the policy's pop (under a host
 * budget, when nothing runs and tasks wait for memory, the oldest goes anyway), and the variant
 * to run a popped task with (0: drop it, its job is stopping), its host memory reserved. */
TWI_HIDDEN tw_task *twi_sched_pop_locked(tw_worker *w);
TWI_HIDDEN unsigned twi_sched_dispatch_locked(tw_worker *w, tw_task *t);

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

#endif /* TW_RT_SCHED_H */
