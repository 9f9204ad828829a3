/* SPDX-License-Identifier: MIT */
/* tilewave: cost models per task kind, device, tile size and content, kept across runs. */
/* Why one file: the models file's reader and writer (about 500 lines) walk the interned names
 * and sample rings that only this file lays out; moving them out would publish those layouts
 * in a header for a single reader. Sections: buckets, interning,
 * statistics, the models object, tasks, the file, the runtime's models, public reading. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_core.h"

/*
 * A model is the time per unit of work of one task kind on one device, a unit being a pixel of
 * the task's tiles (one unit for a task without tiles). Models are keyed by
 *
 *   - the kind's name (files outlive the kind descriptors' addresses),
 *   - the device: its type and its name (the CPU model hwloc or /proc/cpuinfo reports, the GPU
 *     name CUDA reports), so a file copied to another machine never mixes its timings in,
 *   - a size bucket, floor(log2(units)): per-pixel cost is not constant in the tile size
 *     (launch and per-tile overheads, caches),
 *   - a content-feature bucket: the kind's `feature` hook maps a task to [0, 1] (e.g. the
 *     fraction of a reconstruction tile its initial wavefront covers); buckets are 0, then
 *     powers of 4: (0, 4^-8], (4^-8, 4^-7], ..., (1/16, 1/4], (1/4, 1], plus "no feature"
 *     for kinds without the hook or tasks where it returns < 0. Coarse on purpose: a bucket
 *     needs several runs before it says anything.
 *
 * Each model keeps its last TWI_MODEL_SAMPLES observations in a ring and answers with their
 * median. Run times are skewed with a heavy right tail (a page-fault storm, a preempted core,
 * the first run's allocations): the median ignores up to half the samples being
 * outliers, where a mean moves with a single one and a trimmed mean needs a trim fraction
 * chosen against an unknown contamination. Below TWI_MODEL_MIN_SAMPLES a model says "unknown".
 *
 * An estimate looks up the exact bucket; when it has fewer than TWI_MODEL_MIN_SAMPLES samples,
 * the same kind and device at the nearest size bucket with enough samples (any feature: the
 * median of the feature buckets' medians weighted by their sample counts; per unit, so scaled
 * by the units asked for), the larger bucket on a tie; else unknown. Medians are recomputed
 * when a sample arrives (on the worker, outside the scheduler lock), so the lookups the policy
 * makes under the scheduler lock are one hash probe and a short scan.
 *
 * On disk (runtime.models): a tab-separated text file with a version line, one line per model
 * with its samples (oldest first) in ms per megapixel. It is read when the runtime starts and
 * written when it ends, merged with what the file holds by then (another process may have
 * saved meanwhile): a model the run added samples to gets its new samples appended to the
 * file's ring, others keep the file's version. The file is written to a private .part name and
 * renamed, so readers see the old or the new file, never half of one; two processes ending at
 * the same moment may lose one's new samples (the later rename wins), never the file.
 */

#define SIZE_BUCKETS 63 /* floor(log2(units)) for units in [1, 2^63) */
#define FEAT_BUCKETS 11 /* "-", "0", 1/65536, 1/16384, ..., 1/4, 1 */
#define FEAT_NONE 0
#define FEAT_ZERO 1
#define LINE_MAX_LEN 8192
#define MODELS_VERSION_LINE "# tilewave cost models, version 1"
#define MODELS_COLUMNS "kind\tdevice\tdevice_name\tsize_log2\tfeature\tsamples" \
                       "\tmedian_ms_per_mpix\tmad_ms_per_mpix\tms_per_mpix_oldest_first"

typedef struct model {
    double s[TWI_MODEL_SAMPLES]; /* seconds per unit, a ring */
    double sorted[TWI_MODEL_SAMPLES]; /* the same n samples in increasing order */
    int n, next;
    int fresh;                   /* samples added since the file was read (saved by merging) */
    double median;               /* of the n samples (n >= 1) */
} model;

/* One kind on one device. */
typedef struct family {
    int kind, dev;               /* indices into kinds[] and devs[] */
    model *m[SIZE_BUCKETS][FEAT_BUCKETS];
    double any_median[SIZE_BUCKETS]; /* the size bucket, any feature (weighted median) */
    int any_n[SIZE_BUCKETS];         /* its samples over all feature buckets */
} family;

typedef struct device {
    tw_device_type type;
    char *name;
    bool keep;                   /* saved to the file (not the "no GPU" placeholder) */
} device;

/* (kind descriptor, device) -> family; f == NULL caches "no such family yet". */
typedef struct slot {
    const tw_task_kind *k;       /* NULL: empty */
    int dev;
    family *f;
} slot;

struct twi_models {
    pthread_mutex_t lock;
    char **kinds;
    int n_kinds, cap_kinds;
    device *devs;
    int n_devs, cap_devs;
    family **fams;
    int n_fams, cap_fams;
    slot *tab;
    size_t tab_cap, tab_n;
    /* this machine's devices: the slots the runtime records into (-1 = none) */
    int local_cpu, local_gpu_ref, n_local_gpus;
    int *local_gpu;
    bool dirty;                  /* a sample arrived since the file was read */
    char *path;                  /* the runtime's file (runtime.models); NULL: memory only */
};

/* ---- buckets */

int
twi_model_size_bucket(int64_t units)
{
    if (units < 1)
        units = 1;
    return 63 - __builtin_clzll((unsigned long long)units);
}

