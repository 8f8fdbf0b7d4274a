/* cmd_tokenize.c - `tandem tokenize`: encode (or decode) stdin line by line.
 *
 * Lines are split on '\n' only; the newline is not part of the line, and a last line
 * without one still counts. Encoding prints each line's ids space-separated; decoding
 * reads space-separated ids and prints the text. One output line per input line.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "tools/cli.h"
#include "tools/commands.h"

#define MAX_LINE_BYTES ((size_t)16 << 20)

typedef struct tokenize_opts {
    const char *tokenizer;
    int decode;
} tokenize_opts;

static const tdm_flag FLAGS[] = {
    {.name = "tokenizer",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(tokenize_opts, tokenizer),
     .metavar = "FILE",
     .help = "a Hugging Face byte-level BPE tokenizer.json (or a directory holding one)"},
    {.name = "decode",
     .kind = TDM_FLAG_BOOL,
     .off = offsetof(tokenize_opts, decode),
     .help = "read lines of space-separated ids and print their text"},
};

static const tdm_flags P = {
    .command = "tandem tokenize",
    .usage = "tandem tokenize --tokenizer FILE [--decode] < in > out",
    .about = "Reads UTF-8 lines on stdin and prints each line's token ids, space-separated.\n"
             "Special tokens written in the text (<|im_start|>, ...) are recognised.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
};

static void put_int(FILE *out, int32_t v) {
    char buf[16];
    int n = 0;
    do {
        buf[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) putc_unlocked(buf[--n], out);
}

/* One line of f without its '\n', into *buf (grown as needed, to at most 2 * max
 * bytes). Returns its length, -1 at end of input, or -2 when it is longer than max. */
static ssize_t read_line(FILE *f, char **buf, size_t *cap, size_t max) {
    size_t n = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (n == max) return -2;
        if (n + 1 >= *cap) {
            *cap = *cap ? 2 * *cap : 4096;
            *buf = realloc(*buf, *cap);
            if (!*buf) abort();
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0) return -1;
    if (!*buf) {
        *cap = 4096;
        *buf = malloc(*cap);
        if (!*buf) abort();
    }
    (*buf)[n] = 0;
    return (ssize_t)n;
}

static int decode_line(const tdm_tokenizer *t, const char *line, size_t lineno, tdm_ids *ids, FILE *out) {
    ids->len = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != ' ' && *end != '\t' && *end != '\r')) {
            fprintf(stderr, "tandem tokenize: stdin line %zu: expected space-separated token ids, got \"%.40s\"\n",
                    lineno, p);
            return -1;
        }
        int n_ids = tdm_tokenizer_vocab_size(t);
        if (v < 0 || v >= n_ids) {
            fprintf(stderr, "tandem tokenize: stdin line %zu: id %ld is not in the tokenizer (ids are 0..%d)\n", lineno,
                    v, n_ids - 1);
            return -1;
        }
        if (!tdm_tokenizer_id_token(t, (int32_t)v)) { /* a hole, e.g. below a trained tokenizer's added tokens */
            int32_t lo = (int32_t)v, hi = (int32_t)v;
            while (lo > 0 && !tdm_tokenizer_id_token(t, lo - 1)) lo--;
            while (hi + 1 < n_ids && !tdm_tokenizer_id_token(t, hi + 1)) hi++;
            fprintf(stderr, "tandem tokenize: stdin line %zu: id %ld is not used by the tokenizer (no token has it",
                    lineno, v);
            if (lo < hi) fprintf(stderr, "; ids %d..%d are unused", (int)lo, (int)hi);
            fputs(")\n", stderr);
            return -1;
        }
        tdm_ids_push(ids, (int32_t)v);
        p = end;
    }
    size_t len;
    char *text = tdm_tokenizer_decode_len(t, ids->data, ids->len, &len);
    fwrite(text, 1, len, out);
    fputc('\n', out);
    free(text);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_opts o = {0};
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    const char *path = o.tokenizer;
    const int decode = o.decode;
    if (!path) {
        fprintf(stderr, "tandem tokenize: --tokenizer FILE is required (a tokenizer.json)\n");
        return 2;
    }
    tdm_error err;
    tdm_tokenizer *t = tdm_tokenizer_load(path, &err);
    if (!t) {
        fprintf(stderr, "tandem tokenize: %s\n", err.msg);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t n;
    tdm_ids ids = {0};
    int rc = 0;
    while ((n = read_line(stdin, &line, &cap, MAX_LINE_BYTES)) != -1) {
        lineno++;
        if (n == -2) {
            fprintf(stderr, "tandem tokenize: stdin line %zu is longer than %zu bytes, the most one line may have\n",
                    lineno, MAX_LINE_BYTES);
            rc = 1;
            break;
        }
        if (decode) {
            if (memchr(line, 0, (size_t)n)) {
                fprintf(stderr, "tandem tokenize: stdin line %zu: expected token ids, found a NUL byte\n", lineno);
                rc = 1;
                break;
            }
            if (decode_line(t, line, lineno, &ids, stdout) != 0) {
                rc = 1;
                break;
            }
            continue;
        }
        ids.len = 0;
        if (tdm_tokenizer_encode(t, line, (size_t)n, &ids, &err) != 0) {
            fprintf(stderr, "tandem tokenize: stdin line %zu: %s\n", lineno, err.msg);
            rc = 1;
            break;
        }
        for (size_t i = 0; i < ids.len; i++) {
            if (i) putc_unlocked(' ', stdout);
            put_int(stdout, ids.data[i]);
        }
        putc_unlocked('\n', stdout);
    }
    if (rc == 0 && ferror(stdin)) {
        fprintf(stderr, "tandem tokenize: cannot read stdin: %s\n", strerror(errno));
        rc = 1;
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "tandem tokenize: cannot write stdout: %s\n", strerror(errno));
        rc = 1;
    }
    free(line);
    tdm_ids_free(&ids);
    tdm_tokenizer_free(t);
    return rc;
}
