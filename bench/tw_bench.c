/* SPDX-License-Identifier: MIT */
/* tilewave bench: tw_bench entry point and the helpers its subcommands share. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench.h"
#include "tw_internal.h"

const char *bench_prog = "tw_bench";

static const char help[] =
    "Usage: tw_bench COMMAND [options]\n"
    "\n"
    "Time tilewave itself; every measurement is one JSON object on a line of stdout.\n"
    "\n"
    "  runtime      empty-task throughput and per-task overhead through the runtime\n"
    "  transfer     host<->GPU bandwidth (pinned and pageable, CUDA events)\n"
    "  gray         the whole gray job, file to file (cpu, gpu or both)\n"
    "  gray-kernel  the gray kernel alone on an in-memory image (cpu or gpu)\n"
    "  mrecon       reconstruction of an in-memory image through the runtime, with stats\n"
    "  edt          distance transform: the CPU or CUDA kernel in memory, or the job\n"
    "  maxtree      canonical max-tree: the CPU or CUDA kernel in memory, or the job\n"
    "  area-open    attribute filters through the whole tiled job (also area-close,\n"
    "               height-open, height-close)\n"
    "  tos          tree of shapes (parent image) or grain filter: the kernel or the job\n"
    "  label        connected components of an in-memory mask through the runtime (GPix/s)\n"
    "  codec        deflate of a TIFF's tiles, zlib and libdeflate at every level: a table\n"
    "               (JSON with --json)\n"
    "\n"
    "'tw_bench COMMAND --help' describes each. Exit status: 0 success, 1 failure (one line\n"
    "on stderr), 2 usage error. bench/run.py drives these and compares with peers.\n";

static void
vmessage(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", bench_prog);
    vfprintf(stderr, fmt, ap);
}

int
bench_fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return BENCH_FAIL;
}

int
bench_usage(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see '%s --help')\n", bench_prog);
    return BENCH_USAGE;
}

double
bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double
bench_median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double
bench_min(const double *v, int n)
{
    double m = n > 0 ? v[0] : 0.0;

    for (int i = 1; i < n; i++)
        if (v[i] < m)
            m = v[i];
    return m;
}

double
bench_max(const double *v, int n)
{
    double m = n > 0 ? v[0] : 0.0;

    for (int i = 1; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

double
bench_cpu_seconds(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

double
bench_peak_rss_mib(void)
{
    struct rusage ru;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];

    /* VmHWM is the peak of this program's own address space. ru_maxrss is not: on Linux
     * exec folds the launching process's high-water mark into it, so a tw_bench started by
     * a large Python driver would report the driver's peak. */
    if (f) {
        while (fgets(line, sizeof line, f)) {
            unsigned long long kib = 0;

            if (sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
                fclose(f);
                return (double)kib / 1024.0;
            }
        }
        fclose(f);
    }
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

int
bench_gpu_count(void)
{
#ifdef TW_HAVE_CUDA
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

const char *
bench_gpu_missing(void)
{
#ifdef TW_HAVE_CUDA
    return bench_gpu_count() > 0 ? NULL : "no CUDA device";
#else
    return "built without CUDA";
#endif
}

int
bench_parse_int(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (twi_parse_i64(s, min, max, out) != TW_OK)
        return bench_usage("%s: bad value '%s' (want an integer in %lld..%lld)", flag, s,
                           (long long)min, (long long)max);
    return BENCH_OK;
}

static void
quiet_log(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)user;
    if (level <= TW_LOG_ERROR)
        fprintf(stderr, "%s: %s: %s\n", bench_prog, domain, message);
}

void
bench_quiet_logs(void)
{
    /* Oversubscription warnings (e.g. 8 workers on 2 cores) are expected in a sweep. */
    tw_log_set_handler(quiet_log, NULL);
}

void
bench_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void
bench_print_skipped(const char *bench, const char *variant, const char *why)
{
    printf("{\"bench\": ");
    bench_json_str(stdout, bench);
    if (variant) {
        printf(", \"variant\": ");
        bench_json_str(stdout, variant);
    }
    printf(", \"skipped\": ");
    bench_json_str(stdout, why);
    printf("}\n");
    fflush(stdout);
}

int
bench_apply_set(tw_config *cfg, const char *kv)
{
    char key[128];
    const char *eq = strchr(kv, '=');
    size_t n = eq ? (size_t)(eq - kv) : 0;
    tw_error err;

    if (n == 0 || n >= sizeof key)
        return bench_usage("--set wants KEY=VALUE, got '%s'", kv);
    memcpy(key, kv, n);
    key[n] = '\0';
    if (tw_config_set(cfg, key, eq + 1, TW_CONFIG_SET, &err) != TW_OK)
        return bench_usage("%s", err.message);
    return BENCH_OK;
}

void
bench_json_runtime(FILE *f, const tw_config *cfg)
{
    const char *policy = NULL;

    if (tw_config_get_string(cfg, "runtime.policy", &policy) != TW_OK || !policy)
        policy = "?";
    fputs(", \"policy\": ", f);
    bench_json_str(f, policy);
    fprintf(f, ", \"gpus_present\": %d", bench_gpu_count());
}

