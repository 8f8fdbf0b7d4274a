/* embedding.c - table lookup and its scatter-add backward. */
#include "kernels/kernels.h"

#include <string.h>

void tdm_embedding_forward(float *out, const float *table, const int32_t *ids, int n, int d) {
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0) continue; /* an image position: the vision merger fills it */
        memcpy(out + (int64_t)i * d, table + (int64_t)ids[i] * d, sizeof(float) * (size_t)d);
    }
}

void tdm_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int n, int d) {
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0) continue;
        tdm_add_into(dtable + (int64_t)ids[i] * d, dout + (int64_t)i * d, d); /* vectorised: the same adds */
    }
}
