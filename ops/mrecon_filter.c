/* SPDX-License-Identifier: MIT */
/* tilewave: fill-holes, h-maxima, regional maxima, opening and closing by reconstruction. */
/*
 * Each operation is one reconstruction job (ops/mrecon.c) with a marker made from the image
 * while it is loaded and an output made from the reconstruction and the image while it is
 * stored, so none needs a pass of its own over the image:
 *
 *   fill-holes   erosion: marker = image on the border, MAX inside; output R
 *   hmax         dilation: marker = max(image - h, 0); output image - R >= h (u8), or the
 *                h-dome image - R
 *   regional-max hmax with h = 1
 *   open-rec     dilation: marker = image eroded by the square; output R
 *   close-rec    erosion: marker = image dilated by the square; output R
 *
 * Erosion runs as dilation on complemented values, so the square dilation of close-rec is the
 * square erosion of the complemented image and both filters share one prep task.
 */
#include <string.h>

#include "ops_internal.h"

void
tw_mrecon_filter_opts_init(tw_mrecon_filter_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

void
tw_rfilter_opts_init(tw_mrecon_filter_opts *o)
{
    tw_mrecon_filter_opts_init(o);
}

/* The spec common to every filter, from the options. */
static tw_status
base_spec(const char *op, const tw_mrecon_filter_opts *o, int default_conn, twi_mrecon_spec *sp,
          tw_error *err)
{
    if (!o)
        return twi_error_set(err, TW_E_INVALID, "%s: NULL argument", op);
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: options not initialised with tw_mrecon_filter_opts_init()", op);
    memset(sp, 0, sizeof *sp);
    sp->op = op;
    sp->mask_file = &o->input;
    sp->mask_mem = &o->image;
    sp->out_file = o->output.path ? &o->output : NULL;
    sp->out_mem = &o->result;
    sp->conn = o->conn ? o->conn : default_conn;
    sp->tile_w = o->tile_w;
    sp->tile_h = o->tile_h;
    sp->queue_capacity = o->queue_capacity;
    sp->stats = o->stats;
    return TW_OK;
}

/* Each filter in one process (mpi NULL) or across MPI ranks (tilewave/mpi.h). */
static tw_status
fill_holes(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_mpi *mpi, tw_mpi_report *report,
           tw_job **out, tw_error *err)
{
    twi_mrecon_spec sp;
    tw_status st;

    /* SciPy floods the background with its default structure, the cross. */
    if ((st = base_spec("fill-holes", o, 4, &sp, err)) != TW_OK)
        return st;
    sp.complement = true;
    sp.mask_op = true;
    sp.prep = TWI_MRECON_PREP_BORDER;
    sp.out = TWI_MRECON_OUT_RESULT;
    sp.mpi = mpi;
    sp.mpi_report = report;
    return twi_mrecon_submit(rt, &sp, out, err);
}

static tw_status
hmax(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_mpi *mpi, tw_mpi_report *report,
     tw_job **out, tw_error *err)
{
    twi_mrecon_spec sp;
    tw_status st;

    if ((st = base_spec("hmax", o, 8, &sp, err)) != TW_OK)
        return st;
    sp.prep = TWI_MRECON_PREP_SUB_H;
    sp.out = o->dome ? TWI_MRECON_OUT_DOME : TWI_MRECON_OUT_MAXIMA;
    sp.h = o->h;
    sp.mpi = mpi;
    sp.mpi_report = report;
    return twi_mrecon_submit(rt, &sp, out, err);
}

static tw_status
regional_max(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_mpi *mpi, tw_mpi_report *report,
             tw_job **out, tw_error *err)
{
    twi_mrecon_spec sp;
    tw_status st;

    if ((st = base_spec("regional-max", o, 8, &sp, err)) != TW_OK)
        return st;
    sp.prep = TWI_MRECON_PREP_SUB_H;
    sp.out = TWI_MRECON_OUT_MAXIMA;
    sp.h = 1;
    sp.mpi = mpi;
    sp.mpi_report = report;
    return twi_mrecon_submit(rt, &sp, out, err);
}

tw_status
tw_fill_holes_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_job **out, tw_error *err)
{
    return fill_holes(rt, o, NULL, NULL, out, err);
}

tw_status
tw_hmax_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_job **out, tw_error *err)
{
    return hmax(rt, o, NULL, NULL, out, err);
}

tw_status
tw_regional_max_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_job **out, tw_error *err)
{
    return regional_max(rt, o, NULL, NULL, out, err);
}

#define NEED_MPI(op)                                                                           \
    do {                                                                                       \
        if (!c)                                                                                \
            return twi_error_set(err, TW_E_INVALID, "%s: NULL MPI context", op);              \
    } while (0)

tw_status
tw_mpi_fill_holes_submit(tw_mpi *c, tw_runtime *rt, const tw_mrecon_filter_opts *o,
                         tw_mpi_report *report, tw_job **out, tw_error *err)
{
    NEED_MPI("fill-holes");
    return fill_holes(rt, o, c, report, out, err);
}

tw_status
tw_mpi_hmax_submit(tw_mpi *c, tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_mpi_report *report,
                   tw_job **out, tw_error *err)
{
    NEED_MPI("hmax");
    return hmax(rt, o, c, report, out, err);
}

tw_status
tw_mpi_regional_max_submit(tw_mpi *c, tw_runtime *rt, const tw_mrecon_filter_opts *o,
                           tw_mpi_report *report, tw_job **out, tw_error *err)
{
    NEED_MPI("regional-max");
    return regional_max(rt, o, c, report, out, err);
}

static tw_status
by_reconstruction(const char *op, bool closing, tw_runtime *rt, const tw_mrecon_filter_opts *o,
                  tw_job **out, tw_error *err)
{
    twi_mrecon_spec sp;
    tw_status st;

    if ((st = base_spec(op, o, 8, &sp, err)) != TW_OK)
        return st;
    sp.complement = closing;
    sp.prep = TWI_MRECON_PREP_ERODE;
    sp.out = TWI_MRECON_OUT_RESULT;
    sp.radius = o->radius;
    return twi_mrecon_submit(rt, &sp, out, err);
}

tw_status
tw_open_rec_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_job **out, tw_error *err)
{
    return by_reconstruction("open-rec", false, rt, o, out, err);
}

tw_status
tw_close_rec_submit(tw_runtime *rt, const tw_mrecon_filter_opts *o, tw_job **out, tw_error *err)
{
    return by_reconstruction("close-rec", true, rt, o, out, err);
}
