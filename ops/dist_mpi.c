/* SPDX-License-Identifier: MIT */
/* tilewave: jobs over MPI ranks: bands, border exchanges, the output through rank 0, queues. */
/* Why one file: the MPI side of a distributed job (partition, halo rows, gathers, the output
 * through rank 0 and its receiver thread) shares one twi_dist and its protocol; it is the only
 * file that includes mpi.h. */
/*
 * What this file guarantees. A distributed job is the operation's own job on every rank, run
 * on that rank's band of the image: rows of tiles [ty0, ty1) of the same tile grid as in one
 * process, so every tile, and every decision an operation takes per tile, is the same. The
 * operation adds the exchanges its band needs (ops/mrecon.c: edge rows round by round;
 * ops/edt.c: column tables; ops/attr_filter.c: border max-trees), built on the primitives here,
 * and writes its result through rank 0. The bytes are therefore those of one process; what
 * changes is only where the work runs.
 *
 * The partition. Every rank sets its job up (inputs, tile size) and then joins one allgather
 * on the context's communicator: its setup status, the image and tile sizes it sees, and its
 * rate for the operation's main task kind from its cost models (pixels per second of all its
 * workers, twi_runtime_rate). A failure anywhere makes every rank fail (the failing one with
 * its own error, the others with "mpi: rank K failed: ..."); ranks that see different images
 * are an error; otherwise the rows of tiles are split in proportion to the rates (by rows when
 * one is unknown), one band per rank, each at least one row. Then the job gets communicators
 * of its own (a copy, and one in reverse rank order for upward scans), so that messages of
 * concurrent jobs never meet.
 *
 * Waiting. No call here blocks in MPI: each posts non-blocking operations and polls them
 * (MPI_Test with a yield, then sleeps backing off to 1 ms). Between polls it looks for the end
 * of its job (cancel, a failure elsewhere in it) and for a failure message from another rank
 * (TAG_FAIL: a rank whose job fails after the partition sends its message to every other
 * rank). So a rank never waits forever for a rank that gave up; one that died is mpirun's to
 * notice (it ends the others). A wait that ends early leaves its operations posted: MPI can
 * neither cancel a collective nor say when an abandoned send stops reading its buffer, so
 * such buffers are leaked on purpose, and a program should end with tw_mpi_abort() after a
 * failed distributed job.
 *
 * The output. Rank 0 opens the output file over the whole image as in one process (the same
 * metadata: the command line is the same on every rank) and puts its own tiles into it. Other
 * ranks send each finished tile (header + pixels, in messages of at most OUT_MSG_MAX bytes) to
 * rank 0 and go on computing: a store task waits only when its rank already has a window of
 * sends in flight (2 workers + 2, at most 16), which a progress thread moves on (ob1 moves a
 * large message only while its sender calls MPI). On rank 0 a receiver thread turns each
 * message into a CPU task of rank 0's job that puts it into the assembler, so that compression
 * runs on all of rank 0's workers. The thread holds the job (twi_job_hold) until every remote
 * pixel has come and keeps at most 2 workers + 2 messages waiting for a worker: the senders'
 * rendezvous sends then wait, which bounds rank 0's memory. A rank's job ends (its finish
 * hook) only once its last send has completed. Cost: every result byte crosses the network
 * once, into rank 0.
 *
 * Threads. MPI is used from worker threads (the tasks that exchange), rank 0's receiver, the
 * senders' progress thread and the submitting thread, so MPI_THREAD_MULTIPLE is required.
 * Collectives of one job are made by one task at a time, in the same order on every rank (the
 * operations order those tasks); point-to-point traffic uses tags of its own.
 */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops_internal.h"

enum {
    TAG_FAIL = 1, /* a rank's job failed: its message (text) */
    TAG_OUT,      /* result pixels for rank 0: out_hdr + rows */
    TAG_HALO_UP,  /* a band's top row, to the rank above */
    TAG_HALO_DOWN /* a band's bottom row, to the rank below */
};
enum { TAG_QREQ = 1, TAG_QREP }; /* queues have a communicator of their own */

#define FAIL_MAX 400                  /* bytes of a failure message sent to the other ranks */
#define OUT_MSG_MAX ((size_t)32 << 20) /* bytes of one result message, at most */

struct tw_mpi {
    MPI_Comm comm; /* a copy of MPI_COMM_WORLD */
    int rank, size;
    bool finalize; /* tw_mpi_open() started MPI */
};

/* The header of a result message; the rows follow, packed. */
typedef struct out_hdr {
    int64_t x, y;
    int32_t w, h, channels, type, out, pad;
} out_hdr;

/* A result message on rank 0, the argument of its put task. */
typedef struct put_msg {
    twi_dist *d;
    size_t bytes;
    unsigned char data[]; /* out_hdr, then the pixels */
} put_msg;

struct twi_dist {
    tw_mpi *c;
    char op[32];
    tw_mpi_report *report;
    MPI_Comm comm, rcomm; /* the job's; rcomm in reverse rank order */
    bool comms;
    int rank, size;
    bool partitioned;
    int64_t *starts; /* size + 1: first row of tiles of each band */
    int64_t W, H;
    int32_t tw, th;
    tw_job *job;

    /* output */
    twi_stream *outs[TWI_DIST_MAX_OUTS];
    int n_outs;
    pthread_t recv_thread;
    bool recv_started;
    int64_t recv_expect;   /* pixels rank 0 receives from the others */
    int64_t put_limit;
    atomic_llong puts_waiting;

    /* failures */
    pthread_mutex_t lock;
    bool lock_init;
    atomic_bool remote_fail; /* another rank said it failed */
    int fail_rank;
    char fail_msg[FAIL_MAX];
    bool notified, finished, all_failed;
    MPI_Request notify_req[64];
    int n_notify;
    char notify_msg[FAIL_MAX];

    /* edge rows: send up, send down, receive from up, receive from down */
    unsigned char *halo;
    size_t halo_bytes;
    MPI_Request halo_req[4];
    int halo_n, halo_from_up, halo_from_down; /* request indices; -1: none */
    bool halo_posted;

    /* result messages this rank (not rank 0) has in flight, under lock: a window of sends
     * that lets its workers go on computing while rank 0 receives */
    MPI_Request *sends;
    void **send_bufs;
    int n_sends, send_window;
    pthread_cond_t send_cond; /* a send joined (for the progress thread) */
    bool cond_init, send_stop;
    pthread_t progress_thread;
    bool progress_started;

    /* statistics */
    atomic_llong exchange_bytes, output_bytes, wait_ns;
    int64_t rounds;
};

static const tw_task_kind put_kind;
static void report_failure(twi_dist *d, int rank, bool all);

/* Copy text into dst[n], cut to fit (messages travel in fixed-size buffers). */
static void
copy_text(char *dst, size_t n, const char *src)
{
    size_t k = src ? strnlen(src, n - 1) : 0;

    if (k)
        memcpy(dst, src, k);
    dst[k] = '\0';
}

/* Polling: yield for a while (answers within microseconds), then sleep, backing off to 1 ms
 * (a rank waiting for a slow one costs no core). */
typedef struct backoff {
    int spins;
    long ns;
} backoff;

