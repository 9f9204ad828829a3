/* SPDX-License-Identifier: MIT */
/* tilewave: the argument checks both labelling variants make, in plain C on the host. */
#include "label.h"

tw_status
twi_label_check(const tw_tile_view *mask, int conn, const tw_tile_view *labels)
{
    if (!mask || !labels || (conn != 4 && conn != 8))
        return TW_E_INVALID;
    if (mask->channels != 1 || (mask->type != TW_U8 && mask->type != TW_U16) ||
        labels->channels != 1 || labels->type != TW_U32 || mask->w != labels->w ||
        mask->h != labels->h)
        return TW_E_INVALID;
    if ((uint64_t)(mask->w > 0 ? mask->w : 0) * (uint64_t)(mask->h > 0 ? mask->h : 0) >=
        UINT32_MAX)
        return TW_E_INVALID;
    if (!twi_view_fits(mask, (size_t)mask->w * tw_sample_size(mask->type),
                       tw_sample_size(mask->type)) ||
        !twi_view_fits(labels, (size_t)labels->w * 4, 4))
        return TW_E_INVALID;
    return TW_OK;
}

tw_status
twi_label_apply_check(const tw_tile_view *labels, const uint64_t *map, const tw_tile_view *out)
{
    if (!labels || !map || !out || labels->type != TW_U32 || labels->channels != 1 ||
        out->channels != 1 || (out->type != TW_U32 && out->type != TW_U64) ||
        labels->w != out->w || labels->h != out->h ||
        !twi_view_fits(labels, (size_t)labels->w * 4, 4) ||
        !twi_view_fits(out, (size_t)out->w * tw_sample_size(out->type),
                       tw_sample_size(out->type)))
        return TW_E_INVALID;
    return TW_OK;
}
