/* tensorboard.h - TensorBoard event files, as Megatron's --tensorboard-dir writes them, so
 * that a tandem run opens in TensorBoard next to Megatron runs with the same tags
 * ("lm loss", "learning-rate", "grad-norm", "... vs samples", "lm loss validation", ...).
 *
 * The format (TensorFlow's TFRecord of Event protocol buffers), written without any
 * library:
 *   file  events.out.tfevents.<10-digit unix time>.<hostname>.<pid>.0 (PyTorch's naming;
 *         TensorBoard reads every file whose name contains "tfevents")
 *   record  uint64 length (little endian) | uint32 masked_crc32c(length bytes) |
 *           data | uint32 masked_crc32c(data)
 *   masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 with c = CRC-32C (Castagnoli)
 *   data   an Event: wall_time (1, double), step (2, int64), then either file_version
 *          (3, string "brain.Event:2", the first record) or summary (5, Summary)
 *   Summary  value (1, repeated Value);  Value  tag (1, string), simple_value (2, float)
 */
#ifndef TDM_TRAIN_TENSORBOARD_H
#define TDM_TRAIN_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* CRC-32C of n bytes (the reflected Castagnoli polynomial 0x82F63B78), and its TFRecord mask. */
uint32_t tdm_crc32c(const void *data, size_t n);
uint32_t tdm_tfrecord_mask(uint32_t crc);

typedef struct tdm_tb_writer tdm_tb_writer;

/* Creates dir (and its parents) and a new event file in it, starting with the file-version
 * record. A resumed run writes a new file beside the old ones, as TensorBoard's writers do. */
tdm_tb_writer *tdm_tb_open(const char *dir, tdm_error *err);
/* One scalar event; flushed, so a killed run keeps every event written. */
int tdm_tb_scalar(tdm_tb_writer *w, const char *tag, double value, int64_t step, tdm_error *err);
/* The event file's path. */
const char *tdm_tb_path(const tdm_tb_writer *w);
void tdm_tb_close(tdm_tb_writer *w);

#endif
