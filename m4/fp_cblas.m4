# fp_cblas.m4 — find a CBLAS for the CPU backend's GEMMs: OpenBLAS through pkg-config, else -lcblas.
# Sets BLAS_CFLAGS / BLAS_LIBS and fp_blas_desc; stops configure when none links.
AC_DEFUN([FP_CHECK_CBLAS], [
  AC_ARG_VAR([BLAS_CFLAGS], [C compiler flags for CBLAS, overriding pkg-config])
  AC_ARG_VAR([BLAS_LIBS], [linker flags for CBLAS, overriding pkg-config])
  AS_IF([test "x$BLAS_LIBS" = x], [
    PKG_CHECK_MODULES([BLAS], [openblas], [fp_blas_desc="OpenBLAS"],
      [BLAS_LIBS="-lopenblas"; fp_blas_desc="OpenBLAS (no .pc)"])
  ], [fp_blas_desc="user-given ($BLAS_LIBS)"])
  fp_save_CFLAGS=$CFLAGS; fp_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $BLAS_CFLAGS"; LIBS="$BLAS_LIBS $LIBS"
  AC_MSG_CHECKING([for cblas_sgemm in $BLAS_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
      [[float a = 1, b = 1, c = 0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([no CBLAS found (cblas.h and cblas_sgemm): install the Debian package libopenblas-dev, or set BLAS_CFLAGS and BLAS_LIBS])])
  CFLAGS=$fp_save_CFLAGS; LIBS=$fp_save_LIBS
  AC_SUBST([BLAS_CFLAGS])
  AC_SUBST([BLAS_LIBS])
])
