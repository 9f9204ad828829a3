/* SPDX-License-Identifier: MIT */
/* tilewave bench: `tw_bench tos`, the tree of shapes and the grain filter ([deVries24]). */
#include <getopt.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "omp_kernels.h"
#include "tw_internal.h"

static const char help[] =
    "Usage: tw_bench tos --input KIND|FILE (--kernel | --job) [options]\n"
    "\n"
    "Time the tree of shapes of an 8- or 16-bit image in host memory (parent image out, or\n"
    "the grain filter with --grain): one warm-up, R timed runs, median, as one JSON line.\n"
    "  --kernel          twi_omp_tos: the sort's parts as OpenMP tasks, the max-tree of the\n"
    "                    ranks and the rest as parallel loops, --threads N threads\n"
    "  --job             tw_tos_submit (tw_grain_submit with --grain) on a runtime of\n"
    "                    --threads N CPU workers: every step a task\n"
    "  --gpus LIST       --job: the runtime's GPUs (runtime.gpus: none (default), all, 0,\n"
    "                    ...): with one, the max-tree of the ranks runs there (one task)\n"
    "  --batch N         --job: each timed run submits N jobs at once (the same image, N\n"
    "                    results) and waits for all: one image's sort runs on the CPU while\n"
    "                    another's max-tree runs on the GPU; times are per run of N jobs,\n"
    "                    per_image_s = median_s / N (default 1)\n"
    "  --input KIND|FILE noise, field (natural-like) or a slide / TIFF file (level 0, whole;\n"
    "                    RGB to tilewave's luminance), as `tw_bench maxtree`\n"
    "  --size WxH        size of a generated input\n"
    "  --type u8|u16     sample type of a generated input (default u8)\n"
    "  --levels N        noise: values 0..N-1\n"
    "  --seed S          generator seed (default 1)\n"
    "  --threads N       OpenMP threads or CPU workers (default: all cores)\n"
    "  --grain N         the grain filter of area N instead of the parent image\n"
    "  --split-always    --kernel: split the sort's parts after every batch (stress)\n"
    "  --crew-min N      --kernel: share a batch with idle threads once its level holds N\n"
    "                    faces (default 4096)\n"
    "  --split-min N     --kernel: split a sort part only when the side it gives away holds\n"
    "                    N queued faces (default 4096; 1 with --split-always)\n"
    "  --comp-every N    --kernel: a sort part labels its region's components (the sub-tree\n"
    "                    split) every N faces it pops (default 0: 16-bit images every 2^20,\n"
    "                    8-bit ones never; -1: never)\n"
    "  --repeat R        timed runs (default 3)\n"
    "  --check C         auto (default: one thread's result compared with this run's, unless\n"
    "                    that is this run), full (always) or none\n"
    "  --dump FILE       write the last output, raw (parent: u32; grain: the input's type)\n"
    "\n"
    "Memory: the peak resident set before the first run (image and outputs allocated and\n"
    "touched, the runtime started) and after it; their difference over the pixels is\n"
    "scratch_bytes_per_px, all the computation's own memory (with --batch N: the N jobs'\n"
    "together, over one image's pixels). JSON fields: median_s, min_s,\n"
    "max_s, per_image_s, batch, mpix_per_s, sort_s / tree_s / attr_s (phases, medians;\n"
    "tree_s = the max-tree of the ranks and un-interpolation), mt_s / un_s (the two parts of\n"
    "tree_s: the max-tree of the ranks, un-interpolation), mt_device (where the job's\n"
    "max-tree ran: cpu or cuda; the kernel: cpu), gpus (--gpus), crews and batches (the\n"
    "kernel's batches shared with helpers and all batches; -1 for the job), labellings\n"
    "(the kernel's sub-tree splits; -1 for the job), comp_parts (the parts they made),\n"
    "label_s (the kernel's seconds labelling, within sort_s; -1 for the job), chain_share\n"
    "(the kernel's longest chain of sort parts over all faces, last run: 1 / it bounds the\n"
    "sort's speed-up; -1 for the job),\n"
    "parts\n"
    "(sub-propagations), nodes (of the tree, an implicit root included, as Higra counts\n"
    "them), pixel_nodes (nodes holding pixels), exterior, implicit_root, peak_rss_mib,\n"
    "scratch_bytes_per_px, check, wrong (pixels differing; every result of a batch).\n";