void
bench_json_workers(FILE *f, const tw_runtime *rt, int runs)
{
    double up = 0, down = 0, gbusy = 0, cbusy = 0;
    int gpus = 0, cpus = 0;

    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;

        if (tw_runtime_get_worker(rt, i, &wi) != TW_OK)
            continue;
        if (wi.type == TW_DEVICE_CUDA) {
            gpus++;
            up += (double)wi.bytes_to_gpu;
            down += (double)wi.bytes_from_gpu;
            gbusy += wi.busy_s;
        } else {
            cpus++;
            cbusy += wi.busy_s;
        }
    }
    runs = runs > 0 ? runs : 1;
    fprintf(f,
            ", \"gpu_workers\": %d, \"cpu_workers\": %d, \"gpu_bytes_up\": %.0f, "
            "\"gpu_bytes_down\": %.0f, \"gpu_busy_s\": %.4f, \"cpu_busy_s\": %.4f",
            gpus, cpus, up / runs, down / runs, gbusy / runs, cbusy / runs);
}

int
bench_variant_config(tw_config *cfg, const char *variant)
{
    int cpu = strcmp(variant, "cpu") == 0, gpu = strcmp(variant, "gpu") == 0;
    tw_error err;

    if (!cpu && !gpu && strcmp(variant, "both") != 0)
        return bench_usage("--variant: unknown variant '%s' (cpu, gpu, both)", variant);
    if (tw_config_set(cfg, "runtime.gpus", cpu ? "none" : "all", TW_CONFIG_SET, &err) != TW_OK ||
        tw_config_set(cfg, "runtime.cpu_workers", gpu ? "0" : "-1", TW_CONFIG_SET, &err) !=
            TW_OK)
        return bench_usage("%s", err.message);
    return BENCH_OK;
}

int
bench_job_runtime(const char *variant, const char *tile, const char *const *sets, int n_sets,
                  tw_config **cfg, tw_runtime **rt)
{
    tw_error err;
    int rc;

    *rt = NULL;
    if (tw_config_create(cfg) != TW_OK)
        return bench_fail("out of memory");
    if ((rc = bench_variant_config(*cfg, variant)) != BENCH_OK)
        return rc;
    if (tile && tw_config_set(*cfg, "tile.size", tile, TW_CONFIG_SET, &err) != TW_OK)
        return bench_usage("%s", err.message);
    for (int i = 0; i < n_sets; i++)
        if ((rc = bench_apply_set(*cfg, sets[i])) != BENCH_OK)
            return rc;
    if (tw_runtime_create(*cfg, rt, &err) != TW_OK)
        return bench_fail("%s", err.message);
    return BENCH_OK;
}

int
bench_host_pin(void *p, size_t n)
{
#ifdef TW_HAVE_CUDA
    if (cudaHostRegister(p, n, cudaHostRegisterPortable) != cudaSuccess)
        return bench_fail("cudaHostRegister of %zu bytes: %s", n,
                          cudaGetErrorString(cudaGetLastError()));
    return BENCH_OK;
#else
    (void)p;
    (void)n;
    return bench_usage("--pinned: this build has no CUDA");
#endif
}

void
bench_host_unpin(void *p)
{
#ifdef TW_HAVE_CUDA
    (void)cudaHostUnregister(p);
#else
    (void)p;
#endif
}

int
bench_job_wait(tw_status st, tw_job *job, const tw_error *err, double t0, double *secs)
{
    int rc = BENCH_OK;

    if (st != TW_OK)
        return bench_fail("%s", err->message);
    if ((st = tw_job_wait(job, -1)) != TW_OK) {
        const char *msg = tw_job_get_error(job);

        rc = bench_fail("%s", msg ? msg : tw_status_string(st));
    }
    *secs = bench_now() - t0;
    tw_job_destroy(job);
    return rc;
}

int
main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"runtime", bench_runtime},
                {"transfer", bench_transfer},
                {"gray", bench_gray},
                {"gray-kernel", bench_gray_kernel},
                {"mrecon", bench_mrecon},
                {"edt", bench_edt},
                {"maxtree", bench_maxtree},
                {"area-open", bench_attr_filter},
                {"area-close", bench_attr_filter},
                {"height-open", bench_attr_filter},
                {"height-close", bench_attr_filter},
                {"tos", bench_tos},
                {"label", bench_label},
                {"codec", bench_codec}};
    static char prog[64];

    if (argc < 2)
        return bench_usage("missing COMMAND");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(help, stdout);
        return BENCH_OK;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(argv[1], cmds[i].name) == 0) {
            snprintf(prog, sizeof prog, "tw_bench %s", cmds[i].name);
            bench_prog = prog;
            bench_quiet_logs();
            return cmds[i].fn(argc - 1, argv + 1);
        }
    }
    return bench_usage("unknown command '%s'", argv[1]);
}
