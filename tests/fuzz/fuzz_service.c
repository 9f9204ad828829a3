/* SPDX-License-Identifier: MIT */
/* tilewave fuzz target: the service example's request parser and path confinement. */
/*
 * The bytes up to the first newline are one request line, parsed by svc_request_parse
 * (examples/service_request.c); a submit's IN and OUT then go through svc_path_confine with
 * two roots, a scratch folder made once holding a regular file, a folder, links inside and
 * out of the roots, a dangling link, a link loop, a FIFO, a link to /dev/null and a file
 * standing for the socket. Checked: a refusal is one non-empty line; a parsed request has
 * values in the documented ranges; a confined path is absolute, free of ".", ".." and "//"
 * components, inside a root on a component boundary, resolves to itself, and names a regular
 * file other than the socket or nothing (in a folder of the roots); every refusal of a path
 * outside the roots is the one generic text.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "service_request.h"

static svc_roots roots;
static char root[64];

static const char *const names[] = {"sub/x.tif", "sub", "in.tif", "sock", "l", "e", "n", "d",
                                    "loop", "z", "t", "s", "f"};

/* The scratch folder removed when the fuzzer exits. */
static void
fz_cleanup(void)
{
    char p[PATH_MAX];

    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", root, names[i]);
        if (unlink(p) != 0)
            rmdir(p);
    }
    rmdir(root);
}

static void
fz_setup(void)
{
    char p[PATH_MAX], why[256];
    struct stat sb;
    int fd;

    snprintf(root, sizeof root, "/tmp/twfz-svc-XXXXXX");
    FZ_CHECK(mkdtemp(root) != NULL);
#define AT(name) (snprintf(p, sizeof p, "%s/%s", root, name), p)
    FZ_CHECK((fd = open(AT("in.tif"), O_WRONLY | O_CREAT, 0600)) >= 0);
    close(fd);
    FZ_CHECK(mkdir(AT("sub"), 0700) == 0);
    FZ_CHECK((fd = open(AT("sub/x.tif"), O_WRONLY | O_CREAT, 0600)) >= 0);
    close(fd);
    FZ_CHECK((fd = open(AT("sock"), O_WRONLY | O_CREAT, 0600)) >= 0);
    close(fd);
    FZ_CHECK(stat(AT("sock"), &sb) == 0);
    FZ_CHECK(symlink("in.tif", AT("l")) == 0);           /* inside */
    FZ_CHECK(symlink("/etc/passwd", AT("e")) == 0);      /* outside, exists */
    FZ_CHECK(symlink("/nonexistent/x", AT("n")) == 0);   /* outside, missing */
    FZ_CHECK(symlink("missing.tif", AT("d")) == 0);      /* dangling, inside */
    FZ_CHECK(symlink("loop", AT("loop")) == 0);          /* a loop */
    FZ_CHECK(symlink("/dev/null", AT("z")) == 0);        /* a device */
    FZ_CHECK(symlink("/tmp", AT("t")) == 0);             /* a folder outside */
    FZ_CHECK(symlink("sub", AT("s")) == 0);              /* a folder inside */
    FZ_CHECK(mkfifo(AT("f"), 0600) == 0);
    FZ_CHECK(svc_roots_add(&roots, root, why, sizeof why));
    FZ_CHECK(svc_roots_add(&roots, AT("sub"), why, sizeof why));
    roots.sock_set = true;
    roots.sock_dev = sb.st_dev;
    roots.sock_ino = sb.st_ino;
    atexit(fz_cleanup);
#undef AT
}

static void
fz_check_why(const char *why, size_t n)
{
    size_t len = strnlen(why, n);

    FZ_CHECK(len > 0 && len < n);
    FZ_CHECK(strchr(why, '\n') == NULL);
}

/* Inside a root, on a component boundary (an independent check of the service's own). */
static int
fz_in_roots(const char *canon)
{
    for (int i = 0; i < roots.n; i++) {
        size_t len = strlen(roots.dir[i]);

        if (strncmp(canon, roots.dir[i], len) == 0 && (canon[len] == '\0' || canon[len] == '/'))
            return 1;
    }
    return 0;
}

