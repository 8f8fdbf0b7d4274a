/* batch.c - the buffers of a tdm_batch (see batch.h). */
#include "data/batch.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

void tdm_batch_init(tdm_batch *b) {
    memset(b, 0, sizeof *b);
    b->step = -1;
}

void tdm_batch_free(tdm_batch *b) {
    free(b->cu_seqlens);
    free(b->input_ids);
    free(b->labels);
    free(b->targets);
    free(b->position_ids);
    free(b->image_grid_thw);
    free(b->pixel_values);
    tdm_batch_init(b);
}

void tdm_batch_reserve(tdm_batch *b, int tokens, int seqs, int images, int patches, int patch_dim) {
    if (tokens > b->cap_tokens) {
        b->input_ids = tdm_xrealloc(b->input_ids, sizeof(int32_t) * (size_t)tokens);
        b->labels = tdm_xrealloc(b->labels, sizeof(int32_t) * (size_t)tokens);
        b->targets = tdm_xrealloc(b->targets, sizeof(int32_t) * (size_t)tokens);
        b->position_ids = tdm_xrealloc(b->position_ids, sizeof(int32_t) * 3 * (size_t)tokens);
        b->cap_tokens = tokens;
    }
    if (seqs > b->cap_seqs || !b->cu_seqlens) {
        b->cu_seqlens = tdm_xrealloc(b->cu_seqlens, sizeof(int32_t) * ((size_t)seqs + 1));
        if (seqs > b->cap_seqs) b->cap_seqs = seqs;
    }
    if (images > b->cap_images) {
        b->image_grid_thw = tdm_xrealloc(b->image_grid_thw, sizeof(int32_t) * 3 * (size_t)images);
        b->cap_images = images;
    }
    if (patch_dim != b->patch_dim) b->cap_patches = 0; /* a different row size: reallocate */
    if (patches > b->cap_patches) {
        b->pixel_values = tdm_xrealloc(b->pixel_values, sizeof(float) * (size_t)patches * (size_t)patch_dim);
        b->cap_patches = patches;
    }
    b->patch_dim = patch_dim;
}
