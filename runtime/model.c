/* SPDX-License-Identifier: MIT */
/* tilewave: per task kind and device cost models from observed run times (for the policies). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

/*
 * A model is the time per unit of work of one task kind on one device type, a unit being a
 * pixel of the task's tiles (one unit for a task without tiles). It keeps the last
 * TWI_MODEL_SAMPLES observations and answers with their median, so a few outliers (a page
 * fault storm, a preempted core, the first run's allocations) move nothing; below
 * TWI_MODEL_MIN_SAMPLES the model says "unknown" and the policies fall back to FCFS order.
 * The median is recomputed when a sample arrives (once per task, outside the scheduler lock),
 * so the scheduler's lookups are a search over a few dozen entries.
 *
 * Models live in memory for the runtime's life. (Storing them on disk, contents features and
 * `tilewave devices --models` are the next steps of issue 7.)
 */

#define TWI_MODEL_SAMPLES 32
#define TWI_MODEL_MIN_SAMPLES 3

typedef struct model {
    const tw_task_kind *kind;
    unsigned dev;
    double s[TWI_MODEL_SAMPLES]; /* seconds per unit, a ring */
    int n, next;
    double median;               /* of s[0..n), valid when n >= TWI_MODEL_MIN_SAMPLES */
} model;

struct twi_models {
    pthread_mutex_t lock;
    model *m;
    int n, cap;
};

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
    *out = ms;
    return TW_OK;
}

void
twi_models_destroy(twi_models *ms)
{
    if (!ms)
        return;
    pthread_mutex_destroy(&ms->lock);
    free(ms->m);
    free(ms);
}

int64_t
twi_task_units(const tw_task *t)
{
    int64_t u = 0;

    for (int i = 0; i < t->n_tiles; i++)
        u += (int64_t)t->tiles[i]->w * t->tiles[i]->h;
    return u > 0 ? u : 1;
}

static model *
find(twi_models *ms, const tw_task_kind *kind, unsigned dev)
{
    for (int i = 0; i < ms->n; i++)
        if (ms->m[i].kind == kind && ms->m[i].dev == dev)
            return &ms->m[i];
    return NULL;
}

static double
median_of(const double *v, int n)
{
    double a[TWI_MODEL_SAMPLES];

    memcpy(a, v, (size_t)n * sizeof *a);
    for (int i = 1; i < n; i++) /* insertion sort: n <= 32 */
        for (int j = i; j > 0 && a[j - 1] > a[j]; j--) {
            double x = a[j];

            a[j] = a[j - 1];
            a[j - 1] = x;
        }
    return n % 2 ? a[n / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
}

void
twi_model_record(twi_models *ms, const tw_task_kind *kind, unsigned dev, int64_t units,
                 double seconds)
{
    model *m;

    if (!ms || units < 1 || !(seconds >= 0))
        return;
    pthread_mutex_lock(&ms->lock);
    if (!(m = find(ms, kind, dev))) {
        if (ms->n == ms->cap) {
            int cap = ms->cap ? 2 * ms->cap : 16;
            model *nm = realloc(ms->m, (size_t)cap * sizeof *nm);

            if (!nm)
                goto out; /* the sample is lost, nothing else */
            ms->m = nm;
            ms->cap = cap;
        }
        m = &ms->m[ms->n++];
        memset(m, 0, sizeof *m);
        m->kind = kind;
        m->dev = dev;
    }
    m->s[m->next] = seconds / (double)units;
    m->next = (m->next + 1) % TWI_MODEL_SAMPLES;
    if (m->n < TWI_MODEL_SAMPLES)
        m->n++;
    if (m->n >= TWI_MODEL_MIN_SAMPLES)
        m->median = median_of(m->s, m->n);
out:
    pthread_mutex_unlock(&ms->lock);
}

double
twi_model_estimate(twi_models *ms, const tw_task_kind *kind, unsigned dev, int64_t units)
{
    double e = -1.0;
    model *m;

    if (!ms)
        return -1.0;
    pthread_mutex_lock(&ms->lock);
    if ((m = find(ms, kind, dev)) && m->n >= TWI_MODEL_MIN_SAMPLES)
        e = m->median * (double)units;
    pthread_mutex_unlock(&ms->lock);
    return e;
}

double
twi_model_speedup(twi_models *ms, const tw_task_kind *kind)
{
    double r = NAN;
    model *c, *g;

    if (!ms)
        return NAN;
    pthread_mutex_lock(&ms->lock);
    c = find(ms, kind, TW_DEVICE_CPU);
    g = find(ms, kind, TW_DEVICE_CUDA);
    if (c && g && c->n >= TWI_MODEL_MIN_SAMPLES && g->n >= TWI_MODEL_MIN_SAMPLES)
        r = g->median > 0 ? c->median / g->median : INFINITY;
    pthread_mutex_unlock(&ms->lock);
    return r;
}
