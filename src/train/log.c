/* log.c - iteration line, timers, metrics and progress text (see log.h). */
#include "train/log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"

void tdm_format_iter_line(tdm_strbuf *sb, const struct timespec *now, const tdm_iter_line *l) {
    struct tm tm;
    time_t secs = now->tv_sec;
    localtime_r(&secs, &tm);
    char stamp[64];
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    tdm_sb_printf(sb, "[%s.%06ld]", stamp, (long)(now->tv_nsec / 1000));
    tdm_sb_printf(sb, " iteration %8lld/%8lld |", (long long)l->iteration, (long long)l->train_iters);
    tdm_sb_printf(sb, " consumed samples: %12lld |", (long long)l->consumed_samples);
    tdm_sb_printf(sb, " elapsed time per iteration (ms): %.1f |", l->elapsed_ms_per_iter);
    /* Megatron prints one decimal; CPU ranks run at hundredths of a TFLOP/s */
    if (l->has_throughput) tdm_sb_printf(sb, " throughput per GPU (TFLOP/s/GPU): %.4f |", l->throughput);
    tdm_sb_printf(sb, " learning rate: %.6E |", l->lr);
    tdm_sb_printf(sb, " global batch size: %5d |", l->global_batch_size);
    tdm_sb_printf(sb, " lm loss: %.6E |", l->loss);
    tdm_sb_printf(sb, " loss scale: %.1f |", l->loss_scale);
    tdm_sb_printf(sb, " grad norm: %.3f |", l->grad_norm);
    if (l->has_num_zeros) tdm_sb_printf(sb, " num zeros: %.1f |", l->num_zeros);
    if (l->has_params_norm) tdm_sb_printf(sb, " params norm: %.3f |", l->params_norm);
    tdm_sb_printf(sb, " number of skipped iterations: %3d |", l->skipped);
    tdm_sb_printf(sb, " number of nan iterations: %3d |", l->nan);
}

void tdm_format_timers(tdm_strbuf *sb, int n, const char *const *names, const double *min_ms, const double *max_ms) {
    tdm_sb_puts(sb, "(min, max) time across ranks (ms):");
    for (int i = 0; i < n; i++) {
        /* Python: (name + ' ').ljust(48, '.') */
        tdm_sb_printf(sb, "\n    %s ", names[i]);
        for (int k = (int)strlen(names[i]) + 1; k < 48; k++) tdm_sb_putc(sb, '.');
        tdm_sb_printf(sb, ": (%.2f, %.2f)", min_ms[i], max_ms[i]);
    }
}

