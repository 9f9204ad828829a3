/* SPDX-License-Identifier: MIT */
/* tilewave: internals shared across folders above base/ (tasks, tiles, jobs, windows, runtime
 * queries); the utilities below them are base/tw_base.h, included here. */
#ifndef TW_INTERNAL_H
#define TW_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "tilewave.h"
#include "tw_base.h"
#include "tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- config values (runtime/config.c) */
/* A byte count: digits with an optional K, M, G or T suffix (either case, powers of 1024),
 * within [min, max]; no sign, no blanks. */
TWI_HIDDEN tw_status twi_parse_bytes(const char *s, int64_t min, int64_t max, int64_t *out);
/* Format a byte count with the largest suffix that divides it exactly: 65536 -> "64K",
 * 1536 -> "1536", 0 -> "0". */
TWI_HIDDEN void twi_format_bytes(int64_t v, char *buf, size_t n);
/* The folder scratch files go to (runtime/scratch.c): runtime.scratch_dir, else $TMPDIR,
 * else /tmp. */
TWI_HIDDEN const char *twi_scratch_dir(const tw_config *cfg);

/* ---- tiles (runtime/tile.c): reference-counted pixel buffers the runtime moves between host
 * and devices. The host copy is pinned when the runtime has GPUs. After a task that wrote a
 * tile ends, the host copy is current (GPU tasks download W/RW tiles when they end). GPUs keep
 * copies of tiles between tasks (replicas), valid until the tile's pixels change: through a
 * task that declares it W/RW, or on the host outside tasks, which must then be announced with
 * twi_tile_host_written(). */
typedef struct tw_tile tw_tile;

TWI_HIDDEN tw_status twi_tile_create(tw_runtime *rt, int32_t w, int32_t h, int32_t channels,
                                     tw_sample_type type, tw_tile **out);
/* A tile whose host pixels are the caller's: w x h pixels of `channels` samples of `type`
 * at data, rows `stride` bytes apart (>= w * channels * sample size). No copy is made: tasks
 * read and write that memory, GPUs upload from it and download into it (rows packed on the
 * device). The caller keeps it alive and touches it only as the job allows until the tile is
 * released; two tiles never wrap overlapping memory unless both are only read. TW_E_INVALID
 * under a host budget (runtime.host_mem: such tiles could not be spilled) or with
 * runtime.caller_memory = copy: make a tile and copy instead. */
TWI_HIDDEN tw_status twi_tile_wrap(tw_runtime *rt, void *data, size_t stride, int32_t w,
                                   int32_t h, int32_t channels, tw_sample_type type,
                                   tw_tile **out);
/* The job of a wrapped tile has ended (its finish callback): drop its GPU copies without
 * writing them back, and forget the caller's memory; a tile not wrapped is left alone. After
 * it the tile may only be released. */
TWI_HIDDEN void twi_tile_detach(tw_tile *t);
/* Page-lock len bytes at p for GPU copies (cudaHostRegister) until the job ends, when
 * runtime.caller_memory = register and the runtime uses GPUs; a no-op otherwise, or when the
 * memory cannot be registered (it was already, or the system refuses: copies are then
 * pageable, as with wrap). */
TWI_HIDDEN void twi_job_register_host(tw_job *job, void *p, size_t len);
/* Whether a job of rt should make the caller's memory at p its tiles (twi_tile_wrap):
 * runtime.caller_memory = wrap or register; auto: without GPUs, or when p is page-locked
 * already (GPU copies from pageable memory are slower than pinned tiles' copies plus a
 * copy on the host, docs/benchmarks.md); never under a host budget. */
TWI_HIDDEN bool twi_tile_can_wrap(const tw_runtime *rt, const void *p);
/* The same for a tile only CPU workers will touch: the caller's memory whatever its kind,
 * unless runtime.caller_memory = copy (or a host budget) asks for copies. */
TWI_HIDDEN bool twi_tile_can_wrap_cpu(const tw_runtime *rt, const void *p);
TWI_HIDDEN void twi_tile_acquire(tw_tile *t);
TWI_HIDDEN void twi_tile_release(tw_tile *t); /* NULL is a no-op */
TWI_HIDDEN void twi_tile_set_origin(tw_tile *t, int64_t x0, int64_t y0);
/* The host pixels of t. Under a host budget (runtime.host_mem) they exist only while the tile
 * is pinned: call it only on a tile attached to the running task (pinned while it runs) or
 * between twi_tile_pin()/twi_tile_pin_read() and twi_tile_unpin(). */
