/* tests/docs/setup/common.h -- what every wrapped fragment gets (see
 * tests/docs/test_docs.sh): the usual headers, the names the snippets use
 * for "the token and holder id you were given" (a lease setup replaces
 * them with its lease's), and doc_fail(). */
#ifndef DOC_SETUP_COMMON_H
#define DOC_SETUP_COMMON_H
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t token __attribute__((unused)) = 42;
static const char *holder __attribute__((unused)) = "0123456789abcdef0123456789abcdef";

__attribute__((format(printf, 1, 2), unused)) static int doc_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("doc-test: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

__attribute__((unused)) static const char *doc_env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}
#endif
