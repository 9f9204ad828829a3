/* SPDX-License-Identifier: MIT */
/* tilewave tests: can a ThreadSanitizer program start here? (tests/CMakeLists.txt's try_run) */
#include <pthread.h>

static int x;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *
bump(void *a)
{
    pthread_mutex_lock(&m);
    x++;
    pthread_mutex_unlock(&m);
    return a;
}

int
main(void)
{
    pthread_t t;

    if (pthread_create(&t, 0, bump, 0))
        return 1;
    bump(0);
    pthread_join(t, 0);
    return x == 2 ? 0 : 1;
}