static void
fz_confine(const char *path)
{
    char *canon = NULL, why[PATH_MAX + 64], *real;
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    struct stat sb;

    if (!svc_path_confine(&roots, path, &canon, &exists, &dev, &ino, why, sizeof why)) {
        fz_check_why(why, sizeof why);
        FZ_CHECK(canon == NULL);
        /* the refusal of a path outside is one text: nothing about what is there */
        if (strncmp(why, "path outside", 12) == 0) {
            char want[PATH_MAX + 64];

            snprintf(want, sizeof want, "path outside the allowed roots: %s", path);
            FZ_CHECK(strcmp(why, want) == 0);
        }
        return;
    }
    FZ_CHECK(canon != NULL && canon[0] == '/');
    FZ_CHECK(!strstr(canon, "//") && !strstr(canon, "/./") && !strstr(canon, "/../"));
    FZ_CHECK(fz_in_roots(canon));
    if (exists) {
        FZ_CHECK(lstat(canon, &sb) == 0 && S_ISREG(sb.st_mode));
        FZ_CHECK(sb.st_dev == dev && sb.st_ino == ino);
        FZ_CHECK(!(dev == roots.sock_dev && ino == roots.sock_ino));
        FZ_CHECK((real = realpath(canon, NULL)) != NULL);
        FZ_CHECK(strcmp(real, canon) == 0);
        free(real);
    } else {
        char *slash = strrchr(canon, '/');

        FZ_CHECK(lstat(canon, &sb) != 0 && errno == ENOENT);
        *slash = '\0';
        FZ_CHECK((real = realpath(canon[0] ? canon : "/", NULL)) != NULL);
        FZ_CHECK(strcmp(real, canon[0] ? canon : "/") == 0);
        FZ_CHECK(fz_in_roots(real));
        free(real);
    }
    free(canon);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    char *line, why[4096 + 64];
    const uint8_t *nl = memchr(data, '\n', size);
    svc_request r;

    if (!init) {
        fz_quiet();
        fz_setup();
        init = 1;
    }
    if (nl)
        size = (size_t)(nl - data);
    if (size > 4095) /* the service answers longer lines "request longer than" */
        return 0;
    FZ_CHECK((line = malloc(size + 1)) != NULL);
    memcpy(line, data, size);
    line[size] = '\0';
    if (!svc_request_parse(line, &r, why, sizeof why)) {
        fz_check_why(why, sizeof why);
        free(line);
        return 0;
    }
    switch (r.verb) {
    case SVC_SUBMIT:
        FZ_CHECK(r.op && r.op->name && r.p.in && r.p.out && *r.p.in && *r.p.out);
        FZ_CHECK(!strpbrk(r.p.in, " \t\r") && !strpbrk(r.p.out, " \t\r"));
        FZ_CHECK((r.p.tile_w == 0 && r.p.tile_h == 0) ||
                 (r.p.tile_w >= 16 && r.p.tile_w <= 65536 && r.p.tile_h >= 16 &&
                  r.p.tile_h <= 65536));
        FZ_CHECK(r.p.level >= 0 && r.p.level <= 1000);
        FZ_CHECK(r.p.conn == 0 || r.p.conn == 4 || r.p.conn == 8);
        FZ_CHECK(r.p.h >= 0 && r.p.h <= 65535);
        FZ_CHECK(r.p.radius >= 0 && r.p.radius <= (1 << 20));
        fz_confine(r.p.in);
        fz_confine(r.p.out);
        break;
    case SVC_STATUS:
    case SVC_WAIT:
    case SVC_CANCEL: FZ_CHECK(r.id >= 1); break;
    case SVC_LIST:
    case SVC_SHUTDOWN: break;
    default: FZ_CHECK(!"unknown verb");
    }
    free(line);
    return 0;
}
