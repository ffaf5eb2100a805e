# trainer/run/compare.mk — the training loop in the core library: the lockstep comparison (issue 5; `train` is
# a comparison of one arm), its step plan, its probes and one arm's checkpoints; `fp16probe compare` /
# `fp16probe <model>` with its summary table, their tests and the timing of the embedded default. Appends to fp16probe_SOURCES and uses reports/ (summary): included after both.
lib_libfp_a_SOURCES += trainer/run/compare.h trainer/run/compare_internal.h trainer/run/compare.c \
	trainer/run/compare_config.c trainer/run/compare_open.c trainer/run/compare_probes.c \
	trainer/run/compare_checkpoint.c trainer/run/compare_eval.c trainer/run/compare_progress.c \
	trainer/run/compare_dist.c trainer/run/compare_end.c trainer/run/step_plan.h trainer/run/step_plan.c
fp16probe_SOURCES += cli/cmd_compare.c

check_PROGRAMS += tests/test_compare tests/test_step_plan
TESTS += tests/test_compare tests/test_compare_cli.sh tests/test_step_plan
tests_test_step_plan_LDADD = $(TEST_LDADD)
tests_test_compare_SOURCES = tests/test_compare.c $(STORE_TEST_UTIL)
tests_test_compare_LDADD = tests/libtap.a $(REPORT_LDADD)
dist_check_SCRIPTS += tests/test_compare_cli.sh
# The loop while another process holds the database: a short lock waited out, a long one stopping the run.
check_PROGRAMS += tests/test_compare_busy
TESTS += tests/test_compare_busy
tests_test_compare_busy_SOURCES = tests/test_compare_busy.c $(STORE_TEST_UTIL)
tests_test_compare_busy_LDADD = $(TEST_LDADD)

# The GPU probes in a short CUDA comparison (kernel rows, device samples, step energy); skips without a GPU.
check_PROGRAMS += tests/gpu/test_gpu_probes
TESTS += tests/gpu/test_gpu_probes
tests_gpu_test_gpu_probes_SOURCES = tests/gpu/test_gpu_probes.c $(GPU_TEST_UTIL) $(STORE_TEST_UTIL)
tests_gpu_test_gpu_probes_LDADD = $(TEST_LDADD)
# The per-layer rounding error of a device arm measured on the GPU against the host path; skips without a GPU.
check_PROGRAMS += tests/gpu/test_gpu_ride
TESTS += tests/gpu/test_gpu_ride
tests_gpu_test_gpu_ride_SOURCES = tests/gpu/test_gpu_ride.c $(GPU_TEST_UTIL) $(STORE_TEST_UTIL)
tests_gpu_test_gpu_ride_LDADD = $(TEST_LDADD)

# NVML as the comparison uses it (energy counter, the sampler re-targeted per turn) against a stand-in
# libnvidia-ml built here as a shared object and loaded by its path.
check_PROGRAMS += tests/test_compare_nvml
TESTS += tests/test_compare_nvml
tests_test_compare_nvml_SOURCES = tests/test_compare_nvml.c $(STORE_TEST_UTIL)
tests_test_compare_nvml_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NVML='"$(abs_builddir)/tests/libfake_nvml.so"'
tests_test_compare_nvml_LDADD = $(TEST_LDADD)
EXTRA_tests_test_compare_nvml_DEPENDENCIES = tests/libfake_nvml.so
tests/libfake_nvml.so: tests/test_compare_fake_nvml.c
	$(AM_V_CC)$(MKDIR_P) tests && $(CC) -shared -fPIC -O1 -o $@ $(srcdir)/tests/test_compare_fake_nvml.c
CLEANFILES += tests/libfake_nvml.so
EXTRA_DIST += tests/test_compare_fake_nvml.c
# The parameter pass on the GPU (the CUDA update_delta op against the CPU's, the device pass against the host
# pass after GPU arm steps, a comparison's GPU arms running it); skips without a GPU.
check_PROGRAMS += tests/gpu/test_cuda_param_pass
TESTS += tests/gpu/test_cuda_param_pass
tests_gpu_test_cuda_param_pass_SOURCES = tests/gpu/test_cuda_param_pass.c $(GPU_TEST_UTIL) $(STORE_TEST_UTIL) \
	$(PARAM_PASS_TEST_UTIL)
tests_gpu_test_cuda_param_pass_LDADD = $(TEST_LDADD)
