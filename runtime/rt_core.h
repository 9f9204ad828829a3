/* SPDX-License-Identifier: MIT */
/* tilewave: the runtime object: what tw_runtime holds (workers, scheduler, models,
 * trace, faults, budget, windows) and the accessors that need its layout (runtime/runtime.c). */
#ifndef TW_RT_CORE_H
#define TW_RT_CORE_H

#include <pthread.h>
#include <stdio.h>

#include "rt_sched.h"
#include "rt_worker.h"

/* Only the sources of runtime/ include this header; nothing outside sees these layouts. */

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
    int caller_mode;         /* runtime.caller_memory: TWI_CALLER_* (copy under a budget) */
    bool register_caller;    /* runtime.caller_memory = register */
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

/* runtime.caller_memory */
enum { TWI_CALLER_AUTO, TWI_CALLER_WRAP, TWI_CALLER_REGISTER, TWI_CALLER_COPY };

/* The machine's memory in bytes, 0 when unknown (runtime/runtime.c). */
TWI_HIDDEN int64_t twi_phys_bytes(void);

/* Is t's host copy current? Always true unless downloads are lazy. */
static inline bool
twi_tile_host_current(const tw_tile *t)
{
    return !t->rt->lazy_down || atomic_load_explicit(&t->host_version, memory_order_acquire) ==
                                    atomic_load_explicit(&t->version, memory_order_relaxed);
}
/* The GPU index (in rt->gpus) of a GPU manager. */
static inline int
twi_gpu_index(const tw_worker *w)
{
    return (int)(w->g - w->rt->gpus);
}

#endif /* TW_RT_CORE_H */
