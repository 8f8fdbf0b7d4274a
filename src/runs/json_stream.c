#include "runs/json_stream.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/alloc.h"
#include "core/strbuf.h"

#define WINDOW  ((size_t)1 << 20)
#define NUM_MAX 400 /* longer number texts (JSON allows any length) go through a heap copy */

enum { ST_VALUE, ST_ARR_FIRST, ST_OBJ_FIRST, ST_KEY, ST_AFTER, ST_DONE };

struct tdm_js {
    gzFile gz;
    const unsigned char *mem;
    size_t mem_len, mem_pos;
    int src_eof;
    char *buf, *p, *end; /* buf[0..cap] (one spare byte for a NUL) */
    size_t cap;
    uint64_t base_off; /* stream offset of buf[0] */
    char name[512];
    char err[1024];
    int failed;
    uint8_t stack[TDM_JS_MAX_DEPTH];
    int depth, state;
    tdm_js_tok cur;
    const char *text;
    size_t text_len;
    tdm_strbuf scratch;
    tdm_strbuf num; /* the current number's text */
    size_t num_len;
    double num_val;
    int num_int;
};

static int fail(tdm_js *js, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(tdm_js *js, const char *fmt, ...) {
    if (js->failed) return -1;
    char what[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(js->err, sizeof js->err, "%.500s: byte %llu: %s", js->name,
             (unsigned long long)(js->base_off + (uint64_t)(js->p - js->buf)), what);
    js->failed = 1;
    js->cur = TDM_JS_ERROR;
    return -1;
}

static tdm_js *js_new(const char *name, size_t window) {
    tdm_js *js = tdm_xcalloc(1, sizeof *js);
    snprintf(js->name, sizeof js->name, "%s", name);
    js->cap = window;
    js->buf = tdm_xmalloc(js->cap + 1);
    js->p = js->end = js->buf;
    js->state = ST_VALUE;
    tdm_sb_init(&js->scratch);
    tdm_sb_init(&js->num);
    return js;
}

tdm_js *tdm_js_open_file(const char *path, tdm_error *err) {
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        tdm_errorf(err, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
        return NULL;
    }
    gzbuffer(gz, 1 << 18);
    tdm_js *js = js_new(path, WINDOW);
    js->gz = gz;
    return js;
}

tdm_js *tdm_js_open_mem(const void *data, size_t len, const char *name) {
    /* a small input gets a small window: refills then happen in tests and fuzzing as well */
    size_t w = len / 4 < 64 ? 64 : len / 4 > WINDOW ? WINDOW : len / 4;
    tdm_js *js = js_new(name, w);
    js->mem = data;
    js->mem_len = len;
    return js;
}

void tdm_js_close(tdm_js *js) {
    if (!js) return;
    if (js->gz) gzclose(js->gz);
    free(js->buf);
    tdm_sb_free(&js->scratch);
    tdm_sb_free(&js->num);
    free(js);
}

/* Reads more input, keeping [*tok, end) (or [p, end) when tok is NULL) at the buffer's start.
 * The window doubles while the kept token fills more than half of it. >0: bytes added, 0: end
 * of input, -1: error. */
static long more(tdm_js *js, char **tok) {
    if (js->failed) return -1;
    if (js->src_eof) return 0;
    char *keep = tok && *tok < js->p ? *tok : js->p; /* a token may start before or after p */
    size_t keep_off = (size_t)(keep - js->buf), kept = (size_t)(js->end - keep), p_off = (size_t)(js->p - keep);
    size_t tok_off = tok ? (size_t)(*tok - keep) : 0;
    if (kept > js->cap / 2) {
        if (js->cap >= TDM_JS_MAX_TOKEN)
            return fail(js, "a string or number longer than %zu MiB", TDM_JS_MAX_TOKEN >> 20);
        js->cap *= 2;
        js->buf = tdm_xrealloc(js->buf, js->cap + 1);
    }
    memmove(js->buf, js->buf + keep_off, kept);
    js->base_off += keep_off;
    js->p = js->buf + p_off;
    js->end = js->buf + kept;
    if (tok) *tok = js->buf + tok_off;
    size_t room = js->cap - kept;
    long got;
    if (js->gz) {
        if (room > (1u << 30)) room = 1u << 30;
        int n = gzread(js->gz, js->end, (unsigned)room);
        int zerr = Z_OK;
        const char *zmsg = n <= 0 ? gzerror(js->gz, &zerr) : NULL;
        if (n < 0 || (n == 0 && zerr != Z_OK)) {
            if (zerr == Z_BUF_ERROR)
                return fail(
                    js, "the compressed data ends early (a truncated .gz file); expected the rest of the gzip stream");
            if (zerr == Z_ERRNO) return fail(js, "read error: %s", strerror(errno));
            return fail(js, "corrupt gzip data (%s)", zmsg ? zmsg : "unknown zlib error");
        }
        got = n;
    } else {
        size_t left = js->mem_len - js->mem_pos;
        size_t n = left < room ? left : room;
        if (n) memcpy(js->end, js->mem + js->mem_pos, n);
        js->mem_pos += n;
        got = (long)n;
    }
    if (got == 0) js->src_eof = 1;
    js->end += got;
    return got;
}

/* The next non-blank byte (not consumed), -1 at the end of input, -2 on error. */
static int peek(tdm_js *js) {
    for (;;) {
        char *p = js->p, *end = js->end;
        if (p < end && (unsigned char)*p > ' ') return (unsigned char)*p; /* most tokens follow no blank */
#ifdef __SSE2__
        /* the indentation of a pretty-printed trace: 16 bytes at a time */
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i ws = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))),
                _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))));
            unsigned m = (unsigned)_mm_movemask_epi8(ws) ^ 0xFFFFu;
            if (m) {
                js->p = p + __builtin_ctz(m);
                return (unsigned char)*js->p;
            }
            p += 16;
        }
