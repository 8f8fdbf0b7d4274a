/* test_kernels.c - every kernel except attention (see test_attention.c) against a
 * double-precision reference written here, and every backward against central finite
 * differences of that reference (kcheck.h: kc_fd_grad, step 1e-5).
 *
 * Each backward test uses the loss L = sum(R * f(inputs)) with a random R, so the
 * kernel's backward is called with dy = R and must return dL/dinput.
 * Sizes are odd on purpose (vector tails, chunk remainders). Outputs are NaN-filled
 * before each call, parameter gradients are checked to accumulate (two calls give 2x)
 * NULL gradient pointers are checked to be honoured, and elementwise and norm backwards
 * are checked in place (dx == dy).
 *
 * Tolerances (normalised error, kcheck.h):
 *   FWD_TOL  1e-5  forward against the double reference
 *   BWD_TOL  1e-5  backward against finite differences (float rounding of sums)
 *   ADAM_TOL 1e-6  AdamW parameters and moments after 5 steps against double
 *   TORCH_ULPS 4   AdamW against torch.optim.AdamW itself (adamw_golden.h), per element
 */
#include "kernels/kernels.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "adamw_golden.h"
#include "harness.h"
#include "kcheck.h"

#define FWD_TOL  1e-5
#define BWD_TOL  1e-5
#define ADAM_TOL 1e-6

#define CHECK_ERR(err, tol) CHECK((err) < (tol), "normalised error %.3g (tolerance %.1g)", (double)(err), (double)(tol))

/* ---- linear ------------------------------------------------------------------------ */

typedef struct {
    int n, in, out;
    double *x, *w, *b, *r; /* b may be NULL */
} lin_ctx;

static void lin_ref(double *y, const lin_ctx *c) {
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->out; j++) {
            double s = c->b ? c->b[j] : 0.0;
            for (int k = 0; k < c->in; k++) s += c->x[i * c->in + k] * c->w[j * c->in + k];
            y[i * c->out + j] = s;
        }
}

static double lin_loss(void *p) {
    lin_ctx *c = p;
    double *y = kc_zerod(c->n * c->out), l = 0.0;
    lin_ref(y, c);
    for (int i = 0; i < c->n * c->out; i++) l += c->r[i] * y[i];
    free(y);
    return l;
}

static void test_linear(void) {
    int n = 7, in = 13, out = 11;
    float *x = kc_randf(n * in, 1), *w = kc_randf(out * in, 1), *b = kc_randf(out, 1), *r = kc_randf(n * out, 1);
    lin_ctx c = {
        n, in, out, kc_todouble(x, n * in), kc_todouble(w, out * in), kc_todouble(b, out), kc_todouble(r, n * out)};
    double *yref = kc_zerod(n * out);
    float *y = kc_nanf(n * out);
    lin_ref(yref, &c);
    tdm_linear_forward(y, x, w, b, n, in, out);
    CHECK_ERR(kc_err(y, yref, n * out), FWD_TOL);

    lin_ctx nb = c;
    nb.b = NULL;
    lin_ref(yref, &nb);
    free(y);
    y = kc_nanf(n * out);
    tdm_linear_forward(y, x, w, NULL, n, in, out);
    CHECK_ERR(kc_err(y, yref, n * out), FWD_TOL);

    double *gx = kc_zerod(n * in), *gw = kc_zerod(out * in), *gb = kc_zerod(out);
    kc_fd_grad(gx, c.x, n * in, lin_loss, &c);
    kc_fd_grad(gw, c.w, out * in, lin_loss, &c);
    kc_fd_grad(gb, c.b, out, lin_loss, &c);
    float *dx = kc_nanf(n * in), *dw = kc_zerof(out * in), *db = kc_zerof(out);
    tdm_linear_backward(dx, dw, db, r, x, w, n, in, out);
    CHECK_ERR(kc_err(dx, gx, n * in), BWD_TOL);
    CHECK_ERR(kc_err(dw, gw, out * in), BWD_TOL);
    CHECK_ERR(kc_err(db, gb, out), BWD_TOL);
    /* second call: dx overwritten, dw and db accumulate */
    for (int i = 0; i < n * in; i++) dx[i] = NAN;
    tdm_linear_backward(dx, dw, db, r, x, w, n, in, out);
    CHECK_ERR(kc_err(dx, gx, n * in), BWD_TOL);
    CHECK_ERR(kc_err_scaled(dw, gw, out * in, 2.0), BWD_TOL);
    CHECK_ERR(kc_err_scaled(db, gb, out, 2.0), BWD_TOL);
    /* frozen parameters: NULL dw/db leave the others right; NULL dx still accumulates dw */
    for (int i = 0; i < n * in; i++) dx[i] = NAN;
    tdm_linear_backward(dx, NULL, NULL, r, x, w, n, in, out);
    CHECK_ERR(kc_err(dx, gx, n * in), BWD_TOL);
    tdm_linear_backward(NULL, dw, NULL, r, x, w, n, in, out);
    CHECK_ERR(kc_err_scaled(dw, gw, out * in, 3.0), BWD_TOL);
    CHECK_ERR(kc_err_scaled(db, gb, out, 2.0), BWD_TOL);

    free(x), free(w), free(b), free(r), free(c.x), free(c.w), free(c.b), free(c.r), free(yref), free(y);
    free(gx), free(gw), free(gb), free(dx), free(dw), free(db);
}

