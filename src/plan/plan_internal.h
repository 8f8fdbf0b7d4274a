/* plan_internal.h - what the plan module's files share and nothing outside it uses. */
#ifndef TDM_PLAN_INTERNAL_H
#define TDM_PLAN_INTERNAL_H

/* Appends one line, printf-formatted, to the NUL-terminated notes of capacity cap (a line that does not fit is
 * cut; nothing is written once the notes are full). notes may be NULL. */
void tdm_plan__note(char *notes, int cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
