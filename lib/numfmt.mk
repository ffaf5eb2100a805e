# lib/numfmt.mk — fp32 <-> fp16 / bf16 / tf32 / fp8 conversions, scalar and vectorised.
lib_libfp_a_SOURCES += lib/numfmt.h lib/numfmt_scalar.c lib/numfmt_array.c lib/numfmt_isa.h \
	lib/numfmt_avx2.c lib/numfmt_avx512.c

check_PROGRAMS += tests/test_fp16 tests/test_bf16_tf32 tests/test_fp8 tests/test_numfmt_paths
TESTS += tests/test_fp16 tests/test_bf16_tf32 tests/test_fp8 tests/test_numfmt_paths
tests_test_fp16_LDADD = $(TEST_LDADD)
tests_test_bf16_tf32_LDADD = $(TEST_LDADD)
tests_test_fp8_LDADD = $(TEST_LDADD)
tests_test_numfmt_paths_LDADD = $(TEST_LDADD)

BENCHMARKS += bench/bench_numfmt
bench_bench_numfmt_LDADD = $(FP_LDADD)