/* ---- LayerNorm and RMSNorm ----------------------------------------------------------- */

typedef struct {
    int n, d, rms; /* rms = 1: RMSNorm (no mean, no bias) */
    double eps;
    double *x, *w, *b, *r;
} norm_ctx;

static void norm_ref(double *y, double *mean, double *rstd, const norm_ctx *c) {
    for (int i = 0; i < c->n; i++) {
        const double *x = c->x + i * c->d;
        double mu = 0.0, var = 0.0;
        if (!c->rms) {
            for (int j = 0; j < c->d; j++) mu += x[j];
            mu /= c->d;
        }
        for (int j = 0; j < c->d; j++) var += (x[j] - mu) * (x[j] - mu);
        double rs = 1.0 / sqrt(var / c->d + c->eps);
        for (int j = 0; j < c->d; j++) y[i * c->d + j] = (x[j] - mu) * rs * c->w[j] + (c->rms ? 0.0 : c->b[j]);
        if (mean) mean[i] = mu;
        if (rstd) rstd[i] = rs;
    }
}

static double norm_loss(void *p) {
    norm_ctx *c = p;
    double *y = kc_zerod(c->n * c->d), l = 0.0;
    norm_ref(y, NULL, NULL, c);
    for (int i = 0; i < c->n * c->d; i++) l += c->r[i] * y[i];
    free(y);
    return l;
}

static void check_norm(int rms, int n, int d) {
    float eps = 1e-5f;
    /* an offset mean and a spread scale, so centring and scaling both matter */
    float *x = kc_randf(n * d, 2), *w = kc_randf(d, 1), *b = kc_randf(d, 1), *r = kc_randf(n * d, 1);
    for (int i = 0; i < n * d; i++) x[i] += 0.5f;
    norm_ctx c = {n, d, rms, eps, kc_todouble(x, n * d), kc_todouble(w, d), kc_todouble(b, d), kc_todouble(r, n * d)};
    double *yref = kc_zerod(n * d), *mref = kc_zerod(n), *rref = kc_zerod(n);
    norm_ref(yref, mref, rref, &c);
    float *y = kc_nanf(n * d), *mean = kc_nanf(n), *rstd = kc_nanf(n);
    if (rms) tdm_rmsnorm_forward(y, rstd, x, w, n, d, eps);
    else tdm_layernorm_forward(y, mean, rstd, x, w, b, n, d, eps);
    CHECK_ERR(kc_err(y, yref, n * d), FWD_TOL);
    CHECK_ERR(kc_relerr(rstd, rref, n), FWD_TOL);
    if (!rms) CHECK_ERR(kc_err(mean, mref, n), FWD_TOL);

    double *gx = kc_zerod(n * d), *gw = kc_zerod(d), *gb = kc_zerod(d);
    kc_fd_grad(gx, c.x, n * d, norm_loss, &c);
    kc_fd_grad(gw, c.w, d, norm_loss, &c);
    if (!rms) kc_fd_grad(gb, c.b, d, norm_loss, &c);
    float *dx = kc_nanf(n * d), *dw = kc_zerof(d), *db = kc_zerof(d);
    for (int call = 1; call <= 2; call++) { /* the second call checks accumulation */
        for (int i = 0; i < n * d; i++) dx[i] = NAN;
        if (rms) tdm_rmsnorm_backward(dx, dw, r, x, rstd, w, n, d);
        else tdm_layernorm_backward(dx, dw, db, r, x, mean, rstd, w, n, d);
        CHECK_ERR(kc_err(dx, gx, n * d), BWD_TOL);
        CHECK_ERR(kc_err_scaled(dw, gw, d, call), BWD_TOL);
        if (!rms) CHECK_ERR(kc_err_scaled(db, gb, d, call), BWD_TOL);
    }
    /* frozen weight and bias */
    for (int i = 0; i < n * d; i++) dx[i] = NAN;
    if (rms) tdm_rmsnorm_backward(dx, NULL, r, x, rstd, w, n, d);
    else tdm_layernorm_backward(dx, NULL, NULL, r, x, mean, rstd, w, n, d);
    CHECK_ERR(kc_err(dx, gx, n * d), BWD_TOL);
    /* no input gradient wanted */
    if (rms) tdm_rmsnorm_backward(NULL, dw, r, x, rstd, w, n, d);
    else tdm_layernorm_backward(NULL, dw, db, r, x, mean, rstd, w, n, d);
    CHECK_ERR(kc_err_scaled(dw, gw, d, 3.0), BWD_TOL);
    /* in place: dx == dy */
    memcpy(dx, r, sizeof(float) * n * d);
    if (rms) tdm_rmsnorm_backward(dx, NULL, dx, x, rstd, w, n, d);
    else tdm_layernorm_backward(dx, NULL, NULL, dx, x, mean, rstd, w, n, d);
    CHECK_ERR(kc_err(dx, gx, n * d), BWD_TOL);

    free(x), free(w), free(b), free(r), free(c.x), free(c.w), free(c.b), free(c.r);
    free(yref), free(mref), free(rref), free(y), free(mean), free(rstd), free(gx), free(gw), free(gb);
    free(dx), free(dw), free(db);
}

