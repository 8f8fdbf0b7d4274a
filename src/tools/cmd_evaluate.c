/* cmd_evaluate.c - `tandem evaluate`: exact-answer accuracy on a held-out split.
 *
 * For each sample the turns before the first assistant turn are the prompt, and the
 * first assistant turn is the reference. The greedy answer counts as correct when it
 * equals the reference after trimming surrounding whitespace. Accuracy is printed
 * overall and per question kind (colour, count, position, shape, other), told from the
 * question's wording, which is how the built-in data says what it asks.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "data/dataset.h"
#include "tools/commands.h"
#include "train/generate.h"

#define MAX_KINDS 64

typedef struct kind {
    char name[48];
    int n, correct;
} kind;

static void usage(FILE *f) {
    fprintf(f, "usage: tandem evaluate --model DIR --tokenizer FILE (--load CKPT | --hf-weights FILE) --data test.json\n"
               "                       [--image-root DIR] [--max-new-tokens N] [--limit N] [--show N] [--preprocessor FILE]\n"
               "                       [--image-max-pixels N] [--image-min-pixels N] (as the model was trained)\n"
               "                       [--no-kv-cache]\n"
               "  Answer accuracy: the greedy answer to each sample's first question against its first reference\n"
               "  answer (exact after trimming), overall and per question kind. --show N prints the first N answers.\n"
               "  --max-new-tokens N   stop each answer after N tokens (default 16) or at <|im_end|>\n"
               "  --limit N            evaluate only the first N samples of --data\n");
}

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

int cmd_evaluate(int argc, char **argv) {
    tdm_generator_options o = {0};
    const char *data = NULL, *image_root = NULL;
    int max_new = 16, show = 0;
    long limit = -1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(stdout), 0;
        if (!strcmp(f, "--no-kv-cache")) { /* the only flag without a value */
            o.no_kv_cache = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tandem evaluate: %s: expected a value after it (tandem evaluate --help)\n", f);
            return 2;
        }
        for (int j = 1; j < i; j++) /* each of these flags takes one value: a second one would be dropped */
            if (!strcmp(argv[j], f)) {
                fprintf(stderr, "tandem evaluate: %s given twice (it takes one value)\n", f);
                return 2;
            }
        const char *v = argv[++i];
        char *end;
        if (!strcmp(f, "--model")) o.model = v;
        else if (!strcmp(f, "--tokenizer")) o.tokenizer = v;
        else if (!strcmp(f, "--load")) o.load = v;
        else if (!strcmp(f, "--hf-weights")) o.hf_weights = v;
        else if (!strcmp(f, "--preprocessor")) o.preprocessor = v;
        else if (!strcmp(f, "--image-max-pixels") || !strcmp(f, "--image-min-pixels")) {
            char *e;
            long long n = strtoll(v, &e, 10);
            if (*e || n < 1) {
                fprintf(stderr, "tandem evaluate: %s %s: expected a positive integer (pixels)\n", f, v);
                return 2;
            }
            *(!strcmp(f, "--image-max-pixels") ? &o.image_max_pixels : &o.image_min_pixels) = n;
        }
        else if (!strcmp(f, "--data")) data = v;
        else if (!strcmp(f, "--image-root")) image_root = v;
        else if (!strcmp(f, "--max-new-tokens") || !strcmp(f, "--limit") || !strcmp(f, "--show")) {
            long n = strtol(v, &end, 10);
            if (*end || n < 0 || n > 100000000 || (n == 0 && strcmp(f, "--show"))) {
                fprintf(stderr, "tandem evaluate: %s %s: expected a positive integer\n", f, v);
                return 2;
            }
            if (!strcmp(f, "--max-new-tokens")) max_new = (int)n;
            else if (!strcmp(f, "--limit")) limit = n;
            else show = (int)n;
        } else {
            fprintf(stderr, "tandem evaluate: unknown flag '%s' (tandem evaluate --help)\n", f);
            return 2;
        }
    }
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
    kind kinds[MAX_KINDS];
    int n_kinds = 0, total = 0, correct = 0, rc = 0;
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
            putchar('\n');
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
    }
    tdm_generator_free(g);
    tdm_dataset_free(ds);
    return rc;
}