TWI_HIDDEN tw_tile_view twi_tile_host_view(tw_tile *t);
/* Host budget (runtime/budget.c, docs/runtime.md "Memory budgets"): keep t's host pixels
 * resident (read back from the scratch file when it was spilled, allocated when it never had
 * any) until the matching twi_tile_unpin(); for code that touches pixels outside the tasks the
 * tile is attached to. The caller holds a reference. _pin: the caller may change the pixels;
 * _pin_read: it will not (a copy in the scratch file stays valid). Pins nest. In a variant, a
 * pin counts against the task's reservation (its kind's host_bytes). Returns TW_OK, or TW_E_IO
 * / TW_E_NOMEM with twi_tile_pin_message(). Without a budget: TW_OK at the cost of a branch,
 * after bringing the pixels back from a GPU when the last task that wrote the tile ran there and
 * downloads are lazy (runtime.gpu_downloads; TW_E_DEVICE when that copy fails). */
TWI_HIDDEN tw_status twi_tile_pin(tw_tile *t);
TWI_HIDDEN tw_status twi_tile_pin_read(tw_tile *t);
TWI_HIDDEN void twi_tile_unpin(tw_tile *t); /* NULL is a no-op */
/* The message of the calling thread's last failed pin ("runtime: ..."). */
TWI_HIDDEN const char *twi_tile_pin_message(void);
/* For assertions: may t's host pixels be touched now (pinned, or no budget)? */
TWI_HIDDEN bool twi_tile_is_pinned(const tw_tile *t);
/* Code outside tasks changed (or is about to change, before any task uses the tile again) the
 * host pixels: copies of the tile kept on GPUs are stale and will not be used. Under a host
 * budget such code holds a twi_tile_pin() (not _pin_read), which also keeps the tile's scratch
 * copy from passing for current. */
TWI_HIDDEN void twi_tile_host_written(tw_tile *t);
/* Lazy downloads, no host budget: when exactly one GPU holds t's current pixels and the host
 * copy is current too, free the host copy (host memory for data that lives on the GPU between
 * passes); it comes back, allocated again, with the next twi_tile_sync_host() or when the
 * replica is evicted. true when it was dropped. Thread-safe; callers follow the task graph
 * (no task uses t meanwhile) (runtime/mem_cuda.c). */
TWI_HIDDEN bool twi_tile_drop_host(tw_tile *t);

/* ---- task kinds and tasks (runtime/task.c) */
typedef enum tw_access {
    TW_R = 1,
    TW_W = 2,
    TW_RW = 3
} tw_access;

#define TW_TASK_MAX_TILES 8

typedef struct tw_task tw_task;
typedef struct tw_task_ctx tw_task_ctx; /* what a running variant sees */

/* A variant. Runs on a worker thread; returns TW_OK or an error (preferably via twi_ctx_fail,
 * which records a message). A CUDA variant enqueues on twi_ctx_stream() and does not
 * synchronise: the GPU worker synchronises and writes W/RW tiles back after it returns. */
typedef tw_status (*tw_task_fn)(tw_task_ctx *ctx, void *arg);

