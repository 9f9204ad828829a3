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
 * area-close, height-open or height-close; the keys are the CLI's options of the same name
 * (tile=WxH, level=N, compression=NAME, pyramid=0|1, gray=MODE, threshold=N|otsu, invert=0|1,
 * conn=4|8, area=N, height=N, h=N, dome=0|1, radius=N, mode=NAME, format=NAME), each taken by
 * the operations it applies to. Paths are single words (no blanks).
 *
 * Jobs run concurrently on the runtime's workers; a job whose input cannot be read is a job
 * that failed, with the library's message, and the service goes on. A single thread serves
 * every client with poll(): requests are quick (submission returns at once) and `wait` only
 * parks its client until the job ends, so no client ever blocks another. Ended jobs are kept
 * (their state and message, a few hundred bytes each) for the life of the process.
 *
 *     tw_example_service --socket PATH [--config FILE] [--max-jobs N]   (the service)
 *     tw_example_service --socket PATH --send LINE [--send LINE ...]    (a client)
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include <unistd.h>

#include <tilewave.h>

enum { MAX_CLIENTS = 64, REQUEST_MAX = 4096, MAX_WORDS = 32 };

typedef enum job_state { JOB_RUNNING = 0, JOB_DONE, JOB_FAILED, JOB_CANCELED } job_state;
static const char *const state_names[] = {"running", "done", "failed", "canceled"};

typedef struct job {
    tw_job *tj;           /* NULL once the job has ended and been reaped */
    job_state state;
    tw_progress progress; /* the final one, once reaped */
    char *request;        /* the request's words, which the job's options point into */
    char error[TW_ERROR_MAX];
} job;

typedef struct client {
    int fd;               /* -1: free slot */
    char buf[REQUEST_MAX];
    size_t len;
    bool skipping;        /* dropping the rest of a line that was too long */
    int waiting;          /* the job a `wait` parks this client on; 0: none */
} client;

typedef struct service {
    tw_runtime *rt;
    int listen_fd;
    job *jobs;            /* job ID is jobs[ID - 1] */
    int n_jobs, cap_jobs;
    int max_jobs;         /* jobs running at once; more submissions are refused */
    client clients[MAX_CLIENTS];
    bool stopping;
} service;

/* ---- operations: the request's op name, its submit function and the keys it takes */

enum {
    K_TILE = 1u << 0, K_LEVEL = 1u << 1, K_COMPRESSION = 1u << 2, K_PYRAMID = 1u << 3,
    K_GRAY = 1u << 4, K_THRESHOLD = 1u << 5, K_INVERT = 1u << 6, K_CONN = 1u << 7,
    K_AREA = 1u << 8, K_HEIGHT = 1u << 9, K_H = 1u << 10, K_DOME = 1u << 11,
    K_RADIUS = 1u << 12, K_MODE = 1u << 13, K_FORMAT = 1u << 14,
    K_IO = K_TILE | K_LEVEL | K_COMPRESSION | K_PYRAMID,
    K_MASK = K_IO | K_GRAY | K_THRESHOLD | K_INVERT
};
static const char *const key_names[] = {"tile", "level", "compression", "pyramid", "gray",
                                        "threshold", "invert", "conn", "area", "height", "h",
                                        "dome", "radius", "mode", "format"};

typedef enum op_kind { OP_GRAY, OP_CONVERT, OP_EDT, OP_RFILTER, OP_ATTR } op_kind;

typedef tw_status (*rfilter_fn)(tw_runtime *rt, const tw_rfilter_opts *o, tw_job **out,
                                tw_error *err);

typedef struct op_def {
    const char *name;
    op_kind kind;
    unsigned keys;
    rfilter_fn rfilter;   /* OP_RFILTER */
    tw_attr_filter attr;  /* OP_ATTR */
} op_def;

static const op_def ops[] = {
    {"gray", OP_GRAY, K_IO | K_MODE | K_THRESHOLD | K_INVERT, NULL, 0},
    {"convert", OP_CONVERT, K_IO, NULL, 0},
    {"edt", OP_EDT, K_IO | K_GRAY | K_THRESHOLD | K_INVERT | K_FORMAT, NULL, 0},
    {"fill-holes", OP_RFILTER, K_MASK | K_CONN, tw_fill_holes_submit, 0},
    {"hmax", OP_RFILTER, K_MASK | K_CONN | K_H | K_DOME, tw_hmax_submit, 0},
    {"regional-max", OP_RFILTER, K_MASK | K_CONN, tw_regional_max_submit, 0},
    {"open-rec", OP_RFILTER, K_MASK | K_CONN | K_RADIUS, tw_open_rec_submit, 0},
    {"close-rec", OP_RFILTER, K_MASK | K_CONN | K_RADIUS, tw_close_rec_submit, 0},
    {"area-open", OP_ATTR, K_MASK | K_CONN | K_AREA, NULL, TW_AREA_OPENING},
    {"area-close", OP_ATTR, K_MASK | K_CONN | K_AREA, NULL, TW_AREA_CLOSING},
    {"height-open", OP_ATTR, K_MASK | K_CONN | K_HEIGHT, NULL, TW_HEIGHT_OPENING},
    {"height-close", OP_ATTR, K_MASK | K_CONN | K_HEIGHT, NULL, TW_HEIGHT_CLOSING},
};

