/* SPDX-License-Identifier: MIT */
/* tilewave example: a long-running service holding one runtime, taking jobs on a UNIX socket. */
/*
 * One process, one tw_runtime, any number of clients. Each client connection carries lines of
 * text, one request per line and one reply line per request (README.md, "Service example"):
 *
 *     submit OP IN OUT [key=value ...]   ok ID                    (error REASON if malformed)
 *     status ID                          ID running|done|failed|canceled DONE/TOTAL [error]
 *     wait ID                            the status line, once the job has ended
 *     cancel ID                          ok ID
 *     list                               jobs N ID:STATE ...
 *     shutdown                           ok shutting down (running jobs are canceled)
 *
 * OP is gray, convert, edt, fill-holes, hmax, regional-max, open-rec, close-rec, area-open,
 * area-close, height-open, height-close, label or objects (IN a label image, OUT a .geojson,
 * .json or .csv table); the keys are the CLI's options of the same name
 * (tile=WxH, level=N, compression=NAME, pyramid=0|1, gray=MODE, threshold=N|otsu, invert=0|1,
 * conn=4|8, area=N, height=N, h=N, dome=0|1, radius=N, mode=NAME, format=NAME), each taken by
 * the operations it applies to. Paths are single words (no blanks).
 *
 * Jobs run concurrently on the runtime's workers; a job whose input cannot be read is a job
 * that failed, with the library's message, and the service goes on. A single thread serves
 * every client with poll(): requests are quick (submission returns at once) and `wait` only
 * parks its client until the job ends, so no client ever blocks another.
 *
 * Confined (examples/service_request.c): every path a request names must resolve, links
 * included, into one of the --root folders (default: the current folder); relative paths are
 * taken in the first root, ".." is refused, and what exists there must be a regular file,
 * never the socket; a path outside gets one reply whether or not anything is there. A
 * connection that sends no complete request for --idle-timeout seconds is closed (a `wait`
 * is not idle); a connection may have --max-client-jobs jobs running; the last --keep-jobs
 * ended jobs are remembered, older ones forgotten; the socket is the owner's alone.
 *
 *     tw_example_service --socket PATH [--root DIR ...] [--config FILE] [--max-jobs N]
 *                        [--max-client-jobs N] [--keep-jobs N] [--idle-timeout SECONDS]
 *     tw_example_service --socket PATH --send LINE [--send LINE ...]    (a client)
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* S_ISVTX */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <tilewave.h>

#include "service_request.h"

enum { MAX_CLIENTS = 64, REQUEST_MAX = 4096 };

typedef enum job_state { JOB_RUNNING = 0, JOB_DONE, JOB_FAILED, JOB_CANCELED } job_state;
static const char *const state_names[] = {"running", "done", "failed", "canceled"};

typedef struct job {
    int64_t id;
    tw_job *tj;           /* NULL once the job has ended and been reaped */
    job_state state;
    tw_progress progress; /* the final one, once reaped */
    uint64_t owner;       /* the serial of the connection that submitted it */
    char *in, *out;       /* the resolved paths the job's options point to, until it ends */
    char *markers, *mask; /* watershed's other inputs, likewise; NULL: none */
    char error[TW_ERROR_MAX];
} job;

typedef struct client {
    int fd;               /* -1: free slot */
    uint64_t serial;      /* one per connection accepted, never reused */
    char buf[REQUEST_MAX];
    size_t len;
    bool skipping;        /* dropping the rest of a line that was too long */
    int64_t waiting;      /* the job a `wait` parks this client on; 0: none */
    int64_t since_ms;     /* when it connected or its last request was answered (monotonic) */
} client;

