# lib/core.mk — the shared core: format facts, errors, clocks, atomic output files, CPU features, GPU
# detection, the thread pool, the Wilson interval, the lost-update events' reading, removing a
# database with its side files, CUDA conversion kernels.
lib_libfp_a_SOURCES += lib/formats.c lib/formats.h lib/float_bits.h lib/error.c lib/error.h lib/clock.c lib/clock.h \
	lib/atomic_file.c lib/atomic_file.h lib/gpu_detect.c lib/gpu_detect.h lib/thread_pool.c lib/thread_pool.h \
	lib/dtype.c lib/dtype_array.c lib/dtype.h lib/wilson.c lib/wilson.h \
	lib/lost_updates.c lib/lost_updates.h lib/db_remove.c lib/db_remove.h
if HAVE_CUDA
lib_libfp_a_SOURCES += lib/cuda/convert.cu lib/cuda/convert.h
# nvcc objects get no automatic header dependencies: list them.
lib/cuda/convert.$(OBJEXT): lib/cuda/convert.h lib/error.h
endif
EXTRA_DIST += lib/cuda/convert.cu lib/cuda/convert.h

check_PROGRAMS += tests/test_formats tests/test_error tests/test_atomic_file tests/test_gpu_detect
TESTS += tests/test_formats tests/test_error tests/test_atomic_file tests/test_gpu_detect
tests_test_gpu_detect_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_clock
TESTS += tests/test_clock
tests_test_clock_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_thread_pool
TESTS += tests/test_thread_pool
tests_test_thread_pool_LDADD = $(TEST_LDADD)
tests_test_formats_LDADD = $(TEST_LDADD)
tests_test_error_LDADD = $(TEST_LDADD)
tests_test_atomic_file_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/gpu/test_cuda_convert
TESTS += tests/gpu/test_cuda_convert
tests_gpu_test_cuda_convert_LDADD = $(TEST_LDADD)

dist_check_SCRIPTS += tests/test_configure.sh
TESTS += tests/test_configure.sh