/* A task kind: a const descriptor with one function per device (StarPU's codelet). */
typedef struct tw_task_kind {
    const char *name;  /* "gray.tp"; also the trace / NVTX name */
    unsigned devices;  /* TW_DEVICE_* mask of the variants present */
    tw_task_fn cpu;    /* may open an OpenMP team of twi_ctx_team() threads */
    tw_task_fn cuda;   /* asynchronous on twi_ctx_stream() */
    /* Optional: may this task run on that device (e.g. the tile fits in free GPU memory)?
     * Called under the scheduler lock; must be quick and must not block. */
    bool (*can_run)(const void *arg, tw_device_type dev);
    /* Optional cost model hook: expected seconds on that device, < 0 when unknown. */
    double (*cost)(const void *arg, tw_device_type dev);
    /* Host budget (runtime/budget.c, docs/runtime.md "Memory budgets"). Optional: host bytes
     * the task needs besides its own tiles, reserved while it runs: tiles its variant pins or
     * creates and fills (twi_tile_pin), and for a load the room its consumers will need (the
     * output tile its data becomes), so that a load leaves room for the work it feeds. Called
     * under the scheduler lock: quick, no blocking. (@since 0.4) */
    int64_t (*host_bytes)(const void *arg);
    /* The task brings new data into host memory (reads a slide or a caller's image). Under a
     * host budget it waits for free room rather than spill other tiles while tasks run: the
     * reader never runs ahead of the workers. (@since 0.4) */
    bool load;
    /* Its CPU variant runs an OpenMP team of twi_ctx_team() threads (a kernel parallel inside
     * one tile): when it starts while other CPU workers are idle, the runtime lends it their
     * cores for the run, so that a job of fewer tiles than workers still uses every core
     * (runtime/worker_cpu.c). (@since 0.7) */
    bool team;
    /* Optional content feature for the cost models (runtime/model.c): a number in [0, 1] that
     * the run time depends on beyond the tile size (a reconstruction TP's initial wavefront
     * over its pixels, a foreground fraction), < 0 when unknown. Called once per task, when it
     * is ready (its dependencies done), possibly under the scheduler lock: quick, no blocking. */
    double (*feature)(const void *arg);
    /* Optional: runs on the worker right after a variant of the task succeeded (a CUDA one
     * once its device work is known to have completed and its W/RW tiles are written back),
     * never after a failed attempt. Effects outside the task's tiles and scratch that a retry
     * must not repeat go here: progress, statistics, follow-up tasks (runtime.md, "Faults and
     * cancellation"). Tile views and scratch are no longer valid; twi_ctx_device() says where
     * the variant ran. An error fails the job. (@since 0.4) */
    tw_status (*commit)(tw_task_ctx *ctx, void *arg);
} tw_task_kind;

/* Create a task of `kind` in `job` with argument `arg` (freed with arg_free when the task is
 * freed, if not NULL). The caller holds one reference. */
TWI_HIDDEN tw_status twi_task_create(tw_job *job, const tw_task_kind *kind, void *arg,
                                     void (*arg_free)(void *), tw_task **out);
/* Attach a tile (a reference is taken) with an access mode; index = order of the calls. */
TWI_HIDDEN tw_status twi_task_add_tile(tw_task *t, tw_tile *tile, tw_access mode);
/* `t` runs only after `dep` has completed. `dep` must be of the same job; a dep that already
 * completed is satisfied. Only before twi_task_submit(t). */
TWI_HIDDEN tw_status twi_task_depend(tw_task *t, tw_task *dep);
/* Hand the task to the scheduler; it becomes ready when its dependencies complete. May be
 * called from inside a running task. The caller keeps its reference until it releases it. */
TWI_HIDDEN tw_status twi_task_submit(tw_task *t);
TWI_HIDDEN void twi_task_release(tw_task *t); /* NULL is a no-op */

/* Inside a variant */
TWI_HIDDEN tw_tile_view twi_ctx_view(tw_task_ctx *ctx, int i); /* on the worker's device */
TWI_HIDDEN tw_tile *twi_ctx_tile(tw_task_ctx *ctx, int i);
TWI_HIDDEN tw_device_type twi_ctx_device(const tw_task_ctx *ctx);
TWI_HIDDEN int twi_ctx_worker(const tw_task_ctx *ctx);   /* worker index */
TWI_HIDDEN int twi_ctx_team(const tw_task_ctx *ctx);     /* OpenMP threads this variant may use */
TWI_HIDDEN void *twi_ctx_stream(const tw_task_ctx *ctx); /* cudaStream_t on GPU workers, else NULL */
TWI_HIDDEN tw_job *twi_ctx_job(tw_task_ctx *ctx);
TWI_HIDDEN bool twi_ctx_canceled(const tw_task_ctx *ctx);
/* A variant of a team kind that ends with serial work (submitting follow-up tasks) calls this
 * after its last parallel step: the workers lent to it (twi_ctx_team) go back to work at once
 * rather than when it ends; twi_ctx_team() is then the worker's own team. A no-op when none
 * were lent. On the worker's thread, outside any parallel region. */
