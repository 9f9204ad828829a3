/* SPDX-License-Identifier: MIT */
/* tilewave tests: the files a command names (issue 26): outputs, inputs, configs. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest_cli.h"
#include "twtest_rt.h"

TWTEST_CLI_SUITE(cli_paths, .timeout = TWTEST_TIMEOUT(180));

static char *
sample(const char *name, int side)
{
    char *path = twtest_path(dir, name), size[32];

    snprintf(size, sizeof size, "%dx%d", side, side);
    OK_RUN("sample", path, "--size", size, "--quiet");
    return path;
}

static void
write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");

    cr_assert(f != NULL, "%s", path);
    cr_assert(eq(sz, fwrite(data, 1, n, f), n));
    cr_assert(eq(int, fclose(f), 0));
}

/* Whether two files hold the same bytes. */
static bool
same_bytes(const char *a, const char *b)
{
    struct stat sa, sb;
    char *x, *y;
    bool eq;

    if (stat(a, &sa) != 0 || stat(b, &sb) != 0 || sa.st_size != sb.st_size)
        return false;
    x = twtest_slurp(a);
    y = twtest_slurp(b);
    eq = x && y && memcmp(x, y, (size_t)sa.st_size) == 0;
    free(x);
    free(y);
    return eq;
}

/* Whether two images hold the same pixels (their metadata differs: it has the command line). */
static bool
same_pixels(const char *a, const char *b)
{
    int64_t wa = 0, ha = 0, wb = 0, hb = 0;
    int ca = 0, cb = 0;
    tw_sample_type ta = TW_U8, tb = TW_U8;
    uint8_t *x = twtest_read_image(a, &wa, &ha, &ca, &ta);
    uint8_t *y = twtest_read_image(b, &wb, &hb, &cb, &tb);
    bool eq = x && y && wa == wb && ha == hb && ca == cb && ta == tb &&
              memcmp(x, y, (size_t)(wa * ha * ca) * tw_sample_size(ta)) == 0;

    free(x);
    free(y);
    return eq;
}

static mode_t
kind(const char *path)
{
    struct stat sb;

    cr_assert(eq(int, lstat(path, &sb), 0), "%s", path);
    return sb.st_mode & S_IFMT;
}

