/* SPDX-License-Identifier: MIT */
/* tilewave bench: `tw_bench edt`, the distance transform: CPU kernel, CUDA kernel or the job. */
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_kernels.h"
#endif

#include "bench.h"
#include "omp_kernels.h"
#include "tw_internal.h"

static const char help[] =
    "Usage: tw_bench edt --size WxH (--kernel cpu|cuda | --job) [options]\n"
    "\n"
    "Time the Euclidean distance transform of a generated binary image (0 = background):\n"
    "one warm-up, R timed runs, median, as one JSON line.\n"
    "  --kernel cpu   twi_omp_edt on the whole image in host memory, N OpenMP threads\n"
    "                 (host clock)\n"
    "  --kernel cuda  twi_cuda_edt with input, output and scratch already on the GPU\n"
    "                 (cudaMalloc here), CUDA events around the launch alone, as CuPy is timed\n"
    "  --job          tw_edt_submit with a tw_host_image input and the result in host memory:\n"
    "                 end to end through the runtime (copies to and from the GPU included)\n"
    "\n"
    "  --size WxH         image size (1..1048576 per side)\n"
    "  --background F     fraction of background pixels, random uniform (default 0.5)\n"
    "  --pattern P        random (default; pixel i is background when splitmix64 of\n"
    "                     (i + 1) * 0x9E3779B97F4A7C15 + seed * 0xD1B54A32D192ED03, shifted\n"
    "                     right by 11, is below F * 2^53: bench/peers.py makes the same image),\n"
    "                     corner (one background pixel at (0, 0): the largest distances),\n"
    "                     none (no background pixel) or cells (a foreground disk of random\n"
    "                     radius 8..39 in every 64x64 cell: curved shapes, for the\n"
    "                     wavefront's errors; tw_bench only)\n"
    "  --seed S           seed of the random pattern (default 1)\n"
    "  --format F         f32 (default), u16 or sq32\n"
    "  --method M         exact (default) or wavefront (the approximate IWPP EDT; the check\n"
    "                     then reports its errors against the exact transform)\n"
    "  --threads N        OpenMP threads of --kernel cpu (default: all cores)\n"
    "  --m1/--m2/--m3 N   PBA+ band counts of --kernel cuda (default 0: automatic); with --job\n"
    "                     they set edt.pba_m1..3\n"
    "  --variant V        --job: cpu, gpu (GPU workers only) or both (default)\n"
    "  --tile WxH         --job: tile size (default: edt.tile_size, else tile.size)\n"
    "  --set KEY=VALUE    --job: any configuration key (repeatable)\n"
    "  --pinned           --job: page-lock the caller's buffers (cudaHostRegister) first\n"
    "  --repeat R         timed runs (default 10 for kernels, 3 for --job)\n"
    "  --check C          none, sample (default: S pixels against brute force around them,\n"
    "                     or the formula for corner) or full (every pixel against\n"
    "                     twi_omp_edt exact: CUDA and job outputs must be the same bytes; the\n"
    "                     wavefront gets error statistics)\n"
    "  --samples S        pixels of --check sample (default 20000)\n"
    "  --dump FILE        write the last output, raw row-major samples of the format\n"
    "  --help             this help\n"
    "\n"
    "JSON fields: median_s / min_s / max_s of the timed runs, gpix_per_s, bg_pixels (the\n"
    "background pixels generated: peers check they got the same image), checked / unchecked\n"
    "/ wrong pixels of the check (unchecked: farther than 512 pixels from any background\n"
    "pixel, --check sample only), max_abs_err and mean_abs_err in pixels (the wavefront; -1:\n"
    "a pixel infinite on one side only), and for --job the bands on CPU and GPU workers.\n"
    "Exit status 1 when an exact method gets a pixel wrong.\n";

#define MAX_SETS 32
/* Brute-force search radius cap of --check sample (pixels farther from any background pixel
 * are counted as unchecked). */
#define SAMPLE_RADIUS_CAP 512

typedef struct edt_params {
    const char *mode; /* cpu, cuda, job */
    int64_t w, h;
    double background;
    const char *pattern; /* random, corner, none */
    int64_t seed;
    const char *format_name;
    int format; /* twi_edt_format */
    int wavefront;
    int64_t threads, m1, m2, m3, repeat;
    const char *variant, *tile;
    const char *sets[MAX_SETS];
    int n_sets;
    int pinned;
    const char *check; /* none, sample, full */
    int64_t samples;
    const char *dump;
} edt_params;

/* What a check found: pixels compared, pixels it could not decide, wrong ones and, for the
 * wavefront, the error in distance units. */
