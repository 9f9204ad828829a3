/* SPDX-License-Identifier: MIT */
/* tilewave tests: the service example (examples/service.c) driven over its UNIX socket. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "twtest.h"
#include "twtest_rt.h"

#ifndef TW_SERVICE_PATH
#error "TW_SERVICE_PATH (the built tw_example_service) must be defined by the build"
#endif

static char *dir;      /* slides and outputs */
static char sockdir[] = "/tmp/twsvc-XXXXXX"; /* short: a socket path has ~100 bytes */
static char sock[64];
static pid_t service = -1;
static const char *service_stderr; /* where the service's stderr goes, if set */

static void
setup(void)
{
    cr_assert_not_null(dir = twtest_tmpdir());
    cr_assert_not_null(mkdtemp(sockdir));
    snprintf(sock, sizeof sock, "%s/sock", sockdir);
    /* no cost-model file written by the service's runtime */
    setenv("TILEWAVE_RUNTIME_MODELS", "none", 0);
}

static void
teardown(void)
{
    if (service > 0) {
        kill(service, SIGKILL);
        waitpid(service, NULL, 0);
    }
    unlink(sock);
    rmdir(sockdir);
    twtest_rmtree(dir);
    free(dir);
}

TestSuite(service, .init = setup, .fini = teardown, .timeout = TWTEST_TIMEOUT(180));

/* Start the service on `sock` with `dir` as its root and `max_jobs`, plus up to 8 more
 * arguments (NULL-terminated). */