typedef struct tos_params {
    const char *input, *type_name, *dump, *check, *gpus;
    int64_t w, h, levels, seed, threads, repeat, grain, crew_min, split_min, batch, comp_every;
    int job, split_always;
} tos_params;

static tw_tile_view
view(void *data, int64_t w, int64_t h, tw_sample_type t)
{
    return (tw_tile_view){ .data = data, .stride = (int64_t)((size_t)w * tw_sample_size(t)),
                           .w = (int32_t)w, .h = (int32_t)h, .channels = 1, .type = t };
}

/* One computation: the kernel with `threads` threads, or the job on rt. */
static int
run_once(const tos_params *p, const bench_image *img, tw_runtime *rt, int64_t threads,
         void *out, twi_tos_run *r, tw_tos_report *rep)
{
    tw_tile_view vi = view(img->data, img->w, img->h, img->type);
    tw_status st;

    if (!rt) {
        tw_tile_view vo = view(out, img->w, img->h, p->grain ? img->type : TW_U32);

        memset(r, 0, sizeof *r);
        r->nthreads = (int)threads;
        r->split_always = p->split_always;
        r->crew_min = p->crew_min;
        r->split_min = p->split_min;
        r->comp_every = p->comp_every;
        st = p->grain ? twi_omp_tos(&vi, NULL, NULL, &vo, (uint64_t)p->grain, r)
                      : twi_omp_tos(&vi, &vo, NULL, NULL, 0, r);
        if (st != TW_OK)
            return bench_fail("twi_omp_tos failed: %s", tw_status_string(st));
    } else {
        tw_host_image im = { img->data, img->w, img->h, 0, img->type };
        size_t os = p->grain ? tw_sample_size(img->type) : 4,
               bytes = (size_t)img->w * (size_t)img->h * os;
        tw_job *jobs[64] = { NULL };
        tw_tos_report reps[64];
        tw_error err;
        int rc = BENCH_OK;
        int64_t k, nb = p->batch;

        /* the batch's jobs all submitted, then all waited for: the runtime overlaps them */
        for (k = 0; k < nb; k++) {
            void *o_k = (char *)out + (size_t)k * bytes;

            tw_tos_report_init(&reps[k]);
            if (p->grain) {
                tw_grain_opts o;

                tw_grain_opts_init(&o);
                o.image = im;
                o.result = (tw_host_image){ o_k, img->w, img->h, 0, img->type };
                o.area = (uint64_t)p->grain;
                o.report = &reps[k];
                st = tw_grain_submit(rt, &o, &jobs[k], &err);
            } else {
                tw_tos_opts o;

                tw_tos_opts_init(&o);
                o.image = im;
                o.parent = (tw_host_image){ o_k, img->w, img->h, 0, TW_U32 };
                o.report = &reps[k];
                st = tw_tos_submit(rt, &o, &jobs[k], &err);
            }
            if (st != TW_OK) {
                rc = bench_fail("%s", err.message);
                break;
            }
        }
        for (int64_t j = 0; j < k; j++) {
            if ((st = tw_job_wait(jobs[j], -1)) != TW_OK && rc == BENCH_OK)
                rc = bench_fail("%s", tw_job_get_error(jobs[j]));
            tw_job_destroy(jobs[j]);
        }
        if (rc != BENCH_OK)
            return rc;
        *rep = reps[nb - 1];
    }
    return BENCH_OK;
}

