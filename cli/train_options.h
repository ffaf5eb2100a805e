/* train_options.h — the options `fp16probe train` and `fp16probe compare` share (model, precision, data,
 * augmentation and shuffling, sizes, optimizer, schedule, seed, threads, device, database, evaluation,
 * weights, probe periods): one parser that keeps only what the user gave, one place that lays it over the
 * library's defaults (trainer/run/compare.h fp_compare_config_default*), one device note. Errors print one
 * line and give 2. */
#ifndef FP_CLI_TRAIN_OPTIONS_H
#define FP_CLI_TRAIN_OPTIONS_H

#include <stdint.h>
#include <stdio.h>
#include "trainer/run/compare.h"

typedef struct {
    const char *cmd;                  /* "train", "compare": the prefix of error messages */
    /* What the user gave: a string is NULL, a set_* flag 0, when the option was not given. */
    const char *model, *precision, *data, *optimizer, *schedule, *device, *db, *weights, *allreduce;
    int64_t steps, warmup, seed, eval_batches;
    int batch, image_size, classes, threads, eval_every, augment, shuffle, hist_every, error_every, trace_every;
    double lr, momentum, weight_decay;
    int cuda_graph;                   /* --cuda-graph: GPU arms replay their step as a CUDA graph */
    int sync_bn;                      /* --sync-bn: batchnorm over the global batch under mpirun */
    int set_steps, set_warmup, set_seed, set_eval_batches, set_batch, set_image_size, set_classes, set_threads,
        set_eval_every, set_augment, set_shuffle, set_hist, set_error, set_trace, set_lr, set_momentum,
        set_weight_decay;
    /* fp_train_options_pick_device */
    int gpu;                          /* 1: the CUDA backend trains */
    char device_text[300];            /* "cuda: <GPU name>" */
    char device_note[400];            /* ... or the "gpu: unavailable" line ("" when none) */
    /* fp_train_options_dist: the ranks of a job started by mpirun (NULL alone) */
    fp_dist *dist;
} fp_train_options;

/* Nothing given yet. */
void fp_train_options_init(fp_train_options *o, const char *cmd);

/* When argv[*i] is a shared option: its value is parsed and kept, *i advanced past it, return 1; 0 when
 * it is another argument; 2 on an error (printed). */
int fp_train_options_parse(fp_train_options *o, int argc, char **argv, int *i);

/* `train` / `compare`'s argument loop, argv[1] on: -h / --help prints usage(stdout); the shared options as
 * fp_train_options_parse; every other argument goes to own(ctx, argc, argv, &i), which takes it (advancing i
 * past a value) and returns 0, or prints one line and returns nonzero. Returns -1 when every argument was
 * taken, else the command's exit status: 0 after --help, 2 after an error. */
int fp_train_options_args(fp_train_options *o, int argc, char **argv, void (*usage)(FILE *to),
                          int (*own)(void *ctx, int argc, char **argv, int *i), void *ctx);

/* Integer parsing with the command's error line (2 on error, printed): plain decimal only (an optional '-' and
 * digits: no spaces, '+' or hex), within [lo, hi]. */
int fp_cli_parse_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
int fp_cli_parse_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);

/* --device cpu|cuda|auto (dflt when not given: the command's own): cuda and auto take the GPU when
 * lib/gpu_detect.h says one is usable and the binary has the CUDA backend (o->gpu = 1, o->device_text =
 * "cuda: <GPU name>"); otherwise the CPU path, with ONE line for stderr kept in o->device_note: "fp16probe:
 * <cmd>: gpu: unavailable: <why>; training on the CPU". `--device cuda` without a usable GPU trains on the
 * CPU too (no error: the comparison is still worth having; the line and the runs table's device column say
 * where it ran). Returns 1 when the GPU trains, 0 for the CPU, 2 for an unknown device (printed). */
int fp_train_options_pick_device(fp_train_options *o, const char *dflt);

/* Lays what the user gave over cfg (the library's defaults for the command and the device picked): the
 * optimizer kind first (its defaults), then the schedule kind, then the values; the device picked; --db ''
 * records nothing. Checks optimizer and schedule names and --momentum against the optimizer; the policy
 * list and the rest are checked by the library. 0, or 2 with the error printed. */
int fp_train_options_apply(const fp_train_options *o, fp_compare_config *cfg);

/* Data parallel: under an MPI launcher (trainer/dist/dist.h) joins the job and hands it to cfg (base.arm.dist;
 * --allreduce was applied already); a rank other than 0 prints nothing on stdout from here on (rank 0 prints
 * and records). One line and 2 when the build has no MPI (or MPI fails); 0 otherwise (also alone). */
int fp_train_options_dist(fp_train_options *o, fp_compare_config *cfg);
/* The end of a command under MPI: a clean end leaves the job (MPI_Finalize); after a failure it does not wait
 * for the others (mpirun ends them). Returns status. */
int fp_train_options_dist_end(fp_train_options *o, int status);
/* "data parallel: N ranks, global batch B, all-reduce F X ms/step (exposed Y ms, S% of the step), Z MB/step"
 * for arm i (nothing alone). */
void fp_cli_print_dist_summary(const fp_compare_config *cfg, const fp_compare_result *res, int i);

/* Prints o->device_note (when there is one) once the command's arguments are known to be good, so that a
 * usage error stays one line; and with --cuda-graph on the CPU, one line saying it does nothing there; with
 * --sync-bn in one process (no launcher, or one rank), one line saying it does nothing there. */
void fp_train_options_device_note(const fp_train_options *o);

/* "m:ss" / "h:mm:ss", "?" when unknown. */
void fp_cli_fmt_time(char *buf, size_t size, double s);

/* The end of a training progress line: "  scale S" when S != 1, "  skipped N" when N != 0, "  recording waits for
 * a lock on the database (W s of P)" while the store waits out another process's lock, "  eta T\n". */
void fp_cli_print_progress_tail(const fp_compare_progress *p);

#endif
