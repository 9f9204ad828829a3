/* SPDX-License-Identifier: MIT */
/* tilewave bench: the gray job file to file, and the gray kernel alone in memory. */
#include <errno.h>
#include <getopt.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_kernels.h"
#endif

#include "bench.h"
#include "omp_kernels.h"
#include "tw_internal.h"

/* ---- tw_bench gray: the whole job, file to file */

static const char gray_help[] =
    "Usage: tw_bench gray --input FILE [--variant cpu|gpu|both] [--tile WxH] [--repeat R]\n"
    "                     [--output DIR] [--set KEY=VALUE]...\n"
    "\n"
    "Time the whole tilewave gray job (read, convert, write a tiled BigTIFF) on FILE: the\n"
    "runtime is created once, one warm-up run, then R timed runs; prints the median, MPix/s\n"
    "and the process's peak RSS. Run one variant per process so that RSS is per variant.\n"
    "Configuration: defaults < TILEWAVE_* environment < variant < --tile < --set.\n"
    "\n"
    "  --input FILE      slide or TIFF (level 0, whole image)\n"
    "  --variant NAME    cpu: runtime.gpus=none, cpu_workers=-1 (default)\n"
    "                    gpu: runtime.gpus=all, cpu_workers=0 (GPU workers also run the I/O)\n"
    "                    both: the defaults (GPU and CPU workers)\n"
    "                    gpu and both print {\"skipped\": ...} when no GPU is present\n"
    "  --tile WxH        processing tile size (tile.size)\n"
    "  --repeat R        timed runs (default 5)\n"
    "  --output DIR      where the output goes (default: a temporary folder, removed after)\n"
    "  --set KEY=VALUE   any configuration key, e.g. io.compression=none (repeatable)\n"
    "  --help            this help\n";

#define MAX_SETS 32

static int
set_key(tw_config *cfg, const char *key, const char *value)
{
    tw_error err;

    if (tw_config_set(cfg, key, value, TW_CONFIG_SET, &err) != TW_OK)
        return bench_usage("%s", err.message);
    return BENCH_OK;
}

static int
apply_set(tw_config *cfg, const char *kv)
{
    char key[128];
    const char *eq = strchr(kv, '=');
    size_t n = eq ? (size_t)(eq - kv) : 0;

    if (n == 0 || n >= sizeof key)
        return bench_usage("--set wants KEY=VALUE, got '%s'", kv);
    memcpy(key, kv, n);
    key[n] = '\0';
    return set_key(cfg, key, eq + 1);
}

static void
count_workers(const tw_runtime *rt, int *n_cpu, int *n_gpu)
{
    *n_cpu = *n_gpu = 0;
    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;

        if (tw_runtime_get_worker(rt, i, &wi) != TW_OK)
            continue;
        if (wi.type == TW_DEVICE_CUDA)
            (*n_gpu)++;
        else
            (*n_cpu)++;
    }
}

/* One gray job on rt, waited for. */
static int
gray_once(tw_runtime *rt, const char *in, const char *out)
{
    tw_gray_opts o;
    tw_job *job = NULL;
    tw_error err;
    tw_status st;
    int rc = BENCH_OK;

    tw_gray_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    if (tw_gray_submit(rt, &o, &job, &err) != TW_OK)
        return bench_fail("%s", err.message);
    if ((st = tw_job_wait(job, -1)) != TW_OK) {
        const char *msg = tw_job_get_error(job);

        rc = bench_fail("%s", msg ? msg : tw_status_string(st));
    }
    tw_job_destroy(job);
    return rc;
}