static void test_layernorm(void) {
    check_norm(0, 5, 37);
    check_norm(0, 3, 5); /* shorter than one vector */
}

static void test_rmsnorm(void) {
    check_norm(1, 6, 29);
    check_norm(1, 3 * 4, 18); /* q_norm use: rows = tokens * heads, d = head_dim */
}

/* ---- GELU (tanh and erf) and SwiGLU --------------------------------------------------- */

typedef struct {
    int64_t n;
    int kind; /* 0 tanh, 1 erf */
    double *x, *r;
} act_ctx;

static double gelu_ref(double x, int kind) {
    if (kind == 0) return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double act_loss(void *p) {
    act_ctx *c = p;
    double l = 0.0;
    for (int64_t i = 0; i < c->n; i++) l += c->r[i] * gelu_ref(c->x[i], c->kind);
    return l;
}

static void check_gelu(int kind) {
    int64_t n = 203;
    float *x = kc_randf(n, 4), *r = kc_randf(n, 1);
    x[0] = 0.0f, x[1] = -12.0f, x[2] = 12.0f, x[3] = -30.0f, x[4] = 30.0f, x[5] = 1e-4f; /* saturation, zero */
    act_ctx c = {n, kind, kc_todouble(x, n), kc_todouble(r, n)};
    double *yref = kc_zerod(n), *g = kc_zerod(n);
    for (int64_t i = 0; i < n; i++) yref[i] = gelu_ref(c.x[i], kind);
    float *y = kc_nanf(n), *dx = kc_nanf(n);
    if (kind == 0) tdm_gelu_tanh_forward(y, x, n);
    else tdm_gelu_erf_forward(y, x, n);
    CHECK_ERR(kc_err(y, yref, n), FWD_TOL);
    kc_fd_grad(g, c.x, n, act_loss, &c);
    if (kind == 0) tdm_gelu_tanh_backward(dx, r, x, n);
    else tdm_gelu_erf_backward(dx, r, x, n);
    CHECK_ERR(kc_err(dx, g, n), BWD_TOL);
    memcpy(dx, r, sizeof(float) * n); /* in place: dx == dy */
    if (kind == 0) tdm_gelu_tanh_backward(dx, dx, x, n);
    else tdm_gelu_erf_backward(dx, dx, x, n);
    CHECK_ERR(kc_err(dx, g, n), BWD_TOL);
    free(x), free(r), free(c.x), free(c.r), free(yref), free(g), free(y), free(dx);
}

static void test_gelu_tanh(void) { check_gelu(0); }
static void test_gelu_erf(void) { check_gelu(1); }

typedef struct {
    int64_t n;
    double *a, *b, *r;
} swiglu_ctx;

static double silu_ref(double a) { return a / (1.0 + exp(-a)); }

static double swiglu_loss(void *p) {
    swiglu_ctx *c = p;
    double l = 0.0;
    for (int64_t i = 0; i < c->n; i++) l += c->r[i] * silu_ref(c->a[i]) * c->b[i];
    return l;
}

static void test_swiglu(void) {
    int n = 7, d = 19, t = n * d;
    float *a = kc_randf(t, 6), *b = kc_randf(t, 2), *r = kc_randf(t, 1);
    a[0] = 100.0f, a[1] = -100.0f; /* sigmoid saturation */
    swiglu_ctx c = {t, kc_todouble(a, t), kc_todouble(b, t), kc_todouble(r, t)};
    double *yref = kc_zerod(t), *ga = kc_zerod(t), *gb = kc_zerod(t);
    for (int i = 0; i < t; i++) yref[i] = silu_ref(c.a[i]) * c.b[i];
    float *y = kc_nanf(t), *da = kc_nanf(t), *db = kc_nanf(t);
    tdm_swiglu_forward(y, a, b, n, d);
    CHECK_ERR(kc_err(y, yref, t), FWD_TOL);
    kc_fd_grad(ga, c.a, t, swiglu_loss, &c);
    kc_fd_grad(gb, c.b, t, swiglu_loss, &c);
    tdm_swiglu_backward(da, db, r, a, b, n, d);
    CHECK_ERR(kc_err(da, ga, t), BWD_TOL);
    CHECK_ERR(kc_err(db, gb, t), BWD_TOL);
    for (int i = 0; i < t; i++) da[i] = db[i] = NAN;
    tdm_swiglu_backward(da, NULL, r, a, b, n, d);
    CHECK_ERR(kc_err(da, ga, t), BWD_TOL);
    tdm_swiglu_backward(NULL, db, r, a, b, n, d);
    CHECK_ERR(kc_err(db, gb, t), BWD_TOL);
    memcpy(da, r, sizeof(float) * t); /* in place: dgate == dout */
    tdm_swiglu_backward(da, db, da, a, b, n, d);
    CHECK_ERR(kc_err(da, ga, t), BWD_TOL);
    CHECK_ERR(kc_err(db, gb, t), BWD_TOL);
    free(a), free(b), free(r), free(c.a), free(c.b), free(c.r), free(yref), free(ga), free(gb), free(y), free(da);
    free(db);
}

/* ---- RoPE ------------------------------------------------------------------------- */

typedef struct {
    int n, heads, hd;
    double *x, *cos, *sin, *r;
} rope_ctx;

static void rope_ref(double *y, const rope_ctx *c) {
    int half = c->hd / 2;
    for (int t = 0; t < c->n; t++)
        for (int h = 0; h < c->heads; h++) {
            const double *x = c->x + (t * c->heads + h) * c->hd;
            double *o = y + (t * c->heads + h) * c->hd;
            for (int i = 0; i < half; i++) {
                double cs = c->cos[t * half + i], sn = c->sin[t * half + i];
                o[i] = x[i] * cs - x[i + half] * sn;
                o[i + half] = x[i + half] * cs + x[i] * sn;
            }
        }
}

static double rope_loss(void *p) {
    rope_ctx *c = p;
    int64_t t = (int64_t)c->n * c->heads * c->hd;
    double *y = kc_zerod(t), l = 0.0;
    rope_ref(y, c);
    for (int64_t i = 0; i < t; i++) l += c->r[i] * y[i];
    free(y);
    return l;
}

static void test_rope(void) {
    int n = 5, heads = 3, hd = 14, half = hd / 2, t = n * heads * hd;
    float *x = kc_randf(t, 1), *r = kc_randf(t, 1), *cs = kc_nanf(n * half), *sn = kc_nanf(n * half);
    for (int i = 0; i < n * half; i++) {
        double th = 3.14159 * kc_uniform() * 4.0;
        cs[i] = (float)cos(th), sn[i] = (float)sin(th);
    }
    rope_ctx c = {
        n, heads, hd, kc_todouble(x, t), kc_todouble(cs, n * half), kc_todouble(sn, n * half), kc_todouble(r, t)};
    double *yref = kc_zerod(t), *g = kc_zerod(t);
    rope_ref(yref, &c);
    float *y = kc_nanf(t);
    memcpy(y, x, sizeof(float) * t);
    tdm_rope_forward(y, cs, sn, n, heads, hd);
    CHECK_ERR(kc_err(y, yref, t), FWD_TOL);
    kc_fd_grad(g, c.x, t, rope_loss, &c);
    float *dx = kc_nanf(t);
    memcpy(dx, r, sizeof(float) * t);
    tdm_rope_backward(dx, cs, sn, n, heads, hd);
    CHECK_ERR(kc_err(dx, g, t), BWD_TOL);
    free(x), free(r), free(cs), free(sn), free(c.x), free(c.cos), free(c.sin), free(c.r), free(yref), free(g);
    free(y), free(dx);
}

/* ---- Embedding ---------------------------------------------------------------------- */

typedef struct {
    int n, d;
    const int32_t *ids;
    double *table, *r;
} emb_ctx;

static double emb_loss(void *p) {
    emb_ctx *c = p;
    double l = 0.0;
    for (int i = 0; i < c->n; i++)
        if (c->ids[i] >= 0)
            for (int j = 0; j < c->d; j++) l += c->r[i * c->d + j] * c->table[c->ids[i] * c->d + j];
    return l;
}

static void test_embedding(void) {
    enum { V = 11, D = 9, N = 13 };
    const int32_t ids[N] = {3, -1, 0, 10, 3, 3, -5, 7, 0, 2, 9, -1, 3}; /* repeats and skipped rows */
    float *table = kc_randf(V * D, 1), *r = kc_randf(N * D, 1), *out = kc_nanf(N * D);
    for (int i = 0; i < N; i++)
        if (ids[i] < 0)
            for (int j = 0; j < D; j++) out[i * D + j] = 7.0f; /* what the vision merger wrote */
    tdm_embedding_forward(out, table, ids, N, D);
    int ok = 1;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++) ok &= out[i * D + j] == (ids[i] < 0 ? 7.0f : table[ids[i] * D + j]);
    CHECK(ok, "embedding rows differ from the table, or an image row was touched");
    emb_ctx c = {N, D, ids, kc_todouble(table, V * D), kc_todouble(r, N * D)};
    double *g = kc_zerod(V * D);
    kc_fd_grad(g, c.table, V * D, emb_loss, &c);
    float *dt = kc_zerof(V * D);
    tdm_embedding_backward(dt, r, ids, N, D);
    CHECK_ERR(kc_err(dt, g, V * D), BWD_TOL);
    tdm_embedding_backward(dt, r, ids, N, D);
    CHECK_ERR(kc_err_scaled(dt, g, V * D, 2.0), BWD_TOL);
    free(table), free(r), free(out), free(c.table), free(c.r), free(g), free(dt);
}

