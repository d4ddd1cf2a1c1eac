/* metrics.c -- `fence run --metrics-file PATH`: checked before anything
 * runs, written when the command ends, every series labelled with the
 * lease's name so that two jobs writing to one textfile folder are told
 * apart. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli__metrics_check(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dlen = slash == NULL ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(dlen + 1);
    if (dir == NULL) {
        fprintf(stderr, "fence run: --metrics-file: out of memory\n");
        return CLI_EX_OSERR;
    }
    memcpy(dir, slash == NULL ? "." : path, dlen);
    dir[dlen] = '\0';
    struct stat st;
    int ex = CLI_EX_OK;
    if (stat(dir, &st) != 0) {
        ex = cli__usage_error("run", "--metrics-file %s: its folder %s: %s", path, dir,
                              strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        ex = cli__usage_error("run", "--metrics-file %s: %s is not a folder", path, dir);
    } else if (access(dir, W_OK | X_OK) != 0) {
        ex = cli__usage_error("run", "--metrics-file %s: cannot write into its folder %s: %s",
                              path, dir, strerror(errno));
    } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        ex = cli__usage_error("run", "--metrics-file %s: is a folder", path);
    }
    free(dir);
    return ex;
}

/* name as a Prometheus label value: '\' '"' and newline escaped (the text
 * format's rules).  malloc'ed; NULL when out of memory. */
static char *label_value(const char *name)
{
    char *out = malloc(2 * strlen(name) + 1);
    if (out == NULL) {
        return NULL;
    }
    char *o = out;
    for (const char *p = name; *p != '\0'; p++) {
        if (*p == '\\' || *p == '"') {
            *o++ = '\\';
            *o++ = *p;
        } else if (*p == '\n') {
            *o++ = '\\';
            *o++ = 'n';
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

/* Write text to f with lease="NAME" added to every sample line
 * ("m 1" -> "m{lease="x"} 1", "m{le="1"} 2" -> "m{lease="x",le="1"} 2");
 * comment lines are copied. */
static void write_labelled(FILE *f, const char *text, const char *label)
{
    for (const char *line = text; *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) + 1 : strlen(line);
        size_t name_len = strcspn(line, "{ \n");
        if (line[0] == '#' || line[name_len] == '\n' || line[name_len] == '\0') {
            fwrite(line, 1, len, f);
        } else if (line[name_len] == '{') {
            fprintf(f, "%.*slease=\"%s\",%.*s", (int)name_len + 1, line, label,
                    (int)(len - name_len - 1), line + name_len + 1);
        } else {
            fprintf(f, "%.*s{lease=\"%s\"}%.*s", (int)name_len, line, label,
                    (int)(len - name_len), line + name_len);
        }
        line += len;
    }
}

/* Write the labelled text to tmp; 0 or -1 (errno set). */
static int write_file(const char *tmp, const char *text, const char *label)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && f == NULL) {
        close(fd);
    }
    if (f == NULL) {
        return -1;
    }
    write_labelled(f, text, label);
    int ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        if (errno == 0) {
            errno = EIO;
        }
        return -1;
    }
    return 0;
}

void cli__metrics_write(fence_client *c, const char *path, const char *name)
{
    fence_metrics m;
    if (fence_client_metrics(c, &m) != FENCE_OK) {
        fprintf(stderr, "fence run: --metrics-file: cannot read the metrics\n");
        return;
    }
    int n = fence_metrics_prometheus(&m, NULL, 0);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    char *label = label_value(name);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (text == NULL || tmp == NULL || label == NULL) {
        fprintf(stderr, "fence run: --metrics-file: out of memory\n");
        free(text);
        free(tmp);
        free(label);
        return;
    }
    fence_metrics_prometheus(&m, text, (size_t)n + 1);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    errno = 0;
    if (write_file(tmp, text, label) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "fence run: --metrics-file %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(text);
    free(tmp);
    free(label);
}
