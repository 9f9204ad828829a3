/* SPDX-License-Identifier: MIT */
/* tilewave tests: faults end to end through the CLI: bad reads, a full disk, kill -9. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tiffio.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_rt.h"

/*
 * What the README promises for every failure: exit 1, one line on stderr naming the problem,
 * nothing at the output path, no temporary file left in the output folder and nothing in the
 * scratch folder (runtime.scratch_dir, set to a private folder with --set).
 *
 * Reading faults cannot be injected (runtime.fault_inject fails CUDA attempts only, docs/
 * runtime.md "Faults and cancellation"), so reads fail on real files: a sample slide whose
 * level-0 tile in the middle of the image holds garbage instead of deflate data (the slide
 * opens, the job starts, the tiles before it are processed and written, then that read
 * fails); one whose tile offset points past the end of the file (the reader checks every
 * tile's extent when it opens the slide, so this fails before the job starts); and a slide
 * cut to a third of its size while a job reads it (short reads mid-run). A full disk is
 * RLIMIT_FSIZE set in the child before exec, with SIGXFSZ ignored, so that writes past the
 * limit fail with EFBIG as on a full disk, in the output writer or in the runtime's spill file.
 * kill -9 cannot be handled: what is checked is what the design leaves (the output, a
 * nameless file (O_TMPFILE) until it is complete, and the scratch files, unlinked when made,
 * are gone with the process; where the file system lacks O_TMPFILE the temporary output
 * ".NAME.tw-XXXXXX" stays in the output folder).
 */

static char *in_dir;  /* the slides, and the children's stdout and stderr */
static char *out_dir; /* outputs only: empty after every failure */
static char *scratch; /* runtime.scratch_dir */
static char scratch_set[4200]; /* "runtime.scratch_dir=..." */

static void
setup(void)
{
    in_dir = twtest_tmpdir();
    out_dir = twtest_tmpdir();
    scratch = twtest_tmpdir();
    cr_assert(in_dir && out_dir && scratch);
    snprintf(scratch_set, sizeof scratch_set, "runtime.scratch_dir=%s", scratch);
}

static void
teardown(void)
{
    twtest_rmtree(in_dir);
    twtest_rmtree(out_dir);
    twtest_rmtree(scratch);
    free(in_dir);
    free(out_dir);
    free(scratch);
}

TestSuite(cli_faults, .init = setup, .fini = teardown, .timeout = TWTEST_TIMEOUT(120));

/* A sample slide of side x side pixels in in_dir (malloc'd path). */
static char *
sample(const char *name, int side)
{
    char *path = twtest_path(in_dir, name), size[32];
    twtest_run r;

    snprintf(size, sizeof size, "%dx%d", side, side);
    r = RUN("sample", path, "--size", size, "--quiet");
    expect_ok(&r);
    return path;
}

/* Break level-0 tile `index` of `path` (offsets and byte counts from libtiff): overwrite its
 * data with garbage, or with `past_end` point its offset past the end of the file (found as the
 * 16 bytes of its and the next tile's offsets in the file, rewritten in place). */
static void
break_tile(const char *path, uint32_t index, bool past_end)
{
    TIFF *tif = TIFFOpen(path, "r");
    uint64_t *off = NULL, *cnt = NULL;
    uint64_t o, o_next, n, size;
    uint8_t *buf;
    struct stat sb;
    int fd;

    cr_assert_not_null(tif);
    cr_assert(TIFFIsTiled(tif));
    cr_assert(index + 1 < TIFFNumberOfTiles(tif));
    cr_assert(TIFFGetField(tif, TIFFTAG_TILEOFFSETS, &off) == 1);
    cr_assert(TIFFGetField(tif, TIFFTAG_TILEBYTECOUNTS, &cnt) == 1);
    o = off[index];
    o_next = off[index + 1];
    n = cnt[index];
    TIFFClose(tif);
    cr_assert(n > 16);
    cr_assert(eq(int, stat(path, &sb), 0));
    size = (uint64_t)sb.st_size;
    fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    if (!past_end) {
        buf = malloc(n);
        cr_assert_not_null(buf);
        for (uint64_t i = 0; i < n; i++)
            buf[i] = (uint8_t)(0xa5 ^ (i * 131));
        cr_assert(eq(i64, (int64_t)pwrite(fd, buf, n, (off_t)o), (int64_t)n));
    } else {
        uint64_t pat[2] = {o, o_next}, far = size + (1 << 20); /* little-endian host */
        int64_t at = -1;

        buf = malloc(size);
        cr_assert_not_null(buf);
        cr_assert(eq(i64, (int64_t)pread(fd, buf, size, 0), (int64_t)size));
        for (uint64_t i = 0; i + 16 <= size && at < 0; i += 2)
            if (memcmp(buf + i, pat, 16) == 0)
                at = (int64_t)i;
        cr_assert(at > 0, "tile offsets not found in %s", path);
        cr_assert(eq(i64, (int64_t)pwrite(fd, &far, 8, (off_t)at), 8));
    }
    close(fd);
    free(buf);
}

