/* bench_model.c - forward+backward time of one packed micro-batch for three model sizes,
 * against the single-thread sgemm ceiling measured in the same run.
 *
 *   build/bench/bench_model [--steps N] [--only tiny|small|medium]
 *
 * For each size: model FLOPs per step from tdm_model_flops (every matmul that runs,
 * 2*m*n*k each, attention QK^T/PV forward and 2x that backward, lm_head over counted rows;
 * elementwise work not counted), the best and median step time of N timed steps after one
 * warm-up, achieved GFLOP/s and its fraction of the ceiling, then where the time of one
 * more step went, per kernel (profiler level 2). One thread: OpenBLAS is pinned to 1.
 * Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), for the ceiling too: the
 * machines this runs on share their cores, and wall time there measures the neighbours.
 *
 * Sizes: tiny = configs/tiny/config.json (falls back to the same shape built in code);
 * small = width 512; medium = width 1024 (see make_small / make_medium below).
 */
#include <cblas.h>

#include "kernels/kernels.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "model/qwen3vl.h"
#include "prof/profiler.h"
#include "model/model_configs.h"
#include "model/random_batch.h"
#include "bench_platform.h"

void openblas_set_num_threads(int n);

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Best GFLOP/s of ten square single-thread sgemms: the ceiling the model is measured
 * against. Measured before and after the models and the higher one kept, so a noisy
 * moment on a shared machine does not lower it. */
