#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* All allocations of a document come from a chain of arena blocks. */
typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
} arena_block;

struct tdm_json_doc {
    arena_block *blocks;
    tdm_json *root;
};

typedef struct parser {
    const char *s, *end, *p;
    const char *name;
    int line;
    const char *line_start;
    tdm_json_doc *doc;
    tdm_error *err;
    int64_t n_values, max_values;
} parser;

static void *arena_alloc(tdm_json_doc *doc, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_block *b = doc->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = tdm_xmalloc(sizeof(arena_block) + cap);
        b->next = doc->blocks;
        b->used = 0;
        b->cap = cap;
        doc->blocks = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

static int fail(parser *ps, const char *what) {
    /* a byte count: one line of a minified file can be longer than an int counts */
    long long col = (long long)(ps->p - ps->line_start) + 1;
    return tdm_errorf(ps->err, "%s:%d:%lld: %s", ps->name, ps->line, col, what);
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '\n') {
            ps->line++;
            ps->p++;
            ps->line_start = ps->p;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            ps->p++;
        } else {
            break;
        }
    }
}

static tdm_json *new_value(parser *ps, tdm_json_type t) {
    tdm_json *v = arena_alloc(ps->doc, sizeof *v);
    memset(v, 0, sizeof *v);
    v->type = t;
    v->line = ps->line;
    v->col = (int)(ps->p - ps->line_start) + 1;
    return v;
}

/* Length of a valid UTF-8 sequence at p (1-4), or 0 if invalid. Rejects overlongs,
 * surrogates and code points above U+10FFFF. */
static int utf8_seq_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07;
    } else return 0;
    if (end - p < n) return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
    if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
    return n;
}

static int put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Parses a string literal at ps->p (which points at '"'). The decoded string is
 * never longer than the literal, so one allocation of the literal's size suffices. */
static int parse_string(parser *ps, const char **out, size_t *out_len) {
    const char *start = ++ps->p;
    const char *q = start;
    /* find the closing quote first to size the buffer */
    while (q < ps->end && *q != '"') {
        if (*q == '\\') q++;
        q++;
    }
    if (q >= ps->end) return fail(ps, "unterminated string");
    char *buf = arena_alloc(ps->doc, (size_t)(q - start) + 1);
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) return fail(ps, "control character in string (must be escaped)");
        if (c == '\\') {
            ps->p++;
            if (ps->p >= ps->end) return fail(ps, "unterminated escape");
            char e = *ps->p++;
            switch (e) {
            case '"': buf[n++] = '"'; break;
            case '\\': buf[n++] = '\\'; break;
            case '/': buf[n++] = '/'; break;
            case 'b': buf[n++] = '\b'; break;
            case 'f': buf[n++] = '\f'; break;
            case 'n': buf[n++] = '\n'; break;
            case 'r': buf[n++] = '\r'; break;
            case 't': buf[n++] = '\t'; break;
            case 'u': {
                unsigned cp;
                if (ps->end - ps->p < 4 || hex4(ps->p, &cp) != 0) return fail(ps, "bad \\u escape");
                ps->p += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, &lo) != 0 ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                    ps->p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                }
                n += (size_t)put_utf8(buf + n, cp);
                break;
            }
            default: ps->p--; return fail(ps, "unknown escape in string");
            }
        } else {
            int k = utf8_seq_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
            if (k == 0) return fail(ps, "invalid UTF-8 in string");
            memcpy(buf + n, ps->p, (size_t)k);
            n += (size_t)k;
            ps->p += k;
        }
    }
    ps->p++; /* closing quote */
    buf[n] = 0;
    *out = buf;
    *out_len = n;
    return 0;
}

static int parse_number(parser *ps, tdm_json *v) {
    const char *st = ps->p, *q = ps->p;
    int integral = 1;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end) return fail(ps, "bad number");
    if (*q == '0') {
        q++;
    } else if (*q >= '1' && *q <= '9') {
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    } else {
        return fail(ps, "bad number");
    }
    if (q < ps->end && *q == '.') {
        integral = 0;
        q++;
        if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, "bad number: digit expected after '.'");
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integral = 0;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, "bad number: digit expected in exponent");
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    size_t n = (size_t)(q - st);
    char tmp[512];
    if (n >= sizeof tmp) return fail(ps, "number literal too long");
    memcpy(tmp, st, n);
    tmp[n] = 0;
    errno = 0;
    double d = strtod(tmp, NULL);
    if (!isfinite(d)) return fail(ps, "number out of range");
    v->num = d;
    if (integral) {
        errno = 0;
        long long ll = strtoll(tmp, NULL, 10);
        if (errno == 0) {
            v->is_int = 1;
            v->i64 = ll;
        }
    }
    ps->p = q;
    return 0;
}

