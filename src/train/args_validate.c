/* args_validate.c - what `tandem train`'s flags mean together: the values derived from others
 * (tdm_train_args_resolve) and the combinations refused, each with one sentence (tdm_train_args_validate). */
#include "train/args.h"

#include <string.h>

#include "core/error.h"
#include "model/qwen3vl.h"

void tdm_train_args_resolve(tdm_train_args *a, int dp) {
    if (a->global_batch_size == 0 && dp >= 1) a->global_batch_size = a->micro_batch_size * dp;
    /* Megatron's update_train_iters: sample-based training runs train_samples // global batch
     * iterations (validate refuses both flags given: this one was derived, or not) */
    if (a->train_samples > 0 && (a->train_iters == 0 || a->train_iters_from_samples) && a->global_batch_size > 0) {
        a->train_iters = a->train_samples / a->global_batch_size;
        a->train_iters_from_samples = 1;
    }
    if (a->train_iters == 0 && a->train_samples == 0) a->train_iters = 100;
}

/* Longer than most: one cross-flag rule after the other, each with its own sentence. */
int tdm_train_args_validate(const tdm_train_args *unresolved, int dp, tdm_error *err) {
    tdm_train_args resolved = *unresolved; /* the rules read the dp-dependent defaults */
    tdm_train_args_resolve(&resolved, dp);
    const tdm_train_args *a = &resolved;
    if (!a->model[0]) return tdm_errorf(err, "--model: required (a directory holding config.json)");
    if (!a->tokenizer[0]) return tdm_errorf(err, "--tokenizer: required (a tokenizer.json)");
    if (a->n_data == 0) return tdm_errorf(err, "--data: required (a dataset JSON file)");
    if (dp < 1) return tdm_errorf(err, "data-parallel size %d: expected at least 1", dp);
    int64_t per_step = (int64_t)a->micro_batch_size * dp;
    /* unset (0) is micro x dp once resolved: divisible */
    if (a->global_batch_size % per_step != 0)
        return tdm_errorf(err,
                          "--global-batch-size %d: must be divisible by --micro-batch-size x data-parallel size = "
                          "%d x %d = %lld",
                          a->global_batch_size, a->micro_batch_size, dp, (long long)per_step);
    if (a->overlap_param_gather && !a->use_distributed_optimizer)
        return tdm_errorf(err, "--overlap-param-gather: requires --use-distributed-optimizer");
    if (a->overlap_param_gather && !a->overlap_grad_reduce)
        return tdm_errorf(err, "--overlap-param-gather: requires --overlap-grad-reduce (as in Megatron)");
    if (a->ddp_bucket_size > 0 && a->ddp_num_buckets > 0)
        return tdm_errorf(err, "--ddp-bucket-size and --ddp-num-buckets: give at most one of them");
    if (a->min_lr > a->lr) return tdm_errorf(err, "--min-lr %g: must not exceed --lr %g", a->min_lr, a->lr);
    if (a->lr_warmup_init > a->lr)
        return tdm_errorf(err, "--lr-warmup-init %g: must not exceed --lr %g (the warm-up rises to --lr)",
                          a->lr_warmup_init, a->lr);
    if (a->lr_warmup_fraction >= 0 && (a->lr_warmup_iters > 0 || a->lr_warmup_samples > 0))
        return tdm_errorf(err, "--lr-warmup-fraction and --lr-warmup-%s: give at most one of them",
                          a->lr_warmup_iters > 0 ? "iters" : "samples");
    /* Megatron: iteration-based or sample-based training, each with its own schedule flags */
    if (a->train_samples > 0) {
        if (!a->train_iters_from_samples)
            return tdm_errorf(err, "--train-iters and --train-samples: give one of them (iteration-based or "
                                   "sample-based training)");
        if (a->lr_decay_iters > 0 || a->lr_warmup_iters > 0)
            return tdm_errorf(err, "--lr-%s-iters: with --train-samples the schedule is in samples (--lr-%s-samples)",
                              a->lr_decay_iters > 0 ? "decay" : "warmup", a->lr_decay_iters > 0 ? "decay" : "warmup");
        if (a->train_iters < 1)
            return tdm_errorf(err, "--train-samples %lld: fewer than one global batch of %d",
                              (long long)a->train_samples, a->global_batch_size);
        int64_t decay = a->lr_decay_samples > 0 ? a->lr_decay_samples : a->train_samples;
        if (a->lr_warmup_samples > 0 && a->lr_warmup_samples >= decay)
            return tdm_errorf(err,
                              "--lr-warmup-samples %lld: must be fewer than the decay span of %lld samples "
                              "(--lr-decay-samples, else --train-samples)",
                              (long long)a->lr_warmup_samples, (long long)decay);
    } else {
        if (a->lr_decay_samples > 0 || a->lr_warmup_samples > 0)
            return tdm_errorf(err,
                              "--lr-%s-samples: only with --train-samples (with --train-iters the schedule is in "
                              "iterations: --lr-%s-iters)",
                              a->lr_decay_samples > 0 ? "decay" : "warmup",
                              a->lr_decay_samples > 0 ? "decay" : "warmup");
        int64_t decay = a->lr_decay_iters > 0 ? a->lr_decay_iters : a->train_iters;
        if (a->lr_warmup_iters > 0 && a->lr_warmup_iters >= decay) /* Megatron asserts warmup < decay */
            return tdm_errorf(err,
                              "--lr-warmup-iters %lld: must be shorter than the decay span of %lld iterations "
                              "(--lr-decay-iters, else --train-iters)",
                              (long long)a->lr_warmup_iters, (long long)decay);
    }
    /* WSD's final decay, in the unit of the schedule (Megatron's assertion, as a sentence) */
    if (a->train_samples > 0 ? a->lr_wsd_decay_iters > 0 : a->lr_wsd_decay_samples > 0)
        return tdm_errorf(err, a->train_samples > 0 ? "--lr-wsd-decay-iters: with --train-samples the schedule is in "
                                                      "samples (--lr-wsd-decay-samples)"
                                                    : "--lr-wsd-decay-samples: only with --train-samples (with "
                                                      "--train-iters: --lr-wsd-decay-iters)");
    if (!strcmp(a->lr_decay_style, "WSD") && a->lr_wsd_decay_iters <= 0 && a->lr_wsd_decay_samples <= 0)
        return tdm_errorf(err, "--lr-decay-style WSD: requires the length of its final decay (--lr-wsd-decay-%s N)",
                          a->train_samples > 0 ? "samples" : "iters");
    /* Megatron's weight-decay increment: both ends with linear / cosine, neither with constant */
    const int wd_const = !strcmp(a->weight_decay_incr_style, "constant");
    if (wd_const && (a->start_weight_decay >= 0 || a->end_weight_decay >= 0))
        return tdm_errorf(err,
                          "--%s-weight-decay: only with --weight-decay-incr-style linear or cosine (constant "
                          "uses --weight-decay)",
                          a->start_weight_decay >= 0 ? "start" : "end");
    if (!wd_const && (a->start_weight_decay < 0 || a->end_weight_decay < 0))
        return tdm_errorf(err, "--weight-decay-incr-style %s: requires --start-weight-decay and --end-weight-decay",
                          a->weight_decay_incr_style);
    if (!wd_const && a->end_weight_decay < a->start_weight_decay)
        return tdm_errorf(err, "--end-weight-decay %g: below --start-weight-decay %g (the weight decay only increases)",
                          a->end_weight_decay, a->start_weight_decay);
    if (a->lr_warmup_fraction >= 1)
        return tdm_errorf(err, "--lr-warmup-fraction %g: must be below 1 (the warmup must end before the decay span)",
                          a->lr_warmup_fraction);
    if (a->override_opt_param_scheduler && a->use_checkpoint_opt_param_scheduler)
        return tdm_errorf(err, "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler: give at most "
                               "one of them");
    if (a->use_checkpoint_opt_param_scheduler && (!a->load[0] || a->finetune))
        return tdm_errorf(err, "--use-checkpoint-opt_param-scheduler: requires --load DIR (without --finetune)");
    if (a->save_interval > 0 && !a->save[0]) return tdm_errorf(err, "--save-interval: requires --save DIR");
    if ((a->finetune || a->no_load_optim) && !a->load[0])
        return tdm_errorf(err, "--finetune / --no-load-optim: require --load DIR");
    if (a->pretrained[0] && a->hf_weights[0])
        return tdm_errorf(err, "--pretrained and --hf-weights: give at most one of them");
    if (a->inject_nan_rank >= dp)
        return tdm_errorf(err, "--inject-nan-at: rank %d does not exist in a job of %d ranks", a->inject_nan_rank, dp);
    if (a->inject_nan_iter > a->train_iters)
        return tdm_errorf(err,
                          "--inject-nan-at %lld: after the last iteration (--train-iters %lld), it would never fire",
                          (long long)a->inject_nan_iter, (long long)a->train_iters);
    /* Megatron's recompute rules, before anything is loaded (ab's sides too); the layer count once the
     * config is read (trainer) */
    tdm_recompute rc;
    if (tdm_recompute_from_flags(a->recompute_granularity, a->recompute_method, a->recompute_num_layers, NULL, &rc,
                                 err) != 0)
        return -1;
    if (a->freeze_vision && a->freeze_projector && a->freeze_llm && a->freeze_lm_head)
        return tdm_errorf(err, "freeze flags: every part is frozen, nothing would train");
    return 0;
}