/* ---- Cross-entropy fused with the output projection ----------------------------------- */

typedef struct {
    int n, d, v;
    const int32_t *t;
    double scale; /* grad_scale: the loss differentiated is scale * sum */
    double *h, *w;
} xent_ctx;

static double xent_sum(const xent_ctx *c, int64_t *count) {
    double total = 0.0;
    double *lg = kc_zerod(c->v);
    int64_t cnt = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->t[i] == -100) continue;
        double m = -INFINITY, s = 0.0;
        for (int j = 0; j < c->v; j++) {
            double z = 0.0;
            for (int k = 0; k < c->d; k++) z += c->h[i * c->d + k] * c->w[j * c->d + k];
            lg[j] = z;
            if (z > m) m = z;
        }
        for (int j = 0; j < c->v; j++) s += exp(lg[j] - m);
        total += m + log(s) - lg[c->t[i]];
        cnt++;
    }
    free(lg);
    if (count) *count = cnt;
    return total;
}

static double xent_loss(void *p) {
    xent_ctx *c = p;
    return c->scale * xent_sum(c, NULL);
}

static void check_xent(double logit_scale) {
    enum { N = 23, D = 17, V = 41, CHUNK = 5 }; /* 5 does not divide 23 */
    int32_t t[N];
    for (int i = 0; i < N; i++) t[i] = (int32_t)((kc_uniform() + 1.0) * 0.5 * V) % V;
    const int ignored[] = {0, 4, 5, 6, 12, 22}; /* first, last, a run of three */
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) t[ignored[i]] = -100;
    float *h = kc_randf(N * D, logit_scale), *w = kc_randf(V * D, logit_scale);
    xent_ctx c = {N, D, V, t, 0.0, kc_todouble(h, N * D), kc_todouble(w, V * D)};
    int64_t cref = 0;
    double lref = xent_sum(&c, &cref);
    float gs = 1.0f / (float)cref;
    c.scale = gs;
    double *gh = kc_zerod(N * D), *gw = kc_zerod(V * D);
    kc_fd_grad(gh, c.h, N * D, xent_loss, &c);
    kc_fd_grad(gw, c.w, V * D, xent_loss, &c);

    float *ws = kc_nanf(tdm_xent_workspace_floats(CHUNK, V, D));
    float *dh = kc_nanf(N * D), *dw = kc_zerof(V * D);
    int64_t cnt = -1;
    double loss = tdm_xent_fused(dh, dw, h, w, t, N, D, V, gs, CHUNK, ws, &cnt);
    CHECK(cnt == cref, "count %lld, expected %lld", (long long)cnt, (long long)cref);
    CHECK(fabs(loss - lref) <= FWD_TOL * fmax(1.0, fabs(lref)), "loss %.9g, reference %.9g", loss, lref);
    CHECK_ERR(kc_err(dh, gh, N * D), BWD_TOL);
    CHECK_ERR(kc_err(dw, gw, V * D), BWD_TOL);
    int zero = 1;
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        for (int k = 0; k < D; k++) zero &= dh[ignored[i] * D + k] == 0.0f;
    CHECK(zero, "ignored rows must get dh = 0");

    /* accumulation; NULL dh; forward only; other chunk sizes give the same loss */
    for (int i = 0; i < N * D; i++) dh[i] = NAN;
    tdm_xent_fused(dh, dw, h, w, t, N, D, V, gs, CHUNK, ws, &cnt);
    CHECK_ERR(kc_err(dh, gh, N * D), BWD_TOL);
    CHECK_ERR(kc_err_scaled(dw, gw, V * D, 2.0), BWD_TOL);
    tdm_xent_fused(NULL, dw, h, w, t, N, D, V, gs, CHUNK, ws, &cnt);
    CHECK_ERR(kc_err_scaled(dw, gw, V * D, 3.0), BWD_TOL);
    for (int i = 0; i < N * D; i++) dh[i] = NAN;
    tdm_xent_fused(dh, NULL, h, w, t, N, D, V, gs, CHUNK, ws, &cnt);
    CHECK_ERR(kc_err(dh, gh, N * D), BWD_TOL);
    const int chunks[] = {1, 2, CHUNK, N, 64};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        float *w2 = kc_nanf(tdm_xent_workspace_floats(chunks[k], V, D));
        cnt = -1;
        double l2 = tdm_xent_fused(NULL, NULL, h, w, t, N, D, V, gs, chunks[k], w2, &cnt);
        CHECK(fabs(l2 - lref) <= FWD_TOL * fmax(1.0, fabs(lref)) && cnt == cref, "chunk %d: loss %.9g count %lld",
              chunks[k], l2, (long long)cnt);
        free(w2);
    }
    free(h), free(w), free(c.h), free(c.w), free(gh), free(gw), free(ws), free(dh), free(dw);
}

