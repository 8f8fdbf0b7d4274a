/* test_flags.c - the command-line parser (core/flags.h): every kind of flag, both spellings of a value,
 * aliases, every error sentence, duplicates, positionals, flags handed on, and the generated --help. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/flags.h"
#include "harness.h"

typedef struct opts {
    int n, on, check;
    int64_t big;
    uint64_t seed;
    double rate;
    char name[8];
    const char *text;
    const char *path;
    char style[16];
    int mode;
    char files[3][16];
    int n_files;
    const char *words[4];
    int n_words;
    int custom;
    const char *pos1, *pos2;
} opts;

static int set_custom(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err) {
    (void)f;
    if (strcmp(val, "ok") != 0) return tdm_errorf(err, "%s: expected ok, got '%s'", what, val);
    ((opts *)target)->custom = 1;
    return 0;
}

#define O(field) offsetof(opts, field)
static const tdm_flag FLAGS[] = {
    {.name = "count",
     .kind = TDM_FLAG_INT,
     .off = O(n),
     .lo = 1,
     .hi = 100,
     .def = "7",
     .metavar = "N",
     .help = "how many",
     .group = "numbers",
     .aliases = "num|recount=3"},
    {.name = "big", .kind = TDM_FLAG_I64, .off = O(big), .lo = 0, .hi = 1e12, .metavar = "N", .help = "a big one"},
    {.name = "seed", .kind = TDM_FLAG_U64, .off = O(seed), .def = "1234", .metavar = "S", .help = "a seed"},
    {.name = "rate",
     .kind = TDM_FLAG_DOUBLE,
     .off = O(rate),
     .lo = 0,
     .hi = 1,
     .def = "-1",
     .metavar = "R",
     .help = "a fraction (unset below 0)"},
    {.name = "on", .kind = TDM_FLAG_BOOL, .off = O(on), .help = "a switch", .group = "switches"},
    {.name = "no-check", .kind = TDM_FLAG_BOOL, .off = O(check), .opts = TDM_FLAG_NEGATE, .help = "skip the check"},
    {.name = "name",
     .kind = TDM_FLAG_STRING,
     .off = O(name),
     .cap = 8,
     .metavar = "NAME",
     .help = "short text",
     .group = "text"},
    {.name = "text",
     .kind = TDM_FLAG_STRING,
     .off = O(text),
     .opts = TDM_FLAG_DASHES,
     .metavar = "TEXT",
     .help = "any text, flags too"},
    {.name = "path", .kind = TDM_FLAG_PATH, .off = O(path), .metavar = "FILE", .help = "a file"},
    {.name = "style",
     .kind = TDM_FLAG_CHOICE,
     .off = O(style),
     .cap = 16,
     .choices = "plain|fancy",
     .def = "plain",
     .metavar = "S",
     .help = "how"},
    {.name = "mode", .kind = TDM_FLAG_CHOICE, .off = O(mode), .choices = "a|b|c", .metavar = "M", .help = "which"},
    {.name = "file",
     .kind = TDM_FLAG_LIST,
     .off = O(files),
     .cap = 16,
     .count_off = O(n_files),
     .max = 3,
     .metavar = "F",
     .help = "repeatable"},
    {.name = "word",
     .kind = TDM_FLAG_LIST,
     .off = O(words),
     .count_off = O(n_words),
     .max = 4,
     .metavar = "W",
     .help = "repeatable words"},
    {.name = "custom", .kind = TDM_FLAG_CUSTOM, .set = set_custom, .metavar = "X", .help = "set by a function"},
    {.name = "secret", .kind = TDM_FLAG_BOOL, .off = O(on), .opts = TDM_FLAG_HIDDEN, .help = "not listed"},
    {.name = "a-very-long-flag-name-that-overflows",
     .kind = TDM_FLAG_INT,
     .off = O(n),
     .metavar = "N",
     .help = "its help goes on the next line, and wraps at one hundred columns like every other help text does "
             "when it is long enough to need a second line"},
};
static const tdm_flag COMPAT[] = {
    {.name = "old-switch", .kind = TDM_FLAG_FIXED, .help = "always so"},
    {.name = "ways", .kind = TDM_FLAG_FIXED, .def = "1", .help = "there is one way"},
    {.name = "gone", .kind = TDM_FLAG_REFUSED, .help = "not taken here; drop it"},
};
static const tdm_flag_table MORE[] = {{COMPAT, 3}};
static const tdm_positional POS[] = {{.metavar = "IN", .help = "input", .off = O(pos1)},
                                     {.metavar = "OUT", .help = "output", .off = O(pos2)}};

static const tdm_flags P = {
    .command = "tandem t",
    .usage = "tandem t IN [OUT] [flags]",
    .about = "A command for tests.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
    .more = MORE,
    .n_more = 1,
    .pos = POS,
    .n_pos = 2,
    .min_pos = 1,
    .epilog = "The end.\n",
};

/* Splits `line` on spaces (no quoting) and parses it after defaults, with p. */
static int run_p(const tdm_flags *p, opts *o, const char *line, char **rest, int *n_rest, tdm_error *err) {
    static char buf[1024];
    static char *argv[64];
    snprintf(buf, sizeof buf, "%s", line);
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " ")) argv[argc++] = t;
    memset(o, 0, sizeof *o);
    o->check = 1;
    tdm_flags_defaults(p, o);
    err->msg[0] = 0;
    return tdm_flags_parse(p, o, argc, argv, rest, n_rest, err);
}

