/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `devices`, the hardware and where each worker runs. */
#include <math.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave devices [--policies | --models] [common options]\n"
    "\n"
    "Start the runtime as a job would and print the cores and GPUs it found, the scheduling\n"
    "policy, and every worker thread: its device, its OpenMP team size, the cores hwloc\n"
    "assigned it and the binding the thread reads back.\n"
    "  --policies   list the scheduling policies (runtime.policy) instead, without starting\n"
    "  --models     print the cost models of the runtime.models file instead (kind, device,\n"
    "               tile size, content feature, runs, median ms per tile and per megapixel,\n"
    "               spread), without starting\n"
    "\n" CLI_COMMON_HELP;

enum { OPT_POLICIES = CLI_OPT_END, OPT_MODELS };

/* The entry of `key` in the config (its values, help, current value and origin). */
static int
config_entry(const tw_config *cfg, const char *key, tw_config_entry *e)
{
    for (size_t i = 0; i < tw_config_count(); i++)
        if (tw_config_describe(cfg, i, e) == TW_OK && strcmp(e->key, key) == 0)
            return 1;
    return 0;
}

static int
policy_entry(const tw_config *cfg, tw_config_entry *e)
{
    return config_entry(cfg, "runtime.policy", e);
}

enum { M_KIND, M_DEV, M_NAME, M_SIZE, M_FEAT, M_RUNS, M_TILE, M_MPIX, M_MAD, M_COLS };

