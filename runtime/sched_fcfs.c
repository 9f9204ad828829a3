/* SPDX-License-Identifier: MIT */
/* tilewave: the FCFS scheduling policy (first come, first served; [Teodoro13] section 4). */
#include <stdlib.h>

#include "rt_sched.h"
#include "rt_worker.h"

/*
 * FCFS: an idle worker asks for work and gets the oldest ready task it has a variant for.
 *
 * Guarantee: among the ready tasks a worker can run, pop() returns the one pushed first. A task
 * no worker of the moment can take (a CUDA-only task while the GPU is busy) waits without
 * blocking the tasks behind it, which is the demand-driven dispatch of [Teodoro13]: a CPU core
 * or a GPU that falls idle takes the next task suitable for it.
 *
 * How: conceptually one FIFO, kept as three intrusive FIFOs keyed by the set of variants a
 * task has (CPU only, CUDA only, both), each task stamped with a global push sequence number.
 * A worker looks only at the queues it can serve and takes the head with the smallest stamp,
 * so pop is O(1) instead of a scan past every task of the other device type. A kind's
 * can_run() hook may refuse a device; then the queue is scanned past the refused tasks (rare,
 * and bounded by the queue length).
 *
 * Tasks of a stopping (canceled or failed) job are returned regardless of can_run: the worker
 * drops them without running their variant, which resolves their dependents and the job's
 * count quickly.
 *
 * Everything here runs under the runtime's scheduler lock, so the queues need no atomics.
 * Re-queueing does not occur: a task is pushed once, when its last dependency completes.
 */

typedef struct fcfs {
    twi_fifo q[TWI_SCHED_CLASSES];
    uint64_t next_seq;
} fcfs;

static tw_status
fcfs_init(tw_sched *s)
{
    if (!(s->data = calloc(1, sizeof(fcfs))))
        return TW_E_NOMEM;
    return TW_OK;
}

static void
fcfs_fini(tw_sched *s)
{
    free(s->data);
    s->data = NULL;
}

void
twi_fifo_put(twi_fifo *q, tw_task *t)
{
    t->next = NULL;
    if (q->tail)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
}

static void
fcfs_push(tw_sched *s, tw_task *t)
{
    fcfs *f = s->data;

    t->seq = f->next_seq++;
    twi_fifo_put(&f->q[t->variants & (TW_DEVICE_CPU | TW_DEVICE_CUDA)], t);
}

tw_task *
twi_fifo_take_oldest(twi_fifo q[TWI_SCHED_CLASSES], const tw_worker *w)
{
    tw_task *best = NULL, *best_prev = NULL;
    twi_fifo *best_q = NULL;

    for (unsigned c = 1; c < TWI_SCHED_CLASSES; c++) {
        tw_task *t, *prev = NULL;

        if (!(c & w->runs) || !q[c].head)
            continue;
        for (t = q[c].head; t; prev = t, t = t->next)
            if (twi_job_stopping(t->job) || twi_worker_variant(w, t))
                break;
        if (t && (!best || t->seq < best->seq)) {
            best = t;
            best_prev = prev;
            best_q = &q[c];
        }
    }
    if (best)
        twi_fifo_unlink(best_q, best_prev, best);
    return best;
}

void
twi_fifo_unlink(twi_fifo *q, tw_task *prev, tw_task *t)
{
    if (prev)
        prev->next = t->next;
    else
        q->head = t->next;
    if (q->tail == t)
        q->tail = prev;
    t->next = NULL;
}

static tw_task *
fcfs_pop(tw_sched *s, const tw_worker *w)
{
    return twi_fifo_take_oldest(((fcfs *)s->data)->q, w);
}

const tw_sched_policy twi_sched_fcfs = {
    .name = "fcfs",
    .init = fcfs_init,
    .fini = fcfs_fini,
    .push = fcfs_push,
    .pop = fcfs_pop,
};
