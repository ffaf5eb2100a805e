# tests/tests.mk — what every test program links: the TAP helper and the shared test utilities
# (tests/testutil.h: bit casts, random generators and arrays, relative L2 error, gradient and FP_EINVAL
# checks, scratch files; tests/hist_ref.h: the histogram reference the histogram tests compare every
# kernel with).
check_LIBRARIES = tests/libtap.a
tests_libtap_a_SOURCES = tests/tap.c tests/tap.h tests/testutil.c tests/testutil.h tests/hist_ref.c tests/hist_ref.h
TEST_LDADD = tests/libtap.a $(FP_LDADD)
# sourced by the shell tests (check, tap_workdir)
EXTRA_DIST += tests/tap.sh tests/gpu/require_gpu.h
