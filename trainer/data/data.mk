# trainer/data/data.mk — datasets (synthetic, cifar10:DIR, imagefolder:DIR), image decoding and
# transforms, and the threaded batch loader; their tests (fixtures generated at test time) and bench.
lib_libfp_a_SOURCES += trainer/data/data.h trainer/data/data_internal.h trainer/data/data.c trainer/data/data_synthetic.c \
	trainer/data/data_cifar10.c trainer/data/data_imagefolder.c trainer/data/image_transform.c trainer/data/data_loader.c

check_PROGRAMS += tests/test_data_synthetic tests/test_data_cifar10 tests/test_data_imagefolder \
	tests/test_data_loader
TESTS += tests/test_data_synthetic tests/test_data_cifar10 tests/test_data_imagefolder \
	tests/test_data_loader
tests_test_data_synthetic_LDADD = $(TEST_LDADD)
tests_test_data_cifar10_LDADD = $(TEST_LDADD)
tests_test_data_imagefolder_LDADD = $(TEST_LDADD)
tests_test_data_loader_LDADD = $(TEST_LDADD)

BENCHMARKS += bench/bench_data
bench_bench_data_LDADD = $(FP_LDADD)
EXTRA_DIST += tests/data_testutil.h
# bad data sets through the command: one exit status for an image folder's problems, FIFOs refused
dist_check_SCRIPTS += tests/test_data_cli.sh
TESTS += tests/test_data_cli.sh
