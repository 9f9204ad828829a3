/* SPDX-License-Identifier: MIT */
/* tilewave: execution traces in the Chrome trace-event format (ui.perfetto.dev opens them). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

/*
 * With runtime.trace set, every worker appends one event per task to its own buffer (no lock:
 * only its thread writes it), GPU managers also one per upload, device work and download
 * (timed with CUDA events on the streams), and tw_runtime_destroy() writes them all as one
 * JSON file of complete ("X") events: one lane per worker, three more per GPU (uploads,
 * kernels, downloads: each lane's events never overlap),
 * named by metadata events. The file is written next to its path with a ".part" suffix and
 * renamed at the end, so a trace is either complete or absent.
 */

#define TRACE_MAX_EVENTS (64 * 1024 * 1024) /* per lane: 2 GiB of events; more are counted */

int64_t
twi_trace_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

tw_status
twi_trace_open(tw_runtime *rt, const char *path, tw_error *err)
{
    size_t n = strlen(path);

    if (!(rt->trace_path = malloc(n + 1)) || !(rt->trace_part = malloc(n + 6)))
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
    memcpy(rt->trace_path, path, n + 1);
    snprintf(rt->trace_part, n + 6, "%s.part", path);
    /* Fail now, not after the run, when the trace cannot be written there. */
    if (!(rt->trace_file = fopen(rt->trace_part, "w")))
        return twi_error_set(err, TW_E_IO, "runtime: cannot write the trace '%s' (%s)", path,
                             strerror(errno));
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

void
twi_trace_close(tw_runtime *rt)
{
    int e;

    if (!rt->trace_file)
        goto out;
    if (!rt->started) {
        fclose(rt->trace_file);
        rt->trace_file = NULL;
        (void)remove(rt->trace_part);
        goto out;
    }
    e = write_json(rt, rt->trace_file);
    if (fclose(rt->trace_file) != 0 && !e)
        e = errno ? errno : EIO;
    rt->trace_file = NULL;
    if (!e && rename(rt->trace_part, rt->trace_path) != 0)
        e = errno;
    if (e) {
        /* tw_runtime_destroy() returns nothing: the log is the only way to say it. */
        TW_LOG(TW_LOG_ERROR, "runtime", "cannot write the trace '%s' (%s)", rt->trace_path,
               strerror(e));
        (void)remove(rt->trace_part);
    }
out:
    for (int i = 0; rt->workers && i < rt->n_workers; i++)
        for (int l = 0; l < TWI_TRACE_LANES; l++)
            free(rt->workers[i].trace[l].ev);
    free(rt->trace_path);
    free(rt->trace_part);
    rt->trace_path = rt->trace_part = NULL;
}
