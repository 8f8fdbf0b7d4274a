/* random_batch.h - packed micro-batches with random content for the model tests and
 * benchmarks: several samples of different lengths, images of different grids with the
 * right number of <|image_pad|> tokens, random pixels, labels with ignored positions,
 * shifted targets and 3-axis position ids built the way get_rope_index does (spec §4). */
#ifndef TDM_TEST_RANDOM_BATCH_H
#define TDM_TEST_RANDOM_BATCH_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/rng.h"
#include "data/batch.h"
#include "model/config.h"

#define RB_MAX_IMAGES 8

/* One sample: text_len random text tokens before each image and after the last one,
 * n_images images of grid (1, gh[k], gw[k]) in patch units. */
typedef struct rb_sample {
    int text_len;
    int n_images;
    int gh[RB_MAX_IMAGES], gw[RB_MAX_IMAGES];
    int no_holes; /* 1: the answer (second half) is trained whole, as in real data */
} rb_sample;

static inline uint32_t rb_rand(uint64_t seed, uint64_t *ctr, uint32_t n) {
    return (uint32_t)(tdm_rng_u64(seed, 99, (*ctr)++) % n);
}

static inline void rb_free(tdm_batch *b) {
    free(b->cu_seqlens);
    free(b->input_ids);
    free(b->labels);
    free(b->targets);
    free(b->position_ids);
    free(b->image_grid_thw);
    free(b->pixel_values);
    memset(b, 0, sizeof *b);
}

/* Builds the batch (arrays from malloc; free with rb_free). */
static inline void rb_build(tdm_batch *b, const tdm_model_config *c, const rb_sample *smp, int n_samples,
                            uint64_t seed) {
    memset(b, 0, sizeof *b);
    int sm = c->vision.spatial_merge_size, sm2 = sm * sm;
    int T = 0, NP = 0, NI = 0;
    for (int s = 0; s < n_samples; s++) {
        T += smp[s].text_len * (smp[s].n_images + 1);
        for (int k = 0; k < smp[s].n_images; k++) {
            T += 2 + smp[s].gh[k] * smp[s].gw[k] / sm2;
            NP += smp[s].gh[k] * smp[s].gw[k];
            NI++;
        }
    }
    int V = c->text.vocab_size;
    int pd = c->vision.in_channels * c->vision.temporal_patch_size * c->vision.patch_size * c->vision.patch_size;
    b->n_tokens = T;
    b->n_seqs = b->n_samples = n_samples;
    b->cu_seqlens = calloc((size_t)n_samples + 1, sizeof(int32_t));
    b->input_ids = calloc((size_t)T, sizeof(int32_t));
    b->labels = calloc((size_t)T, sizeof(int32_t));
    b->targets = calloc((size_t)T, sizeof(int32_t));
    b->position_ids = calloc((size_t)3 * T, sizeof(int32_t));
    b->n_images = NI;
    b->image_grid_thw = calloc((size_t)3 * (NI ? NI : 1), sizeof(int32_t));
    b->n_patches = NP;
    b->patch_dim = pd;
    b->pixel_values = calloc((size_t)(NP ? NP : 1) * pd, sizeof(float));
    tdm_rng_fill_uniform(b->pixel_values, (int64_t)NP * pd, -1.0f, 1.0f, seed, 7);
    uint64_t ctr = 0;
    int i = 0, img = 0;
    int32_t *pt = b->position_ids, *ph = pt + T, *pw = ph + T;
    /* ordinary tokens avoid the last 8 ids (image pad, vision start/end, video live there) */
    uint32_t n_plain = (uint32_t)(V > 16 ? V - 8 : V);
    for (int s = 0; s < n_samples; s++) {
        int start = i, p = 0;
        for (int k = 0; k <= smp[s].n_images; k++) {
            for (int q = 0; q < smp[s].text_len; q++, i++) {
                b->input_ids[i] = (int32_t)rb_rand(seed, &ctr, n_plain);
                pt[i] = ph[i] = pw[i] = p++;
            }
            if (k == smp[s].n_images) break;
            int gh = smp[s].gh[k], gw = smp[s].gw[k], H = gh / sm, W = gw / sm;
            b->image_grid_thw[3 * img] = 1;
            b->image_grid_thw[3 * img + 1] = gh;
            b->image_grid_thw[3 * img + 2] = gw;
            img++;
            b->input_ids[i] = c->vision_start_token_id;
            pt[i] = ph[i] = pw[i] = p++;
            i++;
            for (int r = 0; r < H; r++)
                for (int q = 0; q < W; q++, i++) {
                    b->input_ids[i] = c->image_token_id;
                    pt[i] = p;
                    ph[i] = p + r;
                    pw[i] = p + q;
                }
            p += H > W ? H : W;
            b->input_ids[i] = c->vision_end_token_id;
            pt[i] = ph[i] = pw[i] = p++;
            i++;
        }
        b->cu_seqlens[s + 1] = i;
        /* labels: the tail of each sample is "the answer", with a few holes */
        int len = i - start;
        for (int q = start; q < i; q++) {
            int answer = q - start >= len / 2 && b->input_ids[q] != c->image_token_id;
            b->labels[q] = answer && (smp[s].no_holes || rb_rand(seed, &ctr, 5) != 0) ? b->input_ids[q] : -100;
        }
        for (int q = start; q < i; q++) b->targets[q] = q + 1 < i ? b->labels[q + 1] : -100;
    }
    for (int q = 0; q < T; q++) b->n_target_tokens += b->targets[q] != -100;
    b->cap_tokens = T;
    b->cap_seqs = n_samples;
    b->cap_images = NI;
    b->cap_patches = NP;
}

#endif
