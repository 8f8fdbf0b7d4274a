/* flags.h - one table-driven command-line parser for every subcommand.
 *
 *   typedef struct opts { const char *out; int64_t steps; int quiet; } opts;
 *   static const tdm_flag FLAGS[] = {
 *       {.name = "out", .kind = TDM_FLAG_PATH, .off = offsetof(opts, out), .metavar = "DIR", .help = "where"},
 *       {.name = "steps", .kind = TDM_FLAG_I64, .off = offsetof(opts, steps), .lo = 1, .hi = 1e6, .def = "2",
 *        .metavar = "N", .help = "how many"},
 *       {.name = "quiet", .kind = TDM_FLAG_BOOL, .off = offsetof(opts, quiet), .help = "print less"},
 *   };
 *   static const tdm_flags P = {.command = "tandem x", .usage = "tandem x --out DIR [flags]",
 *                               .flags = FLAGS, .n_flags = 3};
 *   opts o = {0};
 *   tdm_flags_defaults(&P, &o);
 *   int rc = tdm_flags_parse(&P, &o, argc - 1, argv + 1, NULL, NULL, &err);
 *   // 0: parsed; TDM_FLAGS_HELP / TDM_FLAGS_VERSION: --help or --version was given; -1: err says why
 *
 * The same rules for every command:
 * - `--flag VALUE` or `--flag=VALUE`; a switch takes no value, or `--switch=true|false`; '-' and '_' are
 *   the same in a name; `--help` (`-h`) and `--version` anywhere among the flags.
 * - An error is one sentence naming the flag: an unknown one gets the closest known name
 *   ("unknown flag '--stesp'; did you mean '--steps'?"), else points at the command's --help; a missing
 *   value says "expected a value (N) after it"; a bad value says what was expected and what was given.
 * - A flag given twice: the last value wins and a list collects both (the first occurrence in one
 *   parse replaces what the list held before, e.g. a config file's), unless the command sets
 *   TDM_FLAGS_ONCE: then a value flag given twice is an error ("--image given twice (it takes one value)").
 * - Each flag's target is `ptr` when set, else `off` bytes into the target the parser is given.
 * - --help comes from the same table: "usage: ...", the about text, positional arguments, then one line per
 *   flag ("  --name META   help (default X)") under its group's heading, then the epilog.
 */
#ifndef TDM_FLAGS_H
#define TDM_FLAGS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"

typedef enum tdm_flag_kind {
    TDM_FLAG_BOOL,   /* int: 1 when given (0 with TDM_FLAG_NEGATE, for "--no-x" flags) */
    TDM_FLAG_INT,    /* int in [lo, hi]; decimal, or an integral exponent form (1e6); never hex */
    TDM_FLAG_I64,    /* int64_t in [lo, hi], read as TDM_FLAG_INT */
    TDM_FLAG_U64,    /* uint64_t, not negative */
    TDM_FLAG_DOUBLE, /* double, finite, in [lo, hi] */
    TDM_FLAG_STRING, /* any text, "" too: char[cap] when cap > 0, else a const char * (into argv) */
    TDM_FLAG_PATH,   /* as STRING, but not empty */
    TDM_FLAG_CHOICE, /* one of `choices` ("a|b|c"): char[cap] when cap > 0, else the int index of it */
    /* repeatable, not empty: items char[max][cap] (cap > 0) or const char *[max]; the int count at count_off */
    TDM_FLAG_LIST,
    TDM_FLAG_CUSTOM, /* a value handed to `set` */
    /* accepted as asking for what the program does anyway: a switch when def is NULL, else only the value def
     * (compared as numbers); help says why. Not in --help */
    TDM_FLAG_FIXED,
    TDM_FLAG_REFUSED, /* refused with "--name: " and its help sentence. Not in --help */
} tdm_flag_kind;

enum {
    TDM_FLAG_NEGATE = 1u << 0, /* BOOL: the flag stores 0 ("--no-check" clears check) */
    TDM_FLAG_HIDDEN = 1u << 1, /* not in --help and never suggested */
    TDM_FLAG_DASHES = 1u << 2, /* the value may start with "--" (it is a string of flags) */
    /* LIST: the words after its value that do not start with '-' are its values too ("--runs a b c") */
    TDM_FLAG_MANY = 1u << 3,
};

typedef struct tdm_flag tdm_flag;
struct tdm_flag {
    const char *name; /* as typed, without the dashes: "micro-batch-size" */
    tdm_flag_kind kind;
    size_t off;    /* into the parser's target, when ptr is NULL */
    void *ptr;     /* or the variable itself */
    size_t cap;    /* bytes of a char[] target (of one item for a LIST); 0: a const char * */
    double lo, hi; /* numbers: the inclusive range, when lo < hi */
    /* the default as typed, applied by tdm_flags_defaults and shown by --help; one outside [lo, hi] means
     * "unset" and is not shown */
    const char *def;
    const char *choices; /* TDM_FLAG_CHOICE: "a|b|c" */
    const char *metavar; /* "N", "DIR": --help and the missing-value sentence */
    const char *help;
    const char *group; /* --help heading from this flag on (NULL: the previous flag's) */
    /* other names, '|'-separated; "name=VALUE", the last of them, is a switch meaning --flag VALUE */
    const char *aliases;
    unsigned opts;    /* TDM_FLAG_NEGATE | TDM_FLAG_HIDDEN | TDM_FLAG_DASHES | TDM_FLAG_MANY */
    size_t count_off; /* TDM_FLAG_LIST: the int item count, into the target (or count_ptr) */
    int *count_ptr;
    int max; /* TDM_FLAG_LIST: the most items */
    /* TDM_FLAG_CUSTOM: sets the value; `what` names the source for the sentence ("--x", "f.json: key 'x'") */
    int (*set)(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err);
    const char *key; /* the caller's name for the flag (train: Megatron's attribute name) */
    int tag;         /* the caller's */
};