static int run(opts *o, const char *line, tdm_error *err) { return run_p(&P, o, line, NULL, NULL, err); }

/* The sentence for `line`, which must be refused. */
static const char *refused(const char *line) {
    static tdm_error err;
    opts o;
    int rc = run(&o, line, &err);
    if (rc != -1) snprintf(err.msg, sizeof err.msg, "(accepted, rc %d)", rc);
    return err.msg;
}

#define SAYS(line, want) CHECK(!strcmp(refused(line), want), "%s: got \"%s\"", line, refused(line))

static void test_defaults_and_kinds(void) {
    opts o;
    tdm_error err;
    CHECK(run(&o, "in", &err) == 0, "%s", err.msg);
    CHECK(o.n == 7 && o.seed == 1234 && o.rate == -1 && !strcmp(o.style, "plain") && o.check == 1, "defaults");
    CHECK(!strcmp(o.pos1, "in") && o.pos2 == NULL, "one positional");
    CHECK(run(&o,
              "in out --count 5 --big 1e9 --seed 42 --rate 0.25 --on --no-check --name abc --text hi "
              "--path p --style fancy --mode c --file x --file y --word u --word v --custom ok",
              &err) == 0,
          "%s", err.msg);
    CHECK(o.n == 5 && o.big == 1000000000 && o.seed == 42 && o.rate == 0.25, "numbers");
    CHECK(o.on == 1 && o.check == 0, "switches: %d %d", o.on, o.check);
    CHECK(!strcmp(o.name, "abc") && !strcmp(o.text, "hi") && !strcmp(o.path, "p"), "strings");
    CHECK(!strcmp(o.style, "fancy") && o.mode == 2, "choices: %s %d", o.style, o.mode);
    CHECK(o.n_files == 2 && !strcmp(o.files[1], "y") && o.n_words == 2 && !strcmp(o.words[0], "u"), "lists");
    CHECK(o.custom == 1 && !strcmp(o.pos2, "out"), "custom, second positional");
}

