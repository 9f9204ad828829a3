/* SPDX-License-Identifier: MIT */
/* tilewave tests: helpers shared by the test programs (temp dirs, running the CLI). */
#include "twtest.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef TW_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

extern char **environ;

/* Every test program, however it is started: a runtime made from a plain tw_config_create()
 * (runtime.models = auto) keeps its cost models under a scratch cache directory, never the
 * user's ~/.cache (ctest sets the same; twtest_runtime*() and twtest_cli() use none). */
__attribute__((constructor)) static void
twtest_scratch_cache(void)
{
    const char *base = getenv("TILEWAVE_TEST_TMP");
    char dir[4096];

    snprintf(dir, sizeof dir, "%s/xdg-cache", base && *base ? base : "/tmp/twtest");
    setenv("XDG_CACHE_HOME", dir, 1);
}

char *
twtest_tmpdir(void)
{
    const char *base = getenv("TILEWAVE_TEST_TMP");
    char *path = malloc(4096);

    if (!path)
        return NULL;
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0755);
    snprintf(path, 4096, "%s/twtest-XXXXXX", base);
    if (!mkdtemp(path)) {
        free(path);
        return NULL;
    }
    return path;
}

void
twtest_rmtree(const char *dir)
{
    DIR *d;
    struct dirent *e;

    if (!dir || !(d = opendir(dir)))
        return;
    while ((e = readdir(d))) {
        char p[4096];
        struct stat st;

        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            twtest_rmtree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

char *
twtest_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

bool
twtest_exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

int
twtest_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

int
twtest_count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

int
twtest_open_files_in(pid_t pid, const char *dir, int *unlinked)
{
    char fd_dir[64], link[4200], target[4200];
    size_t dl = strlen(dir);
    DIR *d;
    struct dirent *e;
    int n = 0;

    *unlinked = 0;
    snprintf(fd_dir, sizeof fd_dir, "/proc/%d/fd", (int)pid);
    if (!(d = opendir(fd_dir)))
        return 0;
    while ((e = readdir(d))) {
        ssize_t len;

        snprintf(link, sizeof link, "%s/%s", fd_dir, e->d_name);
        len = readlink(link, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (strncmp(target, dir, dl) == 0 && target[dl] == '/') {
            n++;
            if (strstr(target, " (deleted)"))
                (*unlinked)++;
        }
    }
    closedir(d);
    return n;
}

pid_t
twtest_spawn_quiet(const char *const *argv)
{
    int devnull = open("/dev/null", O_RDWR);
    pid_t pid;

    cr_assert(devnull >= 0);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setenv("TILEWAVE_RUNTIME_MODELS", "none", 0);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execv(argv[0], (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    close(devnull);
    return pid;
}

bool
twtest_writer_started(pid_t pid, const char *dir, const char *name, bool *named)
{
    char prefix[512];
    int unlinked = 0;

    snprintf(prefix, sizeof prefix, ".%s.tw-", name);
    *named = twtest_count_prefixed(dir, prefix) > 0;
    return *named || (twtest_open_files_in(pid, dir, &unlinked) > 0 && unlinked > 0);
}

char *
twtest_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    cr_assert(f != NULL, "cannot open %s", path);
    cr_assert(fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0,
              "cannot size %s", path);
    buf = malloc((size_t)n + 1);
    cr_assert(buf != NULL);
    cr_assert(eq(sz, fread(buf, 1, (size_t)n, f), (size_t)n), "cannot read %s", path);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *
slurp_fd(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t r;

    lseek(fd, 0, SEEK_SET);
    while (buf && (r = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

twtest_run
twtest_cli(const char *const *args, const char *const *env)
{
    return twtest_exec(TW_CLI_PATH, args, env, NULL);
}

twtest_run
twtest_exec(const char *prog, const char *const *args, const char *const *env,
            const char *cwd)
{
    twtest_run r = {-1, NULL, NULL};
    char out_tmpl[] = "/tmp/twtest-out-XXXXXX", err_tmpl[] = "/tmp/twtest-err-XXXXXX";
    int fo = mkstemp(out_tmpl), fe = mkstemp(err_tmpl);
    size_t na = 0;
    pid_t pid;
    int ws;

    unlink(out_tmpl);
    unlink(err_tmpl);
    while (args && args[na])
        na++;
    pid = fork();
    if (pid == 0) {
        const char **argv = calloc(na + 2, sizeof *argv);
        int devnull = open("/dev/null", O_RDONLY);

        argv[0] = prog;
        for (size_t i = 0; i < na; i++)
            argv[i + 1] = args[i];
        /* Cost models in memory only, unless the caller's environment or `env` names a file. */
        setenv("TILEWAVE_RUNTIME_MODELS", "none", 0);
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        if (cwd && chdir(cwd) != 0)
            _exit(127);
        dup2(devnull, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execvp(prog, (char *const *)argv);
        _exit(127);
    }
    if (pid > 0 && waitpid(pid, &ws, 0) == pid)
        r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r.out = slurp_fd(fo);
    r.err = slurp_fd(fe);
    close(fo);
    close(fe);
    return r;
}

char *
twtest_slide_list(const char *dir, int n, int w, int h, const char *extra)
{
    char *list = twtest_path(dir, "list.txt");
    FILE *f = fopen(list, "w");

    cr_assert(f != NULL);
    fprintf(f, "# the slides\n\n");
    for (int i = 0; i < n; i++) {
        char name[32], size[32], seed[16], *p;
        twtest_run r;

        snprintf(name, sizeof name, "slide%d.tif", i);
        snprintf(size, sizeof size, "%dx%d", w + 40 * i, h + 10 * i);
        snprintf(seed, sizeof seed, "%d", i + 1);
        p = twtest_path(dir, name);
        {
            const char *const a[] = {"sample", p, "--size", size, "--seed", seed, "--quiet",
                                     NULL};

            r = twtest_cli(a, NULL);
        }
        cr_assert(r.status == 0, "sample %s: %s", size, r.err);
        twtest_run_free(&r);
        fprintf(f, " %s \n", p);
        free(p);
    }
    if (extra)
        fprintf(f, "%s\n", extra);
    fclose(f);
    return list;
}

void
twtest_run_free(twtest_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

int
twtest_lines(const char *s)
{
    int n = 0;

    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if (*s == '\n')
            n++;
    return s[-1] == '\n' ? n : n + 1;
}

static void
quiet_log(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)level;
    (void)domain;
    (void)message;
    (void)user;
}

void
twtest_quiet_logs(void)
{
    tw_log_set_handler(quiet_log, NULL);
}

tw_runtime *
twtest_runtime(int cpu_workers, const char *gpus, tw_error *err)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    char v[16];

    twtest_quiet_logs();
    snprintf(v, sizeof v, "%d", cpu_workers);
    /* TILEWAVE_* variables apply (e.g. TILEWAVE_RUNTIME_POLICY=fair ctest runs every test
     * under that policy); the arguments override them. Cost models stay in memory unless the
     * environment names a file: the suite never writes to ~/.cache (as a file source, which
     * the environment overrides). */
    if (tw_config_create(&cfg) == TW_OK &&
        tw_config_set(cfg, "runtime.models", "none", TW_CONFIG_FILE, err) == TW_OK &&
        tw_config_load_env(cfg, err) == TW_OK &&
        tw_config_set(cfg, "runtime.gpus", gpus, TW_CONFIG_SET, err) == TW_OK &&
        tw_config_set(cfg, "runtime.cpu_workers", v, TW_CONFIG_SET, err) == TW_OK &&
        tw_runtime_create(cfg, &rt, err) != TW_OK)
        rt = NULL;
    tw_config_destroy(cfg);
    return rt;
}

tw_status
twtest_write_image(const char *path, const void *px, int64_t w, int64_t h, tw_sample_type type,
                   tw_error *err)
{
    size_t ss = tw_sample_size(type);
    uint8_t tile[16 * 16 * 4];
    tw_writer_opts wo;
    tw_writer *wr = NULL;
    tw_status st;

    tw_writer_opts_init(&wo);
    wo.w = w;
    wo.h = h;
    wo.type = type;
    wo.tile_w = wo.tile_h = 16;
    if ((st = tw_writer_open(path, &wo, &wr, err)) != TW_OK)
        return st;
    for (int64_t ty = 0; ty * 16 < h; ty++) {
        for (int64_t tx = 0; tx * 16 < w && st == TW_OK; tx++) {
            memset(tile, 0, sizeof tile);
            for (int64_t y = 0; y < 16 && ty * 16 + y < h; y++) {
                int64_t n = w - tx * 16 < 16 ? w - tx * 16 : 16;
                memcpy(tile + (size_t)y * 16 * ss,
                       (const uint8_t *)px + ((size_t)(ty * 16 + y) * (size_t)w + (size_t)tx * 16) * ss,
                       (size_t)n * ss);
            }
            st = tw_writer_write_tile(wr, 0, tx, ty, tile, 16 * ss, err);
        }
    }
    if (st != TW_OK) {
        tw_writer_abort(wr);
        return st;
    }
    return tw_writer_close(wr, err);
}

void *
twtest_read_image(const char *path, int64_t *w, int64_t *h, int *channels, tw_sample_type *type)
{
    tw_slide *s = NULL;
    tw_level_info li;
    size_t px;
    void *buf = NULL;

    if (tw_slide_open(path, TW_READER_TIFF, &s, NULL) != TW_OK)
        return NULL;
    if (tw_slide_get_level(s, 0, &li) == TW_OK) {
        px = (size_t)tw_slide_get_channels(s) * tw_sample_size(tw_slide_get_sample_type(s));
        if ((buf = malloc((size_t)(li.w * li.h) * px)) &&
            tw_slide_read_region(s, 0, 0, 0, li.w, li.h, buf, (size_t)li.w * px, NULL) != TW_OK) {
            free(buf);
            buf = NULL;
        }
        *w = li.w;
        *h = li.h;
        if (channels)
            *channels = tw_slide_get_channels(s);
        if (type)
            *type = tw_slide_get_sample_type(s);
    }
    tw_slide_close(s);
    return buf;
}

bool
twtest_have_gpu(void)
{
#ifdef TW_HAVE_CUDA
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
#else
    return false;
#endif
}

tw_runtime *
twtest_runtime_with(const char *gpus, const char *cpu_workers)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err;

    tw_log_set_level(TW_LOG_ERROR);
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.models", "none", TW_CONFIG_FILE, NULL), TW_OK));
    cr_assert(eq(int, tw_config_load_env(cfg, &err), TW_OK), "%s", err.message); /* as above */
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", gpus, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", cpu_workers, TW_CONFIG_SET, NULL),
                 TW_OK));
    cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
    tw_config_destroy(cfg);
    return rt;
}

void
twtest_need_gpu(void)
{
    if (!twtest_have_gpu())
        cr_skip_test("no CUDA device");
}

