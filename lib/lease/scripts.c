/* scripts.c -- the Lua scripts, embedded from the lib/ .lua files at build time. */
#include "lease_internal.h"

extern const char fence__lua_acquire[], fence__lua_renew[], fence__lua_renew_batch[],
    fence__lua_release[], fence__lua_token_raise[], fence__lua_inspect[];
extern const size_t fence__lua_acquire_len, fence__lua_renew_len, fence__lua_renew_batch_len,
    fence__lua_release_len, fence__lua_token_raise_len, fence__lua_inspect_len;

const char *fence__script_body(int s)
{
    switch (s) {
    case FENCE__ACQUIRE: return fence__lua_acquire;
    case FENCE__RENEW: return fence__lua_renew;
    case FENCE__RENEW_BATCH: return fence__lua_renew_batch;
    case FENCE__RELEASE: return fence__lua_release;
    case FENCE__TOKEN_RAISE: return fence__lua_token_raise;
    case FENCE__INSPECT: return fence__lua_inspect;
    }
    return "";
}

size_t fence__script_len(int s)
{
    switch (s) {
    case FENCE__ACQUIRE: return fence__lua_acquire_len;
    case FENCE__RENEW: return fence__lua_renew_len;
    case FENCE__RENEW_BATCH: return fence__lua_renew_batch_len;
    case FENCE__RELEASE: return fence__lua_release_len;
    case FENCE__TOKEN_RAISE: return fence__lua_token_raise_len;
    case FENCE__INSPECT: return fence__lua_inspect_len;
    }
    return 0;
}