int
bench_gray(int argc, char **argv)
{
    enum { O_INPUT = 1, O_VARIANT, O_TILE, O_REPEAT, O_OUTPUT, O_SET, O_HELP };
    static const struct option opts[] = {{"input", required_argument, NULL, O_INPUT},
                                         {"variant", required_argument, NULL, O_VARIANT},
                                         {"tile", required_argument, NULL, O_TILE},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"output", required_argument, NULL, O_OUTPUT},
                                         {"set", required_argument, NULL, O_SET},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    const char *input = NULL, *variant = "cpu", *tile = NULL, *outdir = NULL;
    const char *sets[MAX_SETS];
    int n_sets = 0;
    int64_t repeat = 5, tw = 0, th = 0;
    char tmpdir[] = "/tmp/tw_bench.XXXXXX", outpath[4096];
    bool made_tmp = false;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_slide *slide = NULL;
    tw_level_info li;
    tw_error err = {0};
    double *times = NULL;
    const char *missing;
    int opt, n_cpu = 0, n_gpu = 0, rc = BENCH_OK;
    struct stat sb;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_INPUT: input = optarg; break;
        case O_VARIANT: variant = optarg; break;
        case O_TILE: tile = optarg; break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat); break;
        case O_OUTPUT: outdir = optarg; break;
        case O_SET:
            if (n_sets == MAX_SETS)
                rc = bench_usage("--set: at most %d", MAX_SETS);
            else
                sets[n_sets++] = optarg;
            break;
        case 'h':
        case O_HELP: fputs(gray_help, stdout); goto out;
        default: rc = bench_usage("unknown option '%s'", argv[optind - 1]); break;
        }
        if (rc != BENCH_OK)
            goto out;
    }
    if (optind < argc) {
        rc = bench_usage("unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (!input) {
        rc = bench_usage("missing --input FILE");
        goto out;
    }
    if (strcmp(variant, "cpu") != 0 && strcmp(variant, "gpu") != 0 &&
        strcmp(variant, "both") != 0) {
        rc = bench_usage("--variant: unknown variant '%s' (cpu, gpu, both)", variant);
        goto out;
    }
    if (tile && twi_parse_dims(tile, 1, 65536, &tw, &th) != TW_OK) {
        rc = bench_usage("--tile: bad size '%s' (want WxH)", tile);
        goto out;
    }
    /* Without a GPU, "both" would only repeat "cpu". */
    if (strcmp(variant, "cpu") != 0 && (missing = bench_gpu_missing()) != NULL) {
        bench_print_skipped("gray", variant, missing);
        goto out;
    }
    if (tw_slide_open(input, TW_READER_AUTO, &slide, &err) != TW_OK ||
        tw_slide_get_level(slide, 0, &li) != TW_OK) {
        rc = bench_fail("%s", err.message[0] ? err.message : "cannot read level 0");
        goto out;
    }
    if (tw_config_create(&cfg) != TW_OK) {
        rc = bench_fail("out of memory");
        goto out;
    }
    if (tw_config_load_env(cfg, &err) != TW_OK) {
        rc = bench_fail("%s", err.message);
        goto out;
    }
    rc = bench_variant_config(cfg, variant);
    if (rc == BENCH_OK && tile)
        rc = set_key(cfg, "tile.size", tile);
    for (int i = 0; rc == BENCH_OK && i < n_sets; i++)
        rc = apply_set(cfg, sets[i]);
    if (rc != BENCH_OK)
        goto out;
    if (tw_runtime_create(cfg, &rt, &err) != TW_OK) {
        rc = bench_fail("%s", err.message);
        goto out;
    }
    count_workers(rt, &n_cpu, &n_gpu);
    if (!outdir) {
        if (!mkdtemp(tmpdir)) {
            rc = bench_fail("cannot create a folder in /tmp (%s)", strerror(errno));
            goto out;
        }
        made_tmp = true;
        outdir = tmpdir;
    }
    snprintf(outpath, sizeof outpath, "%s/tw_bench_gray_%s.tif", outdir, variant);
    if (!(times = calloc((size_t)repeat, sizeof *times))) {
        rc = bench_fail("out of memory");
        goto out;
    }
    for (int64_t r = -1; r < repeat; r++) { /* r = -1: warm-up */
        double t0 = bench_now();

        if ((rc = gray_once(rt, input, outpath)) != BENCH_OK)
            goto out;
        if (r >= 0)
            times[r] = bench_now() - t0;
    }
    {
        double lo = bench_min(times, (int)repeat), hi = bench_max(times, (int)repeat);
        double med = bench_median(times, (int)repeat);
        double mpix = (double)li.w * (double)li.h * 1e-6;
        int64_t gw = 0, gh = 0;

        /* gray.tile_size 0x0 means tile.size; report the tile actually used. */
        if ((tw_config_get_dims(tw_runtime_get_config(rt), "gray.tile_size", &gw, &gh) != TW_OK ||
             gw == 0) &&
            tw_config_get_dims(tw_runtime_get_config(rt), "tile.size", &gw, &gh) != TW_OK)
            gw = gh = 0;
        printf("{\"bench\": \"gray\", \"variant\": \"%s\", \"input\": ", variant);
        bench_json_str(stdout, input);
        printf(", \"w\": %lld, \"h\": %lld, \"channels\": %d, \"sample\": \"%s\", "
               "\"tile\": \"%lldx%lld\", \"cpu_workers\": %d, \"gpu_workers\": %d, "
               "\"repeat\": %lld, \"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
               "\"mpix_per_s\": %.2f, \"output_bytes\": %lld, \"peak_rss_mib\": %.1f}\n",
               (long long)li.w, (long long)li.h, tw_slide_get_channels(slide),
               tw_sample_type_name(tw_slide_get_sample_type(slide)), (long long)gw,
               (long long)gh, n_cpu, n_gpu, (long long)repeat, med, lo, hi, mpix / med,
               stat(outpath, &sb) == 0 ? (long long)sb.st_size : -1LL, bench_peak_rss_mib());
        fflush(stdout);
    }
out:
    if (made_tmp) {
        unlink(outpath);
        rmdir(tmpdir);
    }
    free(times);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    tw_slide_close(slide);
    return rc;
}

