/* test_args.c - tandem train's flag parser: values, errors, suggestions, config file precedence, validation,
 * the Megatron arguments block. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "distributed/config.h"
#include "harness.h"
#include "train/args.h"
#include "train/hosts.h"

static int parse(tdm_train_args *a, const char *flags, tdm_error *err) {
    tdm_train_args_defaults(a);
    return tdm_train_args_parse_string(a, flags, err);
}

static void test_defaults_are_megatrons(void) {
    tdm_train_args a;
    tdm_train_args_defaults(&a);
    CHECK(a.adam_beta1 == 0.9 && a.adam_beta2 == 0.999 && a.adam_eps == 1e-8, "adam %g %g %g", a.adam_beta1,
          a.adam_beta2, a.adam_eps);
    CHECK(a.weight_decay == 0.01, "wd %g", a.weight_decay);
    CHECK(a.clip_grad == 1.0, "clip %g", a.clip_grad);
    CHECK(!strcmp(a.lr_decay_style, "linear"), "%s", a.lr_decay_style);
    CHECK(a.check_for_nan_in_grad == 1, "nan check on by default");
    CHECK(a.lr_warmup_fraction < 0, "warmup fraction unset");
    CHECK(!strcmp(a.comm_progress, "thread"), "%s", a.comm_progress);
    CHECK(a.comm_thread_nice == TDM_DDP_COMM_THREAD_NICE, "comm thread nice %d", a.comm_thread_nice);
}

/* Megatron: without --global-batch-size, one micro-batch per rank per step (micro x dp), no accumulation */
static void test_global_batch_defaults_to_micro_times_dp(void) {
    tdm_train_args a;
    tdm_error err = {{0}};
    CHECK(parse(&a, "--model m --tokenizer t --data d --micro-batch-size 3", &err) == 0, "%s", err.msg);
    CHECK(a.global_batch_size == 0, "unset before the dp size is known: %d", a.global_batch_size);
    tdm_train_args_resolve(&a, 2);
    CHECK(a.global_batch_size == 6, "3 x 2 ranks: %d", a.global_batch_size);
    CHECK(tdm_train_args_validate(&a, 2, &err) == 0, "%s", err.msg);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_train_args_format_block(&a, NULL, 0, &sb);
    /* Megatron's layout: 48 - len(name) dots */
    CHECK(strstr(sb.data, "  global_batch_size ............................... 6\n") != NULL, "%s", sb.data);
    tdm_sb_free(&sb);
    CHECK(parse(&a, "--model m --tokenizer t --data d --micro-batch-size 3 --global-batch-size 12", &err) == 0, "%s",
          err.msg);
    tdm_train_args_resolve(&a, 2);
    CHECK(a.global_batch_size == 12, "explicit value kept: %d", a.global_batch_size);
    CHECK(parse(&a, "--global-batch-size 0", &err) != 0 && strstr(err.msg, "out of range"), "%s", err.msg);
}

static void test_values_both_spellings(void) {
    tdm_train_args a;
    tdm_error err = {{0}};
    int rc = parse(&a,
                   "--model m --tokenizer t.json --data a.json --data=b.json --micro-batch-size 2 "
                   "--global-batch-size=16 --lr 1e-3 --min-lr=1e-5 --lr-decay-style cosine --train-iters 1e3 "
                   "--overlap-grad-reduce --use-distributed-optimizer=true --no-check-for-nan-in-grad "
                   "--inject-nan-at 7:1 --seed 42 --ddp-bucket-size 1000",
                   &err);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(a.n_data == 2 && !strcmp(a.data[1], "b.json"), "n_data %d", a.n_data);
    CHECK(a.micro_batch_size == 2 && a.global_batch_size == 16, "%d %d", a.micro_batch_size, a.global_batch_size);
    CHECK(a.lr == 1e-3 && a.min_lr == 1e-5, "%g %g", a.lr, a.min_lr);
    CHECK(a.train_iters == 1000, "%lld", (long long)a.train_iters);
    CHECK(a.overlap_grad_reduce == 1 && a.use_distributed_optimizer == 1, "switches");
    CHECK(a.check_for_nan_in_grad == 0, "negative switch");
    CHECK(a.inject_nan_iter == 7 && a.inject_nan_rank == 1, "%lld %d", (long long)a.inject_nan_iter, a.inject_nan_rank);
    CHECK(a.seed == 42 && a.ddp_bucket_size == 1000, "seed");
    CHECK(tdm_train_args_validate(&a, 2, &err) == 0, "%s", err.msg);
}

