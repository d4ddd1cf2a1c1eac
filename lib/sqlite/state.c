/* state.c -- the per-connection state (the token and holder of the
 * connection's current or next write transaction), the registry that
 * finds it from a sqlite3* (see sqlite_internal.h), and the commit and
 * rollback hooks that end the token with its transaction. */
#include "sqlite_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static fs_state *reg_head;

static fs_state *reg_find_locked(const sqlite3 *db)
{
    for (fs_state *s = reg_head; s != NULL; s = s->next) {
        if (s->db == db) {
            return s;
        }
    }
    return NULL;
}

fs_state *fence_sqlite__state_get(const sqlite3 *db)
{
    pthread_mutex_lock(&reg_lock);
    fs_state *s = reg_find_locked(db);
    pthread_mutex_unlock(&reg_lock);
    return s;
}

void fence_sqlite__state_ref(fs_state *s)
{
    pthread_mutex_lock(&reg_lock);
    s->refs++;
    pthread_mutex_unlock(&reg_lock);
}

void fence_sqlite__state_unref(void *p)
{
    fs_state *s = p;
    pthread_mutex_lock(&reg_lock);
    if (--s->refs == 0) {
        for (fs_state **pp = &reg_head; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        }
        pthread_mutex_destroy(&s->hlock);
        free(s);
    }
    pthread_mutex_unlock(&reg_lock);
}

fs_state *fence_sqlite__state_acquire(sqlite3 *db)
{
    pthread_mutex_lock(&reg_lock);
    fs_state *s = reg_find_locked(db);
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        if (s != NULL && pthread_mutex_init(&s->hlock, NULL) != 0) {
            free(s);
            s = NULL;
        }
        if (s != NULL) {
            s->db = db;
            atomic_init(&s->token, 0);
            s->next = reg_head;
            reg_head = s;
        }
    }
    if (s != NULL) {
        s->refs++;
    }
    pthread_mutex_unlock(&reg_lock);
    return s;
}

/* The hooks get the connection, not its state: a state is freed when
 * SQLite drops the last function registered with it, which can happen
 * while the connection (and its hooks) live on; the registry answers
 * NULL then.  They only clear memory: a hook must not use the connection
 * (SQLite's rule), and these never do. */
static void txn_end(void *db)
{
    pthread_mutex_lock(&reg_lock);
    fs_state *s = reg_find_locked(db);
    if (s != NULL) {
        pthread_mutex_lock(&s->hlock);
        s->holder[0] = '\0';
        atomic_store(&s->token, 0);
        pthread_mutex_unlock(&s->hlock);
    }
    pthread_mutex_unlock(&reg_lock);
}

static int commit_hook(void *db)
{
    txn_end(db);
    return 0; /* let the commit go on */
}

static void rollback_hook(void *db)
{
    txn_end(db);
}

void fence_sqlite__hooks_install(sqlite3 *db)
{
    sqlite3_commit_hook(db, commit_hook, db);
    sqlite3_rollback_hook(db, rollback_hook, db);
}

void fence_sqlite__state_set(fs_state *s, int64_t token, const char *holder)
{
    if (token > 0) {
        /* Before the lock: installing takes the connection's mutex, which
         * a hook runs under, and a hook takes hlock. */
        fence_sqlite__hooks_install(s->db);
    }
    pthread_mutex_lock(&s->hlock);
    if (holder != NULL && holder[0] != '\0') {
        memcpy(s->holder, holder, FENCE_HOLDER_LEN);
        s->holder[FENCE_HOLDER_LEN] = '\0';
    } else {
        s->holder[0] = '\0';
    }
    atomic_store(&s->token, token);
    pthread_mutex_unlock(&s->hlock);
}

void fence_sqlite__state_holder(fs_state *s, char out[FENCE_HOLDER_LEN + 1])
{
    pthread_mutex_lock(&s->hlock);
    memcpy(out, s->holder, FENCE_HOLDER_LEN + 1);
    pthread_mutex_unlock(&s->hlock);
}
