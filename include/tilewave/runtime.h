/* SPDX-License-Identifier: MIT */
/* tilewave: the runtime (workers pinned to cores and GPUs) and jobs. */
#ifndef TILEWAVE_RUNTIME_H
#define TILEWAVE_RUNTIME_H

#include <stdbool.h>

#include "tilewave/common.h"
#include "tilewave/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup tw_runtime Runtime and jobs
 *
 * A ::tw_runtime owns the worker threads: one CPU worker per core (or per group of
 * `runtime.cpu_team` cores running an OpenMP team confined to them) and one manager thread per
 * GPU, bound with hwloc near that GPU. Create one per process and share it: jobs submitted
 * from any thread run on the same workers. A host without GPUs is normal (CPU workers only).
 *
 * A ::tw_job is one operation on one image (e.g. tw_gray_submit()). It runs asynchronously;
 * wait for it, cancel it, read its progress. Its first error is sticky.
 * @{
 */

/** The runtime. Thread-safe except tw_runtime_destroy(). @since 0.1 */
typedef struct tw_runtime tw_runtime;

/** A submitted job. Thread-safe except tw_job_destroy(). @since 0.1 */
typedef struct tw_job tw_job;

/** Kind of device a worker drives; also used as bitmask. @since 0.1 */
typedef enum tw_device_type {
    TW_DEVICE_CPU = 1u << 0,
    TW_DEVICE_CUDA = 1u << 1
} tw_device_type;

/**
 * Start a runtime with the keys `runtime.*` of @p cfg (NULL: built-in defaults). Discovers cores
 * with hwloc and GPUs with the CUDA runtime, starts and pins the workers.
 * @return TW_OK, TW_E_INVALID (e.g. `runtime.gpus` names a GPU that does not exist),
 *         TW_E_NOMEM, TW_E_INTERNAL (hwloc topology failed).
 * Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_runtime_create(const tw_config *cfg, tw_runtime **out,
                                               tw_error *err);

/** Stop the workers and free the runtime. Every job must have been destroyed. NULL is a
 *  no-op. @since 0.1 */
TW_API void tw_runtime_destroy(tw_runtime *rt);

/** The configuration the runtime was created with (a copy it owns). @since 0.1 */
TW_API const tw_config *tw_runtime_get_config(const tw_runtime *rt);

/** Hardware seen by hwloc and CUDA. @since 0.1 */
typedef struct tw_topology_info {
    int n_packages;
    int n_numa_nodes;
    int n_cores;
    int n_pus;     /**< hardware threads */
    int n_gpus;    /**< CUDA devices used by this runtime */
    int n_gpus_present; /**< CUDA devices present, used or not */
} tw_topology_info;

/** Fill @p out. @return TW_OK, TW_E_INVALID. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_runtime_get_topology(const tw_runtime *rt,
                                                     tw_topology_info *out);

/** One GPU. @since 0.1 */
typedef struct tw_gpu_info {
    int ordinal;            /**< CUDA device ordinal */
    char name[128];
    char pci_bus_id[32];
    int cc_major, cc_minor; /**< compute capability */
    uint64_t total_mem;     /**< bytes */
    char near_cpuset[256];  /**< cores near the GPU, hwloc list syntax "0-7" */
} tw_gpu_info;

/** Describe GPU @p i of the runtime (0 <= i < n_gpus). @return TW_OK, TW_E_INVALID. */
TW_API TW_NODISCARD tw_status tw_runtime_get_gpu(const tw_runtime *rt, int i, tw_gpu_info *out);

/** One worker thread. @since 0.1 */
typedef struct tw_worker_info {
    int index;
    tw_device_type type;
    int gpu;                 /**< CUDA ordinal for a GPU worker, -1 for a CPU worker */
    int team;                /**< OpenMP threads the worker runs (1 for GPU workers) */
    char cpuset[256];        /**< the cores hwloc assigned, list syntax "2-3" */
    char bound_cpuset[256];  /**< the binding the thread reads back ("" if unsupported) */
    uint64_t tasks_run;      /**< tasks this worker has completed */
    double busy_s;           /**< seconds spent running tasks (@since 0.4) */
    double alive_s;          /**< seconds since the worker started; idle = alive - busy */
    uint64_t bytes_to_gpu;   /**< bytes copied host -> GPU (tiles and variants' copies) */
    uint64_t bytes_from_gpu; /**< bytes copied GPU -> host */
} tw_worker_info;

/** Number of workers. @since 0.1 */
TW_API int tw_runtime_get_worker_count(const tw_runtime *rt);

/** Describe worker @p i. @return TW_OK, TW_E_INVALID. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_runtime_get_worker(const tw_runtime *rt, int i,
                                                   tw_worker_info *out);

/**
 * Wait for a job to end. @p timeout_ms < 0 waits forever.
 * @return the job's final status (TW_OK, the sticky error, TW_E_CANCELED), or TW_E_TIMEOUT
 *         when the time ran out first (the job goes on). Thread-safe. @since 0.1
 */
TW_API tw_status tw_job_wait(tw_job *job, int64_t timeout_ms);

/** Ask the job to stop: pending tasks are dropped, running ones stop at their next check.
 *  Returns at once; tw_job_wait() then returns TW_E_CANCELED. Thread-safe. @since 0.1 */
TW_API void tw_job_cancel(tw_job *job);

/** The job's sticky error message, or NULL when it has none. Owned by the job. @since 0.1 */
TW_API const char *tw_job_get_error(tw_job *job);

/** Progress of a job. @since 0.1 */
typedef struct tw_progress {
    int64_t done;     /**< units finished (tiles for most ops) */
    int64_t total;    /**< units known so far; may grow while the job runs */
    double elapsed_s; /**< since submission */
    double eta_s;     /**< estimated seconds left, < 0 when unknown */
    bool finished;
} tw_progress;

/** Read the job's progress. Thread-safe. @since 0.1 */
TW_API void tw_job_get_progress(tw_job *job, tw_progress *out);

/**
 * Progress notifications, pushed instead of polled: @p fn is called from a runtime thread as
 * the job advances, at most once every @p interval_ms (0: at every step), and a last time with
 * p->finished set and p->done final, before tw_job_wait() returns. Calls do not overlap in
 * time with the last one, but two periodic calls from different workers may overlap and
 * arrive out of order. @p fn must be quick and must not wait on or destroy the job (cancel is
 * fine). A NULL @p fn removes the callback. Set it right after submitting: steps already made
 * are reported with the next one.
 * @return TW_OK, TW_E_INVALID (NULL job, negative interval). Thread-safe. @since 0.4
 */
typedef void (*tw_progress_fn)(tw_job *job, const tw_progress *p, void *user);
TW_API tw_status tw_job_set_progress_callback(tw_job *job, tw_progress_fn fn, void *user,
                                              int64_t interval_ms);

/** Destroy a job; an unfinished job is canceled and waited for first. NULL is a no-op. */
TW_API void tw_job_destroy(tw_job *job);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_RUNTIME_H */
