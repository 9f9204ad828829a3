/* SPDX-License-Identifier: MIT */
/* tilewave: the argument check both distance transform variants make, in plain C on the host. */
#include <math.h>

#include "edt.h"

static tw_sample_type
format_type(int format)
{
    return format == TWI_EDT_F32    ? TW_F32
           : format == TWI_EDT_U16  ? TW_U16
           : format == TWI_EDT_U8   ? TW_U8
                                    : TW_U32;
}

/* The contract of twi_omp_edt and its CUDA twin (kern/edt.h). Reads only the structs, never
 * the pixels or the above / below arrays: the CUDA twin passes device pointers. */
tw_status
twi_edt_check(const tw_tile_view *bin, const twi_edt_band *band, const tw_tile_view *out,
              const tw_tile_view *idx)
{
    tw_sample_type ot;
    size_t oss;

    if (!bin || !band || !out)
        return TW_E_INVALID;
    if (band->format < TWI_EDT_F32 || band->format > TWI_EDT_U8)
        return TW_E_INVALID;
    if (!isfinite(band->sx) || !isfinite(band->sy) || !(band->sx > 0) || !(band->sy > 0))
        return TW_E_INVALID;
    if (band->format == TWI_EDT_SQ32 && (band->sx != 1.0 || band->sy != 1.0))
        return TW_E_INVALID;
    if (bin->type != TW_U8 || bin->channels != 1)
        return TW_E_INVALID;
    if (bin->w < 0 || bin->h < 0 || bin->w > TWI_EDT_MAX_SIDE || bin->h > TWI_EDT_MAX_SIDE)
        return TW_E_INVALID;
    if (band->y0 < 0 || band->y0 > (int64_t)TWI_EDT_MAX_SIDE - bin->h)
        return TW_E_INVALID;
    ot = format_type(band->format);
    oss = tw_sample_size(ot);
    if (out->type != ot || out->channels != 1 || out->w != bin->w || out->h != bin->h)
        return TW_E_INVALID;
    if (!twi_view_fits(bin, (size_t)bin->w, 1) || !twi_view_fits(out, (size_t)out->w * oss, oss))
        return TW_E_INVALID;
    if (idx) {
        if (idx->type != TW_U32 || idx->channels != 2 || idx->w != bin->w || idx->h != bin->h)
            return TW_E_INVALID;
        if (!twi_view_fits(idx, (size_t)idx->w * 2 * sizeof(uint32_t), sizeof(uint32_t)))
            return TW_E_INVALID;
    }
    return TW_OK;
}