#endif
        while (p < end) {
            char c = *p;
            if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
                p++;
                continue;
            }
            js->p = p;
            return (unsigned char)c;
        }
        js->p = p;
        long r = more(js, NULL);
        if (r < 0) return -2;
        if (r == 0) return -1;
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_utf8(tdm_strbuf *sb, uint32_t cp) {
    char b[4];
    int n;
    if (cp < 0x80) b[0] = (char)cp, n = 1;
    else if (cp < 0x800) b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)),
        n = 3;
    else
        b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    tdm_sb_append(sb, b, (size_t)n);
}

/* Decodes the escapes of s[0..n) (a complete string body) into js->scratch. */
static int decode_escapes(tdm_js *js, const char *s, size_t n) {
    tdm_sb_clear(&js->scratch);
    size_t i = 0;
    while (i < n) {
        const char *b = memchr(s + i, '\\', n - i);
        size_t run = b ? (size_t)(b - (s + i)) : n - i;
        tdm_sb_append(&js->scratch, s + i, run);
        i += run;
        if (i >= n) break;
        if (i + 1 >= n) return fail(js, "a string ends inside an escape");
        char e = s[i + 1];
        i += 2;
        switch (e) {
        case '"': tdm_sb_putc(&js->scratch, '"'); break;
        case '\\': tdm_sb_putc(&js->scratch, '\\'); break;
        case '/': tdm_sb_putc(&js->scratch, '/'); break;
        case 'b': tdm_sb_putc(&js->scratch, '\b'); break;
        case 'f': tdm_sb_putc(&js->scratch, '\f'); break;
        case 'n': tdm_sb_putc(&js->scratch, '\n'); break;
        case 'r': tdm_sb_putc(&js->scratch, '\r'); break;
        case 't': tdm_sb_putc(&js->scratch, '\t'); break;
        case 'u': {
            uint32_t cp = 0;
            for (int k = 0; k < 4; k++) {
                int h = i + (size_t)k < n ? hexval((unsigned char)s[i + (size_t)k]) : -1;
                if (h < 0) return fail(js, "a \\u escape needs 4 hexadecimal digits");
                cp = cp * 16 + (uint32_t)h;
            }
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= n && s[i] == '\\' && s[i + 1] == 'u') {
                uint32_t lo = 0;
                int ok = 1;
                for (int k = 0; k < 4; k++) {
                    int h = hexval((unsigned char)s[i + 2 + (size_t)k]);
                    if (h < 0) ok = 0;
                    lo = lo * 16 + (uint32_t)(h < 0 ? 0 : h);
                }
                if (ok && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate */
            put_utf8(&js->scratch, cp);
            break;
        }
        default: return fail(js, "invalid escape '\\%c' in a string", e >= 0x20 && e < 0x7f ? e : '?');
        }
    }
    return 0;
}

/* The first '"' or '\\' in [s, e), or e: 16 bytes at a time where SSE2 is there (x86-64). */
static const char *scan_string(const char *s, const char *e) {
#ifdef __SSE2__
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\');
    while (e - s >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
        int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)));
        if (m) return s + __builtin_ctz((unsigned)m);
        s += 16;
    }
