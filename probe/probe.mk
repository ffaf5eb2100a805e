# probe/probe.mk — the instruments (probe.h): the probe set, CPU timers, perf counters, RAPL, process
# memory, histograms, NVML (dlopen), CUPTI and NVTX when CUDA found them.
lib_libfp_a_SOURCES += probe/probe.h probe/probe.c probe/cpu_timer.c probe/perf_counters.c \
	probe/rapl.c probe/process_mem.c probe/hist_probe.c probe/nvml.c probe/gpu_fallback.c
if HAVE_CUPTI
lib_libfp_a_SOURCES += probe/cupti_activity.c
endif
if HAVE_NVTX
lib_libfp_a_SOURCES += probe/nvtx_ranges.c
endif
EXTRA_DIST += probe/cupti_activity.c probe/nvtx_ranges.c

check_PROGRAMS += tests/test_probe_set tests/test_probe_sources tests/test_probe_hist
TESTS += tests/test_probe_set tests/test_probe_sources tests/test_probe_hist
tests_test_probe_set_LDADD = $(TEST_LDADD)
tests_test_probe_sources_LDADD = $(TEST_LDADD)
tests_test_probe_hist_SOURCES = tests/test_probe_hist.c $(STORE_TEST_UTIL)
tests_test_probe_hist_LDADD = $(TEST_LDADD)

BENCHMARKS += bench/bench_probe_overhead
bench_bench_probe_overhead_SOURCES = bench/bench_probe_overhead.c $(BENCH_COMMON)
bench_bench_probe_overhead_LDADD = $(FP_LDADD)
