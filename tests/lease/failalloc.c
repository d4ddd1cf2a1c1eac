/* failalloc.c -- see failalloc.h. */
#include "failalloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);

static atomic_int failing;
static atomic_long failed;
static pthread_t spared; /* the thread that called fa_start() */

static int fail_now(void)
{
    if (!atomic_load(&failing) || pthread_equal(pthread_self(), spared)) {
        return 0;
    }
    atomic_fetch_add(&failed, 1);
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t n)
{
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
    return fail_now() ? NULL : __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fail_now() ? NULL : __real_realloc(p, n);
}

void fa_start(void)
{
    spared = pthread_self();
    atomic_store(&failed, 0);
    atomic_store(&failing, 1);
}

void fa_stop(void)
{
    atomic_store(&failing, 0);
}

long fa_failed(void)
{
    return atomic_load(&failed);
}
