/* pretok.h - the pre-tokenizer: splits normalised text into pieces with the Split
 * regex of tokenizer.json (behavior "Isolated": every match is a piece, and so is
 * any text between two matches).
 *
 * The pattern is compiled with PCRE2 (UTF + UCP, JIT). Two rewrites make PCRE2 agree
 * with the JavaScript reference (transformers.js), which our tests compare against:
 *  - the case-insensitive contraction group "(?i:'s|'t|...)" becomes explicit
 *    [sS]-style classes, as transformers.js does; Unicode case folding would
 *    otherwise also match e.g. "'ſ" (U+017F folds to 's');
 *  - \s and \S become ECMAScript's white-space set, which differs from PCRE2's
 *    Unicode \s at U+FEFF (white space in JavaScript) and U+0085 (not).
 * \p{L} and \p{N} come from the Unicode tables of the system's PCRE2 (Unicode 14 in
 * PCRE2 10.42), NFC from utf8proc's (Unicode 15 in 2.8): a letter or digit assigned
 * later (CJK Extension H at U+31350, say) is "other" here but a letter to a reference
 * with newer tables (transformers.js on a recent Node), so the pieces around it, and
 * the ids, can differ from that reference. Code points assigned by Unicode 14 agree.
 */
#ifndef TDM_TOKENIZER_PRETOK_H
#define TDM_TOKENIZER_PRETOK_H

#include <stddef.h>

#include "core/error.h"

typedef struct tdm_pretok tdm_pretok;

/* Compiles `pattern` (the "Regex" string of a Split pre-tokenizer); `name` (the file)
 * prefixes errors. */
tdm_pretok *tdm_pretok_create(const char *pattern, const char *name, tdm_error *err);
void tdm_pretok_free(tdm_pretok *p);

/* Called once per piece, in order; a non-zero return stops the split and is returned. */
typedef int (*tdm_piece_fn)(const char *piece, size_t len, void *ctx);

/* Splits valid UTF-8 text[0..len) into pieces. Returns 0, fn's non-zero return, or
 * -1 with err set when the regex engine fails (e.g. its match limit). */
int tdm_pretok_split(const tdm_pretok *p, const char *text, size_t len, tdm_piece_fn fn, void *ctx, tdm_error *err);

#endif
