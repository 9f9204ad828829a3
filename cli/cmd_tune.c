/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `tune`, tile sizes and GPU parameters measured on this machine. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave tune -o OUT.ini [options]\n"
    "\n"
    "Measure, with short runs on this machine's workers (every core and GPU, or what the\n"
    "common options leave), which tile size is fastest for each operation, and on a GPU the\n"
    "PBA+ band parameters of the EDT (edt.pba_m1..3) and the wavefront queue capacity of\n"
    "reconstruction (mrecon.queue_capacity); write the winners as a commented INI that\n"
    "--config accepts (each section lists every candidate's median time). The input is the\n"
    "synthetic sample slide (`tilewave sample`), written to a temporary folder; gray reads it\n"
    "and writes a TIFF there, the others run on its inverted luminance in memory. Runtime keys\n"
    "given on this command line (--gpus, --cpu-workers, --set runtime.KEY=...) are written to\n"
    "the INI too: the times hold for them.\n"
    "\n"
    "  -o, --output OUT      the INI to write (a temporary file, renamed when done)\n"
    "  --ops LIST            operations, comma-separated: gray, mrecon (reconstruct), edt,\n"
    "                        maxtree (area-open), or all (default)\n"
    "  --size WxH            the synthetic image (default 8192x8192; --quick: 1024x1024)\n"
    "  --candidates LIST     tile sizes to try, N or WxH separated by commas, each at most the\n"
    "                        image (default: 256, 512, ... 8192 squares of at most half the\n"
    "                        image's sides, so at least 2x2 tiles; --quick: 128, 256, 512)\n"
    "  --repeat N            timed runs per candidate, after one warm-up run; the median\n"
    "                        counts (default 3)\n"
    "  --time-limit S        stop measuring after about S seconds, shared evenly between the\n"
    "                        operations; candidates not reached are listed as skipped\n"
    "                        (default 600)\n"
    "  --quick               a small image and small tiles, for a smoke test\n"
    "  --gpu-params          sweep the GPU parameters even without a GPU (CPU workers ignore\n"
    "                        them: for testing this command)\n"
    "\n"
    "Tile sizes found on a small image favour small tiles (more of them to balance); use the\n"
    "largest --size the time allows. Cost models stay in memory (runtime.models = none)\n"
    "unless that key is set. docs/runtime.md, \"Tuning\".\n"
    "\n" CLI_COMMON_HELP;

enum { OP_GRAY, OP_MRECON, OP_EDT, OP_MAXTREE, N_OPS };

static const struct {
    const char *name, *alias, *section;
} op_names[N_OPS] = {
    {"gray", NULL, "gray"},
    {"mrecon", "reconstruct", "mrecon"},
    {"edt", NULL, "edt"},
    {"maxtree", "area-open", "maxtree"},
};

#define MAX_CANDIDATES 32
#define MAX_REPEAT 100
#define MAX_TRIALS 64
/* The library's bound for a tile side (configs/default.ini, tile.size). */
#define MAX_TILE_SIDE 65536
/* A GPU parameter other than "auto" must beat auto by this much to be written: less is
 * within the noise of a few short runs. */
#define PARAM_MARGIN 0.03
/* edt.pba_m2 / m3 are counts per row, which scale with the image's width: written only when
 * clearly better, since they will be used for images of other widths. */
#define WIDTH_PARAM_MARGIN 0.05
#define INI_LINE_MAX 190 /* libinih reads lines of up to 199 characters */

/* One candidate and its runs. */
typedef struct trial {
    char label[64];
    int32_t tw, th;      /* tile */
    int64_t value;       /* a parameter's value (0: auto) */
    int64_t size;        /* PBA+: the rows or columns of its bands */
    double t[MAX_REPEAT];
    int n;               /* timed runs done */
    double median;       /* < 0: not measured */
} trial;

/* One swept parameter: its candidates and the winner. */
typedef struct sweep {
    trial trials[MAX_TRIALS];
    int n;
    int best; /* index into trials; -1: nothing measured */
} sweep;

typedef struct tune {
    cli_common c;
    tw_config *cfg; /* the base configuration */
    tw_runtime *rt; /* NULL between runtimes */
    int64_t W, H;
    int repeat;
    double limit_s, t_start;
    bool quiet;
    bool ops[N_OPS];
    int32_t cand[MAX_CANDIDATES][2];
    int n_cand;
    bool cand_given;
    /* inputs */
    char *dir, *sample, *gray_out;
    uint8_t *img, *marker, *res;
    float *dist;
    /* results */
    sweep tiles[N_OPS];
    sweep qcap, m1, m2, m3;
    bool has_gpu;
} tune;

/* SIGINT / SIGTERM between jobs (during a job, cli_job_run() cancels it and reports). */
static volatile sig_atomic_t tune_sig;

static void
on_tune_signal(int sig)
{
    tune_sig = sig;
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int
interrupted_rc(void)
{
    int sig = tune_sig;

    cli_error("interrupted by %s: tune canceled, no output written",
              sig == SIGINT ? "SIGINT" : "SIGTERM");
    return 128 + sig;
}

/* "WxH" or "N" (N x N), each side 1..max. */
static int
parse_dims(const char *s, int64_t max, int64_t *w, int64_t *h)
{
    char buf[64];
    char *x;
    size_t n = strlen(s);

    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n + 1);
    if ((x = strchr(buf, 'x')) != NULL)
        *x = '\0';
    if (cli_parse_i64(buf, 1, max, w) != 0 || cli_parse_i64(x ? x + 1 : buf, 1, max, h) != 0)
        return -1;
    return 0;
}

