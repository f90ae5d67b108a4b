/*
 * libinjection as a subprocess, for engine/tests/injection_agreement.rs.
 *
 * The engine's crates forbid `unsafe`, so the tests do not load the C
 * library into their own process: they run this program and talk to it over
 * pipes. Build it with the C libinjection that ModSecurity v3.0.9 bundles
 * (others/libinjection/src), as that test's documentation shows.
 *
 * Protocol, repeated until end of input (all integers little-endian):
 *   request:  1 byte kind ('s' = SQLi, 'x' = XSS), u32 length, the bytes
 *   response: 's' -> 1 byte verdict (0/1), 8 bytes fingerprint (NUL-padded)
 *             'x' -> 1 byte verdict (0/1)
 * The input is NUL-terminated before the call, as ModSecurity passes
 * std::string::c_str().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libinjection.h"

static int read_exact(void *buf, size_t n) {
    return n == 0 || fread(buf, 1, n, stdin) == n;
}

int main(void) {
    size_t cap = 0;
    char *buf = NULL;
    for (;;) {
        unsigned char kind;
        unsigned char len_le[4];
        if (!read_exact(&kind, 1)) {
            break;
        }
        if (!read_exact(len_le, 4)) {
            return 2;
        }
        size_t len = (size_t)len_le[0] | (size_t)len_le[1] << 8 |
                     (size_t)len_le[2] << 16 | (size_t)len_le[3] << 24;
        if (len + 1 > cap) {
            cap = len + 1;
            buf = realloc(buf, cap);
            if (buf == NULL) {
                return 3;
            }
        }
        if (!read_exact(buf, len)) {
            return 2;
        }
        buf[len] = '\0';
        if (kind == 's') {
            char fp[8];
            memset(fp, 0, sizeof fp);
            unsigned char hit = libinjection_sqli(buf, len, fp) ? 1 : 0;
            fwrite(&hit, 1, 1, stdout);
            fwrite(fp, 1, sizeof fp, stdout);
        } else if (kind == 'x') {
            unsigned char hit = libinjection_xss(buf, len) ? 1 : 0;
            fwrite(&hit, 1, 1, stdout);
        } else {
            return 2;
        }
        fflush(stdout);
    }
    free(buf);
    return 0;
}
