/* libFuzzer target: tdm_model_config_parse must accept or refuse any byte string without
 * crashing, and an accepted config must satisfy the bounds config.h promises (so that
 * nothing downstream allocates from an absurd size).
 * fuzz-modules: model kernels prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tdm_model_config cfg;
    tdm_error err;
    if (tdm_model_config_parse((const char *)data, size, "fuzz/config.json", &cfg, &err) == 0) {
        const tdm_text_config *t = &cfg.text;
        const tdm_vision_config *v = &cfg.vision;
        if (t->num_layers < 1 || t->num_layers > TDM_CONFIG_MAX_LAYERS) abort();
        if (t->hidden_size < 1 || t->hidden_size > TDM_CONFIG_MAX_HIDDEN) abort();
        if (t->num_heads < 1 || t->num_kv_heads < 1 || t->num_heads % t->num_kv_heads) abort();
        if (t->vocab_size < 1 || t->vocab_size > TDM_CONFIG_MAX_VOCAB) abort();
        if (v->num_heads < 1 || v->hidden_size % v->num_heads) abort();
        if (v->n_deepstack < 0 || v->n_deepstack > TDM_MAX_DEEPSTACK) abort();
        for (int i = 0; i < v->n_deepstack; i++)
            if (v->deepstack_indexes[i] < 0 || v->deepstack_indexes[i] >= v->depth) abort();
        (void)tdm_vision_merge_dim(v);
        (void)tdm_vision_patch_dim(v);
    }
    return 0;
}
