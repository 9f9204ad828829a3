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
 * with hwloc and GPUs with the CUDA runtime, starts and pins the workers. @p cfg is copied:
 * it may be changed or destroyed afterwards. The caller owns *@p out and frees it with
 * tw_runtime_destroy().
 * @return TW_OK, TW_E_INVALID (@p out NULL; e.g. `runtime.gpus` names a GPU that does not
 *         exist), TW_E_NOMEM, TW_E_INTERNAL (hwloc topology failed).
 * Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_runtime_create(const tw_config *cfg, tw_runtime **out,
                                               tw_error *err);

/**
 * Stop the workers and write what the runtime writes at its end: the trace of `runtime.trace`,
 * given its name only once complete. Every job must have been destroyed and no other call on
 * @p rt may be running; afterwards only tw_runtime_destroy() may be called. Without this call
 * tw_runtime_destroy() does the same and can only log a failure.
 * @return TW_OK, TW_E_IO (the trace could not be written; @p err names it), TW_E_INVALID.
 * @since 0.7
 */
TW_API TW_NODISCARD tw_status tw_runtime_finish(tw_runtime *rt, tw_error *err);

/** Stop the workers and free the runtime. Every job must have been destroyed and no other
 *  call on @p rt may be running. NULL is a no-op. @since 0.1 */
TW_API void tw_runtime_destroy(tw_runtime *rt);

/** The configuration the runtime was created with (a copy it owns, valid until
 *  tw_runtime_destroy(); not to be changed); NULL for a NULL runtime. Thread-safe. @since 0.1 */
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

/** Fill @p out. @return TW_OK, TW_E_INVALID (NULL argument). Thread-safe. @since 0.1 */
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

/** Describe GPU @p i of the runtime (0 <= i < n_gpus). @return TW_OK, TW_E_INVALID (NULL
 *  argument, @p i out of range, e.g. any @p i without GPUs). Thread-safe. @since 0.1 */
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
    /** GPU workers: tasks whose CUDA run failed (launch error, no memory, an injected fault:
     *  `runtime.fault_inject`) and were handed to a CPU variant instead of failing the job;
     *  their sum is the runtime's count of retries (@since 0.4) */
    uint64_t tasks_retried;
    /** GPU workers: bytes of tiles that tasks read from a copy already on the GPU instead of
     *  copying them again (data locality, docs/runtime.md "GPU data path") (@since 0.4) */
    uint64_t bytes_gpu_resident;
} tw_worker_info;

/** Number of workers (0 for a NULL runtime). Thread-safe. @since 0.1 */
TW_API int tw_runtime_get_worker_count(const tw_runtime *rt);

/** Describe worker @p i (0 <= i < tw_runtime_get_worker_count()). @return TW_OK,
 *  TW_E_INVALID (NULL argument, @p i out of range). Thread-safe. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_runtime_get_worker(const tw_runtime *rt, int i,
                                                   tw_worker_info *out);

/**
 * Host memory of the runtime's tiles (their pixels: the memory that grows with the image) and
 * the traffic of the host budget `runtime.host_mem` (docs/runtime.md, "Memory budgets").
 * Without a budget only host_live and host_peak are kept. @since 0.4
 */
typedef struct tw_memory_info {
    int64_t host_budget;     /**< runtime.host_mem in bytes; 0 = unlimited */
    int64_t host_live;       /**< bytes of tile pixels in host memory now */
    int64_t host_peak;       /**< the most there ever were (high-water mark) */
    int64_t host_spilled;    /**< bytes of tiles whose pixels are only in the scratch file now */
    int64_t scratch_bytes;   /**< size of the scratch file now */
    uint64_t spills;         /**< tiles written to the scratch file */
    uint64_t spill_bytes;    /**< their bytes */
    uint64_t reloads;        /**< tiles read back from it */
    uint64_t reload_bytes;   /**< their bytes */
    /** allocations of tile pixels made beyond the budget: for a task whose working set alone
     *  is larger than what spilling can free (it runs alone, with one warning), or when
     *  nothing was left to spill (tiles pinned outside tasks); 0 means host_peak <= budget */
    uint64_t over_budget;
} tw_memory_info;