static void test_xent(void) { check_xent(1.0); }
static void test_xent_large_logits(void) { check_xent(2.5); } /* logits up to ~100: needs the max shift */

static void test_xent_all_ignored(void) {
    enum { N = 4, D = 3, V = 5 };
    int32_t t[N] = {-100, -100, -100, -100};
    float *h = kc_randf(N * D, 1), *w = kc_randf(V * D, 1), *ws = kc_nanf(tdm_xent_workspace_floats(2, V, D));
    float *dh = kc_nanf(N * D), *dw = kc_zerof(V * D);
    int64_t cnt = -1;
    double loss = tdm_xent_fused(dh, dw, h, w, t, N, D, V, 1.0f, 2, ws, &cnt);
    int zero = 1;
    for (int i = 0; i < N * D; i++) zero &= dh[i] == 0.0f;
    for (int i = 0; i < V * D; i++) zero &= dw[i] == 0.0f;
    CHECK(loss == 0.0 && cnt == 0 && zero, "loss %g count %lld", loss, (long long)cnt);
    free(h), free(w), free(ws), free(dh), free(dw);
}

/* ---- AdamW ------------------------------------------------------------------------- */

/* Varying gradients: the PyTorch update iterated in double. */
static void test_adamw_iterated(void) {
    enum { N = 37, STEPS = 5 };
    /* the hyperparameters as the user wrote them; the kernel gets them as floats */
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, wd = 0.1;
    const float eps = 1e-8f, gs = 0.5f;
    float *p = kc_randf(N, 1), *m = kc_zerof(N), *v = kc_zerof(N);
    double *pd = kc_todouble(p, N), *md = kc_zerod(N), *vd = kc_zerod(N);
    for (int step = 1; step <= STEPS; step++) {
        float *g = kc_randf(N, 1);
        g[0] = 1e-7f, g[1] = 0.0f, g[2] = 30.0f; /* eps-dominated, zero, large */
        tdm_adamw_step(p, g, m, v, N, (float)lr, (float)b1, (float)b2, eps, (float)wd, step, gs);
        double bc1 = 1.0 - pow(b1, step), bc2 = 1.0 - pow(b2, step);
        for (int i = 0; i < N; i++) {
            double gi = (double)g[i] * gs;
            pd[i] *= 1.0 - lr * wd;
            md[i] = b1 * md[i] + (1.0 - b1) * gi;
            vd[i] = b2 * vd[i] + (1.0 - b2) * gi * gi;
            pd[i] -= lr / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + eps);
        }
        free(g);
    }
    CHECK_ERR(kc_err(p, pd, N), ADAM_TOL);
    CHECK_ERR(kc_relerr(m, md, N), ADAM_TOL);
    CHECK_ERR(kc_relerr(v, vd, N), ADAM_TOL);
    free(p), free(m), free(v), free(pd), free(md), free(vd);
}