static void
backoff_wait(backoff *b)
{
    struct timespec ts;

    if (b->spins < 64) {
        b->spins++;
        sched_yield();
        return;
    }
    ts.tv_sec = 0;
    ts.tv_nsec = b->ns;
    nanosleep(&ts, NULL);
    if (b->ns < 1000000)
        b->ns *= 2;
}

static void
backoff_reset(backoff *b)
{
    b->spins = 0;
    b->ns = 20000;
}

static tw_status dist_fail(twi_dist *d, tw_task_ctx *ctx, tw_error *err, tw_status st,
                           const char *fmt, ...) TW_PRINTF(5, 6);

/* Fail the task (ctx); outside tasks fill err and fail the job once it exists. Returns st. */
static tw_status
dist_fail(twi_dist *d, tw_task_ctx *ctx, tw_error *err, tw_status st, const char *fmt, ...)
{
    char msg[TW_ERROR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx)
        return twi_ctx_fail(ctx, st, "%s", msg);
    twi_error_set(err, st, "%s", msg);
    if (d && d->job)
        (void)twi_job_fail(d->job, st, "%s", msg);
    return st;
}

/* Has another rank reported a failure (now, or before)? Thread-safe: MPI_Improbe/Mrecv. */
static bool
remote_failed(twi_dist *d)
{
    MPI_Message msg;
    MPI_Status stt;
    char buf[FAIL_MAX];
    int flag = 0, count = 0;

    if (atomic_load(&d->remote_fail))
        return true;
    if (!d->comms ||
        MPI_Improbe(MPI_ANY_SOURCE, TAG_FAIL, d->comm, &flag, &msg, &stt) != MPI_SUCCESS || !flag)
        return false;
    MPI_Get_count(&stt, MPI_CHAR, &count);
    if (count < 1 || count > FAIL_MAX ||
        MPI_Mrecv(buf, FAIL_MAX, MPI_CHAR, &msg, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        copy_text(buf, sizeof buf, "(no message)");
    buf[FAIL_MAX - 1] = '\0';
    pthread_mutex_lock(&d->lock);
    if (!atomic_load(&d->remote_fail)) {
        d->fail_rank = stt.MPI_SOURCE;
        copy_text(d->fail_msg, sizeof d->fail_msg, buf);
        atomic_store(&d->remote_fail, true);
    }
    pthread_mutex_unlock(&d->lock);
    return true;
}

static tw_status
remote_fail_status(twi_dist *d, tw_task_ctx *ctx, tw_error *err)
{
    char msg[FAIL_MAX];
    int k;

    pthread_mutex_lock(&d->lock);
    k = d->fail_rank;
    copy_text(msg, sizeof msg, d->fail_msg);
    pthread_mutex_unlock(&d->lock);
    return dist_fail(d, ctx, err, TW_E_CANCELED, "mpi: rank %d failed: %s", k, msg);
}

static bool
stopping(const twi_dist *d, const tw_task_ctx *ctx)
{
    if (ctx)
        return twi_ctx_canceled(ctx);
    return d->job && twi_job_stopping(d->job);
}

/* Poll the n requests until they complete. Early ends (the job stopping, another rank's
 * failure, an MPI error) fail the task or job and leave the requests posted. */
static tw_status
dist_wait(twi_dist *d, tw_task_ctx *ctx, tw_error *err, MPI_Request *req, int n,
          MPI_Status *stt, const char *what)
{
    int64_t t0 = twi_now_ns();
    tw_status st = TW_OK;
    backoff b;

    backoff_reset(&b);
    for (;;) {
        int done = 0;

        if (MPI_Testall(n, req, &done, stt ? stt : MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            st = dist_fail(d, ctx, err, TW_E_IO, "mpi: %s failed (rank %d)", what, d->rank);
            break;
        }
        if (done)
            break;
        if (remote_failed(d)) {
            st = remote_fail_status(d, ctx, err);
            break;
        }
        if (stopping(d, ctx)) {
            st = twi_error_set(err, TW_E_CANCELED, "%s: canceled while waiting for %s", d->op,
                               what);
            break;
        }
        backoff_wait(&b);
    }
    atomic_fetch_add(&d->wait_ns, twi_now_ns() - t0);
    return st;
}

/* ---- the context */

tw_status
tw_mpi_open(int *argc, char ***argv, tw_mpi **out, tw_error *err)
{
    int inited = 0, finalized = 0, provided = 0;
    bool started = false;
    tw_mpi *c = NULL;

    if (!out)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument");
    MPI_Finalized(&finalized);
    if (finalized)
        return twi_error_set(err, TW_E_NODEV, "mpi: MPI has already been finalised");
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return twi_error_set(err, TW_E_NODEV, "mpi: MPI_Init_thread failed");
        started = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (started)
            MPI_Finalize();
        return twi_error_set(err, started ? TW_E_NODEV : TW_E_INVALID,
                             "mpi: the MPI library gives thread level %d; tilewave needs "
                             "MPI_THREAD_MULTIPLE (%d)",
                             provided, MPI_THREAD_MULTIPLE);
    }
    if (!(c = calloc(1, sizeof *c))) {
        if (started)
            MPI_Finalize();
        return twi_error_set(err, TW_E_NOMEM, "mpi: out of memory");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    /* Errors come back as codes: the library never lets MPI end the process. */
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    c->finalize = started;
    *out = c;
    return TW_OK;
}

void
tw_mpi_close(tw_mpi *c)
{
    if (!c)
        return;
    MPI_Comm_free(&c->comm);
    if (c->finalize)
        MPI_Finalize();
    free(c);
}

int
tw_mpi_get_rank(const tw_mpi *c)
{
    return c ? c->rank : 0;
}

int
tw_mpi_get_size(const tw_mpi *c)
{
    return c ? c->size : 1;
}

void
tw_mpi_abort(tw_mpi *c, int code)
{
    if (c)
        MPI_Abort(c->comm, code);
}

tw_status
tw_mpi_sum(tw_mpi *c, double *values, int n, tw_error *err)
{
    if (!c || !values || n < 1)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument or n < 1");
    if (MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, c->comm) != MPI_SUCCESS)
        return twi_error_set(err, TW_E_IO, "mpi: MPI_Allreduce failed");
    return TW_OK;
}

/* ---- a job's share */

tw_status
twi_dist_create(tw_mpi *c, const char *op, tw_mpi_report *report, twi_dist **out,
                tw_error *err)
{
    twi_dist *d;

    if (!c || !out)
        return twi_error_set(err, TW_E_INVALID, "%s: NULL MPI context", op ? op : "mpi");
    if (report && report->struct_size != sizeof *report)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: report not initialised with tw_mpi_report_init()", op);
    if (!(d = calloc(1, sizeof *d)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", op);
    if (pthread_mutex_init(&d->lock, NULL) != 0) {
        free(d);
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", op);
    }
    d->lock_init = true;
    if (pthread_cond_init(&d->send_cond, NULL) != 0) {
        pthread_mutex_destroy(&d->lock);
        free(d);
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", op);
    }
    d->cond_init = true;
    d->c = c;
    copy_text(d->op, sizeof d->op, op);
    d->report = report;
    d->rank = c->rank;
    d->size = c->size;
    d->halo_from_up = d->halo_from_down = -1;
    *out = d;
    return TW_OK;
}

int
twi_dist_rank(const twi_dist *d)
{
    return d->rank;
}

int
twi_dist_size(const twi_dist *d)
{
    return d->size;
}

void
twi_dist_band(const twi_dist *d, int64_t *ty0, int64_t *ty1)
{
    *ty0 = d->starts[d->rank];
    *ty1 = d->starts[d->rank + 1];
}

int64_t
twi_dist_max_band(const twi_dist *d)
{
    int64_t m = 0;

    for (int r = 0; r < d->size; r++)
        if (d->starts[r + 1] - d->starts[r] > m)
            m = d->starts[r + 1] - d->starts[r];
    return m;
}

/* What each rank says at the partition. */
typedef struct agree_rec {
    int64_t st; /* its setup's tw_status */
    int64_t W, H, tw, th;
    double rate; /* pixels per second for the kind; <= 0: unknown */
    char msg[FAIL_MAX];
} agree_rec;

/* The agreement itself: on the context's communicator, before the job has its own. */
static tw_status
agree(twi_dist *d, const agree_rec *mine, agree_rec **all_out, tw_error *err)
{
    agree_rec *all = malloc((size_t)d->size * sizeof *all);
    MPI_Request req;
    tw_status st;

    if (!all)
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", d->op);
    if (MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE,
                       d->c->comm, &req) != MPI_SUCCESS) {
        free(all);
        return twi_error_set(err, TW_E_IO, "mpi: the ranks cannot agree on the job");
    }
    if ((st = dist_wait(d, NULL, err, &req, 1, NULL, "the partition")) != TW_OK)
        return st; /* `all` stays posted: leaked */
    *all_out = all;
    return TW_OK;
}

tw_status
twi_dist_partition(twi_dist *d, tw_runtime *rt, tw_status local_st, const tw_error *local_err,
                   int64_t W, int64_t H, int32_t tw, int32_t th, const tw_task_kind *kind,
                   tw_error *err)
{
    agree_rec mine, *all = NULL;
    double *rates = NULL;
    bool by_rate = true;
    int64_t tiles_y;
    tw_status st;

    memset(&mine, 0, sizeof mine);
    mine.st = local_st;
    mine.W = W;
    mine.H = H;
    mine.tw = tw;
    mine.th = th;
    mine.rate = local_st == TW_OK && kind ? twi_runtime_rate(rt, kind, (int64_t)tw * th) : -1;
    if (local_st != TW_OK)
        copy_text(mine.msg, sizeof mine.msg,
                  local_err ? local_err->message : tw_status_string(local_st));
    d->partitioned = true; /* from here on, failures go to the other ranks as messages */
    if ((st = agree(d, &mine, &all, local_st != TW_OK ? NULL : err)) != TW_OK)
        return local_st != TW_OK ? local_st : st;
    /* Every rank sees every status: all return an error now, and the lowest rank that failed
     * is the one that tells (tilewave/mpi.h, tw_mpi_report.failed_rank). */
    for (int r = 0; r < d->size; r++) {
        if (all[r].st == TW_OK)
            continue;
        all[r].msg[FAIL_MAX - 1] = '\0';
        report_failure(d, r, true);
        st = local_st != TW_OK ? local_st
                               : twi_error_set(err, TW_E_CANCELED, "mpi: rank %d failed: %s", r,
                                               all[r].msg);
        goto out;
    }
    report_failure(d, 0, true); /* a check below fails on every rank; rank 0 tells */
    for (int r = 1; r < d->size; r++)
        if (all[r].W != all[0].W || all[r].H != all[0].H || all[r].tw != all[0].tw ||
            all[r].th != all[0].th) {
            st = twi_error_set(err, TW_E_INVALID,
                               "mpi: rank %d sees a %lldx%lld image in %lldx%lld tiles, rank 0 "
                               "%lldx%lld in %lldx%lld: give every rank the same input and "
                               "options",
                               r, (long long)all[r].W, (long long)all[r].H, (long long)all[r].tw,
                               (long long)all[r].th, (long long)all[0].W, (long long)all[0].H,
                               (long long)all[0].tw, (long long)all[0].th);
            goto out;
        }
    tiles_y = (H + th - 1) / th;
    if (tiles_y < d->size) {
        st = twi_error_set(err, TW_E_INVALID,
                           "mpi: %lld rows of %d-pixel tiles cannot make %d bands; use smaller "
                           "tiles (the options' tile_h, or tile.size) or fewer ranks",
                           (long long)tiles_y, (int)th, d->size);
        goto out;
    }
    if (!(d->starts = malloc((size_t)(d->size + 1) * sizeof *d->starts)) ||
        !(rates = malloc((size_t)d->size * sizeof *rates))) {
        st = twi_error_set(err, TW_E_NOMEM, "%s: out of memory", d->op);
        goto out;
    }
    /* By the rates when every rank knows its own, else by rows. */
    for (int r = 0; r < d->size; r++)
        by_rate &= all[r].rate > 0;
    for (int r = 0; r < d->size; r++)
        rates[r] = by_rate ? all[r].rate : 1.0;
    if ((st = twi_dist_split(tiles_y, d->size, rates, d->starts)) != TW_OK) {
        twi_error_set(err, st, "mpi: cannot split %lld rows of tiles", (long long)tiles_y);
        goto out;
    }
    /* Every rank is here: the blocking collectives cannot wait for one that gave up. */
    if (MPI_Comm_dup(d->c->comm, &d->comm) != MPI_SUCCESS) {
        st = twi_error_set(err, TW_E_IO, "mpi: MPI_Comm_dup failed");
        goto out;
    }
    if (MPI_Comm_split(d->comm, 0, d->size - 1 - d->rank, &d->rcomm) != MPI_SUCCESS) {
        MPI_Comm_free(&d->comm);
        st = twi_error_set(err, TW_E_IO, "mpi: MPI_Comm_split failed");
        goto out;
    }
    d->comms = true;
    d->W = W;
    d->H = H;
    d->tw = tw;
    d->th = th;
    if (d->report) {
        d->report->failed_rank = -1;
        d->report->all_failed = false;
        int64_t y0 = d->starts[d->rank] * th, y1 = d->starts[d->rank + 1] * th;

        d->report->rank = d->rank;
        d->report->size = d->size;
        d->report->row0 = y0;
        d->report->rows = (y1 < H ? y1 : H) - y0;
        d->report->tile_rows = d->starts[d->rank + 1] - d->starts[d->rank];
    }
    TW_INFO(d->op, "rank %d of %d: rows of tiles %lld..%lld of %lld (%s)", d->rank, d->size,
            (long long)d->starts[d->rank], (long long)d->starts[d->rank + 1] - 1,
            (long long)tiles_y, by_rate ? "balanced by the cost models" : "by rows");
out:
    free(all);
    free(rates);
    return st;
}

void
twi_dist_abandon(twi_dist *d, tw_status st, const tw_error *err)
{
    tw_error ignored;

    if (!d || d->partitioned)
        return;
    (void)twi_dist_partition(d, NULL, st, err, 0, 0, 0, 0, NULL, &ignored);
}

/* ---- failures */

static void
report_failure(twi_dist *d, int rank, bool all)
{
    if (d->report && d->report->failed_rank < 0) {
        d->report->failed_rank = rank;
        d->report->all_failed = all;
    }
}

void
twi_dist_failed_everywhere(twi_dist *d, int rank)
{
    d->all_failed = true;
    report_failure(d, rank, true);
}

/* Tell every other rank that this one failed (once): small messages, sent eagerly. */
static void
notify(twi_dist *d, const char *msg)
{
    if (!d->comms || d->notified || d->all_failed || atomic_load(&d->remote_fail))
        return;
    d->notified = true;
    copy_text(d->notify_msg, sizeof d->notify_msg, msg ? msg : "failed");
    for (int r = 0; r < d->size && d->n_notify < 64; r++) {
        if (r == d->rank)
            continue;
        if (MPI_Isend(d->notify_msg, (int)strlen(d->notify_msg) + 1, MPI_CHAR, r, TAG_FAIL,
                      d->comm, &d->notify_req[d->n_notify]) == MPI_SUCCESS)
            d->n_notify++;
    }
}

/* ---- the output through rank 0 */

static void *recv_main(void *arg);
static void *send_progress(void *arg);

tw_status
twi_dist_launch(twi_dist *d, tw_job *job, twi_stream *const *outs, int n_outs, tw_error *err)
{
    int64_t rows0;
    tw_status st;

    d->job = job;
    if (n_outs > TWI_DIST_MAX_OUTS)
        return twi_error_set(err, TW_E_INVALID, "%s: %d outputs", d->op, n_outs);
    for (int i = 0; i < n_outs; i++)
        d->outs[i] = outs[i];
    d->n_outs = n_outs;
    if (d->rank != 0) {
        /* Sends in flight: as many as rank 0 takes in at once, at most 16 (of 32 MB at most). */
        d->send_window = 2 * tw_runtime_get_worker_count(twi_job_runtime(job)) + 2;
        if (d->send_window > 16)
            d->send_window = 16;
        if (!(d->sends = calloc((size_t)d->send_window, sizeof *d->sends)) ||
            !(d->send_bufs = calloc((size_t)d->send_window, sizeof *d->send_bufs)))
            return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", d->op);
        if (n_outs > 0) {
            if (pthread_create(&d->progress_thread, NULL, send_progress, d) != 0)
                return twi_error_set(err, TW_E_NOMEM, "%s: cannot start the sending thread",
                                     d->op);
            d->progress_started = true;
        }
        return TW_OK;
    }
    if (n_outs == 0)
        return TW_OK;
    rows0 = d->starts[1] * d->th < d->H ? d->starts[1] * d->th : d->H;
    d->recv_expect = (int64_t)n_outs * d->W * (d->H - rows0);
    d->put_limit = 2 * (int64_t)tw_runtime_get_worker_count(twi_job_runtime(job)) + 2;
    if ((st = twi_job_hold(job)) != TW_OK)
        return twi_error_set(err, st, "%s: the job has ended", d->op);
    if (pthread_create(&d->recv_thread, NULL, recv_main, d) != 0) {
        twi_job_unhold(job);
        return twi_error_set(err, TW_E_NOMEM, "%s: cannot start the receiving thread", d->op);
    }
    d->recv_started = true;
    return TW_OK;
}

/* Rank 0's receiver: each result message becomes a put task of the job. */
static void *
recv_main(void *arg)
{
    twi_dist *d = arg;
    int64_t got = 0;
    backoff b;

    backoff_reset(&b);
    while (got < d->recv_expect) {
        MPI_Message msg;
        MPI_Status stt;
        MPI_Request req;
        put_msg *pm;
        out_hdr h;
        tw_task *t = NULL;
        int flag = 0, count = 0;
        tw_status st;

        if (twi_job_stopping(d->job))
            break;
        if (remote_failed(d)) {
            (void)remote_fail_status(d, NULL, NULL);
            break;
        }
        if (atomic_load(&d->puts_waiting) >= d->put_limit ||
            MPI_Improbe(MPI_ANY_SOURCE, TAG_OUT, d->comm, &flag, &msg, &stt) != MPI_SUCCESS ||
            !flag) {
            backoff_wait(&b);
            continue;
        }
        backoff_reset(&b);
        MPI_Get_count(&stt, MPI_BYTE, &count);
        if (count < (int)sizeof h || !(pm = malloc(sizeof *pm + (size_t)count))) {
            (void)twi_job_fail(d->job, count < (int)sizeof h ? TW_E_INTERNAL : TW_E_NOMEM,
                               "mpi: cannot take a result message of %d bytes from rank %d",
                               count, stt.MPI_SOURCE);
            break;
        }
        pm->d = d;
        pm->bytes = (size_t)count;
        if (MPI_Imrecv(pm->data, count, MPI_BYTE, &msg, &req) != MPI_SUCCESS ||
            dist_wait(d, NULL, NULL, &req, 1, NULL, "receiving results") != TW_OK) {
            (void)twi_job_fail(d->job, TW_E_IO, "mpi: receiving results from rank %d failed",
                               stt.MPI_SOURCE);
            break; /* pm stays with the posted receive */
        }
        memcpy(&h, pm->data, sizeof h);
        if (h.out < 0 || h.out >= d->n_outs || h.w < 1 || h.h < 1 || h.x < 0 || h.y < 0 ||
            h.x + h.w > d->W || h.y + h.h > d->H || h.channels < 1 || h.channels > 4 ||
            (size_t)count != sizeof h + (size_t)h.w * (size_t)h.h * (size_t)h.channels *
                                            tw_sample_size((tw_sample_type)h.type)) {
            free(pm);
            (void)twi_job_fail(d->job, TW_E_INTERNAL, "mpi: a malformed result message from "
                                                      "rank %d",
                               stt.MPI_SOURCE);
            break;
        }
        got += (int64_t)h.w * h.h;
        atomic_fetch_add(&d->output_bytes, count);
        atomic_fetch_add(&d->puts_waiting, 1);
        if ((st = twi_task_create(d->job, &put_kind, pm, free, &t)) != TW_OK) {
            free(pm);
            (void)twi_job_fail(d->job, st, "mpi: cannot submit a result tile (%s)",
                               tw_status_string(st));
            break;
        }
        twi_job_add_total(d->job, 1);
        st = twi_task_submit(t);
        twi_task_release(t);
        if (st != TW_OK) {
            (void)twi_job_fail(d->job, st, "mpi: cannot submit a result tile (%s)",
                               tw_status_string(st));
            break;
        }
    }
    /* The job may end here, on this thread. */
    twi_job_unhold(d->job);
    return NULL;
}

static tw_status
put_cpu(tw_task_ctx *ctx, void *arg)
{
    put_msg *pm = arg;
    twi_dist *d = pm->d;
    tw_tile_view v;
    out_hdr h;
    tw_error err;
    tw_status st;

    memcpy(&h, pm->data, sizeof h);
    memset(&v, 0, sizeof v);
    v.w = h.w;
    v.h = h.h;
    v.channels = h.channels;
    v.type = (tw_sample_type)h.type;
    v.stride = (int64_t)((size_t)h.w * (size_t)h.channels * tw_sample_size(v.type));
    v.x0 = h.x;
    v.y0 = h.y;
    v.data = pm->data + sizeof h;
    st = twi_put_cancelable(ctx, d->outs[h.out]->assembler, h.x, h.y, &v, &err);
    atomic_fetch_sub(&d->puts_waiting, 1);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    twi_job_add_done(d->job, 1);
    return TW_OK;
}

static const tw_task_kind put_kind = {
    .name = "mpi.put",
    .devices = TW_DEVICE_CPU,
    .cpu = put_cpu,
};

/* Under d->lock: free the buffers of the sends that completed. */
static void
sends_reap(twi_dist *d)
{
    int done = 0, idx[64], n = d->n_sends;

    while (n > 0) {
        int k = n < 64 ? n : 64, base = n - k;

        if (MPI_Testsome(k, d->sends + base, &done, idx, MPI_STATUSES_IGNORE) != MPI_SUCCESS ||
            done == MPI_UNDEFINED)
            done = 0;
        for (int i = 0; i < done; i++) {
            free(d->send_bufs[base + idx[i]]);
            d->send_bufs[base + idx[i]] = NULL;
        }
        n = base;
    }
    /* The sends still in flight, packed at the front. */
    for (int i = 0; i < d->n_sends; i++)
        if (d->send_bufs[i]) {
            d->sends[n] = d->sends[i];
            d->send_bufs[n++] = d->send_bufs[i];
        }
    for (int i = n; i < d->n_sends; i++)
        d->send_bufs[i] = NULL;
    d->n_sends = n;
}

/* Ranks other than 0: a large send moves only while its rank calls MPI (Open MPI's ob1 has no
 * progress of its own), and the workers that posted the sends are busy computing; this thread
 * keeps the sends in flight moving (every 100 us while there are some), so that rank 0 never
 * waits for a rank that is not listening. */
static void *
send_progress(void *arg)
{
    twi_dist *d = arg;
    struct timespec nap = {0, 100000};

    pthread_mutex_lock(&d->lock);
    while (!d->send_stop) {
        if (d->n_sends == 0) {
            pthread_cond_wait(&d->send_cond, &d->lock);
            continue;
        }
        sends_reap(d);
        pthread_mutex_unlock(&d->lock);
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&d->lock);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static void
progress_stop(twi_dist *d)
{
    if (!d->progress_started)
        return;
    pthread_mutex_lock(&d->lock);
    d->send_stop = true;
    pthread_cond_signal(&d->send_cond);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->progress_thread, NULL);
    d->progress_started = false;
}

/* Wait until fewer than `keep` sends are in flight (0: all done), then, with `buf`, send it
 * (`bytes`) and add it to them, in the same critical section; ends early like dist_wait. */
static tw_status
sends_wait(twi_dist *d, tw_task_ctx *ctx, tw_error *err, int keep, void *buf, size_t bytes)
{
    int64_t t0 = twi_now_ns();
    tw_status st = TW_OK;
    backoff b;

    backoff_reset(&b);
    pthread_mutex_lock(&d->lock);
    for (;;) {
        sends_reap(d);
        if (d->n_sends < (keep ? keep : 1)) {
            if (buf && MPI_Isend(buf, (int)bytes, MPI_BYTE, 0, TAG_OUT, d->comm,
                                 &d->sends[d->n_sends]) != MPI_SUCCESS)
                st = dist_fail(d, ctx, err, TW_E_IO, "mpi: sending results to rank 0 failed");
            else if (buf)
                d->send_bufs[d->n_sends++] = buf;
            pthread_cond_signal(&d->send_cond);
            break;
        }
        pthread_mutex_unlock(&d->lock);
        if (remote_failed(d))
            st = remote_fail_status(d, ctx, err);
        else if (stopping(d, ctx))
            st = twi_error_set(err, TW_E_CANCELED, "%s: canceled while sending results",
                               d->op);
        else
            backoff_wait(&b);
        pthread_mutex_lock(&d->lock);
        if (st != TW_OK)
            break;
    }
    pthread_mutex_unlock(&d->lock);
    atomic_fetch_add(&d->wait_ns, twi_now_ns() - t0);
    return st;
}

tw_status
twi_dist_put(twi_dist *d, tw_task_ctx *ctx, int out, int64_t x, int64_t y, const tw_tile_view *v)
{
    size_t row = (size_t)v->w * (size_t)v->channels * tw_sample_size(v->type);
    int32_t step;
    tw_error err;
    tw_status st;

    if (d->rank == 0) {
        if ((st = twi_put_cancelable(ctx, d->outs[out]->assembler, x, y, v, &err)) != TW_OK)
            return twi_ctx_fail(ctx, st, "%s", err.message);
        return TW_OK;
    }
    /* Messages of at most OUT_MSG_MAX bytes: rank 0 holds a few of them per worker. */
    step = row ? (int32_t)(OUT_MSG_MAX / row) : v->h;
    if (step < 1)
        step = 1;
    for (int32_t r = 0; r < v->h; r += step) {
        int32_t n = v->h - r < step ? v->h - r : step;
        size_t bytes = sizeof(out_hdr) + (size_t)n * row;
        out_hdr h = {x, y + r, v->w, n, v->channels, (int32_t)v->type, out, 0};
        unsigned char *buf;

        if (bytes > (size_t)INT32_MAX)
            return twi_ctx_fail(ctx, TW_E_INVALID, "mpi: a row of %zu bytes is too long", row);
        if (!(buf = malloc(bytes)))
            return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", d->op);
        memcpy(buf, &h, sizeof h);
        for (int32_t k = 0; k < n; k++)
            memcpy(buf + sizeof h + (size_t)k * row,
                   (const char *)v->data + (int64_t)(r + k) * v->stride, row);
        /* When there is room in the window, the send joins it and the task goes on. */
        if ((st = sends_wait(d, ctx, NULL, d->send_window, buf, bytes)) != TW_OK) {
            free(buf);
            return st;
        }
        atomic_fetch_add(&d->output_bytes, (long long)bytes);
    }
    return TW_OK;
}

/* ---- collectives */

static MPI_Datatype
mpi_type(twi_dist_type t)
{
    return t == TWI_DIST_I32 ? MPI_INT32_T : t == TWI_DIST_I64 ? MPI_INT64_T : MPI_UINT64_T;
}

static size_t
type_size(twi_dist_type t)
{
    return t == TWI_DIST_I32 ? 4 : 8;
}

static MPI_Op
mpi_op(twi_dist_op op)
{
    return op == TWI_DIST_SUM ? MPI_SUM : op == TWI_DIST_MIN ? MPI_MIN : MPI_MAX;
}

tw_status
twi_dist_allreduce(twi_dist *d, tw_task_ctx *ctx, void *buf, int64_t n, twi_dist_type t,
                   twi_dist_op op)
{
    size_t bytes = (size_t)n * type_size(t);
    void *tmp;
    MPI_Request req;
    tw_status st;

    if (n < 1 || n > INT32_MAX)
        return twi_ctx_fail(ctx, TW_E_INVALID, "mpi: allreduce of %lld values", (long long)n);
    if (!(tmp = malloc(bytes)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", d->op);
    memcpy(tmp, buf, bytes);
    if (MPI_Iallreduce(MPI_IN_PLACE, tmp, (int)n, mpi_type(t), mpi_op(op), d->comm, &req) !=
        MPI_SUCCESS) {
        free(tmp);
        return twi_ctx_fail(ctx, TW_E_IO, "mpi: MPI_Iallreduce failed");
    }
    if ((st = dist_wait(d, ctx, NULL, &req, 1, NULL, "a reduction")) != TW_OK)
        return st;
    memcpy(buf, tmp, bytes);
    free(tmp);
    atomic_fetch_add(&d->exchange_bytes, (long long)bytes);
    return TW_OK;
}

tw_status
twi_dist_exscan_i32(twi_dist *d, tw_task_ctx *ctx, int32_t *buf, int64_t n, bool up,
                    twi_dist_op op, int32_t none)
{
    size_t bytes = (size_t)n * sizeof *buf;
    int32_t *tmp;
    MPI_Request req;
    bool first = up ? d->rank == d->size - 1 : d->rank == 0;
    tw_status st;

    if (n < 1 || n > INT32_MAX)
        return twi_ctx_fail(ctx, TW_E_INVALID, "mpi: scan of %lld values", (long long)n);
    if (!(tmp = malloc(bytes)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", d->op);
    memcpy(tmp, buf, bytes);
    if (MPI_Iexscan(MPI_IN_PLACE, tmp, (int)n, MPI_INT32_T, mpi_op(op), up ? d->rcomm : d->comm,
                    &req) != MPI_SUCCESS) {
        free(tmp);
        return twi_ctx_fail(ctx, TW_E_IO, "mpi: MPI_Iexscan failed");
    }
    if ((st = dist_wait(d, ctx, NULL, &req, 1, NULL, "a scan")) != TW_OK)
        return st;
    /* MPI leaves the first rank's result undefined. */
    for (int64_t i = 0; i < n; i++)
        buf[i] = first ? none : tmp[i];
    free(tmp);
    if (!(up ? d->rank == 0 : d->rank == d->size - 1))
        atomic_fetch_add(&d->exchange_bytes, (long long)bytes);
    return TW_OK;
}

tw_status
twi_dist_allgather(twi_dist *d, tw_task_ctx *ctx, const void *mine, size_t bytes, void *all)
{
    unsigned char *in, *tmp;
    MPI_Request req;
    tw_status st;

    if (bytes > (size_t)INT32_MAX / (size_t)d->size)
        return twi_ctx_fail(ctx, TW_E_INVALID, "mpi: allgather of %zu bytes", bytes);
    if (!(in = malloc(bytes + (size_t)d->size * bytes)))
        return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", d->op);
    tmp = in + bytes;
    memcpy(in, mine, bytes);
    if (MPI_Iallgather(in, (int)bytes, MPI_BYTE, tmp, (int)bytes, MPI_BYTE, d->comm, &req) !=
        MPI_SUCCESS) {
        free(in);
        return twi_ctx_fail(ctx, TW_E_IO, "mpi: MPI_Iallgather failed");
    }
    if ((st = dist_wait(d, ctx, NULL, &req, 1, NULL, "an allgather")) != TW_OK)
        return st;
    memcpy(all, tmp, (size_t)d->size * bytes);
    free(in);
    atomic_fetch_add(&d->exchange_bytes, (long long)bytes);
    return TW_OK;
}

/* Payloads of gather and scatter travel as 8-byte words: MPI counts are ints, so one rank's
 * part may reach 16 GiB. */
static int
words(int64_t bytes)
{
    return (int)((bytes + 7) / 8);
}

tw_status
twi_dist_gather(twi_dist *d, tw_task_ctx *ctx, const void *buf, int64_t n, void **all,
                int64_t *lens)
{
    int64_t *tmp_lens = NULL, total = 0;
    int *counts = NULL, *displs = NULL;
    uint64_t *in = NULL, *out = NULL;
    MPI_Request req;
    tw_status st;

    *all = NULL;
    if (n < 0 || (n + 7) / 8 > INT32_MAX)
        return twi_ctx_fail(ctx, TW_E_INVALID, "mpi: gather of %lld bytes", (long long)n);
    if (!(tmp_lens = malloc((size_t)d->size * sizeof *tmp_lens)) ||
        !(in = calloc((size_t)words(n) + 1, 8)))
        goto nomem;
    memcpy(in, buf, (size_t)n);
    if (MPI_Igather(&n, 1, MPI_INT64_T, tmp_lens, 1, MPI_INT64_T, 0, d->comm, &req) !=
        MPI_SUCCESS) {
        st = twi_ctx_fail(ctx, TW_E_IO, "mpi: MPI_Igather failed");
        goto out;
    }
    if ((st = dist_wait(d, ctx, NULL, &req, 1, NULL, "a gather")) != TW_OK)
        return st;
    if (d->rank == 0) {
        if (!(counts = malloc((size_t)d->size * sizeof *counts)) ||
            !(displs = malloc((size_t)d->size * sizeof *displs)))
            goto nomem;
        for (int r = 0; r < d->size; r++) {
            if ((total + words(tmp_lens[r])) > INT32_MAX) {
                st = twi_ctx_fail(ctx, TW_E_INVALID,
                                  "mpi: the ranks' parts exceed 16 GiB for one gather");
                goto out;
            }
            counts[r] = words(tmp_lens[r]);
            displs[r] = (int)total;
            total += counts[r];
        }
        if (!(out = malloc((size_t)(total ? total : 1) * 8)))
            goto nomem;
    }
    /* Should rank 0 have failed above, the others wait here until its failure message
     * comes (its job ends, twi_dist_finish tells them). */
    if (MPI_Igatherv(in, words(n), MPI_UINT64_T, out, counts, displs, MPI_UINT64_T, 0, d->comm,
                     &req) != MPI_SUCCESS) {
        st = twi_ctx_fail(ctx, TW_E_IO, "mpi: MPI_Igatherv failed");
        goto out;
    }
    if ((st = dist_wait(d, ctx, NULL, &req, 1, NULL, "a gather")) != TW_OK)
        return st;
    if (d->rank == 0) {
        /* Packed back to the byte lengths, in rank order. */
        unsigned char *p = (unsigned char *)out;
        int64_t at = 0;

        for (int r = 0; r < d->size; r++) {
            memmove(p + at, p + (size_t)displs[r] * 8, (size_t)tmp_lens[r]);
            at += tmp_lens[r];
            lens[r] = tmp_lens[r];
        }
        *all = out;
        out = NULL;
    } else {
        atomic_fetch_add(&d->exchange_bytes, (long long)n);
    }
    st = TW_OK;
    goto out;
nomem:
    st = twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for a gather", d->op);
out:
    free(tmp_lens);
    free(counts);
    free(displs);
    free(in);
    free(out);
    return st;
}

tw_status
twi_dist_scatter(twi_dist *d, tw_task_ctx *ctx, const void *all, const int64_t *lens,
                 void **part, int64_t *n)
{
    int *counts = NULL, *displs = NULL;
    uint64_t *in = NULL, *out = NULL;
    int64_t my = 0, total = 0;
    MPI_Request req;
    tw_status st;

    *part = NULL;
    if (d->rank == 0) {
        const unsigned char *p = all;
        int64_t at = 0;

        if (!(counts = malloc((size_t)d->size * sizeof *counts)) ||
            !(displs = malloc((size_t)d->size * sizeof *displs)))
            goto nomem;
        for (int r = 0; r < d->size; r++) {
            if (lens[r] < 0 || total + words(lens[r]) > INT32_MAX) {
                st = twi_ctx_fail(ctx, TW_E_INVALID,
                                  "mpi: the ranks' parts exceed 16 GiB for one scatter");
                goto out;
            }
            counts[r] = words(lens[r]);
            displs[r] = (int)total;
            total += counts[r];
        }
        if (!(in = calloc((size_t)(total ? total : 1), 8)))
            goto nomem;
        for (int r = 0; r < d->size; r++) {
            memcpy((unsigned char *)in + (size_t)displs[r] * 8, p + at, (size_t)lens[r]);
            at += lens[r];
            if (r > 0)
                atomic_fetch_add(&d->exchange_bytes, (long long)lens[r]);
        }
    }
    if (MPI_Iscatter(lens, 1, MPI_INT64_T, &my, 1, MPI_INT64_T, 0, d->comm, &req) !=
        MPI_SUCCESS) {
        st = twi_ctx_fail(ctx, TW_E_IO, "mpi: MPI_Iscatter failed");
        goto out;
    }
    if ((st = dist_wait(d, ctx, NULL, &req, 1, NULL, "a scatter")) != TW_OK)
        return st;
    if (!(out = malloc((size_t)(words(my) ? words(my) : 1) * 8)))
        goto nomem;
    if (MPI_Iscatterv(in, counts, displs, MPI_UINT64_T, out, words(my), MPI_UINT64_T, 0,
                      d->comm, &req) != MPI_SUCCESS) {
        st = twi_ctx_fail(ctx, TW_E_IO, "mpi: MPI_Iscatterv failed");
        goto out;
    }
    if ((st = dist_wait(d, ctx, NULL, &req, 1, NULL, "a scatter")) != TW_OK)
        return st;
    *part = out;
    *n = my;
    out = NULL;
    st = TW_OK;
    goto out;
nomem:
    st = twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory for a scatter", d->op);
out:
    free(counts);
    free(displs);
    free(in);
    free(out);
    return st;
}

/* ---- edge rows */

tw_status
twi_dist_halo_post(twi_dist *d, tw_task_ctx *ctx, const void *top, const void *bottom,
                   size_t bytes, bool send_top, bool send_bottom)
{
    unsigned char *send_up, *send_down, *recv_up, *recv_down;
    int n = 0;

    if (bytes > (size_t)INT32_MAX)
        return twi_ctx_fail(ctx, TW_E_INVALID, "mpi: rows of %zu bytes", bytes);
    if (!d->halo) {
        if (!(d->halo = malloc(4 * bytes)))
            return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", d->op);
        d->halo_bytes = bytes;
    }
    send_up = d->halo;
    send_down = send_up + bytes;
    recv_up = send_down + bytes;
    recv_down = recv_up + bytes;
    d->halo_from_up = d->halo_from_down = -1;
    /* An empty message says "unchanged": the receiver always knows one is coming. */
    if (d->rank > 0) {
        if (send_top)
            memcpy(send_up, top, bytes);
        if (MPI_Isend(send_up, send_top ? (int)bytes : 0, MPI_BYTE, d->rank - 1, TAG_HALO_UP,
                      d->comm, &d->halo_req[n++]) != MPI_SUCCESS ||
            MPI_Irecv(recv_up, (int)bytes, MPI_BYTE, d->rank - 1, TAG_HALO_DOWN, d->comm,
                      &d->halo_req[n]) != MPI_SUCCESS)
            return twi_ctx_fail(ctx, TW_E_IO, "mpi: posting the edge rows failed");
        d->halo_from_up = n++;
        if (send_top)
            atomic_fetch_add(&d->exchange_bytes, (long long)bytes);
    }
    if (d->rank < d->size - 1) {
        if (send_bottom)
            memcpy(send_down, bottom, bytes);
        if (MPI_Isend(send_down, send_bottom ? (int)bytes : 0, MPI_BYTE, d->rank + 1,
                      TAG_HALO_DOWN, d->comm, &d->halo_req[n++]) != MPI_SUCCESS ||
            MPI_Irecv(recv_down, (int)bytes, MPI_BYTE, d->rank + 1, TAG_HALO_UP, d->comm,
                      &d->halo_req[n]) != MPI_SUCCESS)
            return twi_ctx_fail(ctx, TW_E_IO, "mpi: posting the edge rows failed");
        d->halo_from_down = n++;
        if (send_bottom)
            atomic_fetch_add(&d->exchange_bytes, (long long)bytes);
    }
    d->halo_n = n;
    d->halo_posted = true;
    return TW_OK;
}

tw_status
twi_dist_halo_wait(twi_dist *d, tw_task_ctx *ctx, void *from_up, void *from_down, size_t bytes,
                   bool *got_up, bool *got_down)
{
    MPI_Status stt[4];
    tw_status st;
    int count;

    *got_up = *got_down = false;
    if (!d->halo_posted)
        return TW_OK;
    if (bytes != d->halo_bytes)
        return twi_ctx_fail(ctx, TW_E_INTERNAL, "mpi: edge rows changed size");
    if ((st = dist_wait(d, ctx, NULL, d->halo_req, d->halo_n, stt, "the edge rows")) != TW_OK)
        return st;
    d->halo_posted = false;
    if (d->halo_from_up >= 0) {
        MPI_Get_count(&stt[d->halo_from_up], MPI_BYTE, &count);
        if ((*got_up = count == (int)bytes) && from_up)
            memcpy(from_up, d->halo + 2 * bytes, bytes);
    }
    if (d->halo_from_down >= 0) {
        MPI_Get_count(&stt[d->halo_from_down], MPI_BYTE, &count);
        if ((*got_down = count == (int)bytes) && from_down)
            memcpy(from_down, d->halo + 3 * bytes, bytes);
    }
    return TW_OK;
}

void
twi_dist_count_round(twi_dist *d)
{
    d->rounds++;
}

/* ---- the end */

tw_status
twi_dist_finish(twi_dist *d, tw_status st, const char *msg, tw_error *err)
{
    tw_mpi_report *r = d->report;
    int64_t sums[2], maxs[3];
    MPI_Request req[2];

    d->finished = true;
    if (r) {
        r->rounds = d->rounds;
        r->exchange_bytes = atomic_load(&d->exchange_bytes);
        r->output_bytes = atomic_load(&d->output_bytes);
        r->wait_s = 1e-9 * (double)atomic_load(&d->wait_ns);
    }
    if (st != TW_OK) {
        if (atomic_load(&d->remote_fail)) {
            pthread_mutex_lock(&d->lock);
            report_failure(d, d->fail_rank, false);
            pthread_mutex_unlock(&d->lock);
        } else {
            report_failure(d, d->rank, false);
        }
        notify(d, msg);
        return st;
    }
    if (!d->comms)
        return st;
    /* The last results reach rank 0 before this rank says it is done. */
    if (d->n_sends && (st = sends_wait(d, NULL, err, 0, NULL, 0)) != TW_OK)
        return st;
    progress_stop(d);
    /* The run's totals: the output counted once, on the senders. */
    sums[0] = atomic_load(&d->exchange_bytes);
    sums[1] = d->rank == 0 ? 0 : atomic_load(&d->output_bytes);
    maxs[0] = atomic_load(&d->wait_ns);
    maxs[1] = r ? r->rows : 0;
    maxs[2] = r ? -r->rows : 0;
    if (MPI_Iallreduce(MPI_IN_PLACE, sums, 2, MPI_INT64_T, MPI_SUM, d->comm, &req[0]) !=
            MPI_SUCCESS ||
        MPI_Iallreduce(MPI_IN_PLACE, maxs, 3, MPI_INT64_T, MPI_MAX, d->comm, &req[1]) !=
            MPI_SUCCESS)
        return twi_error_set(err, TW_E_IO, "mpi: the run's totals failed");
    if ((st = dist_wait(d, NULL, err, req, 2, NULL, "the run's totals")) != TW_OK)
        return st;
    if (r) {
        r->total_exchange_bytes = sums[0];
        r->total_output_bytes = sums[1];
        r->max_wait_s = 1e-9 * (double)maxs[0];
        r->rows_max = maxs[1];
        r->rows_min = -maxs[2];
    }
    return TW_OK;
}

void
twi_dist_destroy(twi_dist *d)
{
    if (!d)
        return;
    if (d->recv_started)
        pthread_join(d->recv_thread, NULL);
    progress_stop(d);
    if (d->partitioned && !d->finished)
        notify(d, "its job could not start");
    /* Failure messages go out eagerly; give them a moment before the communicator goes. */
    if (d->n_notify) {
        int64_t t0 = twi_now_ns();
        int done = 0;

        while (MPI_Testall(d->n_notify, d->notify_req, &done, MPI_STATUSES_IGNORE) ==
                   MPI_SUCCESS &&
               !done && twi_now_ns() - t0 < 200000000)
            sched_yield();
        if (!done) /* the buffer is in d: keep d */
            return;
    }
    if (d->comms) {
        MPI_Comm_free(&d->rcomm);
        MPI_Comm_free(&d->comm);
    }
    /* A wait that ended early leaves its edge-row transfers posted: keep their buffers; so
     * for the result sends that did not complete. */
    if (!d->halo_posted)
        free(d->halo);
    if (d->sends) {
        pthread_mutex_lock(&d->lock);
        sends_reap(d);
        pthread_mutex_unlock(&d->lock);
        if (d->n_sends == 0) {
            free(d->sends);
            free(d->send_bufs);
        }
    }
    free(d->starts);
    if (d->cond_init)
        pthread_cond_destroy(&d->send_cond);
    if (d->lock_init)
        pthread_mutex_destroy(&d->lock);
    free(d);
}

/* ---- queues */

struct tw_mpi_queue {
    tw_mpi *c;
    MPI_Comm comm;
    int64_t n;
    atomic_llong next;
    pthread_t server;
    bool server_started;
    bool done; /* this rank got -1 */
};

/* Rank 0's server: answers each request (an empty message) with the next item, until every
 * other rank has had its -1 or left early (a one-byte message, no answer). */
static void *
queue_server(void *arg)
{
    tw_mpi_queue *q = arg;
    int left = q->c->size - 1;
    backoff b;

    backoff_reset(&b);
    while (left > 0) {
        MPI_Message msg;
        MPI_Status stt;
        int flag = 0, count = 0;
        int64_t item;
        char leave;

        if (MPI_Improbe(MPI_ANY_SOURCE, TAG_QREQ, q->comm, &flag, &msg, &stt) != MPI_SUCCESS)
            break;
        if (!flag) {
            backoff_wait(&b);
            continue;
        }
        backoff_reset(&b);
        MPI_Get_count(&stt, MPI_BYTE, &count);
        MPI_Mrecv(&leave, 1, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        if (count > 0) {
            left--;
            continue;
        }
        item = atomic_fetch_add(&q->next, 1);
        if (item >= q->n) {
            item = -1;
            left--;
        }
        if (MPI_Send(&item, 1, MPI_INT64_T, stt.MPI_SOURCE, TAG_QREP, q->comm) != MPI_SUCCESS)
            break;
    }
    return NULL;
}

tw_status
tw_mpi_queue_create(tw_mpi *c, int64_t n, tw_mpi_queue **out, tw_error *err)
{
    tw_mpi_queue *q;

    if (!c || !out || n < 0)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument or n < 0");
    if (!(q = calloc(1, sizeof *q)))
        return twi_error_set(err, TW_E_NOMEM, "mpi: out of memory");
    q->c = c;
    q->n = n;
    atomic_init(&q->next, 0);
    if (MPI_Comm_dup(c->comm, &q->comm) != MPI_SUCCESS) {
        free(q);
        return twi_error_set(err, TW_E_IO, "mpi: MPI_Comm_dup failed");
    }
    if (c->rank == 0 && c->size > 1) {
        if (pthread_create(&q->server, NULL, queue_server, q) != 0) {
            MPI_Comm_free(&q->comm);
            free(q);
            return twi_error_set(err, TW_E_NOMEM, "mpi: cannot start the queue's thread");
        }
        q->server_started = true;
    }
    *out = q;
    return TW_OK;
}

tw_status
tw_mpi_queue_next(tw_mpi_queue *q, int64_t *item, tw_error *err)
{
    int64_t i = -1;

    if (!q || !item)
        return twi_error_set(err, TW_E_INVALID, "mpi: NULL argument");
    if (q->done) {
        *item = -1;
        return TW_OK;
    }
    if (q->c->rank == 0) {
        i = atomic_fetch_add(&q->next, 1);
        if (i >= q->n)
            i = -1;
    } else if (MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_QREQ, q->comm) != MPI_SUCCESS ||
               MPI_Recv(&i, 1, MPI_INT64_T, 0, TAG_QREP, q->comm, MPI_STATUS_IGNORE) !=
                   MPI_SUCCESS) {
        return twi_error_set(err, TW_E_IO, "mpi: asking rank 0 for the next item failed");
    }
    q->done = i < 0;
    *item = i;
    return TW_OK;
}

void
tw_mpi_queue_destroy(tw_mpi_queue *q)
{
    if (!q)
        return;
    /* A rank that stops before its -1 (interrupted) signs off, so that rank 0's server ends. */
    if (q->c->rank != 0 && !q->done) {
        char leave = 1;

        MPI_Send(&leave, 1, MPI_BYTE, 0, TAG_QREQ, q->comm);
    }
    if (q->server_started)
        pthread_join(q->server, NULL);
    MPI_Comm_free(&q->comm);
    free(q);
}
