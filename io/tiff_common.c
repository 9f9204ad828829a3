/* SPDX-License-Identifier: MIT */
/* tilewave: libtiff message handling shared by the TIFF reader and writer. */
#include <stdio.h>
#include <string.h>

#include "io_internal.h"

void
twi_tiff_keep_message(char *buf, size_t n, const char *path, const char *module, const char *fmt,
                      va_list ap)
{
    int k = 0;

    if (!buf || n == 0 || buf[0])
        return;
    if (module && *module && !(path && strcmp(module, path) == 0))
        k = snprintf(buf, n, "%s: ", module);
    if (k < 0 || (size_t)k >= n)
        k = 0;
    vsnprintf(buf + k, n - (size_t)k, fmt, ap);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

void
twi_tiff_log_warning(const char *domain, const char *module, const char *fmt, va_list ap)
{
    char buf[256];

    if (TW_LOG_DEBUG > twi_log_level_get())
        return;
    vsnprintf(buf, sizeof buf, fmt, ap);
    TW_DEBUG(domain, "libtiff warning: %s: %s", module ? module : "", buf);
}
