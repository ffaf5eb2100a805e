# trainer/trainer.mk — the trainer: for now the fp32 layer kernels of the CPU backend (NHWC, CBLAS).
lib_libfp_a_SOURCES += trainer/layers.h trainer/cpu/workspace.c trainer/cpu/conv.c \
	trainer/cpu/batchnorm.c trainer/cpu/pool.c trainer/cpu/elementwise.c trainer/cpu/linear.c \
	trainer/cpu/xent.c

check_PROGRAMS += tests/test_layers_conv tests/test_layers_misc
TESTS += tests/test_layers_conv tests/test_layers_misc
tests_test_layers_conv_LDADD = $(TEST_LDADD)
tests_test_layers_misc_LDADD = $(TEST_LDADD)

BENCHMARKS += bench/bench_conv
bench_bench_conv_LDADD = $(FP_LDADD)
