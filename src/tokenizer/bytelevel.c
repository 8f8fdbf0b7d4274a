#include "tokenizer/bytelevel.h"

#include <string.h>

#include "core/alloc.h"

/* GPT-2's bytes_to_unicode, as a predicate: bytes that keep their own code point. */
static int byte_is_printable(unsigned b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The unprintable bytes, in order, are 0..32 (33 bytes), 127..160 (34) and 173 (1):
 * the n-th of them maps to U+0100 + n. */
uint32_t tdm_bytelevel_char(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 32) return 0x100 + b;
    if (b <= 160) return 0x100 + 33 + (b - 127u);
    return 0x100 + 67; /* 173, the soft hyphen */
}

int tdm_bytelevel_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 67) return (int)(cp - 0x100 - 33 + 127);
    return cp == 0x100 + 67 ? 173 : -1;
}

int tdm_utf8_put(char *out, uint32_t cp) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The WHATWG decoder: the lead byte fixes how many continuation bytes follow and the
 * allowed range of the first one (which excludes overlongs, surrogates and > U+10FFFF). */
int tdm_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t v;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        v = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        v = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        v = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        *cp = 0xFFFD;
        return 1;
    }
    size_t i = 1;
    for (int k = 0; k < need; k++, i++) {
        if (i >= n || s[i] < lo || s[i] > hi) {
            *cp = 0xFFFD;
            return (int)i; /* the lead byte and the continuation bytes that were valid */
        }
        v = (v << 6) | (s[i] & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = v;
    return (int)i;
}

int tdm_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = tdm_utf8_next(u + i, n - i, &cp);
        if (cp == 0xFFFD && !(k == 3 && u[i] == 0xEF && u[i + 1] == 0xBF && u[i + 2] == 0xBD)) return 0;
        i += (size_t)k;
    }
    return 1;
}

char *tdm_utf8_repair(const char *s, size_t n, size_t *out_len) {
    const unsigned char *u = (const unsigned char *)s;
    char *out = tdm_xmalloc(3 * n + 1);
    size_t o = 0, i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            out[o++] = (char)u[i++];
            continue;
        }
        uint32_t cp;
        int k = tdm_utf8_next(u + i, n - i, &cp);
        if (cp == 0xFFFD) {
            o += (size_t)tdm_utf8_put(out + o, 0xFFFD); /* also rewrites a literal U+FFFD: same bytes */
        } else {
            memcpy(out + o, u + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    out[o] = 0;
    *out_len = o;
    return out;
}