/** Fill @p out. @return TW_OK, TW_E_INVALID (NULL argument). Thread-safe. @since 0.4 */
TW_API TW_NODISCARD tw_status tw_runtime_get_memory(const tw_runtime *rt, tw_memory_info *out);

/**
 * One cost model of a model file (`runtime.models`): the run times of one task kind on one
 * device for tasks of one size and content-feature bucket. The runtime keeps the last 32 runs
 * of each and the policies use their median (docs/runtime.md, "Cost models"). @since 0.4
 */
typedef struct tw_model_info {
    char kind[64];            /**< task kind, e.g. "mrecon.tp" */
    tw_device_type device;
    char device_name[128];    /**< CPU model or GPU name */
    int size_log2;            /**< the task's tiles have [2^size_log2, 2^(size_log2+1)) pixels */
    char feature[16];         /**< content-feature bucket: "-" none, "0", else its upper edge
                               *   "1/65536" ... "1/4", "1" (the lower edge is a quarter) */
    double feature_max;       /**< the same as a number: -1 none, 0, 4^-8 ... 1 */
    int samples;              /**< runs kept (1..32) */
    double median_s_per_px;   /**< median seconds per pixel of the task's tiles */
    double mad_s_per_px;      /**< median absolute deviation from it */
} tw_model_info;

/**
 * The model file `runtime.models` of @p cfg designates ("auto": $XDG_CACHE_HOME/tilewave/
 * models.tsv or ~/.cache/tilewave/models.tsv), written to @p buf; "" when models are kept in
 * memory only ("none", or "auto" without a home directory).
 * @return TW_OK, TW_E_INVALID (NULL argument, @p n 0 or too small for the path and its NUL;
 * @p buf untouched). Thread-safe. @since 0.4
 */
TW_API TW_NODISCARD tw_status tw_models_get_path(const tw_config *cfg, char *buf, size_t n);

/**
 * Read a model file: *@p out receives an array of *@p n models (NULL when 0) sorted by kind,
 * device, size and feature, to free with tw_models_free(). A missing file has no models.
 * Malformed lines are skipped with one warning through the log.
 * @return TW_OK, TW_E_FORMAT (not a model file: no version line), TW_E_IO, TW_E_NOMEM,
 *         TW_E_INVALID (NULL argument). Thread-safe. @since 0.4
 */
TW_API TW_NODISCARD tw_status tw_models_read(const char *path, tw_model_info **out, size_t *n,
                                            tw_error *err);

/** Free what tw_models_read() returned. NULL is a no-op. Thread-safe. @since 0.4 */
TW_API void tw_models_free(tw_model_info *models);

/**
 * Wait for a job to end. @p timeout_ms < 0 waits forever.
 * @return the job's final status (TW_OK, the sticky error, TW_E_CANCELED), TW_E_TIMEOUT
 *         when the time ran out first (the job goes on), TW_E_INVALID (NULL job).
 *         Thread-safe (several threads may wait). @since 0.1
 */
TW_API tw_status tw_job_wait(tw_job *job, int64_t timeout_ms);

/** Ask the job to stop: pending tasks are dropped, running ones stop at their next check.
 *  Returns at once; tw_job_wait() then returns TW_E_CANCELED (the job's own error if it had
 *  failed first; no effect on an ended job). NULL is a no-op. Thread-safe. @since 0.1 */
TW_API void tw_job_cancel(tw_job *job);

/** The job's sticky error message (one line), or NULL when it has none (no error yet, a
 *  cancel without error, a NULL job). Owned by the job, valid until tw_job_destroy(); it does
 *  not change once set. Thread-safe. @since 0.1 */
TW_API const char *tw_job_get_error(tw_job *job);

