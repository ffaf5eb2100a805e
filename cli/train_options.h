/* train_options.h — the options `fp16probe train` and `fp16probe compare` share (model, data, sizes,
 * optimizer, schedule, seed, threads, device, database, evaluation, weights): one parser, one place
 * that turns them into an arm configuration, one device note. Errors print one line and give 2. */
#ifndef FP_CLI_TRAIN_OPTIONS_H
#define FP_CLI_TRAIN_OPTIONS_H

#include <stdint.h>
#include <stdio.h>
#include "trainer/run/train.h"

typedef struct {
    const char *cmd;                  /* "train", "compare": the prefix of error messages */
    const char *model, *data, *optimizer, *schedule, *device, *db, *weights;
    int64_t steps, warmup, seed, eval_batches;
    int batch, image_size, classes, threads, eval_every;
    double lr, momentum, weight_decay;   /* NaN: the optimizer's default */
    /* 1 where the user gave the option (device-dependent defaults apply to the others) */
    int set_steps, set_batch, set_image_size, set_lr, set_warmup, set_eval_every, set_eval_batches;
    char device_text[300];            /* fp_train_options_pick_device: "cuda: <GPU name>" */
    char device_note[400];            /* ... or the "gpu: unavailable" line ("" when none) */
} fp_train_options;

/* cmd, no model, synthetic data, sgd, constant schedule, device cpu, FP_STORE_DEFAULT_PATH, 100 steps, batch
 * 32, 32 px, classes from the dataset, threads = online CPUs, eval at the end over 50 batches. */
void fp_train_options_init(fp_train_options *o, const char *cmd);

/* When argv[*i] is a shared option: its value is parsed and stored, *i advanced past it, return 1; 0 when
 * it is another argument; 2 on an error (printed). */
int fp_train_options_parse(fp_train_options *o, int argc, char **argv, int *i);

/* The head of `train` / `compare`'s argument loop for argv[*i]: -h / --help prints usage(stdout) and gives
 * 3 (the command exits 0); otherwise as fp_train_options_parse (1 taken, 0 the command's own, 2 error). */
int fp_train_options_next(fp_train_options *o, int argc, char **argv, int *i, void (*usage)(FILE *to));

/* Integer / number parsing with the command's error line (2 on error, printed). */
int fp_cli_parse_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
int fp_cli_parse_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);

/* Checks optimizer, schedule and device names and fills c (model, sizes, optimizer with the defaults of
 * its kind — sgd: lr 0.1, momentum 0.9, weight decay 5e-4 —, schedule over c->steps, seed, threads,
 * weights, data, evaluation, database; the policy is left alone). 0, or 2 with the error printed. */
int fp_train_options_apply(const fp_train_options *o, fp_train_config *c);

/* --device cpu|cuda|auto into c: cuda and auto take the GPU when lib/gpu_detect.h says one is usable and
 * the binary has the CUDA backend (c->arm.backend = the CUDA backend, c->device = "cuda: <GPU name>", text
 * kept in o); otherwise the CPU path, with ONE line for stderr kept in o->device_note: "fp16probe: <cmd>:
 * gpu: unavailable: <why>; training on the CPU". `--device cuda` without a usable GPU trains on the CPU
 * too (no error: the comparison is still worth having; the line and the runs table's device column say
 * where it ran). Returns 1 when the GPU trains, else 0. */
int fp_train_options_pick_device(fp_train_options *o, fp_train_config *c);
/* Prints o->device_note (when there is one) once the command's arguments are known to be good, so that a
 * usage error stays one line. */
void fp_train_options_device_note(const fp_train_options *o);

/* "m:ss" / "h:mm:ss", "?" when unknown. */
void fp_cli_fmt_time(char *buf, size_t size, double s);

/* The end of a training progress line: "  scale S" when S != 1, "  skipped N" when N != 0, "  eta T\n". */
void fp_cli_print_progress_tail(double scale, int64_t skipped, double eta_s);

#endif