typedef struct edt_check {
    int64_t checked, unchecked, wrong;
    double max_abs_err, sum_abs_err;
} edt_check;

/* ---- the input, identical to bench/peers.py edt_binary() */

static int
is_background(uint64_t i, uint64_t seed, uint64_t thr)
{
    return (twtest_mix64((i + 1) * 0x9E3779B97F4A7C15u + seed * 0xD1B54A32D192ED03u) >> 11) < thr;
}

/* The cells pattern: a disk of random radius 8..39 centred in every 64x64 cell (clipped by
 * the cell), foreground inside: curved shapes whose distances reach about 30 pixels. */
static int
in_cell_disk(int64_t x, int64_t y, uint64_t seed)
{
    uint64_t c = twtest_mix64((uint64_t)(y >> 6) * 0x9E3779B97F4A7C15u ^ (uint64_t)(x >> 6) ^
                         seed * 0xD1B54A32D192ED03u);
    int64_t r = 8 + (int64_t)(c & 31), fx = (x & 63) - 32, fy = (y & 63) - 32;

    return fx * fx + fy * fy <= r * r;
}

/* Fill bin (0 = background, 1 = foreground); return the number of background pixels. */
static int64_t
generate(uint8_t *bin, const edt_params *p)
{
    int64_t w = p->w, h = p->h, count = 0;
    uint64_t thr = (uint64_t)(p->background * 9007199254740992.0); /* F * 2^53 */
    uint64_t seed = (uint64_t)p->seed;

    if (strcmp(p->pattern, "cells") == 0) {
#pragma omp parallel for schedule(static) reduction(+ : count)
        for (int64_t y = 0; y < h; y++) {
            uint8_t *row = bin + y * w;

            for (int64_t x = 0; x < w; x++) {
                int b = !in_cell_disk(x, y, seed);

                row[x] = (uint8_t)!b;
                count += b;
            }
        }
        return count;
    }
    if (strcmp(p->pattern, "random") != 0) {
#pragma omp parallel for schedule(static)
        for (int64_t y = 0; y < h; y++)
            memset(bin + y * w, 1, (size_t)w);
        if (strcmp(p->pattern, "corner") == 0) {
            bin[0] = 0;
            count = 1;
        }
        return count;
    }
#pragma omp parallel for schedule(static) reduction(+ : count)
    for (int64_t y = 0; y < h; y++) {
        uint8_t *row = bin + y * w;

        for (int64_t x = 0; x < w; x++) {
            int b = is_background((uint64_t)(y * w + x), seed, thr);

            row[x] = (uint8_t)!b;
            count += b;
        }
    }
    return count;
}

/* ---- checks */

static size_t
format_size(int format)
{
    return format == TWI_EDT_F32 ? 4 : format == TWI_EDT_U16 ? 2 : 4;
}

static tw_sample_type
format_type(int format)
{
    return format == TWI_EDT_F32 ? TW_F32 : format == TWI_EDT_U16 ? TW_U16 : TW_U32;
}

/* The distance stored at pixel i, in pixels (inf when it says "no background"). */
static double
stored_distance(const void *out, int format, size_t i)
{
    if (format == TWI_EDT_F32)
        return (double)((const float *)out)[i];
    if (format == TWI_EDT_U16) {
        uint16_t v = ((const uint16_t *)out)[i];
        return v == UINT16_MAX ? INFINITY : (double)v;
    }
    uint32_t v = ((const uint32_t *)out)[i];
    return v == UINT32_MAX ? INFINITY : sqrt((double)v);
}

/* Whether pixel i holds exactly what the format's contract says for squared distance d2
 * (d2 < 0: no background pixel anywhere). */
static int
stored_equals(const void *out, int format, size_t i, int64_t d2)
{
    if (format == TWI_EDT_F32) {
        float v = ((const float *)out)[i];
        return d2 < 0 ? isinf(v) && v > 0 : v == (float)sqrt((double)d2);
    }
    if (format == TWI_EDT_U16) {
        double r = d2 < 0 ? 65535.0 : floor(sqrt((double)d2) + 0.5);
        return ((const uint16_t *)out)[i] == (uint16_t)(r > 65535.0 ? 65535.0 : r);
    }
    return ((const uint32_t *)out)[i] ==
           (d2 < 0 || d2 > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)d2);
}

/* Exact squared distance of (x, y) by brute force in growing squares around it; -2 when no
 * background pixel lies within SAMPLE_RADIUS_CAP (and the square is not the whole image), -1
 * when there is none at all. */