/* ---- tw_bench gray-kernel: the kernel alone, in memory */

static const char kernel_help[] =
    "Usage: tw_bench gray-kernel --size WxH [--variant cpu|gpu] [--repeat R] [--threads N]\n"
    "\n"
    "Time the gray kernel (luminance, 8-bit RGB) on a generated in-memory image, one warm-up\n"
    "then R timed calls, median. cpu: twi_omp_gray with N OpenMP threads (default: all\n"
    "cores). gpu: twi_cuda_gray on device buffers allocated here; 'kernel' timing is the\n"
    "kernel alone (CUDA events), 'with_transfers' adds the pinned H2D and D2H copies. The GPU\n"
    "result is checked byte for byte against the CPU kernel.\n"
    "\n"
    "  --size WxH      image size in pixels (default 4096x4096)\n"
    "  --variant NAME  cpu (default) or gpu ({\"skipped\": ...} without a GPU)\n"
    "  --repeat R      timed calls (default 10)\n"
    "  --threads N     OpenMP threads of the cpu variant (default: all cores)\n"
    "  --help          this help\n";

/* Deterministic RGB content, 8 bytes per draw. */
static void
fill_rgb(uint8_t *p, size_t n)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    size_t i = 0;

    while (i < n) {
        uint64_t v = twtest_xorshift(&s);

        for (int k = 0; k < 8 && i < n; k++, i++, v >>= 8)
            p[i] = (uint8_t)v;
    }
}

static tw_tile_view
make_view(void *data, int64_t w, int64_t h, int channels)
{
    tw_tile_view v;

    memset(&v, 0, sizeof v);
    v.data = data;
    v.w = (int32_t)w;
    v.h = (int32_t)h;
    v.channels = channels;
    v.stride = w * channels;
    v.type = TW_U8;
    return v;
}

