/* trainer_save.c - --save's checkpoints during training (trainer_internal.h): rank 0 writes, the
 * optimizer state gathered from the ranks' shards as it is written. */
#include "train/trainer_internal.h"

#include <stdio.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/log.h"
#include "distributed/agree.h"
#include "distributed/ddp.h"
#include "distributed/optimizer.h"
#include "distributed/optimizer_state.h"
#include "model/qwen3vl.h"
#include "train/checkpoint.h"
#include "train/feed.h"
#include "train/hf_export.h"
#include "train/scheduler.h"

/* trainer_state.json's contents: position, schedule in force, optimizer kind. */
static void checkpoint_state(trainer *t, int distributed, tdm_ckpt_state *st) {
    const tdm_train_args *a = t->a;
    *st = (tdm_ckpt_state){
        .iteration = t->iteration,
        .consumed_samples = t->consumed,
        .scheduler_num_steps = t->sched.num_steps,
        .lr = a->lr,
        .min_lr = a->min_lr,
        .seed = a->seed,
        .adam_step = tdm_ddp_opt_step_count(t->ddp),
        .dp = t->dp,
        .distributed_optimizer = distributed,
        .params_bf16 = a->bf16,
        .args_fingerprint = tdm_train_args_fingerprint(a),
    };
    snprintf(st->lr_decay_style, sizeof st->lr_decay_style, "%s", tdm_lr_style_name(t->sched.style));
    st->lr = t->sched.max_lr; /* the schedule in force (the checkpoint's under --use-checkpoint-...) */
    st->min_lr = t->sched.min_lr;
    st->lr_warmup_init = t->sched.init_lr;
    st->lr_warmup_steps = t->sched.warmup_steps;
    st->lr_decay_steps = t->sched.decay_steps;
    st->has_wd_schedule = 1;
    st->start_wd = t->sched.start_wd;
    st->end_wd = t->sched.end_wd;
    st->wd_incr_steps = t->sched.wd_incr_steps;
    snprintf(st->wd_incr_style, sizeof st->wd_incr_style, "%s", tdm_wd_style_name(t->sched.wd_style));
}

/* tdm_ckpt_save_spec.optim_state: the gather hands out each parameter's state in turn. */
static const float *gathered_state(void *ctx, int param, int which, tdm_error *err) {
    return tdm_ddp_state_gather_get(ctx, param, which, err);
}

/* Every rank learns from rank 0 whether the checkpoint was written. */
static int finish_save(trainer *t, int ok, uint64_t t0, tdm_error *err) {
    const tdm_train_args *a = t->a;
    /* bounded like the step's collectives: --distributed-timeout-minutes must cover a save */
    tdm_bcast_bounded(&ok, 1, MPI_INT, 0, t->comm, t->timeout_ns, "checkpoint save");
    if (!ok) {
        t->res->all_ranks_failed = 1;
        t->res->failed_rank = 0;
        if (t->rank != 0) tdm_errorf(err, "rank 0 failed to save the checkpoint");
        return -1;
    }
    tdm_log_info("saved checkpoint at iteration %7lld to %s (%.1f ms)", (long long)t->iteration, a->save,
                 (double)(tdm_now_ns() - t0) / 1e6);
    return 0;
}

/* Collective: rank 0 writes the checkpoint, the optimizer state gathered into parameter
 * shape one parameter at a time as it is written; every rank learns whether it worked. */
int tdm_train__save_checkpoint(trainer *t, tdm_error *err) {
    const tdm_train_args *a = t->a;
    tdm_ddp_wait_params(t->ddp);
    tdm_param_table *pt = tdm_model_params(t->model);
    int distributed = tdm_ddp_get_config(t->ddp)->use_distributed_optimizer;
    uint64_t t0 = tdm_now_ns();
    /* --no-save-optim: nothing to gather; without the distributed optimizer rank 0 has it all */
    int senders = a->no_save_optim ? 0 : distributed ? t->dp : 1;
    tdm_ddp_state_gather *g = tdm_ddp_state_gather_begin(t->ddp, pt, t->comm, senders, t->timeout_ns);
    if (t->rank != 0) return finish_save(t, 0, t0, err);
    tdm_ckpt_state st;
    checkpoint_state(t, distributed, &st);
    char pp_buf[2200], tok_buf[2200];
    struct stat sb;
    if (stat(a->tokenizer, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(tok_buf, sizeof tok_buf, "%s/tokenizer.json", a->tokenizer);
    else snprintf(tok_buf, sizeof tok_buf, "%s", a->tokenizer);
    tdm_strbuf tok_cfg, gen_cfg;
    tdm_sb_init(&tok_cfg);
    tdm_sb_init(&gen_cfg);
    const tdm_tokenizer *tok = tdm_feed_tokenizer(t->feed);
    tdm_hf_tokenizer_config(tok, t->cfg.text.max_position_embeddings, &tok_cfg);
    tdm_hf_generation_config(tok, &gen_cfg);
    tdm_ckpt_save_spec spec = {.config_json_path = t->config_json,
                               .preprocessor_json_path =
                                   tdm_feed_preprocessor_path(a->preprocessor, a->model, pp_buf, sizeof pp_buf),
                               .tokenizer_json_path = tok_buf,
                               .tokenizer_config_json = tok_cfg.data,
                               .generation_config_json = gen_cfg.data,
                               .params = pt,
                               .params_bf16 = a->bf16,
                               .optim_state = senders > 0 ? gathered_state : NULL,
                               .optim_ctx = g,
                               .state = &st};
    int ok = tdm_ckpt_save(a->save, &spec, t->res->saved_checkpoint, sizeof t->res->saved_checkpoint, err) == 0;
    tdm_sb_free(&tok_cfg);
    tdm_sb_free(&gen_cfg);
    tdm_ddp_state_gather_end(g); /* after a failed write: what the senders still have in flight */
    return finish_save(t, ok, t0, err);
}
