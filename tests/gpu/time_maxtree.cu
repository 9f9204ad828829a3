/* SPDX-License-Identifier: MIT */
/* tilewave tests: kernel timings of the CUDA max-tree and its tile policies (a dev tool). */
/*
 * Not part of the build: compiled by hand on a GPU machine after the library, e.g.
 *   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -DTW_HAVE_CUDA -Iinclude \
 *     -Ibuild-gpu/include -Ikern -Icuda -Iomp tests/gpu/time_maxtree.cu \
 *     build-gpu/libtilewave_static.a -Xcompiler -fopenmp -o time_maxtree
 * It includes cuda/maxtree_cuda.cu to reach the templated launchers, times the three kernels
 * with CUDA events (median of REPS runs after a warm-up) on smooth-plus-noise images (8- and
 * 16-bit) and pure noise, for the default policy and alternatives, and checks every policy's
 * output against the CPU twin; the default policy also prints CONNECT counters (stats/px).
 * Usage: time_maxtree [REPS] [sweep: 0/1] [IMAGE BITS CONN DEFAULT-ONLY] (the last four pick
 * one case, e.g. `1 0 2 16 4 1` for ncu on 16-bit noise, 4-conn).
 */
#include "../../cuda/maxtree_cuda.cu"
#include "omp_kernels.h" /* the CPU twin the policies are checked against */

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sanitize_common.h" /* CK, and twtest_rnd.h */