static int
parse_ops(tune *t, const char *arg)
{
    char buf[256];
    char *p, *comma;

    if (strlen(arg) >= sizeof buf || !*arg)
        return cli_usage_error("--ops: bad list '%s'", arg);
    memcpy(buf, arg, strlen(arg) + 1);
    memset(t->ops, 0, sizeof t->ops);
    for (p = buf; p; p = comma) {
        int k = -1;

        if ((comma = strchr(p, ',')) != NULL)
            *comma++ = '\0';
        if (strcmp(p, "all") == 0) {
            for (int i = 0; i < N_OPS; i++)
                t->ops[i] = true;
            continue;
        }
        for (int i = 0; i < N_OPS; i++)
            if (strcmp(p, op_names[i].name) == 0 ||
                (op_names[i].alias && strcmp(p, op_names[i].alias) == 0))
                k = i;
        if (k < 0)
            return cli_usage_error("--ops: unknown operation '%s' (gray, mrecon, edt, maxtree "
                                   "or all)",
                                   p);
        t->ops[k] = true;
    }
    return 0;
}

static int
parse_candidates(tune *t, const char *arg)
{
    char buf[1024];
    char *p, *comma;

    if (strlen(arg) >= sizeof buf || !*arg)
        return cli_usage_error("--candidates: bad list '%s'", arg);
    memcpy(buf, arg, strlen(arg) + 1);
    t->n_cand = 0;
    for (p = buf; p; p = comma) {
        int64_t w, h;

        if ((comma = strchr(p, ',')) != NULL)
            *comma++ = '\0';
        if (parse_dims(p, MAX_TILE_SIDE, &w, &h) != 0)
            return cli_usage_error("--candidates: bad tile size '%s' (N or WxH, 1..%d)", p,
                                   MAX_TILE_SIDE);
        if (t->n_cand == MAX_CANDIDATES)
            return cli_usage_error("--candidates: more than %d sizes", MAX_CANDIDATES);
        t->cand[t->n_cand][0] = (int32_t)w;
        t->cand[t->n_cand][1] = (int32_t)h;
        t->n_cand++;
    }
    t->cand_given = true;
    return 0;
}

/* The median of n >= 1 times (sorted in place). */
static double
median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* "1.84 s", "0.123 s", "4.2 ms". */
static void
format_time(char *buf, size_t n, double s)
{
    if (s >= 10)
        snprintf(buf, n, "%.1f s", s);
    else if (s >= 1)
        snprintf(buf, n, "%.2f s", s);
    else if (s >= 0.01)
        snprintf(buf, n, "%.3f s", s);
    else
        snprintf(buf, n, "%.2f ms", 1e3 * s);
}

/* ---- inputs */

