/* libFuzzer target: the dataset reader (src/data/dataset.c) on an arbitrary file. The
 * first input byte chooses the options: bit 0 the file suffix (.json / .jsonl), bit 1
 * skip_bad_samples. Image files are not checked (no_image_check), so the reader's own
 * rules are what is exercised. A loaded dataset must be internally consistent.
 * fuzz-modules: data tokenizer prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"

static char dir[64];

static void remove_dir(void) { rmdir(dir); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/tdm-fuzz-ds-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    char path[128];
    snprintf(path, sizeof path, "%s/data.%s", dir, (data[0] & 1) ? "jsonl" : "json");
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) abort();
    fclose(f);
    tdm_dataset_options opt = {.skip_bad_samples = (data[0] >> 1) & 1, .no_image_check = 1};
    tdm_error err;
    const char *paths[1] = {path};
    tdm_dataset *d = tdm_dataset_load(paths, 1, &opt, &err);
    if (d) {
        for (int64_t i = 0; i < d->n_samples; i++) {
            const tdm_sample *s = &d->samples[i];
            if (s->n_turns < 1 || s->n_images < 0 || s->n_images > TDM_DATASET_MAX_IMAGES_PER_SAMPLE) abort();
            if (s->turns[s->n_turns - 1].role != TDM_ROLE_ASSISTANT) abort();
            for (int k = 0; k < s->n_turns; k++) (void)strlen(s->turns[k].text);
            for (int k = 0; k < s->n_images; k++) (void)strlen(s->images[k]);
            char buf[256];
            (void)tdm_dataset_where(d, i, buf, sizeof buf);
        }
        tdm_dataset_free(d);
    }
    unlink(path);
    return 0;
}
