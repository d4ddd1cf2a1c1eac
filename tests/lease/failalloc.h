/* failalloc.h -- allocation failures on demand, for the tests only.  A test
 * binary linked with failalloc.o and -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc (tests/lease/module.mk) has every malloc, calloc and
 * realloc made by the objects linked into it -- libfence.a's among them --
 * go through the wrappers here; the C library's own (strdup inside glibc,
 * hiredis's shared library) are untouched.  Under a sanitizer or valgrind
 * the wrappers call theirs. */
#ifndef FENCE_FAILALLOC_H
#define FENCE_FAILALLOC_H

/* From now on every wrapped allocation fails (ENOMEM) on every thread but
 * the caller's; fa_stop() ends it.  fa_failed(): how many failed since
 * fa_start(). */
void fa_start(void);
void fa_stop(void);
long fa_failed(void);
#endif
