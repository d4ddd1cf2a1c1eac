/* fuzz_url.c -- fence__url_parse (lib/lease/redis/url.c) on any text.
 *
 * Besides "no crash, no leak, no overflow" (ASan, UBSan, LeakSanitizer),
 * it checks what a parsed URL promises: NUL-terminated fields, a port in
 * 1..65535, a database in 0..1000000, an absolute unix socket path,
 * credentials masked in the display form, and nothing left allocated by
 * a refused URL.  A violation abort()s, which libFuzzer reports. */
#include "redis/redis.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_url: check failed: %s\n", #cond);        \
            abort();                                                       \
        }                                                                  \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size + 1);
    if (url == NULL) {
        return 0;
    }
    memcpy(url, data, size);
    url[size] = '\0';

    fence__url u;
    char err[256];
    err[0] = '\0';
    int rc = fence__url_parse(&u, url, err, sizeof err);
    if (rc == FENCE_OK) {
        CHECK(memchr(u.host, '\0', sizeof u.host) != NULL);
        CHECK(memchr(u.path, '\0', sizeof u.path) != NULL);
        CHECK(memchr(u.display, '\0', sizeof u.display) != NULL);
        CHECK(u.db >= 0 && u.db <= 1000000);
        if (u.is_unix) {
            CHECK(u.path[0] == '/');
            CHECK(strncmp(u.display, "unix://", 7) == 0);
            CHECK(u.user == NULL && u.password == NULL);
        } else {
            CHECK(u.host[0] != '\0');
            CHECK(u.port >= 1 && u.port <= 65535);
            CHECK(u.password == NULL || u.password[0] != '\0');
            /* redis://, rediss:// (TLS) or redis-sentinel:// (issue 9) */
            const char *scheme = u.sentinel ? "redis-sentinel://" : u.tls ? "rediss://"
                                                                          : "redis://";
            size_t sl = strlen(scheme);
            CHECK(strncmp(u.display, scheme, sl) == 0);
            if (u.user != NULL || u.password != NULL) {
                CHECK(strncmp(u.display + sl, "***@", 4) == 0);
            } else {
                CHECK(strchr(u.display, '@') == NULL);
            }
            if (u.sentinel) {
                CHECK(u.nsentinels >= 1 && u.nsentinels <= FENCE__MAX_SENTINELS);
                CHECK(u.master[0] != '\0');
                for (int i = 0; i < u.nsentinels; i++) {
                    CHECK(u.sentinels[i].port >= 1 && u.sentinels[i].port <= 65535);
                    CHECK(u.sentinels[i].host[0] != '\0');
                }
            }
        }
    } else {
        CHECK(rc == FENCE_EINVAL || rc == FENCE_ENOMEM);
        CHECK(memchr(err, '\0', sizeof err) != NULL);
        CHECK(rc == FENCE_ENOMEM || err[0] != '\0');
        CHECK(u.user == NULL && u.password == NULL); /* freed on the way out */
    }
    fence__url_free(&u); /* after a refused URL too: must be a no-op */
    free(url);
    return 0;
}
