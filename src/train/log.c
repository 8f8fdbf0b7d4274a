/* log.c - iteration line, timers, metrics and progress text (see log.h). */
#include "train/log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    FILE *f;
    char path[4096];
    tdm_strbuf sb;
};

tdm_metrics_writer *tdm_metrics_open(const char *dir, tdm_error *err) {
    if (tdm_mkdirs(dir, err) != 0) return NULL;
    tdm_metrics_writer *w = tdm_xcalloc(1, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s/metrics.jsonl", dir);
    w->f = fopen(w->path, "a");
    if (!w->f) {
        tdm_errorf(err, "%s: cannot open for appending: %s", w->path, strerror(errno));
        free(w);
        return NULL;
    }
    tdm_sb_init(&w->sb);
    return w;
}

int tdm_metrics_write(tdm_metrics_writer *w, const tdm_step_record *r, int with_fingerprint, tdm_error *err) {
    tdm_sb_clear(&w->sb);
    tdm_format_metrics_json(&w->sb, r, with_fingerprint);
    tdm_sb_putc(&w->sb, '\n');
    /* flushed per line: a killed run keeps every step it finished */
    if (fwrite(w->sb.data, 1, w->sb.len, w->f) != w->sb.len || fflush(w->f) != 0)
        return tdm_errorf(err, "%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

void tdm_metrics_close(tdm_metrics_writer *w) {
    if (!w) return;
    fclose(w->f);
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
    tdm_sb_printf(sb, "{\"iteration\":%lld,\"consumed_samples\":%lld,\"loss\":%.17g,\"ppl\":%.17g,\"tokens\":%lld,"
                      "\"samples\":%lld,\"ms\":%.3f}",
                  (long long)iteration, (long long)consumed_samples, loss, exp(loss < 20 ? loss : 20), (long long)tokens,
                  (long long)samples, ms);
}
