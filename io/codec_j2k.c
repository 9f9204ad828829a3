/* SPDX-License-Identifier: MIT */
/* tilewave: JPEG 2000 tiles (Aperio TIFF compression 33003 / 33005) decoded with OpenJPEG. */

/*
 * Aperio stores each tile of a JPEG 2000 level as a bare J2K codestream in the TIFF tile
 * (compression 33003: the components are Y, Cb, Cr; 33005: R, G, B). libtiff has no codec for
 * them, so the libtiff reader reads the tile's raw bytes and hands them here. OpenSlide reads
 * the same tiles with the same library; to give the same bytes as OpenSlide's whole-level read,
 * chroma planes subsampled in the codestream are replicated (nearest sample, as OpenSlide
 * 3.4.1 does) and YCbCr is converted with OpenSlide's JFIF tables: R = Y + round(1.402 (Cr -
 * 128)), B = Y + round(1.772 (Cb - 128)), G = Y + floor((round(2^16 (0.5 - 0.34414 (Cb - 128)))
 * + round(2^16 (-0.71414) (Cr - 128))) / 2^16), each clamped to 0..255.
 */
#include <math.h>
#include <openjpeg.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "io_internal.h"

/* The compressed tile as an OpenJPEG input stream. */
typedef struct j2k_src {
    const uint8_t *p;
    size_t n, pos;
} j2k_src;

static OPJ_SIZE_T
src_read(void *buf, OPJ_SIZE_T n, void *user)
{
    j2k_src *s = user;
    size_t left = s->n - s->pos;

    if (left == 0)
        return (OPJ_SIZE_T)-1; /* end of stream, as OpenJPEG expects it */
    if (n > left)
        n = left;
    memcpy(buf, s->p + s->pos, n);
    s->pos += n;
    return n;
}

static OPJ_OFF_T
src_skip(OPJ_OFF_T n, void *user)
{
    j2k_src *s = user;

    if (n < 0) {
        if ((size_t)-n > s->pos)
            n = -(OPJ_OFF_T)s->pos;
    } else if ((size_t)n > s->n - s->pos) {
        n = (OPJ_OFF_T)(s->n - s->pos);
    }
    s->pos = (size_t)((OPJ_OFF_T)s->pos + n);
    return n;
}

static OPJ_BOOL
src_seek(OPJ_OFF_T off, void *user)
{
    j2k_src *s = user;

    if (off < 0 || (uint64_t)off > s->n)
        return OPJ_FALSE;
    s->pos = (size_t)off;
    return OPJ_TRUE;
}

/* OpenJPEG's first error (its messages end with a newline). */
typedef struct j2k_msg {
    char *buf;
    size_t n;
} j2k_msg;

static void
on_j2k_error(const char *msg, void *user)
{
    j2k_msg *m = user;
    size_t k;

    if (!m->buf || m->n == 0 || m->buf[0])
        return;
    snprintf(m->buf, m->n, "OpenJPEG: %s", msg);
    k = strlen(m->buf);
    while (k > 0 && (m->buf[k - 1] == '\n' || m->buf[k - 1] == '\r'))
        m->buf[--k] = '\0';
}

static void
on_j2k_warning(const char *msg, void *user)
{
    (void)user;
    TW_DEBUG("io.j2k", "OpenJPEG warning: %s", msg);
}

/* OpenSlide's YCbCr tables (see the top of the file). */
static int16_t ycc_r_cr[256], ycc_b_cb[256];
static int32_t ycc_g_cb[256], ycc_g_cr[256];
static pthread_once_t ycc_once = PTHREAD_ONCE_INIT;

static void
ycc_init(void)
{
    for (int i = 0; i < 256; i++) {
        ycc_r_cr[i] = (int16_t)lround(1.402 * (i - 128));
        ycc_b_cb[i] = (int16_t)lround(1.772 * (i - 128));
        ycc_g_cb[i] = (int32_t)lround(65536.0 * (0.5 - 0.34414 * (i - 128)));
        ycc_g_cr[i] = (int32_t)lround(65536.0 * -0.71414 * (i - 128));
    }
}

