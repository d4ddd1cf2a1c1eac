/* clockshim_tool.c -- clockshim-ctl, the control-file writer for scripts
 * (make torture): the same calls the C suites use (clockshim_ctl.c).
 *
 *   clockshim-ctl create FILE [OFFSET_US]   a new file: the wall clocks
 *                                           OFFSET_US off (default 0), real rates
 *   clockshim-ctl step FILE STEP_US         step the wall clocks of every
 *                                           process using FILE, now
 *   clockshim-ctl offset FILE               print the wall offset (us)
 *
 * Exit 0, 1 when the file cannot be written or read, 64 on bad usage. */
#include "clockshim.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: clockshim-ctl create FILE [OFFSET_US] | step FILE STEP_US | "
                    "offset FILE\n");
    return 64;
}

/* A signed decimal that fits int64_t, the whole argument. */
static int parse_us(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        return usage();
    }
    const char *cmd = argv[1], *path = argv[2];
    int64_t us = 0;
    if (strcmp(cmd, "create") == 0 && argc <= 4) {
        if (argc == 4 && parse_us(argv[3], &us) != 0) {
            return usage();
        }
        if (clockshim_create(path, us, 1.0, 1.0) != 0) {
            fprintf(stderr, "clockshim-ctl: %s: %s\n", path, strerror(errno));
            return 1;
        }
        return 0;
    }
    if (strcmp(cmd, "step") == 0 && argc == 4) {
        if (parse_us(argv[3], &us) != 0) {
            return usage();
        }
        if (clockshim_step(path, us) != 0) {
            fprintf(stderr, "clockshim-ctl: %s: %s\n", path, strerror(errno));
            return 1;
        }
        return 0;
    }
    if (strcmp(cmd, "offset") == 0 && argc == 3) {
        printf("%" PRId64 "\n", clockshim_wall_offset_us(path));
        return 0;
    }
    return usage();
}