static void test_errors_are_one_clear_sentence(void) {
    tdm_train_args a;
    tdm_error err = {{0}};
    CHECK(parse(&a, "--micro-batch-sise 2", &err) != 0, "unknown flag accepted");
    CHECK(strstr(err.msg, "did you mean '--micro-batch-size'") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--overlap_grad_reduse", &err) != 0, "unknown flag accepted");
    CHECK(strstr(err.msg, "'--overlap-grad-reduce'") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--zzzzzzzzzzzzzzzzz", &err) != 0 && strstr(err.msg, "did you mean") == NULL, "%s", err.msg);
    /* Megatron flags tandem does not take get their reason; MindSpeed-MM's and Megatron's other names work */
    CHECK(parse(&a, "--fp16", &err) != 0 && strstr(err.msg, "--fp16: not a tandem flag; tandem trains in float32"),
          "%s", err.msg);
    CHECK(parse(&a, "--bf16 --accumulate-allreduce-grads-in-fp32", &err) == 0 && a.bf16 == 1, "%s", err.msg);
    /* Megatron flags that ask for what tandem does anyway: accepted at tandem's value, refused at another */
    CHECK(parse(&a,
                "--tensor-model-parallel-size 1 --pipeline-model-parallel-size=1 --use-flash-attn "
                "--hidden-dropout 0.0 --attention-dropout 0 --no-gradient-accumulation-fusion --lr 2e-4",
                &err) == 0 &&
              a.lr == 2e-4,
          "%s", err.msg);
    CHECK(parse(&a, "--tensor-model-parallel-size 2", &err) != 0 && strstr(err.msg, "data parallelism only; only 1"),
          "%s", err.msg);
    CHECK(parse(&a, "--hidden-dropout 0.1", &err) != 0 && strstr(err.msg, "without dropout; only 0"), "%s", err.msg);
    CHECK(parse(&a, "--use-flash-attn=false", &err) != 0 && strstr(err.msg, "no other way"), "%s", err.msg);
    /* the user guide says why it is not a flag; it was 'did you mean --tensorboard-dir?' */
    CHECK(parse(&a, "--tensorboard-queue-size 1", &err) != 0 &&
              strstr(err.msg, "--tensorboard-queue-size: not a tandem flag; every TensorBoard event is flushed"),
          "%s", err.msg);
    /* the practice's launch script (MindSpeed-MM's Qwen3-VL) and Megatron's logging flags */
    CHECK(parse(&a,
                "--trust-remote-code --calculate-per-token-loss --use-fused-rotary-pos-emb --init-method-std 0.02 "
                "--no-create-attention-mask-in-dataloader --log-throughput --log-params-norm "
                "--log-num-zeros-in-grad --exit-duration-in-mins 230",
                &err) == 0 &&
              a.log_throughput && a.log_params_norm && a.log_num_zeros_in_grad && a.exit_duration_in_mins == 230,
          "%s", err.msg);
    CHECK(parse(&a, "--init-method-std 0.01", &err) != 0 && strstr(err.msg, "std 0.02") && strstr(err.msg, "only 0.02"),
          "%s", err.msg);
    CHECK(parse(&a, "--distributed-backend nccl", &err) != 0 && strstr(err.msg, "MPI (launch it with mpirun)"), "%s",
          err.msg);
    CHECK(parse(&a, "--reuse-fp32-param", &err) != 0 && strstr(err.msg, "apart from the 16-bit weights"), "%s",
          err.msg);
    CHECK(parse(&a, "--exit-duration-in-mins -1", &err) != 0 && strstr(err.msg, "out of range"), "%s", err.msg);
    CHECK(parse(&a, "--mm-tool tools.json --recompute-activations", &err) == 0 &&
              !strcmp(a.profile_config, "tools.json") && !strcmp(a.recompute_granularity, "selective"),
          "aliases: %s '%s' '%s'", err.msg, a.profile_config, a.recompute_granularity);
    CHECK(parse(&a, "--recompute-activations=full", &err) != 0 && strstr(err.msg, "takes no value"), "%s", err.msg);
    CHECK(parse(&a, "--lr", &err) != 0 && strstr(err.msg, "--lr: expected a value") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--lr abc", &err) != 0 && strstr(err.msg, "expected a number, got 'abc'") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--micro-batch-size 0", &err) != 0 && strstr(err.msg, "out of range") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--comm-thread-nice 20", &err) != 0 && strstr(err.msg, "out of range") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--comm-thread-nice 0", &err) == 0 && a.comm_thread_nice == 0, "%s", err.msg);
    /* Megatron's spelling of the NaN switch, and the timeout Megatron also has */
    CHECK(parse(&a, "--no-check-for-nan-in-loss-and-grad", &err) == 0 && a.check_for_nan_in_grad == 0, "%s", err.msg);
    CHECK(parse(&a, "", &err) == 0 && a.distributed_timeout_minutes == TDM_DDP_TIMEOUT_MINUTES, "timeout %g",
          a.distributed_timeout_minutes);
    CHECK(parse(&a, "--distributed-timeout-minutes 0.5", &err) == 0 && a.distributed_timeout_minutes == 0.5, "%s",
          err.msg);
    CHECK(parse(&a, "--distributed-timeout-minutes -1", &err) != 0 && strstr(err.msg, "out of range"), "%s", err.msg);
    CHECK(parse(&a, "--micro-batch-size 2.5", &err) != 0 && strstr(err.msg, "expected an integer") != NULL, "%s",
          err.msg);
    CHECK(parse(&a, "--lr-decay-style cosin", &err) != 0 && strstr(err.msg, "expected one of") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--save --lr 1", &err) != 0 && strstr(err.msg, "got the flag '--lr'") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--lr nan", &err) != 0, "nan accepted");
    CHECK(parse(&a, "--inject-nan-at x", &err) != 0, "bad inject accepted");
    /* integers: decimal or an integral exponent form, the same for every integer flag; never hex */
    CHECK(parse(&a, "--micro-batch-size 0x10", &err) != 0 && strstr(err.msg, "0x10"), "hex accepted");
    CHECK(parse(&a, "--seed 0x10", &err) != 0, "hex seed accepted");
    CHECK(parse(&a, "--seed 1e3", &err) == 0 && a.seed == 1000, "--seed 1e3: %s", err.msg);
    CHECK(parse(&a, "--train-iters 1e3", &err) == 0 && a.train_iters == 1000, "--train-iters 1e3");
    CHECK(parse(&a, "--seed 1.5", &err) != 0 && parse(&a, "--train-iters 2.5", &err) != 0, "fractions accepted");
    CHECK(parse(&a, "lr 1", &err) != 0 && strstr(err.msg, "flags start with --") != NULL, "%s", err.msg);
    CHECK(parse(&a, "--lr '1e-3", &err) != 0 && strstr(err.msg, "unterminated quote") != NULL, "%s", err.msg);
}