#endif
    while (s < e && *s != '"' && *s != '\\') s++;
    return s;
}

/* js->p is at an opening quote. Finds the closing one; when `keep` sets js->text. */
static int read_string(tdm_js *js, int keep) {
    char *start = js->p + 1;
    size_t i = 0;
    int esc = 0;
    for (;;) {
        size_t avail = (size_t)(js->end - start);
        if (i >= avail) {
            if (!keep) { /* skipping: nothing to keep but the overshoot of an escape */
                size_t carry = i - avail;
                start = js->end;
                i = carry;
            }
            long r = more(js, &start);
            if (r < 0) return -1;
            if (r == 0) return fail(js, "unexpected end of file inside a string");
            continue;
        }
        if (!esc) {
            const char *q = scan_string(start + i, js->end);
            i = (size_t)(q - start);
            if (q == js->end) continue;
            if (*q == '"') break;
            esc = 1;
            continue;
        }
        /* after the first escape: byte by byte, so that many escapes stay linear */
        char c = start[i];
        if (c == '"') break;
        i += c == '\\' ? 2 : 1;
    }
    js->p = start + i + 1;
    if (!keep) return 0;
    if (esc) {
        if (decode_escapes(js, start, i) != 0) return -1;
        js->text = js->scratch.data ? js->scratch.data : "";
        js->text_len = js->scratch.len;
    } else {
        start[i] = '\0'; /* the closing quote, consumed */
        js->text = start;
        js->text_len = i;
    }
    return 0;
}

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* JSON number grammar and value. With at most 19 significant digits, a mantissa within 2^53 and
 * a power of ten within 10^22, one multiplication or division of two exact doubles is correctly
 * rounded (Clinger's fast path); anything else goes to strtod. */
static int parse_number_text(const char *s, size_t n, double *out, int *is_int) {
    size_t i = 0;
    int neg = 0;
    if (i < n && s[i] == '-') neg = 1, i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return -1;
    uint64_t m = 0;
    int nd = 0, trunc = 0, e10 = 0, integral = 1;
    if (s[i] == '0') {
        i++;
        if (i < n && s[i] >= '0' && s[i] <= '9') return -1; /* a leading zero */
    } else {
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (nd < 19) m = m * 10 + (uint64_t)(s[i] - '0'), nd++;
            else e10++, trunc |= s[i] != '0';
        }
    }
    if (i < n && s[i] == '.') {
        integral = 0;
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return -1;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (m == 0 && s[i] == '0') {
                e10--;
                continue;
            }
            if (nd < 19) m = m * 10 + (uint64_t)(s[i] - '0'), nd++, e10--;
            else trunc |= s[i] != '0';
        }
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        integral = 0;
        i++;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i] == '-', i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return -1;
        int ex = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            if (ex < 100000) ex = ex * 10 + (s[i] - '0');
        e10 += eneg ? -ex : ex;
    }
    if (i != n) return -1;
    *is_int = integral;
    double v;
    if (!trunc && m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
        v = (double)m;
        v = e10 >= 0 ? v * pow10_exact[e10] : v / pow10_exact[-e10];
        *out = neg ? -v : v;
        return 0;
    }
    char small[NUM_MAX + 1], *tmp = n <= NUM_MAX ? small : tdm_xmalloc(n + 1);
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    *out = strtod(tmp, NULL); /* ±HUGE_VAL beyond double range, like Python's float() */
    if (tmp != small) free(tmp);
    return 0;
}

