/* SPDX-License-Identifier: MIT */
/* tilewave tests: task variants the scheduling-policy tests share (a gate, an order log). */
#include <stdint.h>
#include <time.h>

#include "twtest_sched.h"

atomic_int twtest_gate_open, twtest_n_ran;
int twtest_ran_order[64];

tw_status
twtest_gate_cpu(tw_task_ctx *ctx, void *arg)
{
    struct timespec ts = {0, 1000000};

    (void)ctx;
    (void)arg;
    for (int i = 0; i < 5000 && !atomic_load(&twtest_gate_open); i++)
        nanosleep(&ts, NULL);
    return TW_OK;
}

tw_status
twtest_log_cpu(tw_task_ctx *ctx, void *arg)
{
    int k = atomic_fetch_add(&twtest_n_ran, 1);

    (void)ctx;
    if (k < 64)
        twtest_ran_order[k] = (int)(intptr_t)arg;
    return TW_OK;
}

tw_status
twtest_never_cuda(tw_task_ctx *ctx, void *arg)
{
    (void)arg;
    return twi_ctx_fail(ctx, TW_E_INTERNAL, "test: the CUDA variant ran");
}
