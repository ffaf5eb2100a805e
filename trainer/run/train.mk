# trainer/run/train.mk — what a training run is made of: the arm (one model under one precision policy with its
# optimizer, lr schedule, scaler and memory accounting; its device step in arm_device.c), one-file checkpoints,
# the run's settings and their defaults, recording a run into the store, its configuration JSON, the machine's
# names; and `fp16probe train` (a comparison of one arm: compare.mk holds the loop); their tests.
lib_libfp_a_SOURCES += trainer/run/arm.h trainer/run/arm_internal.h trainer/run/arm.c trainer/run/arm_create.c \
	trainer/run/arm_reduce.c trainer/run/arm_eval.c trainer/run/arm_report.c \
	trainer/run/checkpoint.h trainer/run/checkpoint.c \
	trainer/run/train.h trainer/run/train.c trainer/run/record.h trainer/run/record.c \
	trainer/run/config_json.h trainer/run/config_json.c trainer/run/environment.h trainer/run/environment.c trainer/run/blas_core.c \
	trainer/run/arm_sync_bn.c
# The arm's device step (arm_device.c) and what it runs on (CUDA builds).
FP_ARM_DEVICE_SOURCES = trainer/run/arm_device_internal.h trainer/run/arm_device.c trainer/run/arm_device_setup.c \
	trainer/run/arm_device_optim.c trainer/run/arm_device_dist.c trainer/run/arm_device_graph.c
if HAVE_CUDA
lib_libfp_a_SOURCES += $(FP_ARM_DEVICE_SOURCES)
endif
EXTRA_DIST += $(FP_ARM_DEVICE_SOURCES)
fp16probe_SOURCES += cli/cmd_train.c cli/train_options.h cli/train_options.c

check_PROGRAMS += tests/test_arm tests/test_checkpoint
TESTS += tests/test_arm tests/test_checkpoint tests/test_train_cli.sh
tests_test_arm_LDADD = $(TEST_LDADD)
tests_test_checkpoint_LDADD = $(TEST_LDADD)
dist_check_SCRIPTS += tests/test_train_cli.sh
EXTRA_DIST += bench/train_demo.sh
