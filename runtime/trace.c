/* SPDX-License-Identifier: MIT */
/* tilewave: execution traces in the Chrome trace-event format (ui.perfetto.dev opens them). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_core.h"

/*
 * With runtime.trace set, every worker appends one event per task to its own buffer (no lock:
 * only its thread writes it), GPU managers also one per upload, device work and download
 * (timed with CUDA events on the streams), and tw_runtime_destroy() writes them all as one
 * JSON file of complete ("X") events: one lane per worker, three more per GPU (uploads,
 * kernels, downloads: each lane's events never overlap),
 * named by metadata events. The file is written like every output (io/writer_tiff.c): created
 * without a name in the folder of its path (O_TMPFILE), linked to a fresh hidden name beside it
 * once complete and renamed over the path at once, so a trace is either complete or absent,
 * even after kill -9. Where the file system lacks O_TMPFILE it is created under that hidden
 * name (mkostemp), removed on failure, left only by a killed process. A symbolic link at the
 * path is followed; a path that is not a regular file is refused at creation.
 */

#define TRACE_MAX_EVENTS (64 * 1024 * 1024) /* per lane: 2 GiB of events; more are counted */

int64_t
twi_trace_now(void)
{
    return twi_now_ns();
}

/* "<dir>.<base>.tw-XXXXXX" beside rt->trace_path, created securely: its descriptor and name
 * (in rt->trace_part), or -1 with errno. */
static int
create_beside(tw_runtime *rt)
{
    const char *path = rt->trace_path, *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    size_t n = dlen + 1 + strlen(base) + sizeof ".tw-XXXXXX";
    int fd, e;

    free(rt->trace_part);
    if (!(rt->trace_part = malloc(n))) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(rt->trace_part, n, "%.*s.%s.tw-XXXXXX", (int)dlen, path, base);
    if ((fd = mkostemp(rt->trace_part, O_CLOEXEC)) < 0) {
        e = errno;
        free(rt->trace_part);
        rt->trace_part = NULL;
        errno = e;
    }
    return fd;
}

tw_status
twi_trace_open(tw_runtime *rt, const char *path, tw_error *err)
{
    struct stat sb;
    const char *slash;
    char *dir = NULL;
    int fd = -1, e;

    /* Only a regular file is replaced (never a device, a FIFO, the input's folder). */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return twi_error_set(err, TW_E_IO, "runtime: cannot write the trace '%s' (it is %s, "
                             "not a regular file)", path, twi_file_kind((unsigned)sb.st_mode));
    if (!(rt->trace_path = twi_path_follow(path))) {
        e = errno;
        return twi_error_set(err, e == ENOMEM ? TW_E_NOMEM : TW_E_IO,
                             "runtime: cannot write the trace '%s' (%s)", path, strerror(e));
    }
    slash = strrchr(rt->trace_path, '/');
    if (!(dir = slash ? strndup(rt->trace_path, (size_t)(slash - rt->trace_path) + 1)
                      : strdup(".")))
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
#ifdef O_TMPFILE
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#else
    errno = EOPNOTSUPP;
#endif
    free(dir);
    /* No O_TMPFILE on this file system (EOPNOTSUPP, EISDIR, EINVAL): a hidden name instead;
     * any other error recurs there and is reported. */
    if (fd < 0)
        fd = create_beside(rt);
    /* Fail now, not after the run, when the trace cannot be written there. */
    if (fd < 0 || fchmod(fd, 0644) != 0 || !(rt->trace_file = fdopen(fd, "w"))) {
        e = errno;
        if (fd >= 0)
            close(fd);
        if (rt->trace_part)
            (void)unlink(rt->trace_part);
        free(rt->trace_part);
        rt->trace_part = NULL;
        return twi_error_set(err, TW_E_IO, "runtime: cannot write the trace '%s' (%s)", path,
                             strerror(e));
    }
    rt->trace_t0 = twi_trace_now();
    return TW_OK;
}

void
twi_trace_add(tw_worker *w, int lane, const char *name, int64_t t0, int64_t t1)
{
    twi_trace_lane *l = &w->trace[lane];

    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        twi_trace_ev *ev;

        if (l->n >= TRACE_MAX_EVENTS || !(ev = realloc(l->ev, cap * sizeof *ev))) {
            l->dropped++;
            return;
        }
        l->ev = ev;
        l->cap = cap;
    }
    l->ev[l->n++] = (twi_trace_ev){name, t0, t1};
}

/* Formatted output to the trace file (a file the user named, not a terminal). */
static void TW_PRINTF(2, 3)
put(FILE *f, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vfprintf(f, fmt, ap); /* lint-allow: the trace file; errors are checked by ferror */
    va_end(ap);
}

static const char *const lane_names[TWI_TRACE_LANES] = {"", "uploads", "kernels", "downloads"};

