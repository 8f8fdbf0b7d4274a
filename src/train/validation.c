/* validation.c - evaluations of the validation set during training (trainer_internal.h). */
#include "train/trainer_internal.h"

#include <math.h>
#include <stdio.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "distributed/ddp.h"
#include "model/qwen3vl.h"
#include "train/feed.h"
#include "train/log.h"

/* Megatron's evaluate_and_print_results: --eval-iters global batches of the validation set,
 * forward only, the loss summed over every rank's tokens / their count (the training loss's
 * definition), printed as Megatron's block and appended to <run-dir>/valid.jsonl.
 * Collective. The validation loader continues where the last evaluation stopped; a resumed
 * run starts it where evaluations at every --eval-interval before would have left it, as
 * Megatron does. Nothing is trained: the weights, the optimizer and the training data order
 * are untouched, so a run with validation trains bitwise as one without. */
int tdm_train__evaluate(trainer *t, const char *prefix, tdm_error *err) {
    const tdm_train_args *a = t->a;
    uint64_t t0 = tdm_now_ns();
    tdm_ddp_wait_params(t->ddp); /* --overlap-param-gather: the weights of the last step */
    double sums[2] = {0, 0};
    int ok = 1;
    int64_t done = 0;
    t->eval_stopped = 0;
    for (int64_t i = 0; i < a->eval_iters; i++) {
        /* at every batch boundary the ranks agree on a failure or a stop (SIGTERM/SIGINT, the stop file):
         * a stop ends the validation here, and the loop saves and exits as after a step */
        const int asked = tdm_train__stop_asked(t);
        double flags[3] = {ok ? 0.0 : 1.0, asked == TDM_STOP_SIGNAL ? 1.0 : 0.0, asked == TDM_STOP_FILE ? 1.0 : 0.0};
        tdm_error e;
        if (tdm_ddp_sum_across_ranks(t->ddp, flags, 3, ok ? err : &e) != 0) return -1;
        if (flags[0] > 0) break;
        if (flags[1] > 0 || flags[2] > 0) {
            t->eval_stopped = flags[1] > 0 ? TDM_STOP_SIGNAL : TDM_STOP_FILE;
            break;
        }
        for (int k = 0; ok && k < t->micro_per_step; k++) {
            const tdm_batch *b;
            uint64_t waited;
            tdm_fb_result r;
            ok = tdm_feed_next(t->valid_feed, &b, &waited, err) == 0 &&
                 tdm_model_forward(t->model, b, NULL, 0, NULL, &r, err) == 0;
            if (ok) sums[0] += r.loss_sum, sums[1] += (double)r.n_tokens;
        }
        if (ok) done++;
    }
    if (!ok) tdm_error_prefix(err, "validation");
    if (tdm_train__agree(t, ok, err) != 0) return -1;
    if (t->eval_stopped) {
        char why[TDM_ARGS_PATH_MAX + 32];
        tdm_log_info("validation at %s stopped by %s after %lld of %lld batches (no result reported)", prefix,
                     tdm_train__stop_reason(t, t->eval_stopped, why, sizeof why), (long long)done,
                     (long long)a->eval_iters);
        return 0;
    }
    if (tdm_ddp_sum_across_ranks(t->ddp, sums, 2, err) != 0) return -1;
    if (sums[1] <= 0) { /* every rank sees the same sums */
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        return tdm_errorf(err, "validation at %s: no token to score (every label of %lld global batches is -100)",
                          prefix, (long long)a->eval_iters);
    }
    const double loss = sums[0] / sums[1], ms = tdm_train__ms_since(t0);
    if (t->rank == 0) {
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        tdm_format_validation(&sb, prefix, loss);
        fputs(sb.data, stdout);
        fflush(stdout);
        const char *tags[2] = {"lm loss validation", "lm loss validation ppl"};
        double v[2] = {loss, exp(loss < 20 ? loss : 20)};
        tdm_train__tb_scalars(t, a->log_validation_ppl_to_tensorboard ? 2 : 1, tags, v, t->iteration);
        if (t->valid_log) {
            tdm_sb_clear(&sb);
            tdm_format_validation_json(&sb, t->iteration, t->consumed, loss, (int64_t)sums[1],
                                       a->eval_iters * a->global_batch_size, ms);
            tdm_sb_putc(&sb, '\n');
            if (fwrite(sb.data, 1, sb.len, t->valid_log) != sb.len || fflush(t->valid_log) != 0) {
                tdm_log_warn("%s/valid.jsonl: write failed (validation results stop here)", a->run_dir);
                fclose(t->valid_log);
                t->valid_log = NULL;
            }
        }
        tdm_sb_free(&sb);
    }
    return 0;
}