/* The parameters of one request, from its key=value words. */
typedef struct params {
    const char *in, *out;
    int32_t tile_w, tile_h;
    int level, conn;
    tw_compression compression;
    bool compression_set, pyramid, invert, dome;
    tw_gray_mode gray, mode;
    tw_threshold_mode threshold_mode;
    double threshold;
    uint64_t attr; /* area= or height= */
    int64_t h;
    int32_t radius;
    tw_edt_format format;
} params;

/* A whole-string integer in [min, max]. */
static bool
parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *out = (int64_t)v;
    return true;
}

/* "0" or "1". */
static bool
parse_bool(const char *s, bool *out)
{
    *out = strcmp(s, "1") == 0;
    return *out || strcmp(s, "0") == 0;
}

/* Apply one key=value word to p; false with the reason in why. */
static bool
parse_key(params *p, const op_def *op, char *word, char *why, size_t n)
{
    char *val = strchr(word, '=');
    int64_t v = 0;
    unsigned k = 0;
    bool ok = false;
    char *end = NULL, c;

    if (!val) {
        snprintf(why, n, "'%s' is not key=value", word);
        return false;
    }
    *val++ = '\0';
    while (k < sizeof key_names / sizeof *key_names && strcmp(word, key_names[k]) != 0)
        k++;
    if (k == sizeof key_names / sizeof *key_names || !(op->keys & (1u << k))) {
        snprintf(why, n, "%s takes no key '%s'", op->name, word);
        return false;
    }
    switch (1u << k) {
    case K_TILE:
        ok = sscanf(val, "%" SCNd32 "x%" SCNd32 "%c", &p->tile_w, &p->tile_h, &c) == 2 &&
             p->tile_w >= 16 && p->tile_h >= 16 && p->tile_w <= 65536 && p->tile_h <= 65536;
        break;
    case K_LEVEL:
        ok = parse_int(val, 0, 1000, &v);
        p->level = (int)v;
        break;
    case K_COMPRESSION:
        ok = p->compression_set = tw_compression_parse(val, &p->compression) == TW_OK;
        break;
    case K_PYRAMID: ok = parse_bool(val, &p->pyramid); break;
    case K_GRAY: ok = tw_gray_mode_parse(val, &p->gray) == TW_OK; break;
    case K_MODE: ok = tw_gray_mode_parse(val, &p->mode) == TW_OK; break;
    case K_THRESHOLD:
        p->threshold_mode = strcmp(val, "otsu") == 0 ? TW_THRESHOLD_OTSU : TW_THRESHOLD_VALUE;
        if (p->threshold_mode == TW_THRESHOLD_VALUE)
            p->threshold = strtod(val, &end);
        ok = p->threshold_mode == TW_THRESHOLD_OTSU || (end != val && !*end);
        break;
    case K_INVERT: ok = parse_bool(val, &p->invert); break;
    case K_CONN:
        ok = parse_int(val, 4, 8, &v) && (v == 4 || v == 8);
        p->conn = (int)v;
        break;
    case K_AREA:
    case K_HEIGHT: /* an area of at least 1 pixel, a height of 0..65535 levels */
        ok = (1u << k) == K_AREA ? parse_int(val, 1, INT64_MAX, &v) : parse_int(val, 0, 65535, &v);
        p->attr = (uint64_t)v;
        break;
    case K_H: ok = parse_int(val, 1, 65535, &p->h); break;
    case K_DOME: ok = parse_bool(val, &p->dome); break;
    case K_RADIUS:
        ok = parse_int(val, 0, 1 << 20, &v);
        p->radius = (int32_t)v;
        break;
    case K_FORMAT: ok = tw_edt_format_parse(val, &p->format) == TW_OK; break;
    }
    if (!ok)
        snprintf(why, n, "bad value '%s' for %s", val, word);
    return ok;
}