static void test_equals_form_and_names(void) {
    opts o;
    tdm_error err;
    CHECK(run(&o, "in --count=9 --on=false --no-check=true --name= --text=--x --file=a=b --mode=b", &err) == 0, "%s",
          err.msg);
    CHECK(o.n == 9 && o.on == 0 && o.check == 0 && o.name[0] == 0 && !strcmp(o.text, "--x"), "= values");
    CHECK(o.n_files == 1 && !strcmp(o.files[0], "a=b") && o.mode == 1, "the first = splits");
    /* '_' is '-'; aliases; an alias with a value is a switch */
    CHECK(run(&o, "in --no_check --num 4", &err) == 0 && o.check == 0 && o.n == 4, "%s", err.msg);
    CHECK(run(&o, "in --recount", &err) == 0 && o.n == 3, "implied value: %s %d", err.msg, o.n);
    SAYS("in --recount=4", "--recount: a switch, it takes no value");
    /* a value may start with '-' (not "--"), and -h there is a value, not --help */
    CHECK(run(&o, "in --name -h --big -0", &err) == 0 && !strcmp(o.name, "-h"), "%s", err.msg);
    CHECK(run(&o, "in --text --help", &err) == 0 && !strcmp(o.text, "--help"), "a DASHES value: %s", err.msg);
}

static void test_every_error_sentence(void) {
    SAYS("in --cout 3", "unknown flag '--cout'; did you mean '--count'?");
    SAYS("in --zzzzzzzzzzzzzz", "unknown flag '--zzzzzzzzzzzzzz' (tandem t --help lists the flags)");
    SAYS("in --secrett", "unknown flag '--secrett' (tandem t --help lists the flags)"); /* hidden: never suggested */
    SAYS("in --count", "--count: expected a value (N) after it");
    SAYS("in --count --on", "--count: expected a value (N), got the flag '--on'");
    SAYS("in --count x", "--count: expected an integer, got 'x'");
    SAYS("in --count 0x10", "--count: expected an integer, got '0x10'");
    SAYS("in --count 2.5", "--count: expected an integer, got '2.5'");
    SAYS("in --count 101", "--count: 101 is out of range [1, 100]");
    SAYS("in --big -1", "--big: -1 is out of range [0, 1000000000000]");
    SAYS("in --seed -1", "--seed: expected a non-negative integer, got '-1'");
    SAYS("in --rate abc", "--rate: expected a number, got 'abc'");
    SAYS("in --rate nan", "--rate: expected a number, got 'nan'");
    SAYS("in --rate 2", "--rate: 2 is out of range [0, 1]");
    SAYS("in --on=maybe", "--on: expected true or false, got 'maybe'");
    SAYS("in --name abcdefgh", "--name: value is 8 bytes, longer than 7");
    SAYS("in --path=", "--path: expected a path, got an empty string");
    SAYS("in --style odd", "--style: expected one of plain|fancy, got 'odd'");
    SAYS("in --mode d", "--mode: expected one of a|b|c, got 'd'");
    SAYS("in --file a --file b --file c --file d", "--file: more than 3 values");
    SAYS("in --file=", "--file: expected a path, got an empty string");
    SAYS("in --custom no", "--custom: expected ok, got 'no'");
    SAYS("in --gone", "--gone: not taken here; drop it");
    SAYS("in --old-switch=false", "--old-switch=false: tandem has no other way to run");
    SAYS("in --old-switch=perhaps", "--old-switch: a switch, expected true or false, got 'perhaps'");
    SAYS("in --ways 2", "--ways 2: there is one way; only 1 is accepted");
    SAYS("in --ways", "--ways (no value): there is one way; only 1 is accepted");
    SAYS("", "expected IN (tandem t --help)");
    SAYS("in out more", "unexpected argument 'more' (OUT is given already; flags start with --)");
    SAYS("in -x", "unexpected argument '-x' (flags start with --)");
    SAYS("in --", "unexpected argument '--' (flags start with --)");
    opts o;
    tdm_error err;
    CHECK(run(&o, "in --old-switch --old-switch=true --ways 1 --ways=1.0", &err) == 0, "accepted: %s", err.msg);
}

