/* classify.c -- reading a refusal back: the message the triggers raise
 * ("fence:stale <kind> "<name>": token N is older than M (write
 * rejected) reason=older[ holder=H]", "... token N is not newer than M
 * (write rejected) reason=repeat holder=H", "fence:notoken ...") turned
 * into a status and a fence_stale (format: fn_stale in sqlfuncs.c).
 * Tokens in it are read with the one grammar of common.h.  From the
 * connection (fence_sqlite_classify) or from a code and message
 * (fence_sqlite_classify_error), by one rule (classify_code). */
#include "sqlite_internal.h"

#include <string.h>

/* A token as fn_stale printed it (0..FENCE_TOKEN_MAX, digits only),
 * followed by exactly SUFFIX.  Returns the text after the suffix, or NULL
 * (and *out untouched) when it is not that. */
static const char *scan_token(const char *p, const char *suffix, uint64_t *out)
{
    uint64_t v = 0;
    const char *end = NULL;
    if (fence__u64_scan(p, FENCE_TOKEN_MAX, &v, &end) != 0) {
        return NULL;
    }
    size_t n = strlen(suffix);
    if (strncmp(end, suffix, n) != 0) {
        return NULL;
    }
    *out = v;
    return end + n;
}

/* The kind word at *p ("table" or "resource", then ' ' or ':'). */
static fence_object_kind scan_kind(const char **p)
{
    static const struct {
        const char *word;
        fence_object_kind kind;
    } kinds[] = {{"table", FENCE_OBJECT_TABLE}, {"resource", FENCE_OBJECT_RESOURCE}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].word);
        if (strncmp(*p, kinds[i].word, n) == 0 && ((*p)[n] == ' ' || (*p)[n] == ':')) {
            *p += n;
            return kinds[i].kind;
        }
    }
    return FENCE_OBJECT_UNKNOWN;
}

/* A name quoted as fn_stale prints it (%w: "..." with inner quotes
 * doubled), into out (truncated to fit).  Returns the text after it. */
static const char *scan_name(const char *p, char *out, size_t cap)
{
    size_t o = 0;
    while (*p != '\0') {
        if (p[0] == '"' && p[1] == '"') {
            p++;
        } else if (p[0] == '"') {
            p++;
            break;
        }
        if (o + 1 < cap) {
            out[o++] = *p;
        }
        p++;
    }
    out[o] = '\0';
    return p;
}

/* After "(write rejected)": space-separated key=value words; the holder
 * is taken from " holder=" followed by exactly FENCE_HOLDER_LEN lowercase
 * hex digits and then a space or the end ("none", or anything else: ""). */
static void scan_holder(const char *p, fence_stale *out)
{
    static const char key[] = " holder=";
    for (const char *h = strstr(p, key); h != NULL; h = strstr(h + 1, key)) {
        const char *v = h + sizeof key - 1;
        size_t n = strspn(v, "0123456789abcdef");
        if (n == FENCE_HOLDER_LEN && (v[n] == '\0' || v[n] == ' ')) {
            memcpy(out->holder, v, FENCE_HOLDER_LEN);
            out->holder[FENCE_HOLDER_LEN] = '\0';
            return;
        }
    }
}

/* ["table"|"resource"] [" \"quoted name\""] [": token N is older than M
 * (write rejected)" | ": token N is not newer than M (write rejected)"
 * [" key=value"...]] after the "fence:stale " prefix. */
static void parse_detail(const char *p, fence_stale *out)
{
    out->kind = scan_kind(&p);
    if (out->kind != FENCE_OBJECT_UNKNOWN && p[0] == ' ' && p[1] == '"') {
        p = scan_name(p + 2, out->object, sizeof out->object);
    }
    const char *t = strstr(p, ": token ");
    if (t == NULL) {
        return;
    }
    /* Each number on its own: a stamp that is not a plain integer (a REAL
     * such as 1.0e+30, text) is unknown (0), never misread.  The wording
     * says why: "older" (FENCE_STALE_OLDER) or "not newer" (an equal token
     * recorded for another holder, FENCE_STALE_REPEAT). */
    const char *rest = scan_token(t + 8, " is older than ", &out->offered);
    if (rest == NULL) {
        rest = scan_token(t + 8, " is not newer than ", &out->offered);
        if (rest != NULL) {
            out->reason = FENCE_STALE_REPEAT;
        }
    }
    if (rest != NULL) {
        rest = scan_token(rest, " (write rejected)", &out->highest);
    }
    if (rest != NULL) {
        scan_holder(rest, out);
    }
}

fence_status fence_sqlite__parse_message(const char *msg, fence_stale *out)
{
    fence_stale local;
    fence_stale *st = out != NULL ? out : &local;
    memset(st, 0, sizeof *st);
    if (msg == NULL) {
        return FENCE_EDB;
    }
    if (strncmp(msg, "fence:stale ", 12) == 0) {
        parse_detail(msg + 12, st);
        return FENCE_STALE;
    }
    if (strncmp(msg, "fence:notoken ", 14) == 0) {
        return FENCE_ENOTOKEN;
    }
    if (strncmp(msg, "fence:einval ", 13) == 0) {
        return FENCE_EINVAL;
    }
    return FENCE_EDB;
}

/* What an SQLite error is, by its extended code and message (the rule
 * fence_sqlite_classify and fence_sqlite_classify_error share). */
static fence_status classify_code(int code, const char *msg, fence_stale *stale)
{
    if (code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE) {
        return FENCE_OK;
    }
    int primary = code & 0xff;
    fence_stale parsed;
    fence_status st = fence_sqlite__parse_message(msg, &parsed);
    if (st == FENCE_STALE && primary != SQLITE_CONSTRAINT) {
        st = FENCE_EDB; /* only the triggers raise it, with SQLITE_CONSTRAINT_TRIGGER */
    } else if (st == FENCE_ENOTOKEN && primary != SQLITE_CONSTRAINT && primary != SQLITE_ERROR) {
        st = FENCE_EDB; /* a trigger's RAISE, or fence_set_token's error */
    }
    if (st == FENCE_STALE && stale != NULL) {
        *stale = parsed;
    }
    return st;
}

fence_status fence_sqlite_classify(sqlite3 *db, fence_stale *stale)
{
    if (stale != NULL) {
        memset(stale, 0, sizeof *stale);
    }
    if (db == NULL) {
        return fs_fail(NULL, FENCE_EINVAL, "fence_sqlite_classify: db is NULL");
    }
    const char *msg = sqlite3_errmsg(db);
    fence_status st = classify_code(sqlite3_extended_errcode(db), msg, stale);
    if (st == FENCE_OK) {
        return fence_sqlite__ok(db);
    }
    return (fence_status)fs_fail(db, st, "%s", msg != NULL ? msg : "");
}

fence_status fence_sqlite_classify_error(int errcode, const char *msg, fence_stale *stale)
{
    if (stale != NULL) {
        memset(stale, 0, sizeof *stale);
    }
    if (msg == NULL) {
        return fs_fail(NULL, FENCE_EINVAL, "fence_sqlite_classify_error: msg is NULL");
    }
    return classify_code(errcode, msg, stale);
}
