/* SPDX-License-Identifier: MIT */
/* tilewave tests: helpers shared by the test programs (temp dirs, running the CLI). */
#ifndef TWTEST_H
#define TWTEST_H

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "tilewave.h"
#include "twtest_rnd.h"

/* A fresh private directory under $TILEWAVE_TEST_TMP (or /tmp); returns a malloc'd path. */
char *twtest_tmpdir(void);
/* Remove a directory tree made by twtest_tmpdir. */
void twtest_rmtree(const char *dir);
/* malloc'd "dir/name". */
char *twtest_path(const char *dir, const char *name);
/* The whole file at `path` as a NUL-terminated string (malloc'd); asserts it can be read. */
char *twtest_slurp(const char *path);
bool twtest_exists(const char *path);
/* Number of entries in a directory, "." and ".." excluded. */
int twtest_count_entries(const char *dir);
/* Entries of dir whose name starts with prefix. */
int twtest_count_prefixed(const char *dir, const char *prefix);
/* Open files of process pid under folder dir (/proc/PID/fd): how many, and in *unlinked how
 * many of them have no name (unlinked, or made with O_TMPFILE). */
int twtest_open_files_in(pid_t pid, const char *dir, int *unlinked);
/* Whether the output writer of process pid has started on a file in dir: an open nameless
 * file there (O_TMPFILE, io/writer_tiff.c), or, where the file system lacks O_TMPFILE, its
 * temporary file ".NAME.tw-XXXXXX"; *named says which. */
bool twtest_writer_started(pid_t pid, const char *dir, const char *name, bool *named);
/* Start the CLI (argv[0] its path, NULL-terminated) in a child with stdin, stdout and stderr
 * on /dev/null and runtime.models=none unless the environment sets it; its pid (asserted). */
pid_t twtest_spawn_quiet(const char *const *argv);

/* Result of running the tilewave CLI. */
typedef struct twtest_run {
    int status;  /* exit code, or 128 + signal */
    char *out;   /* stdout, NUL-terminated, malloc'd */
    char *err;   /* stderr */
} twtest_run;

/* Run TW_CLI_PATH with argv (NULL-terminated, argv[0] excluded) and extra environment
 * entries "K=V" (NULL-terminated, may be NULL). TILEWAVE_RUNTIME_MODELS is none unless the
 * caller's environment or `env` sets it. */
twtest_run twtest_cli(const char *const *args, const char *const *env);
/* The same with any program (searched in PATH unless it has a '/'), run in folder `cwd` (NULL:
 * this one). */
twtest_run twtest_exec(const char *prog, const char *const *args, const char *const *env,
                       const char *cwd);
void twtest_run_free(twtest_run *r);
/* In dir: n sample slides slide0.tif ... (w x h, each 40 wider and 10 taller than the one
 * before, seeds 1 ..), and dir/list.txt naming them, with a comment, a blank line and blanks
 * around the paths, then `extra` (a line, when not NULL), for --list. Returns the list's path
 * (malloc'd). Asserts. */
char *twtest_slide_list(const char *dir, int n, int w, int h, const char *extra);
/* Number of lines of s (a last line without '\n' counts). */
int twtest_lines(const char *s);

/* Silence the library's log (tests provoke warnings on purpose, e.g. oversubscription). */
void twtest_quiet_logs(void);
/* A runtime with `cpu_workers` CPU workers and GPUs `gpus` ("none", "all", "0"), logs
 * silenced, the TILEWAVE_* environment applied first (TILEWAVE_RUNTIME_POLICY=fair ctest runs
 * the tests under another policy), runtime.models = none unless TILEWAVE_RUNTIME_MODELS says
 * otherwise. NULL on failure, with the reason in err. */
tw_runtime *twtest_runtime(int cpu_workers, const char *gpus, tw_error *err);

/* How many times slower than a plain build this one runs, for tests' wall-clock bounds:
 * ThreadSanitizer (the ci-tsan preset) 10, AddressSanitizer 3, else 1. */
#if defined(__SANITIZE_THREAD__)
#define TWTEST_SLOWDOWN 10.0
#elif defined(__SANITIZE_ADDRESS__)
#define TWTEST_SLOWDOWN 3.0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TWTEST_SLOWDOWN 10.0
#elif __has_feature(address_sanitizer)
#define TWTEST_SLOWDOWN 3.0
#endif
#endif
#ifndef TWTEST_SLOWDOWN
#define TWTEST_SLOWDOWN 1.0
#endif

/* A Criterion test's timeout: a guard against hangs, never a speed check. The seconds a test
 * takes on an idle plain build times 3 (a loaded machine: CI's 2 cores shared with other
 * work), times the sanitizer's slowdown. ctest's own limit on the whole program
 * (tests/CMakeLists.txt) grows the same way. */
#define TWTEST_TIMEOUT(s) ((s) * 3.0 * TWTEST_SLOWDOWN)

/* True when the build has CUDA and a device is present. */
bool twtest_have_gpu(void);
/* Skip the current Criterion test when there is no GPU. */
void twtest_need_gpu(void);
/* A runtime with runtime.gpus = `gpus` and runtime.cpu_workers = `cpu_workers` (strings as in
 * a config file), logs at error level, models as twtest_runtime(); asserts on failure. */
tw_runtime *twtest_runtime_with(const char *gpus, const char *cpu_workers);

/* Write a one-channel w x h image of `type` (rows packed) as a tiled BigTIFF with 16x16 tiles.
 * Returns the writer's status, with the message in err. */
tw_status twtest_write_image(const char *path, const void *px, int64_t w, int64_t h,
                             tw_sample_type type, tw_error *err);
/* Read the whole level 0 of a file into a malloc'd packed buffer; NULL on failure. Reports
 * channels and type when the pointers are set. */
void *twtest_read_image(const char *path, int64_t *w, int64_t *h, int *channels,
                        tw_sample_type *type);

#endif /* TWTEST_H */
