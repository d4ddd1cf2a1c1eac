/* scriptload.c -- see scriptload.h. */
#include "scriptload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_load_script(redisContext *r, const char *path, const char *path2, char sha[41])
{
    static char buf[131072];
    size_t n = 0;
    const char *paths[2] = {path, path2};
    for (int i = 0; i < 2 && paths[i] != NULL; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (f == NULL) {
            fprintf(stderr, "bench: cannot read %s (run from the source tree, as make bench "
                            "does)\n", paths[i]);
            exit(1);
        }
        if (i > 0) {
            buf[n++] = '\n';
        }
        n += fread(buf + n, 1, sizeof buf - 2 - n, f);
        fclose(f);
    }
    redisReply *x = redisCommand(r, "SCRIPT LOAD %b", buf, n);
    if (x == NULL || x->type != REDIS_REPLY_STRING || x->len != 40) {
        fprintf(stderr, "bench: SCRIPT LOAD of %s failed\n", path2 != NULL ? path2 : path);
        exit(1);
    }
    memcpy(sha, x->str, 41);
    freeReplyObject(x);
}