/* Columns on a terminal: UTF-8 continuation bytes take none. */
static int
text_width(const char *s)
{
    int w = 0;

    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* Cell k of a row: two spaces before all but the first, s padded to `width` columns on the
 * left (right-aligned) or on the right (left-aligned, except in the last column). */
static void
cell(int k, const char *s, int width, bool right)
{
    int pad = width - text_width(s);

    if (pad < 0)
        pad = 0;
    printf("%s", k ? "  " : "");
    if (right)
        printf("%*s%s", pad, "", s);
    else if (k == M_COLS - 1)
        printf("%s", s);
    else
        printf("%s%*s", s, pad, "");
}

/* A size bucket as a tile: 2^20 -> "1024²", 2^21 -> "2×1024²", small ones in pixels. */
static void
size_label(int b, char *buf, size_t n)
{
    if (b < 2)
        snprintf(buf, n, "%d", 1 << b);
    else if (b % 2 == 0)
        snprintf(buf, n, "%llu\u00b2", 1ull << (b / 2));
    else
        snprintf(buf, n, "2\u00d7%llu\u00b2", 1ull << (b / 2));
}

static void
model_cells(const tw_model_info *m, char c[M_COLS][160])
{
    double tile_px = ldexp(1.0, m->size_log2);

    snprintf(c[M_KIND], 160, "%s", m->kind);
    snprintf(c[M_DEV], 160, "%s", m->device == TW_DEVICE_CUDA ? "cuda" : "cpu");
    snprintf(c[M_NAME], 160, "%s", m->device_name);
    size_label(m->size_log2, c[M_SIZE], 160);
    snprintf(c[M_FEAT], 160, "%s", m->feature);
    snprintf(c[M_RUNS], 160, "%d", m->samples);
    snprintf(c[M_TILE], 160, "%.4g", m->median_s_per_px * tile_px * 1e3);
    snprintf(c[M_MPIX], 160, "%.4g", m->median_s_per_px * 1e9);
    if (m->median_s_per_px > 0)
        snprintf(c[M_MAD], 160, "%.1f%%", 100.0 * m->mad_s_per_px / m->median_s_per_px);
    else
        snprintf(c[M_MAD], 160, "-");
}

/* `devices --models`: the models of the configured file as a table. */
static int
print_models(const tw_config *cfg)
{
    static const char *const head[M_COLS] = {"kind", "device", "device name", "size",
                                             "feature", "runs", "ms/tile", "ms/Mpix", "MAD"};
    tw_config_entry e;
    tw_model_info *m = NULL;
    size_t n = 0;
    char path[4096], c[M_COLS][160];
    int width[M_COLS];
    tw_error err;

    if (!config_entry(cfg, "runtime.models", &e) ||
        tw_models_get_path(cfg, path, sizeof path) != TW_OK) {
        cli_error("cannot resolve runtime.models");
        return CLI_FAIL;
    }
    if (!path[0]) {
        printf("models: kept in memory only (runtime.models = %s, from %s): nothing stored\n",
               e.value, e.origin);
        return CLI_OK;
    }
    if (tw_models_read(path, &m, &n, &err) != TW_OK) {
        cli_error("%s", err.message);
        return CLI_FAIL;
    }
    printf("models: %s (runtime.models = %s, from %s)\n", path, e.value, e.origin);
    if (n == 0) {
        printf("no models yet (%s)\n", path);
        return CLI_OK;
    }
    for (int k = 0; k < M_COLS; k++)
        width[k] = text_width(head[k]);
    for (size_t i = 0; i < n; i++) {
        model_cells(&m[i], c);
        for (int k = 0; k < M_COLS; k++)
            if (text_width(c[k]) > width[k])
                width[k] = text_width(c[k]);
    }
    for (int k = 0; k < M_COLS; k++)
        cell(k, head[k], width[k], k >= M_RUNS);
    printf("\n");
    for (size_t i = 0; i < n; i++) {
        model_cells(&m[i], c);
        for (int k = 0; k < M_COLS; k++)
            cell(k, c[k], width[k], k >= M_RUNS);
        printf("\n");
    }
    printf("size: pixels of the task's tiles, from that up to twice that; feature: the kind's "
           "content bucket,\nup to that value from a quarter of it (- = none); ms/tile: the "
           "median run for a tile of that size;\nMAD: median absolute deviation over the "
           "median.\n");
    tw_models_free(m);
    return CLI_OK;
}

int
cmd_devices(int argc, char **argv)
{
    static const struct option opts[] = {{"policies", no_argument, NULL, OPT_POLICIES},
                                         {"models", no_argument, NULL, OPT_MODELS},
                                         CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    cli_common c;
    tw_config_entry pe;
    bool policies = false, models = false;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_topology_info topo;
    int opt, rc;

    cli_common_init(&c);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'h' || opt == CLI_OPT_HELP) {
            fputs(help, stdout);
            cli_common_fini(&c);
            return CLI_OK;
        }
        if (opt == OPT_POLICIES) {
            policies = true;
            continue;
        }
        if (opt == OPT_MODELS) {
            models = true;
            continue;
        }
        if ((rc = cli_common_option(&c, opt, optarg)) != 0) {
            cli_common_fini(&c);
            return rc > 0 ? rc : cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc) {
        cli_common_fini(&c);
        return cli_usage_error("unexpected argument '%s'", argv[optind]);
    }
    if (policies && models) {
        cli_common_fini(&c);
        return cli_usage_error("--policies and --models do not go together");
    }
    if ((rc = cli_config_build(&c, &cfg)) != CLI_OK)
        goto out;
    if (models) {
        rc = print_models(cfg);
        goto out;
    }
    if (!policy_entry(cfg, &pe)) {
        cli_error("the configuration has no runtime.policy");
        rc = CLI_FAIL;
        goto out;
    }
    if (policies) {
        printf("policies: %s\n  %s\nin use: %s (from %s)\n", pe.range, pe.help, pe.value,
               pe.origin);
        goto out;
    }
    if ((rc = cli_runtime_create(cfg, &rt)) != CLI_OK)
        goto out;
    if (tw_runtime_get_topology(rt, &topo) != TW_OK) {
        cli_error("cannot read the topology");
        rc = CLI_FAIL;
        goto out;
    }
    printf("cores:   %d (%d hardware threads, %d package%s, %d NUMA node%s)\n", topo.n_cores,
           topo.n_pus, topo.n_packages, topo.n_packages == 1 ? "" : "s", topo.n_numa_nodes,
           topo.n_numa_nodes == 1 ? "" : "s");
    if (!tw_build_has_cuda())
        printf("GPUs:    none (built without CUDA)\n");
    else if (topo.n_gpus_present == 0)
        printf("GPUs:    none found (CPU workers only)\n");
    else
        printf("GPUs:    %d present, %d used\n", topo.n_gpus_present, topo.n_gpus);
    for (int i = 0; i < topo.n_gpus; i++) {
        tw_gpu_info g;

        if (tw_runtime_get_gpu(rt, i, &g) != TW_OK)
            continue;
        printf("  GPU %d: %s, compute capability %d.%d, %.1f GiB, PCI %s, near cores %s\n",
               g.ordinal, g.name, g.cc_major, g.cc_minor,
               (double)g.total_mem / (1024.0 * 1024.0 * 1024.0), g.pci_bus_id, g.near_cpuset);
    }
    printf("policy:  %s (runtime.policy, from %s; 'devices --policies' lists them)\n", pe.value,
           pe.origin);
    printf("workers: %d\n", tw_runtime_get_worker_count(rt));
    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info w;

        if (tw_runtime_get_worker(rt, i, &w) != TW_OK)
            continue;
        if (w.type == TW_DEVICE_CUDA)
            printf("  worker %2d  cuda  GPU %d       cores %-8s bound %s\n", w.index, w.gpu,
                   w.cpuset, w.bound_cpuset[0] ? w.bound_cpuset : "(unknown)");
        else
            printf("  worker %2d  cpu   team %-3d    cores %-8s bound %s\n", w.index, w.team,
                   w.cpuset, w.bound_cpuset[0] ? w.bound_cpuset : "(unknown)");
    }
out:
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    cli_common_fini(&c);
    return rc;
}