static void
print_kernel(const char *variant, const char *timing, int64_t w, int64_t h, int threads,
             int64_t repeat, double *t)
{
    double lo = bench_min(t, (int)repeat), hi = bench_max(t, (int)repeat);
    double med = bench_median(t, (int)repeat);
    double px = (double)w * (double)h;

    printf("{\"bench\": \"gray-kernel\", \"variant\": \"%s\", \"timing\": \"%s\", \"w\": %lld, "
           "\"h\": %lld, \"threads\": %d, \"repeat\": %lld, \"median_s\": %.6f, \"min_s\": %.6f, "
           "\"max_s\": %.6f, \"gpix_per_s\": %.3f, \"mpix_per_s\": %.1f, \"gb_per_s\": %.2f, "
           "\"peak_rss_mib\": %.1f}\n",
           variant, timing, (long long)w, (long long)h, threads, (long long)repeat, med, lo, hi,
           px / med * 1e-9, px / med * 1e-6, 4.0 * px / med * 1e-9, bench_peak_rss_mib());
    fflush(stdout);
}

static int
kernel_cpu(int64_t w, int64_t h, int64_t repeat, int threads, double *t)
{
    size_t n = (size_t)w * (size_t)h;
    uint8_t *in = malloc(3 * n), *out = malloc(n);
    tw_tile_view vi, vo;
    int rc = BENCH_OK;

    if (!in || !out) {
        rc = bench_fail("out of memory (%lldx%lld)", (long long)w, (long long)h);
        goto out;
    }
    fill_rgb(in, 3 * n);
    memset(out, 0, n);
    vi = make_view(in, w, h, 3);
    vo = make_view(out, w, h, 1);
    for (int64_t r = -1; r < repeat; r++) {
        double t0 = bench_now();

        if (twi_omp_gray(&vi, &vo, 0, threads) != TW_OK) {
            rc = bench_fail("twi_omp_gray failed");
            goto out;
        }
        if (r >= 0)
            t[r] = bench_now() - t0;
    }
    print_kernel("cpu", "kernel", w, h, threads, repeat, t);
out:
    free(in);
    free(out);
    return rc;
}

#ifdef TW_HAVE_CUDA
static int
kernel_gpu(int64_t w, int64_t h, int64_t repeat, int threads, double *t)
{
    size_t n = (size_t)w * (size_t)h;
    uint8_t *h_in = NULL, *h_out = NULL, *ref = malloc(n);
    void *d_in = NULL, *d_out = NULL;
    cudaStream_t stream = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    tw_tile_view vi, vo, hvi, hvo;
    cudaError_t ce = cudaSuccess;
    const char *what = "";
    int rc = BENCH_OK;

#define CK(call)                                                                                \
    do {                                                                                        \
        what = #call;                                                                           \
        if ((ce = (call)) != cudaSuccess)                                                       \
            goto cuda_error;                                                                    \
    } while (0)

    if (!ref) {
        rc = bench_fail("out of memory (%lldx%lld)", (long long)w, (long long)h);
        goto out;
    }
    CK(cudaMallocHost((void **)&h_in, 3 * n));
    CK(cudaMallocHost((void **)&h_out, n));
    CK(cudaMalloc(&d_in, 3 * n));
    CK(cudaMalloc(&d_out, n));
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    fill_rgb(h_in, 3 * n);
    hvi = make_view(h_in, w, h, 3);
    hvo = make_view(ref, w, h, 1);
    if (twi_omp_gray(&hvi, &hvo, 0, threads) != TW_OK) {
        rc = bench_fail("twi_omp_gray failed");
        goto out;
    }
    vi = make_view(d_in, w, h, 3);
    vo = make_view(d_out, w, h, 1);
    CK(cudaMemcpyAsync(d_in, h_in, 3 * n, cudaMemcpyHostToDevice, stream));
    for (int64_t r = -1; r < repeat; r++) {
        float ms = 0.0f;

        CK(cudaEventRecord(e0, stream));
        if (twi_cuda_gray(&vi, &vo, 0, stream) != TW_OK) {
            rc = bench_fail("twi_cuda_gray failed: %s", cudaGetErrorString(cudaGetLastError()));
            goto out;
        }
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            t[r] = (double)ms * 1e-3;
    }
    print_kernel("gpu", "kernel", w, h, 0, repeat, t);
    for (int64_t r = -1; r < repeat; r++) {
        float ms = 0.0f;

        CK(cudaEventRecord(e0, stream));
        CK(cudaMemcpyAsync(d_in, h_in, 3 * n, cudaMemcpyHostToDevice, stream));
        if (twi_cuda_gray(&vi, &vo, 0, stream) != TW_OK) {
            rc = bench_fail("twi_cuda_gray failed: %s", cudaGetErrorString(cudaGetLastError()));
            goto out;
        }
        CK(cudaMemcpyAsync(h_out, d_out, n, cudaMemcpyDeviceToHost, stream));
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            t[r] = (double)ms * 1e-3;
    }
    if (memcmp(h_out, ref, n) != 0) {
        rc = bench_fail("GPU result differs from the CPU kernel (%lldx%lld)", (long long)w,
                        (long long)h);
        goto out;
    }
    print_kernel("gpu", "with_transfers", w, h, 0, repeat, t);
    goto out;
cuda_error:
    rc = bench_fail("%s: %s", what, cudaGetErrorString(ce));
out:
#undef CK
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (stream)
        cudaStreamDestroy(stream);
    if (d_in)
        cudaFree(d_in);
    if (d_out)
        cudaFree(d_out);
    if (h_in)
        cudaFreeHost(h_in);
    if (h_out)
        cudaFreeHost(h_out);
    free(ref);
    return rc;
}
#endif