static int parse_value(parser *ps, tdm_json **out, int depth);

/* Collects items into a temporary growable array, then copies into the arena. */
static int parse_container(parser *ps, tdm_json *v, int depth, int is_object) {
    char close = is_object ? '}' : ']';
    size_t cap = 8, n = 0;
    tdm_json **items = tdm_xmalloc(cap * sizeof *items);
    const char **keys = is_object ? tdm_xmalloc(cap * sizeof *keys) : NULL;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        goto done;
    }
    for (;;) {
        skip_ws(ps);
        if (n == cap) {
            cap *= 2;
            items = tdm_xrealloc(items, cap * sizeof *items);
            if (keys) keys = tdm_xrealloc(keys, cap * sizeof *keys);
        }
        if (is_object) {
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected a string key");
                goto err;
            }
            size_t kl;
            if (parse_string(ps, &keys[n], &kl) != 0) goto err;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                fail(ps, "expected ':' after key");
                goto err;
            }
            ps->p++;
        }
        if (parse_value(ps, &items[n], depth + 1) != 0) goto err;
        n++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            break;
        }
        fail(ps, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto err;
    }
done:
    v->len = n;
    v->items = arena_alloc(ps->doc, (n ? n : 1) * sizeof *items);
    memcpy(v->items, items, n * sizeof *items);
    if (is_object) {
        v->keys = arena_alloc(ps->doc, (n ? n : 1) * sizeof *keys);
        memcpy(v->keys, keys, n * sizeof *keys);
    }
    free(items);
    free(keys);
    return 0;
err:
    free(items);
    free(keys);
    return -1;
}

static int match_lit(parser *ps, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0) return 0;
    ps->p += n;
    return 1;
}

static int parse_value(parser *ps, tdm_json **out, int depth) {
    if (depth > TDM_JSON_MAX_DEPTH) return fail(ps, "nesting deeper than 256 levels");
    /* A value costs ~100 bytes of tree for as little as 2 bytes of text: bound the tree,
     * so no input can make the parser exhaust memory. */
    if (++ps->n_values > ps->max_values) return fail(ps, "more values in one document than the limit");
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of input, expected a value");
    char c = *ps->p;
    tdm_json *v;
    switch (c) {
    case '{':
        v = new_value(ps, TDM_JSON_OBJECT);
        if (parse_container(ps, v, depth, 1) != 0) return -1;
        break;
    case '[':
        v = new_value(ps, TDM_JSON_ARRAY);
        if (parse_container(ps, v, depth, 0) != 0) return -1;
        break;
    case '"':
        v = new_value(ps, TDM_JSON_STRING);
        if (parse_string(ps, &v->str, &v->len) != 0) return -1;
        break;
    case 't':
        v = new_value(ps, TDM_JSON_TRUE);
        if (!match_lit(ps, "true")) return fail(ps, "unexpected character, expected a value");
        break;
    case 'f':
        v = new_value(ps, TDM_JSON_FALSE);
        if (!match_lit(ps, "false")) return fail(ps, "unexpected character, expected a value");
        break;
    case 'n':
        v = new_value(ps, TDM_JSON_NULL);
        if (!match_lit(ps, "null")) return fail(ps, "unexpected character, expected a value");
        break;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            v = new_value(ps, TDM_JSON_NUMBER);
            if (parse_number(ps, v) != 0) return -1;
        } else {
            return fail(ps, "unexpected character, expected a value");
        }
    }
    *out = v;
    return 0;
}

tdm_json_doc *tdm_json_parse(const char *text, size_t len, const char *name, tdm_error *err) {
    return tdm_json_parse_bounded(text, len, name, TDM_JSON_MAX_VALUES, err);
}