TWI_HIDDEN void twi_ctx_team_release(tw_task_ctx *ctx);
/* A variant that pins tiles from the threads of its OpenMP team: on a team thread, between
 * twi_ctx_thread_enter(ctx) and twi_ctx_thread_leave(ctx), pins count against the task's
 * reservation as those of the worker's own thread do (its kind's host_bytes must cover what the
 * whole team pins at once). Without a host budget, and on the worker's own thread, no-ops.
 * Failed pins leave their message (twi_tile_pin_message) on the thread that pinned. */
TWI_HIDDEN void twi_ctx_thread_enter(const tw_task_ctx *ctx);
TWI_HIDDEN void twi_ctx_thread_leave(const tw_task_ctx *ctx);
/* Record a message for this task's failure ("domain: what") and return st. */
TWI_HIDDEN tw_status twi_ctx_fail(tw_task_ctx *ctx, tw_status st, const char *fmt, ...)
    TW_PRINTF(3, 4);
/* A CUDA variant whose failure the runtime would otherwise retry on a CPU worker calls this
 * once it has made an effect a retry would repeat (outside its tiles and scratch, and not
 * deferred to the kind's commit hook): a failure after it fails the job instead. */
TWI_HIDDEN void twi_ctx_no_retry(tw_task_ctx *ctx);
/* Scratch memory on the worker's device (device memory on GPU workers, from the per-GPU pool;
 * host memory on CPU workers), valid until the variant returns. NULL when out of memory. */
TWI_HIDDEN void *twi_ctx_scratch(tw_task_ctx *ctx, size_t bytes);

/* Copies between host memory and the worker's device memory inside a variant (memcpy on CPU
 * workers). _to_device is asynchronous on the worker's stream: `src` must stay valid and
 * unchanged until the task ends (pageable host memory is fine). _to_host first waits for
 * everything the variant enqueued so far, then copies: StarPU's synchronous-codelet path, for
 * the small results a variant must read back mid-task (counts, border max-trees). Bulk tile
 * data travels as the task's tiles instead. Return TW_OK or TW_E_DEVICE (message recorded). */
TWI_HIDDEN tw_status twi_ctx_copy_to_device(tw_task_ctx *ctx, void *dst, const void *src,
                                            size_t bytes);
TWI_HIDDEN tw_status twi_ctx_copy_to_host(tw_task_ctx *ctx, void *dst, const void *src,
                                          size_t bytes);

/* ---- jobs (runtime/job.c). A job ends when it is sealed and none of its tasks remain. */
/* Runs once, on the thread that ended the job's last task (or the sealing thread), after every
 * task: `st` is the job's status so far. Returning an error fails the job (e.g. a rename that
 * failed). Must not wait on the job. */
typedef tw_status (*twi_job_finish_fn)(tw_job *job, tw_status st, void *user);

TWI_HIDDEN tw_status twi_job_create(tw_runtime *rt, const char *name, tw_job **out);
TWI_HIDDEN void twi_job_set_finish(tw_job *job, twi_job_finish_fn fn, void *user,
                                   void (*user_free)(void *));
TWI_HIDDEN void twi_job_seal(tw_job *job);
TWI_HIDDEN void twi_job_add_total(tw_job *job, int64_t n); /* progress units */
TWI_HIDDEN void twi_job_add_done(tw_job *job, int64_t n);
/* Fail the job (the first error sticks; later ones are ignored) and return st. */
TWI_HIDDEN tw_status twi_job_fail(tw_job *job, tw_status st, const char *fmt, ...)
    TW_PRINTF(3, 4);
TWI_HIDDEN bool twi_job_stopping(const tw_job *job); /* canceled or failed */
TWI_HIDDEN tw_runtime *twi_job_runtime(tw_job *job);
/* Keep the job from ending while work outside its tasks is still to come (a thread that
 * receives data and submits tasks for it): one more outstanding count until twi_job_unhold(),
 * which may end the job on the calling thread. TW_E_INVALID when the job has already ended. */