int
twi_model_feature_bucket(double f)
{
    int b = FEAT_BUCKETS - 1; /* (1/4, 1] */
    double top = 0.25;

    if (!(f >= 0)) /* negative or NaN: no feature */
        return FEAT_NONE;
    if (f == 0)
        return FEAT_ZERO;
    /* Powers of 4 are exact in binary, so the bucket edges compare exactly. */
    while (b > FEAT_ZERO + 1 && f <= top) {
        b--;
        top *= 0.25;
    }
    return b;
}

static const char *const feat_labels[FEAT_BUCKETS] = {
    "-", "0", "1/65536", "1/16384", "1/4096", "1/1024", "1/256", "1/64", "1/16", "1/4", "1"};

/* ---- interning */

static int
kind_index(twi_models *ms, const char *name, bool add)
{
    for (int i = 0; i < ms->n_kinds; i++)
        if (strcmp(ms->kinds[i], name) == 0)
            return i;
    if (!add)
        return -1;
    if (ms->n_kinds == ms->cap_kinds) {
        int cap = ms->cap_kinds ? 2 * ms->cap_kinds : 16;
        char **nk = realloc(ms->kinds, (size_t)cap * sizeof *nk);

        if (!nk)
            return -1;
        ms->kinds = nk;
        ms->cap_kinds = cap;
    }
    if (!(ms->kinds[ms->n_kinds] = strdup(name)))
        return -1;
    return ms->n_kinds++;
}

static int
device_index(twi_models *ms, tw_device_type type, const char *name, bool keep)
{
    for (int i = 0; i < ms->n_devs; i++)
        if (ms->devs[i].type == type && strcmp(ms->devs[i].name, name) == 0)
            return i;
    if (ms->n_devs == ms->cap_devs) {
        int cap = ms->cap_devs ? 2 * ms->cap_devs : 8;
        device *nd = realloc(ms->devs, (size_t)cap * sizeof *nd);

        if (!nd)
            return -1;
        ms->devs = nd;
        ms->cap_devs = cap;
    }
    if (!(ms->devs[ms->n_devs].name = strdup(name)))
        return -1;
    ms->devs[ms->n_devs].type = type;
    ms->devs[ms->n_devs].keep = keep;
    return ms->n_devs++;
}

int
twi_models_device(twi_models *ms, tw_device_type type, const char *name)
{
    int d;

    if (!ms || !name || (type != TW_DEVICE_CPU && type != TW_DEVICE_CUDA))
        return -1;
    pthread_mutex_lock(&ms->lock);
    d = device_index(ms, type, name, true);
    pthread_mutex_unlock(&ms->lock);
    return d;
}

/* The family of kind index k on device d, created when `add`. */
static family *
family_by_index(twi_models *ms, int k, int d, bool add)
{
    family *f;

    for (int i = 0; i < ms->n_fams; i++)
        if (ms->fams[i]->kind == k && ms->fams[i]->dev == d)
            return ms->fams[i];
    if (!add)
        return NULL;
    if (ms->n_fams == ms->cap_fams) {
        int cap = ms->cap_fams ? 2 * ms->cap_fams : 16;
        family **nf = realloc(ms->fams, (size_t)cap * sizeof *nf);

        if (!nf)
            return NULL;
        ms->fams = nf;
        ms->cap_fams = cap;
    }
    if (!(f = calloc(1, sizeof *f)))
        return NULL;
    f->kind = k;
    f->dev = d;
    ms->fams[ms->n_fams++] = f;
    return f;
}

static size_t
slot_hash(const tw_task_kind *k, int dev)
{
    uint64_t h = ((uint64_t)(uintptr_t)k >> 3) ^ ((uint64_t)(unsigned)dev << 56);

    return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20);
}

static slot *
slot_find(twi_models *ms, const tw_task_kind *k, int dev)
{
    size_t mask = ms->tab_cap - 1, i;

    if (!ms->tab_cap)
        return NULL;
    for (i = slot_hash(k, dev) & mask; ms->tab[i].k; i = (i + 1) & mask)
        if (ms->tab[i].k == k && ms->tab[i].dev == dev)
            return &ms->tab[i];
    return NULL;
}

static slot *
slot_add(twi_models *ms, const tw_task_kind *k, int dev, family *f)
{
    size_t mask, i;

    if (2 * (ms->tab_n + 1) > ms->tab_cap) {
        size_t cap = ms->tab_cap ? 2 * ms->tab_cap : 64;
        slot *old = ms->tab, *nt = calloc(cap, sizeof *nt);
        size_t old_cap = ms->tab_cap;

        if (!nt)
            return NULL;
        ms->tab = nt;
        ms->tab_cap = cap;
        for (size_t j = 0; j < old_cap; j++) {
            if (!old[j].k)
                continue;
            for (i = slot_hash(old[j].k, old[j].dev) & (cap - 1); nt[i].k; i = (i + 1) & (cap - 1))
                ;
            nt[i] = old[j];
        }
        free(old);
    }
    mask = ms->tab_cap - 1;
    for (i = slot_hash(k, dev) & mask; ms->tab[i].k; i = (i + 1) & mask)
        ;
    ms->tab[i].k = k;
    ms->tab[i].dev = dev;
    ms->tab[i].f = f;
    ms->tab_n++;
    return &ms->tab[i];
}

/* The family of kind k on device dev by the kind's address (one probe once seen), else by its
 * name; with `add`, created when missing. NULL: none (or out of memory). Under ms->lock. */