static int64_t
brute_d2(const uint8_t *bin, const edt_params *p, int64_t bg, int64_t x, int64_t y)
{
    int64_t w = p->w, h = p->h;

    if (bg == 0)
        return -1;
    if (strcmp(p->pattern, "corner") == 0)
        return x * x + y * y;
    if (bin[y * w + x] == 0)
        return 0;
    for (int64_t r = 1;; r *= 2) {
        int64_t best = INT64_MAX;
        int64_t x0 = x - r < 0 ? 0 : x - r, x1 = x + r >= w ? w - 1 : x + r;
        int64_t y0 = y - r < 0 ? 0 : y - r, y1 = y + r >= h ? h - 1 : y + r;
        int whole = x0 == 0 && y0 == 0 && x1 == w - 1 && y1 == h - 1;

        for (int64_t yy = y0; yy <= y1; yy++)
            for (int64_t xx = x0; xx <= x1; xx++)
                if (bin[yy * w + xx] == 0) {
                    int64_t d2 = (xx - x) * (xx - x) + (yy - y) * (yy - y);
                    if (d2 < best)
                        best = d2;
                }
        /* Every pixel within distance r lies in the square: a nearest one found at most r
         * away is the nearest of the image. */
        if (best <= r * r || (whole && best != INT64_MAX))
            return best;
        if (whole)
            return -1;
        if (r >= SAMPLE_RADIUS_CAP)
            return -2;
    }
}

static void
account(edt_check *c, const void *out, int format, size_t i, int64_t d2)
{
    double want, got, err;

    c->checked++;
    if (stored_equals(out, format, i, d2))
        return;
    c->wrong++;
    want = d2 < 0 ? INFINITY : sqrt((double)d2);
    got = stored_distance(out, format, i);
    err = isinf(want) || isinf(got) ? (isinf(want) && isinf(got) ? 0.0 : 1e300) : fabs(got - want);
    if (err > c->max_abs_err)
        c->max_abs_err = err;
    c->sum_abs_err += err < 1e300 ? err : 0.0;
}

static void
check_sample(const uint8_t *bin, const void *out, const edt_params *p, int64_t bg,
             edt_check *c)
{
    uint64_t n = (uint64_t)p->w * (uint64_t)p->h;

    for (int64_t k = 0; k < p->samples; k++) {
        /* The first and last pixels, then pseudo-random ones. */
        uint64_t i = k == 0   ? 0
                     : k == 1 ? n - 1
                              : twtest_mix64((uint64_t)k * 0x9E3779B97F4A7C15u) % n;
        int64_t x = (int64_t)(i % (uint64_t)p->w), y = (int64_t)(i / (uint64_t)p->w);
        int64_t d2 = brute_d2(bin, p, bg, x, y);

        if (d2 == -2)
            c->unchecked++;
        else
            account(c, out, p->format, (size_t)i, d2);
    }
}

static tw_tile_view
view(void *data, int64_t w, int64_t h, int channels, tw_sample_type type)
{
    tw_tile_view v;

    memset(&v, 0, sizeof v);
    v.data = data;
    v.w = (int32_t)w;
    v.h = (int32_t)h;
    v.channels = channels;
    v.type = type;
    v.stride = w * channels * (int64_t)tw_sample_size(type);
    return v;
}

static twi_edt_band
band_of(const edt_params *p)
{
    twi_edt_band b;

    memset(&b, 0, sizeof b);
    b.sx = b.sy = 1.0;
    b.format = p->format;
    b.m1 = (int32_t)p->m1;
    b.m2 = (int32_t)p->m2;
    b.m3 = (int32_t)p->m3;
    return b;
}

/* Every pixel against the exact CPU kernel: must be the same bytes for an exact method;
 * error statistics for the wavefront. */
