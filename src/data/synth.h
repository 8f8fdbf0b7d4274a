/* synth.h - the built-in synthetic dataset (tandem gen-data): PNG pictures of simple
 * coloured shapes with conversations about them, in the MindSpeed-MM JSON format.
 *
 * OUT/train.json, OUT/test.json and OUT/images/{train,test}_NNNNNN.png. Each picture
 * (square, side between min_size and max_size pixels, white background) is a 2x2 grid
 * holding 1-4 shapes (circle, square, triangle, cross; red, green, blue, yellow, purple),
 * each filling most of its own cell, so "where" has one answer: top left, top right,
 * bottom left, bottom right. By default (scene SAME) the shapes of a picture are copies of
 * one shape in one colour; scene MIXED draws each shape's kind and colour. Sized for the
 * tiny model trained from scratch (patch 16, merge 2): at 64x64 each cell is one visual
 * token. Training samples mix captions ("Two red circles."), counting ("3"), colour
 * ("red"), position ("top left", asked about a lone shape) and shape ("cross") questions,
 * 2-4 per picture, several wordings per question, some with a system turn, and every 20th
 * sample text-only (general-knowledge questions: they give the text enough distinct words
 * for a 1024-token BPE vocabulary; 2000 samples fill its 742 merges).
 * Held-out samples are single closed questions with one exact answer, a quarter each of
 * count, colour, position and shape, for tandem evaluate. docs/learning.md says what the
 * tiny model learns from each scene and how fast.
 * Everything is a pure function of the seed: the same options give the same bytes; sample
 * i of train does not depend on how many held-out samples are asked for, or vice versa.
 */
#ifndef TDM_SYNTH_H
#define TDM_SYNTH_H

#include <stdint.h>

#include "core/error.h"

/* What a picture holds. SAME (the default): 1-4 copies of one shape in one colour, a lone
 * shape 2 times in 5, so every question is about the picture as a whole or about a lone
 * shape; the tiny model learns it in minutes (docs/learning.md). MIXED: 1-4 shapes of any
 * kind and colour, so colour, position and shape questions pick one shape out of several,
 * which the tiny model trained from scratch does not learn in minutes (a harder benchmark). */
typedef enum tdm_synth_scene { TDM_SYNTH_SCENE_SAME = 0, TDM_SYNTH_SCENE_MIXED = 1 } tdm_synth_scene;

typedef struct tdm_synth_options {
    const char *out_dir;
    int64_t n_train; /* default 2000 */
    int64_t n_test;  /* default 200 */
    uint64_t seed;
    int min_size, max_size; /* picture sides in pixels; defaults 64 and 128 */
    tdm_synth_scene scene;
} tdm_synth_options;

/* Writes the dataset (creating out_dir). Errors name the file that could not be written. */
int tdm_synth_generate(const tdm_synth_options *o, tdm_error *err);

#endif