/* Write every lane's events; returns 0 or an errno. */
static int
write_json(tw_runtime *rt, FILE *f)
{
    int64_t dropped = 0;

    put(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    put(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, "
               "\"args\": {\"name\": \"tilewave\"}}");
    for (int i = 0; i < rt->n_workers; i++) {
        tw_worker *w = &rt->workers[i];

        for (int l = 0; l < TWI_TRACE_LANES; l++) {
            char name[320];

            if (l > 0 && w->type != TW_DEVICE_CUDA)
                continue;
            if (w->type == TW_DEVICE_CUDA)
                snprintf(name, sizeof name, "gpu %d%s%s", w->gpu, l ? " " : " manager",
                         lane_names[l]);
            else
                snprintf(name, sizeof name, "cpu worker %d (cores %s)", i, w->cpuset_str);
            put(f,
                    ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                    "\"args\": {\"name\": \"%s\"}}",
                    i * TWI_TRACE_LANES + l, name);
            put(f,
                    ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, "
                    "\"tid\": %d, \"args\": {\"sort_index\": %d}}",
                    i * TWI_TRACE_LANES + l, i * TWI_TRACE_LANES + l);
        }
    }
    for (int i = 0; i < rt->n_workers; i++) {
        tw_worker *w = &rt->workers[i];

        for (int l = 0; l < TWI_TRACE_LANES; l++) {
            const twi_trace_lane *ln = &w->trace[l];

            dropped += ln->dropped;
            for (size_t k = 0; k < ln->n; k++) {
                const twi_trace_ev *e = &ln->ev[k];
                int64_t t0 = e->t0 - rt->trace_t0, d = e->t1 - e->t0;

                put(f,
                        ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, "
                        "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f}",
                        e->name, w->type == TW_DEVICE_CUDA ? "cuda" : "cpu",
                        i * TWI_TRACE_LANES + l, (double)(t0 < 0 ? 0 : t0) / 1e3,
                        (double)(d < 0 ? 0 : d) / 1e3);
            }
        }
    }
    put(f, "\n], \"otherData\": {\"dropped_events\": %lld}}\n", (long long)dropped);
    if (dropped)
        TW_WARN("runtime", "the trace '%s' lacks %lld events (too many)", rt->trace_path,
                (long long)dropped);
    return ferror(f) ? EIO : 0;
}

/* Name the nameless trace file: link it through /proc (AT_EMPTY_PATH would need
 * CAP_DAC_READ_SEARCH) to a fresh hidden name beside the path, retried if another process took
 * the name meanwhile. 0, or an errno. */
static int
link_nameless(tw_runtime *rt, int fd)
{
    char proc[64];

    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int attempt = 0; attempt < 100; attempt++) {
        int tmp = create_beside(rt), e;

        if (tmp < 0)
            return errno;
        /* the name is ours; swap the empty file under it for the nameless one */
        close(tmp);
        (void)unlink(rt->trace_part);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, rt->trace_part, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        e = errno;
        free(rt->trace_part);
        rt->trace_part = NULL;
        if (e != EEXIST)
            return e;
    }
    return EEXIST;
}

/* The workers' recorded events. */
static void
free_lanes(tw_runtime *rt)
{
    for (int i = 0; rt->workers && i < rt->n_workers; i++)
        for (int l = 0; l < TWI_TRACE_LANES; l++) {
            free(rt->workers[i].trace[l].ev);
            rt->workers[i].trace[l].ev = NULL;
        }
}

tw_status
twi_trace_close(tw_runtime *rt, tw_error *err)
{
    bool nameless;
    int e = 0;

    if (rt->trace_done)
        goto out;
    rt->trace_done = true;
    rt->trace_status = TW_OK;
    if (!rt->trace_file)
        goto out;
    nameless = !rt->trace_part;
    if (!rt->started) {
        fclose(rt->trace_file);
        rt->trace_file = NULL;
        if (rt->trace_part)
            (void)unlink(rt->trace_part);
        free(rt->trace_part);
        rt->trace_part = NULL;
        goto out;
    }
    e = write_json(rt, rt->trace_file);
    if (!e && fflush(rt->trace_file) != 0)
        e = errno ? errno : EIO;
    if (!e && nameless)
        e = link_nameless(rt, fileno(rt->trace_file));
    if (fclose(rt->trace_file) != 0 && !e)
        e = errno ? errno : EIO;
    rt->trace_file = NULL;
    if (!e && rename(rt->trace_part, rt->trace_path) != 0)
        e = errno;
    if (e) {
        rt->trace_status = TW_E_IO;
        snprintf(rt->trace_error, sizeof rt->trace_error,
                 "runtime: cannot write the trace '%s' (%s)", rt->trace_path, strerror(e));
        if (rt->trace_part)
            (void)unlink(rt->trace_part);
    }
    free_lanes(rt);
    free(rt->trace_part);
    rt->trace_part = NULL;
out:
    if (rt->trace_status != TW_OK)
        return twi_error_set(err, rt->trace_status, "%s", rt->trace_error);
    return TW_OK;
}

void
twi_trace_free(tw_runtime *rt)
{
    if (rt->trace_file) {
        fclose(rt->trace_file);
        rt->trace_file = NULL;
    }
    if (rt->trace_part)
        (void)unlink(rt->trace_part);
    free_lanes(rt);
    free(rt->trace_path);
    free(rt->trace_part);
    rt->trace_path = rt->trace_part = NULL;
}
