/* SPDX-License-Identifier: MIT */
/* tilewave: the argument check both max-tree variants make, in plain C on the host. */
#include "maxtree.h"

tw_status
twi_maxtree_check(const tw_tile_view *in, int conn, const tw_tile_view *parent)
{
    size_t si, sp;

    if (!in || !parent || (conn != 4 && conn != 8))
        return TW_E_INVALID;
    if (in->channels != 1 || parent->channels != 1)
        return TW_E_INVALID;
    if ((in->type != TW_U8 && in->type != TW_U16 && in->type != TW_U32) ||
        (parent->type != TW_U32 && parent->type != TW_U64))
        return TW_E_INVALID;
    if (in->w != parent->w || in->h != parent->h)
        return TW_E_INVALID;
    si = tw_sample_size(in->type);
    sp = tw_sample_size(parent->type);
    if (!twi_view_fits(in, (size_t)in->w * si, si) ||
        !twi_view_fits(parent, (size_t)parent->w * sp, sp))
        return TW_E_INVALID;
    if (parent->type == TW_U32 && (uint64_t)in->w * (uint64_t)in->h > UINT32_MAX)
        return TW_E_INVALID;
    /* 32-bit levels (omp/maxtree_u32.c): in place only when the two views are one */
    if (in->type == TW_U32 && ((uint64_t)in->w * (uint64_t)in->h >= ((uint64_t)1 << 31) ||
                               (in->data == parent->data && in->stride != parent->stride)))
        return TW_E_INVALID;
    return TW_OK;
}