int tdm_js_parse_number(const char *text, size_t len, double *out) {
    int is_int;
    return parse_number_text(text, len, out, &is_int);
}

static int is_num_char(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

static int read_number(tdm_js *js) {
    char *start = js->p;
    size_t i = 0;
    for (;;) {
        if (start + i >= js->end) {
            long r = more(js, &start); /* fails past TDM_JS_MAX_TOKEN, as a string does */
            if (r < 0) return -1;
            if (r == 0) break;
            continue;
        }
        if (!is_num_char(start[i])) break;
        i++;
    }
    tdm_sb_clear(&js->num);
    tdm_sb_append(&js->num, start, i);
    js->num_len = i;
    if (parse_number_text(js->num.data, i, &js->num_val, &js->num_int) != 0)
        return fail(js, "'%.40s' is not a JSON number", js->num.data);
    js->p = start + i;
    return 0;
}

static int read_literal(tdm_js *js, const char *word, size_t n) {
    char *start = js->p;
    while ((size_t)(js->end - start) < n) {
        long r = more(js, &start);
        if (r < 0) return -1;
        if (r == 0) break;
    }
    if ((size_t)(js->end - start) < n || memcmp(start, word, n) != 0) {
        js->p = start;
        return fail(js, "expected '%s'", word);
    }
    js->p = start + n;
    return 0;
}

static tdm_js_tok tok(tdm_js *js, tdm_js_tok t) { return js->cur = t; }

/* Longer than most: the tokenizer's states in one switch, where every transition can be read. */
tdm_js_tok tdm_js_next(tdm_js *js) {
    for (;;) {
        if (js->failed) return TDM_JS_ERROR;
        int c = peek(js);
        if (c == -2) return tok(js, TDM_JS_ERROR);
        switch (js->state) {
        case ST_DONE:
            if (c == -1) return tok(js, TDM_JS_EOF);
            fail(js, "unexpected '%c' after the end of the JSON value", c >= 0x20 && c < 0x7f ? c : '?');
            return TDM_JS_ERROR;
        case ST_AFTER: {
            if (js->depth == 0) {
                js->state = ST_DONE;
                continue;
            }
            int obj = js->stack[js->depth - 1] == 'o';
            if (c == -1) {
                fail(js, "unexpected end of file: expected ',' or '%c'", obj ? '}' : ']');
                return TDM_JS_ERROR;
            }
            if (c == ',') {
                js->p++;
                js->state = obj ? ST_KEY : ST_VALUE;
                continue;
            }
            if (c == (obj ? '}' : ']')) {
                js->p++;
                js->depth--;
                return tok(js, obj ? TDM_JS_OBJECT_END : TDM_JS_ARRAY_END);
            }
            fail(js, "expected ',' or '%c'", obj ? '}' : ']');
            return TDM_JS_ERROR;
        }
        case ST_OBJ_FIRST:
            if (c == '}') {
                js->p++;
                js->depth--;
                js->state = ST_AFTER;
                return tok(js, TDM_JS_OBJECT_END);
            }
            /* fall through */
        case ST_KEY:
            if (c != '"') {
                fail(js, c == -1 ? "unexpected end of file: expected a member name"
                                 : "expected a member name in double quotes");
                return TDM_JS_ERROR;
            }
            if (read_string(js, 1) != 0) return TDM_JS_ERROR;
            {
                /* the key lives in the window, which refilling moves: when its ':' is not in the
                 * window yet, keep the key in scratch first */
                char *q = js->p;
                while (q < js->end && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) q++;
                if (q == js->end && js->text != js->scratch.data) {
                    tdm_sb_clear(&js->scratch);
                    tdm_sb_append(&js->scratch, js->text, js->text_len);
                    js->text = js->scratch.data;
                }
                int d = peek(js);
                if (d == -2) return TDM_JS_ERROR;
                if (d != ':') {
                    fail(js, "expected ':' after a member name");
                    return TDM_JS_ERROR;
                }
                js->p++;
            }
            js->state = ST_VALUE;
            return tok(js, TDM_JS_KEY);
        case ST_ARR_FIRST:
            if (c == ']') {
                js->p++;
                js->depth--;
                js->state = ST_AFTER;
                return tok(js, TDM_JS_ARRAY_END);
            }
            /* fall through */
        case ST_VALUE:
            if (c == -1) {
                fail(js, js->depth == 0 && js->base_off + (uint64_t)(js->p - js->buf) == 0
                             ? "empty input: expected a JSON value"
                             : "unexpected end of file: expected a value");
                return TDM_JS_ERROR;
            }
            switch (c) {
            case '{':
            case '[':
                if (js->depth >= TDM_JS_MAX_DEPTH) {
                    fail(js, "nested deeper than %d levels", TDM_JS_MAX_DEPTH);
                    return TDM_JS_ERROR;
                }
                js->p++;
                js->stack[js->depth++] = c == '{' ? 'o' : 'a';
                js->state = c == '{' ? ST_OBJ_FIRST : ST_ARR_FIRST;
                return tok(js, c == '{' ? TDM_JS_OBJECT : TDM_JS_ARRAY);
            case '"':
                if (read_string(js, 1) != 0) return TDM_JS_ERROR;
                js->state = ST_AFTER;
                return tok(js, TDM_JS_STRING);
            case 't':
            case 'f':
            case 'n': {
                const char *w = c == 't' ? "true" : c == 'f' ? "false" : "null";
                if (read_literal(js, w, strlen(w)) != 0) return TDM_JS_ERROR;
                js->state = ST_AFTER;
                return tok(js, c == 't' ? TDM_JS_TRUE : c == 'f' ? TDM_JS_FALSE : TDM_JS_NULL);
            }
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    if (read_number(js) != 0) return TDM_JS_ERROR;
                    js->state = ST_AFTER;
                    return tok(js, TDM_JS_NUMBER);
                }
                fail(js, "unexpected '%c': expected a value", c >= 0x20 && c < 0x7f ? c : '?');
                return TDM_JS_ERROR;
            }
        }
    }
}

