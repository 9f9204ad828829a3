/* SPDX-License-Identifier: MIT */
/* tilewave: runtime jobs: the job layout and the task counting that ends a job
 * (runtime/job.c). */
#ifndef TW_RT_JOB_H
#define TW_RT_JOB_H

#include <pthread.h>
#include <time.h>

#include "tw_internal.h"

/* Only the sources of runtime/ include this header; nothing outside sees these layouts. */

/* ---- jobs (runtime/job.c) */
struct tw_job {
    tw_runtime *rt;
    char *name;
    atomic_int refs;        /* the creator's + one per task */
    /* Submitted tasks not yet completed, + 1 until sealed: the job ends when it reaches 0. */
    atomic_int_fast64_t outstanding;
    atomic_bool sealed;
    atomic_bool stopping;   /* canceled or failed */
    atomic_int_fast64_t total, done;
    struct timespec t0;

    pthread_mutex_t lock;   /* guards everything below */
    pthread_cond_t cond;    /* signalled when finished */
    tw_status stop_status;  /* TW_OK, TW_E_CANCELED or the first error */
    bool has_message;
    char message[TW_ERROR_MAX];
    bool finished;
    double end_s;           /* elapsed seconds at the end */
    twi_job_finish_fn finish;
    void *finish_user;
    void (*finish_user_free)(void *);

    /* tw_job_set_progress_callback: fn and user under `lock`; the rest lock-free */
    tw_progress_fn progress_fn;
    void *progress_user;
    atomic_bool has_progress;
    bool final_taken;        /* job_end read the callback for its last call (guarded by lock) */
    atomic_int_fast64_t progress_interval_ns, progress_last_ns;

    twi_window *windows;     /* its streaming windows, freed with it (under rt->lock) */
    atomic_bool streaming;   /* it opened a window: a stop wakes the idle workers */
    twi_io_counts io;        /* tw_job_get_io */
    /* twi_job_register_host: caller memory page-locked until the job ends (under `lock`) */
    void **registered;
    int n_registered;
};

TWI_HIDDEN void twi_job_acquire(tw_job *job);
TWI_HIDDEN void twi_job_release(tw_job *job);
/* Count a submitted task; TW_E_INVALID when the job has already ended. */
TWI_HIDDEN tw_status twi_job_task_begin(tw_job *job);
/* A submitted task completed (ran or was dropped); may end the job. No lock held. */
TWI_HIDDEN void twi_job_task_end(tw_job *job);

#endif /* TW_RT_JOB_H */