static int
check_full(const uint8_t *bin, const void *out, const edt_params *p, int threads, edt_check *c)
{
    size_t n = (size_t)p->w * (size_t)p->h, es = format_size(p->format);
    void *ref = malloc(n * es);
    tw_tile_view vb = view((void *)(uintptr_t)bin, p->w, p->h, 1, TW_U8);
    tw_tile_view vr = view(ref, p->w, p->h, 1, format_type(p->format));
    twi_edt_band band = band_of(p);
    int64_t wrong = 0;
    double maxe = 0.0, sume = 0.0;
    tw_status st;

    if (!ref)
        return bench_fail("out of memory for the reference of --check full");
    if ((st = twi_omp_edt(&vb, &band, &vr, NULL, threads)) != TW_OK) {
        free(ref);
        return bench_fail("twi_omp_edt (reference) failed: %s", tw_status_string(st));
    }
    c->checked = (int64_t)n;
    if (!p->wavefront) {
        if (memcmp(ref, out, n * es) != 0) /* count them, for the message */
            for (size_t i = 0; i < n; i++)
                wrong += memcmp((const char *)ref + i * es, (const char *)out + i * es, es) != 0;
        c->wrong = wrong;
        free(ref);
        return BENCH_OK;
    }
#pragma omp parallel for schedule(static) reduction(+ : wrong, sume) reduction(max : maxe)
    for (int64_t i = 0; i < (int64_t)n; i++) {
        double a, b, e;

        if (memcmp((const char *)ref + (size_t)i * es, (const char *)out + (size_t)i * es, es) ==
            0)
            continue;
        wrong++;
        a = stored_distance(out, p->format, (size_t)i);
        b = stored_distance(ref, p->format, (size_t)i);
        e = isinf(a) || isinf(b) ? 0.0 : fabs(a - b);
        sume += e;
        if (e > maxe)
            maxe = e;
    }
    c->wrong = wrong;
    c->max_abs_err = maxe;
    c->sum_abs_err = sume;
    free(ref);
    return BENCH_OK;
}

static int
verify(const uint8_t *bin, const void *out, const edt_params *p, int64_t bg, int threads,
       edt_check *c)
{
    int rc = BENCH_OK;

    memset(c, 0, sizeof *c);
    if (strcmp(p->check, "full") == 0 && !(strcmp(p->mode, "cpu") == 0 && !p->wavefront))
        rc = check_full(bin, out, p, threads, c);
    else if (strcmp(p->check, "none") != 0)
        check_sample(bin, out, p, bg, c);
    if (rc == BENCH_OK && c->wrong && !p->wavefront)
        rc = bench_fail("%lld of %lld checked pixels are wrong (%s check, %lldx%lld %s)",
                        (long long)c->wrong, (long long)c->checked, p->check, (long long)p->w,
                        (long long)p->h, p->pattern);
    return rc;
}

