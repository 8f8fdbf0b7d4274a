/* cmd_evaluate.c - `tandem evaluate`: exact-answer accuracy on a held-out split.
 *
 * For each sample the turns before the first assistant turn are the prompt, and the
 * first assistant turn is the reference. The greedy answer counts as correct when it
 * equals the reference after trimming surrounding whitespace. Accuracy is printed
 * overall and per question kind (colour, count, position, shape, other), told from the
 * question's wording, which is how the built-in data says what it asks.
 *
 * Beside it, each sample's log-likelihood of its reference (as lm-eval's loglikelihood): the
 * sum and the mean over the reference's tokens of log p(token | prompt and the tokens before),
 * the tokens being the ones training labels for that answer (the answer and "<|im_end|>\n"),
 * so that the mean is minus the training loss of a one-turn sample. --out FILE writes one JSON
 * line per sample.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "data/dataset.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "train/generate.h"

#define MAX_KINDS 64

typedef struct kind {
    char name[48];
    int n, correct;
} kind;

typedef struct evaluate_opts {
    tdm_generator_options gen; /* first: tdm_cli_generator_flags set it */
    const char *data, *image_root, *out;
    int max_new, show;
    int64_t limit;
} evaluate_opts;

static const tdm_flag FLAGS[] = {
    {.name = "data",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(evaluate_opts, data),
     .metavar = "FILE",
     .help = "the held-out split (JSON or JSON Lines)"},
    {.name = "image-root",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(evaluate_opts, image_root),
     .metavar = "DIR",
     .help = "directory image paths resolve against (default: the data file's folder)"},
    {.name = "max-new-tokens",
     .kind = TDM_FLAG_INT,
     .off = offsetof(evaluate_opts, max_new),
     .lo = 1,
     .hi = 1e8,
     .def = "16",
     .metavar = "N",
     .help = "stop each answer after N tokens or at <|im_end|>"},
    {.name = "limit",
     .kind = TDM_FLAG_I64,
     .off = offsetof(evaluate_opts, limit),
     .lo = 1,
     .hi = 1e8,
     .def = "-1",
     .metavar = "N",
     .help = "evaluate only the first N samples of --data"},
    {.name = "show",
     .kind = TDM_FLAG_INT,
     .off = offsetof(evaluate_opts, show),
     .lo = 0,
     .hi = 1e8,
     .def = "0",
     .metavar = "N",
     .help = "print the first N answers beside their references"},
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(evaluate_opts, out),
     .metavar = "FILE",
     .help = "write one JSON line per sample: answer, reference, correct, log-likelihood"},
};

static const tdm_flags P = {
    .command = "tandem evaluate",
    .usage = "tandem evaluate --model DIR --tokenizer FILE (--load CKPT | --hf-weights FILE) --data test.json [flags]",
    .about = "Answer accuracy: the greedy answer to each sample's first question against its first reference\n"
             "answer (exact after trimming), overall and per question kind; and the log-likelihood of each\n"
             "reference answer (sum and mean per token of log p over its tokens).",
    .flags = tdm_cli_generator_flags,
    .n_flags = TDM_CLI_N_GENERATOR_FLAGS,
    .more = &(const tdm_flag_table){FLAGS, (int)(sizeof FLAGS / sizeof *FLAGS)},
    .n_more = 1,
    .opts = TDM_FLAGS_ONCE,
};

/* [begin, end) of s without surrounding whitespace. */
static void trim(const char *s, const char **b, const char **e) {
    while (*s && isspace((unsigned char)*s)) s++;
    const char *t = s + strlen(s);
    while (t > s && isspace((unsigned char)t[-1])) t--;
    *b = s;
    *e = t;
}

/* Prints s trimmed, on one line: newlines, carriage returns and tabs inside it written as
 * \n, \r, \t; padded with spaces to `width` characters. */
static void put_one_line(const char *s, int width) {
    const char *b, *e;
    trim(s, &b, &e);
    int n = 0;
    for (const char *p = b; p < e; p++, n++) {
        if (*p == '\n') n++, fputs("\\n", stdout);
        else if (*p == '\r') n++, fputs("\\r", stdout);
        else if (*p == '\t') n++, fputs("\\t", stdout);
        else putchar(*p);
    }
    for (; n < width; n++) putchar(' ');
}