typedef struct tdm_flag_table {
    const tdm_flag *flags;
    int n;
} tdm_flag_table;

/* A positional argument: a const char * into argv, at off (or ptr). The last one may take every further
 * word (many): then off holds a const char ** with room for argc words, which the caller allocates, and
 * count_off an int counting them. */
typedef struct tdm_positional {
    const char *metavar; /* "DIR|TRACE.json" */
    const char *help;
    size_t off;
    const char **ptr;
    int many;
    size_t count_off;
} tdm_positional;

enum {
    TDM_FLAGS_ONCE = 1u << 0, /* a value flag given twice is an error */
};

typedef struct tdm_flags tdm_flags;
struct tdm_flags {
    const char *command;   /* "tandem train": sentences point at "<command> --help" */
    const char *usage;     /* after "usage: " (may span lines) */
    const char *about;     /* what the command does, after the usage line; NULL: nothing */
    const tdm_flag *flags; /* the command's flags */
    int n_flags;
    const tdm_flag_table *more; /* further tables on the same target, after `flags` */
    int n_more;
    const tdm_positional *pos; /* positional arguments in order; min_pos of them required */
    int n_pos, min_pos;
    /* another command's flags, accepted and handed on in `rest` with their values, not set (ab: train's
     * flags, for both sides) */
    const tdm_flags *pass;
    unsigned opts;      /* TDM_FLAGS_ONCE */
    const char *epilog; /* --help: after the flag lines */
    /* A sentence for a flag that no table knows, before the did-you-mean (export-batches: "a train flag it
     * does not use"): returns -1 with err written, or 0 to leave it to the suggestion. */
    int (*unknown)(const char *name, size_t n, tdm_error *err);
};

enum { TDM_FLAGS_HELP = 1, TDM_FLAGS_VERSION = 2 };

/* Applies argv[0..argc) (no program name) on top of target's values. rest (room for argc words) receives
 * the words of `pass` flags in order, *n_rest their count; both may be NULL without `pass`. Returns 0,
 * TDM_FLAGS_HELP or TDM_FLAGS_VERSION when one of those is among the flags (nothing else is checked then),
 * or -1 with one sentence in err. */
int tdm_flags_parse(const tdm_flags *p, void *target, int argc, char **argv, char **rest, int *n_rest, tdm_error *err);

/* TDM_FLAGS_HELP, TDM_FLAGS_VERSION or 0: what tdm_flags_parse would answer first, without parsing (for a
 * command that must answer --help before it starts MPI). */
int tdm_flags_wants(const tdm_flags *p, int argc, char **argv);

/* Sets every flag's default (def) in target, without range checks; flags without one are left alone. */
void tdm_flags_defaults(const tdm_flags *p, void *target);

/* The flag of p's tables (not `pass`) named name[0..n) or by one of its aliases, '-' and '_' alike; NULL
 * when none. *implied (may be NULL) gets the value an alias "name=VALUE" implies, else NULL. */
const tdm_flag *tdm_flags_find(const tdm_flags *p, const char *name, size_t n, const char **implied);
/* The same within one table. */
const tdm_flag *tdm_flag_lookup(const tdm_flag *flags, int n_flags, const char *name, size_t n, const char **implied);

/* Sets one flag from its text value; `what` names the source in the sentence ("--lr", "f.json: key 'lr'").
 * A LIST appends; a FIXED flag checks the value; a REFUSED one refuses. */
int tdm_flag_set(const tdm_flag *f, void *target, const char *val, const char *what, tdm_error *err);

/* The sentence for an unknown flag name[0..n), `where` ("" or "f.json: ") before it: a REFUSED flag's
 * reason, p->unknown's sentence, "unknown flag '--x'; did you mean '--y'?", or "unknown flag '--x'
 * (<command> --help lists the flags)". Always returns -1. */
int tdm_flags_unknown(const tdm_flags *p, const char *name, size_t n, const char *where, tdm_error *err);

/* The visible flag name (of p and p->pass) closest to name[0..n), or NULL when none is close. */
const char *tdm_flags_suggest(const tdm_flags *p, const char *name, size_t n);

/* The word of words[0..n) closest to typed, or NULL when none is close: within max(3, len/2) edits. */
const char *tdm_closest_word(const char *typed, const char *const *words, int n);

/* A decimal integer, or an integral value in exponent form (1e6) below 9e15; not hex, no blanks:
 * what TDM_FLAG_INT reads. 0, or -1 when s is not one. */
int tdm_flag_parse_int(const char *s, int64_t *out);

/* Levenshtein distance (strings over 128 bytes: the longer length). */
int tdm_edit_distance(const char *a, const char *b);

/* The whole --help text: usage, about, positionals, flags by group, epilog. */
void tdm_flags_format_help(const tdm_flags *p, tdm_strbuf *sb);
/* The flag lines only (p's tables, hidden ones left out), one "  --name META   help (default X)" each. */
void tdm_flags_format_flags(const tdm_flags *p, tdm_strbuf *sb);

#endif