static void test_validation(void) {
    tdm_train_args a;
    tdm_error err = {{0}};
    const char *base = "--model m --tokenizer t --data d ";
    char flags[512];
    snprintf(flags, sizeof flags, "%s--micro-batch-size 2 --global-batch-size 6", base);
    CHECK(parse(&a, flags, &err) == 0, "%s", err.msg);
    CHECK(tdm_train_args_validate(&a, 1, &err) == 0, "%s", err.msg);
    CHECK(tdm_train_args_validate(&a, 2, &err) != 0, "6 %% (2 x 2) accepted");
    CHECK(strstr(err.msg, "divisible by --micro-batch-size x data-parallel size = 2 x 2 = 4") != NULL, "%s", err.msg);

    snprintf(flags, sizeof flags, "%s--overlap-param-gather --overlap-grad-reduce", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) != 0 && strstr(err.msg, "--use-distributed-optimizer"), "%s", err.msg);
    snprintf(flags, sizeof flags, "%s--overlap-param-gather --use-distributed-optimizer", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) != 0 && strstr(err.msg, "--overlap-grad-reduce"), "%s", err.msg);
    snprintf(flags, sizeof flags, "%s--overlap-param-gather --use-distributed-optimizer --overlap-grad-reduce", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) == 0, "%s", err.msg);

    parse(&a, "--tokenizer t --data d", &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) != 0 && strstr(err.msg, "--model"), "%s", err.msg);
    snprintf(flags, sizeof flags, "%s--lr 1e-4 --min-lr 1e-3", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) != 0 && strstr(err.msg, "--min-lr"), "%s", err.msg);
    /* Megatron's scheduler asserts init_lr <= max_lr: a warm-up that goes down is a typo */
    snprintf(flags, sizeof flags, "%s--lr 1e-4 --lr-warmup-init 1e-3 --lr-warmup-iters 2", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) != 0 && strstr(err.msg, "--lr-warmup-init 0.001: must not exceed --lr"),
          "%s", err.msg);
    snprintf(flags, sizeof flags, "%s--lr 1e-4 --lr-warmup-init 1e-4 --lr-warmup-iters 2", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) == 0, "%s", err.msg);
    snprintf(flags, sizeof flags, "%s--train-iters 10 --lr-warmup-iters 10", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 1, &err) != 0 && strstr(err.msg, "--lr-warmup-iters"), "%s", err.msg);
    /* Megatron's sample-based training: one of --train-iters / --train-samples, each with its schedule flags */
    static const struct {
        const char *flags, *want;
    } samples[] = {
        {"--train-samples 80", NULL},
        {"--train-samples 80 --lr-warmup-samples 8 --lr-decay-samples 60", NULL},
        {"--train-samples 80 --lr-warmup-fraction 0.1", NULL},
        {"--train-samples 80 --train-iters 10", "--train-iters and --train-samples: give one of them"},
        {"--train-samples 80 --lr-decay-iters 5", "--lr-decay-iters: with --train-samples the schedule is in samples"},
        {"--train-samples 80 --lr-warmup-iters 1", "--lr-warmup-iters: with --train-samples"},
        {"--lr-warmup-samples 8", "--lr-warmup-samples: only with --train-samples"},
        {"--train-iters 5 --lr-decay-samples 40", "--lr-decay-samples: only with --train-samples"},
        {"--train-samples 80 --lr-warmup-samples 80", "--lr-warmup-samples 80: must be fewer than the decay span"},
        {"--train-samples 80 --lr-warmup-samples 8 --lr-warmup-fraction 0.1", "give at most one of them"},
        {"--train-samples 7 --global-batch-size 8", "--train-samples 7: fewer than one global batch of 8"},
    };
    for (size_t k = 0; k < sizeof samples / sizeof *samples; k++) {
        snprintf(flags, sizeof flags, "%s%s", base, samples[k].flags);
        CHECK(parse(&a, flags, &err) == 0, "%s: %s", samples[k].flags, err.msg);
        int rc = tdm_train_args_validate(&a, 1, &err);
        if (samples[k].want)
            CHECK(rc != 0 && strstr(err.msg, samples[k].want), "%s: '%s'", samples[k].flags, rc ? err.msg : "accepted");
        else CHECK(rc == 0, "%s: %s", samples[k].flags, err.msg);
    }
    /* resolved: 80 samples at a global batch of 8 are 10 iterations; 85 are 10 too (Megatron's //) */
    snprintf(flags, sizeof flags, "%s--train-samples 85 --global-batch-size 8", base);
    parse(&a, flags, &err);
    tdm_train_args_resolve(&a, 1);
    CHECK(a.train_iters == 10, "--train-samples 85 at 8: %lld iterations", (long long)a.train_iters);
    tdm_train_args_resolve(&a, 1); /* idempotent */
    CHECK(a.train_iters == 10 && tdm_train_args_validate(&a, 1, &err) == 0, "resolved twice: %lld, %s",
          (long long)a.train_iters, err.msg);
    parse(&a, base, &err);
    tdm_train_args_resolve(&a, 1);
    CHECK(a.train_iters == 100, "default --train-iters %lld", (long long)a.train_iters);
    snprintf(flags, sizeof flags, "%s--inject-nan-at 3:2", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 2, &err) != 0 && strstr(err.msg, "rank 2"), "%s", err.msg);
    /* past the last iteration it would never fire: a test that means to see the NaN check saw nothing */
    snprintf(flags, sizeof flags, "%s--train-iters 5 --inject-nan-at 6", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 2, &err) != 0 && strstr(err.msg, "--inject-nan-at 6"), "%s", err.msg);
    snprintf(flags, sizeof flags, "%s--train-iters 5 --inject-nan-at 5", base);
    parse(&a, flags, &err);
    CHECK(tdm_train_args_validate(&a, 2, &err) == 0, "%s", err.msg);
    /* --valid-data-path is a list like --data, and the command line replaces a config file's */
    snprintf(flags, sizeof flags, "%s--valid-data-path v1.json --valid-data-path v2.json --eval-iters 3", base);
    CHECK(parse(&a, flags, &err) == 0 && a.n_valid_data == 2 && !strcmp(a.valid_data[1], "v2.json") &&
              a.eval_iters == 3 && a.eval_interval == 1000,
          "valid list %d", a.n_valid_data);
    CHECK(parse(&a, "--eval-interval 0", &err) != 0 && strstr(err.msg, "--eval-interval"), "eval-interval 0");
}