static tw_runtime *
runtime_of(int64_t workers, const char *gpus)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err;
    char v[32];

    snprintf(v, sizeof v, "%lld", (long long)workers);
    if (tw_config_create(&cfg) != TW_OK) {
        bench_fail("out of memory");
        return NULL;
    }
    if (tw_config_set(cfg, "runtime.gpus", gpus, TW_CONFIG_SET, &err) != TW_OK ||
        tw_config_set(cfg, "runtime.cpu_workers", v, TW_CONFIG_SET, &err) != TW_OK ||
        tw_config_set(cfg, "runtime.models", "none", TW_CONFIG_SET, &err) != TW_OK ||
        tw_runtime_create(cfg, &rt, &err) != TW_OK)
        bench_fail("runtime: %s", err.message);
    tw_config_destroy(cfg);
    return rt;
}

static int
parse(int argc, char **argv, tos_params *p)
{
    enum { O_INPUT = 1, O_SIZE, O_TYPE, O_LEVELS, O_SEED, O_THREADS, O_GRAIN, O_REPEAT,
           O_CHECK, O_DUMP, O_KERNEL, O_JOB, O_SPLIT, O_CREW, O_SPLITMIN, O_GPUS, O_BATCH,
           O_COMP, O_HELP };
    static const struct option opts[] = {
        {"input", required_argument, NULL, O_INPUT}, {"size", required_argument, NULL, O_SIZE},
        {"type", required_argument, NULL, O_TYPE}, {"levels", required_argument, NULL, O_LEVELS},
        {"seed", required_argument, NULL, O_SEED},
        {"threads", required_argument, NULL, O_THREADS},
        {"grain", required_argument, NULL, O_GRAIN},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"check", required_argument, NULL, O_CHECK}, {"dump", required_argument, NULL, O_DUMP},
        {"kernel", no_argument, NULL, O_KERNEL}, {"job", no_argument, NULL, O_JOB},
        {"split-always", no_argument, NULL, O_SPLIT},
        {"crew-min", required_argument, NULL, O_CREW},
        {"split-min", required_argument, NULL, O_SPLITMIN},
        {"comp-every", required_argument, NULL, O_COMP},
        {"gpus", required_argument, NULL, O_GPUS}, {"batch", required_argument, NULL, O_BATCH},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0}};
    int opt, rc = BENCH_OK, mode = 0;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_INPUT: p->input = optarg; break;
        case O_SIZE:
            if (twi_parse_dims(optarg, 1, 1 << 20, &p->w, &p->h) != TW_OK)
                rc = bench_usage("--size: bad size '%s' (want WxH)", optarg);
            break;
        case O_TYPE:
            if (strcmp(optarg, "u8") != 0 && strcmp(optarg, "u16") != 0)
                rc = bench_usage("--type: unknown type '%s' (u8, u16)", optarg);
            p->type_name = optarg;
            break;
        case O_LEVELS: rc = bench_parse_int("--levels", optarg, 1, 65536, &p->levels); break;
        case O_SEED: rc = bench_parse_int("--seed", optarg, 0, INT64_MAX, &p->seed); break;
        case O_THREADS: rc = bench_parse_int("--threads", optarg, 1, 4096, &p->threads); break;
        case O_GRAIN: rc = bench_parse_int("--grain", optarg, 1, INT64_MAX, &p->grain); break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &p->repeat); break;
        case O_CHECK: p->check = optarg; break;
        case O_DUMP: p->dump = optarg; break;
        case O_KERNEL: mode |= 1; break;
        case O_JOB: mode |= 2; break;
        case O_SPLIT: p->split_always = 1; break;
        case O_CREW: rc = bench_parse_int("--crew-min", optarg, 1, INT64_MAX, &p->crew_min); break;
        case O_SPLITMIN:
            rc = bench_parse_int("--split-min", optarg, 1, INT64_MAX, &p->split_min);
            break;
        case O_COMP:
            rc = bench_parse_int("--comp-every", optarg, -1, INT64_MAX, &p->comp_every);
            break;
        case O_GPUS: p->gpus = optarg; break;
        case O_BATCH: rc = bench_parse_int("--batch", optarg, 1, 64, &p->batch); break;
        case 'h':
        case O_HELP: fputs(help, stdout); return -1;
        default: rc = bench_usage("unknown option '%s'", argv[optind - 1]); break;
        }
        if (rc != BENCH_OK)
            return rc;
    }
    if (optind < argc)
        return bench_usage("unexpected argument '%s'", argv[optind]);
    if (!p->input)
        return bench_usage("missing --input noise|field|FILE");
    if (bench_gray_generated(p->input) && p->w == 0)
        return bench_usage("missing --size for the generated input '%s'", p->input);
    if (mode != 1 && mode != 2)
        return bench_usage("give one of --kernel and --job");
    if (strcmp(p->check, "auto") && strcmp(p->check, "full") && strcmp(p->check, "none"))
        return bench_usage("--check: unknown check '%s' (auto, full, none)", p->check);
    p->job = mode == 2;
    if (!p->job && strcmp(p->gpus, "none") != 0)
        return bench_usage("--gpus goes with --job");
    if (!p->job && p->batch > 1)
        return bench_usage("--batch goes with --job");
    return BENCH_OK;
}

