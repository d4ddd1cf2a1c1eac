/* slot.c -- Redis Cluster hash slots: CRC16 (XMODEM: polynomial 0x1021,
 * initial 0, no reflection, as in the Redis cluster specification) of a
 * key's hash tag, modulo 16384.  The tag is the text between the first '{'
 * and the first '}' after it when that is non-empty, else the whole key:
 * computed from the real key, so any prefix is handled exactly. */
#include "lease_internal.h"

#include <string.h>

uint16_t fence__crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++) {
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

int fence__key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open + 1 - key);
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1) {
            return fence__crc16(open + 1, (size_t)(close - open - 1)) & (FENCE__SLOTS - 1);
        }
    }
    return fence__crc16(key, len) & (FENCE__SLOTS - 1);
}
