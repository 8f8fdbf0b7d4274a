/* scheduler.c - Megatron's learning-rate schedule (see scheduler.h for the formulas). */
#include "train/scheduler.h"

#include <math.h>
#include <string.h>

static const char *const STYLE_NAMES[] = {"constant", "linear", "cosine", "inverse-square-root", "WSD"};
static const char *const WSD_NAMES[] = {"exponential", "linear", "cosine", "minus_sqrt"};
static const char *const WD_NAMES[] = {"constant", "linear", "cosine"};

static int find_name(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

int tdm_lr_style_parse(const char *name, tdm_lr_style *out) {
    int i = find_name(STYLE_NAMES, 5, name);
    if (i >= 0) *out = (tdm_lr_style)i;
    return i < 0 ? -1 : 0;
}

int tdm_wsd_style_parse(const char *name, tdm_wsd_style *out) {
    int i = find_name(WSD_NAMES, 4, name);
    if (i >= 0) *out = (tdm_wsd_style)i;
    return i < 0 ? -1 : 0;
}

int tdm_wd_style_parse(const char *name, tdm_wd_style *out) {
    int i = find_name(WD_NAMES, 3, name);
    if (i >= 0) *out = (tdm_wd_style)i;
    return i < 0 ? -1 : 0;
}

const char *tdm_lr_style_name(tdm_lr_style s) { return (unsigned)s < 5 ? STYLE_NAMES[s] : "?"; }
const char *tdm_wd_style_name(tdm_wd_style s) { return (unsigned)s < 3 ? WD_NAMES[s] : "?"; }

int tdm_lr_scheduler_init(tdm_lr_scheduler *s, double max_lr, double min_lr, double init_lr, tdm_lr_style style,
                          int64_t warmup_iters, double warmup_fraction, int64_t decay_iters, int64_t train_iters,
                          int64_t global_batch, tdm_error *err) {
    memset(s, 0, sizeof *s);
    if (global_batch <= 0)
        return tdm_errorf(err, "lr schedule: global batch %lld must be positive", (long long)global_batch);
    if (decay_iters <= 0) decay_iters = train_iters;
    if (decay_iters <= 0) return tdm_errorf(err, "lr schedule: --lr-decay-iters / --train-iters must be positive");
    if (min_lr > max_lr) return tdm_errorf(err, "lr schedule: --min-lr %g exceeds --lr %g", min_lr, max_lr);
    if (init_lr > max_lr) return tdm_errorf(err, "lr schedule: --lr-warmup-init %g exceeds --lr %g", init_lr, max_lr);
    s->max_lr = max_lr;
    s->min_lr = min_lr;
    s->init_lr = init_lr;
    s->style = style;
    s->decay_steps = decay_iters * global_batch;
    /* a fraction stays fractional, as Megatron's: 0.15 x 30 samples warms up over 4.5, and
     * 0.01 x 80 over 0.8 (truncated, it would be 4, and 0: no warmup at all) */
    if (warmup_fraction >= 0) s->warmup_steps = warmup_fraction * (double)s->decay_steps;
    else s->warmup_steps = (double)(warmup_iters * global_batch);
    if (s->warmup_steps > 0 && s->warmup_steps >= (double)s->decay_steps) /* Megatron: warmup < decay */
        return tdm_errorf(err, "lr schedule: warmup (%g samples) is not shorter than the decay span (%lld samples)",
                          s->warmup_steps, (long long)s->decay_steps);
    return 0;
}

int tdm_lr_scheduler_set_wsd(tdm_lr_scheduler *s, tdm_wsd_style style, int64_t wsd_iters, int64_t global_batch,
                             tdm_error *err) {
    const int64_t steps = wsd_iters * global_batch;
    if (steps < 1 || steps > s->decay_steps)
        return tdm_errorf(err,
                          "lr schedule: the WSD decay (%lld samples) must be at least one sample and at most "
                          "the decay span (%lld samples)",
                          (long long)steps, (long long)s->decay_steps);
    s->wsd_style = style;
    s->wsd_decay_steps = steps;
    return 0;
}

int tdm_lr_scheduler_set_wd(tdm_lr_scheduler *s, tdm_wd_style style, double start_wd, double end_wd, int64_t incr_steps,
                            tdm_error *err) {
    if (!(start_wd >= 0) || !(end_wd >= start_wd) || !isfinite(end_wd)) /* Megatron asserts the same */
        return tdm_errorf(err, "weight decay schedule: from %g to %g: expected 0 <= start <= end", start_wd, end_wd);
    if (style == TDM_WD_CONSTANT && start_wd != end_wd)
        return tdm_errorf(err, "weight decay schedule: constant, yet from %g to %g", start_wd, end_wd);
    if (incr_steps < 1)
        return tdm_errorf(err, "weight decay schedule: over %lld samples, expected at least 1", (long long)incr_steps);
    s->wd_style = style;
    s->start_wd = start_wd;
    s->end_wd = end_wd;
    s->wd_incr_steps = incr_steps;
    return 0;
}

int tdm_lr_scheduler_check(const tdm_lr_scheduler *s, tdm_error *err) {
    if (!isfinite(s->max_lr) || !isfinite(s->min_lr) || !isfinite(s->init_lr) || s->min_lr < 0 || s->init_lr < 0 ||
        s->min_lr > s->max_lr || s->init_lr > s->max_lr)
        return tdm_errorf(err,
                          "scheduler: max_lr %g, min_lr %g, warmup_init %g: expected finite rates with "
                          "0 <= min_lr <= max_lr and 0 <= warmup_init <= max_lr",
                          s->max_lr, s->min_lr, s->init_lr);
    if ((unsigned)s->style > TDM_LR_WSD) return tdm_errorf(err, "scheduler: unknown decay style");
    if (s->style == TDM_LR_WSD && (s->wsd_decay_steps < 1 || s->wsd_decay_steps > s->decay_steps))
        return tdm_errorf(err,
                          "scheduler: WSD with a final decay of %lld samples, expected 1 to decay_steps %lld "
                          "(--lr-wsd-decay-iters / --lr-wsd-decay-samples)",
                          (long long)s->wsd_decay_steps, (long long)s->decay_steps);
    if (s->decay_steps < 1)
        return tdm_errorf(err, "scheduler: decay_steps is %lld, expected at least 1", (long long)s->decay_steps);
    if (!(s->warmup_steps >= 0) || (s->warmup_steps > 0 && s->warmup_steps >= (double)s->decay_steps))
        return tdm_errorf(err, "scheduler: warmup_steps is %g, expected 0 or more and fewer than decay_steps %lld",
                          s->warmup_steps, (long long)s->decay_steps);
    return 0;
}

double tdm_lr_scheduler_lr_at(const tdm_lr_scheduler *s, int64_t n) {
    if (s->warmup_steps > 0 && n <= s->warmup_steps)
        return s->init_lr + (s->max_lr - s->init_lr) * (double)n / s->warmup_steps;
    if (s->style == TDM_LR_CONSTANT) return s->max_lr;
    if (n > s->decay_steps) return s->min_lr;
    if (s->style == TDM_LR_INVERSE_SQRT) {
        double w = s->warmup_steps > 1 ? s->warmup_steps : 1.0;
        double k = (double)(n > 1 ? n : 1);
        double lr = s->max_lr * sqrt(w) / sqrt(k);
        return lr > s->min_lr ? lr : s->min_lr;
    }
    double span = (double)s->decay_steps - s->warmup_steps;
    if (span <= 0) return s->min_lr; /* init refuses warmup >= decay (as Megatron); a guard only */
    double r = ((double)n - s->warmup_steps) / span, coeff;
    if (s->style == TDM_LR_WSD) {
        const int64_t anneal_start = s->decay_steps - s->wsd_decay_steps;
        if (n <= anneal_start) {
            coeff = 1.0;
        } else {
            const double q = (double)(n - anneal_start) / (double)s->wsd_decay_steps;
            switch (s->wsd_style) {
            case TDM_WSD_LINEAR: coeff = 1.0 - q; break;
            case TDM_WSD_COSINE: coeff = 0.5 * (cos(M_PI * q) + 1.0); break;
            case TDM_WSD_MINUS_SQRT: coeff = 1.0 - sqrt(q); break;
            default: coeff = 2.0 * pow(0.5, q) - 1.0; break;
            }
        }
    } else {
        coeff = s->style == TDM_LR_LINEAR ? 1.0 - r : 0.5 * (cos(M_PI * r) + 1.0);
    }
    return s->min_lr + coeff * (s->max_lr - s->min_lr);
}

double tdm_lr_scheduler_wd_at(const tdm_lr_scheduler *s, int64_t n) {
    if (n > s->wd_incr_steps || s->wd_style == TDM_WD_CONSTANT) return s->end_wd;
    const double r = (double)n / (double)s->wd_incr_steps;
    const double coeff = s->wd_style == TDM_WD_LINEAR ? r : 0.5 * (cos(M_PI * (1.0 - r)) + 1.0);
    return s->start_wd + coeff * (s->end_wd - s->start_wd);
}

double tdm_lr_scheduler_wd(const tdm_lr_scheduler *s) { return tdm_lr_scheduler_wd_at(s, s->num_steps); }

double tdm_lr_scheduler_lr(const tdm_lr_scheduler *s) { return tdm_lr_scheduler_lr_at(s, s->num_steps); }

void tdm_lr_scheduler_step(tdm_lr_scheduler *s, int64_t samples) { s->num_steps += samples; }