static int
dump(const void *out, const edt_params *p)
{
    size_t n = (size_t)p->w * (size_t)p->h, es = format_size(p->format);
    FILE *f;
    int ok;

    if (!p->dump)
        return BENCH_OK;
    if (!(f = fopen(p->dump, "wb")))
        return bench_fail("cannot write '%s'", p->dump);
    ok = fwrite(out, es, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? BENCH_OK : bench_fail("cannot write '%s'", p->dump);
}

/* ---- output */

static void
print_result(const edt_params *p, int threads, double *t, int64_t bg, double gen_s,
             const edt_check *c, const char *extra)
{
    int r = (int)p->repeat;
    double lo = bench_min(t, r), hi = bench_max(t, r), med = bench_median(t, r);
    double px = (double)p->w * (double)p->h;

    printf("{\"bench\": \"edt\", \"mode\": \"%s\", \"method\": \"%s\", \"pattern\": \"%s\", "
           "\"background\": %.6g, \"seed\": %lld, \"w\": %lld, \"h\": %lld, \"format\": \"%s\", "
           "\"threads\": %d, \"repeat\": %d, \"median_s\": %.6f, \"min_s\": %.6f, "
           "\"max_s\": %.6f, \"median_ms\": %.3f, \"gpix_per_s\": %.4f, \"bg_pixels\": %lld, "
           "\"generate_s\": %.3f, \"peak_rss_mib\": %.1f, \"check\": \"%s\", \"checked\": %lld, "
           "\"unchecked\": %lld, \"wrong\": %lld, \"max_abs_err\": %.6g, "
           "\"mean_abs_err\": %.6g%s}\n",
           p->mode, p->wavefront ? "wavefront" : "exact", p->pattern, p->background,
           (long long)p->seed, (long long)p->w, (long long)p->h, p->format_name, threads, r, med,
           lo, hi, med * 1e3, px / med * 1e-9, (long long)bg, gen_s, bench_peak_rss_mib(),
           p->check, (long long)c->checked, (long long)c->unchecked, (long long)c->wrong,
           c->max_abs_err >= 1e300 ? -1.0 : c->max_abs_err,
           c->checked ? c->sum_abs_err / (double)c->checked : 0.0, extra ? extra : "");
    fflush(stdout);
}

/* ---- --kernel cpu */

static int
run_cpu(const edt_params *p, double *t)
{
    size_t n = (size_t)p->w * (size_t)p->h;
    uint8_t *bin = malloc(n);
    void *out = malloc(n * format_size(p->format));
    int threads = (int)p->threads;
    tw_tile_view vb, vo;
    twi_edt_band band = band_of(p);
    edt_check c;
    double gen_s;
    int64_t bg;
    int rc = BENCH_OK;

    if (!bin || !out) {
        rc = bench_fail("out of memory (%lldx%lld)", (long long)p->w, (long long)p->h);
        goto out;
    }
    gen_s = bench_now();
    bg = generate(bin, p);
    gen_s = bench_now() - gen_s;
    vb = view(bin, p->w, p->h, 1, TW_U8);
    vo = view(out, p->w, p->h, 1, format_type(p->format));
    for (int64_t r = -1; r < p->repeat; r++) {
        double t0 = bench_now();
        tw_status st = p->wavefront ? twi_omp_edt_wavefront(&vb, &band, &vo, NULL, threads)
                                    : twi_omp_edt(&vb, &band, &vo, NULL, threads);

        if (st != TW_OK) {
            rc = bench_fail("twi_omp_edt%s failed: %s", p->wavefront ? "_wavefront" : "",
                            tw_status_string(st));
            goto out;
        }
        if (r >= 0)
            t[r] = bench_now() - t0;
    }
    if ((rc = verify(bin, out, p, bg, threads, &c)) != BENCH_OK || (rc = dump(out, p)) != BENCH_OK)
        goto out;
    print_result(p, threads, t, bg, gen_s, &c, NULL);
out:
    free(out);
    free(bin);
    return rc;
}

/* ---- --kernel cuda */

#ifdef TW_HAVE_CUDA
static int
run_cuda(const edt_params *p, double *t)
{
    size_t n = (size_t)p->w * (size_t)p->h, es = format_size(p->format), scratch = 0;
    uint8_t *bin = malloc(n);
    void *out = malloc(n * es), *d_bin = NULL, *d_out = NULL, *d_scratch = NULL;
    int threads = omp_get_num_procs();
    cudaStream_t stream = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaError_t ce = cudaSuccess;
    twi_edt_band band = band_of(p);
    tw_tile_view vb, vo;
    const char *what = "";
    char extra[256];
    edt_check c;
    double gen_s;
    int64_t bg;
    int rc = BENCH_OK;

#define CK(call)                                                                                \
    do {                                                                                        \
        what = #call;                                                                           \
        if ((ce = (call)) != cudaSuccess)                                                       \
            goto cuda_error;                                                                    \
    } while (0)

    if (!bin || !out) {
        rc = bench_fail("out of memory (%lldx%lld)", (long long)p->w, (long long)p->h);
        goto out;
    }
    gen_s = bench_now();
    bg = generate(bin, p);
    gen_s = bench_now() - gen_s;
    scratch = p->wavefront ? twi_cuda_edt_wavefront_scratch_size((int32_t)p->w, (int32_t)p->h)
                           : twi_cuda_edt_scratch_size((int32_t)p->w, (int32_t)p->h, &band);
    CK(cudaMalloc(&d_bin, n));
    CK(cudaMalloc(&d_out, n * es));
    if (scratch)
        CK(cudaMalloc(&d_scratch, scratch));
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpyAsync(d_bin, bin, n, cudaMemcpyHostToDevice, stream));
    CK(cudaStreamSynchronize(stream));
    vb = view(d_bin, p->w, p->h, 1, TW_U8);
    vo = view(d_out, p->w, p->h, 1, format_type(p->format));
    for (int64_t r = -1; r < p->repeat; r++) {
        float ms = 0.0f;
        tw_status st;

        CK(cudaEventRecord(e0, stream));
        st = p->wavefront ? twi_cuda_edt_wavefront(&vb, &band, &vo, NULL, d_scratch, scratch,
                                                   stream)
                          : twi_cuda_edt(&vb, &band, &vo, NULL, d_scratch, scratch, stream);
        if (st != TW_OK) {
            rc = bench_fail("twi_cuda_edt%s failed: %s (%s)", p->wavefront ? "_wavefront" : "",
                            tw_status_string(st), cudaGetErrorString(cudaGetLastError()));
            goto out;
        }
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            t[r] = (double)ms * 1e-3;
    }
    CK(cudaMemcpy(out, d_out, n * es, cudaMemcpyDeviceToHost));
    if ((rc = verify(bin, out, p, bg, threads, &c)) != BENCH_OK || (rc = dump(out, p)) != BENCH_OK)
        goto out;
    snprintf(extra, sizeof extra, ", \"m1\": %lld, \"m2\": %lld, \"m3\": %lld, "
             "\"scratch_mib\": %.1f, \"device_mib\": %.1f",
             (long long)p->m1, (long long)p->m2, (long long)p->m3, (double)scratch / 1048576.0,
             (double)(scratch + n + n * es) / 1048576.0);
    print_result(p, 0, t, bg, gen_s, &c, extra);
    goto out;
cuda_error:
    rc = bench_fail("%s: %s", what, cudaGetErrorString(ce));
out:
#undef CK
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (stream)
        cudaStreamDestroy(stream);
    if (d_scratch)
        cudaFree(d_scratch);
    if (d_out)
        cudaFree(d_out);
    if (d_bin)
        cudaFree(d_bin);
    free(out);
    free(bin);
    return rc;
}
#endif