static void
remove_dir(const char *dir)
{
    DIR *d;
    struct dirent *e;
    char path[4096];

    if (!dir || !(d = opendir(dir)))
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static char *
join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The sample slide in a temporary folder, and its inverted luminance (tissue bright, glass
 * dark: what the filters and the EDT's foreground want) in memory. */
static int
make_inputs(tune *t)
{
    const char *tmp = getenv("TMPDIR");
    char templ[4096];
    tw_sample_opts so;
    tw_slide *s = NULL;
    tw_error err;
    uint8_t *rgb = NULL;
    const int64_t strip = 256;
    size_t npx = (size_t)t->W * (size_t)t->H;
    int rc = CLI_FAIL;

    snprintf(templ, sizeof templ, "%s/tilewave-tune-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(templ)) {
        cli_error("cannot create a temporary folder '%s' (%s)", templ, strerror(errno));
        return CLI_FAIL;
    }
    if (!(t->dir = strdup(templ)) || !(t->sample = join(templ, "sample.tif")) ||
        !(t->gray_out = join(templ, "gray.tif")) || !(t->img = malloc(npx)) ||
        !(t->marker = malloc(npx)) || !(t->res = malloc(npx)) ||
        !(t->dist = malloc(npx * sizeof *t->dist)) ||
        !(rgb = malloc((size_t)t->W * (size_t)strip * 3))) {
        cli_error("out of memory for a %lldx%lld image", (long long)t->W, (long long)t->H);
        goto out;
    }
    tw_sample_opts_init(&so);
    so.w = t->W;
    so.h = t->H;
    if (tw_sample_write(t->sample, &so, &err) != TW_OK ||
        tw_slide_open(t->sample, TW_READER_AUTO, &s, &err) != TW_OK) {
        cli_error("%s", err.message);
        goto out;
    }
    for (int64_t y = 0; y < t->H; y += strip) {
        int64_t h = t->H - y < strip ? t->H - y : strip;

        if (tw_slide_read_region(s, 0, 0, y, t->W, h, rgb, (size_t)t->W * 3, &err) != TW_OK) {
            cli_error("%s", err.message);
            goto out;
        }
        for (int64_t i = 0; i < h * t->W; i++) {
            const uint8_t *p = rgb + 3 * i;
            unsigned lum = (299u * p[0] + 587u * p[1] + 114u * p[2] + 500u) / 1000u;

            t->img[y * t->W + i] = (uint8_t)(255u - lum);
        }
    }
    /* The h-maxima marker (h = 32): reconstruction raises it back under the image, as
     * tw_hmax_submit() does. */
    for (size_t i = 0; i < npx; i++)
        t->marker[i] = (uint8_t)(t->img[i] > 32 ? t->img[i] - 32 : 0);
    rc = CLI_OK;
out:
    tw_slide_close(s);
    free(rgb);
    return rc;
}

static tw_host_image
host(void *data, int64_t w, int64_t h, tw_sample_type type)
{
    tw_host_image im;

    memset(&im, 0, sizeof im);
    im.data = data;
    im.w = w;
    im.h = h;
    im.type = type;
    return im;
}

/* ---- runs */

/* One run of `op` with these tiles (and queue capacity) on rt: its wall time, from submission
 * until the job ended. */
static int
run_once(tune *t, tw_runtime *rt, int op, int32_t tw, int32_t th, int64_t qcap, double *secs)
{
    tw_job *job = NULL;
    tw_error err;
    tw_status st = TW_E_INVALID;
    double t0;
    int rc;

    memset(&err, 0, sizeof err);
    if (tune_sig)
        return interrupted_rc();
    t0 = now_s();
    switch (op) {
    case OP_GRAY: {
        tw_gray_opts o;

        tw_gray_opts_init(&o);
        o.input.path = t->sample;
        o.output.path = t->gray_out;
        o.tile_w = tw;
        o.tile_h = th;
        st = tw_gray_submit(rt, &o, &job, &err);
        break;
    }
    case OP_MRECON: {
        tw_mrecon_opts o;

        tw_mrecon_opts_init(&o);
        o.marker_image = host(t->marker, t->W, t->H, TW_U8);
        o.mask_image = host(t->img, t->W, t->H, TW_U8);
        o.result = host(t->res, t->W, t->H, TW_U8);
        o.tile_w = tw;
        o.tile_h = th;
        o.queue_capacity = qcap;
        st = tw_mrecon_submit(rt, &o, &job, &err);
        break;
    }
    case OP_EDT: {
        tw_edt_opts o;

        tw_edt_opts_init(&o);
        o.image = host(t->img, t->W, t->H, TW_U8);
        o.result = host(t->dist, t->W, t->H, TW_F32);
        o.threshold_otsu = true;
        o.tile_w = tw;
        o.tile_h = th;
        st = tw_edt_submit(rt, &o, &job, &err);
        break;
    }
    case OP_MAXTREE: {
        tw_attr_filter_opts o;

        tw_attr_filter_opts_init(&o);
        o.image = host(t->img, t->W, t->H, TW_U8);
        o.result = host(t->res, t->W, t->H, TW_U8);
        o.filter = TW_AREA_OPENING;
        o.threshold = 256; /* nuclei are 200-800 pixels */
        o.tile_w = tw;
        o.tile_h = th;
        st = tw_attr_filter_submit(rt, &o, &job, &err);
        break;
    }
    default: break;
    }
    rc = cli_job_submitted(st, &err, job, op_names[op].name, true);
    *secs = now_s() - t0;
    tw_job_destroy(job);
    return rc;
}

static int
ensure_runtime(tune *t)
{
    if (t->rt)
        return CLI_OK;
    return cli_runtime_create(t->cfg, &t->rt);
}

/* A warm-up run, then up to `repeat` timed runs while the phase's time lasts. */
static int
measure(tune *t, tw_runtime *rt, int op, trial *tr, int64_t qcap, double deadline)
{
    double secs;
    int rc;

    tr->n = 0;
    tr->median = -1;
    if (now_s() >= deadline)
        return CLI_OK;
    if ((rc = run_once(t, rt, op, tr->tw, tr->th, qcap, &secs)) != CLI_OK)
        return rc;
    for (int i = 0; i < t->repeat && (i == 0 || now_s() < deadline); i++) {
        if ((rc = run_once(t, rt, op, tr->tw, tr->th, qcap, &tr->t[tr->n])) != CLI_OK)
            return rc;
        tr->n++;
    }
    tr->median = median(tr->t, tr->n);
    if (!t->quiet) {
        char tm[32];

        format_time(tm, sizeof tm, tr->median);
        fprintf(stderr, "%s: %s %s: %s (median of %d)\n", cli_prog, op_names[op].name, tr->label,
                tm, tr->n);
    }
    return CLI_OK;
}

/* The fastest trial; with `margin` > 0 trial 0 (auto) stays unless another beats it by that
 * fraction. */
static void
pick(sweep *s, double margin)
{
    s->best = -1;
    for (int i = 0; i < s->n; i++)
        if (s->trials[i].median >= 0 &&
            (s->best < 0 || s->trials[i].median < s->trials[s->best].median))
            s->best = i;
    if (margin > 0 && s->best > 0 && s->trials[0].median >= 0 &&
        s->trials[s->best].median > (1.0 - margin) * s->trials[0].median)
        s->best = 0;
}

static int
tile_sweep(tune *t, int op, double deadline)
{
    sweep *s = &t->tiles[op];
    int rc;

    if ((rc = ensure_runtime(t)) != CLI_OK)
        return rc;
    s->n = 0;
    for (int i = 0; i < t->n_cand; i++) {
        trial *tr = &s->trials[s->n++];

        tr->tw = t->cand[i][0];
        tr->th = t->cand[i][1];
        snprintf(tr->label, sizeof tr->label, "%dx%d", (int)tr->tw, (int)tr->th);
        if ((rc = measure(t, t->rt, op, tr, 0, deadline)) != CLI_OK)
            return rc;
    }
    pick(s, 0);
    return CLI_OK;
}

static int
qcap_sweep(tune *t, double deadline)
{
    sweep *s = &t->qcap;
    const trial *best = &t->tiles[OP_MRECON].trials[t->tiles[OP_MRECON].best];
    int64_t px = (int64_t)best->tw * best->th;
    static const int div[] = {0, 64, 16, 2};
    int rc;

    s->n = 0;
    for (size_t i = 0; i < sizeof div / sizeof div[0]; i++) {
        trial *tr = &s->trials[s->n];
        int64_t v = div[i] ? px / div[i] : 0;

        if (div[i] && v < 1024) /* the kernel's floor: nothing to compare */
            continue;
        s->n++;
        tr->tw = best->tw;
        tr->th = best->th;
        tr->value = v;
        if (v)
            snprintf(tr->label, sizeof tr->label, "queue %lld", (long long)v);
        else
            snprintf(tr->label, sizeof tr->label, "queue auto");
        if ((rc = measure(t, t->rt, OP_MRECON, tr, v, deadline)) != CLI_OK)
            return rc;
    }
    pick(s, PARAM_MARGIN);
    return CLI_OK;
}

static int64_t
ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* One EDT trial on a runtime of its own, whose config sets edt.pba_m1..3. */
static int
pba_trial(tune *t, trial *tr, const int64_t m[3], double deadline)
{
    static const char *const keys[] = {"edt.pba_m1", "edt.pba_m2", "edt.pba_m3"};
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err;
    int rc = CLI_OK;

    tr->n = 0;
    tr->median = -1;
    if (now_s() >= deadline)
        return CLI_OK;
    if (tw_config_clone(t->cfg, &cfg) != TW_OK) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    for (int i = 0; i < 3; i++) {
        char v[32];

        snprintf(v, sizeof v, "%lld", (long long)m[i]);
        if (tw_config_set(cfg, keys[i], v, TW_CONFIG_SET, &err) != TW_OK) {
            cli_error("%s", err.message);
            rc = CLI_FAIL;
            goto out;
        }
    }
    if ((rc = cli_runtime_create(cfg, &rt)) != CLI_OK)
        goto out;
    rc = measure(t, rt, OP_EDT, tr, 0, deadline);
out:
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}

/* The band sizes the PBA+ kernel derives from a count (0: its automatic choice), mirrored
 * from cuda/edt_cuda.cu (make_geo, EdtPolicy) so that two counts giving the same bands are
 * measured once: sides are rounded up to the warp's 32. */
#define PBA_TILE 32
#define PBA_AUTO_BAND_ROWS 32
#define PBA_MAX_AUTO_M1 4096
#define PBA_P2_TARGET_THREADS ((int64_t)1 << 19)
#define PBA_AUTO_BAND_COLS 128

static int64_t
round_up(int64_t a, int64_t b)
{
    return ceil_div(a, b) * b;
}

/* Rows of a phase-1 band of a th-row band for m1. */
static int64_t
pba_rows(int64_t th, int64_t m1)
{
    if (m1 > 0)
        return round_up(ceil_div(th, m1), PBA_TILE);
    if (ceil_div(th, PBA_AUTO_BAND_ROWS) > PBA_MAX_AUTO_M1)
        return round_up(ceil_div(th, PBA_MAX_AUTO_M1), PBA_TILE);
    return PBA_AUTO_BAND_ROWS;
}

/* Columns of a phase-2 band of a W x th band for m2. */
static int64_t
pba_cols(int64_t W, int64_t th, int64_t m2)
{
    int64_t want;

    if (m2 > 0)
        return round_up(ceil_div(W, m2), PBA_TILE);
    want = ceil_div(PBA_P2_TARGET_THREADS, th);
    if (want < ceil_div(W, PBA_AUTO_BAND_COLS))
        want = ceil_div(W, PBA_AUTO_BAND_COLS);
    return round_up(ceil_div(W, want), PBA_TILE);
}

/* Add a PBA trial of count v whose bands are `size` rows or columns, unless a trial with the
 * same size is there already. */
static trial *
pba_add(sweep *s, int64_t v, const char *what, int64_t size, const char *unit)
{
    trial *tr;

    for (int i = 0; i < s->n; i++)
        if (s->trials[i].size == size)
            return NULL;
    tr = &s->trials[s->n++];
    tr->value = v;
    tr->size = size;
    if (v)
        snprintf(tr->label, sizeof tr->label, "%s=%lld (%lld %s)", what, (long long)v,
                 (long long)size, unit);
    else
        snprintf(tr->label, sizeof tr->label, "%s=auto (%lld %s)", what, (long long)size, unit);
    return tr;
}

/* edt.pba_m1, then m2 with the best m1, then m3 with both: each on its own runtime (the keys
 * are read from the runtime's configuration), the main runtime stopped meanwhile so that the
 * two never compete for the cores. m1 counts the phase-1 bands of a column of an EDT band
 * (the tile's height), m2 the phase-2 bands and m3 the phase-3 segments of a row (the
 * image's width). */
static int
pba_sweep(tune *t, double deadline)
{
    const trial *best = &t->tiles[OP_EDT].trials[t->tiles[OP_EDT].best];
    const int64_t th = best->th, W = t->W;
    static const int rows[] = {0, 64, 128, 256};
    static const int cols2[] = {0, 32, 64, 128, 256};
    static const int cols3[] = {0, 32, 128, 512};
    int64_t m[3] = {0, 0, 0};
    double end1, end2;
    int rc;

    tw_runtime_destroy(t->rt);
    t->rt = NULL;
    end1 = now_s() + (deadline - now_s()) / 3;
    end2 = now_s() + 2 * (deadline - now_s()) / 3;
    t->m1.n = t->m2.n = t->m3.n = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t v = rows[i] ? ceil_div(th, rows[i]) : 0;
        trial *tr;

        if ((rows[i] && (v < 1 || v > 1024)) ||
            !(tr = pba_add(&t->m1, v, "m1", pba_rows(th, v), "rows")))
            continue;
        tr->tw = best->tw;
        tr->th = best->th;
        m[0] = v;
        if ((rc = pba_trial(t, tr, m, end1)) != CLI_OK)
            return rc;
    }
    pick(&t->m1, PARAM_MARGIN);
    m[0] = t->m1.best >= 0 ? t->m1.trials[t->m1.best].value : 0;
    for (size_t i = 0; i < sizeof cols2 / sizeof cols2[0]; i++) {
        int64_t v = cols2[i] ? ceil_div(W, cols2[i]) : 0;
        trial *tr;

        if ((cols2[i] && (v < 1 || v > 1024)) ||
            !(tr = pba_add(&t->m2, v, "m2", pba_cols(W, th, v), "columns")))
            continue;
        tr->tw = best->tw;
        tr->th = best->th;
        m[1] = v;
        if ((rc = pba_trial(t, tr, m, end2)) != CLI_OK)
            return rc;
    }
    pick(&t->m2, WIDTH_PARAM_MARGIN);
    m[1] = t->m2.best >= 0 ? t->m2.trials[t->m2.best].value : 0;
    for (size_t i = 0; i < sizeof cols3 / sizeof cols3[0]; i++) {
        /* auto: segments as wide as the phase-2 bands */
        int64_t v = cols3[i] ? ceil_div(W, cols3[i]) : 0,
                size = v ? round_up(ceil_div(W, v), PBA_TILE) : pba_cols(W, th, m[1]);
        trial *tr;

        if ((cols3[i] && (v < 1 || v > 1024)) || !(tr = pba_add(&t->m3, v, "m3", size, "columns")))
            continue;
        tr->tw = best->tw;
        tr->th = best->th;
        m[2] = v;
        if ((rc = pba_trial(t, tr, m, deadline)) != CLI_OK)
            return rc;
    }
    pick(&t->m3, WIDTH_PARAM_MARGIN);
    return CLI_OK;
}

/* ---- the INI */

/* "# prefix item, item, ..." wrapped to lines libinih reads (continuations "#   item"). */
static void
write_list(FILE *f, const char *prefix, const sweep *s, int repeat)
{
    char line[256];
    size_t n = (size_t)snprintf(line, sizeof line, "# %s", prefix);

    for (int i = 0; i < s->n; i++) {
        const trial *tr = &s->trials[i];
        char item[128], tm[32];
        size_t k;

        if (tr->median >= 0) {
            char runs[32] = "";

            format_time(tm, sizeof tm, tr->median);
            if (tr->n < repeat) /* cut short by the time limit */
                snprintf(runs, sizeof runs, " (%d run%s)", tr->n, tr->n == 1 ? "" : "s");
            k = (size_t)snprintf(item, sizeof item, "%s %s%s%s", tr->label, tm, runs,
                                 i == s->best ? " *" : "");
        } else {
            k = (size_t)snprintf(item, sizeof item, "%s skipped (time limit)", tr->label);
        }
        if (i + 1 < s->n && k + 1 < sizeof item) {
            item[k++] = ',';
            item[k] = '\0';
        }
        if (n + 1 + k > INI_LINE_MAX) {
            fprintf(f, "%s\n", line);
            n = (size_t)snprintf(line, sizeof line, "#  ");
        }
        n += (size_t)snprintf(line + n, sizeof line - n, " %s", item);
    }
    fprintf(f, "%s\n", line);
}

/* A comment of free text (the command line, names), wrapped and with control characters
 * replaced, so that it stays one or more comment lines. */
static void
write_comment(FILE *f, const char *label, const char *text)
{
    size_t len = strlen(text), pos = 0, room = INI_LINE_MAX - 4 - strlen(label);
    bool first = true;

    do {
        size_t k = len - pos < room ? len - pos : room;

        /* break at the last blank that fits, when there is one */
        if (pos + k < len)
            for (size_t j = k; j > room / 2; j--)
                if (text[pos + j] == ' ') {
                    k = j;
                    break;
                }

        fprintf(f, "# %s", first ? label : "  ");
        for (size_t i = 0; i < k; i++)
            fputc((unsigned char)text[pos + i] < 0x20 ? '?' : text[pos + i], f);
        fputc('\n', f);
        pos += k;
        while (pos < len && text[pos] == ' ')
            pos++;
        first = false;
        room = INI_LINE_MAX - 4;
    } while (pos < len);
}

static void
cpu_model(char *buf, size_t n)
{
    FILE *fp = fopen("/proc/cpuinfo", "r");
    char line[512];

    snprintf(buf, n, "unknown CPU");
    if (!fp)
        return;
    while (fgets(line, sizeof line, fp)) {
        char *c = strchr(line, ':');

        if (strncmp(line, "model name", 10) == 0 && c) {
            c++;
            while (*c == ' ' || *c == '\t')
                c++;
            c[strcspn(c, "\n")] = '\0';
            snprintf(buf, n, "%s", c);
            break;
        }
    }
    fclose(fp);
}

static void
write_header(FILE *f, tune *t)
{
    char host_name[256] = "unknown", date[64] = "?", cpu[256], text[1024];
    time_t now = time(NULL);
    struct tm tmv;
    tw_topology_info topo;
    int n_cpu = 0, n_gpu = 0;
    const char *cmd = cli_command_line();

    if (gethostname(host_name, sizeof host_name) != 0)
        snprintf(host_name, sizeof host_name, "unknown");
    host_name[sizeof host_name - 1] = '\0';
    if (gmtime_r(&now, &tmv))
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tmv);
    cpu_model(cpu, sizeof cpu);
    fprintf(f, "# tilewave: tile sizes and GPU parameters measured by `tilewave tune`.\n#\n");
    snprintf(text, sizeof text, "tilewave %s (CUDA %s), %s, on %s", tw_version_string(),
             tw_build_has_cuda() ? "enabled" : "disabled", date, host_name);
    write_comment(f, "", text);
    if (t->rt && tw_runtime_get_topology(t->rt, &topo) == TW_OK) {
        snprintf(text, sizeof text, "%s, %d cores (%d threads, %d package%s)", cpu, topo.n_cores,
                 topo.n_pus, topo.n_packages, topo.n_packages == 1 ? "" : "s");
        write_comment(f, "CPU: ", text);
        for (int i = 0; i < topo.n_gpus; i++) {
            tw_gpu_info g;
            char label[32];

            if (tw_runtime_get_gpu(t->rt, i, &g) != TW_OK)
                continue;
            snprintf(label, sizeof label, "GPU %d: ", g.ordinal);
            snprintf(text, sizeof text, "%s (compute capability %d.%d, %.1f GiB)", g.name,
                     g.cc_major, g.cc_minor, (double)g.total_mem / (1024.0 * 1024 * 1024));
            write_comment(f, label, text);
        }
        for (int i = 0; i < tw_runtime_get_worker_count(t->rt); i++) {
            tw_worker_info wi;

            if (tw_runtime_get_worker(t->rt, i, &wi) != TW_OK)
                continue;
            if (wi.type == TW_DEVICE_CUDA)
                n_gpu++;
            else
                n_cpu++;
        }
        snprintf(text, sizeof text, "%d CPU workers and %d GPU workers%s", n_cpu, n_gpu,
                 topo.n_gpus ? "" : " (no GPU: the GPU parameters were not measured)");
        write_comment(f, "Workers: ", text);
    }
    write_comment(f, "Command: ", cmd ? cmd : "tilewave tune");
    snprintf(text, sizeof text,
             "the synthetic sample slide, %lldx%lld (gray: read from a TIFF and written to one; "
             "mrecon: h-maxima marker, h = 32; edt: Otsu foreground; maxtree: area opening, "
             "256 px), %d timed runs after a warm-up, median",
             (long long)t->W, (long long)t->H, t->repeat);
    write_comment(f, "Input: ", text);
    fprintf(f, "#\n# Use with --config FILE (or TILEWAVE_CONFIG=FILE); every key is documented in\n"
               "# configs/default.ini. '*' marks the value chosen. Flags and --set still win.\n");
}

