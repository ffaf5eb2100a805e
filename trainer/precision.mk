# trainer/precision.mk — precision policies (docs/design.md's table), the GradScaler and the rounding /
# unscaling helpers; the model's policy tests against the PyTorch fp32 fixtures.
lib_libfp_a_SOURCES += trainer/precision.h trainer/precision.c

check_PROGRAMS += tests/test_precision tests/test_model_policy
TESTS += tests/test_precision tests/test_model_policy
tests_test_precision_LDADD = $(TEST_LDADD)
tests_test_model_policy_LDADD = $(TEST_LDADD)
tests_test_model_policy_CPPFLAGS = $(AM_CPPFLAGS) -DFIXTURE_DIR='"$(abs_top_srcdir)/tests/fixtures"'