static void test_config_file_and_precedence(void) {
    char path[] = "/tmp/tdm_test_args_XXXXXX";
    int fd = mkstemp(path);
    const char *json = "{\"micro_batch_size\": 4, \"global-batch-size\": 32, \"lr\": 0.002, "
                       "\"overlap_grad_reduce\": true, \"data\": [\"x.json\", \"y.json\"], \"model\": \"cfgmodel\"}";
    CHECK(write(fd, json, strlen(json)) == (ssize_t)strlen(json), "write");
    close(fd);
    tdm_train_args a;
    tdm_error err = {{0}};
    char flags[512];
    snprintf(flags, sizeof flags, "--lr 0.003 --config %s --data z.json", path);
    CHECK(parse(&a, flags, &err) == 0, "%s", err.msg);
    CHECK(a.micro_batch_size == 4 && a.global_batch_size == 32, "from the file: %d %d", a.micro_batch_size,
          a.global_batch_size);
    CHECK(a.lr == 0.003, "the command line wins: lr %g", a.lr);
    CHECK(a.overlap_grad_reduce == 1, "switch from the file");
    CHECK(a.n_data == 1 && !strcmp(a.data[0], "z.json"), "command line --data replaces the file's list: %d", a.n_data);
    CHECK(!strcmp(a.model, "cfgmodel"), "%s", a.model);

    fd = open(path, O_WRONLY | O_TRUNC);
    const char *bad = "{\"micro_batch_sizes\": 4}";
    CHECK(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad), "write");
    close(fd);
    snprintf(flags, sizeof flags, "--config=%s", path);
    CHECK(parse(&a, flags, &err) != 0, "unknown key accepted");
    CHECK(strstr(err.msg, path) && strstr(err.msg, "did you mean '--micro-batch-size'"), "%s", err.msg);
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *badtype = "{\"overlap_grad_reduce\": 1}";
    CHECK(write(fd, badtype, strlen(badtype)) == (ssize_t)strlen(badtype), "write");
    close(fd);
    CHECK(parse(&a, flags, &err) != 0 && strstr(err.msg, "expected true or false"), "%s", err.msg);
    /* the other names the command line takes work as keys too */
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *aliases = "{\"mm_tool\": \"tools.json\", \"recompute_activations\": true, "
                          "\"no_check_for_nan_in_loss_and_grad\": true}";
    CHECK(write(fd, aliases, strlen(aliases)) == (ssize_t)strlen(aliases), "write");
    close(fd);
    CHECK(parse(&a, flags, &err) == 0 && !strcmp(a.profile_config, "tools.json") &&
              !strcmp(a.recompute_granularity, "selective") && a.check_for_nan_in_grad == 0,
          "aliases in a config file: %s '%s' '%s'", err.msg, a.profile_config, a.recompute_granularity);
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *off = "{\"recompute_activations\": false}";
    CHECK(write(fd, off, strlen(off)) == (ssize_t)strlen(off), "write");
    close(fd);
    CHECK(parse(&a, flags, &err) == 0 && a.recompute_granularity[0] == 0, "%s '%s'", err.msg, a.recompute_granularity);
    unlink(path);
    CHECK(parse(&a, flags, &err) != 0 && strstr(err.msg, "cannot open"), "%s", err.msg);
}