typedef struct service {
    tw_runtime *rt;
    int listen_fd;
    job *jobs;            /* in ID order: running ones and the last keep_jobs ended ones */
    int n_jobs, cap_jobs;
    int64_t next_id;
    int max_jobs;         /* jobs running at once; more submissions are refused */
    int max_client_jobs;  /* jobs running at once from one connection */
    int keep_jobs;        /* ended jobs remembered; older ones are forgotten */
    int64_t idle_ms;      /* a connection without a complete request this long is closed */
    uint64_t next_serial;
    svc_roots roots;
    client clients[MAX_CLIENTS];
    bool stopping;
} service;

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The input and output fields every operation shares. */
static void
apply_io(const svc_params *p, tw_input *in, tw_output *out, bool mask)
{
    in->path = p->in;
    in->level = p->level;
    in->gray = p->gray;
    if (mask) {
        in->threshold_mode = p->threshold_mode;
        in->threshold = p->threshold;
        in->invert = p->invert;
    }
    out->path = p->out;
    out->compression = p->compression;
    out->compression_set = p->compression_set;
    out->pyramid = p->pyramid;
}

static tw_status
submit_op(tw_runtime *rt, const svc_op *op, const svc_params *p, tw_job **out, tw_error *err)
{
    switch (op->kind) {
    case SVC_OP_GRAY: {
        tw_gray_opts o;

        tw_gray_opts_init(&o);
        apply_io(p, &o.input, &o.output, true);
        o.mode = p->mode;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_gray_submit(rt, &o, out, err);
    }
    case SVC_OP_CONVERT: {
        tw_convert_opts o;

        tw_convert_opts_init(&o);
        apply_io(p, &o.input, &o.output, false);
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_convert_submit(rt, &o, out, err);
    }
    case SVC_OP_EDT: {
        tw_edt_opts o;

        tw_edt_opts_init(&o);
        apply_io(p, &o.input, &o.output, false);
        /* the distance transform thresholds the image itself (threshold=otsu included) */
        o.threshold_otsu = p->threshold_mode == TW_THRESHOLD_OTSU;
        o.threshold = p->threshold_mode == TW_THRESHOLD_VALUE ? p->threshold : 0;
        o.invert = p->invert;
        o.format = p->format;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_edt_submit(rt, &o, out, err);
    }
    case SVC_OP_MRECON_FILTER: {
        tw_mrecon_filter_opts o;

        tw_mrecon_filter_opts_init(&o);
        apply_io(p, &o.input, &o.output, true);
        o.conn = p->conn;
        o.h = p->h;
        o.dome = p->dome;
        o.radius = p->radius;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return op->mrecon_filter(rt, &o, out, err);
    }
    case SVC_OP_LABEL: {
        tw_label_opts o;

        tw_label_opts_init(&o);
        apply_io(p, &o.input, &o.output, true);
        if (p->conn)
            o.connectivity = p->conn;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_label_submit(rt, &o, out, err);
    }
    case SVC_OP_OBJECTS: { /* the table's format from OUT's name (.geojson, .json, .csv) */
        tw_objects_opts o;

        tw_objects_opts_init(&o);
        o.labels.path = p->in;
        o.labels.level = p->level;
        o.output = p->out;
        return tw_objects_submit(rt, &o, out, err);
    }
    case SVC_OP_WATERSHED: {
        tw_watershed_opts o;

        tw_watershed_opts_init(&o);
        apply_io(p, &o.input, &o.output, false);
        o.markers.path = p->markers;
        o.markers.level = o.mask.level = p->level;
        o.mask.path = p->mask;
        if (p->conn)
            o.conn = p->conn;
        o.lines = p->lines;
        o.negate = p->negate;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_watershed_submit(rt, &o, out, err);
    }
    default: { /* SVC_OP_ATTR */
        tw_attr_filter_opts o;

        tw_attr_filter_opts_init(&o);
        apply_io(p, &o.input, &o.output, true);
        o.filter = op->attr;
        if (p->attr)
            o.threshold = p->attr;
        if (p->conn)
            o.connectivity = p->conn;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_attr_filter_submit(rt, &o, out, err);
    }
    }
}

/* ---- replies */

static void
close_client(client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
    c->skipping = false;
    c->waiting = 0;
}

