/* SPDX-License-Identifier: MIT */
/* tilewave: one job over several processes with MPI (builds with TW_ENABLE_MPI; docs/mpi.md). */
#ifndef TILEWAVE_MPI_H
#define TILEWAVE_MPI_H

#include "tilewave/common.h"
#include "tilewave/ops.h"
#include "tilewave/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup tw_mpi Several processes with MPI
 *
 * An image too large for one machine, or a cohort of slides, runs on several processes
 * (ranks) started by `mpirun`, each with its own ::tw_runtime. This header has no MPI type:
 * the library hides MPI (Open MPI, MPICH) behind ::tw_mpi and works with MPI_COMM_WORLD.
 * Without TW_ENABLE_MPI the functions exist and fail with #TW_E_NODEV (tw_build_has_mpi() says
 * which build this is).
 *
 * Distributed jobs (tw_mpi_mrecon_submit() ...): the image is cut into bands of whole rows of
 * tiles, one band per rank, sized by the ranks' cost models when they know the operation (else
 * by pixels). Each rank runs the operation on its band with its runtime; the border
 * information the operation needs from other bands travels with MPI (reconstruction: the
 * bands' edge rows, round by round until no rank changes anything; EDT: per column the nearest
 * background row above and below each band; attribute filters: the bands' border max-trees,
 * merged on rank 0, whose answers go back). Rank 0 writes the one output: every rank sends it
 * its finished tiles. The result is the same bytes as the job run in one process.
 *
 * Submissions are collective: every rank makes the same calls, with the same options (paths
 * all ranks can read; the output path matters on rank 0 only), in the same order, one at a
 * time. A rank that fails tells the others, whose jobs then end with #TW_E_CANCELED and
 * "mpi: rank K failed: ..." instead of waiting for it; a rank that dies is noticed by mpirun,
 * which ends the others. MPI cannot withdraw a collective call that is under way: after a
 * failed distributed job a program should end every rank with tw_mpi_abort(), as the
 * `tilewave` command does.
 *
 * Threads: the library asks for MPI_THREAD_MULTIPLE; workers exchange data while the calling
 * thread waits for the job.
 * @{
 */

/** The MPI processes of a run (MPI_COMM_WORLD). @since 0.6 */
typedef struct tw_mpi tw_mpi;

/** 1 when the library was built with MPI (TW_ENABLE_MPI), else 0. Thread-safe. @since 0.6 */
TW_API int tw_build_has_mpi(void);

/**
 * Start MPI (MPI_Init_thread, MPI_THREAD_MULTIPLE) unless the program already did, and return
 * the context of MPI_COMM_WORLD. @p argc and @p argv may be NULL.
 * @return TW_OK, TW_E_INVALID (NULL @p out; MPI already running without MPI_THREAD_MULTIPLE),
 * TW_E_NODEV (a build without MPI; MPI failing to start or giving a lower thread level),
 * TW_E_NOMEM. Call once per process, from the main thread. @since 0.6
 */
TW_API TW_NODISCARD tw_status tw_mpi_open(int *argc, char ***argv, tw_mpi **out, tw_error *err);

/** Free the context; MPI_Finalize when tw_mpi_open() started MPI (collective: every rank
 *  calls it, after its jobs are destroyed). NULL is a no-op. @since 0.6 */
TW_API void tw_mpi_close(tw_mpi *c);

/** This process's rank, 0 .. size - 1 (0 for NULL). Thread-safe. @since 0.6 */
TW_API int tw_mpi_get_rank(const tw_mpi *c);
/** The number of ranks (1 for NULL). Thread-safe. @since 0.6 */
TW_API int tw_mpi_get_size(const tw_mpi *c);

/** End every rank now (MPI_Abort with @p code), for programs that stop at the first
 *  failure; the library never calls it itself. Does not return in a build with MPI; a no-op
 *  for NULL or without MPI. @since 0.6 */
TW_API void tw_mpi_abort(tw_mpi *c, int code);

/** Replace each of @p values[0 .. n) by its sum over all ranks (collective).
 *  @return TW_OK, TW_E_INVALID (NULL, n < 1), TW_E_NODEV (no MPI). @since 0.6 */
TW_API TW_NODISCARD tw_status tw_mpi_sum(tw_mpi *c, double *values, int n, tw_error *err);

/**
 * What the distributed part of a job did, filled on every rank when the job ends (before
 * tw_job_wait() returns). Bytes count message payloads. Initialise with tw_mpi_report_init().
 * @since 0.6
 */
typedef struct tw_mpi_report {
    size_t struct_size;     /**< set by tw_mpi_report_init() */
    int rank, size;         /**< this process, of how many */
    int64_t row0, rows;     /**< this rank's band: image rows row0 .. row0 + rows - 1 */
    int64_t tile_rows;      /**< its rows of tiles */
    int64_t rounds;         /**< exchange rounds: reconstruction's border rounds (the last
                                 found nothing to do); 1 for the EDT and the filters */
    int64_t exchange_bytes; /**< this rank: border data sent to other ranks (edge rows, column
                                 tables, histograms, border max-trees and their answers) */
    int64_t output_bytes;   /**< this rank: result pixels sent to rank 0 (on rank 0: received) */
    double wait_s;          /**< this rank: time spent waiting for other ranks */
    int failed_rank;        /**< a failed job: the rank whose own failure ended it (this one
                                 when the error is its own; another one when the error says
                                 "mpi: rank K failed"); -1: none, or not known here */
    bool all_failed;        /**< a failed job: every rank's job failed the same way, at the
                                 same point (a submission they all refused, a marker above
                                 its mask), so no rank waits for another */
    /* The whole run, the same on every rank; filled only when the job succeeded. */
    int64_t total_exchange_bytes; /**< exchange_bytes summed over the ranks */
    int64_t total_output_bytes;   /**< result pixels that crossed to rank 0 */
    double max_wait_s;            /**< the largest wait_s */
    int64_t rows_min, rows_max;   /**< the smallest and largest band (image rows) */
} tw_mpi_report;

/** Zero @p r and set its struct_size; NULL is a no-op. Thread-safe. @since 0.6 */
TW_API void tw_mpi_report_init(tw_mpi_report *r);

/**
 * @name Distributed submissions
 * The same options and results as tw_mrecon_submit() and the others, over the ranks of @p c:
 * collective, with every rank's @p rt. Inputs and outputs are files (not caller buffers);
 * @p report is optional (initialised with tw_mpi_report_init()). Besides each operation's own
 * codes: TW_E_INVALID (NULL @p c; buffers instead of files; an image with fewer rows of tiles
 * than there are ranks; ranks that see different images), TW_E_NODEV (no MPI),
 * TW_E_CANCELED ("mpi: rank K failed: ...": another rank failed). One distributed job per
 * @p c at a time is submitted from one thread; jobs may then run concurrently.
 * @{
 */
TW_API TW_NODISCARD tw_status tw_mpi_mrecon_submit(tw_mpi *c, tw_runtime *rt,
                                                  const tw_mrecon_opts *o, tw_mpi_report *report,
                                                  tw_job **out, tw_error *err);
TW_API TW_NODISCARD tw_status tw_mpi_fill_holes_submit(tw_mpi *c, tw_runtime *rt,
                                                      const tw_mrecon_filter_opts *o,
                                                      tw_mpi_report *report, tw_job **out,
                                                      tw_error *err);
TW_API TW_NODISCARD tw_status tw_mpi_hmax_submit(tw_mpi *c, tw_runtime *rt,
                                                const tw_mrecon_filter_opts *o,
                                                tw_mpi_report *report, tw_job **out,
                                                tw_error *err);
TW_API TW_NODISCARD tw_status tw_mpi_regional_max_submit(tw_mpi *c, tw_runtime *rt,
                                                        const tw_mrecon_filter_opts *o,
                                                        tw_mpi_report *report, tw_job **out,
                                                        tw_error *err);
/** The exact method only (--method wavefront runs the image as one band). */
TW_API TW_NODISCARD tw_status tw_mpi_edt_submit(tw_mpi *c, tw_runtime *rt, const tw_edt_opts *o,
                                               tw_mpi_report *report, tw_job **out,
                                               tw_error *err);
TW_API TW_NODISCARD tw_status tw_mpi_attr_filter_submit(tw_mpi *c, tw_runtime *rt,
                                                       const tw_attr_filter_opts *o,
                                                       tw_mpi_report *report, tw_job **out,
                                                       tw_error *err);
/** @} */

/**
 * @name A queue of items over the ranks (slide lists)
 * Rank 0 hands out item numbers 0 .. n - 1, the next one to whichever rank asks first (itself
 * included), so that slides of different sizes keep every rank busy.
 * @{
 */
/** A queue of items over the ranks. @since 0.6 */
typedef struct tw_mpi_queue tw_mpi_queue;

/** Make the queue of @p n items (collective; @p n the same on every rank).
 *  @return TW_OK, TW_E_INVALID (NULL, n < 0), TW_E_NODEV, TW_E_NOMEM. @since 0.6 */
TW_API TW_NODISCARD tw_status tw_mpi_queue_create(tw_mpi *c, int64_t n, tw_mpi_queue **out,
                                                 tw_error *err);
/** The next item for this rank in *@p item, -1 when none is left (then call it no more).
 *  @return TW_OK, TW_E_INVALID (NULL), TW_E_NODEV. Not thread-safe on one queue. @since 0.6 */
TW_API TW_NODISCARD tw_status tw_mpi_queue_next(tw_mpi_queue *q, int64_t *item, tw_error *err);
/** Free the queue (collective, once every rank got -1). NULL is a no-op. @since 0.6 */
TW_API void tw_mpi_queue_destroy(tw_mpi_queue *q);
/** @} */

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_MPI_H */
