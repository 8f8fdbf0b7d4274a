/* libFuzzer target: the safetensors reader on arbitrary bytes, opened as a single file and
 * as a sharded checkpoint (an index over two small valid shards). An opened checkpoint must
 * be walkable and its tensors readable as fp32 (or
 * refused with an error) without reading outside the file.
 *
 * Input layout: the first byte chooses the mode. Even: the rest is one .safetensors file.
 * Odd: the rest is a model.safetensors.index.json beside two fixed valid shards,
 * "a.safetensors" (tensor "x") and "b.safetensors" (tensor "y").
 * fuzz-modules: model kernels prof core */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"

static char dir[64];

static void write_bytes(const char *name, const uint8_t *data, size_t size) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
}

/* A valid one-tensor file: `tensor` F32 [2] = {1, 2}. */
static void write_valid_shard(const char *file, const char *tensor) {
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", tensor);
    uint8_t buf[256];
    uint64_t n = strlen(hdr);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, hdr, n);
    float v[2] = {1, 2};
    memcpy(buf + 8 + n, v, sizeof v);
    write_bytes(file, buf, 8 + n + sizeof v);
}

static void walk(const char *path) {
    tdm_error err;
    tdm_safetensors *st = tdm_safetensors_open(path, &err);
    if (!st) return;
    int n = tdm_safetensors_count(st);
    for (int i = 0; i < n; i++) {
        const tdm_st_tensor *t = tdm_safetensors_at(st, i);
        if (tdm_safetensors_find(st, t->name) != t) abort();
        (void)tdm_safetensors_file(st, t);
        if (t->numel >= 0 && t->numel <= 4096) {
            float *dst = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
            (void)tdm_safetensors_read_f32(st, t->name, dst, t->numel, &err);
            free(dst);
        }
    }
    (void)tdm_safetensors_metadata(st, "format");
    tdm_safetensors_close(st);
}

static void remove_dir(void) {
    static const char *names[] = {"a.safetensors", "b.safetensors", "one.safetensors", "model.safetensors.index.json"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/tdm-fuzz-st-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    write_valid_shard("a.safetensors", "x");
    write_valid_shard("b.safetensors", "y");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[128];
    if (size == 0) return 0;
    if ((data[0] & 1) == 0) {
        write_bytes("one.safetensors", data + 1, size - 1);
        snprintf(path, sizeof path, "%s/one.safetensors", dir);
    } else {
        write_bytes("model.safetensors.index.json", data + 1, size - 1);
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    }
    walk(path);
    return 0;
}
