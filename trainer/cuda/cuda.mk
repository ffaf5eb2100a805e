# trainer/cuda/cuda.mk — the CUDA backend's own kernels (loss, AMP, SGD, Adam, histogram, layer error), the
# per-arm device arena, the kernel-name classifier, and their tests (GPU tests skip without one).
if HAVE_CUDA
lib_libfp_a_SOURCES += trainer/cuda/kernels.h trainer/cuda/xent.cu trainer/cuda/amp.cu trainer/cuda/sgd.cu \
	trainer/cuda/adam.cu trainer/cuda/hist.cu trainer/cuda/layer_error.cu trainer/cuda/step.cu \
	trainer/cuda/update_delta.cu
# nvcc objects get no automatic header dependencies: list them.
FP_CUDA_KERNEL_DEPS = trainer/cuda/kernels.h lib/error.h lib/hist.h lib/hist_counts.h lib/formats.h trainer/precision.h \
	trainer/optim.h
trainer/cuda/xent.$(OBJEXT) trainer/cuda/amp.$(OBJEXT) trainer/cuda/sgd.$(OBJEXT): $(FP_CUDA_KERNEL_DEPS)
trainer/cuda/adam.$(OBJEXT): $(FP_CUDA_KERNEL_DEPS)
trainer/cuda/hist.$(OBJEXT) trainer/cuda/layer_error.$(OBJEXT) trainer/cuda/step.$(OBJEXT): $(FP_CUDA_KERNEL_DEPS)
trainer/cuda/update_delta.$(OBJEXT): $(FP_CUDA_KERNEL_DEPS)
trainer/cuda/layer_error.$(OBJEXT): trainer/cuda/layer_error_dev.h lib/dtype.h
endif
# The layer error's sums on the device for the analysis (every build includes the header: trainer/analysis).
EXTRA_DIST += trainer/cuda/layer_error_dev.h

# The backend table's CUDA implementation (trainer/backend_cuda.h) over cuDNN / cuBLASLt, the kernels
# above and its own element-wise / pooling kernels.
FP_CUDA_BACKEND_SOURCES = trainer/backend_cuda.h trainer/cuda/backend_cuda_internal.h trainer/cuda/backend_cuda.c \
	trainer/cuda/backend_cuda_memory.c trainer/cuda/backend_cuda_weight_copy.c trainer/cuda/backend_cuda_elementwise.c \
	trainer/cuda/host_register.c trainer/cuda/upload.c trainer/cuda/backend_cuda_layers.c trainer/cuda/backend_kernels.h \
	trainer/cuda/typed_access.cuh trainer/cuda/backend_kernels.cu trainer/cuda/backend_cuda_sync_bn.c trainer/cuda/sync_bn.h trainer/cuda/sync_bn.cu
if HAVE_CUDA
lib_libfp_a_SOURCES += $(FP_CUDA_BACKEND_SOURCES)
trainer/cuda/backend_kernels.$(OBJEXT): trainer/cuda/backend_kernels.h trainer/cuda/typed_access.cuh $(FP_CUDA_KERNEL_DEPS)
trainer/cuda/sync_bn.$(OBJEXT): trainer/cuda/sync_bn.h trainer/cuda/typed_access.cuh trainer/cuda/backend_kernels.h $(FP_CUDA_KERNEL_DEPS)
endif
EXTRA_DIST += $(FP_CUDA_BACKEND_SOURCES)
EXTRA_DIST += trainer/cuda/kernels.h trainer/cuda/xent.cu trainer/cuda/amp.cu trainer/cuda/sgd.cu \
	trainer/cuda/adam.cu trainer/cuda/hist.cu trainer/cuda/layer_error.cu trainer/cuda/step.cu trainer/cuda/update_delta.cu

# The arena: bookkeeping in C (CPU-tested with a host block), cudaMalloc only in a CUDA build.
lib_libfp_a_SOURCES += trainer/cuda/arena.c trainer/cuda/arena.h
check_PROGRAMS += tests/test_arena
TESTS += tests/test_arena
tests_test_arena_LDADD = $(TEST_LDADD)

# The backend kernels' 64-bit index and grid arithmetic (backend_kernels.h, host-callable): every build.
check_PROGRAMS += tests/test_cuda_index
TESTS += tests/test_cuda_index
tests_test_cuda_index_LDADD = $(TEST_LDADD)

# GPU tests: each kernel against its CPU reference; they skip with a TAP reason without a GPU.
check_PROGRAMS += tests/gpu/test_cuda_kernels
TESTS += tests/gpu/test_cuda_kernels
tests_gpu_test_cuda_kernels_SOURCES = tests/gpu/test_cuda_kernels.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_kernels_LDADD = $(TEST_LDADD)

# The CUDA backend against the CPU backend: model logits / loss / gradients per policy, an arm step.
check_PROGRAMS += tests/gpu/test_cuda_backend tests/gpu/test_cuda_backend_ops
TESTS += tests/gpu/test_cuda_backend tests/gpu/test_cuda_backend_ops
tests_gpu_test_cuda_backend_SOURCES = tests/gpu/test_cuda_backend.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_backend_LDADD = $(TEST_LDADD)
tests_gpu_test_cuda_backend_ops_SOURCES = tests/gpu/test_cuda_backend_ops.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_backend_ops_LDADD = $(TEST_LDADD)
# The fused batchnorm (+ add) + relu against the CPU's, and a device model with fusion on vs off.
check_PROGRAMS += tests/gpu/test_cuda_bn_act
TESTS += tests/gpu/test_cuda_bn_act
tests_gpu_test_cuda_bn_act_SOURCES = tests/gpu/test_cuda_bn_act.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_bn_act_LDADD = $(TEST_LDADD)

