/* SPDX-License-Identifier: MIT */
/* tilewave bench: helpers shared by the tw_bench subcommands (timing, statistics, JSON). */
#ifndef TW_BENCH_H
#define TW_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tilewave.h"
#include "twtest_rnd.h" /* the tests' generator: benches draw their inputs from it too */

/* Exit codes, as the tilewave CLI: 0 ok, 1 failure (one line on stderr), 2 usage. */
enum { BENCH_OK = 0, BENCH_FAIL = 1, BENCH_USAGE = 2 };

/* The subcommand in messages ("tw_bench gray"). */
extern const char *bench_prog;

/* "tw_bench CMD: message" on stderr; return BENCH_FAIL. */
int bench_fail(const char *fmt, ...) TW_PRINTF(1, 2);
/* The same plus a pointer to --help; return BENCH_USAGE. */
int bench_usage(const char *fmt, ...) TW_PRINTF(1, 2);

/* Monotonic seconds. */
double bench_now(void);
/* Median of n values (sorts v in place); 0 when n is 0. */
double bench_median(double *v, int n);
double bench_min(const double *v, int n);
double bench_max(const double *v, int n);
/* User + system CPU seconds of this process so far. */
double bench_cpu_seconds(void);
/* Peak resident set of this process in MiB (getrusage ru_maxrss). */
double bench_peak_rss_mib(void);
/* CUDA devices visible (0 in builds without CUDA or when the driver finds none). */
int bench_gpu_count(void);
/* Why GPU measurements cannot run, or NULL when they can. */
const char *bench_gpu_missing(void);

/* Parse an integer option into [min, max]; prints a usage error and returns BENCH_USAGE. */
int bench_parse_int(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out);

/* Set the runtime keys of a variant: cpu (runtime.gpus=none, every core), gpu (GPU workers
 * only, cpu_workers=0) or both (every core and GPU). Returns BENCH_OK or BENCH_USAGE. */
int bench_variant_config(tw_config *cfg, const char *variant);
/* A job benchmark's runtime: --variant, --tile (tile.size) and the --set pairs into a new *cfg,
 * then *rt (NULL on failure); the caller destroys both. BENCH_OK or the failure's code. */
int bench_job_runtime(const char *variant, const char *tile, const char *const *sets, int n_sets,
                      tw_config **cfg, tw_runtime **rt);
/* The job submitted at t0 (st: the submit's status, err its error): wait, *secs from t0 to its
 * end, destroy it. BENCH_OK, or BENCH_FAIL with the job's message. */
int bench_job_wait(tw_status st, tw_job *job, const tw_error *err, double t0, double *secs);
/* --pinned: page-lock n bytes at p (cudaHostRegister) / undo it; BENCH_OK or a failure. */
int bench_host_pin(void *p, size_t n);
void bench_host_unpin(void *p);

/* Apply one --set KEY=VALUE to cfg; BENCH_USAGE (message printed) when it is refused. */
int bench_apply_set(tw_config *cfg, const char *kv);
/* Append `, "policy": ..., "gpus_present": N` (the scheduling policy of cfg) to a JSON line. */
void bench_json_runtime(FILE *f, const tw_config *cfg);
/* ", \"gpu_workers\": G, \"cpu_workers\": C, \"gpu_bytes_up\": ..., \"gpu_bytes_down\": ...,
 * \"gpu_busy_s\": ..., \"cpu_busy_s\": ..." of rt's workers, per run (the counters since the
 * runtime started divided by `runs`, the warm-up included): what a job moved and kept busy. */
void bench_json_workers(FILE *f, const tw_runtime *rt, int runs);

/* Log handler that drops everything below ERROR (tw_bench prints only JSON on stdout). */
void bench_quiet_logs(void);

/* Print s as a JSON string literal (quotes included). */
void bench_json_str(FILE *f, const char *s);
/* {"bench": NAME, "skipped": WHY} plus a newline. */
void bench_print_skipped(const char *bench, const char *variant, const char *why);

/* An 8- or 16-bit gray image in host memory (packed rows) for the max-tree and tree-of-shapes
 * benchmarks (bench_maxtree.c). */
typedef struct bench_image {
    void *data;
    int64_t w, h;
    tw_sample_type type;
    double load_s;          /* generating or reading it */
} bench_image;
/* Non-zero for the generated inputs: "noise" (uniform levels 0..levels - 1, the type's whole
 * range when levels <= 0) and "field" (a smooth random field with texture, natural-like). */
int bench_gray_generated(const char *input);
/* A generated input of w x h and type_name ("u8", the default, or "u16"), or level 0 of a
 * slide or TIFF file, whole (RGB to tilewave's luminance; type_name, when given, must match).
 * BENCH_OK, or BENCH_FAIL / BENCH_USAGE with a message printed; img->data is malloc'ed. */
int bench_gray_load(const char *input, int64_t w, int64_t h, const char *type_name,
                    int64_t levels, int64_t seed, bench_image *img);

int bench_runtime(int argc, char **argv);
int bench_transfer(int argc, char **argv);
int bench_gray(int argc, char **argv);
int bench_gray_kernel(int argc, char **argv);
int bench_mrecon(int argc, char **argv);
int bench_edt(int argc, char **argv);
int bench_maxtree(int argc, char **argv);
/* area-open, area-close, height-open, height-close: argv[0] names the filter. */
int bench_attr_filter(int argc, char **argv);
int bench_tos(int argc, char **argv);
int bench_codec(int argc, char **argv);
int bench_label(int argc, char **argv);

#endif /* TW_BENCH_H */
