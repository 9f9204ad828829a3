/* SPDX-License-Identifier: MIT */
/* tilewave: the sample types of the tile view (public tw_sample_size, tw_sample_type_name),
 * here so that every layer that handles pixels (kern/, omp/, cuda/, io/, the runtime) reaches
 * them without the runtime's or base's utilities. */
#include "tilewave/common.h"

size_t
tw_sample_size(tw_sample_type t)
{
    switch (t) {
    case TW_U8: return 1;
    case TW_U16: return 2;
    case TW_U32: return 4;
    case TW_F32: return 4;
    case TW_U64: return 8;
    }
    return 0;
}

const char *
tw_sample_type_name(tw_sample_type t)
{
    switch (t) {
    case TW_U8: return "u8";
    case TW_U16: return "u16";
    case TW_U32: return "u32";
    case TW_F32: return "f32";
    case TW_U64: return "u64";
    }
    return "?";
}
