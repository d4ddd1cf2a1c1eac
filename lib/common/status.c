/* status.c -- text for status codes, from the one table in fence_common.h. */
#include "fence_common.h"

const char *fence_strerror(int status)
{
    switch (status) {
#define FENCE_STATUS_TEXT_(name, code, text) \
    case code:                               \
        return text;
        FENCE_STATUS_MAP(FENCE_STATUS_TEXT_)
#undef FENCE_STATUS_TEXT_
    }
    return "unknown status";
}

const char *fence_status_name(int status)
{
    switch (status) {
#define FENCE_STATUS_NAME_(name, code, text) \
    case code:                               \
        return #name;
        FENCE_STATUS_MAP(FENCE_STATUS_NAME_)
#undef FENCE_STATUS_NAME_
    }
    return "FENCE_UNKNOWN";
}