/* A --config file naming another is refused as such, not as an unknown flag; a misspelt --config gets it
 * suggested; a Megatron switch tandem does anyway is a key too. */
static void test_config_does_not_nest(void) {
    char path[] = "/tmp/tdm_test_nest_XXXXXX";
    int fd = mkstemp(path);
    const char *json = "{\"lr\": 0.002, \"config\": \"other.json\"}";
    CHECK(write(fd, json, strlen(json)) == (ssize_t)strlen(json), "write");
    close(fd);
    tdm_train_args a;
    tdm_error err = {{0}};
    char flags[512];
    snprintf(flags, sizeof flags, "--config %s", path);
    CHECK(parse(&a, flags, &err) != 0 && strstr(err.msg, "key 'config': a config file cannot name another") &&
              !strstr(err.msg, "did you mean"),
          "%s", err.msg);
    CHECK(parse(&a, "--confg x.json", &err) != 0 && strstr(err.msg, "did you mean '--config'"), "%s", err.msg);
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *compat = "{\"use_flash_attn\": true, \"tensor_model_parallel_size\": 1}";
    CHECK(write(fd, compat, strlen(compat)) == (ssize_t)strlen(compat), "write");
    close(fd);
    CHECK(parse(&a, flags, &err) == 0, "%s", err.msg);
    unlink(path);
}