static double sgemm_ceiling(int n) {
    float *a = tdm_xmalloc(sizeof(float) * (size_t)n * n), *b = tdm_xmalloc(sizeof(float) * (size_t)n * n),
          *c = tdm_xmalloc(sizeof(float) * (size_t)n * n);
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        a[i] = (float)((i * 7) % 13) * 0.01f;
        b[i] = (float)((i * 5) % 11) * 0.01f;
    }
    double best = 0;
    for (int r = 0; r < 10; r++) {
        uint64_t t0 = tdm_thread_cpu_ns();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double s = (double)(tdm_thread_cpu_ns() - t0) * 1e-9;
        double g = 2.0 * n * n * n / s * 1e-9;
        best = g > best ? g : best;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* A model of text width w: 4 query / 2 kv heads of w/4 ... written out so the shape is plain. */
static void make_sized(tdm_model_config *c, int vision_w, int text_w, int text_heads, int text_kv, int vocab) {
    cfg_common(c);
    c->vision.depth = 4;
    c->vision.hidden_size = vision_w;
    c->vision.num_heads = vision_w / 64;
    c->vision.intermediate_size = 4 * vision_w;
    c->vision.patch_size = 16;
    c->vision.num_position_embeddings = 2304;
    c->vision.out_hidden_size = text_w;
    c->vision.n_deepstack = 3;
    for (int j = 0; j < 3; j++) c->vision.deepstack_indexes[j] = j;
    c->text.hidden_size = text_w;
    c->text.num_layers = 4;
    c->text.num_heads = text_heads;
    c->text.num_kv_heads = text_kv;
    c->text.head_dim = text_w / text_heads;
    c->text.intermediate_size = 3 * text_w;
    c->text.vocab_size = vocab;
    int half = c->text.head_dim / 2;
    c->text.mrope_section[1] = c->text.mrope_section[2] = (half * 5 / 16);
    c->text.mrope_section[0] = half - 2 * c->text.mrope_section[1];
    c->image_token_id = vocab - 1;
    c->vision_start_token_id = vocab - 3;
    c->vision_end_token_id = vocab - 2;
    c->video_token_id = vocab - 4;
}

typedef struct size_case {
    const char *name;
    tdm_model_config cfg;
    rb_sample samples[4];
    int n_samples;
} size_case;

typedef struct size_result {
    const char *name;
    double params, flops, best, median, wall;
    int tokens, patches;
    char split[512];
} size_result;

static void bench_one(size_case *sc, int steps, size_result *out) {
    memset(out, 0, sizeof *out);
    out->name = sc->name;
    out->best = out->median = out->wall = 1; /* a failed size prints zeros, not garbage */
    tdm_error err;
    tdm_model *m = tdm_model_create(&sc->cfg, NULL, &err);
    if (!m) {
        fprintf(stderr, "%s: %s\n", sc->name, err.msg);
        return;
    }
    float *data, *grad;
    if (tdm_param_table_alloc(tdm_model_params(m), &data, &grad, &err)) {
        fprintf(stderr, "%s: %s\n", sc->name, err.msg);
        tdm_model_free(m);
        return;
    }
    tdm_model_init_weights(m, 1);
    tdm_batch b;
    rb_build(&b, &sc->cfg, sc->samples, sc->n_samples, 3);
    tdm_model_limits lim = {b.n_tokens, b.n_seqs, b.n_patches, b.n_images};
    if (tdm_model_reserve(m, &lim, &err)) {
        fprintf(stderr, "%s: %s\n", sc->name, err.msg);
        goto done;
    }
    double flops = tdm_model_flops(m, &b);
    float scale = (float)(1.0 / (double)b.n_target_tokens);
    tdm_fb_result r;
    tdm_model_forward_backward(m, &b, scale, &r, &err); /* warm-up */
    double *t = tdm_xmalloc(sizeof(double) * (size_t)steps), *w = tdm_xmalloc(sizeof(double) * (size_t)steps);
    for (int s = 0; s < steps; s++) {
        uint64_t t0 = tdm_thread_cpu_ns(), w0 = tdm_now_ns();
        tdm_model_forward_backward(m, &b, scale, &r, &err);
        t[s] = (double)(tdm_thread_cpu_ns() - t0) * 1e-9;
        w[s] = (double)(tdm_now_ns() - w0) * 1e-9;
    }
    qsort(t, (size_t)steps, sizeof *t, cmp_double);
    qsort(w, (size_t)steps, sizeof *w, cmp_double);
    *out = (size_result){sc->name,
                         (double)tdm_param_table_numel(tdm_model_params(m), 0),
                         flops,
                         t[0],
                         t[steps / 2],
                         w[0],
                         b.n_tokens,
                         b.n_patches,
                         ""};
    fprintf(stderr, "%s: cpu best %.1f ms\n", sc->name, t[0] * 1e3);
    free(t);
    free(w);

    /* one more step with kernel-level profiling: where did the time go */
    tdm_prof_record_start(2, 1 << 20);
    uint64_t s0 = tdm_now_ns();
    tdm_model_forward_backward(m, &b, scale, &r, &err);
    double step_ns = (double)(tdm_now_ns() - s0); /* wall: the kernel spans are wall time too */
    tdm_prof_record_stop();
    tdm_prof_collection col;
    tdm_prof_collect(&col);
    const char *names[64];
    double ns[64];
    int nk = 0;
    for (int64_t e = 0; e < col.n_events; e++) {
        const tdm_prof_event *ev = &col.events[e];
        if (ev->cat != TDM_PROF_KERNEL) continue;
        int k = 0;
        while (k < nk && strcmp(names[k], ev->name) != 0) k++;
        if (k == nk && nk < 64) {
            names[nk] = ev->name;
            ns[nk++] = 0;
        }
        if (k < nk) ns[k] += (double)(ev->t1_ns - ev->t0_ns);
    }
    size_t off = 0;
    double covered = 0;
    for (int round = 0; round < nk; round++) { /* largest first */
        int k = 0;
        for (int q = 1; q < nk; q++)
            if (ns[q] > ns[k]) k = q;
        if (ns[k] < 0) break;
        if (ns[k] >= 0.01 * step_ns && off + 40 < sizeof out->split)
            off += (size_t)snprintf(out->split + off, sizeof out->split - off, " %s %.0f%%", names[k],
                                    100.0 * ns[k] / step_ns);
        covered += ns[k];
        ns[k] = -1;
    }
    snprintf(out->split + off, sizeof out->split - off, ", other %.0f%%", 100.0 * (1.0 - covered / step_ns));
    tdm_prof_collection_free(&col);
done:
    rb_free(&b);
    tdm_free_big(data);
    tdm_free_big(grad);
    tdm_model_free(m);
}

int main(int argc, char **argv) {
    tdm_blas_select_core(argv); /* OpenBLAS's kernels for this CPU (kernels/blas_core.c) */
    int steps = 3;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_model [--steps N] [--only tiny|small|medium]\n");
            return 2;
        }
    }
    if (steps < 1) steps = 1;
    openblas_set_num_threads(1);
    bench_print_platform(stdout);
    double ceiling = sgemm_ceiling(1024);

    static size_case cases[3];
    tdm_error err;
    cases[0].name = "tiny";
    if (tdm_model_config_load("configs/tiny", &cases[0].cfg, &err) != 0) {
        fprintf(stderr, "(configs/tiny not readable from here: %s; using the same shape built in code)\n", err.msg);
        make_sized(&cases[0].cfg, 128, 256, 4, 2, 1024);
        cases[0].cfg.vision.num_heads = 4;
    }
    /* tiny: 4 samples, one 128x96-pixel image each (8x6 patches) */
    cases[0].n_samples = 4;
    for (int s = 0; s < 4; s++)
        cases[0].samples[s] = (rb_sample){.text_len = 20, .n_images = 1, .gh = {8}, .gw = {6}, .no_holes = 1};
    /* small: vision 256 wide, text 512 (8 q / 4 kv heads of 64), ~600 tokens, 2 images of 256x256 */
    cases[1].name = "small";
    make_sized(&cases[1].cfg, 256, 512, 8, 4, 8192);
    cases[1].n_samples = 2;
    for (int s = 0; s < 2; s++)
        cases[1].samples[s] = (rb_sample){.text_len = 120, .n_images = 1, .gh = {16}, .gw = {16}, .no_holes = 1};
    /* medium: vision 512 wide, text 1024 (8 q / 4 kv heads of 128), ~1100 tokens, 2 images of 384x384 */
    cases[2].name = "medium";
    make_sized(&cases[2].cfg, 512, 1024, 8, 4, 16384);
    cases[2].n_samples = 2;
    for (int s = 0; s < 2; s++)
        cases[2].samples[s] = (rb_sample){.text_len = 200, .n_images = 1, .gh = {24}, .gw = {24}, .no_holes = 1};
    /* run the models, then settle the ceiling and print the fractions against it */
    size_result res[3];
    int nres = 0;
    for (int i = 0; i < 3; i++)
        if (!only || !strcmp(only, cases[i].name)) bench_one(&cases[i], steps, &res[nres++]);
    double after = sgemm_ceiling(1024);
    if (after > ceiling) ceiling = after;
    printf("single-thread sgemm ceiling (1024^3, best of 10 before and after; OpenBLAS kernels %s): %.1f GFLOP/s\n",
           openblas_get_corename(), ceiling);
    for (int i = 0; i < nres; i++) {
        printf("%-7s params %6.1fM  tokens %5d  patches %5d  %7.2f GFLOP/step  cpu best %7.1f ms median %7.1f ms "
               "(wall best %7.1f ms)  %5.1f GFLOP/s  %.2f of ceiling\n",
               res[i].name, res[i].params / 1e6, res[i].tokens, res[i].patches, res[i].flops * 1e-9, res[i].best * 1e3,
               res[i].median * 1e3, res[i].wall * 1e3, res[i].flops / res[i].best * 1e-9,
               res[i].flops / res[i].best * 1e-9 / ceiling);
        printf("        time per kernel:%s\n", res[i].split);
    }
    return 0;
}