/* ---- --job */

static int
job_config(const edt_params *p, tw_config *cfg)
{
    static const char *const keys[] = {"edt.pba_m1", "edt.pba_m2", "edt.pba_m3"};
    int64_t m[3] = {p->m1, p->m2, p->m3};
    int rc;

    if ((rc = bench_variant_config(cfg, p->variant)) != BENCH_OK)
        return rc;
    for (int i = 0; i < 3; i++) {
        char kv[64];

        if (m[i] == 0)
            continue;
        snprintf(kv, sizeof kv, "%s=%lld", keys[i], (long long)m[i]);
        if ((rc = bench_apply_set(cfg, kv)) != BENCH_OK)
            return rc;
    }
    for (int i = 0; i < p->n_sets; i++)
        if ((rc = bench_apply_set(cfg, p->sets[i])) != BENCH_OK)
            return rc;
    return BENCH_OK;
}

static int
run_job_once(tw_runtime *rt, const tw_edt_opts *o, double *secs)
{
    tw_job *job = NULL;
    tw_error err;
    double t0 = bench_now();
    tw_status st = tw_edt_submit(rt, o, &job, &err);

    return bench_job_wait(st, job, &err, t0, secs);
}

static int
run_job(const edt_params *p, double *t)
{
    size_t n = (size_t)p->w * (size_t)p->h, es = format_size(p->format);
    uint8_t *bin = NULL;
    void *out = NULL;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    int threads = omp_get_num_procs(), pinned = 0;
    tw_edt_report rep;
    tw_edt_opts o;
    tw_error err;
    edt_check c;
    char extra[640];
    const char *policy = NULL;
    double gen_s;
    int64_t bg, tw = 0, th = 0;
    int rc = BENCH_OK;

    if (p->tile && twi_parse_dims(p->tile, 1, 65536, &tw, &th) != TW_OK)
        return bench_usage("--tile: bad size '%s' (want WxH, 1..65536)", p->tile);
    if (tw_config_create(&cfg) != TW_OK)
        return bench_fail("out of memory");
    if ((rc = job_config(p, cfg)) != BENCH_OK)
        goto out;
    if (tw_runtime_create(cfg, &rt, &err) != TW_OK) {
        rc = bench_fail("%s", err.message);
        goto out;
    }
    if (!(bin = malloc(n)) || !(out = malloc(n * es))) {
        rc = bench_fail("out of memory (%lldx%lld)", (long long)p->w, (long long)p->h);
        goto out;
    }
    gen_s = bench_now();
    bg = generate(bin, p);
    gen_s = bench_now() - gen_s;
#ifdef TW_HAVE_CUDA
    if (p->pinned && bench_gpu_count() > 0) {
        if (cudaHostRegister(bin, n, cudaHostRegisterDefault) != cudaSuccess ||
            cudaHostRegister(out, n * es, cudaHostRegisterDefault) != cudaSuccess) {
            rc = bench_fail("cudaHostRegister: %s", cudaGetErrorString(cudaGetLastError()));
            goto out;
        }
        pinned = 1;
    }
#endif
    tw_edt_opts_init(&o);
    tw_edt_report_init(&rep);
    o.image = (tw_host_image){bin, p->w, p->h, 0, TW_U8};
    o.result = (tw_host_image){out, p->w, p->h, 0, format_type(p->format)};
    o.format = p->format == TWI_EDT_F32 ? TW_EDT_F32
               : p->format == TWI_EDT_U16 ? TW_EDT_U16
                                          : TW_EDT_SQ32;
    o.method = p->wavefront ? TW_EDT_WAVEFRONT : TW_EDT_EXACT;
    o.tile_w = (int32_t)tw;
    o.tile_h = (int32_t)th;
    o.report = &rep;
    for (int64_t r = -1; r < p->repeat && rc == BENCH_OK; r++) {
        double s = 0.0;

        rc = run_job_once(rt, &o, &s);
        if (r >= 0)
            t[r] = s;
    }
    if (rc != BENCH_OK)
        goto out;
    if ((rc = verify(bin, out, p, bg, threads, &c)) != BENCH_OK || (rc = dump(out, p)) != BENCH_OK)
        goto out;
    if (tw_config_get_string(cfg, "runtime.policy", &policy) != TW_OK || !policy)
        policy = "?";
    snprintf(extra, sizeof extra, ", \"variant\": \"%s\", \"policy\": \"%s\", \"tile\": \"%s\", "
             "\"pinned\": %s, \"bands\": %lld, \"bands_cpu\": %lld, \"bands_cuda\": %lld, "
             "\"report_background\": %lld",
             p->variant, policy, p->tile ? p->tile : "default", pinned ? "true" : "false",
             (long long)rep.bands, (long long)rep.bands_cpu, (long long)rep.bands_cuda,
             (long long)rep.background);
    {
        size_t k = strlen(extra);
        FILE *m = fmemopen(extra + k, sizeof extra - k, "w");

        if (m) {
            bench_json_workers(m, rt, (int)p->repeat + 1);
            fclose(m);
        }
    }
    print_result(p, threads, t, bg, gen_s, &c, extra);
    if (rep.background != bg)
        rc = bench_fail("the job counted %lld background pixels, the generator %lld",
                        (long long)rep.background, (long long)bg);
out:
#ifdef TW_HAVE_CUDA
    if (pinned) {
        cudaHostUnregister(bin);
        cudaHostUnregister(out);
    }
#endif
    free(out);
    free(bin);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}