int
bench_gray_kernel(int argc, char **argv)
{
    enum { O_SIZE = 1, O_VARIANT, O_REPEAT, O_THREADS, O_HELP };
    static const struct option opts[] = {{"size", required_argument, NULL, O_SIZE},
                                         {"variant", required_argument, NULL, O_VARIANT},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"threads", required_argument, NULL, O_THREADS},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    const char *variant = "cpu", *missing;
    int64_t w = 4096, h = 4096, repeat = 10, threads = omp_get_num_procs();
    double *t = NULL;
    int opt, rc = BENCH_OK;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_SIZE:
            /* int32 tile views; 3 * w bytes per row must fit too. */
            if (twi_parse_dims(optarg, 1, 262144, &w, &h) != TW_OK)
                rc = bench_usage("--size: bad size '%s' (want WxH, 1..262144)", optarg);
            break;
        case O_VARIANT: variant = optarg; break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat); break;
        case O_THREADS: rc = bench_parse_int("--threads", optarg, 1, 4096, &threads); break;
        case 'h':
        case O_HELP: fputs(kernel_help, stdout); return BENCH_OK;
        default: rc = bench_usage("unknown option '%s'", argv[optind - 1]); break;
        }
        if (rc != BENCH_OK)
            return rc;
    }
    if (optind < argc)
        return bench_usage("unexpected argument '%s'", argv[optind]);
    if (strcmp(variant, "cpu") != 0 && strcmp(variant, "gpu") != 0)
        return bench_usage("--variant: unknown variant '%s' (cpu, gpu)", variant);
    if (strcmp(variant, "gpu") == 0 && (missing = bench_gpu_missing()) != NULL) {
        bench_print_skipped("gray-kernel", variant, missing);
        return BENCH_OK;
    }
    if (!(t = calloc((size_t)repeat, sizeof *t)))
        return bench_fail("out of memory");
    if (strcmp(variant, "cpu") == 0)
        rc = kernel_cpu(w, h, repeat, (int)threads, t);
#ifdef TW_HAVE_CUDA
    else
        rc = kernel_gpu(w, h, repeat, (int)threads, t);
#endif
    free(t);
    return rc;
}
