/* strbuf.h - a growable byte string, for building JSON, traces and reports. */
#ifndef TDM_STRBUF_H
#define TDM_STRBUF_H

#include <stddef.h>

typedef struct tdm_strbuf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
} tdm_strbuf;

void tdm_sb_init(tdm_strbuf *sb);
void tdm_sb_free(tdm_strbuf *sb);
void tdm_sb_clear(tdm_strbuf *sb);
void tdm_sb_append(tdm_strbuf *sb, const char *bytes, size_t n);
void tdm_sb_puts(tdm_strbuf *sb, const char *s);
void tdm_sb_putc(tdm_strbuf *sb, char c);
void tdm_sb_printf(tdm_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal, quotes included, escaping as RFC 8259 requires. */
void tdm_sb_json_string(tdm_strbuf *sb, const char *s, size_t n);
/* Appends "key": v (%.6g; null when v is not finite), and "key": "s" (escaped): one member of a JSON object. */
void tdm_sb_json_key_num(tdm_strbuf *sb, const char *key, double v);
void tdm_sb_json_key_string(tdm_strbuf *sb, const char *key, const char *s);

#endif
