/* SPDX-License-Identifier: MIT */
/* tilewave tests: the runner of the Criterion stand-in (one forked process per test). */
#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criterion/criterion.h"

/*
 * Usage: TEST [--jobs N | -jN] [--filter 'SUITE/NAME glob'] [--verbose] (other Criterion
 * options are accepted and ignored); TWSHIM_EXCLUDE='GLOB,GLOB' in the environment leaves out
 * the tests whose SUITE/NAME matches one (reported as skipped). Each test runs in a child
 * process, as under Criterion: the suite's and the test's .init, the test, their .fini; its
 * output is collected in a temporary file and printed when it ends. Exit status of a child:
 * 0 passed, 1 an assertion failed, TWSHIM_SKIP skipped, anything else (a sanitizer's exit
 * code, a signal, the timeout) failed. The program exits 0 when no test failed.
 */

#define TWSHIM_SKIP 77
#define TWSHIM_MAX_JOBS 64

static twshim_test *tests_head, *tests_tail;
static twshim_suite *suites;
static bool expect_failed;
static _Thread_local char detail[1024];

void
twshim_register(twshim_test *t)
{
    t->next = NULL;
    if (tests_tail)
        tests_tail->next = t;
    else
        tests_head = t;
    tests_tail = t;
}

void
twshim_register_suite(twshim_suite *s)
{
    s->next = suites;
    suites = s;
}

static const char *const op_names[] = {"==", "!=", "<", "<=", ">", ">="};

void
twshim_detail(const char *ea, int op, const char *eb, const char *va, const char *vb)
{
    snprintf(detail, sizeof detail, "%s %s %s (%s vs %s)", ea, op_names[op], eb, va, vb);
}

static void
report(const char *what, const char *file, int line, const char *expr, const char *fmt,
       va_list ap)
{
    fprintf(stderr, "[%s] %s:%d: ", what, file, line);
    if (fmt && *fmt)
        vfprintf(stderr, fmt, ap);
    else if (expr)
        fprintf(stderr, "the expression %s is false", expr);
    if (detail[0])
        fprintf(stderr, " [%s]", detail);
    fputc('\n', stderr);
    detail[0] = '\0';
    fflush(stderr);
}

void
twshim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report("FAIL", file, line, expr, fmt, ap);
    va_end(ap);
    fflush(stdout);
    /* Any thread may fail: end the whole test process, as Criterion's abort does. */
    _exit(1);
}

void
twshim_expect_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report("FAIL", file, line, expr, fmt, ap);
    va_end(ap);
    expect_failed = true;
}

