/* log.h - a rank-aware logger.
 *
 * tdm_log_info prints on rank 0 only (Megatron's print_rank_0); tdm_log_all prints on
 * every rank with a "[rank r] " prefix; warnings and errors go to stderr on every rank.
 * Before tdm_log_set_rank is called the process counts as rank 0 of 1.
 */
#ifndef TDM_LOG_H
#define TDM_LOG_H

void tdm_log_set_rank(int rank, int world);
int tdm_log_rank(void);
int tdm_log_world(void);
/* Silences tdm_log_info (tests, and the A/B driver's inner runs). */
void tdm_log_set_quiet(int quiet);
int tdm_log_quiet(void);

void tdm_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tdm_log_all(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tdm_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tdm_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