static void test_duplicates(void) {
    opts o;
    tdm_error err;
    /* the last value wins; a list collects, and its first occurrence replaces what it held */
    CHECK(run(&o, "in --count 2 --count 3", &err) == 0 && o.n == 3, "last wins: %d", o.n);
    memset(&o, 0, sizeof o);
    snprintf(o.files[0], sizeof o.files[0], "old");
    o.n_files = 1;
    char a0[] = "--file", a1[] = "new", a2[] = "--file", a3[] = "newer", a4[] = "in";
    char *argv[] = {a4, a0, a1, a2, a3};
    CHECK(tdm_flags_parse(&P, &o, 5, argv, NULL, NULL, &err) == 0 && o.n_files == 2 && !strcmp(o.files[0], "new") &&
              !strcmp(o.files[1], "newer"),
          "the list replaced: %d %s", o.n_files, o.files[0]);
    /* TDM_FLAGS_ONCE: a value flag given twice is an error; switches and lists are not */
    tdm_flags once = P;
    once.opts = TDM_FLAGS_ONCE;
    CHECK(run_p(&once, &o, "in --count 2 --num 3", NULL, NULL, &err) == -1 &&
              !strcmp(err.msg, "--count given twice (it takes one value)"),
          "%s", err.msg);
    CHECK(run_p(&once, &o, "in --on --on --file a --file b", NULL, NULL, &err) == 0, "%s", err.msg);
}

static void test_help_and_version_anywhere(void) {
    opts o;
    tdm_error err;
    CHECK(run(&o, "--bogus --help", &err) == TDM_FLAGS_HELP, "--help after an unknown flag");
    CHECK(run(&o, "in -h", &err) == TDM_FLAGS_HELP, "-h");
    CHECK(run(&o, "--version", &err) == TDM_FLAGS_VERSION, "--version");
    CHECK(run(&o, "in --name --help", &err) == -1, "a value flag's value is not --help: %s", err.msg);
    char a0[] = "--text", a1[] = "--version", a2[] = "in";
    char *argv[] = {a0, a1, a2};
    CHECK(tdm_flags_wants(&P, 3, argv) == 0, "--version as --text's value");
}

static int hook(const char *name, size_t n, tdm_error *err) {
    if (n == 5 && !strncmp(name, "other", 5)) return tdm_errorf(err, "--other belongs to another command");
    return 0;
}

static void test_handed_on_and_hooks(void) {
    /* a second command's flags: handed on with their values, checked for a value, refused when they always are */
    static const tdm_flag OTHER[] = {
        {.name = "lr", .kind = TDM_FLAG_DOUBLE, .metavar = "LR", .help = "rate"},
        {.name = "fast", .kind = TDM_FLAG_BOOL, .help = "switch"},
        {.name = "fp16", .kind = TDM_FLAG_REFUSED, .help = "not here"},
    };
    static const tdm_flags Q = {.command = "tandem q", .flags = OTHER, .n_flags = 3};
    tdm_flags p = P;
    p.pass = &Q;
    p.unknown = hook;
    opts o;
    tdm_error err;
    char *rest[32];
    int n_rest = -1;
    CHECK(run_p(&p, &o, "in --lr 1e-3 --count 4 --fast --lr=2", rest, &n_rest, &err) == 0, "%s", err.msg);
    CHECK(n_rest == 4 && !strcmp(rest[0], "--lr") && !strcmp(rest[1], "1e-3") && !strcmp(rest[2], "--fast") &&
              !strcmp(rest[3], "--lr=2") && o.n == 4,
          "rest %d", n_rest);
    CHECK(run_p(&p, &o, "in --lr --fast", rest, &n_rest, &err) == -1 &&
              !strcmp(err.msg, "--lr: expected a value (LR), got the flag '--fast'"),
          "%s", err.msg);
    CHECK(run_p(&p, &o, "in --fp16", rest, &n_rest, &err) == -1 && !strcmp(err.msg, "--fp16: not here"), "%s", err.msg);
    CHECK(run_p(&p, &o, "in --fastt", rest, &n_rest, &err) == -1 &&
              !strcmp(err.msg, "unknown flag '--fastt'; did you mean '--fast'?"),
          "suggested among both: %s", err.msg);
    CHECK(run_p(&p, &o, "in --other", rest, &n_rest, &err) == -1 &&
              !strcmp(err.msg, "--other belongs to another command"),
          "hook: %s", err.msg);
    /* the sentence for an unknown name elsewhere (a config file's key), with its prefix */
    tdm_flags_unknown(&P, "gone", 4, "f.json: ", &err);
    CHECK(!strcmp(err.msg, "f.json: --gone: not taken here; drop it"), "%s", err.msg);
    tdm_flags_unknown(&P, "cuont", 5, "f.json: ", &err);
    CHECK(!strcmp(err.msg, "f.json: unknown flag '--cuont'; did you mean '--count'?"), "%s", err.msg);
    const char *implied;
    const tdm_flag *f = tdm_flags_find(&P, "recount", 7, &implied);
    CHECK(f && !strcmp(f->name, "count") && implied && !strcmp(implied, "3"), "find by an alias");
    CHECK(tdm_flags_find(&P, "coun", 4, NULL) == NULL, "no prefix matching");
}