static const char *
dims_str(char *buf, size_t n, const sweep *s)
{
    snprintf(buf, n, "%dx%d", (int)s->trials[s->best].tw, (int)s->trials[s->best].th);
    return buf;
}

/* The runtime keys the command line set (--gpus, --cpu-workers, --set runtime.*): the times
 * were measured with them. Traces, fault injection and the model file are not kept. */
static void
write_runtime(FILE *f, const tune *t)
{
    bool any = false;

    for (size_t i = 0; i < tw_config_count(); i++) {
        tw_config_entry e;

        if (tw_config_describe(t->cfg, i, &e) != TW_OK || e.source != TW_CONFIG_SET ||
            strncmp(e.key, "runtime.", 8) != 0 || strcmp(e.key, "runtime.trace") == 0 ||
            strcmp(e.key, "runtime.fault_inject") == 0 || strcmp(e.key, "runtime.models") == 0)
            continue;
        if (!any)
            fprintf(f, "\n[runtime]\n\n# Set on the tune command line; the times below hold "
                       "for these.\n");
        any = true;
        fprintf(f, "%s = %s\n", e.key + 8, e.value);
    }
}

static void
write_param(FILE *f, const char *key, const sweep *s, const char *what, int repeat)
{
    char prefix[64];

    write_comment(f, "", what);
    snprintf(prefix, sizeof prefix, "candidates (median of %d):", repeat);
    write_list(f, prefix, s, repeat);
    if (s->best >= 0)
        fprintf(f, "%s = %lld\n", key, (long long)s->trials[s->best].value);
    else
        fprintf(f, "# %s: nothing measured (time limit); left to the default\n", key);
}

