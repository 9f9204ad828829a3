/* SPDX-License-Identifier: MIT */
/* tilewave tests: helpers shared by the test programs (temp dirs, running the CLI). */
#include "twtest.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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

        argv[0] = TW_CLI_PATH;
        for (size_t i = 0; i < na; i++)
            argv[i + 1] = args[i];
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        dup2(devnull, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(TW_CLI_PATH, (char *const *)argv);
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
    if (tw_config_create(&cfg) == TW_OK &&
        tw_config_set(cfg, "runtime.gpus", gpus, TW_CONFIG_SET, err) == TW_OK &&
        tw_config_set(cfg, "runtime.cpu_workers", v, TW_CONFIG_SET, err) == TW_OK &&
        tw_runtime_create(cfg, &rt, err) != TW_OK)
        rt = NULL;
    tw_config_destroy(cfg);
    return rt;
}