/* A constant gradient g has the closed form m_t = (1 - b1^t) g, v_t = (1 - b2^t) g^2, so
 * the bias-corrected step is lr g / (|g| + eps) and p_t = p_{t-1} (1 - lr wd) - that. */
static void test_adamw_closed_form(void) {
    enum { N = 19, STEPS = 4 };
    const double lr = 3e-3, b1 = 0.8, b2 = 0.95, wd = 0.05;
    const float eps = 1e-6f;
    float *p = kc_randf(N, 1), *g = kc_randf(N, 2), *m = kc_zerof(N), *v = kc_zerof(N);
    double *pd = kc_todouble(p, N), *md = kc_zerod(N), *vd = kc_zerod(N);
    for (int step = 1; step <= STEPS; step++) {
        tdm_adamw_step(p, g, m, v, N, (float)lr, (float)b1, (float)b2, eps, (float)wd, step, 1.0f);
        for (int i = 0; i < N; i++) pd[i] = pd[i] * (1.0 - lr * wd) - lr * g[i] / (fabs(g[i]) + eps);
    }
    for (int i = 0; i < N; i++) {
        md[i] = (1.0 - pow(b1, STEPS)) * g[i];
        vd[i] = (1.0 - pow(b2, STEPS)) * (double)g[i] * g[i];
    }
    CHECK_ERR(kc_err(p, pd, N), ADAM_TOL);
    CHECK_ERR(kc_relerr(m, md, N), ADAM_TOL);
    CHECK_ERR(kc_relerr(v, vd, N), ADAM_TOL);
    free(p), free(g), free(m), free(v), free(pd), free(md), free(vd);
}