static int
write_ini(FILE *f, tune *t)
{
    char dims[64], what[256];

    write_header(f, t);
    write_runtime(f, t);
    for (int op = 0; op < N_OPS; op++) {
        const sweep *s = &t->tiles[op];

        if (!t->ops[op])
            continue;
        fprintf(f, "\n[%s]\n\n", op_names[op].section);
        snprintf(what, sizeof what, "tile_size candidates (median of %d):", t->repeat);
        write_list(f, what, s, t->repeat);
        if (s->best >= 0)
            fprintf(f, "tile_size = %s\n", dims_str(dims, sizeof dims, s));
        else
            fprintf(f, "# tile_size: nothing measured (time limit); left to tile.size\n");
        if (op == OP_MRECON && s->best >= 0) {
            if (t->has_gpu && t->qcap.n > 0) {
                snprintf(what, sizeof what,
                         "queue_capacity: elements of each GPU wavefront queue of a %s tile; "
                         "auto (0) = the tile's pixels / 8; another value only when over %.0f%% "
                         "faster",
                         dims, 100 * PARAM_MARGIN);
                write_param(f, "queue_capacity", &t->qcap, what, t->repeat);
            } else {
                fprintf(f, "# queue_capacity: not measured (no GPU; CPU workers ignore it)\n");
            }
        }
        if (op == OP_EDT && s->best >= 0) {
            if (t->has_gpu && t->m1.n > 0) {
                snprintf(what, sizeof what,
                         "pba_m1: PBA+ phase-1 bands per column of a %d-row EDT band; auto (0) "
                         "= bands of 32 rows; another value only when over %.0f%% faster",
                         (int)t->tiles[op].trials[s->best].th, 100 * PARAM_MARGIN);
                write_param(f, "pba_m1", &t->m1, what, t->repeat);
                snprintf(what, sizeof what,
                         "pba_m2: phase-2 bands per row, a count for this %lld-pixel-wide image "
                         "(auto scales with the width): another value only when over %.0f%% "
                         "faster than auto",
                         (long long)t->W, 100 * WIDTH_PARAM_MARGIN);
                write_param(f, "pba_m2", &t->m2, what, t->repeat);
                snprintf(what, sizeof what,
                         "pba_m3: phase-3 threads per row, a count for this %lld-pixel-wide "
                         "image (auto: as many as phase-2 bands): another value only when over "
                         "%.0f%% faster than auto",
                         (long long)t->W, 100 * WIDTH_PARAM_MARGIN);
                write_param(f, "pba_m3", &t->m3, what, t->repeat);
            } else {
                fprintf(f, "# pba_m1..3: not measured (no GPU; they are GPU parameters)\n");
            }
        }
    }
    return ferror(f) ? -1 : 0;
}

