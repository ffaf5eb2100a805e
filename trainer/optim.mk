# trainer/optim.mk — optimizers (SGD, Adam, AdamW on fp32 master weights) and learning-rate
# schedules, their tests against PyTorch fixtures, and the script that writes those fixtures.
lib_libfp_a_SOURCES += trainer/optim.h trainer/optim.c trainer/lr_schedule.h trainer/lr_schedule.c

check_PROGRAMS += tests/test_optim tests/test_lr_schedule
TESTS += tests/test_optim tests/test_lr_schedule
tests_test_optim_LDADD = $(TEST_LDADD)
tests_test_optim_CPPFLAGS = $(AM_CPPFLAGS) -DFIXTURE_DIR='"$(abs_top_srcdir)/tests/fixtures"'
tests_test_lr_schedule_LDADD = $(TEST_LDADD)
tests_test_lr_schedule_CPPFLAGS = $(AM_CPPFLAGS) -DFIXTURE_DIR='"$(abs_top_srcdir)/tests/fixtures"'

# Fixtures are generated with PyTorch (Debian's python3-torch 1.13) and committed.
EXTRA_DIST += tests/fixtures/make_optim_reference.py \
	tests/fixtures/optim/optim.safetensors \
	tests/fixtures/optim/lr_schedule.safetensors
