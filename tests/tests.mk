# tests/tests.mk — the TAP helper every test program links.
check_LIBRARIES = tests/libtap.a
tests_libtap_a_SOURCES = tests/tap.c tests/tap.h
TEST_LDADD = tests/libtap.a $(FP_LDADD)