static int same_trimmed(const char *x, const char *y) {
    const char *xb, *xe, *yb, *ye;
    trim(x, &xb, &xe);
    trim(y, &yb, &ye);
    return xe - xb == ye - yb && !memcmp(xb, yb, (size_t)(xe - xb));
}

/* The kind of a closed question, from its whole wording (and a numeric reference): colour,
 * count, position, shape, else "other". Lower-cased keyword search, "<image>" ignored. */
static const char *kind_of(const char *question, const char *reference) {
    size_t len = strlen(question);
    char *q = tdm_xmalloc(len + 1);
    for (size_t i = 0; i <= len; i++) q[i] = (char)tolower((unsigned char)question[i]);
    const char *r = reference, *kind = "other";
    while (isspace((unsigned char)*r)) r++;
    int numeric = isdigit((unsigned char)*r) != 0;
    for (const char *p = r; *p && numeric; p++) numeric = isdigit((unsigned char)*p) || isspace((unsigned char)*p);
    if (strstr(q, "colour") || strstr(q, "color")) kind = "colour";
    else if (numeric || strstr(q, "how many") || strstr(q, "count") || strstr(q, "number of")) kind = "count";
    else if (strstr(q, "where") || strstr(q, "located") || strstr(q, "position") || strstr(q, "which part") ||
             strstr(q, "in which"))
        kind = "position";
    else if (strstr(q, "shape")) kind = "shape";
    free(q);
    return kind;
}

