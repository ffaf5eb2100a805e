# trainer/trainer.mk — the trainer: for now the fp32 layer kernels of the CPU backend (NHWC, CBLAS).
lib_libfp_a_SOURCES += trainer/layers.h trainer/cpu/workspace.c trainer/cpu/conv.c \
	trainer/cpu/batchnorm.c trainer/cpu/pool.c trainer/cpu/elementwise.c trainer/cpu/linear.c trainer/cpu/gemm.h trainer/cpu/gemm.c \
	trainer/cpu/xent.c trainer/cpu/update_delta.c

# The backend table (trainer/backend.h) and its CPU implementation over the kernels above.
lib_libfp_a_SOURCES += trainer/backend.h trainer/backend_check.h trainer/backend_check.c trainer/backend_cpu.h \
	trainer/cpu/backend_cpu.c \
	trainer/cpu/backend_cpu_elementwise.c trainer/cpu/backend_cpu_layers.c trainer/cpu/backend_cpu_bn_act.c
# The synchronised batchnorm's ops (--sync-bn): their checks and the CPU implementation.
lib_libfp_a_SOURCES += trainer/backend_sync_bn.h trainer/backend_sync_bn.c trainer/cpu/sync_bn.c
check_PROGRAMS += tests/test_sync_bn
TESTS += tests/test_sync_bn
tests_test_sync_bn_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_layers_conv tests/test_layers_misc tests/test_backend_cpu
TESTS += tests/test_layers_conv tests/test_layers_misc tests/test_backend_cpu
tests_test_backend_cpu_LDADD = $(TEST_LDADD)
tests_test_layers_conv_LDADD = $(TEST_LDADD)
tests_test_layers_misc_LDADD = $(TEST_LDADD)

BENCHMARKS += bench/bench_conv
bench_bench_conv_LDADD = $(FP_LDADD)

# The model brick: node list, planning, forward/backward, the ResNet zoo; `fp16probe models`.
lib_libfp_a_SOURCES += trainer/model.h trainer/model_internal.h trainer/model_build.c trainer/model_init.c \
	trainer/model_info.c trainer/model_plan.c trainer/model_policy.c trainer/model_forward.c \
	trainer/model_backward.c trainer/model_fuse.c trainer/model_clone.c trainer/model_st.c trainer/model_device.c trainer/resnet.c \
	trainer/model_sync_bn.c
fp16probe_SOURCES += cli/cmd_models.c

check_PROGRAMS += tests/test_model tests/test_model_reference tests/test_model_device tests/test_model_fuse
TESTS += tests/test_model tests/test_model_reference tests/test_model_device tests/test_model_fuse
tests_test_model_fuse_LDADD = $(TEST_LDADD)
tests_test_model_device_LDADD = $(TEST_LDADD)
tests_test_model_LDADD = $(TEST_LDADD)
tests_test_model_reference_LDADD = $(TEST_LDADD)
tests_test_model_reference_CPPFLAGS = $(AM_CPPFLAGS) -DFIXTURE_DIR='"$(abs_top_srcdir)/tests/fixtures"'
EXTRA_DIST += tests/fixtures/make_model_reference.py \
	tests/fixtures/model/resnet_basic_w8.safetensors \
	tests/fixtures/model/resnet_bottleneck_w4.safetensors

BENCHMARKS += bench/bench_train_step
bench_bench_train_step_SOURCES = bench/bench_train_step.c $(BENCH_COMMON)
bench_bench_train_step_LDADD = $(FP_LDADD)


# Data-parallel training's communicator (trainer/dist/): MPI ranks and their all-reduce; NCCL for GPU ranks.
lib_libfp_a_SOURCES += trainer/dist/dist.h trainer/dist/dist_internal.h trainer/dist/dist_mpi.c
if HAVE_NCCL
lib_libfp_a_SOURCES += trainer/dist/dist_nccl.c
endif
# The NCCL path on one GPU without mpirun (a one-rank communicator; tests/gpu/check runs it). It tests the NCCL
# build only, yet is built in every one and skips there without NCCL: tools/gpu-bundle makes every
# tests/gpu/test_*.c program, which a program under `if HAVE_NCCL` would break in a CUDA build without MPI.
check_PROGRAMS += tests/gpu/test_nccl_one_rank
TESTS += tests/gpu/test_nccl_one_rank
# What several tests/gpu programs share (not a test_*.c: tests/gpu/check runs every one of those as a program).
GPU_TEST_UTIL = tests/gpu/gpu_testutil.c tests/gpu/gpu_testutil.h
tests_gpu_test_nccl_one_rank_SOURCES = tests/gpu/test_nccl_one_rank.c $(GPU_TEST_UTIL)
tests_gpu_test_nccl_one_rank_LDADD = $(TEST_LDADD)

# Data-parallel tests: the TAP program runs under mpirun from test_dist.sh (which skips without mpirun).
check_PROGRAMS += tests/test_dist
DIST_TEST_UTIL = tests/dist_testutil.c tests/dist_testutil.h
tests_test_dist_SOURCES = tests/test_dist.c $(DIST_TEST_UTIL)
tests_test_dist_LDADD = $(TEST_LDADD)
TESTS += tests/test_dist.sh
dist_check_SCRIPTS += tests/test_dist.sh
# ... and --sync-bn, batchnorm over the global batch (test_dist_sync_bn.sh, the same way).
check_PROGRAMS += tests/test_dist_sync_bn
tests_test_dist_sync_bn_SOURCES = tests/test_dist_sync_bn.c $(DIST_TEST_UTIL)
tests_test_dist_sync_bn_LDADD = $(TEST_LDADD)
TESTS += tests/test_dist_sync_bn.sh
dist_check_SCRIPTS += tests/test_dist_sync_bn.sh
# ... and the all-reduce overlapped with the backward (test_dist_overlap.sh, the same way).
check_PROGRAMS += tests/test_dist_overlap
tests_test_dist_overlap_SOURCES = tests/test_dist_overlap.c $(DIST_TEST_UTIL)
tests_test_dist_overlap_LDADD = $(TEST_LDADD)
TESTS += tests/test_dist_overlap.sh
dist_check_SCRIPTS += tests/test_dist_overlap.sh
