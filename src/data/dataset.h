/* dataset.h - conversation datasets with images, in the formats MindSpeed-MM and
 * LLaMA-Factory read, loaded into memory and validated.
 *
 * Accepted layouts (one file may be a JSON array of samples, or JSON Lines: one sample
 * object per line, chosen by a ".jsonl" suffix or a first character that is not '['; a
 * file other than *.jsonl that is one JSON object, even over several lines, is one sample):
 *
 *   MindSpeed-MM / LLaMA-Factory ("messages"):
 *     {"messages": [{"role": "system"|"user"|"assistant", "content": "<image>Describe."}, ...],
 *      "images": ["img/0.png"]}
 *     content may also be a list of parts [{"type": "image"}, {"type": "text", "text": "..."}].
 *   LLaVA / ShareGPT ("conversations"):
 *     {"image": "0.png" | ["0.png", ...], "conversations": [{"from": "human"|"gpt"|"system", "value": "..."}]}
 *     ("images" is accepted here too, and "user"/"assistant" as "from" values.)
 *
 * Rules checked at load time (errors name the file, the 0-based sample index, its line and the problem):
 *   - an optional system turn first, then user/assistant alternating, ending with an
 *     assistant turn; roles other than system/user/assistant (human/gpt) are errors;
 *   - every assistant answer is non-empty and holds no <image> tag;
 *   - the number of "<image>" tags in the sample equals the number of images listed;
 *   - every image file exists (its contents are checked later, when the header is read).
 * Image paths are resolved against opt->image_root, by default the dataset file's folder;
 * absolute paths are kept. With skip_bad_samples, a sample breaking a rule (or a JSON Lines
 * line that does not parse) is skipped and counted instead of failing the load.
 */
#ifndef TDM_DATASET_H
#define TDM_DATASET_H

#include <stdint.h>

#include "core/error.h"

#define TDM_DATASET_MAX_FILE_BYTES        ((size_t)1 << 36)
#define TDM_DATASET_MAX_IMAGES_PER_SAMPLE 64

typedef enum tdm_role { TDM_ROLE_SYSTEM, TDM_ROLE_USER, TDM_ROLE_ASSISTANT } tdm_role;

typedef struct tdm_turn {
    tdm_role role;
    char *text; /* UTF-8; "<image>" marks where an image goes */
} tdm_turn;

typedef struct tdm_sample {
    int n_turns;
    tdm_turn *turns;
    int n_images;
    char **images; /* resolved paths, in <image> order */
    int file;      /* index into tdm_dataset.files */
    int64_t index; /* 0-based position of the sample in that file */
    int line;      /* 1-based line of the file where the sample starts */
} tdm_sample;

typedef struct tdm_dataset {
    int n_files;
    char **files;
    int64_t n_samples;
    tdm_sample *samples;
    int64_t n_skipped;     /* samples skipped under skip_bad_samples */
    char first_skip[1024]; /* the reason the first one was skipped ("" if none) */
    int first_skip_file;   /* and where it is: file, and position in that file */
    int64_t first_skip_index;
} tdm_dataset;

typedef struct tdm_dataset_options {
    const char *image_root; /* NULL: each dataset file's own folder */
    int skip_bad_samples;   /* skip and count bad samples instead of failing */
    int no_image_check;     /* do not check that image files exist (tests) */
} tdm_dataset_options;

/* Loads and validates every file in order; samples keep file order. opt may be NULL. */
tdm_dataset *tdm_dataset_load(const char *const *paths, int n_paths, const tdm_dataset_options *opt, tdm_error *err);
void tdm_dataset_free(tdm_dataset *d);

/* "path: sample N" for messages about a sample, into buf. */
const char *tdm_dataset_where(const tdm_dataset *d, int64_t i, char *buf, int cap);

const char *tdm_role_name(tdm_role r);

#endif