static void test_generated_help(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_flags_format_help(&P, &sb);
    const char *h = sb.data;
    CHECK(!strncmp(h, "usage: tandem t IN [OUT] [flags]\nA command for tests.\n\n", 52), "head:\n%s", h);
    CHECK(strstr(h, "\n  IN                                   input\n"), "positional:\n%s", h);
    CHECK(strstr(h, "\nnumbers:\n  --count N                            how many (default 7)\n"), "group, default");
    CHECK(strstr(h, "\n  --rate R                             a fraction (unset below 0)\n"), "an unset default");
    CHECK(strstr(h, "\nswitches:\n  --on                                 a switch\n"), "a switch has no metavar");
    CHECK(strstr(h, "  --style S                            how (default plain)\n"), "choice default");
    CHECK(!strstr(h, "secret") && !strstr(h, "old-switch") && !strstr(h, "--gone"), "hidden flags listed");
    CHECK(strstr(h, "\n  --a-very-long-flag-name-that-overflows N\n                                       its help"),
          "a long name:\n%s", h);
    int longest = 0, len = 0;
    for (const char *c = h; *c; c++) {
        len = *c == '\n' ? 0 : len + 1;
        if (len > longest) longest = len;
    }
    CHECK(longest <= 100, "a line of %d columns", longest);
    CHECK(strstr(h, "\n\nThe end.\n") && h[sb.len - 1] == '\n', "epilog");
    tdm_sb_free(&sb);
}

/* TDM_FLAG_MANY: the words after a list flag's value are its values too, up to the next flag */
static void test_many(void) {
    typedef struct many {
        const char *a[4], *b[4];
        int na, nb;
        const char *pos;
    } many;
    static const tdm_flag F[] = {
        {.name = "a",
         .kind = TDM_FLAG_LIST,
         .off = offsetof(many, a),
         .count_off = offsetof(many, na),
         .max = 4,
         .opts = TDM_FLAG_MANY,
         .metavar = "X..."},
        {.name = "b",
         .kind = TDM_FLAG_LIST,
         .off = offsetof(many, b),
         .count_off = offsetof(many, nb),
         .max = 4,
         .opts = TDM_FLAG_MANY,
         .metavar = "X..."},
    };
    static const tdm_flags Q = {.command = "tandem m", .flags = F, .n_flags = 2};
    char w0[] = "--a", w1[] = "x", w2[] = "y", w3[] = "--b=z", w4[] = "u", w5[] = "--a", w6[] = "v";
    char *argv[] = {w0, w1, w2, w3, w4, w5, w6};
    many m;
    memset(&m, 0, sizeof m);
    tdm_error err;
    CHECK(tdm_flags_parse(&Q, &m, 7, argv, NULL, NULL, &err) == 0, "%s", err.msg);
    CHECK(m.na == 3 && !strcmp(m.a[0], "x") && !strcmp(m.a[1], "y") && !strcmp(m.a[2], "v"), "a: %d", m.na);
    CHECK(m.nb == 2 && !strcmp(m.b[0], "z") && !strcmp(m.b[1], "u"), "b: %d", m.nb);
    char x0[] = "--a", x1[] = "1", x2[] = "2", x3[] = "3", x4[] = "4", x5[] = "5";
    char *argv2[] = {x0, x1, x2, x3, x4, x5};
    memset(&m, 0, sizeof m);
    CHECK(tdm_flags_parse(&Q, &m, 6, argv2, NULL, NULL, &err) == -1 && strstr(err.msg, "more than 4 values"), "%s",
          err.msg);
}