/* Longer than most: the command from flags to the report, one stage after the other. */
int cmd_evaluate(int argc, char **argv) {
    evaluate_opts opts = {0};
    tdm_flags_defaults(&P, &opts);
    int done = tdm_cli_parse(&P, &opts, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    const tdm_generator_options o = opts.gen;
    const char *data = opts.data, *image_root = opts.image_root;
    const int max_new = opts.max_new, show = opts.show;
    const int64_t limit = opts.limit;
    if (!o.model || !o.tokenizer || !data || (!o.load && !o.hf_weights)) {
        fprintf(stderr, "tandem evaluate: --model, --tokenizer, --data and --load (or --hf-weights) are required\n");
        return 2;
    }
    tdm_error err = {{0}};
    tdm_dataset_options dopt = {.image_root = image_root};
    tdm_dataset *ds = tdm_dataset_load(&data, 1, &dopt, &err);
    if (!ds) {
        fprintf(stderr, "tandem evaluate: %s\n", err.msg);
        return 1;
    }
    tdm_generator *g = tdm_generator_create(&o, &err);
    if (!g) {
        fprintf(stderr, "tandem evaluate: %s\n", err.msg);
        tdm_dataset_free(ds);
        return 1;
    }
    FILE *out = NULL;
    if (opts.out && !(out = fopen(opts.out, "w"))) {
        fprintf(stderr, "tandem evaluate: --out %s: cannot create the file\n", opts.out);
        tdm_generator_free(g);
        tdm_dataset_free(ds);
        return 1;
    }
    kind kinds[MAX_KINDS];
    int n_kinds = 0, total = 0, correct = 0, rc = 0;
    double ll_sum_all = 0;
    int64_t ll_tokens_all = 0;
    tdm_strbuf line;
    tdm_sb_init(&line);
    int64_t n = ds->n_samples;
    if (limit >= 0 && limit < n) n = limit;
    for (int64_t i = 0; i < n; i++) {
        const tdm_sample *s = &ds->samples[i];
        int first_answer = -1;
        for (int k = 0; k < s->n_turns; k++)
            if (s->turns[k].role == TDM_ROLE_ASSISTANT) {
                first_answer = k;
                break;
            }
        if (first_answer < 1) continue;
        /* images referenced by the prompt turns: the first ones, in order */
        int n_img = 0;
        for (int k = 0; k < first_answer; k++)
            for (const char *p = s->turns[k].text; (p = strstr(p, "<image>")); p += 7) n_img++;
        char *answer = NULL;
        if (tdm_generator_answer(g, s->turns, first_answer, (const char *const *)s->images, n_img, max_new, &answer,
                                 &err) != 0) {
            char where[1200];
            fprintf(stderr, "tandem evaluate: %s: %s\n", tdm_dataset_where(ds, i, where, sizeof where), err.msg);
            rc = 1;
            break;
        }
        const char *ref = s->turns[first_answer].text;
        int ok = same_trimmed(answer, ref);
        /* the reference as training labels it: the answer, then <|im_end|> and the newline */
        tdm_strbuf cont;
        tdm_sb_init(&cont);
        tdm_sb_puts(&cont, ref);
        tdm_sb_puts(&cont, "<|im_end|>\n");
        double ll = 0;
        int ll_n = 0;
        int llrc = tdm_generator_loglik(g, s->turns, first_answer, (const char *const *)s->images, n_img, cont.data,
                                        &ll, &ll_n, &err);
        tdm_sb_free(&cont);
        if (llrc != 0) {
            char where[1200];
            fprintf(stderr, "tandem evaluate: %s: %s\n", tdm_dataset_where(ds, i, where, sizeof where), err.msg);
            free(answer);
            rc = 1;
            break;
        }
        ll_sum_all += ll;
        ll_tokens_all += ll_n;
        const char *kname = kind_of(s->turns[first_answer - 1].text, ref);
        int ki = 0;
        while (ki < n_kinds && strcmp(kinds[ki].name, kname)) ki++;
        if (ki == n_kinds && n_kinds < MAX_KINDS) {
            snprintf(kinds[n_kinds].name, sizeof kinds[n_kinds].name, "%s", kname);
            kinds[n_kinds].n = kinds[n_kinds].correct = 0;
            n_kinds++;
        }
        if (ki < n_kinds) kinds[ki].n++, kinds[ki].correct += ok;
        total++;
        correct += ok;
        if (i < show) { /* one line per sample, the texts as compared */
            printf("%s %-12s got ", ok ? "ok  " : "MISS", kname);
            put_one_line(answer, 16);
            fputs(" want ", stdout);
            put_one_line(ref, 0);
            printf("  loglik %.6g (%d tokens, mean %.6g)\n", ll, ll_n, ll / ll_n);
        }
        if (out) {
            tdm_sb_clear(&line);
            tdm_sb_printf(&line, "{\"index\": %lld, \"kind\": \"%s\", \"correct\": %s, \"answer\": ", (long long)i,
                          kname, ok ? "true" : "false");
            tdm_sb_json_string(&line, answer, strlen(answer));
            tdm_sb_puts(&line, ", \"reference\": ");
            tdm_sb_json_string(&line, ref, strlen(ref));
            tdm_sb_printf(&line, ", \"loglik_sum\": %.9g, \"loglik_tokens\": %d, \"loglik_mean\": %.9g}\n", ll, ll_n,
                          ll / ll_n);
            fputs(line.data, out);
        }
        free(answer);
    }
    if (rc == 0 && total == 0) {
        fprintf(stderr, "tandem evaluate: %s: no sample with a question and a reference answer to evaluate\n", data);
        rc = 1;
    }
    if (rc == 0) {
        printf("accuracy: %.2f%% (%d of %d)\n", 100.0 * correct / total, correct, total);
        for (int k = 0; k < n_kinds; k++)
            printf("  %-16s %6.2f%% (%d of %d)\n", kinds[k].name, 100.0 * kinds[k].correct / kinds[k].n,
                   kinds[k].correct, kinds[k].n);
        printf("log-likelihood of the references: %.6g per sample, %.6g per token (%lld tokens)\n", ll_sum_all / total,
               ll_sum_all / (double)ll_tokens_all, (long long)ll_tokens_all);
    }
    tdm_sb_free(&line);
    if (out && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "tandem evaluate: --out %s: write failed\n", opts.out);
        rc = 1;
    }
    tdm_generator_free(g);
    tdm_dataset_free(ds);
    return rc;
}