/* ---- the command */

int
cmd_tune(int argc, char **argv)
{
    enum { O_OPS = 1, O_SIZE, O_CANDIDATES, O_REPEAT, O_TIME_LIMIT, O_QUICK, O_GPU_PARAMS };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"ops", required_argument, NULL, O_OPS},
        {"size", required_argument, NULL, O_SIZE},
        {"candidates", required_argument, NULL, O_CANDIDATES},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"time-limit", required_argument, NULL, O_TIME_LIMIT},
        {"quick", no_argument, NULL, O_QUICK},
        {"gpu-params", no_argument, NULL, O_GPU_PARAMS},
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    static tune t; /* large (every run's time): not on the stack */
    const char *out_path = NULL;
    char *tmp_path = NULL;
    FILE *f = NULL;
    struct sigaction sa, old_int, old_term;
    struct stat stt;
    bool size_given = false, quick = false, handlers = false, force_params = false;
    int64_t v, w, h;
    int opt, rc = CLI_OK, n_ops = 0, fd = -1;
    tw_error err;

    memset(&t, 0, sizeof t);
    cli_common_init(&t.c);
    t.repeat = 3;
    t.limit_s = 600;
    for (int i = 0; i < N_OPS; i++)
        t.ops[i] = true;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': out_path = optarg; break;
        case O_OPS:
            if ((rc = parse_ops(&t, optarg)) != 0)
                goto out;
            break;
        case O_SIZE:
            if (parse_dims(optarg, 1 << 20, &w, &h) != 0 || w < 64 || h < 64 ||
                w * h > ((int64_t)1 << 32) - 1) {
                rc = cli_usage_error("--size: bad size '%s' (WxH, 64x64 to 2^32 - 1 pixels)",
                                     optarg);
                goto out;
            }
            t.W = w;
            t.H = h;
            size_given = true;
            break;
        case O_CANDIDATES:
            if ((rc = parse_candidates(&t, optarg)) != 0)
                goto out;
            break;
        case O_REPEAT:
            if (cli_parse_i64(optarg, 1, MAX_REPEAT, &v) != 0) {
                rc = cli_usage_error("--repeat: bad count '%s' (1..%d)", optarg, MAX_REPEAT);
                goto out;
            }
            t.repeat = (int)v;
            break;
        case O_TIME_LIMIT:
            if (cli_parse_i64(optarg, 1, 86400, &v) != 0) {
                rc = cli_usage_error("--time-limit: bad seconds '%s' (1..86400)", optarg);
                goto out;
            }
            t.limit_s = (double)v;
            break;
        case O_QUICK: quick = true; break;
        case O_GPU_PARAMS: force_params = true; break;
        case 'h':
        case CLI_OPT_HELP: fputs(help, stdout); goto out;
        default:
            if ((rc = cli_common_option(&t.c, opt, optarg)) != 0) {
                if (rc < 0)
                    rc = cli_usage_error("unknown option '%s'", argv[optind - 1]);
                goto out;
            }
            break;
        }
    }
    if (optind < argc) {
        rc = cli_usage_error("unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (!out_path || !*out_path) {
        rc = cli_usage_error("missing -o OUT.ini");
        goto out;
    }
    if (t.c.tile) {
        rc = cli_usage_error("--tile: tune measures tile sizes itself (use --candidates)");
        goto out;
    }
    if (t.c.trace) {
        rc = cli_usage_error("--trace: not with tune (it starts several runtimes)");
        goto out;
    }
    if (!size_given) {
        t.W = t.H = quick ? 1024 : 8192;
    }
    if (t.cand_given) {
        for (int i = 0; i < t.n_cand; i++)
            if (t.cand[i][0] > t.W || t.cand[i][1] > t.H) {
                rc = cli_usage_error("--candidates: %dx%d is larger than the image (%lldx%lld)",
                                     (int)t.cand[i][0], (int)t.cand[i][1], (long long)t.W,
                                     (long long)t.H);
                goto out;
            }
    } else {
        for (int32_t s = quick ? 128 : 256; s <= (quick ? 512 : 8192); s *= 2)
            if (s <= t.W / 2 && s <= t.H / 2) {
                t.cand[t.n_cand][0] = t.cand[t.n_cand][1] = s;
                t.n_cand++;
            }
        if (t.n_cand == 0) {
            rc = cli_usage_error("--size: %lldx%lld is too small for the default candidates "
                                 "(give --candidates)",
                                 (long long)t.W, (long long)t.H);
            goto out;
        }
    }
    for (int i = 0; i < N_OPS; i++)
        n_ops += t.ops[i];
    t.quiet = t.c.quiet;

#ifdef TW_CLI_FUZZ
    rc = CLI_FUZZ_STOP;
    goto out;
#endif
    /* The output first: an unwritable place fails now, not after the measurements; a
     * device, FIFO or socket there is refused (the rename would replace it), as every
     * command's outputs are (cli_files_check). */
    if (stat(out_path, &stt) == 0 && S_ISDIR(stt.st_mode)) {
        cli_error("cannot write '%s' (a directory)", out_path);
        rc = CLI_FAIL;
        goto out;
    }
    if ((rc = cli_files_check((const cli_file[]){{"-o", out_path, true}}, 1)) != CLI_OK)
        goto out;
    if (!(tmp_path = malloc(strlen(out_path) + 16))) {
        cli_error("out of memory");
        rc = CLI_FAIL;
        goto out;
    }
    snprintf(tmp_path, strlen(out_path) + 16, "%s.tmp-XXXXXX", out_path);
    if ((fd = mkstemp(tmp_path)) < 0) {
        cli_error("cannot create '%s' (%s)", out_path, strerror(errno));
        free(tmp_path);
        tmp_path = NULL;
        rc = CLI_FAIL;
        goto out;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tune_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    handlers = true;

    if ((rc = cli_config_build(&t.c, &t.cfg)) != CLI_OK)
        goto out;
    /* Measurements stay out of the user's cost-model file unless asked for (a source above
     * the default keeps its value); "auto" GPU parameters mean the kernels' own choice. */
    if (tw_config_set(t.cfg, "runtime.models", "none", TW_CONFIG_DEFAULT, &err) != TW_OK ||
        tw_config_set(t.cfg, "mrecon.queue_capacity", "0", TW_CONFIG_SET, &err) != TW_OK ||
        tw_config_set(t.cfg, "edt.pba_m1", "0", TW_CONFIG_SET, &err) != TW_OK ||
        tw_config_set(t.cfg, "edt.pba_m2", "0", TW_CONFIG_SET, &err) != TW_OK ||
        tw_config_set(t.cfg, "edt.pba_m3", "0", TW_CONFIG_SET, &err) != TW_OK) {
        cli_error("%s", err.message);
        rc = CLI_FAIL;
        goto out;
    }
    if ((rc = ensure_runtime(&t)) != CLI_OK)
        goto out;
    {
        tw_topology_info topo;

        t.has_gpu = force_params ||
                    (tw_runtime_get_topology(t.rt, &topo) == TW_OK && topo.n_gpus > 0);
    }
    t.t_start = now_s();
    if (!t.quiet)
        fprintf(stderr, "%s: writing the %lldx%lld sample in %s\n", cli_prog, (long long)t.W,
                (long long)t.H, getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR")
                                                                      : "/tmp");
    if ((rc = make_inputs(&t)) != CLI_OK)
        goto out;
    if (tune_sig) {
        rc = interrupted_rc();
        goto out;
    }
    for (int op = 0, left = n_ops; op < N_OPS; op++) {
        double end, share;
        bool params = t.has_gpu && (op == OP_MRECON || op == OP_EDT);

        if (!t.ops[op])
            continue;
        t.tiles[op].best = -1;
        share = (t.t_start + t.limit_s - now_s()) / left--;
        end = now_s() + share;
        if ((rc = tile_sweep(&t, op, params ? now_s() + share / 2 : end)) != CLI_OK)
            goto out;
        if (params && t.tiles[op].best >= 0) {
            rc = op == OP_MRECON ? qcap_sweep(&t, end) : pba_sweep(&t, end);
            if (rc != CLI_OK)
                goto out;
        }
    }
    if ((rc = ensure_runtime(&t)) != CLI_OK) /* the header describes its workers */
        goto out;
    if (!(f = fdopen(fd, "w"))) {
        cli_error("cannot write '%s' (%s)", out_path, strerror(errno));
        rc = CLI_FAIL;
        goto out;
    }
    fd = -1;
    if (write_ini(f, &t) != 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        cli_error("cannot write '%s' (%s)", out_path, strerror(errno));
        rc = CLI_FAIL;
        goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        cli_error("cannot write '%s' (%s)", out_path, strerror(errno));
        rc = CLI_FAIL;
        goto out;
    }
    f = NULL;
    /* mkstemp made it 0600; a config is nothing secret */
    chmod(tmp_path, 0644);
    if (rename(tmp_path, out_path) != 0) {
        cli_error("cannot rename '%s' to '%s' (%s)", tmp_path, out_path, strerror(errno));
        rc = CLI_FAIL;
        goto out;
    }
    free(tmp_path);
    tmp_path = NULL;
    if (!t.quiet) {
        fprintf(stderr, "%s: wrote %s in %.0f s:", cli_prog, out_path, now_s() - t.t_start);
        for (int op = 0; op < N_OPS; op++) {
            char dims[64];

            if (t.ops[op] && t.tiles[op].best >= 0)
                fprintf(stderr, " %s %s", op_names[op].section,
                        dims_str(dims, sizeof dims, &t.tiles[op]));
        }
        fputc('\n', stderr);
    }
out:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (tmp_path) {
        unlink(tmp_path);
        free(tmp_path);
    }
    tw_runtime_destroy(t.rt);
    tw_config_destroy(t.cfg);
    remove_dir(t.dir);
    free(t.dir);
    free(t.sample);
    free(t.gray_out);
    free(t.img);
    free(t.marker);
    free(t.res);
    free(t.dist);
    if (handlers) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    cli_common_fini(&t.c);
    return rc;
}
