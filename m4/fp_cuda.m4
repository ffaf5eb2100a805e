# fp_cuda.m4 — the optional CUDA stack: --with-cuda[=DIR] (default auto, /usr/local/cuda),
# --with-cuda-arch, --with-cudnn=DIR and --with-cupti=DIR (for a cuDNN / CUPTI outside the toolkit, e.g.
# a Python wheel's nvidia/cudnn). Checks nvcc, cudart, cuBLAS/cuBLASLt and cuDNN >= 9 (the backend needs
# all of them), then CUPTI and NVTX3 (each optional). Machine code for every listed architecture plus
# PTX of the newest, so a newer GPU JIT-compiles it. Defines HAVE_CUDA, HAVE_CUDNN, HAVE_CUPTI,
# HAVE_NVTX, the automake conditionals of the same names, CUDA_CPPFLAGS / CUDA_LIBS (rpaths) and NVCC*.
AC_DEFUN([FP_CUDA_FAIL], [
  AS_IF([test "x$fp_cuda_explicit" = xyes],
    [AC_MSG_ERROR([--with-cuda: $1])],
    [fp_cuda_ok=no; fp_cuda_why="$1"])
])

AC_DEFUN([FP_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend (default: auto, looks in /usr/local/cuda)])],
    [], [with_cuda=auto])
  AC_ARG_WITH([cuda-arch],
    [AS_HELP_STRING([--with-cuda-arch=LIST], [GPU architectures, e.g. "sm_80,sm_90" (default)])],
    [], [with_cuda_arch="sm_80,sm_90"])
  AC_ARG_WITH([cudnn],
    [AS_HELP_STRING([--with-cudnn=DIR], [cuDNN >= 9 in DIR/include and DIR/lib (default: the CUDA toolkit's)])],
    [], [with_cudnn=""])
  AC_ARG_WITH([cupti],
    [AS_HELP_STRING([--with-cupti=DIR], [CUPTI in DIR/include and DIR/lib (default: the CUDA toolkit's)])],
    [], [with_cupti=""])
  AS_CASE([$with_cudnn], [""|/*], [], [AC_MSG_ERROR([--with-cudnn takes an absolute directory, got '$with_cudnn'])])
  AS_CASE([$with_cupti], [""|/*], [], [AC_MSG_ERROR([--with-cupti takes an absolute directory, got '$with_cupti'])])

  fp_cuda_ok=no; fp_cuda_why=""; fp_cuda_explicit=no
  fp_cudnn_ok=no; fp_cupti_ok=no; fp_nvtx_ok=no
  AS_CASE([$with_cuda],
    [no],   [fp_cuda_why="disabled by --without-cuda"],
    [auto], [CUDA_HOME=/usr/local/cuda; fp_cuda_ok=maybe],
    [yes],  [CUDA_HOME=/usr/local/cuda; fp_cuda_ok=maybe; fp_cuda_explicit=yes],
    [/*],   [CUDA_HOME=$with_cuda; fp_cuda_ok=maybe; fp_cuda_explicit=yes],
    [AC_MSG_ERROR([--with-cuda takes yes, no or an absolute directory, got '$with_cuda'])])

  dnl Architectures: "sm_80,sm_90" or "80 90" become -gencode pairs; the newest also embeds its PTX
  dnl (an "a" architecture such as sm_90a runs on that chip only, so its PTX is not embedded).
  NVCC_ARCH_FLAGS=""
  fp_cuda_arch_summary=""
  fp_ptx_num=""
  for fp_arch in `echo "$with_cuda_arch" | tr ',' ' '`; do
    fp_num=`echo "$fp_arch" | sed 's/^sm_//; s/^compute_//'`
    AS_CASE([$fp_num], [[[1-9][0-9]]|[[1-9][0-9][0-9]]|[[1-9][0-9]a]|[[1-9][0-9][0-9]a]], [],
      [AC_MSG_ERROR([--with-cuda-arch: '$fp_arch' is not an architecture like sm_80])])
    NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$fp_num,code=sm_$fp_num"
    fp_cuda_arch_summary="${fp_cuda_arch_summary:+$fp_cuda_arch_summary }sm_$fp_num"
    AS_CASE([$fp_num], [*a], [],
      [AS_IF([test "x$fp_ptx_num" = x || test "$fp_num" -gt "$fp_ptx_num"], [fp_ptx_num=$fp_num])])
  done
  AS_IF([test "x$NVCC_ARCH_FLAGS" = x], [AC_MSG_ERROR([--with-cuda-arch: empty architecture list])])
  AS_IF([test "x$fp_ptx_num" != x], [
    NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$fp_ptx_num,code=compute_$fp_ptx_num"
    fp_cuda_arch_summary="$fp_cuda_arch_summary + PTX compute_$fp_ptx_num"])

  AS_IF([test "x$fp_cuda_ok" = xmaybe], [
    AS_IF([test -d "$CUDA_HOME"], [], [FP_CUDA_FAIL([no CUDA toolkit in $CUDA_HOME])])
  ])
  AS_IF([test "x$fp_cuda_ok" = xmaybe], [
    AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
    AS_IF([test "x$NVCC" = x], [FP_CUDA_FAIL([nvcc not found in $CUDA_HOME/bin])])
  ])
  AS_IF([test "x$fp_cuda_ok" = xmaybe], [
    CUDA_LIBDIR="$CUDA_HOME/lib64"
    AS_IF([test -d "$CUDA_LIBDIR"], [], [CUDA_LIBDIR="$CUDA_HOME/lib"])
    CUDA_CPPFLAGS="-I$CUDA_HOME/include"
    dnl cuDNN: the toolkit's, or --with-cudnn=DIR (a wheel's lib may hold libcudnn.so.9 without libcudnn.so)
    fp_cudnn_libdir=$CUDA_LIBDIR; fp_cudnn_lib=-lcudnn
    AS_IF([test "x$with_cudnn" != x], [
      AS_IF([test -f "$with_cudnn/include/cudnn.h"], [],
            [AC_MSG_ERROR([--with-cudnn: no include/cudnn.h in $with_cudnn])])
      fp_cudnn_libdir="$with_cudnn/lib"
      AS_IF([test -d "$fp_cudnn_libdir"], [], [fp_cudnn_libdir="$with_cudnn/lib64"])
      AS_IF([test -e "$fp_cudnn_libdir/libcudnn.so"], [],
            [test -e "$fp_cudnn_libdir/libcudnn.so.9"], [fp_cudnn_lib=-l:libcudnn.so.9],
            [AC_MSG_ERROR([--with-cudnn: no libcudnn.so or libcudnn.so.9 in $with_cudnn/lib or lib64])])
      CUDA_CPPFLAGS="$CUDA_CPPFLAGS -I$with_cudnn/include"])
    fp_save_CPPFLAGS=$CPPFLAGS; fp_save_LIBS=$LIBS; fp_save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS -L$CUDA_LIBDIR -L$fp_cudnn_libdir"
    AC_CHECK_HEADER([cuda_runtime.h], [], [FP_CUDA_FAIL([cuda_runtime.h not found in $CUDA_HOME/include])])
    AS_IF([test "x$fp_cuda_ok" = xmaybe], [
      AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [:], [FP_CUDA_FAIL([libcudart not found in $CUDA_LIBDIR])])])
    AS_IF([test "x$fp_cuda_ok" = xmaybe], [
      AC_CHECK_HEADERS([cublas_v2.h cublasLt.h], [], [FP_CUDA_FAIL([cuBLAS headers not found])])])
    AS_IF([test "x$fp_cuda_ok" = xmaybe], [
      AC_CHECK_LIB([cublas], [cublasCreate_v2], [:], [FP_CUDA_FAIL([libcublas not found in $CUDA_LIBDIR])])])
    AS_IF([test "x$fp_cuda_ok" = xmaybe], [
      AC_CHECK_LIB([cublasLt], [cublasLtCreate], [:], [FP_CUDA_FAIL([libcublasLt not found in $CUDA_LIBDIR])])])
    dnl cuDNN >= 9
    AS_IF([test "x$fp_cuda_ok" = xmaybe], [
      AC_MSG_CHECKING([for cuDNN >= 9])
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cudnn.h>]],
          [[#if CUDNN_MAJOR < 9
            #error cuDNN too old
            #endif]])],
        [AC_MSG_RESULT([yes]); fp_cudnn_ok=yes],
        [AC_MSG_RESULT([no]); FP_CUDA_FAIL([cuDNN >= 9 headers not found in ${with_cudnn:-$CUDA_HOME}/include (--with-cudnn=DIR)])])])
    AS_IF([test "x$fp_cuda_ok" = xmaybe], [
      AC_MSG_CHECKING([for cudnnCreate in $fp_cudnn_lib ($fp_cudnn_libdir)])
      fp_save2_LIBS=$LIBS; LIBS="$fp_cudnn_lib $LIBS"
      AC_LINK_IFELSE([AC_LANG_CALL([], [cudnnCreate])], [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no]); fp_cudnn_ok=no; FP_CUDA_FAIL([libcudnn not found in $fp_cudnn_libdir (--with-cudnn=DIR)])])
      LIBS=$fp_save2_LIBS])
    dnl CUPTI (optional): in lib64 or extras/CUPTI
    AS_IF([test "x$fp_cuda_ok" = xmaybe], [
      fp_cupti_inc=""; fp_cupti_lib=""; fp_cupti_l=-lcupti
      AS_IF([test "x$with_cupti" != x], [
        AS_IF([test -f "$with_cupti/include/cupti.h"], [fp_cupti_inc="$with_cupti/include"],
              [AC_MSG_ERROR([--with-cupti: no include/cupti.h in $with_cupti])])
        for fp_d in "$with_cupti/lib" "$with_cupti/lib64"; do
          AS_IF([test "x$fp_cupti_lib" = x && test -e "$fp_d/libcupti.so"], [fp_cupti_lib=$fp_d])
          AS_IF([test "x$fp_cupti_lib" = x && test -e "$fp_d/libcupti.so.13"],
                [fp_cupti_lib=$fp_d; fp_cupti_l=-l:libcupti.so.13])
        done
        AS_IF([test "x$fp_cupti_lib" = x], [AC_MSG_ERROR([--with-cupti: no libcupti.so in $with_cupti/lib or lib64])])
      ], [
      AS_IF([test -f "$CUDA_HOME/include/cupti.h"], [fp_cupti_inc="$CUDA_HOME/include"],
            [test -f "$CUDA_HOME/extras/CUPTI/include/cupti.h"], [fp_cupti_inc="$CUDA_HOME/extras/CUPTI/include"])
      AS_IF([test -e "$CUDA_LIBDIR/libcupti.so"], [fp_cupti_lib="$CUDA_LIBDIR"],
            [test -e "$CUDA_HOME/extras/CUPTI/lib64/libcupti.so"], [fp_cupti_lib="$CUDA_HOME/extras/CUPTI/lib64"])])
      AC_MSG_CHECKING([for CUPTI])
      AS_IF([test "x$fp_cupti_inc" != x && test "x$fp_cupti_lib" != x], [
        AC_MSG_RESULT([yes ($fp_cupti_lib)]); fp_cupti_ok=yes
        AS_IF([test "x$fp_cupti_inc" != "x$CUDA_HOME/include"], [CUDA_CPPFLAGS="$CUDA_CPPFLAGS -I$fp_cupti_inc"])
      ], [AC_MSG_RESULT([no]); fp_cupti_why="cupti.h or libcupti.so not found under $CUDA_HOME"])
      AC_CHECK_HEADER([nvtx3/nvToolsExt.h], [fp_nvtx_ok=yes], [fp_nvtx_why="nvtx3/nvToolsExt.h not found"])
    ])
    CPPFLAGS=$fp_save_CPPFLAGS; LIBS=$fp_save_LIBS; LDFLAGS=$fp_save_LDFLAGS
  ])

  CUDA_LIBS=""
  AS_IF([test "x$fp_cuda_ok" = xmaybe], [
    fp_cuda_ok=yes
    CUDA_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR $fp_cudnn_lib -lcublasLt -lcublas -lcudart -lstdc++"
    AS_IF([test "x$fp_cudnn_libdir" != "x$CUDA_LIBDIR"],
          [CUDA_LIBS="-L$fp_cudnn_libdir -Wl,-rpath,$fp_cudnn_libdir $CUDA_LIBS"])
    AS_IF([test "x$fp_cupti_ok" = xyes], [
      AS_IF([test "x$fp_cupti_lib" != "x$CUDA_LIBDIR"], [CUDA_LIBS="-L$fp_cupti_lib -Wl,-rpath,$fp_cupti_lib $CUDA_LIBS"])
      CUDA_LIBS="$CUDA_LIBS $fp_cupti_l"])
    AC_DEFINE([HAVE_CUDA], [1], [Define to 1 to build the CUDA backend])
    AC_DEFINE([HAVE_CUDNN], [1], [Define to 1 when cuDNN >= 9 is available])
    AS_IF([test "x$fp_cupti_ok" = xyes], [AC_DEFINE([HAVE_CUPTI], [1], [Define to 1 when CUPTI is available])])
    AS_IF([test "x$fp_nvtx_ok" = xyes], [AC_DEFINE([HAVE_NVTX], [1], [Define to 1 when NVTX3 headers are available])])
    fp_cuda_summary="yes ($CUDA_HOME)"
    fp_cublas_summary="yes"
    fp_cudnn_summary="yes (>= 9, $fp_cudnn_libdir)"
    AS_IF([test "x$fp_cupti_ok" = xyes], [fp_cupti_summary="yes"], [fp_cupti_summary="no ($fp_cupti_why)"])
    AS_IF([test "x$fp_nvtx_ok" = xyes], [fp_nvtx_summary="yes (header-only)"], [fp_nvtx_summary="no ($fp_nvtx_why)"])
  ], [
    fp_cuda_ok=no; fp_cudnn_ok=no; fp_cupti_ok=no; fp_nvtx_ok=no
    fp_cuda_summary="no ($fp_cuda_why)"
    fp_cublas_summary="no (CUDA backend off)"
    fp_cudnn_summary="no (CUDA backend off)"
    fp_cupti_summary="no (CUDA backend off)"
    fp_nvtx_summary="no (CUDA backend off)"
    fp_cuda_arch_summary="none"
    NVCC=""
  ])
  NVCCFLAGS="-O3 -std=c++17 $NVCC_ARCH_FLAGS"
  AC_SUBST([CUDA_HOME])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCC])
  AC_SUBST([NVCCFLAGS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$fp_cuda_ok" = xyes])
  AM_CONDITIONAL([HAVE_CUPTI], [test "x$fp_cupti_ok" = xyes])
  AM_CONDITIONAL([HAVE_NVTX], [test "x$fp_nvtx_ok" = xyes])
])
