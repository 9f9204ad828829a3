/* SPDX-License-Identifier: MIT */
/* tilewave example: one runtime shared by jobs submitted from several threads. */
/*
 * What an analysis service does with tilewave: create one runtime for the process, install a
 * log handler, and let request threads submit jobs that share the workers. Each thread here
 * converts the same slide to one channel (luminance, r, g, b) into its own output, waits for
 * its job and reports progress; a bad request (a missing slide) fails alone.
 *
 *     concurrent_jobs SLIDE OUTDIR
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <tilewave.h>

typedef struct request {
    tw_runtime *rt;
    const char *input;
    char output[4096];
    tw_gray_mode mode;
    tw_status result;
    char message[TW_ERROR_MAX];
} request;

static void
log_to_stderr(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)user;
    fprintf(stderr, "[log %d] %s: %s\n", (int)level, domain, message);
}

static void *
serve(void *arg)
{
    request *r = arg;
    tw_gray_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_gray_opts_init(&o);
    o.input.path = r->input;
    o.output.path = r->output;
    o.mode = r->mode;
    r->result = tw_gray_submit(r->rt, &o, &job, &err);
    if (r->result != TW_OK) {
        snprintf(r->message, sizeof r->message, "%s", err.message);
        return NULL;
    }
    /* Poll progress while waiting, as a service reporting to its clients would. */
    while ((r->result = tw_job_wait(job, 100)) == TW_E_TIMEOUT) {
        tw_progress p;

        tw_job_get_progress(job, &p);
        fprintf(stderr, "%s: %lld/%lld tiles\n", r->output, (long long)p.done,
                (long long)p.total);
    }
    if (r->result != TW_OK)
        snprintf(r->message, sizeof r->message, "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    return NULL;
}

int
main(int argc, char **argv)
{
    enum { N = 5 };
    static const char *const names[N] = {"luminance", "r", "g", "b", "missing"};
    request req[N];
    pthread_t th[N];
    tw_runtime *rt = NULL;
    tw_error err;
    int failed = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: concurrent_jobs SLIDE OUTDIR\n");
        return 2;
    }
    tw_log_set_handler(log_to_stderr, NULL);
    if (tw_runtime_create(NULL, &rt, &err) != TW_OK) {
        fprintf(stderr, "runtime: %s\n", err.message);
        return 1;
    }
    for (int i = 0; i < N; i++) {
        memset(&req[i], 0, sizeof req[i]);
        req[i].rt = rt;
        /* The last request names a slide that does not exist: it fails, the others go on. */
        req[i].input = i == N - 1 ? "/nonexistent/slide.svs" : argv[1];
        req[i].mode = i < 4 ? (tw_gray_mode)i : TW_GRAY_LUMINANCE;
        snprintf(req[i].output, sizeof req[i].output, "%s/gray-%s.tif", argv[2], names[i]);
        pthread_create(&th[i], NULL, serve, &req[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        printf("%-9s %s%s%s\n", names[i], tw_status_string(req[i].result),
               req[i].message[0] ? ": " : "", req[i].message);
        failed += req[i].result != TW_OK;
    }
    tw_runtime_destroy(rt);
    /* Exactly the bad request fails. */
    return failed == 1 && req[N - 1].result != TW_OK ? 0 : 1;
}