/* A last positional that takes every further word (tandem analyze RUN...), between and after flags. */
static void test_many_positionals(void) {
    typedef struct runs {
        const char *first;
        const char **rest;
        int n_rest, json;
    } runs;
    static const tdm_flag F[] = {{.name = "json", .kind = TDM_FLAG_BOOL, .off = offsetof(runs, json)}};
    static const tdm_positional PP[] = {
        {.metavar = "FIRST", .off = offsetof(runs, first)},
        {.metavar = "RUN...", .off = offsetof(runs, rest), .many = 1, .count_off = offsetof(runs, n_rest)},
    };
    static const tdm_flags Q = {.command = "tandem r", .flags = F, .n_flags = 1, .pos = PP, .n_pos = 2, .min_pos = 2};
    char w0[] = "a", w1[] = "b", w2[] = "--json", w3[] = "c", w4[] = "d";
    char *argv[] = {w0, w1, w2, w3, w4};
    const char *room[6] = {0};
    runs r = {.rest = room};
    tdm_error err;
    CHECK(tdm_flags_parse(&Q, &r, 5, argv, NULL, NULL, &err) == 0, "%s", err.msg);
    CHECK(!strcmp(r.first, "a") && r.json == 1, "first %s json %d", r.first, r.json);
    CHECK(r.n_rest == 3 && !strcmp(room[0], "b") && !strcmp(room[1], "c") && !strcmp(room[2], "d"), "rest: %d",
          r.n_rest);
    runs r2 = {.rest = room};
    CHECK(tdm_flags_parse(&Q, &r2, 1, argv, NULL, NULL, &err) == -1 && strstr(err.msg, "expected RUN..."), "%s",
          err.msg);
}

static void test_suggestions(void) {
    CHECK(tdm_edit_distance("kitten", "sitting") == 3, "kitten");
    CHECK(tdm_edit_distance("", "abc") == 3, "empty");
    static const char *const cmds[] = {"train", "ab", "inspect", "generate", "evaluate"};
    CHECK(!strcmp(tdm_closest_word("trian", cmds, 5), "train"), "trian");
    CHECK(!strcmp(tdm_closest_word("evalute", cmds, 5), "evaluate"), "evalute");
    CHECK(tdm_closest_word("frobnicate", cmds, 5) == NULL, "nothing close");
    const char *s = tdm_flags_suggest(&P, "no_chek", 7);
    CHECK(s && !strcmp(s, "no-check"), "'_' typed: %s", s ? s : "NULL");
    int64_t v;
    CHECK(tdm_flag_parse_int("1e3", &v) == 0 && v == 1000, "1e3");
    CHECK(tdm_flag_parse_int(" 1", &v) != 0 && tdm_flag_parse_int("", &v) != 0 && tdm_flag_parse_int("1e99", &v) != 0,
          "refused integers");
}

int main(void) {
    RUN(test_defaults_and_kinds);
    RUN(test_equals_form_and_names);
    RUN(test_every_error_sentence);
    RUN(test_duplicates);
    RUN(test_help_and_version_anywhere);
    RUN(test_handed_on_and_hooks);
    RUN(test_generated_help);
    RUN(test_many);
    RUN(test_many_positionals);
    RUN(test_suggestions);
    return TEST_SUMMARY();
}
