/*
 * fence_common.h -- what the four fence libraries share: status codes and
 * their text, version, limits, and the description of a rejected write.
 *
 * The libraries: libfence (fence.h) issues leases and fencing tokens from
 * Redis; libfence_pg (fence_pg.h), libfence_sqlite (fence_sqlite.h) and
 * libfence_gate (fence_gate.h) check tokens at the store.  The checkers
 * never link libfence: each includes this header, not fence.h, and carries
 * its own copy of the few functions declared here.
 *
 * Status codes are only ever appended, never renumbered.
 */
#ifndef FENCE_COMMON_H
#define FENCE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FENCE_API __attribute__((visibility("default")))
#else
#define FENCE_API
#endif

#define FENCE_VERSION_MAJOR 0
#define FENCE_VERSION_MINOR 2
#define FENCE_VERSION_PATCH 0
#define FENCE_VERSION_STRING "0.2.0"

/*
 * Every fence_* function that can fail returns one of these.  FENCE_OK is
 * success; FENCE_BUSY and FENCE_TIMEOUT are expected outcomes of acquiring
 * a contended lease, FENCE_LOST and FENCE_STALE are the outcomes the
 * toolkit exists to report.  One table (an X-macro) gives both the codes
 * and their strings, so they cannot drift apart.
 */
#define FENCE_STATUS_MAP(X)                                                  \
    X(FENCE_OK, 0, "success")                                                 \
    X(FENCE_EINVAL, 1, "invalid argument")                                    \
    X(FENCE_ENOMEM, 2, "out of memory")                                       \
    X(FENCE_ECONN, 3, "cannot reach the server, or the connection failed")    \
    X(FENCE_EAUTH, 4, "authentication refused by the server")                 \
    X(FENCE_EPROTO, 5, "unexpected reply or error from the server")           \
    X(FENCE_BUSY, 6, "lease is held by another owner")                        \
    X(FENCE_TIMEOUT, 7, "deadline passed before the lease was acquired")      \
    X(FENCE_LOST, 8, "lease was lost: expired or taken by another owner")     \
    X(FENCE_STALE, 9, "write rejected: fencing token older than the newest, or repeated") \
    X(FENCE_ESTATE, 10, "call not valid in the handle's current state")       \
    X(FENCE_ESYS, 11, "operating system error")                               \
    X(FENCE_EDB, 12, "database error")                                        \
    X(FENCE_ENOTOKEN, 13, "no valid fencing token: missing, malformed or <= 0") \
    X(FENCE_ECONFIG, 14, "the server's configuration can lose fencing state") \
    X(FENCE_EREPLICAS, 15, "fewer replicas acknowledged the lease than required") \
    X(FENCE_ECLOCK, 16, "the server's clock is behind the one that issued the last token")

typedef enum fence_status {
#define FENCE_STATUS_ENUM_(name, code, text) name = code,
    FENCE_STATUS_MAP(FENCE_STATUS_ENUM_)
#undef FENCE_STATUS_ENUM_
} fence_status;

/* Static English text for a status code; never NULL (unknown codes get
 * "unknown status"). */
FENCE_API const char *fence_strerror(int status);

/* The name of a status code, e.g. "FENCE_LOST"; never NULL. */
FENCE_API const char *fence_status_name(int status);

/* The largest fencing token: tokens are 1..FENCE_TOKEN_MAX (2^63-1), what a
 * Redis counter, a PostgreSQL bigint and an SQLite integer all hold.  Token
 * text has one grammar everywhere: decimal digits, no sign, no spaces, no
 * leading zero ("007" is refused by every library and by the SQL). */
#define FENCE_TOKEN_MAX ((uint64_t)INT64_MAX)

/* Bytes in a lease name or a resource name (1..FENCE_NAME_MAX). */
#define FENCE_NAME_MAX 512

/* A holder id: the 128-bit owner id of a lease as 32 lowercase hex
 * digits (reserved here for the stores that record it). */
#define FENCE_HOLDER_LEN 32

/* What a rejected write was checked against. */
typedef enum fence_object_kind {
    FENCE_OBJECT_UNKNOWN = 0, /* the store did not say */
    FENCE_OBJECT_TABLE = 1,   /* a row of a protected table */
    FENCE_OBJECT_RESOURCE = 2 /* a named resource's high-water mark */
} fence_object_kind;

/* Why a write was rejected as stale. */
typedef enum fence_stale_reason {
    FENCE_STALE_OLDER = 0, /* its token is lower than the highest accepted */
    FENCE_STALE_REPEAT = 1 /* its token equals the highest, recorded for another holder */
} fence_stale_reason;

/*
 * A write rejected as stale (FENCE_STALE), as every store describes it.
 * Filled by the storage libraries' calls that take a `fence_stale *`
 * (always optional); all zero / "" unless the call returned FENCE_STALE,
 * and a field the store did not report stays zero / "".
 */
typedef struct fence_stale {
    uint64_t offered;       /* the token of the rejected write */
    uint64_t highest;       /* the highest token the object has accepted */
    fence_object_kind kind; /* table row or resource */
    fence_stale_reason reason;
    /* The resource name, or the table as its store names it: PostgreSQL
     * schema-qualified and quoted as SQL where needed ("public.orders"),
     * SQLite the name as stored (unquoted). */
    char object[2 * FENCE_NAME_MAX + 8];
    /* The holder recorded with the highest token, when the store records
     * one (FENCE_HOLDER_LEN hex digits); "" otherwise. */
    char holder[FENCE_HOLDER_LEN + 1];
} fence_stale;

#ifdef __cplusplus
}
#endif
#endif /* FENCE_COMMON_H */