/* ---- options */

static int
parse_args(int argc, char **argv, edt_params *p)
{
    enum {
        O_SIZE = 1, O_KERNEL, O_JOB, O_BACKGROUND, O_PATTERN, O_SEED, O_FORMAT, O_METHOD,
        O_THREADS, O_M1, O_M2, O_M3, O_VARIANT, O_TILE, O_SET, O_PINNED, O_REPEAT, O_CHECK,
        O_SAMPLES, O_DUMP, O_HELP
    };
    static const struct option opts[] = {
        {"size", required_argument, NULL, O_SIZE},
        {"kernel", required_argument, NULL, O_KERNEL},
        {"job", no_argument, NULL, O_JOB},
        {"background", required_argument, NULL, O_BACKGROUND},
        {"pattern", required_argument, NULL, O_PATTERN},
        {"seed", required_argument, NULL, O_SEED},
        {"format", required_argument, NULL, O_FORMAT},
        {"method", required_argument, NULL, O_METHOD},
        {"threads", required_argument, NULL, O_THREADS},
        {"m1", required_argument, NULL, O_M1},
        {"m2", required_argument, NULL, O_M2},
        {"m3", required_argument, NULL, O_M3},
        {"variant", required_argument, NULL, O_VARIANT},
        {"tile", required_argument, NULL, O_TILE},
        {"set", required_argument, NULL, O_SET},
        {"pinned", no_argument, NULL, O_PINNED},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"check", required_argument, NULL, O_CHECK},
        {"samples", required_argument, NULL, O_SAMPLES},
        {"dump", required_argument, NULL, O_DUMP},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0}};
    int64_t repeat = 0;
    int opt, rc = BENCH_OK;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_SIZE:
            if (twi_parse_dims(optarg, 1, TWI_EDT_MAX_SIDE, &p->w, &p->h) != TW_OK)
                rc = bench_usage("--size: bad size '%s' (want WxH, 1..%d)", optarg,
                                 TWI_EDT_MAX_SIDE);
            break;
        case O_KERNEL: p->mode = optarg; break;
        case O_JOB: p->mode = "job"; break;
        case O_BACKGROUND:
            if (twi_parse_f64(optarg, &p->background) != TW_OK || !(p->background >= 0.0) ||
                p->background > 1.0)
                rc = bench_usage("--background: bad fraction '%s' (want 0..1)", optarg);
            break;
        case O_PATTERN: p->pattern = optarg; break;
        case O_SEED: rc = bench_parse_int("--seed", optarg, 0, INT64_MAX, &p->seed); break;
        case O_FORMAT: p->format_name = optarg; break;
        case O_METHOD:
            if (strcmp(optarg, "exact") != 0 && strcmp(optarg, "wavefront") != 0)
                rc = bench_usage("--method: unknown method '%s' (exact, wavefront)", optarg);
            p->wavefront = strcmp(optarg, "wavefront") == 0;
            break;
        case O_THREADS: rc = bench_parse_int("--threads", optarg, 1, 4096, &p->threads); break;
        case O_M1: rc = bench_parse_int("--m1", optarg, 0, 1024, &p->m1); break;
        case O_M2: rc = bench_parse_int("--m2", optarg, 0, 1024, &p->m2); break;
        case O_M3: rc = bench_parse_int("--m3", optarg, 0, 1024, &p->m3); break;
        case O_VARIANT: p->variant = optarg; break;
        case O_TILE: p->tile = optarg; break;
        case O_SET:
            if (p->n_sets == MAX_SETS)
                rc = bench_usage("--set: at most %d", MAX_SETS);
            else
                p->sets[p->n_sets++] = optarg;
            break;
        case O_PINNED: p->pinned = 1; break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat); break;
        case O_CHECK: p->check = optarg; break;
        case O_SAMPLES:
            rc = bench_parse_int("--samples", optarg, 0, 100000000, &p->samples);
            break;
        case O_DUMP: p->dump = optarg; break;
        case 'h':
        case O_HELP: fputs(help, stdout); return -1;
        default: rc = bench_usage("unknown option '%s'", argv[optind - 1]); break;
        }
        if (rc != BENCH_OK)
            return rc;
    }
    if (optind < argc)
        return bench_usage("unexpected argument '%s'", argv[optind]);
    if (p->w == 0)
        return bench_usage("missing --size");
    if (!p->mode)
        return bench_usage("missing --kernel cpu|cuda or --job");
    if (strcmp(p->mode, "cpu") != 0 && strcmp(p->mode, "cuda") != 0 &&
        strcmp(p->mode, "job") != 0)
        return bench_usage("--kernel: unknown kernel '%s' (cpu, cuda)", p->mode);
    if (strcmp(p->pattern, "random") != 0 && strcmp(p->pattern, "corner") != 0 &&
        strcmp(p->pattern, "none") != 0 && strcmp(p->pattern, "cells") != 0)
        return bench_usage("--pattern: unknown pattern '%s' (random, corner, none, cells)",
                           p->pattern);
    if (strcmp(p->format_name, "f32") == 0)
        p->format = TWI_EDT_F32;
    else if (strcmp(p->format_name, "u16") == 0)
        p->format = TWI_EDT_U16;
    else if (strcmp(p->format_name, "sq32") == 0)
        p->format = TWI_EDT_SQ32;
    else
        return bench_usage("--format: unknown format '%s' (f32, u16, sq32)", p->format_name);
    if (strcmp(p->check, "none") != 0 && strcmp(p->check, "sample") != 0 &&
        strcmp(p->check, "full") != 0)
        return bench_usage("--check: unknown check '%s' (none, sample, full)", p->check);
    if (strcmp(p->variant, "cpu") != 0 && strcmp(p->variant, "gpu") != 0 &&
        strcmp(p->variant, "both") != 0)
        return bench_usage("--variant: unknown variant '%s' (cpu, gpu, both)", p->variant);
    p->repeat = repeat ? repeat : strcmp(p->mode, "job") == 0 ? 3 : 10;
    return BENCH_OK;
}