int
bench_tos(int argc, char **argv)
{
    tos_params p = { .seed = 1, .threads = omp_get_num_procs(), .repeat = 3, .check = "auto",
                     .gpus = "none", .batch = 1 };
    bench_image img = { 0 };
    tw_runtime *rt = NULL;
    twi_tos_run r = { 0 }, rr;
    tw_tos_report rep = { 0 }, rrep = { 0 };
    void *out = NULL, *ref = NULL;
    double *t = NULL, *ts = NULL, base_mib, peak_mib = 0, px;
    int64_t wrong = -1;
    size_t os, n;
    int rc;

    if ((rc = parse(argc, argv, &p)) != BENCH_OK)
        return rc < 0 ? BENCH_OK : rc;
    bench_quiet_logs();
    if ((rc = bench_gray_load(p.input, p.w, p.h, p.type_name, p.levels, p.seed, &img)) !=
        BENCH_OK)
        return rc;
    n = (size_t)img.w * (size_t)img.h;
    px = (double)n;
    os = p.grain ? tw_sample_size(img.type) : 4;
    if (!(t = calloc((size_t)p.repeat, 7 * sizeof *t)) ||
        !(out = malloc(n * os * (size_t)p.batch))) {
        rc = bench_fail("out of memory");
        goto out;
    }
    ts = t + p.repeat;
    memset(out, 0, n * os * (size_t)p.batch);
    if (p.job && !(rt = runtime_of(p.threads, p.gpus))) {
        rc = BENCH_FAIL;
        goto out;
    }
    /* the first run sets the high-water mark: everything above the baseline is its own */
    base_mib = bench_peak_rss_mib();
    for (int64_t k = -1; k < p.repeat; k++) {
        double t0 = bench_now();

        if ((rc = run_once(&p, &img, rt, p.threads, out, &rr, &rrep)) != BENCH_OK)
            goto out;
        if (k < 0) {
            peak_mib = bench_peak_rss_mib();
            continue;
        }
        t[k] = bench_now() - t0;
        ts[k] = p.job ? rrep.sort_s : rr.t_sort;
        ts[p.repeat + k] = p.job ? rrep.tree_s : rr.t_tree + rr.t_un;
        ts[2 * p.repeat + k] = p.job ? rrep.attr_s : rr.t_attr;
        ts[3 * p.repeat + k] = p.job ? rrep.mt_s : rr.t_tree;
        ts[4 * p.repeat + k] = p.job ? rrep.tree_s - rrep.mt_s : rr.t_un;
        ts[5 * p.repeat + k] = p.job ? -1 : rr.t_label;
        r = rr;
        rep = rrep;
    }
    if (!strcmp(p.check, "full") || (!strcmp(p.check, "auto") && (p.job || p.threads > 1))) {
        twi_tos_run r1;

        if (!(ref = malloc(n * os))) {
            rc = bench_fail("out of memory for the check");
            goto out;
        }
        if ((rc = run_once(&p, &img, NULL, 1, ref, &r1, NULL)) != BENCH_OK)
            goto out;
        wrong = 0;
        for (int64_t k = 0; k < p.batch; k++) /* every result of the batch */
            for (size_t i = 0; i < n; i++) {
                size_t j = (size_t)k * n + i;

                wrong += os == 4   ? ((uint32_t *)out)[j] != ((uint32_t *)ref)[i]
                         : os == 2 ? ((uint16_t *)out)[j] != ((uint16_t *)ref)[i]
                                   : ((uint8_t *)out)[j] != ((uint8_t *)ref)[i];
            }
    }
    if (p.dump) {
        FILE *f = fopen(p.dump, "wb");

        if (!f || fwrite(out, os, n, f) != n || fclose(f) != 0) {
            rc = bench_fail("cannot write '%s'", p.dump);
            goto out;
        }
    }
    {
        double med = bench_median(t, (int)p.repeat), lo = bench_min(t, (int)p.repeat),
               hi = bench_max(t, (int)p.repeat);
        int64_t nodes = p.job ? rep.nodes : r.nodes;
        int implicit = p.job ? rep.implicit_root : r.implicit_root;

        printf("{\"bench\": \"tos\", \"mode\": \"%s\", \"input\": ", p.job ? "job" : "kernel");
        bench_json_str(stdout, p.input);
        printf(", \"w\": %lld, \"h\": %lld, \"type\": \"%s\", \"threads\": %lld, \"grain\": %lld, "
               "\"batch\": %lld, \"per_image_s\": %.6f, "
               "\"repeat\": %lld, \"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
               "\"mpix_per_s\": %.3f, \"sort_s\": %.6f, \"tree_s\": %.6f, \"attr_s\": %.6f, "
               "\"mt_s\": %.6f, \"un_s\": %.6f, \"mt_device\": \"%s\", \"gpus\": \"%s\", "
               "\"crews\": %lld, \"batches\": %lld, \"labellings\": %lld, \"comp_parts\": %lld, "
               "\"label_s\": %.6f, \"chain_share\": %.4f, "
               "\"parts\": %lld, \"nodes\": %lld, \"pixel_nodes\": %lld, \"exterior\": %u, "
               "\"implicit_root\": %s, "
               "\"peak_rss_mib\": %.1f, \"base_rss_mib\": %.1f, \"scratch_bytes_per_px\": %.2f, "
               "\"check\": \"%s\", \"wrong\": %lld}\n",
               (long long)img.w, (long long)img.h, tw_sample_type_name(img.type),
               (long long)p.threads, (long long)p.grain, (long long)p.batch,
               med / (double)p.batch, (long long)p.repeat, med, lo, hi,
               px * (double)p.batch / med * 1e-6, bench_median(ts, (int)p.repeat),
               bench_median(ts + p.repeat, (int)p.repeat),
               bench_median(ts + 2 * p.repeat, (int)p.repeat),
               bench_median(ts + 3 * p.repeat, (int)p.repeat),
               bench_median(ts + 4 * p.repeat, (int)p.repeat),
               p.job && rep.mt_device == TW_DEVICE_CUDA ? "cuda" : "cpu", p.gpus,
               (long long)(p.job ? -1 : r.crews),
               (long long)(p.job ? -1 : r.batches), (long long)(p.job ? -1 : r.labellings),
               (long long)(p.job ? rep.comp_parts : r.comp_parts),
               bench_median(ts + 5 * p.repeat, (int)p.repeat),
               p.job ? -1.0 : (double)r.chain / ((2.0 * (double)img.w - 1) * (2.0 * (double)img.h - 1)), (long long)(p.job ? rep.parts : r.parts),
               (long long)(nodes + implicit), (long long)nodes,
               p.job ? rep.exterior : r.exterior, implicit ? "true" : "false", peak_mib,
               base_mib, (peak_mib - base_mib) * 1048576.0 / px, wrong < 0 ? "none" : "thread-1",
               (long long)(wrong < 0 ? 0 : wrong));
        fflush(stdout);
    }
    if (wrong > 0)
        rc = bench_fail("%lld of %lld pixels differ from the one-thread kernel's",
                        (long long)wrong, (long long)n * (long long)p.batch);
out:
    tw_runtime_destroy(rt);
    free(ref);
    free(out);
    free(t);
    free(img.data);
    return rc;
}
