/* SPDX-License-Identifier: MIT */
/* tilewave bench: `tw_bench mrecon`, reconstruction of an in-memory image through the runtime. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char help[] =
    "Usage: tw_bench mrecon --size WxH [--variant cpu|gpu|both] [--tile WxH] [--set K=V]...\n"
    "                      [--repeat R] [--pinned]\n"
    "\n"
    "Reconstruction by dilation (8-connectivity) of marker = max(mask - 40, 0) under a\n"
    "generated 8-bit tissue-like mask held in host memory, through tw_mrecon_submit with\n"
    "caller buffers: the whole job (reads, TP and BP rounds, writes), one warm-up,\n"
    "R timed runs, median, plus the job's statistics (rounds, TP tasks per device, seeds,\n"
    "load / propagate / store / BP seconds) of the last run, as one JSON line.\n"
    "\n"
    "  --size WxH      image size (e.g. 16384x16384)\n"
    "  --variant NAME  cpu (default), gpu (GPU workers only) or both\n"
    "  --tile WxH      processing tile (default: the config's mrecon.tile_size or tile.size)\n"
    "  --set KEY=VALUE any configuration key, e.g. runtime.policy=pats (repeatable)\n"
    "  --repeat R      timed runs (default 3)\n"
    "  --pinned        page-lock the three images (cudaHostRegister) before timing: with GPUs,\n"
    "                  runtime.caller_memory=auto then makes them the job's tiles\n"
    "  --help          this help\n";

/* A smooth field of blobs and ridges, 0..255, from integer hashing: deterministic and cheap
 * enough to fill gigapixels in parallel. */
static uint8_t
mask_value(int64_t x, int64_t y)
{
    uint64_t cx = (uint64_t)(x >> 6), cy = (uint64_t)(y >> 6);
    uint64_t h = (cx * 0x9E3779B97F4A7C15u) ^ (cy * 0xC2B2AE3D27D4EB4Fu);
    int64_t fx = x & 63, fy = y & 63;
    int64_t d = (fx - 32) * (fx - 32) + (fy - 32) * (fy - 32);

    h = twtest_mix64(h);
    /* A bump per 64x64 cell with a random height, on a random floor. */
    int64_t top = (int64_t)(h & 0xFF), floor = (int64_t)((h >> 8) & 0x3F);
    int64_t v = top - d / 8;
    return (uint8_t)(v > floor ? v : floor);
}

static void
fill(uint8_t *mask, uint8_t *marker, int64_t w, int64_t h)
{
#pragma omp parallel for schedule(static)
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            uint8_t m = mask_value(x, y);
            mask[y * w + x] = m;
            marker[y * w + x] = (uint8_t)(m > 40 ? m - 40 : 0);
        }
}

static int
run_once(tw_runtime *rt, const tw_mrecon_opts *o, double *secs)
{
    tw_job *job = NULL;
    tw_error err;
    double t0 = bench_now();
    tw_status st = tw_mrecon_submit(rt, o, &job, &err);

    return bench_job_wait(st, job, &err, t0, secs);
}