/* The input and output fields every operation shares. */
static void
apply_io(const params *p, tw_input *in, tw_output *out, bool mask)
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
submit_op(tw_runtime *rt, const op_def *op, const params *p, tw_job **out, tw_error *err)
{
    switch (op->kind) {
    case OP_GRAY: {
        tw_gray_opts o;

        tw_gray_opts_init(&o);
        apply_io(p, &o.input, &o.output, true);
        o.mode = p->mode;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_gray_submit(rt, &o, out, err);
    }
    case OP_CONVERT: {
        tw_convert_opts o;

        tw_convert_opts_init(&o);
        apply_io(p, &o.input, &o.output, false);
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return tw_convert_submit(rt, &o, out, err);
    }
    case OP_EDT: {
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
    case OP_RFILTER: {
        tw_rfilter_opts o;

        tw_rfilter_opts_init(&o);
        apply_io(p, &o.input, &o.output, true);
        o.conn = p->conn;
        o.h = p->h;
        o.dome = p->dome;
        o.radius = p->radius;
        o.tile_w = p->tile_w;
        o.tile_h = p->tile_h;
        return op->rfilter(rt, &o, out, err);
    }
    default: { /* OP_ATTR */
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
running_jobs(const service *s)
{
    int n = 0;

    for (int i = 0; i < s->n_jobs; i++)
        n += s->jobs[i].tj != NULL;
    return n;
}

/* "ID STATE DONE/TOTAL [error]": live progress while running, the final one after. */
static void
reply_status(service *s, client *c, int id)
{
    job *j = &s->jobs[id - 1];
    tw_progress p = j->progress;

    if (j->tj)
        tw_job_get_progress(j->tj, &p);
    replyf(c, "%d %s %lld/%lld%s%s", id, state_names[j->state], (long long)p.done,
           (long long)p.total, j->error[0] ? " " : "", j->error);
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
        free(j->request);
        j->request = NULL;
    }
}

/* ---- requests */

/* submit OP IN OUT [key=value ...]. Takes `request` (the words' storage) when it returns true:
 * the job's options point into it until the job ends. */
static bool
handle_submit(service *s, client *c, char **w, int n, char *request)
{
    const op_def *op = NULL;
    params p;
    char why[256];
    tw_error err;
    job *j;

    if (n < 4) {
        send_line(c, "error usage: submit OP IN OUT [key=value ...]");
        return false;
    }
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(w[1], ops[i].name) == 0)
            op = &ops[i];
    if (!op) {
        replyf(c, "error unknown operation '%s' (gray, convert, edt, fill-holes, hmax, "
                  "regional-max, open-rec, close-rec, area-open, area-close, height-open, "
                  "height-close)", w[1]);
        return false;
    }
    memset(&p, 0, sizeof p);
    p.in = w[2];
    p.out = w[3];
    for (int i = 4; i < n; i++) {
        if (!parse_key(&p, op, w[i], why, sizeof why)) {
            replyf(c, "error %s", why);
            return false;
        }
    }
    if (running_jobs(s) >= s->max_jobs) {
        replyf(c, "error busy: %d running, the most --max-jobs allows", s->max_jobs);
        return false;
    }
    if (s->n_jobs == s->cap_jobs) {
        int cap = s->cap_jobs ? 2 * s->cap_jobs : 64;
        job *jobs = realloc(s->jobs, (size_t)cap * sizeof *jobs);

        if (!jobs) {
            send_line(c, "error service: out of memory");
            return false;
        }
        s->jobs = jobs;
        s->cap_jobs = cap;
    }
    j = &s->jobs[s->n_jobs++];
    memset(j, 0, sizeof *j);
    j->request = request;
    /* A job the library refuses (input missing or unreadable, bad options) is a failed job
     * with the library's message: the client sees it through status, as any other failure. */
    if (submit_op(s->rt, op, &p, &j->tj, &err) != TW_OK) {
        j->tj = NULL;
        j->state = JOB_FAILED;
        snprintf(j->error, sizeof j->error, "%s", err.message);
        free(j->request);
        j->request = NULL;
    }
    replyf(c, "ok %d", s->n_jobs);
    return true;
}

/* The job named by `CMD ID`, or NULL after replying with the error. */
static job *
find_job(service *s, client *c, char **w, int n, int *id)
{
    int64_t v;

    if (n != 2) {
        replyf(c, "error usage: %s ID", w[0]);
        return NULL;
    }
    if (!parse_int(w[1], 1, s->n_jobs, &v)) {
        replyf(c, "error no job '%s'", w[1]);
        return NULL;
    }
    *id = (int)v;
    return &s->jobs[v - 1];
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
        fprintf(f, " %d:%s", i + 1, state_names[s->jobs[i].state]);
    fclose(f);
    send_line(c, text);
    free(text);
}

static void
handle_line(service *s, client *c, const char *line)
{
    char *copy = strdup(line), *w[MAX_WORDS], *save = NULL;
    int n = 0, id = 0;
    job *j;

    if (!copy) {
        send_line(c, "error service: out of memory");
        return;
    }
    for (char *t = strtok_r(copy, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (n == MAX_WORDS) {
            replyf(c, "error more than %d words", MAX_WORDS);
            goto out;
        }
        w[n++] = t;
    }
    if (n == 0) {
        send_line(c, "error empty request");
    } else if (strcmp(w[0], "submit") == 0) {
        if (handle_submit(s, c, w, n, copy))
            copy = NULL;
    } else if (strcmp(w[0], "status") == 0) {
        if (find_job(s, c, w, n, &id))
            reply_status(s, c, id);
    } else if (strcmp(w[0], "wait") == 0) {
        if ((j = find_job(s, c, w, n, &id)) && j->tj)
            c->waiting = id; /* answered by the main loop when the job ends */
        else if (j)
            reply_status(s, c, id);
    } else if (strcmp(w[0], "cancel") == 0) {
        if ((j = find_job(s, c, w, n, &id)) && j->tj) {
            tw_job_cancel(j->tj);
            replyf(c, "ok %d", id);
        } else if (j) {
            replyf(c, "error job %d has already ended (%s)", id, state_names[j->state]);
        }
    } else if (strcmp(w[0], "list") == 0 && n == 1) {
        handle_list(s, c);
    } else if (strcmp(w[0], "shutdown") == 0 && n == 1) {
        send_line(c, "ok shutting down");
        s->stopping = true;
    } else {
        replyf(c, "error unknown request '%s' (submit, status, wait, cancel, list, shutdown)",
               w[0]);
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
            return;
        }
    }
    (void)!write(fd, "error too many clients\n", 23);
    close(fd);
}

static void
serve(service *s)
{
    struct pollfd pfd[2 + MAX_CLIENTS];
    int who[2 + MAX_CLIENTS];

    while (!s->stopping) {
        int n = 2;

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
        if (poll(pfd, (nfds_t)n, running_jobs(s) ? 100 : -1) < 0 && errno != EINTR)
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

            if (c->fd >= 0 && c->waiting && !s->jobs[c->waiting - 1].tj) {
                reply_status(s, c, c->waiting);
                c->waiting = 0;
                serve_lines(s, c);
            }
        }
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
        if (s->clients[i].fd >= 0 && s->clients[i].waiting)
            reply_status(s, &s->clients[i], s->clients[i].waiting);
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

/* Listen on `path`. A socket file left by a service that died is replaced; one a live
 * service answers on is not. */
static int
listen_on(const char *path)
{
    struct sockaddr_un addr;
    struct stat sb;
    int fd = -1;

    if (socket_address(path, &addr) != 0 || (fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
        return -1;
    if (lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode)) {
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
            fprintf(stderr, "tw_example_service: a service already listens on %s\n", path);
            close(fd);
            return -1;
        }
        close(fd);
        unlink(path);
        if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
            return -1;
    }
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 16) != 0) {
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
    "usage: tw_example_service --socket PATH [--config FILE] [--max-jobs N]\n"
    "       tw_example_service --socket PATH --send LINE [--send LINE ...]\n";

int
main(int argc, char **argv)
{
    const char *socket_path = NULL, *config_path = NULL;
    char *sends[64];
    int n_sends = 0, rc = 1;
    bool bad = false;
    int64_t max_jobs = 16;
    service s;
    tw_config *cfg = NULL;
    tw_error err;
    sigset_t block, old_mask;
    struct sigaction sa;
    tw_status st;

    for (int i = 1; i < argc; i++) {
        const char *arg = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(argv[i], "--socket") == 0 && arg)
            socket_path = argv[++i];
        else if (strcmp(argv[i], "--config") == 0 && arg)
            config_path = argv[++i];
        else if (strcmp(argv[i], "--max-jobs") == 0 && arg && parse_int(arg, 1, 4096, &max_jobs))
            i++;
        else if (strcmp(argv[i], "--send") == 0 && arg && n_sends < 64)
            sends[n_sends++] = argv[++i];
        else
            bad = true; /* an unknown or incomplete option */
    }
    if (bad || !socket_path) {
        fputs(usage, stderr);
        return 2;
    }
    if (n_sends)
        return send_requests(socket_path, sends, n_sends);

    memset(&s, 0, sizeof s);
    s.listen_fd = -1;
    s.max_jobs = (int)max_jobs;
    for (int i = 0; i < MAX_CLIENTS; i++)
        s.clients[i].fd = -1;
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
    fprintf(stderr, "tw_example_service: listening on %s (%d workers, at most %d jobs)\n",
            socket_path, tw_runtime_get_worker_count(s.rt), s.max_jobs);
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
        free(s.jobs[i].request);
    free(s.jobs);
    tw_config_destroy(cfg);
    return rc;
}