/* Largest distance in units of the last place between two float arrays. */
static int max_ulps(const float *a, const float *b, int n) {
    int worst = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(a[i])) return 1 << 30;
        int32_t ia, ib;
        memcpy(&ia, &a[i], 4), memcpy(&ib, &b[i], 4);
        if (ia < 0) ia = INT32_MIN - ia; /* order negative floats below positive ones */
        if (ib < 0) ib = INT32_MIN - ib;
        int64_t d = (int64_t)ia - ib;
        if (d < 0) d = -d;
        if (d > worst) worst = d > (1 << 30) ? 1 << 30 : (int)d;
    }
    return worst;
}

/* PyTorch's own AdamW on the same inputs (generated by gen_adamw_golden.py). */
static void test_adamw_matches_torch(void) {
    enum { N = ADAMW_GOLDEN_N };
    const float *hp = adamw_golden_hyper;
    float p[N], m[N] = {0}, v[N] = {0};
    memcpy(p, adamw_golden_p0, sizeof p);
    for (int s = 0; s < ADAMW_GOLDEN_STEPS; s++)
        tdm_adamw_step(p, adamw_golden_grads[s], m, v, N, hp[0], hp[1], hp[2], hp[3], hp[4], s + 1, 1.0f);
    int up = max_ulps(p, adamw_golden_p, N), um = max_ulps(m, adamw_golden_m, N), uv = max_ulps(v, adamw_golden_v, N);
    CHECK(up <= 4 && um <= 4 && uv <= 4, "ulps from torch: p %d, m %d, v %d (tolerance 4)", up, um, uv);
}

/* Every length 0..70 (vector body and tail) and every position of one bad value: NaN, the
 * infinities; the largest finite float and -0 are finite. */
static void test_all_finite(void) {
    float x[70];
    const float bad[] = {NAN, INFINITY, -INFINITY}, good[] = {FLT_MAX, -FLT_MAX, -0.0f, FLT_MIN / 2};
    for (int n = 0; n <= 70; n++) {
        for (int i = 0; i < n; i++) x[i] = (float)(i % 7) - 3.5f;
        CHECK(tdm_all_finite(x, n), "n %d: finite values reported non-finite", n);
        for (int i = 0; i < n; i++) {
            float keep = x[i];
            for (int b = 0; b < 3; b++) {
                x[i] = bad[b];
                CHECK(!tdm_all_finite(x, n), "n %d: %g at %d not found", n, (double)bad[b], i);
            }
            for (int b = 0; b < 4; b++) {
                x[i] = good[b];
                CHECK(tdm_all_finite(x, n), "n %d: %g at %d reported non-finite", n, (double)good[b], i);
            }
            x[i] = keep;
        }
    }
}

/* The nearest bfloat16 to a finite x, found without bit tricks: the two candidates around x
 * (x's bits truncated toward zero, and the next bfloat16 away from zero, whose value for the
 * infinity pattern is 2^128 as IEEE rounding has it) are compared by distance in double, where
 * x, both candidates and their midpoint are exact; a tie picks the even one. */
static float ref_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, 4);
    memcpy(&fhi, &hi, 4);
    double dlo = flo, dhi = (hi & 0x7fffffffu) == 0x7f800000u ? copysign(0x1p128, x) : (double)fhi;
    double elo = fabs((double)x - dlo), ehi = fabs(dhi - (double)x);
    uint32_t pick = elo < ehi ? lo : ehi < elo ? hi : ((lo >> 16) & 1u) ? hi : lo;
    float r;
    memcpy(&r, &pick, 4);
    return r;
}

/* tdm_round_to_bf16 against ref_bf16 on random bit patterns of every exponent and on the edge
 * cases (ties both ways, FLT_MAX and the values just under the overflow threshold, subnormals,
 * zeros, infinities), in place and out of place; a NaN stays a NaN. */
