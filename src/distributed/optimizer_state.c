/* optimizer_state.c - the shards' Adam state gathered for a checkpoint (see optimizer_state.h). */
#include "distributed/optimizer_state.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "distributed/comm.h"

static int cmp_piece(const void *a, const void *b) {
    const tdm_ddp_opt_piece *x = a, *y = b;
    if (x->param != y->param) return (x->param > y->param) - (x->param < y->param);
    return (x->param_offset > y->param_offset) - (x->param_offset < y->param_offset);
}

tdm_ddp_opt_piece *tdm_ddp_opt_pieces_sorted(const tdm_ddp *ddp, int *np) {
    *np = tdm_ddp_opt_pieces(ddp, NULL, 0);
    tdm_ddp_opt_piece *pieces = tdm_xcalloc((size_t)(*np ? *np : 1), sizeof *pieces);
    tdm_ddp_opt_pieces(ddp, pieces, *np);
    qsort(pieces, (size_t)*np, sizeof *pieces, cmp_piece);
    return pieces;
}

/* MPI counts are int: a shard of an 8B model's Adam state at dp 2 holds 4.4e9 floats, so
 * large arrays travel in pieces of at most 2^30 elements. */
#define TDM_MPI_CHUNK ((int64_t)1 << 30)
/* Point-to-point, bounded by --distributed-timeout-minutes (0: none): a rank stopped during a save
 * ends the job instead of leaving the others waiting forever. */
#define GATHER_WHAT   "checkpoint save (optimizer-state gather)"
static void send_bounded(const void *x, int n, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         uint64_t timeout_ns) {
    MPI_Request r;
    MPI_Isend(x, n, type, dest, tag, comm, &r);
    tdm_wait_request_spin_bounded(&r, timeout_ns, GATHER_WHAT);
}
static void recv_bounded(void *x, int n, MPI_Datatype type, int src, int tag, MPI_Comm comm, uint64_t timeout_ns) {
    MPI_Request r;
    MPI_Irecv(x, n, type, src, tag, comm, &r);
    tdm_wait_request_spin_bounded(&r, timeout_ns, GATHER_WHAT);
}
static void send_floats(const float *x, int64_t n, int dest, int tag, MPI_Comm comm, uint64_t timeout_ns) {
    for (int64_t o = 0; o < n; o += TDM_MPI_CHUNK)
        send_bounded(x + o, (int)(n - o < TDM_MPI_CHUNK ? n - o : TDM_MPI_CHUNK), MPI_FLOAT, dest, tag, comm,
                     timeout_ns);
}
static void recv_floats(float *x, int64_t n, int src, int tag, MPI_Comm comm, uint64_t timeout_ns) {
    for (int64_t o = 0; o < n; o += TDM_MPI_CHUNK)
        recv_bounded(x + o, (int)(n - o < TDM_MPI_CHUNK ? n - o : TDM_MPI_CHUNK), MPI_FLOAT, src, tag, comm,
                     timeout_ns);
}

/* The optimizer state streamed to rank 0's checkpoint writer one parameter at a time (see
 * optimizer_state.h). */
struct tdm_ddp_state_gather {
    const tdm_param_table *pt;
    MPI_Comm comm;
    int senders;                        /* ranks whose pieces make up the state: dp, or 1 */
    uint64_t timeout_ns;                /* each transfer's bound (0: none) */
    tdm_ddp_opt_piece **pieces;         /* [senders]: each rank's pieces, sorted by (param, offset) */
    int *n_pieces, *next;               /* [senders]: how many; the first not yet received */
    int next_param;                     /* the first parameter not yet assembled */
    float *m, *v, *w;                   /* [largest trainable numel]; w: --bf16's main parameters */
    const float *own_m, *own_v, *own_w; /* rank 0's state arrays */
};

/* A sender: the piece list, then each piece's m and v (and w) in (param, offset) order. */
static void send_pieces(tdm_ddp *ddp, MPI_Comm comm, uint64_t to) {
    int np;
    tdm_ddp_opt_piece *pieces = tdm_ddp_opt_pieces_sorted(ddp, &np);
    const float *sm = tdm_ddp_opt_m(ddp), *sv = tdm_ddp_opt_v(ddp), *sw = tdm_ddp_opt_main(ddp);
    send_bounded(&np, 1, MPI_INT, 0, 1, comm, to);
    send_bounded(pieces, (int)(sizeof *pieces * (size_t)np), MPI_BYTE, 0, 3, comm, to);
    for (int k = 0; k < np; k++) {
        send_floats(sm + pieces[k].state_offset, pieces[k].count, 0, 4, comm, to);
        send_floats(sv + pieces[k].state_offset, pieces[k].count, 0, 5, comm, to);
        if (sw) send_floats(sw + pieces[k].state_offset, pieces[k].count, 0, 6, comm, to);
    }
    free(pieces);
}