int
bench_mrecon(int argc, char **argv)
{
    enum { O_SIZE = 1, O_VARIANT, O_TILE, O_SET, O_REPEAT, O_PINNED, O_HELP, MAX_SETS = 16 };
    static const struct option opts[] = {{"size", required_argument, NULL, O_SIZE},
                                         {"variant", required_argument, NULL, O_VARIANT},
                                         {"tile", required_argument, NULL, O_TILE},
                                         {"set", required_argument, NULL, O_SET},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"pinned", no_argument, NULL, O_PINNED},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    const char *variant = "cpu", *tile = NULL, *missing, *sets[MAX_SETS];
    int n_sets = 0;
    int64_t w = 0, h = 0, repeat = 3;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    uint8_t *mask = NULL, *marker = NULL, *work = NULL;
    double *times = NULL, gen_s;
    tw_mrecon_stats stats;
    tw_mrecon_opts o;
    int opt, rc = BENCH_OK, pin = 0, pinned = 0;

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
        case 'h':
        case O_HELP: fputs(help, stdout); return BENCH_OK;
        default: return bench_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (w == 0)
        return bench_usage("missing --size");
    bench_quiet_logs();
    if (strcmp(variant, "cpu") != 0 && (missing = bench_gpu_missing()) != NULL) {
        bench_print_skipped("mrecon", variant, missing);
        return BENCH_OK;
    }
    if ((rc = bench_job_runtime(variant, tile, sets, n_sets, &cfg, &rt)) != BENCH_OK)
        goto out;
    if (!(mask = malloc((size_t)(w * h))) || !(marker = malloc((size_t)(w * h))) ||
        !(work = malloc((size_t)(w * h))) || !(times = calloc((size_t)repeat, sizeof *times))) {
        rc = bench_fail("out of memory for a %lldx%lld image", (long long)w, (long long)h);
        goto out;
    }
    gen_s = bench_now();
    fill(mask, marker, w, h);
    gen_s = bench_now() - gen_s;
    if (pin) {
        void *bufs[3] = {mask, marker, work};

        for (; pinned < 3; pinned++)
            if ((rc = bench_host_pin(bufs[pinned], (size_t)(w * h))) != BENCH_OK)
                goto out;
    }

    tw_mrecon_opts_init(&o);
    o.marker_image = (tw_host_image){marker, w, h, 0, TW_U8};
    o.mask_image = (tw_host_image){mask, w, h, 0, TW_U8};
    o.result = (tw_host_image){work, w, h, 0, TW_U8};
    tw_mrecon_stats_init(&stats);
    for (int64_t r = -1; r < repeat && rc == BENCH_OK; r++) {
        double s = 0;

        o.stats = r == repeat - 1 ? &stats : NULL;
        rc = run_once(rt, &o, &s);
        if (r >= 0)
            times[r] = s;
    }
    if (rc != BENCH_OK)
        goto out;
    {
        double lo = bench_min(times, (int)repeat), hi = bench_max(times, (int)repeat);
        double med = bench_median(times, (int)repeat);

        printf("{\"bench\": \"mrecon\", \"variant\": \"%s\", \"w\": %lld, \"h\": %lld, "
               "\"repeat\": %lld, \"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
               "\"gpix_per_s\": %.4f, \"generate_s\": %.3f, \"peak_rss_mib\": %.1f, "
               "\"tiles\": %lld, \"tile_w\": %d, \"tile_h\": %d, \"rounds\": %lld, "
               "\"tp_tasks\": %lld, \"tp_cpu\": %lld, \"tp_cuda\": %lld, \"seeds\": %lld, "
               "\"pairs_compared\": %lld, \"load_s\": %.4f, \"propagate_s\": %.4f, "
               "\"store_s\": %.4f, \"bp_s\": %.4f, \"pinned\": %s",
               variant, (long long)w, (long long)h, (long long)repeat, med, lo, hi,
               (double)(w * h) / med / 1e9, gen_s, bench_peak_rss_mib(), (long long)stats.tiles,
               (int)stats.tile_w, (int)stats.tile_h, (long long)stats.rounds,
               (long long)stats.tp_tasks, (long long)stats.tp_cpu, (long long)stats.tp_cuda,
               (long long)stats.seeds, (long long)stats.pairs_compared, stats.load_s,
               stats.propagate_s, stats.store_s, stats.bp_s, pin ? "true" : "false");
        bench_json_runtime(stdout, cfg);
        bench_json_workers(stdout, rt, (int)repeat + 1);
        fputs("}\n", stdout);
    }
out:
    if (pinned > 0)
        bench_host_unpin(mask);
    if (pinned > 1)
        bench_host_unpin(marker);
    if (pinned > 2)
        bench_host_unpin(work);
    free(times);
    free(work);
    free(marker);
    free(mask);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}
