/* SPDX-License-Identifier: MIT */
/* tilewave bench: `tw_bench label`, connected components of an in-memory mask through the
 * runtime (tw_label_submit with caller buffers). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "twtest_label.h"

static const char help[] =
    "Usage: tw_bench label --size WxH [--variant cpu|gpu|both] [--conn 4|8] [--tile WxH]\n"
    "                     [--set K=V]... [--repeat R] [--pinned] [--check]\n"
    "\n"
    "Connected components of a generated nuclei-like mask held in host memory (random\n"
    "overlapping discs of radius 6 to 16, about 40% foreground, objects crossing every tile\n"
    "border), uint8 in, uint32 labels out, through tw_label_submit with caller buffers: the\n"
    "whole job (the tile passes and their merge, or one whole task), one warm-up, R timed\n"
    "runs, as one JSON line: median, best, GPix/s of each, and the job's report of the last\n"
    "run (objects, tiles, border labels, tile tasks per device, pass seconds). With GPUs an\n"
    "image that fits one is labelled whole on it (label.gpu_whole; the report then says 1 tile,\n"
    "1 GPU task); without GPUs and without --tile, whole on the CPU workers (1 tile, 1 CPU\n"
    "task); with --tile, by tiles.\n"
    "\n"
    "  --size WxH      image size (e.g. 16384x16384; W alone: square)\n"
    "  --variant NAME  cpu (default: runtime.gpus=none), gpu (GPU workers only) or both\n"
    "  --conn N        4 or 8 (default 8)\n"
    "  --tile WxH      processing tile (default: the config's tile.size)\n"
    "  --set KEY=VALUE any configuration key (repeatable)\n"
    "  --repeat R      timed runs (default 3)\n"
    "  --pinned        page-lock the mask and the labels (cudaHostRegister) before timing: with\n"
    "                  GPUs, runtime.caller_memory=auto then copies straight between them and\n"
    "                  the GPU (the default, pageable buffers, goes through pinned tiles)\n"
    "  --check         compare the labels with a one-thread flood fill (slow; small sizes)\n"
    "  --help          this help\n";

/* Discs: each 32x32 cell holds one or two centres with radii 6..16 drawn from a hash of the
 * cell, so the mask is deterministic and can be drawn in parallel. A disc reaches at most the
 * neighbouring cell rows, so cell rows of the same parity never write the same pixel. */
enum { CELL = 32 };

static void
draw_cell(uint8_t *mask, int64_t w, int64_t h, int64_t cx, int64_t cy)
{
    uint64_t s = twtest_mix64(((uint64_t)cx * 0x9E3779B97F4A7C15u) ^
                              ((uint64_t)cy * 0xC2B2AE3D27D4EB4Fu) ^ 0x7477u);
    int discs = 1 + (int)(s % 10 < 3);

    for (int i = 0; i < discs; i++) {
        int64_t x0, y0, r;

        s = twtest_mix64(s + 0x9E3779B97F4A7C15u);
        x0 = cx * CELL + (int64_t)(s & 31);
        y0 = cy * CELL + (int64_t)((s >> 5) & 31);
        r = 6 + (int64_t)((s >> 10) % 11);
        for (int64_t y = y0 - r; y <= y0 + r; y++) {
            if (y < 0 || y >= h)
                continue;
            for (int64_t x = x0 - r; x <= x0 + r; x++)
                if (x >= 0 && x < w && (x - x0) * (x - x0) + (y - y0) * (y - y0) <= r * r)
                    mask[y * w + x] = 255;
        }
    }
}

static void
fill(uint8_t *mask, int64_t w, int64_t h)
{
    int64_t cw = (w + CELL - 1) / CELL, ch = (h + CELL - 1) / CELL;

    memset(mask, 0, (size_t)(w * h));
    for (int parity = 0; parity < 2; parity++) {
#pragma omp parallel for schedule(dynamic, 4)
        for (int64_t cy = parity; cy < ch; cy += 2)
            for (int64_t cx = 0; cx < cw; cx++)
                draw_cell(mask, w, h, cx, cy);
    }
}