tdm_json_doc *tdm_json_parse_bounded(const char *text, size_t len, const char *name, int64_t max_values,
                                     tdm_error *err) {
    tdm_json_doc *doc = tdm_xcalloc(1, sizeof *doc);
    parser ps = {.s = text,
                 .end = text + len,
                 .p = text,
                 .name = name ? name : "<json>",
                 .line = 1,
                 .line_start = text,
                 .doc = doc,
                 .err = err,
                 .max_values = max_values};
    /* a UTF-8 byte order mark is tolerated */
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB && (unsigned char)text[2] == 0xBF)
        ps.p += 3;
    if (parse_value(&ps, &doc->root, 0) != 0) goto err;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "trailing characters after the JSON value");
        goto err;
    }
    return doc;
err:
    /* A Hugging Face clone made without git-lfs holds small text pointers in place of large
     * files (tokenizer.json): say so rather than point at column 1. */
    if (len < 1024 && len >= 23 && !memcmp(text, "version https://git-lfs", 23))
        tdm_errorf(err, "%s: a Git LFS pointer, not the file's content (fetch it: git lfs pull, or download the file)",
                   ps.name);
    tdm_json_free(doc);
    return NULL;
}

/* ---- one element at a time ---------------------------------------------------------- */

static parser reader_parser(const tdm_json_array_reader *r, tdm_error *err) {
    parser ps = {.s = r->text,
                 .end = r->end,
                 .p = r->p,
                 .name = r->name,
                 .line = r->line,
                 .line_start = r->line_start,
                 .err = err,
                 .max_values = TDM_JSON_MAX_VALUES};
    return ps;
}

static void reader_keep(tdm_json_array_reader *r, const parser *ps) {
    r->p = ps->p;
    r->line = ps->line;
    r->line_start = ps->line_start;
}

int tdm_json_array_begin(tdm_json_array_reader *r, const char *text, size_t len, const char *name, tdm_error *err) {
    *r = (tdm_json_array_reader){
        .text = text, .end = text + len, .p = text, .line_start = text, .name = name ? name : "<json>", .line = 1};
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB && (unsigned char)text[2] == 0xBF)
        r->p += 3;
    parser ps = reader_parser(r, err);
    skip_ws(&ps);
    if (ps.p >= ps.end || *ps.p != '[') return fail(&ps, "expected '[' (a JSON array)");
    ps.p++;
    skip_ws(&ps);
    if (ps.p < ps.end && *ps.p == ']') { /* an empty array: closed at once */
        ps.p++;
        r->state = 3;
    }
    reader_keep(r, &ps);
    return 0;
}

int tdm_json_array_next(tdm_json_array_reader *r, tdm_json_doc **doc, tdm_error *err) {
    *doc = NULL;
    if (r->state == 2) return 0;
    parser ps = reader_parser(r, err);
    if (r->state == 1) { /* after an element: ',' then the next one, or ']' */
        skip_ws(&ps);
        if (ps.p < ps.end && *ps.p == ',') {
            ps.p++;
        } else if (ps.p < ps.end && *ps.p == ']') {
            ps.p++;
            r->state = 3;
        } else {
            return fail(&ps, "expected ',' or ']'");
        }
    }
    if (r->state == 3) { /* the array is closed */
        skip_ws(&ps);
        if (ps.p != ps.end) return fail(&ps, "trailing characters after the JSON value");
        reader_keep(r, &ps);
        r->state = 2;
        return 0;
    }
    ps.doc = tdm_xcalloc(1, sizeof *ps.doc);
    if (parse_value(&ps, &ps.doc->root, 1) != 0) {
        tdm_json_free(ps.doc);
        return -1;
    }
    reader_keep(r, &ps);
    r->state = 1;
    *doc = ps.doc;
    return 1;
}

