# trainer/analysis/analysis.mk — what compares arms (analysis.h): per-layer rounding error against the fp32
# arm and the precision ride, the parameter pass (histograms of weights / updates, lost updates) riding on
# the optimizer or on a device backend's ops (param_pass_device.c), skipped-step attribution. Above the engine,
# below the runs.
lib_libfp_a_SOURCES += trainer/analysis/analysis.h trainer/analysis/precision_internal.h \
	trainer/analysis/precision_analysis.c trainer/analysis/precision_ride.c trainer/analysis/precision_device.c \
	trainer/analysis/layer_error.c \
	trainer/analysis/skipped_step.c trainer/analysis/param_pass.c trainer/analysis/param_pass_device.c

check_PROGRAMS += tests/test_probe_analysis tests/test_param_pass
TESTS += tests/test_probe_analysis tests/test_param_pass
tests_test_probe_analysis_SOURCES = tests/test_probe_analysis.c $(STORE_TEST_UTIL)
tests_test_probe_analysis_LDADD = $(TEST_LDADD)
tests_test_param_pass_LDADD = $(TEST_LDADD)
# issue 19: the summary's precision accounting (reports/summary_numerics.c) on a recorded four-arm session
check_PROGRAMS += tests/test_summary_precision
TESTS += tests/test_summary_precision
tests_test_summary_precision_SOURCES = tests/test_summary_precision.c $(STORE_TEST_UTIL)
tests_test_summary_precision_LDADD = tests/libtap.a $(REPORT_LDADD)
# the parameter pass where the parameters lie (fp_param_dev, the backend op update_delta) against the host pass
PARAM_PASS_TEST_UTIL = tests/param_pass_testutil.c tests/param_pass_testutil.h
check_PROGRAMS += tests/test_param_pass_device
TESTS += tests/test_param_pass_device
tests_test_param_pass_device_SOURCES = tests/test_param_pass_device.c $(PARAM_PASS_TEST_UTIL)
tests_test_param_pass_device_LDADD = $(TEST_LDADD)
