#include "tokenizer/pretok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"

struct tdm_pretok {
    pcre2_code *code;
    char name[256];
};

/* ECMAScript's WhiteSpace + LineTerminator set (what \s means in JavaScript), as the
 * body of a PCRE2 character class. */
#define JS_SPACE                                                                                                       \
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

static const char CONTRACTIONS_I[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
static const char CONTRACTIONS_JS[] = "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))";

/* Rewrites the pattern as described in pretok.h, into sb. Escapes are copied whole so
 * that "\\s" (an escaped backslash, then 's') is left alone; inside a character class
 * \s expands to the class body, outside to a bracketed class. */
static void rewrite_pattern(const char *pat, tdm_strbuf *sb) {
    size_t n = strlen(pat), clen = strlen(CONTRACTIONS_I);
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_class && n - i >= clen && !memcmp(pat + i, CONTRACTIONS_I, clen)) {
            tdm_sb_puts(sb, CONTRACTIONS_JS);
            i += clen - 1;
            continue;
        }
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char e = pat[++i];
            if (e == 's') {
                tdm_sb_puts(sb, in_class ? JS_SPACE : "[" JS_SPACE "]");
            } else if (e == 'S' && !in_class) {
                tdm_sb_puts(sb, "[^" JS_SPACE "]");
            } else {
                tdm_sb_putc(sb, '\\');
                tdm_sb_putc(sb, e);
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            tdm_sb_putc(sb, c);
            /* A ']' right after '[' or '[^' is a literal member, not the end. */
            if (i + 1 < n && pat[i + 1] == '^') tdm_sb_putc(sb, pat[++i]);
            if (i + 1 < n && pat[i + 1] == ']') tdm_sb_putc(sb, pat[++i]);
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        tdm_sb_putc(sb, c);
    }
}

tdm_pretok *tdm_pretok_create(const char *pattern, const char *name, tdm_error *err) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    rewrite_pattern(pattern, &sb);
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)sb.data, sb.len, PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    tdm_sb_free(&sb);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        tdm_errorf(err, "%s: pre_tokenizer Split regex does not compile: %s", name, (const char *)msg);
        return NULL;
    }
    /* JIT is an optimisation only: without it (e.g. an unsupported CPU) matching still works. */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    tdm_pretok *p = tdm_xcalloc(1, sizeof *p);
    p->code = re;
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

void tdm_pretok_free(tdm_pretok *p) {
    if (!p) return;
    pcre2_code_free(p->code);
    free(p);
}

int tdm_pretok_split(const tdm_pretok *p, const char *text, size_t len, tdm_piece_fn fn, void *ctx, tdm_error *err) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code, NULL);
    const unsigned char *u = (const unsigned char *)text;
    size_t prev = 0, pos = 0;
    int rc = 0;
    while (pos <= len) {
        int m = pcre2_match(p->code, (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            rc = tdm_errorf(err, "%s: pre-tokenizer regex failed at byte %zu: %s", p->name, pos, (const char *)msg);
            goto done;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (s > prev && (rc = fn(text + prev, s - prev, ctx)) != 0) goto done;
        if (e > s && (rc = fn(text + s, e - s, ctx)) != 0) goto done;
        prev = e;
        if (e > s) {
            pos = e;
        } else {
            /* An empty match: step over one whole code point, as JavaScript's "u" flag does. */
            if (e >= len) break;
            pos = e + 1;
            while (pos < len && (u[pos] & 0xC0) == 0x80) pos++;
        }
    }
    if (prev < len) rc = fn(text + prev, len - prev, ctx);
done:
    pcre2_match_data_free(md);
    return rc;
}