# The synchronised batchnorm's ops (--sync-bn) against the CPU backend's, one rank's (identity) reduction.
check_PROGRAMS += tests/gpu/test_cuda_sync_bn
TESTS += tests/gpu/test_cuda_sync_bn
tests_gpu_test_cuda_sync_bn_SOURCES = tests/gpu/test_cuda_sync_bn.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_sync_bn_LDADD = $(TEST_LDADD)

# The element-wise kernels' 8-wide and one-at-a-time paths (odd sizes, misaligned views, in place) against
# the CPU backend: bit for bit.
check_PROGRAMS += tests/gpu/test_cuda_elementwise
TESTS += tests/gpu/test_cuda_elementwise
tests_gpu_test_cuda_elementwise_SOURCES = tests/gpu/test_cuda_elementwise.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_elementwise_LDADD = $(TEST_LDADD)

# Staged uploads (pinned, double-buffered, copy stream): every upload lands, none overtakes the work queued
# before it, a model's loss is the same bit for bit with and without the staging.
check_PROGRAMS += tests/gpu/test_cuda_upload
TESTS += tests/gpu/test_cuda_upload
tests_gpu_test_cuda_upload_LDADD = $(TEST_LDADD)

# The 16-bit weight copy the SGD kernel writes once per step: the cast of the weights bit for bit, the same
# logits as casting per call, dropped on a host write; an arm step writes it.
check_PROGRAMS += tests/gpu/test_cuda_weight_copy
TESTS += tests/gpu/test_cuda_weight_copy
tests_gpu_test_cuda_weight_copy_SOURCES = tests/gpu/test_cuda_weight_copy.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_weight_copy_LDADD = $(TEST_LDADD)

# The host off the step (issue 22): the device loss-scaler update against fp_grad_scaler over a sequence with
# injected Inf / NaN steps, the SGD kernel's skip flag, the first non-finite segment; a device arm step against
# the previous (host-synchronising) path over K steps with overflows, and one host wait per step.
check_PROGRAMS += tests/gpu/test_cuda_step_scaler tests/gpu/test_cuda_arm_step
TESTS += tests/gpu/test_cuda_step_scaler tests/gpu/test_cuda_arm_step
tests_gpu_test_cuda_step_scaler_SOURCES = tests/gpu/test_cuda_step_scaler.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_step_scaler_LDADD = $(TEST_LDADD)
tests_gpu_test_cuda_arm_step_SOURCES = tests/gpu/test_cuda_arm_step.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_arm_step_LDADD = $(TEST_LDADD)

# The device step as a CUDA graph (--cuda-graph, issue 22 point 1): captured once, replayed, against the eager step
# on the same batches (tinynet / resnet18, fp16 with skips and scale changes / fp32, SGD / Adam): bit for bit; a
# failed capture trains on eagerly.
check_PROGRAMS += tests/gpu/test_cuda_graph
TESTS += tests/gpu/test_cuda_graph
tests_gpu_test_cuda_graph_SOURCES = tests/gpu/test_cuda_graph.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_graph_LDADD = $(TEST_LDADD)

# Adam / AdamW on the device (issue 22): the kernel against fp_optim_step over several steps (fp32 / fp16 / bf16
# moments, a skipped step, the 16-bit copy; bit for bit on an FMA host), device arms without host mirrors, the
# moments read back and uploaded again (a checkpoint) without changing the run.
check_PROGRAMS += tests/gpu/test_cuda_adam
TESTS += tests/gpu/test_cuda_adam
tests_gpu_test_cuda_adam_SOURCES = tests/gpu/test_cuda_adam.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_adam_LDADD = $(TEST_LDADD)

# Device histograms for the probes (the backend's hist op, ready counts through the hist probe) against
# lib/hist: counts bit for bit.
check_PROGRAMS += tests/gpu/test_cuda_hist_probe
TESTS += tests/gpu/test_cuda_hist_probe
tests_gpu_test_cuda_hist_probe_SOURCES = tests/gpu/test_cuda_hist_probe.c $(GPU_TEST_UTIL)
tests_gpu_test_cuda_hist_probe_LDADD = $(TEST_LDADD)

# The per-layer rounding error summed on the device (the kernel, and analysis.h fp_layer_error_on on a backend
# instance) against fp_layer_error: fp32 / fp16 / bf16, odd sizes, zeros, Inf / NaN; one host wait per call.
check_PROGRAMS += tests/gpu/test_cuda_layer_error
TESTS += tests/gpu/test_cuda_layer_error
tests_gpu_test_cuda_layer_error_LDADD = $(TEST_LDADD)

# Kernel-name classification (every build: the store and the report use it without CUDA too).
lib_libfp_a_SOURCES += probe/kernel_class.c probe/kernel_class.h
check_PROGRAMS += tests/test_kernel_class
TESTS += tests/test_kernel_class
tests_test_kernel_class_LDADD = $(TEST_LDADD)