/* A listening-less Unix socket at dir/name. */
static char *
make_socket(const char *name, int *fd)
{
    char *path = twtest_path(dir, name);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    *fd = socket(AF_UNIX, SOCK_STREAM, 0);
    bool ok = *fd >= 0 && strlen(path) < sizeof sa.sun_path;

    cr_assert(ok, "cannot make the socket %s", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    cr_assert(eq(int, bind(*fd, (struct sockaddr *)&sa, sizeof sa), 0));
    return path;
}

Test(cli_paths, outputs_that_are_not_regular_files_are_refused)
{
    /* The output and every side output (--trace, --tissue-mask, --indices, --area, --overlay,
     * runtime.trace of a config) naming a character device, a FIFO, a socket or a directory:
     * exit 2, one line saying what the file is, and the file is still what it was (before,
     * `gray in.tif -o /dev/null` left /dev/null a regular file, with exit 0). */
    char *in = sample("in.tif", 256), *out = twtest_path(dir, "out.tif");
    char *fifo = twtest_path(dir, "fifo"), *sub = twtest_path(dir, "sub"), *sock, *ini;
    int sfd;

    sock = make_socket("sock", &sfd);
    cr_assert(eq(int, mkfifo(fifo, 0600), 0));
    cr_assert(eq(int, mkdir(sub, 0700), 0));
    ERR_RUN(("gray", in, "-o", "/dev/null"), 2,
             "-o: '/dev/null' is a character device, not a regular file", NULL);
    ERR_RUN(("convert", in, "-o", fifo), 2, "is a FIFO, not a regular file", NULL);
    ERR_RUN(("fill-holes", in, "-o", sock), 2, "is a socket, not a regular file", NULL);
    ERR_RUN(("gray", in, "-o", sub), 2, "is a directory, not a regular file", NULL);
    ERR_RUN(("area-open", in, "--area", "5", "-o", out, "--trace", "/dev/null"), 2,
             "--trace: '/dev/null' is a character device, not a regular file", out);
    ERR_RUN(("gray", in, "-o", out, "--trace", sub), 2, "--trace: ", out);
    ERR_RUN(("gray", in, "-o", out, "--tissue-mask", fifo), 2,
             "--tissue-mask: '", out);
    ERR_RUN(("edt", in, "--threshold", "100", "-o", out, "--indices", "/dev/null"), 2,
             "--indices: '/dev/null' is a character device", out);
    ERR_RUN(("maxtree", in, "-o", out, "--area", sock), 2, "--area: '", out);
    ERR_RUN(("tos", in, "-o", out, "--area", "/dev/zero"), 2, "--area: '/dev/zero'", out);
    ERR_RUN(("gray", in, "-o", out, "--overlay", "/dev/null"), 2, "--overlay: '/dev/null'", out);
    ERR_RUN(("tune", "-o", "/dev/null"), 2, "-o: '/dev/null' is a character device", NULL);
    ini = twtest_path(dir, "trace.ini");
    write_bytes(ini, "[runtime]\ntrace = /dev/null\n", 28);
    ERR_RUN(("gray", in, "-o", out, "--config", ini), 2,
             "runtime.trace: '/dev/null' is a character device", out);
    cr_assert(eq(u32, kind("/dev/null"), S_IFCHR));
    cr_assert(eq(u32, kind(fifo), S_IFIFO));
    cr_assert(eq(u32, kind(sock), S_IFSOCK));
    cr_assert(eq(u32, kind(sub), S_IFDIR));
    cr_assert(eq(int, twtest_count_entries(sub), 0));
    /* in.tif, fifo, sock, sub, trace.ini: nothing else was made */
    cr_assert(eq(int, twtest_count_entries(dir), 5));
    close(sfd);
    free(in), free(out), free(fifo), free(sub), free(sock), free(ini);
}

Test(cli_paths, an_output_is_never_an_input_or_another_output)
{
    /* An output naming an input or another output, by the same name, another spelling, a
     * symbolic link or a hard link: exit 2, one line naming both, and the input keeps its
     * bytes (before, `area-open in.tif -o o.tif --trace in.tif` destroyed the input with exit
     * 0, and --tissue-mask or --trace equal to -o lost one file silently). */
    char *in = sample("in.tif", 256), *out = twtest_path(dir, "out.tif");
    char *copy = twtest_path(dir, "copy.tif"), *hard = twtest_path(dir, "hard.tif");
    char *soft = twtest_path(dir, "soft.tif"), *sub = twtest_path(dir, "sub"), *odd, *ini;
    char *marker = sample("marker.tif", 256);

    cr_assert(eq(int, link(in, hard), 0));
    cr_assert(eq(int, symlink("in.tif", soft), 0));
    cr_assert(eq(int, mkdir(sub, 0700), 0));
    odd = twtest_path(sub, "../in.tif");
    struct stat sb;
    char *bytes = twtest_slurp(in);

    cr_assert(eq(int, stat(in, &sb), 0));
    write_bytes(copy, bytes, (size_t)sb.st_size); /* the input's bytes, to compare at the end */
    free(bytes);
    ERR_RUN(("area-open", in, "--area", "5", "-o", out, "--trace", in), 2,
             "--trace: '", out);
    ERR_RUN(("area-open", in, "--area", "5", "-o", out, "--trace", in), 2,
             "would overwrite the input", out);
    ERR_RUN(("gray", in, "-o", out, "--tissue", "--tissue-mask", in), 2,
             "--tissue-mask: '", out);
    ERR_RUN(("gray", in, "-o", out, "--tissue-mask", hard), 2, "would overwrite the input",
             out);
    ERR_RUN(("gray", in, "-o", soft), 2, "-o: '", NULL);
    ERR_RUN(("gray", in, "-o", odd), 2, "would overwrite the input", NULL);
    ERR_RUN(("gray", in, "-o", out, "--trace", out), 2, "--trace: '", out);
    ERR_RUN(("gray", in, "-o", out, "--trace", out), 2, "is the output itself", out);
    ERR_RUN(("gray", in, "-o", out, "--tissue-mask", out), 2, "is the output itself", out);
    char *dotted = twtest_path(dir, "./out.tif");
    ERR_RUN(("edt", in, "-o", out, "--threshold", "9", "--indices", dotted), 2, "--indices",
             out);
    free(dotted);
    ERR_RUN(("maxtree", in, "-o", out, "--area", soft), 2, "would overwrite the input", out);
    ERR_RUN(("gray", in, "-o", out, "--tissue-mask", "m.tif", "--trace", "m.tif"), 2,
             "is the same file as", out);
    ERR_RUN(("reconstruct", "--marker", marker, "--mask", in, "-o", marker), 2,
             "would overwrite the input --marker", NULL);
    ini = twtest_path(dir, "t.ini");
    char text[4200];
    snprintf(text, sizeof text, "[runtime]\ntrace = %s\n", in);
    write_bytes(ini, text, strlen(text));
    ERR_RUN(("gray", in, "-o", out, "--config", ini), 2, "runtime.trace: '", out);
    cr_assert(same_bytes(in, copy), "the input was changed");
    cr_assert(eq(u32, kind(soft), S_IFLNK));
    char *m = twtest_path(dir, "m.tif");
    cr_assert(twtest_exists(m) == false);
    free(m);
    free(in), free(out), free(copy), free(hard), free(soft), free(sub), free(odd), free(ini);
    free(marker);
}

Test(cli_paths, a_symbolic_link_at_an_output_is_followed)
{
    /* -o and --trace naming a symbolic link (to an existing file, or dangling): the link stays
     * a link and the file it names gets the output, the same pixels as a run to a file
     * directly; nothing else is left in the folder. */
    char *in = sample("in.tif", 256), *direct = twtest_path(dir, "direct.tif");
    char *link1 = twtest_path(dir, "link.tif"), *target = twtest_path(dir, "target.tif");
    char *dangling = twtest_path(dir, "dangling.tif"), *later = twtest_path(dir, "later.tif");
    char *tlink = twtest_path(dir, "t.json"), *treal = twtest_path(dir, "real.json");

    OK_RUN("gray", in, "-o", direct, "--quiet");
    write_bytes(target, "old", 3);
    cr_assert(eq(int, symlink("target.tif", link1), 0));
    cr_assert(eq(int, symlink(later, dangling), 0));
    cr_assert(eq(int, symlink("real.json", tlink), 0));
    OK_RUN("gray", in, "-o", link1, "--quiet", "--trace", tlink);
    OK_RUN("gray", in, "-o", dangling, "--quiet");
    cr_assert(eq(u32, kind(link1), S_IFLNK));
    cr_assert(eq(u32, kind(dangling), S_IFLNK));
    cr_assert(eq(u32, kind(tlink), S_IFLNK));
    cr_assert(eq(u32, kind(target), S_IFREG));
    cr_assert(same_pixels(direct, target), "the link's file does not hold the output");
    cr_assert(same_pixels(direct, later), "the dangling link's file does not hold the output");
    cr_assert(eq(u32, kind(treal), S_IFREG));
    char *json = twtest_slurp(treal);
    cr_assert(strncmp(json, "{\"displayTimeUnit\"", 18) == 0);
    free(json);
    /* in, direct, link, target, dangling, later, t.json, real.json */
    cr_assert(eq(int, twtest_count_entries(dir), 8));
    free(in), free(direct), free(link1), free(target), free(dangling), free(later);
    free(tlink), free(treal);
}

Test(cli_paths, a_killed_run_leaves_no_trace_file)
{
    /* open-rec of a 4096 x 4096 slide on one worker with --trace, killed with SIGKILL once
     * its output is being written: neither the trace, nor trace.json.part, nor any temporary
     * trace is left (the trace is nameless until complete, as outputs are); a whole run leaves
     * exactly the output and the trace. */
    char *in = sample("in.tif", 4096), *out_dir = twtest_path(dir, "out");
    char *out = twtest_path(out_dir, "out.tif"), *trace = twtest_path(out_dir, "trace.json");
    int ws = 0;
    bool named = false;
    pid_t pid;
    double t0;

    cr_assert(eq(int, mkdir(out_dir, 0700), 0));
    pid = twtest_spawn_quiet((const char *const[]){
        TW_CLI_PATH, "open-rec", in, "--radius", "5", "-o", out, "--cpu-workers", "1", "--gpus",
        "none", "--tile", "128x128", "--trace", trace, "--quiet", NULL});
    t0 = twtest_now_s();
    while (!twtest_writer_started(pid, out_dir, "out.tif", &named)) {
        cr_assert(waitpid(pid, &ws, WNOHANG) == 0, "the command ended before it wrote anything");
        cr_assert(twtest_now_s() - t0 < 30.0, "no temporary output after %.1f s",
                  twtest_now_s() - t0);
        twtest_sleep_ms(2);
    }
    cr_assert(eq(int, kill(pid, SIGKILL), 0));
    while (waitpid(pid, &ws, 0) < 0)
        ;
    bool killed = WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;

    cr_assert(killed, "the command finished before the kill: make its input larger");
    cr_assert(twtest_exists(trace) == false, "a killed run left the trace");
    cr_assert(eq(int, twtest_count_prefixed(out_dir, "trace.json"), 0), "trace.json.part left");
    /* where the file system lacks O_TMPFILE, the writers' hidden temporary names remain */
    cr_assert(eq(int, twtest_count_prefixed(out_dir, ".trace.json.tw-"), named ? 1 : 0));
    twtest_rmtree(out_dir);
    cr_assert(eq(int, mkdir(out_dir, 0700), 0));
    OK_RUN("gray", in, "-o", out, "--trace", trace, "--quiet", "--region", "0,0,512,512");
    cr_assert(twtest_exists(trace));
    cr_assert(eq(int, twtest_count_entries(out_dir), 2), "a temporary file was left");
    free(in), free(out_dir), free(out), free(trace);
}

Test(cli_paths, inputs_and_configs_must_be_regular_files)
{
    /* A FIFO, a device or a directory as the input, the --config file, $TILEWAVE_CONFIG or
     * the --list file:
     * exit 1 at once with one line saying what it is (before, --config /dev/zero never
     * returned, `info FIFO` blocked in open(), and a device said "No such file or
     * directory"). The suite's timeout catches a hang. */
    char *in = sample("in.tif", 256), *out = twtest_path(dir, "out.tif");
    char *fifo = twtest_path(dir, "fifo");
    const char *const zero_env[] = {"TILEWAVE_CONFIG=/dev/zero", NULL};
    twtest_run r;

    cr_assert(eq(int, mkfifo(fifo, 0600), 0));
    ERR_RUN(("info", fifo), 1, "is a FIFO, not a regular file", NULL);
    ERR_RUN(("info", "/dev/null"), 1, "'/dev/null' is a character device, not a regular file",
             NULL);
    ERR_RUN(("info", dir), 1, "is a directory, not a regular file", NULL);
    ERR_RUN(("gray", fifo, "-o", out), 1, "is a FIFO, not a regular file", out);
    ERR_RUN(("gray", "--list", fifo, "-o", dir), 1, "--list: '", NULL);
    ERR_RUN(("gray", "--list", "/dev/zero", "-o", dir), 1, "is not a regular file", NULL);
    ERR_RUN(("gray", in, "-o", out, "--config", "/dev/zero"), 1,
             "config: '/dev/zero' is a character device, not a regular file", out);
    ERR_RUN(("gray", in, "-o", out, "--config", fifo), 1, "is a FIFO, not a regular file", out);
    r = RUN_ENV(zero_env, "gray", in, "-o", out);
    expect_error(&r, 1, "config: '/dev/zero' is a character device", out);
    r = RUN_ENV(zero_env, "config", "--print");
    expect_error(&r, 1, "config: '/dev/zero' is a character device", NULL);
    free(in), free(out), free(fifo);
}

Test(cli_paths, config_files_and_variables_are_checked_whole)
{
    /* A NUL byte in a config file: exit 1 naming the file and line (before, the value was cut
     * at the NUL silently); a file over 1 MiB: refused; an unknown TILEWAVE_* variable: exit 1
     * naming it (before, ignored); a value over 4096 bytes: refused naming the variable;
     * blanks around a value are dropped on both sides, in a file, the environment and --set
     * alike (before, ' 1' was taken and '1 ' refused); io.tiff_tile beyond the writer's
     * 16384 fails in the configuration check, with the range, not in the writer. */
    char *in = sample("in.tif", 256), *out = twtest_path(dir, "out.tif");
    char *nul = twtest_path(dir, "nul.ini"), *big = twtest_path(dir, "big.ini");
    static const char nul_text[] = "# ok\n[runtime]\ncpu_workers = 1\0 2\n";
    const char *const unknown_env[] = {"TILEWAVE_NOSUCH_KEY=1", NULL};
    const char *const lead_env[] = {"TILEWAVE_RUNTIME_CPU_WORKERS= 1", NULL};
    const char *const trail_env[] = {"TILEWAVE_RUNTIME_CPU_WORKERS=1 ", NULL};
    const char *const tiff_env[] = {"TILEWAVE_IO_TIFF_TILE=65536x65536", NULL};
    char *long_val = malloc(5000 + 32), *long_env[2] = {long_val, NULL}, *text;
    char *big_text = malloc((1 << 20) + 2);
    twtest_run r;

    write_bytes(nul, nul_text, sizeof nul_text - 1);
    ERR_RUN(("gray", in, "-o", out, "--config", nul), 1, "nul.ini:3: NUL byte in the file", out);
    memset(big_text, '#', (1 << 20) + 1);
    big_text[(1 << 20) + 1] = '\n';
    write_bytes(big, big_text, (1 << 20) + 2);
    ERR_RUN(("gray", in, "-o", out, "--config", big), 1, "is too large (more than 1048576 bytes)",
             out);
    write_bytes(big, "", 0); /* an empty file is a valid, empty config */
    r = RUN("config", "--print", "--config", big);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    twtest_run_free(&r);
    r = RUN_ENV(unknown_env, "gray", in, "-o", out);
    expect_error(&r, 1, "TILEWAVE_NOSUCH_KEY: unknown variable", out);
    snprintf(long_val, 64, "TILEWAVE_RUNTIME_TRACE=");
    memset(long_val + strlen(long_val), 'x', 5000);
    long_val[23 + 5000] = '\0';
    r = RUN_ENV((const char *const *)long_env, "gray", in, "-o", out);
    expect_error(&r, 1, "TILEWAVE_RUNTIME_TRACE: value too long (5000 bytes, at most 4096)", out);
    r = RUN_ENV(lead_env, "config", "--print");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "runtime.cpu_workers = 1\n") != NULL);
    twtest_run_free(&r);
    r = RUN_ENV(trail_env, "config", "--print");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "runtime.cpu_workers = 1\n") != NULL);
    twtest_run_free(&r);
    r = RUN("config", "--print", "--set", "runtime.cpu_workers= 2 ", "--set", "tile.size=\t64 ");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "runtime.cpu_workers = 2\n") != NULL);
    cr_assert(strstr(r.out, "tile.size = 64x64\n") != NULL);
    twtest_run_free(&r);
    ERR_RUN(("gray", in, "-o", out, "--set", "io.tiff_tile=65536x65536"), 2,
             "bad value '65536x65536' for io.tiff_tile (range 16x16..16384x16384, multiple of "
             "16)", out);
    r = RUN_ENV(tiff_env, "gray", in, "-o", out);
    expect_error(&r, 1, "TILEWAVE_IO_TIFF_TILE: bad value '65536x65536'", out);
    OK_RUN("gray", in, "-o", out, "--set", "io.tiff_tile=16384x16384", "--quiet");
    text = twtest_slurp(out);
    cr_assert(text != NULL);
    free(text);
    free(in), free(out), free(nul), free(big), free(long_val), free(big_text);
}
