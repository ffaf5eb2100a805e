# lib/hist.mk — exponent histograms, their merge and their blob.
lib_libfp_a_SOURCES += lib/hist.h lib/hist_counts.h lib/hist_internal.h lib/hist.c lib/hist_f32_simd.c \
	lib/hist_f16.c lib/hist_scaled.c lib/hist_blob.c

check_PROGRAMS += tests/test_hist tests/test_hist_blob tests/test_hist_scaled
TESTS += tests/test_hist tests/test_hist_blob tests/test_hist_scaled
tests_test_hist_LDADD = $(TEST_LDADD)
tests_test_hist_blob_LDADD = $(TEST_LDADD)
tests_test_hist_scaled_LDADD = $(TEST_LDADD)

BENCHMARKS += bench/bench_hist
bench_bench_hist_LDADD = $(FP_LDADD)
