/* bytelevel.h - UTF-8 repair and GPT-2's byte-to-unicode map.
 *
 * Byte-level BPE never sees raw bytes: every byte b of a piece is first replaced by
 * one printable code point, tdm_bytelevel_char(b), so that vocabulary entries are
 * readable strings ("Ġthe" is " the"). Bytes 33-126, 161-172 and 174-255 map to
 * themselves; the other 68 bytes map, in increasing byte order, to U+0100 + n.
 *
 * UTF-8 repair follows the WHATWG Encoding Standard decoder (the one TextDecoder,
 * Node's Buffer.toString and Python's errors="replace" use): each maximal subpart of
 * an ill-formed sequence becomes one U+FFFD.
 */
#ifndef TDM_TOKENIZER_BYTELEVEL_H
#define TDM_TOKENIZER_BYTELEVEL_H

#include <stddef.h>
#include <stdint.h>

/* The code point that stands for byte b. */
uint32_t tdm_bytelevel_char(uint8_t b);

/* The byte that code point cp stands for, or -1 when cp is not in the map. */
int tdm_bytelevel_byte(uint32_t cp);

/* Writes the UTF-8 encoding of cp (<= 0x10FFFF) to out (4 bytes room); returns its length. */
int tdm_utf8_put(char *out, uint32_t cp);

/* Decodes one code point of valid UTF-8 at s[0..n); returns its length (>= 1) and
 * writes the code point. On an ill-formed sequence returns the length of its maximal
 * subpart and writes U+FFFD. */
int tdm_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* 1 when s[0..n) is well-formed UTF-8. */
int tdm_utf8_valid(const char *s, size_t n);

/* s[0..n) with each maximal ill-formed subpart replaced by U+FFFD. Returns a malloc'ed,
 * NUL-terminated copy (at most 3n bytes) and its length in *out_len. */
char *tdm_utf8_repair(const char *s, size_t n, size_t *out_len);

#endif