static void
start_service_with(const char *max_jobs, ...)
{
    const char *argv[24] = {"tw_example_service", "--socket", sock, "--root", dir,
                            "--max-jobs", max_jobs};
    int n = 7;
    va_list ap;

    va_start(ap, max_jobs);
    for (const char *a; n < 23 && (a = va_arg(ap, const char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    service = fork();
    cr_assert_geq(service, 0);
    if (service == 0) {
        int fd = service_stderr ? open(service_stderr, O_WRONLY | O_CREAT | O_TRUNC, 0600) : -1;

        if (fd >= 0)
            dup2(fd, 2);
        execv(TW_SERVICE_PATH, (char *const *)argv);
        _exit(127);
    }
}

static void
start_service(const char *max_jobs)
{
    start_service_with(max_jobs, "--max-client-jobs", "16", (char *)NULL);
}

/* Exit status of the service (128 + signal when killed), -1 when still running after 60 s. */
static int
service_exit(void)
{
    int ws;

    for (int i = 0; i < 600; i++) {
        if (waitpid(service, &ws, WNOHANG) == service) {
            service = -1;
            return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        }
        usleep(100000);
    }
    return -1;
}

typedef struct conn {
    int fd;
    FILE *in;
} conn;

/* A connection to the service, retried for 20 s while it starts. */
static conn
open_conn(void)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    conn c = {-1, NULL};

    memcpy(addr.sun_path, sock, strlen(sock) + 1);
    for (int i = 0; i < 200; i++) {
        c.fd = socket(AF_UNIX, SOCK_STREAM, 0);
        cr_assert_geq(c.fd, 0);
        if (connect(c.fd, (struct sockaddr *)&addr, sizeof addr) == 0)
            break;
        close(c.fd);
        c.fd = -1;
        usleep(100000);
    }
    cr_assert_geq(c.fd, 0, "cannot connect to the service at %s", sock);
    cr_assert_not_null(c.in = fdopen(c.fd, "r"));
    return c;
}

static void
close_conn(conn *c)
{
    fclose(c->in);
}

/* Send one request line, return its reply without the newline (static storage). */
static const char *ask(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static const char *
ask(conn *c, const char *fmt, ...)
{
    static char reply[8192];
    char line[8192];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0 && n < (int)sizeof line - 1);
    line[n++] = '\n';
    cr_assert_eq(write(c->fd, line, (size_t)n), n);
    cr_assert_not_null(fgets(reply, sizeof reply, c->in), "no reply to: %.*s", n - 1, line);
    reply[strcspn(reply, "\n")] = '\0';
    return reply;
}

/* "submit ..." -> its job id. */
static int
submit(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
submit(conn *c, const char *fmt, ...)
{
    char line[4096];
    const char *r;
    int id = 0;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    r = ask(c, "submit %s", line);
    cr_assert(sscanf(r, "ok %d", &id) == 1 && id > 0, "submit %s: %s", line, r);
    return id;
}

/* `wait ID`: the final state; *msg (optional) gets the error text. */
static const char *
wait_job(conn *c, int id, const char **msg)
{
    static char state[32];
    const char *r = ask(c, "wait %d", id);
    long long done = -1, total = -1;
    int got = 0, pos = 0;

    cr_assert(sscanf(r, "%d %31s %lld/%lld%n", &got, state, &done, &total, &pos) == 4 &&
                  got == id,
              "wait %d: %s", id, r);
    if (strcmp(state, "done") == 0)
        cr_assert(done == total && total > 0, "job %d: %s", id, r);
    if (msg)
        *msg = r + pos;
    return state;
}

static void
expect_same_pixels(const char *a, const char *b)
{
    int64_t wa = 0, ha = 0, wb = 0, hb = 0;
    int ca = 0, cb = 0;
    tw_sample_type ta = 0, tb = 0;
    void *pa = twtest_read_image(a, &wa, &ha, &ca, &ta);
    void *pb = twtest_read_image(b, &wb, &hb, &cb, &tb);

    cr_assert(pa && pb, "cannot read %s or %s", a, b);
    cr_assert(wa == wb && ha == hb && ca == cb && ta == tb, "%s and %s differ in shape", a, b);
    cr_assert(memcmp(pa, pb, (size_t)(wa * ha * ca) * tw_sample_size(ta)) == 0,
              "%s and %s differ", a, b);
    free(pa);
    free(pb);
}

/* The 1024 x 768 sample slide at dir/s.tif and a copy with garbage over some of its tile data
 * at dir/corrupt.tif: it opens, then a tile fails to decode while the job runs. */
static void
write_slides(char **slide, char **corrupt)
{
    tw_sample_opts so;
    tw_error err;
    FILE *f;
    long size;
    char *buf;

    *slide = twtest_path(dir, "s.tif");
    *corrupt = twtest_path(dir, "corrupt.tif");
    tw_sample_opts_init(&so);
    so.w = 1024;
    so.h = 768;
    cr_assert_eq(tw_sample_write(*slide, &so, &err), TW_OK, "%s", err.message);
    cr_assert_not_null(f = fopen(*slide, "rb"));
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    rewind(f);
    cr_assert_not_null(buf = malloc((size_t)size));
    cr_assert_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    memset(buf + size / 4, 0x5a, 20000);
    cr_assert_not_null(f = fopen(*corrupt, "wb"));
    cr_assert_eq(fwrite(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    free(buf);
}

/* One operation as the service takes it and as the CLI takes it. */
typedef struct op_case {
    const char *op, *keys;
    const char *cli[4];
} op_case;

static const op_case cases[8] = {
    {"edt", "threshold=200 invert=1", {"--threshold", "200", "--invert", NULL}},
    {"edt", "threshold=otsu format=u16", {"--threshold", "otsu", "--format", "u16"}},
    {"area-open", "area=500", {"--area", "500", NULL}},
    {"area-close", "area=500 conn=8", {"--area", "500", "--conn", "8"}},
    {"fill-holes", "threshold=otsu", {"--threshold", "otsu", NULL}},
    {"gray", "mode=r", {"--mode", "r", NULL}},
    {"convert", "", {NULL}},
    {"open-rec", "radius=2", {"--radius", "2", NULL}},
};

Test(service, eight_jobs_a_failing_one_and_a_canceled_one)
{
    /* Eight jobs of seven operations submitted at once all succeed with the pixels the CLI
     * writes for the same operation; a missing input and a corrupt one (failing while it
     * runs) are failed jobs with the library's message; a canceled job is canceled and leaves
     * no file; malformed lines and a client leaving in the middle of a `wait` get the service
     * no worse; the client mode talks to it; shutdown exits 0 and removes the socket. */
    char *slide, *corrupt, *out[8], *ref[8], *missing = twtest_path(dir, "missing.tif");
    char *failed_out = twtest_path(dir, "failed.tif"), *cancel_out = twtest_path(dir, "c.tif");
    char big[6000];
    int ids[8], id_missing, id_corrupt, id_cancel;
    const char *r, *msg, *state;
    conn c, d;

    write_slides(&slide, &corrupt);
    start_service("16");
    c = open_conn();
    for (int i = 0; i < 8; i++) {
        char name[32];

        snprintf(name, sizeof name, "out%d.tif", i);
        out[i] = twtest_path(dir, name);
        snprintf(name, sizeof name, "ref%d.tif", i);
        ref[i] = twtest_path(dir, name);
        ids[i] = submit(&c, "%s %s %s tile=256x256 %s", cases[i].op, slide, out[i],
                        cases[i].keys);
    }
    id_missing = submit(&c, "edt %s %s", missing, failed_out);
    id_corrupt = submit(&c, "area-open %s %s area=100 tile=256x256", corrupt, failed_out);
    /* many small tiles: far from done when the cancel arrives one round trip later */
    id_cancel = submit(&c, "area-open %s %s area=500 tile=64x64", slide, cancel_out);
    {
        char want[32];

        snprintf(want, sizeof want, "ok %d", id_cancel);
        cr_assert_str_eq(ask(&c, "cancel %d", id_cancel), want);
    }

    /* Malformed requests: one error line each, and the service goes on. */
    cr_assert(strncmp(ask(&c, "frobnicate 3"), "error unknown request", 21) == 0);
    cr_assert(strncmp(ask(&c, "submit edt %s", slide), "error usage", 11) == 0);
    cr_assert(strncmp(ask(&c, "submit blur %s x.tif", slide), "error unknown operation", 23) ==
              0);
    cr_assert(strncmp(ask(&c, "submit edt %s x.tif tile=0x0", slide), "error bad value", 15) ==
              0);
    cr_assert(strncmp(ask(&c, "submit gray %s x.tif area=5", slide), "error gray takes no key",
                      23) == 0);
    cr_assert(strncmp(ask(&c, "status 999"), "error no job", 12) == 0);
    cr_assert(strncmp(ask(&c, "cancel"), "error usage", 11) == 0);
    cr_assert(strncmp(ask(&c, "%s", ""), "error empty request", 19) == 0);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert(strncmp(ask(&c, "%s", big), "error request longer than", 25) == 0);
    /* progress while the jobs run (or once done): "ID STATE DONE/TOTAL" */
    {
        long long done, total;
        char st[16];

        r = ask(&c, "status %d", ids[2]);
        cr_assert(sscanf(r, "%*d %15s %lld/%lld", st, &done, &total) == 3 && done <= total,
                  "%s", r);
    }
    /* A client that asks to wait and hangs up at once. */
    d = open_conn();
    {
        char line[32];
        int n = snprintf(line, sizeof line, "wait %d\n", ids[0]);

        cr_assert_eq(write(d.fd, line, (size_t)n), n);
    }
    close_conn(&d);

    for (int i = 0; i < 8; i++)
        cr_assert_str_eq(wait_job(&c, ids[i], &msg), "done", "%s: %s", cases[i].op, msg);
    state = wait_job(&c, id_missing, &msg);
    cr_assert(strcmp(state, "failed") == 0 && strstr(msg, "cannot open") &&
                  strstr(msg, "missing.tif"),
              "%s %s", state, msg);
    state = wait_job(&c, id_corrupt, &msg);
    cr_assert(strcmp(state, "failed") == 0 && strstr(msg, "corrupt.tif"), "%s %s", state, msg);
    cr_assert_str_eq(wait_job(&c, id_cancel, &msg), "canceled");
    cr_assert_not(twtest_exists(cancel_out));
    cr_assert_not(twtest_exists(failed_out));
    r = ask(&c, "list");
    cr_assert(strncmp(r, "jobs 11 1:done", 14) == 0 && strstr(r, " 11:canceled"), "%s", r);

    /* The client mode of the same binary. */
    {
        char cmd[512], line[256] = "";
        FILE *p;

        snprintf(cmd, sizeof cmd, "'%s' --socket '%s' --send 'status %d' --send 'status 1'",
                 TW_SERVICE_PATH, sock, id_missing);
        cr_assert_not_null(p = popen(cmd, "r"));
        cr_assert_not_null(fgets(line, sizeof line, p));
        cr_assert(strncmp(line, "9 failed 0/0 ", 13) == 0, "%s", line);
        cr_assert_not_null(fgets(line, sizeof line, p));
        cr_assert(strncmp(line, "1 done ", 7) == 0, "%s", line);
        cr_assert_eq(pclose(p), 0);
    }

    cr_assert_str_eq(ask(&c, "shutdown"), "ok shutting down");
    close_conn(&c);
    cr_assert_eq(service_exit(), 0);
    cr_assert_not(twtest_exists(sock), "the socket file is left behind");

    /* The same operations through the CLI: the same pixels. */
    for (int i = 0; i < 8; i++) {
        const char *args[16] = {cases[i].op, slide, "-o", ref[i], "--tile", "256x256", "--quiet"};
        twtest_run run;
        int n = 7;

        for (int k = 0; k < 4 && cases[i].cli[k]; k++)
            args[n++] = cases[i].cli[k];
        run = twtest_cli(args, NULL);
        cr_assert_eq(run.status, 0, "tilewave %s: %s", cases[i].op, run.err);
        twtest_run_free(&run);
        expect_same_pixels(out[i], ref[i]);
        free(out[i]);
        free(ref[i]);
    }
    /* nothing else left: the slides, the 8 outputs and their references */
    cr_assert_eq(twtest_count_entries(dir), 18);
    free(slide);
    free(corrupt);
    free(missing);
    free(failed_out);
    free(cancel_out);
}

Test(service, sigterm_cancels_and_answers_a_waiting_client)
{
    /* With --max-jobs 1 a second job is refused while one runs. SIGTERM while that job runs
     * and a client waits on it: the job is canceled, the waiting client gets its final
     * status, the service exits 0 and removes its socket. */
    char *slide, *corrupt, *out = twtest_path(dir, "o.tif");
    conn c, d;
    int id;

    write_slides(&slide, &corrupt);
    start_service("1");
    c = open_conn();
    id = submit(&c, "area-open %s %s area=500 tile=64x64", slide, out);
    cr_assert(strncmp(ask(&c, "submit gray %s %s/o2.tif", slide, dir), "error busy", 10) == 0);
    {
        char line[32];
        int n = snprintf(line, sizeof line, "wait %d\n", id);

        cr_assert_eq(write(c.fd, line, (size_t)n), n);
    }
    /* a request answered on a later connection: the service has read the `wait` (the first
     * connection's line was there before the second connected; clients are served in order) */
    d = open_conn();
    cr_assert(strncmp(ask(&d, "status %d", id), "1 running", 9) == 0);
    close_conn(&d);
    cr_assert_eq(kill(service, SIGTERM), 0);
    {
        char reply[256] = "", want[32];

        snprintf(want, sizeof want, "%d canceled ", id);
        cr_assert_not_null(fgets(reply, sizeof reply, c.in));
        cr_assert(strncmp(reply, want, strlen(want)) == 0, "%s", reply);
    }
    close_conn(&c);
    cr_assert_eq(service_exit(), 0);
    cr_assert_not(twtest_exists(sock));
    cr_assert_not(twtest_exists(out));
    free(slide);
    free(corrupt);
    free(out);
}

/* ---- confinement (issue 26, item 2) */

static void
write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* `reply` is exactly "error path outside the allowed roots: PATH". */
static void
expect_outside(const char *reply, const char *path)
{
    char want[4096];

    snprintf(want, sizeof want, "error path outside the allowed roots: %s", path);
    cr_assert_str_eq(reply, want);
}

Test(service, paths_outside_the_roots_are_refused_alike)
{
    /* Item 2: with --root DIR, "..", absolute paths outside DIR, links out of it, devices
     * and FIFOs are refused, as input or output, with one line; outside, an existing file and
     * a missing one get the same reply; nothing outside changes. Relative paths are taken in
     * the root; a link inside it to a file inside is followed (the file it names replaced,
     * the link kept). */
    char *slide, *corrupt, *outside = twtest_tmpdir(), *passwd = twtest_path(outside, "passwd");
    char *missing = twtest_path(outside, "missing.svs"), *fifo = twtest_path(dir, "fifo");
    char *lout = twtest_path(dir, "link-out"), *lmiss = twtest_path(dir, "link-missing");
    char *lnull = twtest_path(dir, "link-null"), *target = twtest_path(dir, "target.tif");
    char *lin = twtest_path(dir, "link-in"), *lok = twtest_path(dir, "link-ok");
    char *up, *secret;
    const char *base = strrchr(outside, '/') + 1, *msg;
    struct stat sb;
    conn c;
    int id;

    write_slides(&slide, &corrupt);
    write_text(passwd, "secret\n");
    write_text(target, "not yet a tiff\n");
    cr_assert_eq(symlink(passwd, lout), 0);
    cr_assert_eq(symlink(missing, lmiss), 0);
    cr_assert_eq(symlink("/dev/null", lnull), 0);
    cr_assert_eq(symlink("s.tif", lin), 0);
    cr_assert_eq(symlink("target.tif", lok), 0);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    {
        char *sub = twtest_path(dir, "sub");

        cr_assert_eq(mkdir(sub, 0700), 0);
        free(sub);
    }
    cr_assert_not_null(up = malloc(strlen(base) + 16));
    sprintf(up, "../%s/passwd", base);
    start_service_with("4", (char *)NULL);
    c = open_conn();

    /* ".." (whether or not it would stay inside) */
    cr_assert(strncmp(ask(&c, "submit gray s.tif %s", up), "error '..' is not allowed", 25) == 0);
    cr_assert(strncmp(ask(&c, "submit gray ../x/s.tif o.tif"), "error '..' is not", 17) == 0);
    /* absolute paths outside: an existing file and a missing one, as output and as input */
    expect_outside(ask(&c, "submit gray %s %s", slide, passwd), passwd);
    expect_outside(ask(&c, "submit gray %s %s", slide, missing), missing);
    expect_outside(ask(&c, "submit convert %s %s/o.tif", passwd, dir), passwd);
    expect_outside(ask(&c, "submit convert %s %s/o.tif", missing, dir), missing);
    expect_outside(ask(&c, "submit gray %s /nonexistent/dir/o.tif", slide),
                   "/nonexistent/dir/o.tif");
    /* devices, by name and through a link; a FIFO in the root (answered, not opened) */
    expect_outside(ask(&c, "submit gray s.tif /dev/null"), "/dev/null");
    expect_outside(ask(&c, "submit gray link-null o.tif"), "link-null");
    expect_outside(ask(&c, "submit gray s.tif link-null"), "link-null");
    cr_assert_str_eq(ask(&c, "submit gray s.tif fifo"), "error not a regular file: fifo");
    cr_assert_str_eq(ask(&c, "submit gray fifo o.tif"), "error not a regular file: fifo");
    cr_assert_str_eq(ask(&c, "submit gray s.tif sub"), "error not a regular file: sub");
    /* links out of the root, to an existing file and to a missing one: the same reply */
    expect_outside(ask(&c, "submit gray s.tif link-out"), "link-out");
    expect_outside(ask(&c, "submit gray s.tif link-missing"), "link-missing");
    expect_outside(ask(&c, "submit gray link-out o.tif"), "link-out");
    expect_outside(ask(&c, "submit gray link-missing o.tif"), "link-missing");
    /* a folder that does not exist in the root */
    expect_outside(ask(&c, "submit gray s.tif nosuch/o.tif"), "nosuch/o.tif");
    cr_assert_str_eq(ask(&c, "list"), "jobs 0");
    /* nothing outside changed, nothing written in the root */
    secret = twtest_slurp(passwd);
    cr_assert_str_eq(secret, "secret\n");
    cr_assert_eq(twtest_count_entries(outside), 1);
    {
        char *o = twtest_path(dir, "o.tif");

        cr_assert_not(twtest_exists(o));
        free(o);
    }

    /* a link inside to a file inside, as input and as output: followed */
    id = submit(&c, "gray link-in link-ok tile=256x256");
    cr_assert_str_eq(wait_job(&c, id, &msg), "done", "%s", msg);
    cr_assert_eq(lstat(lok, &sb), 0);
    cr_assert(S_ISLNK(sb.st_mode), "the link at the output was replaced");
    {
        char *ref = twtest_path(dir, "ref.tif");
        const char *args[] = {"gray", slide, "-o", ref, "--tile", "256x256", "--quiet", NULL};
        twtest_run run = twtest_cli(args, NULL);

        cr_assert_eq(run.status, 0, "%s", run.err);
        twtest_run_free(&run);
        expect_same_pixels(target, ref);
        free(ref);
    }
    cr_assert_str_eq(ask(&c, "shutdown"), "ok shutting down");
    close_conn(&c);
    cr_assert_eq(service_exit(), 0);
    twtest_rmtree(outside);
    free(secret);
    free(outside);
    free(passwd);
    free(missing);
    free(fifo);
    free(lout);
    free(lmiss);
    free(lnull);
    free(target);
    free(lin);
    free(lok);
    free(up);
    free(slide);
    free(corrupt);
}

Test(service, its_socket_is_owner_only_and_never_a_job_path)
{
    /* Item 2: the socket is created srwx------; naming it as a job's output (or input), even
     * with the socket's folder a root, is refused and the service keeps answering new
     * clients (it used to be replaced, and new clients got "connection refused"); an output
     * equal to the input, by name or through a hard link, is refused. */
    char *slide, *corrupt, *hard = twtest_path(dir, "hard.tif");
    struct stat sb;
    char want[256];
    conn c, d;

    write_slides(&slide, &corrupt);
    cr_assert_eq(link(slide, hard), 0);
    start_service_with("4", "--root", sockdir, (char *)NULL);
    c = open_conn();
    cr_assert_eq(stat(sock, &sb), 0);
    cr_assert(S_ISSOCK(sb.st_mode));
    cr_assert_eq(sb.st_mode & 077, 0, "socket mode %o", (unsigned)(sb.st_mode & 0777));
    snprintf(want, sizeof want, "error %s is the service's socket", sock);
    cr_assert_str_eq(ask(&c, "submit gray %s %s", slide, sock), want);
    cr_assert_str_eq(ask(&c, "submit gray %s %s/o.tif", sock, dir), want);
    snprintf(want, sizeof want, "error the output is the input: %s", slide);
    cr_assert_str_eq(ask(&c, "submit gray %s %s", slide, slide), want);
    snprintf(want, sizeof want, "error the output is the input: %s", hard);
    cr_assert_str_eq(ask(&c, "submit gray %s %s", slide, hard), want);
    d = open_conn();
    cr_assert_str_eq(ask(&d, "list"), "jobs 0");
    close_conn(&d);
    cr_assert_eq(stat(sock, &sb), 0);
    cr_assert(S_ISSOCK(sb.st_mode));
    cr_assert_str_eq(ask(&c, "shutdown"), "ok shutting down");
    close_conn(&c);
    cr_assert_eq(service_exit(), 0);
    free(hard);
    free(slide);
    free(corrupt);
}

Test(service, a_socket_folder_others_can_write_and_a_bad_root_are_refused)
{
    /* A socket folder writable by others without the sticky bit: the service exits 1 with a
     * line naming it and creates nothing; a --root that does not exist: exit 2. */
    char *open_dir = twtest_path(dir, "open"), *err_path = twtest_path(dir, "err.txt");
    char *text;
    char saved[64];

    cr_assert_eq(mkdir(open_dir, 0700), 0);
    cr_assert_eq(chmod(open_dir, 0777), 0);
    memcpy(saved, sock, sizeof saved);
    snprintf(sock, sizeof sock, "%s/sock", open_dir);
    service_stderr = err_path;
    start_service_with("4", (char *)NULL);
    cr_assert_eq(service_exit(), 1);
    text = twtest_slurp(err_path);
    cr_assert(strstr(text, "is writable by others (mode 777, not sticky)"), "%s", text);
    cr_assert_eq(twtest_count_entries(open_dir), 0);
    free(text);
    memcpy(sock, saved, sizeof saved);
    start_service_with("4", "--root", "/nonexistent/tw-root", (char *)NULL);
    cr_assert_eq(service_exit(), 2);
    text = twtest_slurp(err_path);
    cr_assert(strstr(text, "root '/nonexistent/tw-root': No such file or directory"), "%s",
              text);
    service_stderr = NULL;
    free(text);
    free(open_dir);
    free(err_path);
}

Test(service, idle_and_half_line_connections_time_out)
{
    /* Item 2: 64 connections holding half a line (one of them adding a byte every 200 ms)
     * used to lock every other client out ("error too many clients") for ever. With
     * --idle-timeout 2 each is told "error idle for 2 s: closing" and closed, and a new client
     * is served. Bound: 30 s (the failure prints the time measured). */
    conn cs[64], d;
    bool closed[64] = {false};
    int n_closed = 0;
    double t0;

    start_service_with("4", "--idle-timeout", "2", (char *)NULL);
    for (int i = 0; i < 64; i++) {
        cs[i] = open_conn();
        cr_assert_eq(write(cs[i].fd, "stat", 4), 4);
    }
    t0 = twtest_now_s();
    while (n_closed < 64 && twtest_now_s() - t0 < 30) {
        /* half a line growing: still no request (the socket may be closed already) */
        (void)!send(cs[0].fd, "u", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int i = 0; i < 64; i++) {
            struct pollfd pfd = {.fd = cs[i].fd, .events = POLLIN};
            char line[128];

            if (closed[i] || poll(&pfd, 1, 0) != 1)
                continue;
            if (!fgets(line, sizeof line, cs[i].in)) {
                closed[i] = true;
                n_closed++;
            } else {
                cr_assert_str_eq(line, "error idle for 2 s: closing\n");
            }
        }
        usleep(200000);
    }
    cr_assert_eq(n_closed, 64, "%d of 64 idle connections closed after %.1f s", n_closed,
                 twtest_now_s() - t0);
    d = open_conn();
    cr_assert_str_eq(ask(&d, "list"), "jobs 0");
    cr_assert_str_eq(ask(&d, "shutdown"), "ok shutting down");
    close_conn(&d);
    for (int i = 0; i < 64; i++)
        close_conn(&cs[i]);
    cr_assert_eq(service_exit(), 0);
}

Test(service, ended_jobs_beyond_the_limit_are_forgotten_oldest_first)
{
    /* Item 2: every failed job used to be kept for ever. With --keep-jobs 2, after four
     * failed jobs only the last two are listed; the older ones answer "was forgotten". */
    char *bad = twtest_path(dir, "bad.tif");
    const char *r;
    conn c;

    write_text(bad, "not a tiff\n");
    start_service_with("4", "--keep-jobs", "2", (char *)NULL);
    c = open_conn();
    for (int i = 1; i <= 4; i++) {
        char want[16];

        snprintf(want, sizeof want, "ok %d", i);
        cr_assert_str_eq(ask(&c, "submit gray bad.tif o%d.tif", i), want);
    }
    cr_assert_str_eq(ask(&c, "list"), "jobs 2 3:failed 4:failed");
    cr_assert_str_eq(ask(&c, "status 1"),
                     "error job 1 was forgotten (the last 2 ended jobs are kept)");
    cr_assert_str_eq(ask(&c, "wait 2"),
                     "error job 2 was forgotten (the last 2 ended jobs are kept)");
    r = ask(&c, "status 4");
    cr_assert(strncmp(r, "4 failed 0/0 ", 13) == 0 && strstr(r, "bad.tif"), "%s", r);
    cr_assert_str_eq(ask(&c, "status 5"), "error no job '5'");
    cr_assert_str_eq(ask(&c, "submit gray bad.tif o5.tif"), "ok 5");
    cr_assert_str_eq(ask(&c, "list"), "jobs 2 4:failed 5:failed");
    cr_assert_str_eq(ask(&c, "shutdown"), "ok shutting down");
    close_conn(&c);
    cr_assert_eq(service_exit(), 0);
    free(bad);
}

Test(service, one_connection_runs_at_most_max_client_jobs)
{
    /* Item 2, per-client limits: with --max-client-jobs 1 a connection's second job is
     * refused while its first runs, another connection's is taken; an output a running job
     * writes is refused to another job. */
    char *slide, *corrupt, want[64];
    conn c, d;
    int id, id2;

    write_slides(&slide, &corrupt);
    start_service_with("4", "--max-client-jobs", "1", (char *)NULL);
    c = open_conn();
    d = open_conn();
    /* many small tiles: far from done one round trip later */
    id = submit(&c, "area-open s.tif a.tif area=500 tile=64x64");
    cr_assert_str_eq(ask(&c, "submit gray s.tif b.tif"),
                     "error busy: 1 running from this connection, the most --max-client-jobs "
                     "allows");
    snprintf(want, sizeof want, "error a.tif is the output of running job %d", id);
    cr_assert_str_eq(ask(&d, "submit gray s.tif a.tif"), want);
    id2 = submit(&d, "area-open s.tif b.tif area=500 tile=64x64");
    cr_assert_neq(id2, id);
    snprintf(want, sizeof want, "ok %d", id);
    cr_assert_str_eq(ask(&c, "cancel %d", id), want);
    snprintf(want, sizeof want, "ok %d", id2);
    cr_assert_str_eq(ask(&d, "cancel %d", id2), want);
    cr_assert_str_eq(wait_job(&c, id, NULL), "canceled");
    cr_assert_str_eq(wait_job(&d, id2, NULL), "canceled");
    cr_assert_str_eq(ask(&c, "shutdown"), "ok shutting down");
    close_conn(&c);
    close_conn(&d);
    cr_assert_eq(service_exit(), 0);
    free(slide);
    free(corrupt);
}

Test(service, label_then_objects_as_the_cli_writes_them)
{
    /* `submit label` of the sample slide thresholded, then `submit objects` of those labels:
     * the service's label image has the CLI's pixels and its GeoJSON table the CLI's bytes. */
    char *slide, *corrupt, *lab = twtest_path(dir, "lab.tif"), *gj = twtest_path(dir, "o.geojson");
    char *rlab = twtest_path(dir, "rlab.tif"), *rgj = twtest_path(dir, "r.geojson");
    char *a, *b;
    const char *msg;
    conn c;
    int id;

    write_slides(&slide, &corrupt);
    start_service("4");
    c = open_conn();
    id = submit(&c, "label %s %s threshold=200 invert=1 conn=4 tile=256x256", slide, lab);
    cr_assert_str_eq(wait_job(&c, id, &msg), "done", "%s", msg);
    id = submit(&c, "objects %s %s", lab, gj);
    cr_assert_str_eq(wait_job(&c, id, &msg), "done", "%s", msg);
    cr_assert(strncmp(ask(&c, "submit objects %s %s tile=256x256", lab, gj),
                      "error objects takes no key", 26) == 0);
    cr_assert_str_eq(ask(&c, "shutdown"), "ok shutting down");
    close_conn(&c);
    cr_assert_eq(service_exit(), 0);
    {
        const char *la[] = {"label", slide, "-o", rlab, "--threshold", "200", "--invert",
                            "--conn", "4", "--quiet", NULL};
        const char *oa[] = {"objects", rlab, "-o", rgj, "--quiet", NULL};
        twtest_run run = twtest_cli(la, NULL);

        cr_assert_eq(run.status, 0, "tilewave label: %s", run.err);
        twtest_run_free(&run);
        run = twtest_cli(oa, NULL);
        cr_assert_eq(run.status, 0, "tilewave objects: %s", run.err);
        twtest_run_free(&run);
    }
    expect_same_pixels(lab, rlab);
    a = twtest_slurp(gj);
    b = twtest_slurp(rgj);
    cr_assert(strlen(a) > 100 && strcmp(a, b) == 0, "the service's table differs from the CLI's");
    free(a);
    free(b);
    free(slide);
    free(corrupt);
    free(lab);
    free(gj);
    free(rlab);
    free(rgj);
}