void tdm_json_free(tdm_json_doc *doc) {
    if (!doc) return;
    arena_block *b = doc->blocks;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

const tdm_json *tdm_json_root(const tdm_json_doc *doc) { return doc ? doc->root : NULL; }

const tdm_json *tdm_json_get(const tdm_json *v, const char *key) {
    if (!v || v->type != TDM_JSON_OBJECT) return NULL;
    for (size_t i = v->len; i-- > 0;)
        if (strcmp(v->keys[i], key) == 0) return v->items[i];
    return NULL;
}

const tdm_json *tdm_json_at(const tdm_json *v, size_t i) {
    if (!v || v->type != TDM_JSON_ARRAY || i >= v->len) return NULL;
    return v->items[i];
}

/* Appends ".key" or "[i]" to the path in out[cap] (truncating quietly). */
static void path_push(char *out, size_t cap, const char *key, size_t index) {
    size_t n = strlen(out);
    if (n >= cap) return;
    if (key) snprintf(out + n, cap - n, "%s%s", n ? "." : "", key);
    else snprintf(out + n, cap - n, "[%zu]", index);
}

int tdm_json_first_difference(const tdm_json *a, const tdm_json *b, char *path, size_t cap) {
    if (!a || !b) return a != b;
    if (a->type != b->type) return 1;
    switch (a->type) {
    case TDM_JSON_NULL:
    case TDM_JSON_FALSE:
    case TDM_JSON_TRUE: return 0;
    case TDM_JSON_NUMBER: return a->num != b->num;
    case TDM_JSON_STRING: return a->len != b->len || memcmp(a->str, b->str, a->len) != 0;
    case TDM_JSON_ARRAY:
        if (a->len != b->len) return 1;
        for (size_t i = 0; i < a->len; i++) {
            size_t n = strlen(path);
            path_push(path, cap, NULL, i);
            if (tdm_json_first_difference(a->items[i], b->items[i], path, cap)) return 1;
            path[n < cap ? n : cap - 1] = 0;
        }
        return 0;
    case TDM_JSON_OBJECT:
        for (int pass = 0; pass < 2; pass++) { /* a's keys in b, then keys only b has */
            const tdm_json *x = pass ? b : a, *y = pass ? a : b;
            for (size_t i = 0; i < x->len; i++) {
                size_t n = strlen(path);
                path_push(path, cap, x->keys[i], 0);
                const tdm_json *other = tdm_json_get(y, x->keys[i]);
                if (!other || (!pass && tdm_json_first_difference(tdm_json_get(x, x->keys[i]), other, path, cap)))
                    return 1;
                path[n < cap ? n : cap - 1] = 0;
            }
        }
        return 0;
    }
    return 1;
}

const char *tdm_json_type_name(tdm_json_type t) {
    switch (t) {
    case TDM_JSON_NULL: return "null";
    case TDM_JSON_FALSE:
    case TDM_JSON_TRUE: return "a boolean";
    case TDM_JSON_NUMBER: return "a number";
    case TDM_JSON_STRING: return "a string";
    case TDM_JSON_ARRAY: return "an array";
    case TDM_JSON_OBJECT: return "an object";
    }
    return "?";
}

int tdm_json_get_int(const tdm_json *obj, const char *key, int64_t *out, tdm_error *err) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v) return tdm_errorf(err, "missing field \"%s\"", key);
    if (v->type != TDM_JSON_NUMBER || !v->is_int)
        return tdm_errorf(err, "field \"%s\" (line %d) must be an integer", key, v->line);
    *out = v->i64;
    return 0;
}

int tdm_json_get_num(const tdm_json *obj, const char *key, double *out, tdm_error *err) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v) return tdm_errorf(err, "missing field \"%s\"", key);
    if (v->type != TDM_JSON_NUMBER) return tdm_errorf(err, "field \"%s\" (line %d) must be a number", key, v->line);
    *out = v->num;
    return 0;
}

int tdm_json_get_bool(const tdm_json *obj, const char *key, int *out, tdm_error *err) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v) return tdm_errorf(err, "missing field \"%s\"", key);
    if (v->type != TDM_JSON_TRUE && v->type != TDM_JSON_FALSE)
        return tdm_errorf(err, "field \"%s\" (line %d) must be true or false", key, v->line);
    *out = v->type == TDM_JSON_TRUE;
    return 0;
}

const char *tdm_json_get_str(const tdm_json *obj, const char *key, tdm_error *err) {
    const tdm_json *v = tdm_json_get(obj, key);
    if (!v) {
        tdm_errorf(err, "missing field \"%s\"", key);
        return NULL;
    }
    if (v->type != TDM_JSON_STRING) {
        tdm_errorf(err, "field \"%s\" (line %d) must be a string", key, v->line);
        return NULL;
    }
    return v->str;
}
