/* SPDX-License-Identifier: MIT */
/* tilewave fuzz target: the CLI's argument parsing and validation for every command. The
 * CLI's sources are compiled in with TW_CLI_FUZZ: a command returns CLI_FUZZ_STOP where it
 * would create a runtime, open a slide or write a file (cli/cli.h). */
#include <getopt.h>
#include <sys/stat.h>

#include "cli.h"
#include "fuzz_common.h"

#define MAX_ARGS 64

/* The process as the CLI sees it: a scratch folder as the working directory holding two
 * configs (good.ini, bad.ini), no TILEWAVE_* configuration, output to /dev/null. */
static void
fz_init(void)
{
    char dir[] = "/tmp/tw-fuzz-cli-XXXXXX";
    FILE *f;

    fz_quiet();
    FZ_CHECK(mkdtemp(dir) != NULL);
    FZ_CHECK(chdir(dir) == 0);
    FZ_CHECK((f = fopen("good.ini", "w")) != NULL);
    fputs("[tile]\nsize = 256x256\n[runtime]\ncpu_workers = 1\ngpus = none\n", f);
    fclose(f);
    FZ_CHECK((f = fopen("bad.ini", "w")) != NULL);
    fputs("[tile]\nsize = 7x7\nno_such = 1\n", f);
    fclose(f);
    unsetenv("TILEWAVE_CONFIG");
    setenv("XDG_CACHE_HOME", dir, 1);
    setenv("TILEWAVE_RUNTIME_MODELS", "none", 1);
    stdout = fopen("/dev/null", "w");
    stderr = fopen("/dev/null", "w");
    FZ_CHECK(stdout && stderr);
}

/* glibc's getopt keeps a pointer into the previous argv when a command stopped inside a
 * cluster of short options ("-hx"); optind = 0 makes the next call start afresh. */
static void
fz_getopt_reset(void)
{
    static char a0[] = "x";
    char *av[] = {a0, NULL};

    optind = 0;
    opterr = 0;
    (void)getopt(1, av, "");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    char *argv[MAX_ARGS + 2], *buf;
    int argc = 0, rc;
    size_t cmd, i, start;

    if (!init) {
        fz_init();
        init = 1;
    }
    if (size < 1 || size > 4096)
        return 0;
    cmd = data[0] % cli_n_commands;
    /* Paths stay inside the scratch folder: no '/' (nothing like /dev/stdin or /proc). */
    if (memchr(data + 1, '/', size - 1))
        return 0;
    buf = malloc(size);
    FZ_CHECK(buf != NULL);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    argv[argc++] = (char *)cli_commands[cmd].name;
    /* NUL-separated arguments, empty ones included; a trailing NUL ends the last one */
    for (i = 0, start = 0; i < size - 1 && argc < MAX_ARGS; i++)
        if (buf[i] == '\0') {
            argv[argc++] = buf + start;
            start = i + 1;
        }
    if (start < size - 1 && argc < MAX_ARGS)
        argv[argc++] = buf + start;
    argv[argc] = NULL;
    fz_getopt_reset();
    cli_set_command_line(argc, argv);
    FZ_CHECK(cli_command_line() != NULL);
    rc = cli_commands[cmd].fn(argc, argv);
    /* every exit is one of the documented codes */
    FZ_CHECK(rc == CLI_OK || rc == CLI_FAIL || rc == CLI_USAGE || rc == CLI_FUZZ_STOP);
    free(buf);
    return 0;
}