static void test_round_to_bf16(void) {
    enum { N = 4099 };
    static float x[N], y[N], z[N];
    static uint16_t bits[N];
    uint64_t s = 12345;
    int k = 0;
    const uint32_t edge[] = {0x3f808000u, 0x3f818000u, 0xbf818000u, 0x7f7fffffu, 0x7f7f7fffu, 0x7f7f8000u,
                             0x7f7effffu, 0x00000001u, 0x00008000u, 0x00018000u, 0x807fffffu, 0x00000000u,
                             0x80000000u, 0x7f800000u, 0xff800000u, 0x3f7fffffu, 0x3f80ffffu, 0x3f807fffu};
    for (; k < (int)(sizeof edge / sizeof edge[0]); k++) memcpy(&x[k], &edge[k], 4);
    for (; k < N - 1; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        if ((u & 0x7f800000u) == 0x7f800000u) u &= 0xbfffffffu; /* finite ones here */
        memcpy(&x[k], &u, 4);
    }
    x[N - 1] = NAN;
    tdm_round_to_bf16(y, bits, x, N);
    for (int i = 0; i < N - 1; i++) {
        float r = ref_bf16(x[i]);
        uint32_t a, b;
        memcpy(&a, &y[i], 4);
        memcpy(&b, &r, 4);
        CHECK(a == b, "x %a: %08x, the nearest bfloat16 is %08x", (double)x[i], (unsigned)a, (unsigned)b);
        CHECK(bits[i] == (uint16_t)(a >> 16) && (a & 0xffffu) == 0, "x %a: bits %04x for %08x", (double)x[i], bits[i],
              (unsigned)a);
    }
    CHECK(isnan(y[N - 1]), "NaN rounded to %g", (double)y[N - 1]);
    memcpy(z, x, sizeof z);
    tdm_round_to_bf16(z, NULL, z, N);
    CHECK(memcmp(z, y, sizeof z) == 0, "in place differs from out of place");
    static uint16_t only[N];
    tdm_round_to_bf16(NULL, only, x, N);
    CHECK(memcmp(only, bits, sizeof only) == 0, "the bits alone differ from the bits with the values");
}

/* NaNs in the eight-lane body and in the scalar tail: a NaN, signalling or not, of either sign and
 * any payload, keeps its sign and the upper half of its payload and comes out quiet, with a
 * finite neighbour in the same lanes rounded as usual. */
static void test_round_to_bf16_nan(void) {
    const uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7fc00000u, 0xffffffffu, 0x7fa5a5a5u, 0x7f80ffffu};
    enum { N = 21 }; /* two vectors and a tail of 5 */
    for (int at = 0; at < N; at++)
        for (size_t j = 0; j < sizeof nans / sizeof nans[0]; j++) {
            float x[N], y[N];
            uint16_t bits[N];
            for (int i = 0; i < N; i++) x[i] = 1.0f + (float)i / 3.0f;
            memcpy(&x[at], &nans[j], 4);
            tdm_round_to_bf16(y, bits, x, N);
            uint32_t u;
            memcpy(&u, &y[at], 4);
            const uint32_t want = (nans[j] | 0x00400000u) & 0xffff0000u;
            CHECK(u == want && bits[at] == (uint16_t)(want >> 16), "NaN %08x at %d became %08x (bits %04x), want %08x",
                  (unsigned)nans[j], at, (unsigned)u, bits[at], (unsigned)want);
            const int nb = at == 0 ? 1 : at - 1;
            const float r = ref_bf16(x[nb]);
            CHECK(memcmp(&y[nb], &r, 4) == 0, "the finite neighbour of a NaN at %d was rounded to %a", at,
                  (double)y[nb]);
        }
}

/* tdm_widen_bf16 on all 65,536 bfloat16 patterns at every alignment of the eight-lane body:
 * each becomes the fp32 whose upper half it is and whose lower half is zero. */
static void test_widen_bf16(void) {
    enum { N = 65536 + 7 };
    static uint16_t bits[N];
    static float y[N];
    for (int start = 0; start < 8; start++) {
        for (int i = 0; i < N; i++) bits[i] = (uint16_t)(i - start);
        memset(y, 0xab, sizeof y);
        tdm_widen_bf16(y + start, bits + start, N - start);
        int bad = 0;
        for (int i = start; i < N && bad < 3; i++) {
            uint32_t u;
            memcpy(&u, &y[i], 4);
            if (u != (uint32_t)bits[i] << 16) {
                CHECK(0, "start %d, bits %04x widened to %08x", start, bits[i], (unsigned)u);
                bad++;
            }
        }
        uint32_t before;
        if (start > 0) {
            memcpy(&before, &y[start - 1], 4);
            CHECK(before == 0xababababu, "start %d: the element before the range was written", start);
        }
    }
}

int main(void) {
    RUN(test_linear);
    RUN(test_layernorm);
    RUN(test_rmsnorm);
    RUN(test_gelu_tanh);
    RUN(test_gelu_erf);
    RUN(test_swiglu);
    RUN(test_rope);
    RUN(test_embedding);
    RUN(test_xent);
    RUN(test_xent_large_logits);
    RUN(test_xent_all_ignored);
    RUN(test_adamw_iterated);
    RUN(test_adamw_closed_form);
    RUN(test_adamw_matches_torch);
    RUN(test_all_finite);
    RUN(test_round_to_bf16);
    RUN(test_round_to_bf16_nan);
    RUN(test_widen_bf16);
    return TEST_SUMMARY();
}
