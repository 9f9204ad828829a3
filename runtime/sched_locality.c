/* SPDX-License-Identifier: MIT */
/* tilewave: the "locality" scheduling policy: GPUs prefer tasks whose tiles they already hold. */
#include <stdlib.h>

#include "rt_core.h"

/*
 * Data locality (Region Templates' dataLocalityAware / tryPreassignment, StarPU's dmdar): a GPU
 * worker takes, among the oldest LOC_WINDOW runnable tasks of each queue it serves, the one with
 * the most bytes of R/RW tiles resident and current on its GPU (twi_task_resident_bytes: the
 * replicas the GPU keeps after earlier tasks, runtime/mem_cuda.c), ties going to the oldest. A
 * task reading what an earlier task on that GPU read or wrote thus runs there without an upload,
 * which is what "keep outputs resident for the dependent task" needs: the dependent is ready
 * once its producer completes, and the GPU holding the producer's output picks it first.
 * CPU workers take the oldest task (FCFS). With no GPU, or nothing resident, it is FCFS.
 *
 * The queues are FCFS's (one FIFO per variant class). The window bounds a pop's cost (the
 * residency query reads one atomic per tile) and keeps old tasks from starving behind a stream
 * of better-placed new ones.
 */

#define LOC_WINDOW 32

typedef struct loc {
    twi_fifo q[TWI_SCHED_CLASSES];
    uint64_t next_seq;
} loc;

static tw_status
loc_init(tw_sched *s)
{
    if (!(s->data = calloc(1, sizeof(loc))))
        return TW_E_NOMEM;
    return TW_OK;
}

static void
loc_fini(tw_sched *s)
{
    free(s->data);
    s->data = NULL;
}

static void
loc_push(tw_sched *s, tw_task *t)
{
    loc *l = s->data;

    t->seq = l->next_seq++;
    twi_fifo_put(&l->q[t->variants & (TW_DEVICE_CPU | TW_DEVICE_CUDA)], t);
}

static tw_task *
loc_pop(tw_sched *s, const tw_worker *w)
{
    loc *l = s->data;
    tw_task *best = NULL, *best_prev = NULL;
    twi_fifo *best_q = NULL;
    int64_t best_b = -1;
    int gi;

    if (w->type != TW_DEVICE_CUDA)
        return twi_fifo_take_oldest(l->q, w);
    gi = twi_gpu_index(w);
    for (unsigned c = 1; c < TWI_SCHED_CLASSES; c++) {
        tw_task *t, *prev = NULL;
        int seen = 0;

        if (!(c & w->runs))
            continue;
        for (t = l->q[c].head; t && seen < LOC_WINDOW; prev = t, t = t->next) {
            int64_t b;

            if (twi_job_stopping(t->job)) { /* dropped at once: no need to compare */
                best = t;
                best_prev = prev;
                best_q = &l->q[c];
                goto take;
            }
            if (!twi_worker_variant(w, t))
                continue;
            seen++;
            b = twi_task_resident_bytes(t, gi);
            if (b > best_b || (b == best_b && t->seq < best->seq)) {
                best = t;
                best_prev = prev;
                best_q = &l->q[c];
                best_b = b;
            }
        }
    }
    if (!best)
        return NULL;
take:
    twi_fifo_unlink(best_q, best_prev, best);
    return best;
}

const tw_sched_policy twi_sched_locality = {
    .name = "locality",
    .init = loc_init,
    .fini = loc_fini,
    .push = loc_push,
    .pop = loc_pop,
};
