/* SPDX-License-Identifier: MIT */
/* tilewave: the "pats" scheduling policy: speedup priority ([Teodoro13], section 4.2). */
#include <math.h>
#include <stdlib.h>

#include "rt_core.h"

/*
 * PATS (performance-aware task selection, [Teodoro13]): a GPU worker takes the ready task with
 * the highest expected GPU speedup, a CPU worker the one with the lowest, so each device gets
 * the work it is relatively best at. The speedup of a task with both variants is its expected
 * time on this machine's CPU over its expected time on the GPU (the GPU worker's own; for a CPU
 * worker the runtime's first GPU), from the cost models of its kind, size and content feature
 * (runtime/model.c: learnt from the tasks run so far and from earlier runs); a CPU-only task has
 * speedup 0 and a CUDA-only task an infinite one. A task without a model yet on either device
 * compares by age only, so until the models know a kind its tasks run in FCFS order.
 *
 * The queues are FCFS's (one FIFO per variant class); a worker looks at the first
 * PATS_WINDOW runnable tasks of each class it serves, so that a pop stays cheap with long
 * queues and old tasks are not starved by a stream of better-suited new ones.
 */

#define PATS_WINDOW 64

typedef struct pats {
    twi_fifo q[TWI_SCHED_CLASSES];
    uint64_t next_seq;
} pats;

static tw_status
pats_init(tw_sched *s)
{
    if (!(s->data = calloc(1, sizeof(pats))))
        return TW_E_NOMEM;
    return TW_OK;
}

static void
pats_fini(tw_sched *s)
{
    free(s->data);
    s->data = NULL;
}

static void
pats_push(tw_sched *s, tw_task *t)
{
    pats *p = s->data;

    /* Its buckets once, now that its dependencies ran (the feature may read their results). */
    twi_model_task_key(t);
    t->seq = p->next_seq++;
    twi_fifo_put(&p->q[t->variants & (TW_DEVICE_CPU | TW_DEVICE_CUDA)], t);
}

/* Expected GPU speedup of a task of class cls, or NAN when it has no model on one of the
 * devices. Both models are per unit, so the units cancel: the speedup depends on the kind and
 * the task's buckets only, and `memo` keeps the last answer (queues hold runs of one kind,
 * mostly of one tile size). */
typedef struct memo {
    const tw_task_kind *kind;
    int16_t key;
    int cpu_dev, gpu_dev;
    double speedup;
} memo;

static double
speedup(twi_models *ms, const tw_task *t, unsigned cls, memo *m)
{
    if (cls == TW_DEVICE_CPU)
        return 0.0;
    if (cls == TW_DEVICE_CUDA)
        return INFINITY;
    if (m->kind != t->kind || m->key != t->model_key) {
        m->kind = t->kind;
        m->key = t->model_key;
        m->speedup = twi_model_speedup(ms, t->kind, m->cpu_dev, m->gpu_dev,
                                       twi_model_key_size(t), twi_model_key_feature(t));
    }
    return m->speedup;
}

/* Is a (speedup sa, pushed as sequence qa) a better pick than b for this worker? */
static bool
better(bool gpu, double sa, uint64_t qa, double sb, uint64_t qb)
{
    if (isnan(sa) || isnan(sb) || sa == sb)
        return qa < qb;
    return gpu ? sa > sb : sa < sb;
}

static tw_task *
pats_pop(tw_sched *s, const tw_worker *w)
{
    pats *p = s->data;
    twi_models *ms = s->rt->models;
    bool gpu = w->type == TW_DEVICE_CUDA;
    tw_task *best = NULL, *best_prev = NULL;
    twi_fifo *best_q = NULL;
    double best_s = NAN;
    memo m = {.kind = NULL,
              .cpu_dev = twi_models_local(ms, TW_DEVICE_CPU, -1),
              .gpu_dev = twi_models_local(ms, TW_DEVICE_CUDA,
                                          w->g ? (int)(w->g - s->rt->gpus) : -1)};

    for (unsigned c = 1; c < TWI_SCHED_CLASSES; c++) {
        tw_task *t, *prev = NULL;
        int seen = 0;

        if (!(c & w->runs))
            continue;
        for (t = p->q[c].head; t && seen < PATS_WINDOW; prev = t, t = t->next) {
            double sp;

            if (twi_job_stopping(t->job)) { /* dropped at once: no need to compare */
                best = t;
                best_prev = prev;
                best_q = &p->q[c];
                goto take;
            }
            if (!twi_worker_variant(w, t))
                continue;
            seen++;
            sp = speedup(ms, t, c, &m);
            if (!best || better(gpu, sp, t->seq, best_s, best->seq)) {
                best = t;
                best_prev = prev;
                best_q = &p->q[c];
                best_s = sp;
            }
        }
    }
    if (!best)
        return NULL;
take:
    twi_fifo_unlink(best_q, best_prev, best);
    return best;
}

const tw_sched_policy twi_sched_pats = {
    .name = "pats",
    .init = pats_init,
    .fini = pats_fini,
    .push = pats_push,
    .pop = pats_pop,
    .uses_models = true,
};