const char *tdm_js_text(const tdm_js *js, size_t *len) {
    if (js->cur == TDM_JS_NUMBER) {
        if (len) *len = js->num_len;
        return js->num.data;
    }
    if (js->cur == TDM_JS_KEY || js->cur == TDM_JS_STRING) {
        if (len) *len = js->text_len;
        return js->text;
    }
    if (len) *len = 0;
    return "";
}

double tdm_js_number(const tdm_js *js) {
    if (js->cur == TDM_JS_NUMBER) return js->num_val;
    if (js->cur == TDM_JS_STRING) {
        double v;
        if (js->text_len > 0 && tdm_js_parse_number(js->text, js->text_len, &v) == 0) return v;
    }
    return NAN;
}

int tdm_js_number_is_int(const tdm_js *js) { return js->cur == TDM_JS_NUMBER && js->num_int; }

/* Consumes a container's contents after its opening bracket, up to and including the
 * matching closing one: strings closed, brackets balanced and matched. */
static int skip_container(tdm_js *js, char open) {
    uint8_t st[TDM_JS_MAX_DEPTH];
    int d = 0;
    st[d++] = (uint8_t)open;
    for (;;) {
        char *p = js->p, *end = js->end;
        while (p < end) {
            char c = *p++;
            switch (c) {
            case '"':
                js->p = p - 1;
                if (read_string(js, 0) != 0) return -1;
                p = js->p;
                end = js->end;
                break;
            case '{':
            case '[':
                if (js->depth + d >= TDM_JS_MAX_DEPTH) {
                    js->p = p - 1;
                    return fail(js, "nested deeper than %d levels", TDM_JS_MAX_DEPTH);
                }
                st[d++] = (uint8_t)c;
                break;
            case '}':
            case ']':
                if (st[d - 1] != (c == '}' ? '{' : '[')) {
                    js->p = p - 1;
                    return fail(js, "'%c' closes a '%c'", c, st[d - 1]);
                }
                if (--d == 0) {
                    js->p = p;
                    return 0;
                }
                break;
            default: break;
            }
        }
        js->p = p;
        long r = more(js, NULL);
        if (r < 0) return -1;
        if (r == 0) return fail(js, "unexpected end of file inside %s", open == '{' ? "an object" : "an array");
    }
}