/* Expect a failed run: exit 1, one line containing `needle`, nothing at `out`, the output and
 * scratch folders empty. */
static void
expect_clean_failure(twtest_run *r, const char *needle, const char *out, const char *what)
{
    cr_log_info("%s: exit %d: %s", what, r->status, r->err);
    expect_error(r, 1, needle, out);
    cr_assert(eq(int, twtest_count_entries(out_dir), 0), "%s: files left in the output folder",
              what);
    cr_assert(eq(int, twtest_count_entries(scratch), 0), "%s: files left in the scratch folder",
              what);
}

Test(cli_faults, read_error_mid_run_fails_cleanly)
{
    /* Two 2048 x 2048 samples, each with a broken level-0 tile in the middle of the image
     * (row 4, column 4 of the 8 x 8 tiles of 256 x 256; the directories intact, so the slide
     * opens and the job starts): its deflate data overwritten with garbage, or its offset
     * pointing past the end of the file. gray, convert (pyramid), area-open and edt under a
     * memory budget (tiles spilled to the scratch folder) each exit 1 with one line naming
     * the slide, leave nothing at the output path and nothing in the output or scratch
     * folders. The same commands succeed on the intact slide. */
    char *good = sample("good.tif", 2048), *garbled = sample("garbled.tif", 2048);
    char *cut = sample("cut.tif", 2048);
    char *out = twtest_path(out_dir, "out.tif");
    twtest_run r;

    break_tile(garbled, 8 * 4 + 4, false);
    break_tile(cut, 8 * 4 + 4, true);
    for (int pass = 0; pass < 3; pass++) {
        const char *in = pass == 0 ? good : pass == 1 ? garbled : cut;
        const char *name = pass == 1 ? "garbled.tif" : "cut.tif";

        r = RUN("gray", in, "-o", out, "--quiet", "--set", scratch_set);
        pass ? expect_clean_failure(&r, name, out, "gray") : expect_ok(&r);
        r = RUN("convert", in, "-o", out, "--pyramid", "--quiet", "--set", scratch_set);
        pass ? expect_clean_failure(&r, name, out, "convert") : expect_ok(&r);
        r = RUN("area-open", in, "--area", "50", "-o", out, "--tile", "256x256",
                "--mem-budget", "2M", "--quiet", "--set", scratch_set);
        pass ? expect_clean_failure(&r, name, out, "area-open") : expect_ok(&r);
        r = RUN("edt", in, "--threshold", "200", "-o", out, "--tile", "256x256",
                "--mem-budget", "2M", "--quiet", "--set", scratch_set);
        pass ? expect_clean_failure(&r, name, out, "edt") : expect_ok(&r);
        unlink(out);
    }
    free(good);
    free(garbled);
    free(cut);
    free(out);
}

/* Run the CLI with `args` in a child whose files may not grow past `limit` bytes (SIGXFSZ
 * ignored: writes past it fail with EFBIG). */
