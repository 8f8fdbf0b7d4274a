/* synth.h - the built-in synthetic dataset (tandem gen-data): PNG pictures of simple
 * coloured shapes with conversations about them, in the MindSpeed-MM JSON format.
 *
 * OUT/train.json, OUT/test.json and OUT/images/{train,test}_NNNNNN.png. Each picture
 * (square, side between min_size and max_size pixels, white background) is a 2x2 grid
 * holding 1-4 shapes (circle, square, triangle, cross; red, green, blue, yellow, purple),
 * each filling most of its own cell, so "where" has one answer: top left, top right,
 * bottom left, bottom right. Sized for the tiny model trained from scratch (patch 16,
 * merge 2): at 64x64 each cell is one visual token, at 128x128 2x2 tokens (there it learns
 * where a lone shape is; at 64x64 it did not); shapes a few pixels wide in a 3x3 grid were
 * not learned in minutes (docs/learning.md). Training samples mix captions ("A red circle
 * and two blue squares."), counting ("3"), colour ("red"), position ("top left") and shape
 * ("cross") questions, 2-4 per picture, several wordings per question, some with a system
 * turn, and every 20th sample text-only (general-knowledge questions: they give the text
 * enough distinct words for a 1024-token BPE vocabulary; 2000 samples fill its 742 merges).
 * Held-out samples are single closed questions with one exact answer, a quarter each of
 * count, colour, position and shape, for tandem evaluate.
 * Everything is a pure function of the seed: the same options give the same bytes; sample
 * i of train does not depend on how many held-out samples are asked for, or vice versa.
 */
#ifndef TDM_SYNTH_H
#define TDM_SYNTH_H

#include <stdint.h>

#include "core/error.h"

typedef struct tdm_synth_options {
    const char *out_dir;
    int64_t n_train;   /* default 2000 */
    int64_t n_test;    /* default 200 */
    uint64_t seed;
    int min_size, max_size; /* picture sides in pixels; defaults 64 and 128 */
} tdm_synth_options;

/* Writes the dataset (creating out_dir). Errors name the file that could not be written. */
int tdm_synth_generate(const tdm_synth_options *o, tdm_error *err);

#endif