static void test_arguments_block(void) {
    tdm_train_args a;
    tdm_error err = {{0}};
    CHECK(parse(&a, "--model m --data d.json --lr 0.0003 --adam-eps 1e-8 --seed 7", &err) == 0, "%s", err.msg);
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_train_args_format_block(&a, NULL, 0, &sb);
    CHECK(!strncmp(sb.data, "------------------------ arguments ------------------------\n", 60), "header: %.60s",
          sb.data);
    CHECK(strstr(sb.data, "\n  lr .............................................. 0.0003\n"), "lr line");
    CHECK(strstr(sb.data, "\n  adam_eps ........................................ 1e-08\n"), "adam_eps line");
    CHECK(strstr(sb.data, "\n  data ............................................ ['d.json']\n"), "data line");
    CHECK(strstr(sb.data, "\n  save ............................................ None\n"), "None for unset");
    CHECK(strstr(sb.data, "\n  overlap_grad_reduce ............................. False\n"), "False");
    CHECK(strstr(sb.data, "\n  check_for_nan_in_grad ........................... True\n"), "True");
    CHECK(strstr(sb.data, "\n  weight_decay .................................... 0.01\n"), "0.01");
    CHECK(strstr(sb.data, "\n  lr_warmup_fraction .............................. None\n"), "None fraction");
    CHECK(strstr(sb.data, "-------------------- end of arguments ---------------------\n"), "footer");
    /* sorted by name */
    const char *p1 = strstr(sb.data, "  adam_beta1 "), *p2 = strstr(sb.data, "  adam_beta2 "),
               *p3 = strstr(sb.data, "  weight_decay ");
    CHECK(p1 && p2 && p3 && p1 < p2 && p2 < p3, "sorted");
    tdm_sb_free(&sb);
}

