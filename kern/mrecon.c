/* SPDX-License-Identifier: MIT */
/* tilewave: the argument check both reconstruction variants make, in plain C on the host. */
#include "mrecon.h"

static int
view_ok(const tw_tile_view *v, tw_sample_type t, int32_t w, int32_t h)
{
    size_t ss = tw_sample_size(t);

    if (v->channels != 1 || v->type != t || v->w != w || v->h != h)
        return 0;
    return twi_view_fits(v, (size_t)w * ss, ss);
}

tw_status
twi_mrecon_check(const tw_tile_view *marker, const tw_tile_view *mask, int conn)
{
    if (!marker || !mask || (conn != 4 && conn != 8))
        return TW_E_INVALID;
    if (marker->type != TW_U8 && marker->type != TW_U16)
        return TW_E_INVALID;
    if (marker->w < 0 || marker->h < 0)
        return TW_E_INVALID;
    if (!view_ok(marker, marker->type, marker->w, marker->h) ||
        !view_ok(mask, marker->type, marker->w, marker->h))
        return TW_E_INVALID;
    return TW_OK;
}
