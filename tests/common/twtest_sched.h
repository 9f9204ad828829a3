/* SPDX-License-Identifier: MIT */
/* tilewave tests: task variants the scheduling-policy tests share (a gate, an order log). */
#ifndef TWTEST_SCHED_H
#define TWTEST_SCHED_H

#include <stdatomic.h>

#include "tw_internal.h"

/* twtest_gate_cpu waits (at most 5 s) until twtest_gate_open is set, holding its worker;
 * twtest_log_cpu appends its argument (an int) to twtest_ran_order (first 64 runs) and counts
 * in twtest_n_ran; twtest_never_cuda fails: it only makes a kind "both" on CPU-only runtimes. */
extern atomic_int twtest_gate_open, twtest_n_ran;
extern int twtest_ran_order[64];

tw_status twtest_gate_cpu(tw_task_ctx *ctx, void *arg);
tw_status twtest_log_cpu(tw_task_ctx *ctx, void *arg);
tw_status twtest_never_cuda(tw_task_ctx *ctx, void *arg);

#endif /* TWTEST_SCHED_H */
