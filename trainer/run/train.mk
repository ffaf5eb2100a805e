# trainer/run/train.mk — what a training run is made of: the arm (one model under one precision policy with its
# optimizer, lr schedule, scaler and memory accounting; its device step in arm_device.c), one-file checkpoints,
# the run's settings and their defaults, recording a run into the store, its configuration JSON, the machine's
# names; and `fp16probe train` (a comparison of one arm: compare.mk holds the loop); their tests.
lib_libfp_a_SOURCES += trainer/run/arm.h trainer/run/arm_internal.h trainer/run/arm.c \
	trainer/run/checkpoint.h trainer/run/checkpoint.c \
	trainer/run/train.h trainer/run/train.c trainer/run/record.h trainer/run/record.c \
	trainer/run/config_json.h trainer/run/config_json.c trainer/run/environment.h trainer/run/environment.c trainer/run/blas_core.c \
	trainer/run/arm_sync_bn.c
# The arm's device step (arm_device.c: CUDA builds).
if HAVE_CUDA
lib_libfp_a_SOURCES += trainer/run/arm_device.c
endif
EXTRA_DIST += trainer/run/arm_device.c
fp16probe_SOURCES += cli/cmd_train.c cli/train_options.h cli/train_options.c

check_PROGRAMS += tests/test_arm tests/test_checkpoint
TESTS += tests/test_arm tests/test_checkpoint tests/test_train_cli.sh
tests_test_arm_LDADD = $(TEST_LDADD)
tests_test_checkpoint_LDADD = $(TEST_LDADD)
dist_check_SCRIPTS += tests/test_train_cli.sh
EXTRA_DIST += bench/train_demo.sh