TWI_HIDDEN tw_status twi_job_hold(tw_job *job);
TWI_HIDDEN void twi_job_unhold(tw_job *job);
/* The job's I/O counts, for its streams' readers and writers (tw_job_get_io). */
TWI_HIDDEN twi_io_counts *twi_job_io(tw_job *job);
/* Count the job's time (tw_progress.elapsed_s) from `t0_ns` (CLOCK_MONOTONIC nanoseconds)
 * when that is earlier than its creation: the work its operation did at submission, before
 * the job existed (opening the input, Otsu's pass, the tissue mask), is part of the run.
 * Before the job's first task; 0 is ignored. */
TWI_HIDDEN void twi_job_started_at(tw_job *job, int64_t t0_ns);

/* ---- the streaming window (runtime/window.c, docs/runtime.md "Streaming window"): a job's
 * stream of n units (tiles, bands, the cells of a pass) admitted by the runtime, in order,
 * when a worker would otherwise go idle and while fewer than the window's cap are admitted and
 * not retired. `admit(arg, k)` creates and submits unit k's tasks; it runs on a worker thread,
 * outside every lock, possibly at the same time as the admission of unit k + 1, never after
 * the job stopped. The op calls twi_window_retire() once per admitted unit, when its last task
 * is done (usually from that task: the unit's memory is about to be freed). `unit_bytes`:
 * host bytes a unit holds, for the cap. *out is set before any unit is admitted (the units'
 * tasks may retire before this returns). The window keeps the job from ending until every unit
 * is admitted; it is freed with the job. */
typedef struct twi_window twi_window;
typedef tw_status (*twi_window_admit_fn)(void *arg, int64_t unit);

TWI_HIDDEN tw_status twi_window_open(tw_job *job, int64_t n_units, int64_t unit_bytes,
                                     twi_window_admit_fn admit, void *arg, twi_window **out);
TWI_HIDDEN void twi_window_retire(twi_window *w); /* NULL is a no-op */
/* Units admitted and not retired (tests, summaries). */
TWI_HIDDEN int64_t twi_window_in_flight(twi_window *w);
/* The most units a window over units of `unit_bytes` admits at once on rt. */
TWI_HIDDEN int64_t twi_window_cap(const tw_runtime *rt, int64_t unit_bytes);

/* ---- runtime queries used by ops */
TWI_HIDDEN int twi_runtime_gpu_count(const tw_runtime *rt);
/* CPU workers of the runtime (not GPU managers). */
TWI_HIDDEN int twi_runtime_cpu_count(const tw_runtime *rt);
/* Is p in page-locked host memory (cudaHostAlloc'ed or registered)? false without CUDA. */
TWI_HIDDEN bool twi_runtime_host_pinned(const void *p);
/* The smallest device memory budget of the runtime's GPUs (runtime.gpu_mem, else the free
 * memory at start less 1/32 of the device): the most a task's tiles and scratch may take on
 * any of them. 0 without GPUs. */
TWI_HIDDEN int64_t twi_runtime_gpu_budget(const tw_runtime *rt);
/* runtime.caller_memory = register and the runtime uses GPUs. */
TWI_HIDDEN bool twi_runtime_registers_caller(const tw_runtime *rt);
/* Where a multi-pass op may keep its decoded input between passes (docs/runtime.md,
 * "Streaming window"): bytes of tiles its GPUs may hold for it (half their pools' budgets,
 * 0 when tiles written by the host cannot stay there alone: no GPU, eager downloads or a host
 * budget, see twi_tile_drop_host), and bytes of host memory (a quarter of runtime.host_mem,
 * else 1/8 of the machine's memory). */
TWI_HIDDEN int64_t twi_runtime_keep_gpu_bytes(const tw_runtime *rt);
TWI_HIDDEN int64_t twi_runtime_keep_host_bytes(const tw_runtime *rt);
/* (runtime/model.c) Pixels per second the runtime's workers are expected to process together
 * in tasks of `kind` with `units` pixels each, from the cost models: the sum over the workers
 * that can run the kind of units / their device's estimate. -1 when the runtime keeps no
 * models or a device's model does not know the kind yet. */
TWI_HIDDEN double twi_runtime_rate(tw_runtime *rt, const tw_task_kind *kind, int64_t units);

#ifdef __cplusplus
}
#endif

#endif /* TW_INTERNAL_H */
