/* SPDX-License-Identifier: MIT */
/* tilewave: the parts of distributed jobs that need no MPI, and the entry points without it. */
#include <math.h>
#include <string.h>

#include "ops_internal.h"

void
tw_mpi_report_init(tw_mpi_report *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
    r->failed_rank = -1;
}

int
tw_build_has_mpi(void)
{
#ifdef TW_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

tw_status
twi_dist_split(int64_t rows, int n, const double *weights, int64_t *starts)
{
    double total = 0.0, cum = 0.0;
    bool by_weight = weights != NULL;

    if (n < 1 || rows < n || !starts)
        return TW_E_INVALID;
    for (int r = 0; by_weight && r < n; r++) {
        if (!(weights[r] > 0) || !isfinite(weights[r]))
            by_weight = false;
        else
            total += weights[r];
    }
    /* Round the cumulative shares, then make room for one row per rank: forward, no band
     * empty; backward, enough rows left for the ranks after it. */
    starts[0] = 0;
    for (int r = 1; r < n; r++) {
        cum += by_weight ? weights[r - 1] / total : 1.0 / n;
        starts[r] = (int64_t)llround(cum * (double)rows);
    }
    starts[n] = rows;
    for (int r = 1; r < n; r++)
        if (starts[r] < starts[r - 1] + 1)
            starts[r] = starts[r - 1] + 1;
    for (int r = n - 1; r >= 1; r--)
        if (starts[r] > starts[r + 1] - 1)
            starts[r] = starts[r + 1] - 1;
    return TW_OK;
}

#ifndef TW_HAVE_MPI
/* A build without MPI: no context can be made, so no job is distributed; what follows is
 * reached only by misuse (ops_internal.h). */

#define NO_MPI(err)                                                                            \
    twi_error_set((err), TW_E_NODEV,                                                           \
                  "mpi: this tilewave was built without MPI (configure with -DTW_ENABLE_MPI=ON)")

tw_status
tw_mpi_open(int *argc, char ***argv, tw_mpi **out, tw_error *err)
{
    (void)argc;
    (void)argv;
    if (!out)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument");
    return NO_MPI(err);
}

void
tw_mpi_close(tw_mpi *c)
{
    (void)c;
}

int
tw_mpi_get_rank(const tw_mpi *c)
{
    (void)c;
    return 0;
}

int
tw_mpi_get_size(const tw_mpi *c)
{
    (void)c;
    return 1;
}

void
tw_mpi_abort(tw_mpi *c, int code)
{
    (void)c;
    (void)code;
}

tw_status
tw_mpi_sum(tw_mpi *c, double *values, int n, tw_error *err)
{
    if (!c || !values || n < 1)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument or n < 1");
    return NO_MPI(err);
}

tw_status
tw_mpi_queue_create(tw_mpi *c, int64_t n, tw_mpi_queue **out, tw_error *err)
{
    if (!c || !out || n < 0)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument or n < 0");
    return NO_MPI(err);
}

tw_status
tw_mpi_queue_next(tw_mpi_queue *q, int64_t *item, tw_error *err)
{
    if (!q || !item)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument");
    return NO_MPI(err);
}

void
tw_mpi_queue_destroy(tw_mpi_queue *q)
{
    (void)q;
}

tw_status
twi_dist_create(tw_mpi *c, const char *op, tw_mpi_report *report, twi_dist **out,
                tw_error *err)
{
    (void)c;
    (void)op;
    (void)report;
    (void)out;
    return NO_MPI(err);
}

tw_status
twi_dist_partition(twi_dist *d, tw_runtime *rt, tw_status local_st, const tw_error *local_err,
                   int64_t W, int64_t H, int32_t tw, int32_t th, const tw_task_kind *kind,
                   tw_error *err)
{
    (void)d, (void)rt, (void)local_st, (void)local_err, (void)W, (void)H, (void)tw, (void)th;
    (void)kind;
    return NO_MPI(err);
}

void
twi_dist_abandon(twi_dist *d, tw_status st, const tw_error *err)
{
    (void)d, (void)st, (void)err;
}

int
twi_dist_rank(const twi_dist *d)
{
    (void)d;
    return 0;
}

int
twi_dist_size(const twi_dist *d)
{
    (void)d;
    return 1;
}

void
twi_dist_band(const twi_dist *d, int64_t *ty0, int64_t *ty1)
{
    (void)d;
    *ty0 = *ty1 = 0;
}

int64_t
twi_dist_max_band(const twi_dist *d)
{
    (void)d;
    return 0;
}

tw_status
twi_dist_launch(twi_dist *d, tw_job *job, twi_stream *const *outs, int n_outs, tw_error *err)
{
    (void)d, (void)job, (void)outs, (void)n_outs;
    return NO_MPI(err);
}

tw_status
twi_dist_put(twi_dist *d, tw_task_ctx *ctx, int out, int64_t x, int64_t y, const tw_tile_view *v)
{
    (void)d, (void)out, (void)x, (void)y, (void)v;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

tw_status
twi_dist_allreduce(twi_dist *d, tw_task_ctx *ctx, void *buf, int64_t n, twi_dist_type t,
                   twi_dist_op op)
{
    (void)d, (void)buf, (void)n, (void)t, (void)op;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

tw_status
twi_dist_exscan_i32(twi_dist *d, tw_task_ctx *ctx, int32_t *buf, int64_t n, bool up,
                    twi_dist_op op, int32_t none)
{
    (void)d, (void)buf, (void)n, (void)up, (void)op, (void)none;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

tw_status
twi_dist_allgather(twi_dist *d, tw_task_ctx *ctx, const void *mine, size_t bytes, void *all)
{
    (void)d, (void)mine, (void)bytes, (void)all;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

tw_status
twi_dist_gather(twi_dist *d, tw_task_ctx *ctx, const void *buf, int64_t n, void **all,
                int64_t *lens)
{
    (void)d, (void)buf, (void)n, (void)all, (void)lens;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

tw_status
twi_dist_scatter(twi_dist *d, tw_task_ctx *ctx, const void *all, const int64_t *lens,
                 void **part, int64_t *n)
{
    (void)d, (void)all, (void)lens, (void)part, (void)n;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

tw_status
twi_dist_halo_post(twi_dist *d, tw_task_ctx *ctx, const void *top, const void *bottom,
                   size_t bytes, bool send_top, bool send_bottom)
{
    (void)d, (void)top, (void)bottom, (void)bytes, (void)send_top, (void)send_bottom;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

tw_status
twi_dist_halo_wait(twi_dist *d, tw_task_ctx *ctx, void *from_up, void *from_down, size_t bytes,
                   bool *got_up, bool *got_down)
{
    (void)d, (void)from_up, (void)from_down, (void)bytes, (void)got_up, (void)got_down;
    return twi_ctx_fail(ctx, TW_E_NODEV, "mpi: no MPI");
}

void
twi_dist_count_round(twi_dist *d)
{
    (void)d;
}

void
twi_dist_failed_everywhere(twi_dist *d, int rank)
{
    (void)d, (void)rank;
}

tw_status
twi_dist_finish(twi_dist *d, tw_status st, const char *msg, tw_error *err)
{
    (void)d, (void)msg, (void)err;
    return st;
}

void
twi_dist_destroy(twi_dist *d)
{
    (void)d;
}
#endif /* !TW_HAVE_MPI */