static twtest_run
run_fsize(rlim_t limit, const char *const *args)
{
    twtest_run r = {-1, NULL, NULL};
    char *err_path = twtest_path(in_dir, "stderr.txt");
    const char *argv[32];
    int fe, ws = 0, na = 0;
    pid_t pid;

    argv[na++] = TW_CLI_PATH;
    for (; *args && na < 31; args++)
        argv[na++] = *args;
    argv[na] = NULL;
    fe = open(err_path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    cr_assert(fe >= 0);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {limit, limit};
        int devnull = open("/dev/null", O_RDWR);

        setenv("TILEWAVE_RUNTIME_MODELS", "none", 0);
        signal(SIGXFSZ, SIG_IGN);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(fe, 2);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(126);
        execv(TW_CLI_PATH, (char *const *)argv);
        _exit(127);
    }
    while (waitpid(pid, &ws, 0) < 0)
        ;
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r.out = calloc(1, 1);
    r.err = calloc(1, 4096);
    cr_assert(r.out && r.err);
    cr_assert(pread(fe, r.err, 4095, 0) >= 0);
    close(fe);
    unlink(err_path);
    free(err_path);
    return r;
}

Test(cli_faults, full_disk_while_writing_fails_cleanly)
{
    /* Files limited by RLIMIT_FSIZE: gray of a 2048 x 2048 slide uncompressed (4 MiB) and
     * convert as an uncompressed RGB pyramid (16 MiB) under a 256 KiB limit fail in the output
     * writer ("cannot write tile"); fill-holes under a 1 MiB memory budget (31 MiB of tiles
     * spilled) with a 1 MiB limit fails in the runtime's spill file ("cannot spill ... (File
     * too large)") while its output (58 KiB) would fit. Each: exit 1, one line, nothing at
     * the output path, the output and scratch folders empty. */
    char *in = sample("slide.tif", 2048), *out = twtest_path(out_dir, "out.tif");
    twtest_run r;

    r = run_fsize(256 << 10, (const char *const[]){"gray", in, "-o", out, "--compression",
                                                   "none", "--quiet", "--set", scratch_set,
                                                   NULL});
    expect_clean_failure(&r, "cannot write", out, "gray");
    r = run_fsize(256 << 10, (const char *const[]){"convert", in, "-o", out, "--compression",
                                                   "none", "--pyramid", "--quiet", "--set",
                                                   scratch_set, NULL});
    expect_clean_failure(&r, "cannot write", out, "convert --pyramid");
    r = run_fsize(1 << 20, (const char *const[]){"fill-holes", in, "-o", out, "--threshold",
                                                 "otsu", "--invert", "--mem-budget", "1M",
                                                 "--tile", "256x256", "--quiet", "--set",
                                                 scratch_set, NULL});
    expect_clean_failure(&r, "File too large", out, "fill-holes, budget");
    free(in);
    free(out);
}