static int
run_once(tw_runtime *rt, const tw_label_opts *o, double *secs)
{
    tw_job *job = NULL;
    tw_error err;
    double t0 = bench_now();
    tw_status st = tw_label_submit(rt, o, &job, &err);

    return bench_job_wait(st, job, &err, t0, secs);
}

/* -1: equal to the flood fill; else the number of differing pixels (BENCH_FAIL on memory). */
static int64_t
check(const uint8_t *mask, const uint32_t *labels, int64_t w, int64_t h, int conn)
{
    uint64_t *ref = malloc((size_t)(w * h) * sizeof *ref);
    int64_t bad = 0;

    if (!ref)
        return -2;
    twtest_label_naive(mask, (int)w, (int)h, conn, ref);
    for (int64_t i = 0; i < w * h; i++)
        bad += ref[i] != labels[i];
    free(ref);
    return bad ? bad : -1;
}

int
bench_label(int argc, char **argv)
{
    enum { O_SIZE = 1, O_VARIANT, O_CONN, O_TILE, O_SET, O_REPEAT, O_PINNED, O_CHECK, O_HELP,
           MAX_SETS = 16 };
    static const struct option opts[] = {{"size", required_argument, NULL, O_SIZE},
                                         {"variant", required_argument, NULL, O_VARIANT},
                                         {"conn", required_argument, NULL, O_CONN},
                                         {"tile", required_argument, NULL, O_TILE},
                                         {"set", required_argument, NULL, O_SET},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"pinned", no_argument, NULL, O_PINNED},
                                         {"check", no_argument, NULL, O_CHECK},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    const char *variant = "cpu", *tile = NULL, *missing, *sets[MAX_SETS];
    int n_sets = 0, do_check = 0, pin = 0, pinned = 0;
    int64_t w = 0, h = 0, repeat = 3, conn = 8, fg = 0;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    uint8_t *mask = NULL;
    uint32_t *labels = NULL;
    double *times = NULL, gen_s;
    tw_label_report rep;
    tw_label_opts o;
    int opt, rc = BENCH_OK;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_SIZE: {
            char *end = NULL;
            w = strtoll(optarg, &end, 10);
            h = (*end == 'x') ? strtoll(end + 1, &end, 10) : w;
            if (*end || w < 1 || h < 1 || w > (1 << 20) || h > (1 << 20))
                return bench_usage("--size: bad size '%s'", optarg);
            break;
        }
        case O_VARIANT: variant = optarg; break;
        case O_CONN:
            if ((rc = bench_parse_int("--conn", optarg, 4, 8, &conn)) != BENCH_OK)
                return rc;
            if (conn != 4 && conn != 8)
                return bench_usage("--conn: 4 or 8, not %lld", (long long)conn);
            break;
        case O_TILE: tile = optarg; break;
        case O_SET:
            if (n_sets == MAX_SETS)
                return bench_usage("--set: at most %d", MAX_SETS);
            sets[n_sets++] = optarg;
            break;
        case O_REPEAT:
            if ((rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat)) != BENCH_OK)
                return rc;
            break;
        case O_PINNED: pin = 1; break;
        case O_CHECK: do_check = 1; break;
        case 'h':
        case O_HELP: fputs(help, stdout); return BENCH_OK;
        default: return bench_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (w == 0)
        return bench_usage("missing --size");
    if (do_check && w * h > (int64_t)1 << 30)
        return bench_usage("--check: at most 2^30 pixels");
    bench_quiet_logs();
    if (strcmp(variant, "cpu") != 0 && (missing = bench_gpu_missing()) != NULL) {
        bench_print_skipped("label", variant, missing);
        return BENCH_OK;
    }
    if ((rc = bench_job_runtime(variant, tile, sets, n_sets, &cfg, &rt)) != BENCH_OK)
        goto out;
    if (!(mask = malloc((size_t)(w * h))) ||
        !(labels = malloc((size_t)(w * h) * sizeof *labels)) ||
        !(times = calloc((size_t)repeat, sizeof *times))) {
        rc = bench_fail("out of memory for a %lldx%lld image", (long long)w, (long long)h);
        goto out;
    }
    gen_s = bench_now();
    fill(mask, w, h);
    gen_s = bench_now() - gen_s;
    for (int64_t i = 0; i < w * h; i++)
        fg += mask[i] != 0;
    if (pin && bench_gpu_count() > 0) {
        if ((rc = bench_host_pin(mask, (size_t)(w * h))) != BENCH_OK)
            goto out;
        pinned = 1;
        if ((rc = bench_host_pin(labels, (size_t)(w * h) * sizeof *labels)) != BENCH_OK)
            goto out;
        pinned = 2;
    }

    tw_label_opts_init(&o);
    o.image = (tw_host_image){mask, w, h, 0, TW_U8};
    o.result = (tw_host_image){labels, w, h, 0, TW_U32};
    o.connectivity = (int)conn;
    o.label_bits = 32;
    tw_label_report_init(&rep);
    for (int64_t r = -1; r < repeat && rc == BENCH_OK; r++) {
        double s = 0;

        o.report = r == repeat - 1 ? &rep : NULL;
        rc = run_once(rt, &o, &s);
        if (r >= 0)
            times[r] = s;
    }
    if (rc != BENCH_OK)
        goto out;
    {
        double lo = bench_min(times, (int)repeat), hi = bench_max(times, (int)repeat);
        double med = bench_median(times, (int)repeat), px = (double)(w * h);

        printf("{\"bench\": \"label\", \"variant\": \"%s\", \"w\": %lld, \"h\": %lld, "
               "\"conn\": %lld, \"repeat\": %lld, \"median_s\": %.6f, \"min_s\": %.6f, "
               "\"max_s\": %.6f, \"gpix_per_s\": %.4f, \"gpix_per_s_best\": %.4f, "
               "\"foreground\": %.4f, \"generate_s\": %.3f, \"peak_rss_mib\": %.1f, "
               "\"objects\": %llu, \"tiles\": %lld, \"tile_w\": %d, \"tile_h\": %d, "
               "\"border_labels\": %lld, \"tp_cpu\": %lld, \"tp_cuda\": %lld, "
               "\"label_s\": %.4f, \"merge_s\": %.4f, \"write_s\": %.4f, \"pinned\": %s",
               variant, (long long)w, (long long)h, (long long)conn, (long long)repeat, med,
               lo, hi, px / med / 1e9, px / lo / 1e9, (double)fg / px, gen_s,
               bench_peak_rss_mib(), (unsigned long long)rep.objects, (long long)rep.tiles,
               (int)rep.tile_w, (int)rep.tile_h, (long long)rep.border_labels,
               (long long)rep.tp_cpu, (long long)rep.tp_cuda, rep.label_s, rep.merge_s,
               rep.write_s, pinned == 2 ? "true" : "false");
        if (do_check) {
            int64_t bad = check(mask, labels, w, h, (int)conn);

            if (bad == -2) {
                fputs("}\n", stdout);
                rc = bench_fail("--check: out of memory");
                goto out;
            }
            printf(", \"differing_pixels\": %lld", (long long)(bad < 0 ? 0 : bad));
            if (bad > 0)
                rc = bench_fail("%lld pixels differ from the flood fill", (long long)bad);
        }
        bench_json_runtime(stdout, cfg);
        bench_json_workers(stdout, rt, (int)repeat + 1);
        fputs("}\n", stdout);
    }
out:
    if (pinned > 0)
        bench_host_unpin(mask);
    if (pinned > 1)
        bench_host_unpin(labels);
    free(times);
    free(labels);
    free(mask);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}