namespace
{

template <int TW_, int SUB_, int NS_> struct Pol : MtPolicyBase {
    static constexpr int TW = TW_;
    static constexpr int SUB = SUB_;
    static constexpr int NS = NS_;
};

__device__ unsigned long long g_stats[8];

/* The same policy with the counters on. */
template <class B> struct Stat : B {
    static constexpr bool STATS = true;
    static __device__ void stat(int i, unsigned long long v) { atomicAdd(&g_stats[i], v); }
};

uint64_t rs = 88172645463325252ull;

double
urand()
{
    return twtest_rnd_unit(&rs);
}

/* Smooth field (a few random low-frequency waves and blobs) in [0, 1], plus uniform noise of
 * +-noise, quantised to maxv. kind 1: pure noise. */
std::vector<uint16_t>
make_image(int w, int h, int kind, unsigned maxv, double noise)
{
    std::vector<uint16_t> im((size_t)w * h);
    double fx[4], fy[4], ph[4], bx[6], by[6], br[6];

    for (int i = 0; i < 4; i++) {
        fx[i] = (0.5 + 3 * urand()) * 2 * M_PI / w;
        fy[i] = (0.5 + 3 * urand()) * 2 * M_PI / h;
        ph[i] = 2 * M_PI * urand();
    }
    for (int i = 0; i < 6; i++) {
        bx[i] = urand() * w;
        by[i] = urand() * h;
        br[i] = (0.05 + 0.2 * urand()) * std::min(w, h);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double v;

            if (kind == 1) {
                v = urand();
            } else {
                v = 0;
                for (int i = 0; i < 4; i++)
                    v += 0.12 * std::sin(fx[i] * x + fy[i] * y + ph[i]);
                for (int i = 0; i < 6; i++) {
                    const double dx = (x - bx[i]) / br[i], dy = (y - by[i]) / br[i];

                    v += 0.3 * std::exp(-(dx * dx + dy * dy));
                }
                v = 0.5 + 0.5 * v + noise * (2 * urand() - 1);
            }
            v = std::min(1.0, std::max(0.0, v));
            im[(size_t)y * w + x] = (uint16_t)std::lround(v * maxv);
        }
    return im;
}

struct Dev {
    void *in = nullptr, *out = nullptr, *scr = nullptr;
    u64 *grec = nullptr;
};

template <class T, int CONN, class P>
void
run_once(const tw_tile_view &vin, tw_tile_view &vout, const Geo &g, u64 *grec, cudaEvent_t *ev)
{
    const unsigned char *src = static_cast<const unsigned char *>(vin.data);
    const uint32_t nh = (uint32_t)((g.tiles_y - 1) * g.w), nv = (uint32_t)((g.tiles_x - 1) * g.h);
    const dim3 fgrid((unsigned)ceil_div(g.w, P::FLAT_THREADS),
                     (unsigned)(g.h < 65535 ? g.h : 65535));

    cudaEventRecord(ev[0]);
    mt_tile<T, CONN, P>
        <<<(unsigned)(g.tiles_x * g.tiles_y), dim3(P::TW, P::NS)>>>(src, vin.stride, g, grec);
    cudaEventRecord(ev[1]);
    if ((uint64_t)nh + nv > 0)
        mt_merge<T, CONN, P>
            <<<(unsigned)ceil_div((int64_t)nh + nv, P::MERGE_THREADS), P::MERGE_THREADS>>>(
                src, vin.stride, g, nh, nv, grec);
    cudaEventRecord(ev[2]);
    mt_flatten<flat_compress<T, CONN>()><<<fgrid, P::FLAT_THREADS>>>(
        grec, g, static_cast<unsigned char *>(vout.data), vout.stride);
    cudaEventRecord(ev[3]);
}

/* Median total and per-kernel ms over reps; checks the output against `want`. */
template <class T, int CONN, class P>
void
time_policy(const char *name, const char *img, const tw_tile_view &vin, tw_tile_view &vout,
            u64 *grec, const std::vector<uint32_t> &want, int reps, bool stats = false)
{
    cudaEvent_t ev[4];
    std::vector<double> tot, k1, k2, k3;
    const size_t n = (size_t)vin.w * vin.h;
    std::vector<uint32_t> got(n);

    for (auto &e : ev)
        CK(cudaEventCreate(&e));
    CK(cudaMemset(vout.data, 0, n * 4));
    const Geo g = make_geo<P>(vin.w, vin.h);
    for (int r = -1; r < reps; r++) {
        run_once<T, CONN, P>(vin, vout, g, grec, ev);
        CK(cudaEventSynchronize(ev[3]));
        CK(cudaGetLastError());
        float a, b, c;
        cudaEventElapsedTime(&a, ev[0], ev[1]);
        cudaEventElapsedTime(&b, ev[1], ev[2]);
        cudaEventElapsedTime(&c, ev[2], ev[3]);
        if (r >= 0) {
            k1.push_back(a);
            k2.push_back(b);
            k3.push_back(c);
            tot.push_back((double)a + b + c);
        }
    }
    CK(cudaMemcpy(got.data(), vout.data, n * 4, cudaMemcpyDeviceToHost));
    unsigned long long st[2][8];
    if (stats) {
        typedef Stat<P> SP;
        const unsigned long long zero[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        const unsigned char *src = static_cast<const unsigned char *>(vin.data);
        const uint32_t nh = (uint32_t)((g.tiles_y - 1) * g.w),
                       nv = (uint32_t)((g.tiles_x - 1) * g.h);
        CK(cudaMemcpyToSymbol(g_stats, zero, sizeof zero));
        mt_tile<T, CONN, SP>
            <<<(unsigned)(g.tiles_x * g.tiles_y), dim3(SP::TW, SP::NS)>>>(src, vin.stride, g, grec);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpyFromSymbol(st[0], g_stats, sizeof zero));
        CK(cudaMemcpyToSymbol(g_stats, zero, sizeof zero));
        mt_merge<T, CONN, SP>
            <<<(unsigned)ceil_div((int64_t)nh + nv, SP::MERGE_THREADS), SP::MERGE_THREADS>>>(
                src, vin.stride, g, nh, nv, grec);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpyFromSymbol(st[1], g_stats, sizeof zero));
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += got[i] != want[i];
    auto med = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const double t = med(tot);
    printf("%-22s %-26s conn %d: %8.3f ms  %7.2f GPix/s  (tile %.3f merge %.3f flatten %.3f)%s\n",
           name, img, CONN, t, (double)n / (t * 1e6), med(k1), med(k2), med(k3),
           bad ? "  WRONG" : "");
    if (bad)
        printf("   %zu pixels differ from the CPU twin\n", bad);
    if (stats) {
        const double np = (double)n,
                     cyc = (double)(st[0][ST_T_TREE] + st[0][ST_T_MERGE] + st[0][ST_T_FLAT]);
        printf("   stats/px tile: calls %.3f rounds %.3f steps %.3f lost %.4f flat %.3f | cycles "
               "tree %.0f%% merge %.0f%% flat %.0f%%"
               " | merge kernel: calls %.4f rounds %.3f steps %.3f lost %.4f\n",
               st[0][0] / np, st[0][1] / np, st[0][2] / np, st[0][3] / np, st[0][7] / np,
               100 * st[0][ST_T_TREE] / cyc, 100 * st[0][ST_T_MERGE] / cyc,
               100 * st[0][ST_T_FLAT] / cyc, st[1][0] / np, st[1][1] / np, st[1][2] / np,
               st[1][3] / np);
    }
    fflush(stdout);
    for (auto &e : ev)
        cudaEventDestroy(e);
}

bool g_only_default = false;

template <class T, int CONN>
void
bench_image(const char *img, const std::vector<uint16_t> &im16, int w, int h, int reps, bool sweep,
            Dev &d)
{
    const size_t n = (size_t)w * h;
    std::vector<T> im(n);
    for (size_t i = 0; i < n; i++)
        im[i] = (T)im16[i];
    const tw_sample_type type = sizeof(T) == 1 ? TW_U8 : TW_U16;
    tw_tile_view cin = {im.data(), (int64_t)(w * sizeof(T)), w, h, 1, type, 0, 0};
    std::vector<uint32_t> want(n);
    tw_tile_view cout = {want.data(), (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    if (twi_omp_maxtree(&cin, CONN, &cout, 16) != TW_OK) {
        printf("CPU twin failed\n");
        exit(2);
    }
    CK(cudaMemcpy(d.in, im.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    tw_tile_view vin = {d.in, (int64_t)(w * sizeof(T)), w, h, 1, type, 0, 0};
    tw_tile_view vout = {d.out, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};

    time_policy<T, CONN, MtPolicy<T>>("default", img, vin, vout, d.grec, want, reps,
                                      !g_only_default);
    if (g_only_default)
        return;
    if (!sweep)
        return;
    time_policy<T, CONN, Pol<64, 16, 4>>("64x64 (16x4)", img, vin, vout, d.grec, want, reps);
    time_policy<T, CONN, Pol<32, 16, 4>>("32x64 (16x4)", img, vin, vout, d.grec, want, reps);
    time_policy<T, CONN, Pol<64, 16, 2>>("64x32 (16x2)", img, vin, vout, d.grec, want, reps);
    time_policy<T, CONN, Pol<64, 16, 1>>("64x16 (16x1)", img, vin, vout, d.grec, want, reps);
    time_policy<T, CONN, Pol<32, 16, 8>>("32x128 (16x8)", img, vin, vout, d.grec, want, reps);
    time_policy<T, CONN, Pol<128, 16, 2>>("128x32 (16x2)", img, vin, vout, d.grec, want, reps);
}

} // namespace

int
main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 7;
    const bool sweep = argc > 2 && atoi(argv[2]) != 0;
    /* [IMAGE (0-2, -1 all) [BITS (8/16, 0 both) [CONN (4/8, 0 both) [DEFAULT ONLY: 0/1]]]]:
     * one case alone, for a profiler */
    const int only_img = argc > 3 ? atoi(argv[3]) : -1, only_bits = argc > 4 ? atoi(argv[4]) : 0;
    const int only_conn = argc > 5 ? atoi(argv[5]) : 0;
    g_only_default = argc > 6 && atoi(argv[6]) != 0;
    struct {
        const char *name;
        int w, h, kind;
    } imgs[] = {{"6000x4000 smooth+noise", 6000, 4000, 0},
                {"8192x8192 smooth+noise", 8192, 8192, 0},
                {"8192x8192 noise", 8192, 8192, 1}};
    Dev d;
    const size_t maxn = (size_t)8192 * 8192;
    cudaDeviceProp prop;

    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    CK(cudaMalloc(&d.in, maxn * 2));
    CK(cudaMalloc(&d.out, maxn * 4));
    CK(cudaMalloc(&d.scr, twi_cuda_maxtree_scratch_size(8192, 8192, TW_U16, 8)));
    d.grec = aligned_base(d.scr);
    for (int ii = 0; ii < 3; ii++) {
        const auto &im = imgs[ii];
        if (only_img >= 0 && ii != only_img)
            continue;
        /* 8-bit: noise +-4 levels; 16-bit: the same field over 0..65535 with +-2 % noise */
        const std::vector<uint16_t> i8 = make_image(im.w, im.h, im.kind, 255, 4.0 / 255);
        const std::vector<uint16_t> i16 = make_image(im.w, im.h, im.kind, 65535, 0.02);
        char n8[64], n16[64];

        snprintf(n8, sizeof n8, "%s u8", im.name);
        snprintf(n16, sizeof n16, "%s u16", im.name);
        const bool b8 = only_bits != 16, b16 = only_bits != 8;
        const bool c4 = only_conn != 8, c8 = only_conn != 4;
        if (b8 && c4)
            bench_image<uint8_t, 4>(n8, i8, im.w, im.h, reps, sweep && im.kind == 0, d);
        if (b8 && c8)
            bench_image<uint8_t, 8>(n8, i8, im.w, im.h, reps, sweep && im.kind == 0, d);
        if (b16 && c4)
            bench_image<uint16_t, 4>(n16, i16, im.w, im.h, reps, sweep && im.kind == 0, d);
        if (b16 && c8)
            bench_image<uint16_t, 8>(n16, i16, im.w, im.h, reps, sweep && im.kind == 0, d);
    }
    cudaFree(d.in);
    cudaFree(d.out);
    cudaFree(d.scr);
    return 0;
}