void
twshim_skip(const char *fmt, ...)
{
    va_list ap;

    fputs("[SKIP] ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stdout);
    fflush(stderr);
    _exit(TWSHIM_SKIP);
}

void
twshim_log(const char *level, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[%s] ", level);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Does "suite/name" match one of the comma-separated globs of TWSHIM_EXCLUDE? */
static bool
excluded(const char *full)
{
    const char *list = getenv("TWSHIM_EXCLUDE");
    char glob[256];

    while (list && *list) {
        size_t len = strcspn(list, ",");

        if (len > 0 && len < sizeof glob) {
            memcpy(glob, list, len);
            glob[len] = '\0';
            if (fnmatch(glob, full, 0) == 0)
                return true;
        }
        list += len;
        if (*list)
            list++;
    }
    return false;
}

static const twshim_opts *
suite_of(const twshim_test *t)
{
    for (const twshim_suite *s = suites; s; s = s->next)
        if (strcmp(s->name, t->suite) == 0)
            return &s->opts;
    return NULL;
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* In the child: run one test and exit with its status. */
static void
child_run(const twshim_test *t)
{
    const twshim_opts *so = suite_of(t);
    double timeout = t->opts.timeout > 0 ? t->opts.timeout : so ? so->timeout : 0;

    if (timeout > 0)
        alarm((unsigned)(timeout + 0.999));
    if (so && so->init)
        so->init();
    if (t->opts.init)
        t->opts.init();
    t->fn();
    if (t->opts.fini)
        t->opts.fini();
    if (so && so->fini)
        so->fini();
    fflush(stdout);
    fflush(stderr);
    _exit(expect_failed ? 1 : 0);
}

typedef struct running {
    pid_t pid;
    const twshim_test *t;
    FILE *out;
    double t0;
} running;

static void
copy_out(FILE *f)
{
    char buf[4096];
    size_t n;

    fflush(f);
    rewind(f);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(f);
}

int
main(int argc, char **argv)
{
    running run[TWSHIM_MAX_JOBS];
    const char *filter = NULL;
    int jobs = 1, n_run = 0, passed = 0, failed = 0, skipped = 0;
    bool verbose = false;
    const twshim_test *next;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--jobs") == 0 && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (strncmp(a, "--jobs=", 7) == 0)
            jobs = atoi(a + 7);
        else if (strncmp(a, "-j", 2) == 0 && a[2])
            jobs = atoi(a + 2);
        else if (strcmp(a, "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strncmp(a, "--filter=", 9) == 0)
            filter = a + 9;
        else if (strcmp(a, "--verbose") == 0 || strncmp(a, "--verbose=", 10) == 0)
            verbose = true;
    }
    if (jobs < 1)
        jobs = 1;
    if (jobs > TWSHIM_MAX_JOBS)
        jobs = TWSHIM_MAX_JOBS;
    fflush(stdout);
    fflush(stderr);
    next = tests_head;
    while (next || n_run > 0) {
        /* Start tests while there is room. */
        while (next && n_run < jobs) {
            const twshim_test *t = next;
            char full[512];
            FILE *out;
            pid_t pid;

            next = t->next;
            snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
            if (filter && fnmatch(filter, full, 0) != 0)
                continue;
            if (t->opts.disabled || excluded(full)) {
                fprintf(stderr, "[SKIP] %s::%s: %s\n", t->suite, t->name,
                        t->opts.disabled ? "disabled" : "excluded (TWSHIM_EXCLUDE)");
                skipped++;
                continue;
            }
            if (!(out = tmpfile())) {
                fprintf(stderr, "twshim: tmpfile: %s\n", strerror(errno));
                return 2;
            }
            pid = fork();
            if (pid < 0) {
                fprintf(stderr, "twshim: fork: %s\n", strerror(errno));
                return 2;
            }
            if (pid == 0) {
                dup2(fileno(out), STDOUT_FILENO);
                dup2(fileno(out), STDERR_FILENO);
                child_run(t);
            }
            run[n_run++] = (running){pid, t, out, now_s()};
        }
        if (n_run == 0)
            break;
        /* Reap one. */
        {
            int status = 0, k;
            pid_t pid = waitpid(-1, &status, 0);

            if (pid < 0) {
                if (errno == EINTR)
                    continue;
                fprintf(stderr, "twshim: waitpid: %s\n", strerror(errno));
                return 2;
            }
            for (k = 0; k < n_run && run[k].pid != pid; k++)
                ;
            if (k == n_run)
                continue;
            {
                running r = run[k];
                double dt = now_s() - r.t0;
                const char *what;
                char why[64] = "";

                run[k] = run[--n_run];
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                    what = "PASS";
                    passed++;
                } else if (WIFEXITED(status) && WEXITSTATUS(status) == TWSHIM_SKIP) {
                    what = "SKIP";
                    skipped++;
                } else {
                    what = "FAIL";
                    failed++;
                    if (WIFEXITED(status))
                        snprintf(why, sizeof why, " (exit status %d)", WEXITSTATUS(status));
                    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
                        snprintf(why, sizeof why, " (timed out)");
                    else if (WIFSIGNALED(status))
                        snprintf(why, sizeof why, " (signal %d)", WTERMSIG(status));
                }
                if (verbose || strcmp(what, "PASS") != 0)
                    copy_out(r.out);
                else
                    fclose(r.out);
                fprintf(stderr, "[%s] %s::%s%s: %.2f s\n", what, r.t->suite, r.t->name, why, dt);
            }
        }
    }
    fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d\n",
            passed + failed, passed, failed, skipped);
    return failed ? 1 : 0;
}