static uint8_t
clamp_u8(int32_t v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static uint8_t
comp_sample(const opj_image_comp_t *c, uint32_t x, uint32_t y)
{
    return clamp_u8(c->data[(size_t)(y / c->dy) * c->w + x / c->dx]);
}

/* Whether the decoded image is what a w x h tile of three 8-bit samples needs; the reason in
 * msg when not. */
static bool
check_image(const opj_image_t *im, uint32_t w, uint32_t h, char *msg, size_t msg_n)
{
    if (im->numcomps != 3) {
        snprintf(msg, msg_n, "%u components, 3 expected", (unsigned)im->numcomps);
        return false;
    }
    if (im->comps[0].w != w || im->comps[0].h != h || im->comps[0].dx != 1 ||
        im->comps[0].dy != 1) {
        snprintf(msg, msg_n, "a %ux%u image in a %ux%u tile", (unsigned)im->comps[0].w,
                 (unsigned)im->comps[0].h, (unsigned)w, (unsigned)h);
        return false;
    }
    for (unsigned c = 0; c < 3; c++) {
        const opj_image_comp_t *k = &im->comps[c];

        if (k->prec != 8 || k->sgnd) {
            snprintf(msg, msg_n, "component %u has %u-bit %s samples, 8-bit unsigned expected",
                     c, (unsigned)k->prec, k->sgnd ? "signed" : "unsigned");
            return false;
        }
        /* a subsampled plane must cover the tile at its subsampling */
        if (!k->data || k->dx < 1 || k->dy < 1 || k->dx > 255 || k->dy > 255 ||
            (uint64_t)k->w * k->dx < w || (uint64_t)k->h * k->dy < h) {
            snprintf(msg, msg_n, "component %u is %ux%u at subsampling %ux%u, short of the "
                                 "%ux%u tile",
                     c, (unsigned)k->w, (unsigned)k->h, (unsigned)k->dx, (unsigned)k->dy,
                     (unsigned)w, (unsigned)h);
            return false;
        }
    }
    return true;
}

bool
twi_j2k_decode(const uint8_t *src, size_t n, bool ycbcr, uint32_t w, uint32_t h, uint8_t *dst,
               char *msg, size_t msg_n)
{
    j2k_src in = {.p = src, .n = n};
    j2k_msg m = {.buf = msg, .n = msg_n};
    opj_codec_t *codec = NULL;
    opj_stream_t *stream = NULL;
    opj_image_t *im = NULL;
    opj_dparameters_t params;
    bool ok = false;

    if (msg_n)
        msg[0] = '\0';
    pthread_once(&ycc_once, ycc_init);
    /* A JP2 file starts with its signature box; Aperio's tiles are bare codestreams. */
    codec = opj_create_decompress(n >= 12 && memcmp(src + 4, "jP  ", 4) == 0 ? OPJ_CODEC_JP2
                                                                             : OPJ_CODEC_J2K);
    if (!codec || !(stream = opj_stream_create(n < (1u << 20) ? n + 1 : (1u << 20), OPJ_TRUE))) {
        snprintf(msg, msg_n, "OpenJPEG: out of memory");
        goto out;
    }
    opj_set_error_handler(codec, on_j2k_error, &m);
    opj_set_warning_handler(codec, on_j2k_warning, NULL);
    opj_set_default_decoder_parameters(&params);
    opj_stream_set_user_data(stream, &in, NULL);
    opj_stream_set_user_data_length(stream, n);
    opj_stream_set_read_function(stream, src_read);
    opj_stream_set_skip_function(stream, src_skip);
    opj_stream_set_seek_function(stream, src_seek);
    if (!opj_setup_decoder(codec, &params) || !opj_read_header(stream, codec, &im)) {
        if (!msg[0])
            snprintf(msg, msg_n, "OpenJPEG could not read its header");
        goto out;
    }
    /* the size the header claims, before anything of that size is allocated */
    if (im->numcomps != 3 || im->x1 < im->x0 || im->y1 < im->y0 || im->x1 - im->x0 != w ||
        im->y1 - im->y0 != h) {
        if (im->numcomps != 3)
            snprintf(msg, msg_n, "%u components, 3 expected", (unsigned)im->numcomps);
        else
            snprintf(msg, msg_n, "a %ux%u image in a %ux%u tile",
                     (unsigned)(im->x1 - im->x0), (unsigned)(im->y1 - im->y0), (unsigned)w,
                     (unsigned)h);
        goto out;
    }
    if (!opj_decode(codec, stream, im) || !opj_end_decompress(codec, stream)) {
        if (!msg[0])
            snprintf(msg, msg_n, "OpenJPEG could not decode it");
        goto out;
    }
    if (!check_image(im, w, h, msg, msg_n))
        goto out;
    for (uint32_t y = 0; y < h; y++) {
        uint8_t *d = dst + (size_t)y * w * 3;

        for (uint32_t x = 0; x < w; x++, d += 3) {
            const uint8_t c0 = comp_sample(&im->comps[0], x, y);
            const uint8_t c1 = comp_sample(&im->comps[1], x, y);
            const uint8_t c2 = comp_sample(&im->comps[2], x, y);

            if (ycbcr) {
                const int32_t g = ycc_g_cb[c1] + ycc_g_cr[c2];
                /* floor division: >> of a negative number is implementation-defined in C */
                const int32_t g16 = g >= 0 ? g / 65536 : -((-g + 65535) / 65536);

                d[0] = clamp_u8(c0 + ycc_r_cr[c2]);
                d[1] = clamp_u8(c0 + g16);
                d[2] = clamp_u8(c0 + ycc_b_cb[c1]);
            } else {
                d[0] = c0;
                d[1] = c1;
                d[2] = c2;
            }
        }
    }
    ok = true;
out:
    if (im)
        opj_image_destroy(im);
    if (stream)
        opj_stream_destroy(stream);
    if (codec)
        opj_destroy_codec(codec);
    return ok;
}