tdm_ddp_state_gather *tdm_ddp_state_gather_begin(tdm_ddp *ddp, const tdm_param_table *pt, MPI_Comm comm, int senders,
                                                 uint64_t timeout_ns) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank != 0) {
        if (rank < senders) send_pieces(ddp, comm, timeout_ns);
        return NULL;
    }
    if (senders <= 0) return NULL;
    tdm_ddp_state_gather *g = tdm_xcalloc(1, sizeof *g);
    const float *sm = tdm_ddp_opt_m(ddp), *sv = tdm_ddp_opt_v(ddp), *sw = tdm_ddp_opt_main(ddp);
    *g = (tdm_ddp_state_gather){
        .pt = pt, .comm = comm, .senders = senders, .timeout_ns = timeout_ns, .own_m = sm, .own_v = sv, .own_w = sw};
    g->pieces = tdm_xcalloc((size_t)senders, sizeof *g->pieces);
    g->n_pieces = tdm_xcalloc((size_t)senders, sizeof(int));
    g->next = tdm_xcalloc((size_t)senders, sizeof(int));
    g->pieces[0] = tdm_ddp_opt_pieces_sorted(ddp, &g->n_pieces[0]);
    for (int r = 1; r < senders; r++) {
        recv_bounded(&g->n_pieces[r], 1, MPI_INT, r, 1, comm, timeout_ns);
        g->pieces[r] = tdm_xcalloc((size_t)(g->n_pieces[r] ? g->n_pieces[r] : 1), sizeof **g->pieces);
        recv_bounded(g->pieces[r], (int)(sizeof **g->pieces * (size_t)g->n_pieces[r]), MPI_BYTE, r, 3, comm,
                     timeout_ns);
    }
    int64_t maxn = 1;
    for (int i = 0; i < pt->n; i++)
        if (pt->p[i].trainable && pt->p[i].numel > maxn) maxn = pt->p[i].numel;
    g->m = tdm_xmalloc(sizeof(float) * (size_t)maxn);
    g->v = tdm_xmalloc(sizeof(float) * (size_t)maxn);
    if (sw) g->w = tdm_xmalloc(sizeof(float) * (size_t)maxn);
    return g;
}

/* Assembles parameters next_param .. `upto` (inclusive) into s->m, s->v, receiving every
 * piece the other ranks send for them (those before `upto` are received and dropped: a
 * parameter the writer did not ask for, or all of them after a failed write, so that no
 * sender is left blocked). Returns 0, or -1 when the pieces do not cover `upto`. */
static int assemble_upto(tdm_ddp_state_gather *s, int upto) {
    const tdm_param_table *pt = s->pt;
    int64_t covered = 0;
    for (; s->next_param <= upto; s->next_param++) {
        int i = s->next_param;
        covered = 0;
        for (int r = 0; r < s->senders; r++) {
            for (; s->next[r] < s->n_pieces[r] && s->pieces[r][s->next[r]].param == i; s->next[r]++) {
                const tdm_ddp_opt_piece *p = &s->pieces[r][s->next[r]];
                float *dm = s->m + p->param_offset, *dv = s->v + p->param_offset;
                float *dw = s->w ? s->w + p->param_offset : NULL;
                if (r == 0) {
                    memcpy(dm, s->own_m + p->state_offset, sizeof(float) * (size_t)p->count);
                    memcpy(dv, s->own_v + p->state_offset, sizeof(float) * (size_t)p->count);
                    if (dw) memcpy(dw, s->own_w + p->state_offset, sizeof(float) * (size_t)p->count);
                } else {
                    recv_floats(dm, p->count, r, 4, s->comm, s->timeout_ns);
                    recv_floats(dv, p->count, r, 5, s->comm, s->timeout_ns);
                    if (dw) recv_floats(dw, p->count, r, 6, s->comm, s->timeout_ns);
                }
                covered += p->count;
            }
        }
    }
    return upto < 0 || covered == pt->p[upto].numel ? 0 : -1;
}

const float *tdm_ddp_state_gather_get(tdm_ddp_state_gather *s, int param, int which, tdm_error *err) {
    const char *name = s->pt->p[param].name;
    if (which == 0) {
        if (param < s->next_param || assemble_upto(s, param) != 0) {
            tdm_errorf(err, "the optimizer shards do not cover parameter %s", name);
            return NULL;
        }
        return s->m;
    }
    if (param != s->next_param - 1 || (which == 2 && !s->w)) { /* v (and w) right after m of the same parameter */
        tdm_errorf(err, "%s of %s asked before its exp_avg", which == 1 ? "exp_avg_sq" : "fp32_param", name);
        return NULL;
    }
    return which == 1 ? s->v : s->w;
}

void tdm_ddp_state_gather_end(tdm_ddp_state_gather *g) {
    if (!g) return;
    assemble_upto(g, g->pt->n - 1); /* after a failed write: what the senders still have in flight */
    for (int r = 0; r < g->senders; r++) free(g->pieces[r]);
    free(g->pieces);
    free(g->n_pieces);
    free(g->next);
    free(g->m);
    free(g->v);
    free(g->w);
    free(g);
}