/** Progress of a job. @since 0.1 */
typedef struct tw_progress {
    int64_t done;     /**< units finished (tiles for most ops) */
    int64_t total;    /**< units known so far; may grow while the job runs */
    double elapsed_s; /**< since submission */
    double eta_s;     /**< estimated seconds left, < 0 when unknown */
    bool finished;
} tw_progress;

/** Read the job's progress into @p out (zeroed for a NULL job; a NULL @p out is a no-op).
 *  Thread-safe. @since 0.1 */
TW_API void tw_job_get_progress(tw_job *job, tw_progress *out);

/** Where a job that reads its input in several passes kept the decoded input between them
 *  (runtime.keep_input). @since 0.7 */
typedef enum tw_keep {
    TW_KEEP_NONE = 0,   /**< one pass: nothing to keep */
    TW_KEEP_GPU,        /**< in GPU memory (host copies freed) */
    TW_KEEP_HOST,       /**< in host memory (spilled to scratch under runtime.host_mem) */
    TW_KEEP_SCRATCH,    /**< raw pixels in a scratch file */
    TW_KEEP_REREAD      /**< nowhere: the input was read and decoded again */
} tw_keep;

/** What a job read, decoded and wrote: counted as its input and output files are used, final
 *  once the job ended. Reads made while the job was being set up (a low level read for Otsu's
 *  threshold or the tissue mask) are not counted. GPU copies are per worker
 *  (::tw_worker_info). @since 0.7 */
typedef struct tw_job_io {
    uint64_t bytes_read;      /**< compressed bytes of the input tiles and strips decoded */
    uint64_t bytes_decoded;   /**< pixel bytes decoded from them */
    uint64_t tiles_decoded;   /**< tile or strip decodes (OpenSlide reads count 0) */
    uint64_t tiles_redecoded; /**< distinct input tiles decoded more than once */
    uint64_t bytes_encoded;   /**< pixel bytes handed to the output encoders */
    uint64_t bytes_written;   /**< bytes of encoded tiles written to output files */
    tw_keep kept;             /**< where a multi-pass job kept its decoded input */
    uint64_t tiles_bad;       /**< input tiles that did not decode cleanly, read as 0
                                   (io.on_bad_tile=fill); @since 0.7 */
} tw_job_io;

/** Read the job's I/O counts into @p out (zeroed for a NULL job; a NULL @p out is a no-op).
 *  Thread-safe. @since 0.7 */
TW_API void tw_job_get_io(tw_job *job, tw_job_io *out);

/** Static name of a ::tw_keep ("none", "gpu", "host", "scratch", "reread"). Thread-safe.
 *  @since 0.7 */
TW_API const char *tw_keep_name(tw_keep k);

/** Progress callback of tw_job_set_progress_callback(); @p p is valid during the call only.
 *  @since 0.4 */
typedef void (*tw_progress_fn)(tw_job *job, const tw_progress *p, void *user);

/**
 * Progress notifications, pushed instead of polled: @p fn is called from a runtime thread as
 * the job advances, at most once every @p interval_ms (0: at every step), and a last time with
 * p->finished set and p->done final, before tw_job_wait() returns. Calls do not overlap in
 * time with the last one, but two periodic calls from different workers may overlap and
 * arrive out of order. @p fn must be quick and must not wait on or destroy the job (cancel is
 * fine). A NULL @p fn removes the callback. Set it right after submitting: steps already made
 * are reported with the next one; when the job has already ended (a small job), the last call
 * is made at once, inside this function, on the caller's thread. @p user is passed to @p fn as is (the caller's).
 * @return TW_OK, TW_E_INVALID (NULL job, negative interval or one above INT64_MAX / 10^6).
 * Thread-safe. @since 0.4
 */
TW_API tw_status tw_job_set_progress_callback(tw_job *job, tw_progress_fn fn, void *user,
                                              int64_t interval_ms);

/** Destroy a job; an unfinished job is canceled and waited for first. NULL is a no-op. No
 *  other call on @p job may be running (nor may it be called from the job's progress
 *  callback). @since 0.1 */
TW_API void tw_job_destroy(tw_job *job);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_RUNTIME_H */