int
bench_edt(int argc, char **argv)
{
    edt_params p;
    const char *missing;
    double *t = NULL;
    int rc;

    memset(&p, 0, sizeof p);
    p.background = 0.5;
    p.pattern = "random";
    p.seed = 1;
    p.format_name = "f32";
    p.threads = omp_get_num_procs();
    p.variant = "both";
    p.check = "sample";
    p.samples = 20000;
    if ((rc = parse_args(argc, argv, &p)) != BENCH_OK)
        return rc < 0 ? BENCH_OK : rc;
    bench_quiet_logs();
    if (strcmp(p.mode, "cuda") == 0 ||
        (strcmp(p.mode, "job") == 0 && strcmp(p.variant, "gpu") == 0)) {
        if ((missing = bench_gpu_missing()) != NULL) {
            bench_print_skipped("edt", p.mode, missing);
            return BENCH_OK;
        }
    }
    if (!(t = calloc((size_t)p.repeat, sizeof *t)))
        return bench_fail("out of memory");
    if (strcmp(p.mode, "cpu") == 0)
        rc = run_cpu(&p, t);
    else if (strcmp(p.mode, "job") == 0)
        rc = run_job(&p, t);
#ifdef TW_HAVE_CUDA
    else
        rc = run_cuda(&p, t);
#endif
    free(t);
    return rc;
}