/* JSON has no NaN/Infinity: write them as strings so the file stays valid JSON. */
static void json_num(tdm_strbuf *sb, const char *key, double v, const char *fmt) {
    tdm_sb_printf(sb, ",\"%s\":", key);
    if (v != v) tdm_sb_puts(sb, "\"NaN\"");
    else if (v > 1e308 || v < -1e308) tdm_sb_puts(sb, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else tdm_sb_printf(sb, fmt, v);
}

void tdm_format_metrics_json(tdm_strbuf *sb, const tdm_step_record *r, int with_fingerprint) {
    tdm_sb_printf(sb, "{\"iteration\":%lld,\"consumed_samples\":%lld", (long long)r->iteration,
                  (long long)r->consumed_samples);
    json_num(sb, "lr", r->lr, "%.17g");
    json_num(sb, "weight_decay", r->weight_decay, "%.17g");
    tdm_sb_printf(sb, ",\"global_batch_size\":%d,\"tokens\":%lld", r->global_batch_size, (long long)r->tokens);
    json_num(sb, "loss", r->loss, "%.17g");
    json_num(sb, "grad_norm", r->grad_norm, "%.17g");
    tdm_sb_printf(sb, ",\"skipped\":%d,\"nan\":%d", r->skipped, r->nan);
    json_num(sb, "model_flops", r->model_flops, "%.17g");
    if (r->has_params_norm) json_num(sb, "params_norm", r->params_norm, "%.17g");
    if (r->has_num_zeros) json_num(sb, "num_zeros", r->num_zeros, "%.17g");
    json_num(sb, "step_ms", r->step_ms, "%.3f");
    json_num(sb, "data_wait_ms", r->data_wait_ms, "%.3f");
    json_num(sb, "fwd_bwd_ms", r->fwd_bwd_ms, "%.3f");
    json_num(sb, "grad_sync_ms", r->grad_sync_ms, "%.3f");
    json_num(sb, "optimizer_ms", r->optimizer_ms, "%.3f");
    json_num(sb, "param_gather_ms", r->param_gather_ms, "%.3f");
    json_num(sb, "comm_thread_cpu_ms", r->comm_thread_cpu_ms, "%.3f");
    json_num(sb, "compute_cpu_ms", r->compute_cpu_ms, "%.3f");
    json_num(sb, "cpu_ms", r->cpu_ms, "%.3f");
    if (with_fingerprint) tdm_sb_printf(sb, ",\"fingerprint\":\"%016llx\"", (unsigned long long)r->fingerprint);
    tdm_sb_putc(sb, '}');
}

struct tdm_metrics_writer {
    int fd;
    char path[4096];
    tdm_strbuf sb;
};

/* A file whose last line has no newline (a write cut short by a full disk, a killed run) loses that
 * line, so that what is appended starts a line of its own. Returns the size kept, -1 on an error. */
static off_t drop_torn_tail(int fd, const char *path, off_t size, tdm_error *err) {
    char buf[4096];
    off_t end = size;
    while (end > 0) {
        size_t n = end < (off_t)sizeof buf ? (size_t)end : sizeof buf;
        ssize_t got = pread(fd, buf, n, end - (off_t)n);
        if (got != (ssize_t)n) return tdm_errorf(err, "%s: cannot read: %s", path, strerror(errno));
        if (end == size && buf[n - 1] == '\n') return size; /* whole lines */
        const char *nl = memrchr(buf, '\n', n);
        if (nl) {
            end = end - (off_t)n + (off_t)(nl - buf) + 1;
            break;
        }
        end -= (off_t)n;
    }
    if (ftruncate(fd, end) != 0) return tdm_errorf(err, "%s: cannot truncate: %s", path, strerror(errno));
    fprintf(stderr, "warning: %s: removed a torn last line (%lld bytes without a newline)\n", path,
            (long long)(size - end));
    return end;
}

/* One whole line with one write(); a short or failed write is cut back off, so every line stays whole. */
static int write_line(tdm_metrics_writer *w, tdm_error *err) {
    struct stat st;
    if (fstat(w->fd, &st) != 0) return tdm_errorf(err, "%s: cannot stat: %s", w->path, strerror(errno));
    ssize_t n = write(w->fd, w->sb.data, w->sb.len);
    if (n == (ssize_t)w->sb.len) return 0;
    int e = n < 0 ? errno : ENOSPC;
    if (ftruncate(w->fd, st.st_size) != 0) { /* nothing more to do: the error below is reported */
    }
    return tdm_errorf(err, "%s: write failed: %s", w->path, strerror(e));
}

tdm_metrics_writer *tdm_metrics_open(const char *dir, const char *header, tdm_error *err) {
    if (tdm_mkdirs(dir, err) != 0) return NULL;
    tdm_metrics_writer *w = tdm_xcalloc(1, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s/metrics.jsonl", dir);
    w->fd = open(w->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    struct stat st;
    off_t kept = 0;
    if (w->fd < 0 || fstat(w->fd, &st) != 0) {
        tdm_errorf(err, "%s: cannot open for appending: %s", w->path, strerror(errno));
        if (w->fd >= 0) close(w->fd);
        free(w);
        return NULL;
    }
    tdm_sb_init(&w->sb);
    if (st.st_size > 0 && (kept = drop_torn_tail(w->fd, w->path, st.st_size, err)) < 0) {
        tdm_metrics_close(w);
        return NULL;
    }
    if (kept > 0 && header) { /* another run's lines come first: a record that separates this run's */
        tdm_sb_puts(&w->sb, header);
        tdm_sb_putc(&w->sb, '\n');
        if (write_line(w, err) != 0) {
            tdm_metrics_close(w);
            return NULL;
        }
    }
    return w;
}

int tdm_metrics_write(tdm_metrics_writer *w, const tdm_step_record *r, int with_fingerprint, tdm_error *err) {
    tdm_sb_clear(&w->sb);
    tdm_format_metrics_json(&w->sb, r, with_fingerprint);
    tdm_sb_putc(&w->sb, '\n');
    return write_line(w, err); /* unbuffered: a killed run keeps every step it finished */
}

void tdm_metrics_close(tdm_metrics_writer *w) {
    if (!w) return;
    close(w->fd);
    tdm_sb_free(&w->sb);
    free(w);
}

void tdm_format_progress(tdm_strbuf *sb, int64_t done, int64_t total, double ms_per_iter) {
    double pct = total > 0 ? 100.0 * (double)done / (double)total : 100.0;
    long long eta = (long long)((double)(total - done) * ms_per_iter / 1000.0 + 0.5);
    if (eta < 0) eta = 0;
    tdm_sb_printf(sb, "progress: iteration %lld/%lld (%.1f%%), %.1f ms/iteration, ETA %lld:%02lld:%02lld",
                  (long long)done, (long long)total, pct, ms_per_iter, eta / 3600, (eta / 60) % 60, eta % 60);
}

void tdm_step_window_push(tdm_step_window *w, double ms) {
    w->ms[w->next] = ms;
    w->next = (w->next + 1) % TDM_STEP_WINDOW;
    if (w->n < TDM_STEP_WINDOW) w->n++;
}

double tdm_step_window_mean(const tdm_step_window *w) {
    double s = 0;
    for (int i = 0; i < w->n; i++) s += w->ms[i];
    return w->n ? s / w->n : 0.0;
}

void tdm_format_validation(tdm_strbuf *sb, const char *prefix, double loss) {
    char line[512];
    int n = snprintf(line, sizeof line, " validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ", prefix,
                     loss, exp(loss < 20 ? loss : 20));
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
    for (int r = 0; r < 3; r++) {
        if (r == 1) tdm_sb_puts(sb, line);
        else
            for (int i = 0; i <= n; i++) tdm_sb_putc(sb, '-');
        tdm_sb_putc(sb, '\n');
    }
}

void tdm_format_validation_json(tdm_strbuf *sb, int64_t iteration, int64_t consumed_samples, double loss,
                                int64_t tokens, int64_t samples, double ms) {
    tdm_sb_printf(sb,
                  "{\"iteration\":%lld,\"consumed_samples\":%lld,\"loss\":%.17g,\"ppl\":%.17g,\"tokens\":%lld,"
                  "\"samples\":%lld,\"ms\":%.3f}",
                  (long long)iteration, (long long)consumed_samples, loss, exp(loss < 20 ? loss : 20),
                  (long long)tokens, (long long)samples, ms);
}
