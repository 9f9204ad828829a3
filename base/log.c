/* SPDX-License-Identifier: MIT */
/* tilewave: the process-wide log handler and level (the library never prints otherwise). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "tw_base.h"

static atomic_int log_level = TW_LOG_WARN;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static tw_log_fn log_fn = NULL; /* NULL: the default handler */
static void *log_user = NULL;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

static void
default_handler(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)user;
    /* The one place the library writes to stderr: the documented default handler. */
    fprintf(stderr, "tilewave %s: %s: %s\n", level_names[level], domain, message); /* lint-allow */
}

void
tw_log_set_handler(tw_log_fn fn, void *user)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

void
tw_log_set_level(tw_log_level level)
{
    if ((int)level < TW_LOG_ERROR || level > TW_LOG_DEBUG)
        return;
    atomic_store(&log_level, (int)level);
}

int
twi_log_level_get(void)
{
    return atomic_load_explicit(&log_level, memory_order_relaxed);
}

void
twi_log(tw_log_level level, const char *domain, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    if ((int)level > twi_log_level_get())
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The handler is called under the lock so that a concurrent tw_log_set_handler() never
     * sees its old handler run after it returned. */
    pthread_mutex_lock(&log_lock);
    if (log_fn)
        log_fn(level, domain, msg, log_user);
    else
        default_handler(level, domain, msg, NULL);
    pthread_mutex_unlock(&log_lock);
}
