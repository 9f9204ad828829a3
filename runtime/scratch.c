/* SPDX-License-Identifier: MIT */
/* tilewave: the folder scratch files go to, from the runtime's config (the files themselves:
 * base/scratch.c). */
#include <stdlib.h>

#include "tw_internal.h"

const char *
twi_scratch_dir(const tw_config *cfg)
{
    const char *dir = NULL;

    if (cfg && tw_config_get_string(cfg, "runtime.scratch_dir", &dir) == TW_OK && dir && *dir)
        return dir;
    if ((dir = getenv("TMPDIR")) && *dir)
        return dir;
    return "/tmp";
}
