/* tensorboard.c - TensorBoard event files (see tensorboard.h for the format). */
#include "train/tensorboard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"

uint32_t tdm_crc32c(const void *data, size_t n) {
    static uint32_t table[256];
    static int ready; /* idempotent: a race only computes the same table twice */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t tdm_tfrecord_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

struct tdm_tb_writer {
    FILE *f;
    char path[1200];
};

/* ---- protocol-buffer encoding (only what an Event needs) ---------------------------- */

typedef struct pb {
    unsigned char buf[512];
    size_t n;
} pb;

static void put_varint(pb *b, uint64_t v) {
    do {
        unsigned char byte = v & 0x7F;
        v >>= 7;
        b->buf[b->n++] = byte | (v ? 0x80 : 0);
    } while (v);
}
static void put_key(pb *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }
static void put_bytes(pb *b, int field, const void *p, size_t n) {
    put_key(b, field, 2);
    put_varint(b, n);
    memcpy(b->buf + b->n, p, n);
    b->n += n;
}
static void put_le(pb *b, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) b->buf[b->n++] = (unsigned char)(v >> (8 * i));
}
static void put_double(pb *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_key(b, field, 1);
    put_le(b, u, 8);
}
static void put_float(pb *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    put_key(b, field, 5);
    put_le(b, u, 4);
}

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int write_record(tdm_tb_writer *w, const pb *ev, tdm_error *err) {
    unsigned char head[12], tail[4];
    uint64_t len = ev->n;
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)(len >> (8 * i));
    uint32_t c = tdm_tfrecord_mask(tdm_crc32c(head, 8));
    for (int i = 0; i < 4; i++) head[8 + i] = (unsigned char)(c >> (8 * i));
    c = tdm_tfrecord_mask(tdm_crc32c(ev->buf, ev->n));
    for (int i = 0; i < 4; i++) tail[i] = (unsigned char)(c >> (8 * i));
    if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(ev->buf, 1, ev->n, w->f) != ev->n ||
        fwrite(tail, 1, sizeof tail, w->f) != sizeof tail || fflush(w->f) != 0)
        return tdm_errorf(err, "%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

tdm_tb_writer *tdm_tb_open(const char *dir, tdm_error *err) {
    if (tdm_mkdirs(dir, err) != 0) return NULL;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    tdm_tb_writer *w = tdm_xcalloc(1, sizeof *w);
    /* a second file in the same second (a quick resume) gets the next suffix */
    for (int k = 0; k < 1000 && !w->f; k++) {
        snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%.200s.%d.%d", dir, (long long)time(NULL),
                 host, (int)getpid(), k);
        w->f = fopen(w->path, "wbx");
        if (!w->f && errno != EEXIST) break;
    }
    if (!w->f) {
        tdm_errorf(err, "%s: cannot create a TensorBoard event file: %s", w->path, strerror(errno));
        free(w);
        return NULL;
    }
    pb ev = {.n = 0};
    put_double(&ev, 1, wall_time());
    put_key(&ev, 2, 0);
    put_varint(&ev, 0);
    put_bytes(&ev, 3, "brain.Event:2", strlen("brain.Event:2"));
    if (write_record(w, &ev, err) != 0) {
        tdm_tb_close(w);
        return NULL;
    }
    return w;
}

int tdm_tb_scalar(tdm_tb_writer *w, const char *tag, double value, int64_t step, tdm_error *err) {
    size_t n = strlen(tag);
    if (n > 256) return tdm_errorf(err, "TensorBoard tag '%.40s...': longer than 256 bytes", tag);
    pb val = {.n = 0}, sum = {.n = 0}, ev = {.n = 0};
    put_bytes(&val, 1, tag, n);
    put_float(&val, 2, (float)value);
    put_bytes(&sum, 1, val.buf, val.n);
    put_double(&ev, 1, wall_time());
    put_key(&ev, 2, 0);
    put_varint(&ev, (uint64_t)step);
    put_bytes(&ev, 5, sum.buf, sum.n);
    return write_record(w, &ev, err);
}

const char *tdm_tb_path(const tdm_tb_writer *w) { return w->path; }

void tdm_tb_close(tdm_tb_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    free(w);
}
