# trainer/cuda/cudnn.mk — the CUDA backend's layer kernels on cuDNN 9 and cuBLASLt (C API in
# cudnn_ops.h; built only with the CUDA backend), their GPU test, and the GPU check script.
FP_CUDNN_SOURCES = trainer/cuda/cudnn_ops.h trainer/cuda/cudnn_internal.h trainer/cuda/cudnn_ctx.c \
	trainer/cuda/cudnn_conv.c trainer/cuda/cudnn_bn.c trainer/cuda/cudnn_bn_act.c trainer/cuda/cudnn_pool_act.c \
	trainer/cuda/cublas_linear.c
if HAVE_CUDA
lib_libfp_a_SOURCES += $(FP_CUDNN_SOURCES)
endif
EXTRA_DIST += $(FP_CUDNN_SOURCES) tests/gpu/check tests/gpu/bare-root tools/gpu-bundle tools/gpu-build-from-kit

# Each op against the CPU reference kernels (skips with its reason without CUDA or a GPU).
check_PROGRAMS += tests/gpu/test_cudnn_ops
TESTS += tests/gpu/test_cudnn_ops
tests_gpu_test_cudnn_ops_LDADD = $(TEST_LDADD)