int tdm_js_skip_value(tdm_js *js) {
    if (js->failed) return -1;
    if (js->state != ST_VALUE && js->state != ST_ARR_FIRST) return fail(js, "internal: no value is due here");
    int c = peek(js);
    if (c == -2) return -1;
    if (c == ']' && js->state == ST_ARR_FIRST) return 0;
    if (c == '{' || c == '[') {
        if (js->depth >= TDM_JS_MAX_DEPTH) return fail(js, "nested deeper than %d levels", TDM_JS_MAX_DEPTH);
        js->p++;
        if (skip_container(js, (char)c) != 0) return -1;
        js->state = ST_AFTER;
        js->cur = c == '{' ? TDM_JS_OBJECT_END : TDM_JS_ARRAY_END;
        return 0;
    }
    if (c == '"') { /* a skipped string is only found to end */
        if (read_string(js, 0) != 0) return -1;
    } else if (c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) {
        /* a skipped number or literal: its characters, up to a delimiter, unchecked */
        char *start = js->p;
        size_t i = 0;
        for (;;) {
            if (start + i >= js->end) {
                start += i, i = 0;
                long r = more(js, &start);
                if (r < 0) return -1;
                if (r == 0) break;
                continue;
            }
            char d = start[i];
            if (d == ',' || d == '}' || d == ']' || d == ' ' || d == '\n' || d == '\r' || d == '\t') break;
            i++;
        }
        js->p = start + i;
    } else {
        return tdm_js_next(js) == TDM_JS_ERROR ? -1 : 0; /* the error message for what is there */
    }
    js->state = ST_AFTER;
    js->cur = TDM_JS_NULL;
    return 0;
}

int tdm_js_skip_rest(tdm_js *js) {
    int target = js->depth - 1;
    if (target < 0) return 0;
    while (js->depth > target) {
        if (js->failed) return -1;
        if (js->state == ST_VALUE || js->state == ST_ARR_FIRST) {
            int c = peek(js);
            if (c == -2) return -1;
            if (!(c == ']' && js->state == ST_ARR_FIRST)) {
                if (tdm_js_skip_value(js) != 0) return -1;
                continue;
            }
        }
        if (tdm_js_next(js) == TDM_JS_ERROR) return -1;
    }
    return 0;
}

int tdm_js_depth(const tdm_js *js) { return js->depth; }

uint64_t tdm_js_offset(const tdm_js *js) { return js->base_off + (uint64_t)(js->p - js->buf); }

const char *tdm_js_error(const tdm_js *js) { return js->failed ? js->err : ""; }