static void test_listing_diffs_two_sides(void) {
    tdm_train_args x, y;
    tdm_error err = {{0}};
    parse(&x, "--model m --data d --use-distributed-optimizer", &err);
    y = x;
    CHECK(tdm_train_args_parse_string(&y, "--overlap-grad-reduce", &err) == 0, "%s", err.msg);
    int ndiff = 0;
    const char *which = NULL;
    char vx[4096], vy[4096];
    for (int i = 0; i < tdm_train_args_count(); i++) {
        tdm_train_args_value(&x, i, vx, sizeof vx);
        tdm_train_args_value(&y, i, vy, sizeof vy);
        if (strcmp(vx, vy)) ndiff++, which = tdm_train_args_name(i);
    }
    CHECK(ndiff == 1 && which && !strcmp(which, "overlap_grad_reduce"), "%d differences, last %s", ndiff,
          which ? which : "-");
    CHECK(tdm_train_args_fingerprint(&x) == tdm_train_args_fingerprint(&y), "overlap does not change numerics");
    tdm_train_args_parse_string(&y, "--lr 0.5", &err);
    CHECK(tdm_train_args_fingerprint(&x) != tdm_train_args_fingerprint(&y), "lr changes the fingerprint");
    /* --train-iters is the schedule's span unless --lr-decay-iters fixes it */
    tdm_train_args p, q;
    tdm_train_args_defaults(&p);
    tdm_train_args_defaults(&q);
    tdm_train_args_parse_string(&p, "--train-iters 6", &err);
    tdm_train_args_parse_string(&q, "--train-iters 10", &err);
    CHECK(tdm_train_args_fingerprint(&p) != tdm_train_args_fingerprint(&q), "the decay span changes the fingerprint");
    tdm_train_args_parse_string(&p, "--lr-decay-iters 20", &err);
    tdm_train_args_parse_string(&q, "--lr-decay-iters 20", &err);
    CHECK(tdm_train_args_fingerprint(&p) == tdm_train_args_fingerprint(&q), "train-iters alone, with a fixed span");
    /* ...but an increasing weight decay spans --train-iters whatever --lr-decay-iters says */
    tdm_train_args_parse_string(&p, "--weight-decay-incr-style linear --start-weight-decay 0 --end-weight-decay 0.1",
                                &err);
    tdm_train_args_parse_string(&q, "--weight-decay-incr-style linear --start-weight-decay 0 --end-weight-decay 0.1",
                                &err);
    CHECK(tdm_train_args_fingerprint(&p) != tdm_train_args_fingerprint(&q),
          "the weight-decay span (--train-iters) changes the fingerprint with --weight-decay-incr-style linear");
}

static void test_edit_distance(void) {
    CHECK(tdm_edit_distance("kitten", "sitting") == 3, "kitten");
    CHECK(tdm_edit_distance("", "abc") == 3, "empty");
    CHECK(tdm_edit_distance("flaw", "lawn") == 2, "flaw");
}

/* The platform lines (host_cpu, build_target, ...) are sorted in among the flags, in Megatron's
 * layout; a job of mixed hosts names each value's ranks. */
static void test_block_extras_and_mixed_hosts(void) {
    tdm_train_args a;
    tdm_train_args_defaults(&a);
    tdm_args_extra extra[2] = {{"host_cpu", "Test CPU (family 6 model 1)"}, {"build_target", "x86-64-v3 (portable)"}};
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_train_args_format_block(&a, extra, 2, &sb);
    const char *bt = strstr(sb.data, "\n  build_target .................................... x86-64-v3 (portable)\n");
    const char *bf = strstr(sb.data, "\n  bf16 ");
    const char *hc =
        strstr(sb.data, "\n  host_cpu ........................................ Test CPU (family 6 model 1)\n");
    const char *hd = strstr(sb.data, "\n  image_max_pixels ");
    CHECK(bt && hc, "extras missing:\n%s", sb.data);
    CHECK(bf && hd && bf < bt && hc < hd, "extras not sorted among the flags");
    tdm_sb_free(&sb);

    const char *same[3] = {"Zen 3", "Zen 3", "Zen 3"};
    char *v = tdm_hosts_combine(same, 3);
    CHECK(!strcmp(v, "Zen 3"), "all agree: '%s'", v);
    free(v);
    const char *mixed[5] = {"Zen 3", "Zen 3", "Xeon", "Zen 3", "Xeon"};
    v = tdm_hosts_combine(mixed, 5);
    CHECK(!strcmp(v, "Zen 3 (ranks 0-1, 3); Xeon (ranks 2, 4)"), "mixed: '%s'", v);
    free(v);
    const char *one_off[2] = {"Xeon", "Zen 5"};
    v = tdm_hosts_combine(one_off, 2);
    CHECK(!strcmp(v, "Xeon (rank 0); Zen 5 (rank 1)"), "two ranks: '%s'", v);
    free(v);
}

int main(void) {
    RUN(test_defaults_are_megatrons);
    RUN(test_global_batch_defaults_to_micro_times_dp);
    RUN(test_values_both_spellings);
    RUN(test_errors_are_one_clear_sentence);
    RUN(test_validation);
    RUN(test_config_file_and_precedence);
    RUN(test_config_does_not_nest);
    RUN(test_arguments_block);
    RUN(test_listing_diffs_two_sides);
    RUN(test_edit_distance);
    RUN(test_block_extras_and_mixed_hosts);
    return TEST_SUMMARY();
}
