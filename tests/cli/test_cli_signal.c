/* SPDX-License-Identifier: MIT */
/* tilewave tests: SIGINT and SIGTERM cancel a running command cleanly (exit 130 / 143). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_rt.h"

static char *dir;    /* the command's output directory: empty before and after */
static char *in_dir; /* its input, and the child's stdout and stderr */
static char *scratch; /* runtime.scratch_dir of the runs under a memory budget */

static void
setup(void)
{
    dir = twtest_tmpdir();
    in_dir = twtest_tmpdir();
    scratch = twtest_tmpdir();
    cr_assert(dir != NULL && in_dir != NULL && scratch != NULL);
}

static void
teardown(void)
{
    twtest_rmtree(dir);
    twtest_rmtree(in_dir);
    twtest_rmtree(scratch);
    free(dir);
    free(in_dir);
    free(scratch);
}

TestSuite(cli_signal, .init = setup, .fini = teardown, .timeout = TWTEST_TIMEOUT(120));

/* A 4096 x 4096 sample slide: an area opening of it takes seconds on one worker. */
static char *
sample_path(void)
{
    char *path = twtest_path(in_dir, "sample.tif");
    twtest_run r = RUN("sample", path, "--size", "4096x4096", "--quiet");

    cr_assert(eq(int, r.status, 0), "sample failed: %s", r.err);
    twtest_run_free(&r);
    return path;
}

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    size_t n;

    cr_assert(f != NULL && buf != NULL);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Start `tilewave area-open` on the sample (seconds of work on one CPU worker), wait until its
 * output writer has created its temporary file (the job runs), send `sig` 300 ms later, and
 * check: the exit code 128 + sig within 1.5 s of the signal, one line naming the signal on
 * stderr, nothing left in the output directory (neither the output nor a partial file).
 * With `spill`: `tilewave open-rec` as a pyramid under a 2 MiB memory budget instead (about a
 * second of work, 128 MiB of tiles spilled to the scratch file in `scratch`), the signal 150
 * ms after the temporary file appears; the scratch folder must be empty too. */
static void
interrupt_with(int sig, int want_code, const char *want_name, bool spill)
{
    char *in = sample_path(), *out = twtest_path(dir, "out.tif");
    char *err_path = twtest_path(in_dir, "stderr.txt");
    char *out_path = twtest_path(in_dir, "stdout.txt");
    pid_t pid;
    int ws = 0, fe, fo;
    double t_sig, t_end, t0;
    pid_t done;
    char *err;
    bool named;

    fe = open(err_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    fo = open(out_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    cr_assert(fe >= 0 && fo >= 0);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);

        setenv("TILEWAVE_RUNTIME_MODELS", "none", 0);
        dup2(devnull, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        if (spill) {
            char set[4200];

            snprintf(set, sizeof set, "runtime.scratch_dir=%s", scratch);
            execl(TW_CLI_PATH, TW_CLI_PATH, "open-rec", in, "--radius", "5", "-o", out,
                  "--pyramid", "--tile", "128x128", "--mem-budget", "2M", "--set", set,
                  "--cpu-workers", "1", "--gpus", "none", "--quiet", (char *)NULL);
        }
        /* 256x256 tiles: a cancel waits for the task running (its kernel does not look),
         * and a 1024x1024 tile's pass takes over a second under ThreadSanitizer on a loaded
         * 2-core machine, beyond the bound below. */
        execl(TW_CLI_PATH, TW_CLI_PATH, "area-open", in, "--area", "50", "-o", out,
              "--tile", "256x256", "--cpu-workers", "1", "--gpus", "none", "--quiet",
              (char *)NULL);
        _exit(127);
    }
    close(fe);
    close(fo);
    /* The writer's output file (nameless, or ".out.tif.tw-XXXXXX") is open once the job is
     * submitted. */
    t0 = twtest_now_s();
    while (!twtest_writer_started(pid, dir, "out.tif", &named)) {
        cr_assert(waitpid(pid, &ws, WNOHANG) == 0, "the command ended before it wrote anything");
        cr_assert(twtest_now_s() - t0 < 30.0, "no temporary output file after 30 s");
        twtest_sleep_ms(5);
    }
    twtest_sleep_ms(spill ? 150 : 300);
    cr_assert(waitpid(pid, &ws, WNOHANG) == 0,
              "the command finished before the signal: make its input larger");
    t_sig = twtest_now_s();
    cr_assert(eq(int, kill(pid, sig), 0));
    do
        done = waitpid(pid, &ws, 0);
    while (done < 0);
    t_end = twtest_now_s();
    err = slurp(err_path);
    cr_log_info("%s: exited %.0f ms after the signal", want_name, 1e3 * (t_end - t_sig));
    bool exited = WIFEXITED(ws);
    int code = exited ? WEXITSTATUS(ws) : -1, killed_by = exited ? 0 : WTERMSIG(ws);

    cr_assert(exited, "killed by signal %d instead of exiting", killed_by);
    cr_assert(eq(int, code, want_code), "stderr: %s", err);
    cr_assert(eq(int, twtest_lines(err), 1), "want one line on stderr, got: %s", err);
    cr_assert(strstr(err, want_name) != NULL, "stderr '%s' lacks '%s'", err, want_name);
    cr_assert(strstr(err, "interrupted") != NULL, "%s", err);
    cr_assert(t_end - t_sig < 1.5, "exited %.2f s after the signal", t_end - t_sig);
    cr_assert(eq(int, twtest_count_entries(dir), 0), "output or a partial file was left in %s",
              dir);
    cr_assert(eq(int, twtest_count_entries(scratch), 0), "files left in the scratch folder");
    free(err);
    free(err_path);
    free(out_path);
    free(in);
    free(out);
}

Test(cli_signal, sigint_cancels_and_exits_130)
{
    /* SIGINT while area-open runs: exit 130, "interrupted by SIGINT", no output left. */
    interrupt_with(SIGINT, 130, "SIGINT", false);
}

Test(cli_signal, sigterm_cancels_and_exits_143)
{
    /* SIGTERM while area-open runs: exit 143, "interrupted by SIGTERM", no output left. */
    interrupt_with(SIGTERM, 143, "SIGTERM", false);
}

Test(cli_signal, sigint_while_spilling_exits_130_leaves_nothing)
{
    /* SIGINT while open-rec spills tiles under --mem-budget: exit 130, one line, neither the
     * output, a partial file nor a scratch file left. */
    interrupt_with(SIGINT, 130, "SIGINT", true);
}

Test(cli_signal, sigterm_while_spilling_exits_143_leaves_nothing)
{
    /* SIGTERM while open-rec spills tiles under --mem-budget: exit 143, the same. */
    interrupt_with(SIGTERM, 143, "SIGTERM", true);
}
