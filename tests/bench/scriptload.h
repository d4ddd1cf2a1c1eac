/* scriptload.h -- the library's Lua scripts, read from the source tree and
 * loaded into Redis, for the benchmarks that send them by bare hiredis
 * (bench_lease, cycle_loop). */
#ifndef FENCE_BENCH_SCRIPTLOAD_H
#define FENCE_BENCH_SCRIPTLOAD_H

#include <hiredis/hiredis.h>

/* The file at path, and path2 after a newline when not NULL (as rscripts.c
 * joins issue.lua and acquire.lua), loaded by SCRIPT LOAD: sha gets its
 * SHA1.  Exits with a message when a file cannot be read (run from the
 * source tree, as make bench does) or Redis refuses it. */
void bench_load_script(redisContext *r, const char *path, const char *path2, char sha[41]);

#endif
