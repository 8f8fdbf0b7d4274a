/* libFuzzer target: the command-line parser must accept or refuse any argv without crashing. The input is
 * the argv, one word per line. A refusal is one sentence (one line); what is accepted respects the table:
 * numbers in their ranges, choices among theirs, lists within their size, positionals taken from argv, the
 * words handed on a subset of argv. The --help text of the table stays within 100 columns.
 * fuzz-modules: core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/flags.h"

typedef struct opts {
    int n, on;
    int64_t big;
    uint64_t seed;
    double rate;
    char name[8];
    const char *text;
    char style[8];
    int mode;
    char files[2][8];
    int n_files;
    const char *pos;
} opts;

#define O(field) offsetof(opts, field)
static const tdm_flag FLAGS[] = {
    {.name = "n", .kind = TDM_FLAG_INT, .off = O(n), .lo = -5, .hi = 5, .def = "1", .aliases = "num|three=3"},
    {.name = "on", .kind = TDM_FLAG_BOOL, .off = O(on), .aliases = "off", .opts = TDM_FLAG_NEGATE},
    {.name = "big", .kind = TDM_FLAG_I64, .off = O(big), .lo = 0, .hi = 1e12},
    {.name = "seed", .kind = TDM_FLAG_U64, .off = O(seed), .lo = 0, .hi = 1e6},
    {.name = "rate", .kind = TDM_FLAG_DOUBLE, .off = O(rate), .lo = 0, .hi = 1, .def = "-1"},
    {.name = "name", .kind = TDM_FLAG_PATH, .off = O(name), .cap = 8},
    {.name = "text", .kind = TDM_FLAG_STRING, .off = O(text), .opts = TDM_FLAG_DASHES},
    {.name = "style", .kind = TDM_FLAG_CHOICE, .off = O(style), .cap = 8, .choices = "a|bb|ccc", .def = "a"},
    {.name = "mode", .kind = TDM_FLAG_CHOICE, .off = O(mode), .choices = "x|y"},
    {.name = "file", .kind = TDM_FLAG_LIST, .off = O(files), .cap = 8, .count_off = O(n_files), .max = 2},
    {.name = "same", .kind = TDM_FLAG_FIXED},
    {.name = "size", .kind = TDM_FLAG_FIXED, .def = "1", .help = "one"},
    {.name = "gone", .kind = TDM_FLAG_REFUSED, .help = "refused"},
};
static const tdm_flag OTHER[] = {
    {.name = "lr", .kind = TDM_FLAG_DOUBLE},
    {.name = "fast", .kind = TDM_FLAG_BOOL},
};
static const tdm_flags Q = {.command = "q", .flags = OTHER, .n_flags = 2};
static const tdm_positional POS[] = {{.metavar = "IN", .off = O(pos)}};

static int in_argv(const char *s, char **argv, int argc) {
    for (int i = 0; i < argc; i++)
        if (s == argv[i]) return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const tdm_flags base = {.command = "t",
                                   .usage = "t [IN]",
                                   .flags = FLAGS,
                                   .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
                                   .pos = POS,
                                   .n_pos = 1};
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[64];
    int argc = 0;
    for (char *p = text; argc < 64;) {
        argv[argc++] = p;
        char *nl = memchr(p, '\n', (size_t)(text + size - p));
        if (!nl) break;
        *nl = 0;
        p = nl + 1;
    }
    tdm_flags p = base;
    if (size && data[0] & 1) p.pass = &Q;
    if (size && data[0] & 2) p.opts = TDM_FLAGS_ONCE;
    opts o;
    memset(&o, 0, sizeof o);
    tdm_flags_defaults(&p, &o);
    char *rest[64];
    int n_rest = 0;
    tdm_error err = {{0}};
    int rc = tdm_flags_parse(&p, &o, argc, argv, rest, &n_rest, &err);
    if (rc < -1 || rc > TDM_FLAGS_VERSION) abort();
    if (rc == -1 && (!err.msg[0] || strchr(err.msg, '\n'))) abort();
    if (rc == 0) {
        if (o.n < -5 || o.n > 5 || o.big < 0 || o.big > (int64_t)1e12 || o.seed > 1000000) abort();
        if (o.rate != -1 && (o.rate < 0 || o.rate > 1)) abort();
        if (strcmp(o.style, "a") && strcmp(o.style, "bb") && strcmp(o.style, "ccc")) abort();
        if (o.mode < 0 || o.mode > 1 || o.n_files < 0 || o.n_files > 2 || strlen(o.name) >= sizeof o.name) abort();
        if (o.pos && !in_argv(o.pos, argv, argc)) abort();
        if (n_rest < 0 || n_rest > argc) abort();
        for (int i = 0; i < n_rest; i++) /* flags handed on and their values are argv's own words */
            if (!in_argv(rest[i], argv, argc)) abort();
    }
    const char *s = argc ? tdm_flags_suggest(&p, argv[0], strlen(argv[0])) : NULL;
    if (s && !tdm_flags_find(&p, s, strlen(s), NULL) && !tdm_flags_find(&Q, s, strlen(s), NULL)) abort();
    if (argc) tdm_flags_unknown(&p, argv[0], strlen(argv[0]), "", &err);
    free(text);
    return 0;
}
