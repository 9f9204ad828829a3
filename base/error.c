/* SPDX-License-Identifier: MIT */
/* tilewave: status names, error records and small shared utilities of the public API. */
#include <stdio.h>
#include <stdlib.h>

#include "tilewave/version.h"
#include "tw_base.h"

const char *
tw_status_string(tw_status st)
{
    switch (st) {
    case TW_OK: return "TW_OK";
    case TW_E_INVALID: return "TW_E_INVALID";
    case TW_E_NOMEM: return "TW_E_NOMEM";
    case TW_E_IO: return "TW_E_IO";
    case TW_E_FORMAT: return "TW_E_FORMAT";
    case TW_E_NODEV: return "TW_E_NODEV";
    case TW_E_DEVICE: return "TW_E_DEVICE";
    case TW_E_CANCELED: return "TW_E_CANCELED";
    case TW_E_TIMEOUT: return "TW_E_TIMEOUT";
    case TW_E_INTERNAL: return "TW_E_INTERNAL";
    }
    return "TW_E_UNKNOWN";
}

tw_status
twi_error_setv(tw_error *err, tw_status st, const char *fmt, va_list ap)
{
    if (err) {
        err->status = st;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
    }
    return st;
}

tw_status
twi_error_set(tw_error *err, tw_status st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    twi_error_setv(err, st, fmt, ap);
    va_end(ap);
    return st;
}

void
tw_free(void *p)
{
    free(p);
}

const char *
tw_version_string(void)
{
    return TW_VERSION_STRING;
}

int
tw_build_has_cuda(void)
{
#ifdef TW_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}
