/* SPDX-License-Identifier: MIT */
/* tilewave bench: host<->GPU copy bandwidth, pinned and pageable, timed with CUDA events. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench.h"

static const char help[] =
    "Usage: tw_bench transfer [--mib N] [--repeat R] [--device D]\n"
    "\n"
    "Copy N MiB between host and GPU D: pinned (cudaMallocHost) and pageable (malloc) host\n"
    "memory, host-to-device and device-to-host; one warm-up then R timed copies each, timed\n"
    "with CUDA events (gb_per_s) and with the host clock around copy + synchronise\n"
    "(wall_gb_per_s); medians, GB = 1e9 bytes. Prints {\"skipped\": ...} without a GPU.\n"
    "\n"
    "  --mib N       bytes per copy in MiB (default 256)\n"
    "  --repeat R    timed copies per case (default 10)\n"
    "  --device D    CUDA device ordinal (default 0)\n"
    "  --help        this help\n";

#ifdef TW_HAVE_CUDA
static int
cuda_fail(const char *what, cudaError_t ce)
{
    return bench_fail("%s: %s", what, cudaGetErrorString(ce));
}

static int
measure(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, int repeat,
        double *ev_s, double *wall_s)
{
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaError_t ce;
    int rc = BENCH_OK;

    if ((ce = cudaEventCreate(&e0)) != cudaSuccess || (ce = cudaEventCreate(&e1)) != cudaSuccess) {
        rc = cuda_fail("cudaEventCreate", ce);
        goto out;
    }
    for (int r = -1; r < repeat; r++) { /* r = -1: warm-up */
        float ms = 0.0f;
        double t0 = bench_now();

        if ((ce = cudaEventRecord(e0, 0)) != cudaSuccess ||
            (ce = cudaMemcpyAsync(dst, src, bytes, kind, 0)) != cudaSuccess ||
            (ce = cudaEventRecord(e1, 0)) != cudaSuccess ||
            (ce = cudaEventSynchronize(e1)) != cudaSuccess ||
            (ce = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess) {
            rc = cuda_fail("copy", ce);
            goto out;
        }
        if (r >= 0) {
            wall_s[r] = bench_now() - t0;
            ev_s[r] = (double)ms * 1e-3;
        }
    }
out:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    return rc;
}

/* The four cases on GPU `device`, one JSON line each. */
static int
transfer_cuda(int64_t mib, int64_t repeat, int64_t device)
{
    size_t bytes = (size_t)mib << 20;
    void *d_buf = NULL, *h_pinned = NULL, *h_pageable = NULL;
    double *ev = calloc((size_t)repeat, sizeof *ev);
    double *wall = calloc((size_t)repeat, sizeof *wall);
    struct cudaDeviceProp prop;
    cudaError_t ce;
    int rc = BENCH_OK;

    if (!ev || !wall || !(h_pageable = malloc(bytes))) {
        rc = bench_fail("out of memory (%lld MiB)", (long long)mib);
        goto out;
    }
    if (device >= bench_gpu_count()) {
        rc = bench_usage("--device: no CUDA device %lld (%d present)", (long long)device,
                         bench_gpu_count());
        goto out;
    }
    if ((ce = cudaSetDevice((int)device)) != cudaSuccess ||
        (ce = cudaGetDeviceProperties(&prop, (int)device)) != cudaSuccess) {
        rc = cuda_fail("cudaSetDevice", ce);
        goto out;
    }
    if ((ce = cudaMalloc(&d_buf, bytes)) != cudaSuccess) {
        rc = cuda_fail("cudaMalloc", ce);
        goto out;
    }
    if ((ce = cudaMallocHost(&h_pinned, bytes)) != cudaSuccess) {
        rc = cuda_fail("cudaMallocHost", ce);
        goto out;
    }
    /* Touch every page so that first-touch faults are not timed as copy time. */
    memset(h_pageable, 1, bytes);
    memset(h_pinned, 1, bytes);
    for (int pinned = 1; pinned >= 0; pinned--) {
        for (int h2d = 1; h2d >= 0; h2d--) {
            void *h = pinned ? h_pinned : h_pageable;
            double em, wm;

            if (h2d)
                rc = measure(d_buf, h, bytes, cudaMemcpyHostToDevice, (int)repeat, ev, wall);
            else
                rc = measure(h, d_buf, bytes, cudaMemcpyDeviceToHost, (int)repeat, ev, wall);
            if (rc != BENCH_OK)
                goto out;
            em = bench_median(ev, (int)repeat);
            wm = bench_median(wall, (int)repeat);
            printf("{\"bench\": \"transfer\", \"device\": ");
            bench_json_str(stdout, prop.name);
            printf(", \"memory\": \"%s\", \"direction\": \"%s\", \"mib\": %lld, "
                   "\"repeat\": %lld, \"median_s\": %.6f, \"gb_per_s\": %.3f, "
                   "\"wall_median_s\": %.6f, \"wall_gb_per_s\": %.3f}\n",
                   pinned ? "pinned" : "pageable", h2d ? "h2d" : "d2h", (long long)mib,
                   (long long)repeat, em, (double)bytes / em * 1e-9, wm,
                   (double)bytes / wm * 1e-9);
            fflush(stdout);
        }
    }
out:
    if (d_buf)
        cudaFree(d_buf);
    if (h_pinned)
        cudaFreeHost(h_pinned);
    free(h_pageable);
    free(ev);
    free(wall);
    return rc;
}
#endif

int
bench_transfer(int argc, char **argv)
{
    enum { O_MIB = 1, O_REPEAT, O_DEVICE, O_HELP };
    static const struct option opts[] = {{"mib", required_argument, NULL, O_MIB},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"device", required_argument, NULL, O_DEVICE},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    int64_t mib = 256, repeat = 10, device = 0;
    const char *missing;
    int opt, rc = BENCH_OK;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_MIB: rc = bench_parse_int("--mib", optarg, 1, 65536, &mib); break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat); break;
        case O_DEVICE: rc = bench_parse_int("--device", optarg, 0, 1023, &device); break;
        case 'h':
        case O_HELP: fputs(help, stdout); return BENCH_OK;
        default: rc = bench_usage("unknown option '%s'", argv[optind - 1]); break;
        }
        if (rc != BENCH_OK)
            return rc;
    }
    if (optind < argc)
        return bench_usage("unexpected argument '%s'", argv[optind]);
    if ((missing = bench_gpu_missing()) != NULL) {
        bench_print_skipped("transfer", NULL, missing);
        return BENCH_OK;
    }
#ifdef TW_HAVE_CUDA
    rc = transfer_cuda(mib, repeat, device);
#endif
    return rc;
}
