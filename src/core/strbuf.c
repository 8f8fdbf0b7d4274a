#include "core/strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

void tdm_sb_init(tdm_strbuf *sb) {
    sb->data = NULL;
    sb->len = sb->cap = 0;
}

void tdm_sb_free(tdm_strbuf *sb) {
    free(sb->data);
    tdm_sb_init(sb);
}

void tdm_sb_clear(tdm_strbuf *sb) {
    sb->len = 0;
    if (sb->data) sb->data[0] = 0;
}

static void reserve(tdm_strbuf *sb, size_t extra) {
    if (sb->len + extra + 1 <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1) cap *= 2;
    sb->data = tdm_xrealloc(sb->data, cap);
    sb->cap = cap;
}

void tdm_sb_append(tdm_strbuf *sb, const char *bytes, size_t n) {
    reserve(sb, n);
    memcpy(sb->data + sb->len, bytes, n);
    sb->len += n;
    sb->data[sb->len] = 0;
}

void tdm_sb_puts(tdm_strbuf *sb, const char *s) { tdm_sb_append(sb, s, strlen(s)); }

void tdm_sb_putc(tdm_strbuf *sb, char c) { tdm_sb_append(sb, &c, 1); }

void tdm_sb_printf(tdm_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    reserve(sb, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void tdm_sb_json_string(tdm_strbuf *sb, const char *s, size_t n) {
    tdm_sb_putc(sb, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': tdm_sb_puts(sb, "\\\""); break;
        case '\\': tdm_sb_puts(sb, "\\\\"); break;
        case '\n': tdm_sb_puts(sb, "\\n"); break;
        case '\r': tdm_sb_puts(sb, "\\r"); break;
        case '\t': tdm_sb_puts(sb, "\\t"); break;
        default:
            if (c < 0x20) tdm_sb_printf(sb, "\\u%04x", c);
            else tdm_sb_putc(sb, (char)c);
        }
    }
    tdm_sb_putc(sb, '"');
}

void tdm_sb_json_key_num(tdm_strbuf *sb, const char *key, double v) {
    if (isfinite(v)) tdm_sb_printf(sb, "\"%s\": %.6g", key, v);
    else tdm_sb_printf(sb, "\"%s\": null", key);
}

void tdm_sb_json_key_string(tdm_strbuf *sb, const char *key, const char *s) {
    tdm_sb_printf(sb, "\"%s\": ", key);
    tdm_sb_json_string(sb, s, strlen(s));
}