Test(cli_faults, kill_9_mid_write_leaves_no_output)
{
    /* open-rec of a 4096 x 4096 slide on one worker, as a pyramid, under a 2 MiB budget (128
     * MiB of tiles spilled over about a second) with the scratch folder set, killed with
     * SIGKILL once its output file and its spill file are open: nothing at the output path;
     * the scratch folder empty (the spill file, seen open and unlinked in /proc/PID/fd before
     * the kill, was nameless from the start); the output folder empty too (the output was a
     * nameless O_TMPFILE file), or, on a file system without O_TMPFILE, holding only the
     * temporary output ".out.tif.tw-XXXXXX", since no process is left to remove it. The next
     * run to the same path succeeds and leaves no file of its own beside the output. */
    char *in = sample("slide.tif", 4096), *out = twtest_path(out_dir, "out.tif");
    int ws = 0, stale, n_open = 0, n_unlinked = 0;
    bool named = false;
    pid_t pid;
    double t0;
    twtest_run r;

    pid = twtest_spawn_quiet((const char *const[]){
        TW_CLI_PATH, "open-rec", in, "--radius", "5", "-o", out, "--pyramid", "--cpu-workers", "1",
        "--gpus", "none", "--mem-budget", "2M", "--tile", "128x128", "--set", scratch_set,
        "--quiet", NULL});
    t0 = twtest_now_s();
    while (!twtest_writer_started(pid, out_dir, "out.tif", &named) ||
           (n_open = twtest_open_files_in(pid, scratch, &n_unlinked)) == 0) {
        cr_assert(waitpid(pid, &ws, WNOHANG) == 0, "the command ended before it wrote anything");
        cr_assert(twtest_now_s() - t0 < 30.0, "no temporary output or spill file after 30 s");
        twtest_sleep_ms(2);
    }
    cr_assert(eq(int, n_unlinked, n_open), "a scratch file has a name while the job runs");
    twtest_sleep_ms(150);
    cr_assert(waitpid(pid, &ws, WNOHANG) == 0,
              "the command finished before the kill: make its input larger");
    cr_assert(eq(int, kill(pid, SIGKILL), 0));
    while (waitpid(pid, &ws, 0) < 0)
        ;
    bool killed = WIFSIGNALED(ws);

    cr_assert(killed, "the command was not killed");
    cr_assert(eq(int, WTERMSIG(ws), SIGKILL));
    cr_assert(twtest_exists(out) == false, "a killed run left %s", out);
    cr_assert(eq(int, twtest_count_entries(scratch), 0), "the spill file has a name");
    stale = twtest_count_prefixed(out_dir, ".out.tif.tw-");
    cr_log_info("output file %s", named ? "named (no O_TMPFILE here)" : "nameless (O_TMPFILE)");
    cr_assert(eq(int, stale, named ? 1 : 0), "temporary outputs left: %d", stale);
    cr_assert(eq(int, twtest_count_entries(out_dir), stale), "other files in the output folder");

    /* the next run to the same path */
    r = RUN("gray", in, "-o", out, "--quiet", "--set", scratch_set);
    expect_ok(&r);
    cr_assert(twtest_exists(out));
    cr_assert(eq(int, twtest_count_entries(out_dir), 1 + stale), "the next run left a file");
    cr_assert(eq(int, twtest_count_entries(scratch), 0));
    free(in);
    free(out);
}

Test(cli_faults, slide_truncated_while_running_fails_cleanly)
{
    /* area-open of a 4096 x 4096 slide on one worker (about a second), the slide cut to a
     * third of its size 100 ms after the job started (its temporary output exists): the tiles
     * read after that are short reads; exit 1, one line naming the slide, nothing at the
     * output path, the output and scratch folders empty. */
    char *in = sample("slide.tif", 4096), *out = twtest_path(out_dir, "out.tif");
    char *err_path = twtest_path(in_dir, "stderr.txt");
    int ws = 0, fe;
    struct stat sb;
    pid_t pid;
    double t0;
    twtest_run r = {-1, NULL, NULL};

    cr_assert(eq(int, stat(in, &sb), 0));
    fe = open(err_path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    cr_assert(fe >= 0);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);

        setenv("TILEWAVE_RUNTIME_MODELS", "none", 0);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(fe, 2);
        execl(TW_CLI_PATH, TW_CLI_PATH, "area-open", in, "--area", "50", "-o", out,
              "--cpu-workers", "1", "--gpus", "none", "--set", scratch_set, "--quiet",
              (char *)NULL);
        _exit(127);
    }
    t0 = twtest_now_s();
    bool named;

    while (!twtest_writer_started(pid, out_dir, "out.tif", &named)) {
        cr_assert(waitpid(pid, &ws, WNOHANG) == 0, "the command ended before it wrote anything");
        cr_assert(twtest_now_s() - t0 < 30.0, "no temporary output file after 30 s");
        twtest_sleep_ms(2);
    }
    twtest_sleep_ms(100);
    cr_assert(waitpid(pid, &ws, WNOHANG) == 0,
              "the command finished before the cut: make its input larger");
    cr_assert(eq(int, truncate(in, sb.st_size / 3), 0));
    while (waitpid(pid, &ws, 0) < 0)
        ;
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r.out = calloc(1, 1);
    r.err = calloc(1, 4096);
    cr_assert(r.out && r.err);
    cr_assert(pread(fe, r.err, 4095, 0) >= 0);
    close(fe);
    expect_clean_failure(&r, "slide.tif", out, "area-open, slide cut while running");
    free(err_path);
    free(in);
    free(out);
}