static family *
family_of(twi_models *ms, const tw_task_kind *k, int dev, bool add)
{
    slot *s = slot_find(ms, k, dev);
    family *f;
    int ki;

    if (s && (s->f || !add))
        return s->f;
    ki = kind_index(ms, k->name, add);
    f = ki < 0 ? NULL : family_by_index(ms, ki, dev, add);
    if (s) {
        s->f = f;
    } else if (!slot_add(ms, k, dev, f)) {
        return f;
    }
    if (f && add) {
        /* Other descriptors of the same name may have cached "none" for this device. */
        for (size_t i = 0; i < ms->tab_cap; i++)
            if (ms->tab[i].k && !ms->tab[i].f && ms->tab[i].dev == dev &&
                strcmp(ms->tab[i].k->name, k->name) == 0)
                ms->tab[i].f = f;
    }
    return f;
}

/* ---- statistics */

static void
sort_doubles(double *a, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: n <= 32 */
        for (int j = i; j > 0 && a[j - 1] > a[j]; j--) {
            double x = a[j];

            a[j] = a[j - 1];
            a[j - 1] = x;
        }
}

static double
median_of(const double *v, int n)
{
    double a[TWI_MODEL_SAMPLES];

    memcpy(a, v, (size_t)n * sizeof *a);
    sort_doubles(a, n);
    return n % 2 ? a[n / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
}

/* Median absolute deviation from the median. */
static double
mad_of(const model *m)
{
    double d[TWI_MODEL_SAMPLES];

    for (int i = 0; i < m->n; i++)
        d[i] = fabs(m->s[i] - m->median);
    return median_of(d, m->n);
}

/* Sample i (0 = oldest) of m. */
static double
sample_at(const model *m, int i)
{
    return m->s[(m->next - m->n + i + 2 * TWI_MODEL_SAMPLES) % TWI_MODEL_SAMPLES];
}

/* Size bucket sb of f, any feature: the median of the feature buckets' medians weighted by
 * their sample counts. */
static void
update_any(family *f, int sb)
{
    double v[FEAT_BUCKETS];
    int w[FEAT_BUCKETS], n = 0, total = 0, acc = 0;

    for (int b = 0; b < FEAT_BUCKETS; b++) {
        model *m = f->m[sb][b];
        int j;

        if (!m || m->n == 0)
            continue;
        for (j = n; j > 0 && v[j - 1] > m->median; j--) {
            v[j] = v[j - 1];
            w[j] = w[j - 1];
        }
        v[j] = m->median;
        w[j] = m->n;
        n++;
        total += m->n;
    }
    f->any_n[sb] = total;
    for (int i = 0; i < n; i++) {
        acc += w[i];
        if (2 * acc >= total) {
            f->any_median[sb] = v[i];
            return;
        }
    }
}

/* First index of sorted[0..n) whose value is >= v. */
static int
lower_bound(const double *sorted, int n, double v)
{
    int lo = 0, hi = n;

    while (lo < hi) {
        int mid = (lo + hi) / 2;

        if (sorted[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The median is kept current per sample (it runs once per task, on the worker): the sorted
 * copy trades the evicted sample for the new one with two binary searches and moves of at most
 * 32 doubles, where sorting the ring again would take hundreds of comparisons. */
static void
model_push(family *f, int sb, int fb, double v, bool fresh)
{
    model *m = f->m[sb][fb];
    int i;

    if (m->n == TWI_MODEL_SAMPLES) { /* the oldest sample leaves the sorted copy */
        i = lower_bound(m->sorted, m->n, m->s[m->next]);
        memmove(&m->sorted[i], &m->sorted[i + 1], (size_t)(m->n - i - 1) * sizeof(double));
        m->n--;
    }
    i = lower_bound(m->sorted, m->n, v);
    memmove(&m->sorted[i + 1], &m->sorted[i], (size_t)(m->n - i) * sizeof(double));
    m->sorted[i] = v;
    m->n++;
    m->s[m->next] = v;
    m->next = (m->next + 1) % TWI_MODEL_SAMPLES;
    if (fresh && m->fresh < TWI_MODEL_SAMPLES)
        m->fresh++;
    m->median = m->n % 2 ? m->sorted[m->n / 2]
                         : 0.5 * (m->sorted[m->n / 2 - 1] + m->sorted[m->n / 2]);
    update_any(f, sb);
}

/* Add a sample (seconds per unit) to bucket (sb, fb) of f; false when out of memory. */
static bool
add_sample(family *f, int sb, int fb, double v, bool fresh)
{
    if (!f->m[sb][fb] && !(f->m[sb][fb] = calloc(1, sizeof(model))))
        return false;
    model_push(f, sb, fb, v, fresh);
    return true;
}

/* Seconds per unit of bucket (sb, fb) of f, with the fallback of the top-of-file comment;
 * -1 when unknown. */
static double
per_unit(const family *f, int sb, int fb)
{
    const model *m;

    if (!f)
        return -1.0;
    if ((m = f->m[sb][fb]) && m->n >= TWI_MODEL_MIN_SAMPLES)
        return m->median;
    for (int d = 0; d < SIZE_BUCKETS; d++) {
        int hi = sb + d, lo = sb - d;

        if (hi < SIZE_BUCKETS && f->any_n[hi] >= TWI_MODEL_MIN_SAMPLES)
            return f->any_median[hi];
        if (lo >= 0 && f->any_n[lo] >= TWI_MODEL_MIN_SAMPLES)
            return f->any_median[lo];
        if (hi >= SIZE_BUCKETS && lo < 0)
            break;
    }
    return -1.0;
}

/* ---- the models object */

tw_status
twi_models_create(twi_models **out)
{
    twi_models *ms = calloc(1, sizeof *ms);

    if (!ms)
        return TW_E_NOMEM;
    if (pthread_mutex_init(&ms->lock, NULL) != 0) {
        free(ms);
        return TW_E_NOMEM;
    }
    ms->local_cpu = ms->local_gpu_ref = -1;
    *out = ms;
    return TW_OK;
}

void
twi_models_destroy(twi_models *ms)
{
    if (!ms)
        return;
    pthread_mutex_destroy(&ms->lock);
    for (int i = 0; i < ms->n_fams; i++) {
        for (int sb = 0; sb < SIZE_BUCKETS; sb++)
            for (int fb = 0; fb < FEAT_BUCKETS; fb++)
                free(ms->fams[i]->m[sb][fb]);
        free(ms->fams[i]);
    }
    for (int i = 0; i < ms->n_kinds; i++)
        free(ms->kinds[i]);
    for (int i = 0; i < ms->n_devs; i++)
        free(ms->devs[i].name);
    free(ms->fams);
    free(ms->kinds);
    free(ms->devs);
    free(ms->tab);
    free(ms->local_gpu);
    free(ms->path);
    free(ms);
}

tw_status
twi_models_set_local(twi_models *ms, const char *cpu_name, int n_gpus,
                     const char *const *gpu_names)
{
    tw_status st = TW_OK;

    pthread_mutex_lock(&ms->lock);
    free(ms->local_gpu);
    ms->local_gpu = NULL;
    ms->n_local_gpus = 0;
    if ((ms->local_cpu = device_index(ms, TW_DEVICE_CPU, cpu_name, true)) < 0) {
        st = TW_E_NOMEM;
        goto out;
    }
    if (n_gpus > 0) {
        if (!(ms->local_gpu = calloc((size_t)n_gpus, sizeof *ms->local_gpu))) {
            st = TW_E_NOMEM;
            goto out;
        }
        for (int g = 0; g < n_gpus; g++)
            if ((ms->local_gpu[g] = device_index(ms, TW_DEVICE_CUDA, gpu_names[g], true)) < 0) {
                st = TW_E_NOMEM;
                goto out;
            }
        ms->n_local_gpus = n_gpus;
        ms->local_gpu_ref = ms->local_gpu[0];
    } else {
        /* A placeholder nothing records into in real runs (so pats sees no speedups), but which
         * a test may fill to see what CPU workers pick; never saved. */
        ms->local_gpu_ref = device_index(ms, TW_DEVICE_CUDA, "(no GPU)", false);
        if (ms->local_gpu_ref < 0)
            st = TW_E_NOMEM;
    }
out:
    pthread_mutex_unlock(&ms->lock);
    return st;
}

int
twi_models_local(const twi_models *ms, tw_device_type type, int gpu)
{
    if (!ms)
        return -1;
    if (type == TW_DEVICE_CPU)
        return ms->local_cpu;
    if (gpu >= 0 && gpu < ms->n_local_gpus)
        return ms->local_gpu[gpu];
    return ms->local_gpu_ref;
}

int64_t
twi_task_units(const tw_task *t)
{
    int64_t u = 0;

    for (int i = 0; i < t->n_tiles; i++)
        u += (int64_t)t->tiles[i]->w * t->tiles[i]->h;
    return u > 0 ? u : 1;
}

static void
record_b(twi_models *ms, const tw_task_kind *kind, int dev, int64_t units, int fb,
         double seconds)
{
    family *f;

    if (!ms || !kind || !kind->name || dev < 0 || units < 1 || !(seconds >= 0) ||
        !isfinite(seconds))
        return;
    pthread_mutex_lock(&ms->lock);
    /* On out of memory the sample is lost, nothing else. */
    if (dev < ms->n_devs && (f = family_of(ms, kind, dev, true)) &&
        add_sample(f, twi_model_size_bucket(units), fb, seconds / (double)units, true))
        ms->dirty = true;
    pthread_mutex_unlock(&ms->lock);
}

void
twi_model_record(twi_models *ms, const tw_task_kind *kind, int dev, int64_t units,
                 double feature, double seconds)
{
    record_b(ms, kind, dev, units, twi_model_feature_bucket(feature), seconds);
}

double
twi_model_estimate(twi_models *ms, const tw_task_kind *kind, int dev, int64_t units,
                   double feature)
{
    double e;

    if (!ms || !kind || dev < 0 || units < 1)
        return -1.0;
    pthread_mutex_lock(&ms->lock);
    e = per_unit(family_of(ms, kind, dev, false), twi_model_size_bucket(units),
                 twi_model_feature_bucket(feature));
    pthread_mutex_unlock(&ms->lock);
    return e < 0 ? -1.0 : e * (double)units;
}

double
twi_model_speedup(twi_models *ms, const tw_task_kind *kind, int cpu_dev, int gpu_dev, int sb,
                  int fb)
{
    double c, g;

    if (!ms || !kind || cpu_dev < 0 || gpu_dev < 0 || sb < 0 || sb >= SIZE_BUCKETS || fb < 0 ||
        fb >= FEAT_BUCKETS)
        return NAN;
    pthread_mutex_lock(&ms->lock);
    c = per_unit(family_of(ms, kind, cpu_dev, false), sb, fb);
    g = per_unit(family_of(ms, kind, gpu_dev, false), sb, fb);
    pthread_mutex_unlock(&ms->lock);
    if (c < 0 || g < 0)
        return NAN;
    return g > 0 ? c / g : INFINITY;
}

/* ---- what a runtime can do (the partition of distributed jobs, ops/dist_mpi.c) */

double
twi_runtime_rate(tw_runtime *rt, const tw_task_kind *kind, int64_t units)
{
    double rate = 0.0;

    if (!rt || !rt->models || !kind || units < 1)
        return -1.0;
    for (int i = 0; i < rt->n_workers; i++) {
        const tw_worker *w = &rt->workers[i];
        int g = w->g ? (int)(w->g - rt->gpus) : -1;
        double s;

        if (!(kind->devices & w->runs))
            continue;
        /* A device the kind never ran on (EDT bands stay on GPUs when there are any) adds
         * nothing rather than making the whole rate unknown. */
        s = twi_model_estimate(rt->models, kind, twi_models_local(rt->models, w->type, g),
                               units, -1.0);
        if (s > 0)
            rate += (double)units / s;
    }
    return rate > 0 ? rate : -1.0;
}

/* ---- tasks */

void
twi_model_task_key(tw_task *t)
{
    double f = -1.0;

    if (t->model_key >= 0)
        return;
    if (t->kind->feature)
        f = t->kind->feature(t->arg);
    t->model_key = (int16_t)(twi_model_size_bucket(twi_task_units(t)) * FEAT_BUCKETS +
                             twi_model_feature_bucket(f));
}

int
twi_model_key_size(const tw_task *t)
{
    return t->model_key < 0 ? -1 : t->model_key / FEAT_BUCKETS;
}

int
twi_model_key_feature(const tw_task *t)
{
    return t->model_key < 0 ? -1 : t->model_key % FEAT_BUCKETS;
}

void
twi_model_task_ran(tw_worker *w, tw_task *t, unsigned variant, double seconds)
{
    twi_models *ms = w->rt->models;
    int g = w->g ? (int)(w->g - w->rt->gpus) : -1;

    twi_model_task_key(t);
    record_b(ms, t->kind, twi_models_local(ms, (tw_device_type)variant, g), twi_task_units(t),
             twi_model_key_feature(t), seconds);
}

/* ---- the file */

/* Where runtime.models = `v` puts the file: "" for none (also auto without a home). */
static tw_status
resolve_path(const char *v, char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int k;

    if (!v || strcmp(v, "none") == 0 || !*v)
        k = snprintf(buf, n, "%s", "");
    else if (strcmp(v, "auto") != 0)
        k = snprintf(buf, n, "%s", v);
    else if (xdg && xdg[0] == '/') /* the XDG spec ignores relative paths */
        k = snprintf(buf, n, "%s/tilewave/models.tsv", xdg);
    else if (home && *home)
        k = snprintf(buf, n, "%s/.cache/tilewave/models.tsv", home);
    else
        k = snprintf(buf, n, "%s", "");
    return k < 0 || (size_t)k >= n ? TW_E_INVALID : TW_OK;
}

/* Split s at tabs into at most max fields (in place); returns the count. */
static int
split_tabs(char *s, char **f, int max)
{
    int n = 0;

    for (;;) {
        char *e = strchr(s, '\t');

        if (n == max)
            return max + 1;
        f[n++] = s;
        if (!e)
            return n;
        *e = '\0';
        s = e + 1;
    }
}

static bool
clean_text(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20)
            return false;
    return true;
}

/* Parse one model line into ms; false when malformed. */
static bool
parse_line(twi_models *ms, char *line)
{
    char *f[9], *p;
    double v[TWI_MODEL_SAMPLES], x;
    int64_t sb, ns;
    int n = 0, fb = -1, k, d;
    tw_device_type type;
    family *fam;

    if (split_tabs(line, f, 9) != 9 || !clean_text(f[0]) || !clean_text(f[2]))
        return false;
    if (strcmp(f[1], "cpu") == 0)
        type = TW_DEVICE_CPU;
    else if (strcmp(f[1], "cuda") == 0)
        type = TW_DEVICE_CUDA;
    else
        return false;
    if (twi_parse_i64(f[3], 0, SIZE_BUCKETS - 1, &sb) != TW_OK ||
        twi_parse_i64(f[5], 1, TWI_MODEL_SAMPLES, &ns) != TW_OK ||
        twi_parse_f64(f[6], &x) != TW_OK || twi_parse_f64(f[7], &x) != TW_OK)
        return false;
    for (int b = 0; b < FEAT_BUCKETS; b++)
        if (strcmp(f[4], feat_labels[b]) == 0)
            fb = b;
    if (fb < 0)
        return false;
    for (p = f[8];;) {
        char *e = strchr(p, ',');

        if (e)
            *e = '\0';
        if (n == TWI_MODEL_SAMPLES || twi_parse_f64(p, &x) != TW_OK || !(x >= 0) || !isfinite(x))
            return false;
        v[n++] = x * 1e-9; /* ms per megapixel -> seconds per pixel */
        if (!e)
            break;
        p = e + 1;
    }
    if (n != ns)
        return false;
    /* Out of memory here drops the line like a malformed one: the file is advisory. */
    if ((k = kind_index(ms, f[0], true)) < 0 || (d = device_index(ms, type, f[2], true)) < 0 ||
        !(fam = family_by_index(ms, k, d, true)))
        return false;
    for (int i = 0; i < n; i++)
        if (!add_sample(fam, (int)sb, fb, v[i], false))
            return false;
    return true;
}

/* Read `path` into ms (under no lock: ms is not shared yet, or the caller holds it).
 * TW_OK also for a missing file (*found false); TW_E_FORMAT for a file without the version
 * line; TW_E_IO when it cannot be read. Malformed lines are skipped, counted in *bad (the first
 * one's number in *first_bad). */
static tw_status
read_file(twi_models *ms, const char *path, bool *found, int *bad, int *first_bad, int *err_no)
{
    char *line = NULL;
    FILE *fp = NULL;
    tw_status st = TW_OK;
    int lineno = 0;

    *found = false;
    *bad = *first_bad = 0;
    *err_no = 0;
    if (!(fp = fopen(path, "r"))) {
        *err_no = errno;
        return errno == ENOENT || errno == ENOTDIR ? TW_OK : TW_E_IO; /* missing */
    }
    *found = true;
    if (!(line = malloc(LINE_MAX_LEN))) {
        st = TW_E_NOMEM;
        goto out;
    }
    while (fgets(line, LINE_MAX_LEN, fp)) {
        size_t len = strlen(line);
        bool whole = len > 0 && line[len - 1] == '\n';

        lineno++;
        if (!whole && !feof(fp)) { /* longer than any line we write: skip the rest */
            int c;

            while ((c = fgetc(fp)) != EOF && c != '\n')
                ;
            if (lineno == 1) {
                st = TW_E_FORMAT;
                goto out;
            }
            if (!(*bad)++)
                *first_bad = lineno;
            continue;
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (lineno == 1) {
            if (strcmp(line, MODELS_VERSION_LINE) != 0) {
                st = TW_E_FORMAT;
                goto out;
            }
            continue;
        }
        if (line[0] == '#' || line[0] == '\0' || strcmp(line, MODELS_COLUMNS) == 0)
            continue;
        if (!parse_line(ms, line) && !(*bad)++)
            *first_bad = lineno;
    }
    if (ferror(fp)) { /* an empty file is fine: nothing to lose by writing it */
        *err_no = errno;
        st = TW_E_IO;
    }
out:
    free(line);
    fclose(fp);
    return st;
}

/* Read `path` into ms with the warnings of a runtime (never fatal). Returns false when the
 * file exists but is not a model file or cannot be read: then it must not be overwritten. */
static bool
load_warn(twi_models *ms, const char *path)
{
    bool found;
    int bad, first_bad, e;
    tw_status st = read_file(ms, path, &found, &bad, &first_bad, &e);

    if (st == TW_E_FORMAT)
        TW_WARN("runtime", "runtime: '%s' is not a tilewave cost model file (its first line is "
                "not '%s'); models are not read from it nor saved to it", path,
                MODELS_VERSION_LINE);
    else if (st == TW_E_IO)
        TW_WARN("runtime", "runtime: cannot read the cost models in '%s' (%s)", path,
                strerror(e));
    else if (st != TW_OK)
        TW_WARN("runtime", "runtime: cannot read the cost models in '%s' (%s)", path,
                tw_status_string(st));
    else if (bad)
        TW_WARN("runtime", "runtime: skipped %d malformed line%s of the cost model file '%s' "
                "(the first is line %d)", bad, bad == 1 ? "" : "s", path, first_bad);
    return st == TW_OK;
}

/* mkdir -p of the directory part of path. */
static void
make_parent_dirs(const char *path)
{
    char *p = strdup(path), *s;

    if (!p)
        return;
    for (s = p + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        (void)mkdir(p, 0755); /* EEXIST is the usual answer; fopen reports real failures */
        *s = '/';
    }
    free(p);
}

static int
cmp_family(const void *a, const void *b, void *user)
{
    const family *x = *(family *const *)a, *y = *(family *const *)b;
    const twi_models *ms = user;
    const device *dx = &ms->devs[x->dev], *dy = &ms->devs[y->dev];
    int c = strcmp(ms->kinds[x->kind], ms->kinds[y->kind]);

    if (c)
        return c;
    if (dx->type != dy->type)
        return dx->type < dy->type ? -1 : 1;
    return strcmp(dx->name, dy->name);
}

static bool
put(FILE *fp, const char *s)
{
    return fputs(s, fp) >= 0;
}

/* Write every kept model of ms to fp, sorted by kind, device, size and feature. */
static bool
write_models(twi_models *ms, FILE *fp)
{
    family **order = NULL;
    char buf[256];
    bool ok = put(fp, MODELS_VERSION_LINE "\n") &&
              put(fp, "# Seconds per pixel of each task kind on each device, per tile size "
                      "(log2 of the pixels of the task's tiles) and content-feature bucket, "
                      "written by tilewave\n"
                      "# (runtime.models). Times are in ms per megapixel, the last 32 runs "
                      "oldest first; 'tilewave devices --models' shows them.\n") &&
              put(fp, MODELS_COLUMNS "\n");

    if (ms->n_fams && !(order = malloc((size_t)ms->n_fams * sizeof *order)))
        return false;
    if (order) {
        memcpy(order, ms->fams, (size_t)ms->n_fams * sizeof *order);
        qsort_r(order, (size_t)ms->n_fams, sizeof *order, cmp_family, ms);
    }
    for (int i = 0; i < ms->n_fams && ok; i++) {
        const family *f = order[i];
        const device *d = &ms->devs[f->dev];

        if (!d->keep)
            continue;
        for (int sb = 0; sb < SIZE_BUCKETS && ok; sb++) {
            for (int fb = 0; fb < FEAT_BUCKETS && ok; fb++) {
                const model *m = f->m[sb][fb];

                if (!m || m->n == 0)
                    continue;
                ok = put(fp, ms->kinds[f->kind]) && put(fp, "\t") &&
                     put(fp, d->type == TW_DEVICE_CUDA ? "cuda" : "cpu") && put(fp, "\t") &&
                     put(fp, d->name);
                snprintf(buf, sizeof buf, "\t%d\t%s\t%d\t%.6g\t%.6g\t", sb, feat_labels[fb],
                         m->n, m->median * 1e9, mad_of(m) * 1e9);
                ok = ok && put(fp, buf);
                for (int j = 0; j < m->n && ok; j++) {
                    snprintf(buf, sizeof buf, "%s%.6g", j ? "," : "", sample_at(m, j) * 1e9);
                    ok = put(fp, buf);
                }
                ok = ok && put(fp, "\n");
            }
        }
    }
    free(order);
    return ok;
}

/* Append the samples of src (the newest `fresh` ones when the file already has that model,
 * else all) to dst, which holds the file as it is now. */
static bool
merge_into(twi_models *dst, const twi_models *src)
{
    for (int i = 0; i < src->n_fams; i++) {
        const family *sf = src->fams[i];
        const device *sd = &src->devs[sf->dev];
        family *df = NULL;
        int k, d;

        if (!sd->keep)
            continue;
        for (int sb = 0; sb < SIZE_BUCKETS; sb++) {
            for (int fb = 0; fb < FEAT_BUCKETS; fb++) {
                const model *m = sf->m[sb][fb];
                int from;

                if (!m || m->n == 0)
                    continue;
                if (!df && ((k = kind_index(dst, src->kinds[sf->kind], true)) < 0 ||
                            (d = device_index(dst, sd->type, sd->name, true)) < 0 ||
                            !(df = family_by_index(dst, k, d, true))))
                    return false;
                if (df->m[sb][fb] && m->fresh == 0)
                    continue;
                from = df->m[sb][fb] ? m->n - (m->fresh < m->n ? m->fresh : m->n) : 0;
                for (int j = from; j < m->n; j++)
                    if (!add_sample(df, sb, fb, sample_at(m, j), false))
                        return false;
            }
        }
    }
    return true;
}

static atomic_uint part_counter;

/* Merge ms into the file at path and replace it; false (errno set or 0) on failure. */
static bool
save_file(twi_models *ms, const char *path, bool *not_ours)
{
    twi_models *disk = NULL;
    char *part = NULL;
    FILE *fp = NULL;
    size_t n = strlen(path) + 48;
    bool ok = false, found;
    int bad, first_bad, e;
    tw_status st;

    *not_ours = false;
    if (twi_models_create(&disk) != TW_OK || !(part = malloc(n))) {
        errno = ENOMEM;
        goto out;
    }
    st = read_file(disk, path, &found, &bad, &first_bad, &e);
    if (st == TW_E_FORMAT || st == TW_E_IO) {
        /* Never replace what we cannot read: it may be someone's file. */
        *not_ours = st == TW_E_FORMAT;
        errno = e;
        goto out;
    }
    if (st != TW_OK || !merge_into(disk, ms)) {
        errno = ENOMEM;
        goto out;
    }
    /* A private name: two runtimes saving at once never write into the same .part. */
    snprintf(part, n, "%s.part-%d-%u", path, (int)getpid(),
             atomic_fetch_add(&part_counter, 1u));
    make_parent_dirs(path);
    if (!(fp = fopen(part, "w")))
        goto out;
    {
        /* "%.6g" in the C locale whatever LC_NUMERIC the program set: the file is shared. */
        locale_t prev = uselocale(twi_c_locale());

        ok = write_models(disk, fp);
        uselocale(prev);
    }
    e = errno;
    if (fclose(fp) != 0 && ok) {
        ok = false;
        e = errno;
    }
    fp = NULL;
    if (ok && rename(part, path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        unlink(part);
        errno = e;
    }
out:
    free(part);
    twi_models_destroy(disk);
    return ok;
}

/* ---- the runtime's models */

/* A device name goes into a TSV field: control characters (tabs) become spaces, trailing
 * spaces go. */
static void
sanitize(char *buf)
{
    size_t len;

    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    for (len = strlen(buf); len > 1 && buf[len - 1] == ' '; len--)
        buf[len - 1] = '\0';
}

/* This machine's CPU: hwloc's CPUModel of the first package, else /proc/cpuinfo's model
 * name. */
static void
cpu_name(hwloc_topology_t topo, char *buf, size_t n)
{
    hwloc_obj_t pkg = topo ? hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0) : NULL;
    const char *v = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
    char line[512];

    snprintf(buf, n, "%s", v && *v ? v : "");
    if (!*buf) {
        FILE *fp = fopen("/proc/cpuinfo", "r");

        while (fp && fgets(line, sizeof line, fp)) {
            char *c = strchr(line, ':');

            if (strncmp(line, "model name", 10) == 0 && c) {
                for (c++; *c == ' '; c++)
                    ;
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, n, "%s", c);
                break;
            }
        }
        if (fp)
            fclose(fp);
    }
    if (!*buf)
        snprintf(buf, n, "%s", "unknown CPU");
    sanitize(buf);
}

tw_status
twi_models_open(tw_runtime *rt, tw_error *err)
{
    tw_status st = TW_OK;
    const char *v = NULL;
    char (*names)[sizeof rt->gpus[0].info.name] = NULL;
    const char **name_ptrs = NULL;
    char path[4096], cpu[256];
    bool persist;

    rt->models = NULL;
    if (tw_config_get_string(rt->cfg, "runtime.models", &v) != TW_OK || !v)
        return twi_error_set(err, TW_E_INTERNAL, "runtime: config key runtime.models is missing");
    if (resolve_path(v, path, sizeof path) != TW_OK)
        return twi_error_set(err, TW_E_INVALID, "runtime: runtime.models path is too long (%zu "
                             "bytes)", strlen(v));
    persist = path[0] != '\0';
    /* Without a file, only a policy that uses them needs models; with one, every run calibrates
     * them (an fcfs run teaches pats). */
    if (!persist && !rt->sched.policy->uses_models)
        return TW_OK;
    if (twi_models_create(&rt->models) != TW_OK ||
        (rt->n_gpus > 0 && (!(names = calloc((size_t)rt->n_gpus, sizeof *names)) ||
                            !(name_ptrs = calloc((size_t)rt->n_gpus, sizeof *name_ptrs)))) ||
        (persist && !(rt->models->path = strdup(path)))) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    for (int g = 0; g < rt->n_gpus; g++) {
        snprintf(names[g], sizeof names[g], "%s", rt->gpus[g].info.name[0] ?
                 rt->gpus[g].info.name : "unknown GPU");
        sanitize(names[g]);
        name_ptrs[g] = names[g];
    }
    cpu_name(rt->topo.topo, cpu, sizeof cpu);
    if (twi_models_set_local(rt->models, cpu, rt->n_gpus, name_ptrs) != TW_OK) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    if (persist && !load_warn(rt->models, rt->models->path)) {
        free(rt->models->path); /* leave that file alone */
        rt->models->path = NULL;
    }
out:
    free(names);
    free(name_ptrs);
    return st;
}

void
twi_models_close(tw_runtime *rt)
{
    twi_models *ms = rt->models;
    bool not_ours;

    /* After the workers stopped: nothing records any more. */
    if (ms && ms->path && ms->dirty && !save_file(ms, ms->path, &not_ours)) {
        if (not_ours)
            TW_WARN("runtime", "runtime: '%s' is not a tilewave cost model file; the models of "
                    "this run were not saved", ms->path);
        else
            TW_WARN("runtime", "runtime: cannot save the cost models to '%s' (%s)", ms->path,
                    errno ? strerror(errno) : "unknown error");
    }
    twi_models_destroy(ms);
    rt->models = NULL;
}

/* ---- public: reading a model file */

tw_status
tw_models_get_path(const tw_config *cfg, char *buf, size_t n)
{
    const char *v = NULL;

    char path[4096];
    size_t len;

    if (!cfg || !buf || n == 0)
        return TW_E_INVALID;
    if (tw_config_get_string(cfg, "runtime.models", &v) != TW_OK)
        return TW_E_INVALID;
    /* Resolved aside, so that a buffer too small is left as it was (the error contract). */
    if (resolve_path(v, path, sizeof path) != TW_OK || (len = strlen(path)) >= n)
        return TW_E_INVALID;
    memcpy(buf, path, len + 1);
    return TW_OK;
}

tw_status
tw_models_read(const char *path, tw_model_info **out, size_t *n_out, tw_error *err)
{
    twi_models *ms = NULL;
    tw_model_info *v = NULL;
    tw_status st;
    size_t n = 0, k = 0;
    bool found;
    int bad, first_bad, e;

    if (!path || !out || !n_out)
        return twi_error_set(err, TW_E_INVALID, "models: no path or no place for the models");
    if (twi_models_create(&ms) != TW_OK)
        return twi_error_set(err, TW_E_NOMEM, "models: out of memory");
    st = read_file(ms, path, &found, &bad, &first_bad, &e);
    if (st == TW_E_FORMAT) {
        st = twi_error_set(err, st, "models: '%s' is not a tilewave cost model file (its first "
                           "line is not '%s')", path, MODELS_VERSION_LINE);
        goto out;
    }
    if (st == TW_E_IO) {
        st = twi_error_set(err, st, "models: cannot read '%s' (%s)", path, strerror(e));
        goto out;
    }
    if (st != TW_OK) {
        st = twi_error_set(err, st, "models: cannot read '%s' (out of memory)", path);
        goto out;
    }
    if (bad)
        TW_WARN("models", "models: skipped %d malformed line%s of '%s' (the first is line %d)",
                bad, bad == 1 ? "" : "s", path, first_bad);
    if (ms->n_fams > 1)
        qsort_r(ms->fams, (size_t)ms->n_fams, sizeof *ms->fams, cmp_family, ms);
    for (int i = 0; i < ms->n_fams; i++)
        for (int sb = 0; sb < SIZE_BUCKETS; sb++)
            for (int fb = 0; fb < FEAT_BUCKETS; fb++)
                n += ms->fams[i]->m[sb][fb] != NULL;
    if (n && !(v = calloc(n, sizeof *v))) {
        st = twi_error_set(err, TW_E_NOMEM, "models: out of memory");
        goto out;
    }
    for (int i = 0; i < ms->n_fams; i++) {
        const family *f = ms->fams[i];
        const device *d = &ms->devs[f->dev];

        for (int sb = 0; sb < SIZE_BUCKETS; sb++) {
            for (int fb = 0; fb < FEAT_BUCKETS; fb++) {
                const model *m = f->m[sb][fb];
                tw_model_info *o;

                if (!m)
                    continue;
                o = &v[k++];
                snprintf(o->kind, sizeof o->kind, "%s", ms->kinds[f->kind]);
                o->device = d->type;
                snprintf(o->device_name, sizeof o->device_name, "%s", d->name);
                o->size_log2 = sb;
                o->feature_max = fb == FEAT_NONE ? -1.0
                                 : fb == FEAT_ZERO ? 0.0
                                                   : ldexp(1.0, -2 * (FEAT_BUCKETS - 1 - fb));
                snprintf(o->feature, sizeof o->feature, "%s", feat_labels[fb]);
                o->samples = m->n;
                o->median_s_per_px = m->median;
                o->mad_s_per_px = mad_of(m);
            }
        }
    }
    *out = v;
    *n_out = k;
    v = NULL;
out:
    free(v);
    twi_models_destroy(ms);
    return st;
}

void
tw_models_free(tw_model_info *models)
{
    free(models);
}