/* Send one reply line. A client that does not read its replies (its socket buffer full) or
 * has gone is dropped: the service never blocks on one client. */
static void
send_line(client *c, const char *text)
{
    size_t n = strlen(text), sent = 0;

    while (c->fd >= 0 && sent <= n) {
        const char *p = sent < n ? text + sent : "\n";
        ssize_t r = send(c->fd, p, sent < n ? n - sent : 1, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            close_client(c);
        else
            sent += (size_t)r;
    }
}

static void replyf(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
replyf(client *c, const char *fmt, ...)
{
    char line[REQUEST_MAX + TW_ERROR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    send_line(c, line);
}

static int
running_jobs(const service *s, uint64_t owner)
{
    int n = 0;

    for (int i = 0; i < s->n_jobs; i++)
        n += s->jobs[i].tj != NULL && (!owner || s->jobs[i].owner == owner);
    return n;
}

/* The job of that ID, or NULL (never submitted, or forgotten). */
static job *
job_by_id(service *s, int64_t id)
{
    int lo = 0, hi = s->n_jobs;

    while (lo < hi) { /* jobs are kept in ID order */
        int mid = lo + (hi - lo) / 2;

        if (s->jobs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n_jobs && s->jobs[lo].id == id ? &s->jobs[lo] : NULL;
}

/* "ID STATE DONE/TOTAL [error]": live progress while running, the final one after. */
static void
reply_status(client *c, const job *j)
{
    tw_progress p = j->progress;

    if (j->tj)
        tw_job_get_progress(j->tj, &p);
    replyf(c, "%" PRId64 " %s %lld/%lld%s%s", j->id, state_names[j->state], (long long)p.done,
           (long long)p.total, j->error[0] ? " " : "", j->error);
}

static void
job_free_paths(job *j)
{
    free(j->in);
    free(j->out);
    free(j->markers);
    free(j->mask);
    j->in = j->out = j->markers = j->mask = NULL;
}

/* Collect the jobs that have ended: their final state, progress and error. */
static void
reap(service *s)
{
    for (int i = 0; i < s->n_jobs; i++) {
        job *j = &s->jobs[i];
        const char *msg;
        tw_status st;

        if (!j->tj || (st = tw_job_wait(j->tj, 0)) == TW_E_TIMEOUT)
            continue;
        tw_job_get_progress(j->tj, &j->progress);
        j->state = st == TW_OK ? JOB_DONE : st == TW_E_CANCELED ? JOB_CANCELED : JOB_FAILED;
        if (j->state == JOB_FAILED) {
            msg = tw_job_get_error(j->tj);
            snprintf(j->error, sizeof j->error, "%s", msg ? msg : tw_status_string(st));
        }
        tw_job_destroy(j->tj);
        j->tj = NULL;
        job_free_paths(j);
    }
}

/* Forget the oldest ended jobs beyond keep_jobs (running ones are always kept), so a service
 * that runs for months holds a bounded number. Called when no client waits on an ended job. */
static void
forget(service *s)
{
    int ended = s->n_jobs - running_jobs(s, 0), k = 0;

    for (int i = 0; i < s->n_jobs; i++) {
        if (ended > s->keep_jobs && !s->jobs[i].tj) {
            ended--;
            continue;
        }
        s->jobs[k++] = s->jobs[i];
    }
    s->n_jobs = k;
}

/* ---- requests */

/* submit OP IN OUT [key=value ...], parsed: the paths confined, the limits checked, the job
 * submitted. A job the library refuses is a failed job with the library's message. */
static void
handle_submit(service *s, client *c, svc_request *r)
{
    char why[REQUEST_MAX + 64], *in = NULL, *out = NULL, *markers = NULL, *mask = NULL;
    bool in_exists, out_exists;
    dev_t in_dev = 0, out_dev = 0;
    ino_t in_ino = 0, out_ino = 0;
    tw_error err;
    job *j;

    if (!svc_path_confine(&s->roots, r->p.in, &in, &in_exists, &in_dev, &in_ino, why,
                          sizeof why) ||
        !svc_path_confine(&s->roots, r->p.out, &out, &out_exists, &out_dev, &out_ino, why,
                          sizeof why)) {
        replyf(c, "error %s", why);
        goto out;
    }
    if (strcmp(in, out) == 0 ||
        (in_exists && out_exists && in_dev == out_dev && in_ino == out_ino)) {
        replyf(c, "error the output is the input: %s", r->p.out);
        goto out;
    }
    /* watershed's markers= and mask= are inputs too: confined the same way, never the output. */
    for (int k = 0; k < 2; k++) {
        const char *given = k == 0 ? r->p.markers : r->p.mask;
        char **dst = k == 0 ? &markers : &mask;
        bool exists;
        dev_t dev = 0;
        ino_t ino = 0;

        if (!given)
            continue;
        if (!svc_path_confine(&s->roots, given, dst, &exists, &dev, &ino, why, sizeof why)) {
            replyf(c, "error %s", why);
            goto out;
        }
        if (strcmp(*dst, out) == 0 || (exists && out_exists && dev == out_dev && ino == out_ino)) {
            replyf(c, "error the output is an input: %s", r->p.out);
            goto out;
        }
    }
    for (int i = 0; i < s->n_jobs; i++) {
        if (s->jobs[i].tj && strcmp(s->jobs[i].out, out) == 0) {
            replyf(c, "error %s is the output of running job %" PRId64, r->p.out,
                   s->jobs[i].id);
            goto out;
        }
    }
    if (running_jobs(s, 0) >= s->max_jobs) {
        replyf(c, "error busy: %d running, the most --max-jobs allows", s->max_jobs);
        goto out;
    }
    if (running_jobs(s, c->serial) >= s->max_client_jobs) {
        replyf(c, "error busy: %d running from this connection, the most --max-client-jobs "
                  "allows", s->max_client_jobs);
        goto out;
    }
    if (s->n_jobs == s->cap_jobs) {
        int cap = s->cap_jobs ? 2 * s->cap_jobs : 64;
        job *jobs = realloc(s->jobs, (size_t)cap * sizeof *jobs);

        if (!jobs) {
            send_line(c, "error service: out of memory");
            goto out;
        }
        s->jobs = jobs;
        s->cap_jobs = cap;
    }
    j = &s->jobs[s->n_jobs++];
    memset(j, 0, sizeof *j);
    j->id = s->next_id++;
    j->owner = c->serial;
    j->in = in;
    j->out = out;
    j->markers = markers;
    j->mask = mask;
    in = out = markers = mask = NULL;
    r->p.in = j->in;
    r->p.out = j->out;
    r->p.markers = j->markers;
    r->p.mask = j->mask;
    /* A job the library refuses (input missing or unreadable, bad options) is a failed job
     * with the library's message: the client sees it through status, as any other failure. */
    if (submit_op(s->rt, r->op, &r->p, &j->tj, &err) != TW_OK) {
        j->tj = NULL;
        j->state = JOB_FAILED;
        snprintf(j->error, sizeof j->error, "%s", err.message);
        job_free_paths(j);
    }
    replyf(c, "ok %" PRId64, j->id);
out:
    free(in);
    free(out);
    free(markers);
    free(mask);
}

/* The job a `status`, `wait` or `cancel` names, or NULL after replying with the error. */
static job *
find_job(service *s, client *c, int64_t id)
{
    job *j = job_by_id(s, id);

    if (!j && id < s->next_id)
        replyf(c, "error job %" PRId64 " was forgotten (the last %d ended jobs are kept)", id,
               s->keep_jobs);
    else if (!j)
        replyf(c, "error no job '%" PRId64 "'", id);
    return j;
}

static void
handle_list(service *s, client *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (!f) {
        send_line(c, "error service: out of memory");
        return;
    }
    fprintf(f, "jobs %d", s->n_jobs);
    for (int i = 0; i < s->n_jobs; i++)
        fprintf(f, " %" PRId64 ":%s", s->jobs[i].id, state_names[s->jobs[i].state]);
    fclose(f);
    send_line(c, text);
    free(text);
}

static void
handle_line(service *s, client *c, const char *line)
{
    char *copy = strdup(line), why[REQUEST_MAX + 64];
    svc_request r;
    job *j;

    if (!copy) {
        send_line(c, "error service: out of memory");
        return;
    }
    if (!svc_request_parse(copy, &r, why, sizeof why)) {
        replyf(c, "error %s", why);
        goto out;
    }
    switch (r.verb) {
    case SVC_SUBMIT: handle_submit(s, c, &r); break;
    case SVC_STATUS:
        if ((j = find_job(s, c, r.id)))
            reply_status(c, j);
        break;
    case SVC_WAIT:
        if ((j = find_job(s, c, r.id)) && j->tj)
            c->waiting = r.id; /* answered by the main loop when the job ends */
        else if (j)
            reply_status(c, j);
        break;
    case SVC_CANCEL:
        if ((j = find_job(s, c, r.id)) && j->tj) {
            tw_job_cancel(j->tj);
            replyf(c, "ok %" PRId64, r.id);
        } else if (j) {
            replyf(c, "error job %" PRId64 " has already ended (%s)", r.id,
                   state_names[j->state]);
        }
        break;
    case SVC_LIST: handle_list(s, c); break;
    case SVC_SHUTDOWN:
        send_line(c, "ok shutting down");
        s->stopping = true;
        break;
    }
out:
    free(copy);
}

/* Handle the complete lines a client has sent, until a `wait` parks it. */
static void
serve_lines(service *s, client *c)
{
    char line[REQUEST_MAX];
    char *nl;

    while (c->fd >= 0 && !c->waiting && !s->stopping &&
           (nl = memchr(c->buf, '\n', c->len)) != NULL) {
        size_t used = (size_t)(nl - c->buf) + 1;
        bool skip = c->skipping;

        memcpy(line, c->buf, used - 1);
        line[used - 1] = '\0';
        memmove(c->buf, c->buf + used, c->len - used);
        c->len -= used;
        c->skipping = false;
        if (!skip) /* else the end of a line too long, already answered */
            handle_line(s, c, line);
        c->since_ms = now_ms();
    }
    if (c->fd >= 0 && !c->waiting && c->len == sizeof c->buf) {
        if (!c->skipping)
            replyf(c, "error request longer than %d bytes", REQUEST_MAX - 1);
        c->skipping = true;
        c->len = 0;
    }
}

/* ---- the service loop */

static int signal_pipe[2] = {-1, -1};

/* SIGINT / SIGTERM: wake poll() through the pipe; the loop then shuts down cleanly. */
static void
on_signal(int sig)
{
    int saved = errno;
    char b = (char)sig;

    (void)!write(signal_pipe[1], &b, 1);
    errno = saved;
}

static void
accept_client(service *s)
{
    int fd = accept(s->listen_fd, NULL, NULL);

    if (fd < 0)
        return;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (int i = 0; i < MAX_CLIENTS; i++) {
        if (s->clients[i].fd < 0) {
            s->clients[i].fd = fd;
            s->clients[i].serial = ++s->next_serial;
            s->clients[i].since_ms = now_ms();
            return;
        }
    }
    (void)!write(fd, "error too many clients\n", 23);
    close(fd);
}

/* Close the connections idle past idle_ms: no complete request since they connected or were
 * last answered (half a line counts as nothing), unless parked in a `wait`. Returns the ms
 * until the next one would be, or -1 when none can be. */
static int
expire_idle(service *s)
{
    int64_t now = now_ms(), next = -1;

    for (int i = 0; i < MAX_CLIENTS; i++) {
        client *c = &s->clients[i];
        int64_t left;

        if (c->fd < 0 || c->waiting)
            continue;
        if ((left = c->since_ms + s->idle_ms - now) <= 0) {
            replyf(c, "error idle for %" PRId64 " s: closing", s->idle_ms / 1000);
            close_client(c);
        } else if (next < 0 || left < next) {
            next = left;
        }
    }
    return next < 0 ? -1 : next > INT32_MAX ? INT32_MAX : (int)next;
}

static void
serve(service *s)
{
    struct pollfd pfd[2 + MAX_CLIENTS];
    int who[2 + MAX_CLIENTS];

    while (!s->stopping) {
        int n = 2, timeout = expire_idle(s);

        pfd[0] = (struct pollfd){.fd = signal_pipe[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        for (int i = 0; i < MAX_CLIENTS; i++) {
            if (s->clients[i].fd < 0)
                continue;
            /* a parked client is not read (its next requests wait), only watched for hangup */
            pfd[n] = (struct pollfd){.fd = s->clients[i].fd,
                                     .events = s->clients[i].waiting ? 0 : POLLIN};
            who[n++] = i;
        }
        /* while jobs run, wake every 100 ms to see which have ended */
        if (running_jobs(s, 0) && (timeout < 0 || timeout > 100))
            timeout = 100;
        if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents & POLLIN)
            s->stopping = true;
        if (pfd[1].revents & POLLIN)
            accept_client(s);
        for (int k = 2; k < n; k++) {
            client *c = &s->clients[who[k]];
            ssize_t r;

            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            r = c->waiting ? 0 : read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
            if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) {
                close_client(c); /* the client went away; its jobs go on */
                continue;
            }
            c->len += r > 0 ? (size_t)r : 0;
            serve_lines(s, c);
        }
        reap(s);
        for (int i = 0; i < MAX_CLIENTS; i++) {
            client *c = &s->clients[i];
            const job *j = c->fd >= 0 && c->waiting ? job_by_id(s, c->waiting) : NULL;

            if (j && !j->tj) {
                reply_status(c, j);
                c->waiting = 0;
                c->since_ms = now_ms();
                serve_lines(s, c);
            }
        }
        forget(s); /* after the parked clients had their answer */
    }
}

/* Cancel what still runs, wait for it, answer the parked clients and let every client go. */
static void
stop(service *s)
{
    for (int i = 0; i < s->n_jobs; i++)
        if (s->jobs[i].tj)
            tw_job_cancel(s->jobs[i].tj);
    for (int i = 0; i < s->n_jobs; i++)
        if (s->jobs[i].tj)
            (void)tw_job_wait(s->jobs[i].tj, -1);
    reap(s);
    for (int i = 0; i < MAX_CLIENTS; i++) {
        const job *j = s->clients[i].fd >= 0 && s->clients[i].waiting
                           ? job_by_id(s, s->clients[i].waiting)
                           : NULL;

        if (j)
            reply_status(&s->clients[i], j);
        close_client(&s->clients[i]);
    }
}

static int
socket_address(const char *path, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr->sun_path) {
        fprintf(stderr, "tw_example_service: socket path too long: %s\n", path);
        return -1;
    }
    memcpy(addr->sun_path, path, strlen(path) + 1);
    return 0;
}

/* The socket's folder must not let others replace or remove the socket: owned by this user
 * (or root), and writable by no one else unless sticky (as /tmp is). */
static int
check_socket_folder(const char *path)
{
    char *copy = strdup(path), *slash;
    const char *dir;
    struct stat sb;
    int rc = -1;

    if (!copy)
        return -1;
    slash = strrchr(copy, '/');
    dir = !slash ? "." : slash == copy ? "/" : (*slash = '\0', copy);
    if (stat(dir, &sb) != 0)
        fprintf(stderr, "tw_example_service: the socket's folder %s: %s\n", dir,
                strerror(errno));
    else if (sb.st_uid != geteuid() && sb.st_uid != 0)
        fprintf(stderr, "tw_example_service: the socket's folder %s belongs to another user\n",
                dir);
    else if ((sb.st_mode & (S_IWGRP | S_IWOTH)) && !(sb.st_mode & S_ISVTX))
        fprintf(stderr, "tw_example_service: the socket's folder %s is writable by others "
                        "(mode %03o, not sticky): use a private folder\n", dir,
                (unsigned)(sb.st_mode & 0777));
    else
        rc = 0;
    free(copy);
    return rc;
}

/* Listen on `path`, a socket only its owner can connect to (created under umask 077). A
 * socket file of this user left by a service that died is replaced; one a live service
 * answers on, or another user's, is not. */
static int
listen_on(const char *path)
{
    struct sockaddr_un addr;
    struct stat sb;
    mode_t mask;
    int fd = -1, rc;

    if (socket_address(path, &addr) != 0 || check_socket_folder(path) != 0 ||
        (fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
        return -1;
    if (lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode)) {
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 || sb.st_uid != geteuid()) {
            fprintf(stderr, "tw_example_service: %s on %s\n",
                    sb.st_uid != geteuid() ? "another user's socket is" : "a service listens",
                    path);
            close(fd);
            return -1;
        }
        close(fd);
        unlink(path);
        if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
            return -1;
    }
    mask = umask(077);
    rc = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    umask(mask);
    if (rc != 0 || listen(fd, 16) != 0) {
        fprintf(stderr, "tw_example_service: cannot listen on %s (%s)\n", path,
                strerror(errno));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* ---- the client mode: send each line, print each reply */

static int
send_requests(const char *path, char **lines, int n)
{
    struct sockaddr_un addr;
    char *reply = NULL;
    size_t cap = 0;
    int fd, rc = 0;
    FILE *in;

    if (socket_address(path, &addr) != 0 || (fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
        return 1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || !(in = fdopen(fd, "r"))) {
        fprintf(stderr, "tw_example_service: cannot connect to %s (%s)\n", path,
                strerror(errno));
        close(fd);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(lines[i]);

        if (send(fd, lines[i], len, MSG_NOSIGNAL) != (ssize_t)len ||
            send(fd, "\n", 1, MSG_NOSIGNAL) != 1 || getline(&reply, &cap, in) < 0) {
            fprintf(stderr, "tw_example_service: the service hung up\n");
            rc = 1;
            break;
        }
        fputs(reply, stdout);
        rc |= strncmp(reply, "error", 5) == 0;
    }
    free(reply);
    fclose(in);
    return rc;
}

static const char usage[] =
    "usage: tw_example_service --socket PATH [--root DIR ...] [--config FILE] [--max-jobs N]\n"
    "                          [--max-client-jobs N] [--keep-jobs N] [--idle-timeout SECONDS]\n"
    "       tw_example_service --socket PATH --send LINE [--send LINE ...]\n";

int
main(int argc, char **argv)
{
    const char *socket_path = NULL, *config_path = NULL, *roots[SVC_MAX_ROOTS];
    char *sends[64], why[PATH_MAX + 64];
    int n_sends = 0, n_roots = 0, rc = 1;
    bool bad = false;
    int64_t max_jobs = 16, max_client_jobs = 8, keep_jobs = 1000, idle_s = 30;
    service s;
    tw_config *cfg = NULL;
    tw_error err;
    sigset_t block, old_mask;
    struct sigaction sa;
    struct stat sb;
    tw_status st;

    for (int i = 1; i < argc; i++) {
        const char *arg = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(argv[i], "--socket") == 0 && arg)
            socket_path = argv[++i];
        else if (strcmp(argv[i], "--config") == 0 && arg)
            config_path = argv[++i];
        else if (strcmp(argv[i], "--root") == 0 && arg && n_roots < SVC_MAX_ROOTS)
            roots[n_roots++] = argv[++i];
        else if (strcmp(argv[i], "--max-jobs") == 0 && arg &&
                 svc_parse_int(arg, 1, 4096, &max_jobs))
            i++;
        else if (strcmp(argv[i], "--max-client-jobs") == 0 && arg &&
                 svc_parse_int(arg, 1, 4096, &max_client_jobs))
            i++;
        else if (strcmp(argv[i], "--keep-jobs") == 0 && arg &&
                 svc_parse_int(arg, 0, 1000000, &keep_jobs))
            i++;
        else if (strcmp(argv[i], "--idle-timeout") == 0 && arg &&
                 svc_parse_int(arg, 1, 86400, &idle_s))
            i++;
        else if (strcmp(argv[i], "--send") == 0 && arg && n_sends < 64)
            sends[n_sends++] = argv[++i];
        else
            bad = true; /* an unknown, incomplete or out-of-range option */
    }
    if (bad || !socket_path) {
        fputs(usage, stderr);
        return 2;
    }
    if (n_sends)
        return send_requests(socket_path, sends, n_sends);

    memset(&s, 0, sizeof s);
    s.listen_fd = -1;
    s.next_id = 1;
    s.max_jobs = (int)max_jobs;
    s.max_client_jobs = (int)max_client_jobs;
    s.keep_jobs = (int)keep_jobs;
    s.idle_ms = idle_s * 1000;
    for (int i = 0; i < MAX_CLIENTS; i++)
        s.clients[i].fd = -1;
    /* without --root, the current folder is the only one requests may name paths in */
    if (n_roots == 0)
        roots[n_roots++] = ".";
    for (int i = 0; i < n_roots; i++) {
        if (!svc_roots_add(&s.roots, roots[i], why, sizeof why)) {
            fprintf(stderr, "tw_example_service: %s\n", why);
            svc_roots_fini(&s.roots);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    if (pipe(signal_pipe) != 0)
        return 1;
    fcntl(signal_pipe[1], F_SETFL, fcntl(signal_pipe[1], F_GETFL) | O_NONBLOCK);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* the configuration as the CLI builds it: defaults < --config FILE < TILEWAVE_* */
    if (tw_config_create(&cfg) != TW_OK ||
        (config_path && tw_config_load_file(cfg, config_path, &err) != TW_OK) ||
        tw_config_load_env(cfg, &err) != TW_OK) {
        fprintf(stderr, "tw_example_service: %s\n", cfg ? err.message : "out of memory");
        goto out;
    }
    /* Workers inherit a mask blocking SIGINT and SIGTERM: the signals reach this thread (one
     * arriving meanwhile is delivered when the mask is restored, and ends the loop at once). */
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old_mask);
    st = tw_runtime_create(cfg, &s.rt, &err);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (st != TW_OK) {
        fprintf(stderr, "tw_example_service: %s\n", err.message);
        goto out;
    }
    if ((s.listen_fd = listen_on(socket_path)) < 0)
        goto out;
    /* the socket is never a request's input or output */
    if (stat(socket_path, &sb) == 0) {
        s.roots.sock_set = true;
        s.roots.sock_dev = sb.st_dev;
        s.roots.sock_ino = sb.st_ino;
    }
    fprintf(stderr, "tw_example_service: listening on %s (%d workers, at most %d jobs, "
                    "paths under %s%s)\n", socket_path, tw_runtime_get_worker_count(s.rt),
            s.max_jobs, s.roots.dir[0], s.roots.n > 1 ? " and more roots" : "");
    serve(&s);
    stop(&s);
    rc = 0;
out:
    tw_runtime_destroy(s.rt);
    if (s.listen_fd >= 0) {
        close(s.listen_fd);
        unlink(socket_path);
    }
    for (int i = 0; i < s.n_jobs; i++)
        job_free_paths(&s.jobs[i]);
    free(s.jobs);
    svc_roots_fini(&s.roots);
    tw_config_destroy(cfg);
    return rc;
}
