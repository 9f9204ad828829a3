/* SPDX-License-Identifier: MIT */
/* tilewave: the "fair" scheduling policy: FCFS within each job, round robin across jobs. */
#include <stdlib.h>
#include <string.h>

#include "rt_sched.h"

/*
 * Several jobs sharing one runtime (a service embedding the library) should each see their
 * tasks start promptly: under plain FCFS a job that makes 10,000 tasks ready at once delays a
 * 10-task job submitted a moment later until all 10,000 have started. Here each job with
 * ready tasks has its own three FIFOs (CPU only, CUDA only, both: as in sched_fcfs.c), and a
 * worker serves the jobs in turn, starting after the job it served last, taking from each the
 * oldest ready task it can run. With one job this is exactly FCFS.
 *
 * Jobs with ready tasks are few (one per concurrent request), so they live in a small array
 * searched linearly; a job's entry goes when its queues are empty. Everything runs under the
 * scheduler lock.
 */

typedef struct job_queues {
    tw_job *job;
    twi_fifo q[TWI_SCHED_CLASSES];
    int64_t n;        /* ready tasks queued */
} job_queues;

typedef struct fair {
    job_queues *jobs;
    int n, cap;
    int next;         /* the job to look at first on the next pop */
    uint64_t next_seq;
} fair;

static tw_status
fair_init(tw_sched *s)
{
    fair *f = calloc(1, sizeof *f);

    /* Room for 8 jobs from the start: a push can then always find a place (see fair_push). */
    if (!f || !(f->jobs = calloc(8, sizeof *f->jobs))) {
        free(f);
        return TW_E_NOMEM;
    }
    f->cap = 8;
    s->data = f;
    return TW_OK;
}

static void
fair_fini(tw_sched *s)
{
    fair *f = s->data;

    if (f)
        free(f->jobs);
    free(f);
    s->data = NULL;
}

static job_queues *
find_or_add(fair *f, tw_job *job)
{
    for (int i = 0; i < f->n; i++)
        if (f->jobs[i].job == job)
            return &f->jobs[i];
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        job_queues *j = realloc(f->jobs, (size_t)cap * sizeof *j);

        if (!j)
            return NULL;
        f->jobs = j;
        f->cap = cap;
    }
    memset(&f->jobs[f->n], 0, sizeof f->jobs[f->n]);
    f->jobs[f->n].job = job;
    return &f->jobs[f->n++];
}

/* The push hook cannot fail: when there is no memory for a new job's entry (the array is
 * full, so it has entries), the task joins the first entry's queues: served, less fairly. */
static void
fair_push(tw_sched *s, tw_task *t)
{
    fair *f = s->data;
    job_queues *j = find_or_add(f, t->job);

    if (!j)
        j = &f->jobs[0];
    t->seq = f->next_seq++;
    twi_fifo_put(&j->q[t->variants & (TW_DEVICE_CPU | TW_DEVICE_CUDA)], t);
    j->n++;
}

static tw_task *
fair_pop(tw_sched *s, const tw_worker *w)
{
    fair *f = s->data;

    for (int k = 0; k < f->n; k++) {
        int i = (f->next + k) % f->n;
        tw_task *t = twi_fifo_take_oldest(f->jobs[i].q, w);

        if (!t)
            continue;
        f->jobs[i].n--;
        f->next = i + 1;
        if (f->jobs[i].n == 0) {
            /* Keep the turn order: the entries after i move down one place. */
            memmove(&f->jobs[i], &f->jobs[i + 1], (size_t)(f->n - i - 1) * sizeof *f->jobs);
            f->n--;
            f->next = i;
        }
        if (f->next >= f->n)
            f->next = 0;
        return t;
    }
    return NULL;
}

const tw_sched_policy twi_sched_fair = {
    .name = "fair",
    .init = fair_init,
    .fini = fair_fini,
    .push = fair_push,
    .pop = fair_pop,
};
