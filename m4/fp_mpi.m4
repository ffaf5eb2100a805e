# fp_mpi.m4 — optional data-parallel training: --with-mpi (default auto) finds MPI (pkg-config ompi-c, then
# mpich, then mpicc --showme), checks mpi.h and MPI_Iallreduce; with the CUDA backend also NCCL (nccl.h and
# libnccl in the toolkit). Defines HAVE_MPI / HAVE_NCCL, the automake conditionals of the same names,
# MPI_CFLAGS / MPI_LIBS and NCCL_LIBS; fp_mpi_summary / fp_nccl_summary for configure's summary.
AC_DEFUN([FP_MPI_FAIL], [
  AS_IF([test "x$with_mpi" = xyes],
    [AC_MSG_ERROR([--with-mpi: $1 (Debian: apt-get install openmpi-bin libopenmpi-dev)])],
    [fp_mpi_ok=no; fp_mpi_why="$1"])
])

AC_DEFUN([FP_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi], [data-parallel training over MPI, and NCCL with CUDA (default: auto)])],
    [], [with_mpi=auto])
  AS_CASE([$with_mpi], [yes|no|auto], [],
    [AC_MSG_ERROR([--with-mpi takes yes, no or auto, got '$with_mpi'])])
  fp_mpi_ok=no; fp_mpi_why=""; fp_nccl_ok=no; fp_nccl_why=""
  MPI_CFLAGS=""; MPI_LIBS=""; NCCL_LIBS=""
  AS_IF([test "x$with_mpi" = xno], [fp_mpi_why="disabled by --without-mpi"], [
    fp_mpi_ok=maybe
    AS_IF([test "x$MPI_CFLAGS$MPI_LIBS" = x], [
      PKG_CHECK_MODULES([MPI], [ompi-c], [fp_mpi_how="ompi-c"], [
        PKG_CHECK_MODULES([MPI], [mpich], [fp_mpi_how="mpich"], [
          AC_PATH_PROG([MPICC], [mpicc], [])
          AS_IF([test "x$MPICC" != x], [
            MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`
            MPI_LIBS=`$MPICC --showme:link 2>/dev/null`
            fp_mpi_how="mpicc --showme"])])])])
    fp_save_CPPFLAGS=$CPPFLAGS; fp_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
    AC_CHECK_HEADER([mpi.h], [], [FP_MPI_FAIL([mpi.h not found])])
    AS_IF([test "x$fp_mpi_ok" = xmaybe], [
      AC_MSG_CHECKING([for MPI_Iallreduce])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
          [[MPI_Request r; float x = 0, y; return MPI_Iallreduce(&x, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);]])],
        [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no]); FP_MPI_FAIL([cannot link an MPI-3 program with '$MPI_LIBS'])])])
    CPPFLAGS=$fp_save_CPPFLAGS; LIBS=$fp_save_LIBS
  ])
  AS_IF([test "x$fp_mpi_ok" = xmaybe], [
    fp_mpi_ok=yes
    AC_DEFINE([HAVE_MPI], [1], [Define to 1 for data-parallel training over MPI])
    fp_mpi_summary="yes ($fp_mpi_how)"
    dnl NCCL: the GPU all-reduce, bootstrapped over MPI; with the CUDA backend only
    AS_IF([test "x$fp_cuda_ok" != xyes], [fp_nccl_why="CUDA backend off"], [
      fp_save_CPPFLAGS=$CPPFLAGS; fp_save_LIBS=$LIBS; fp_save_LDFLAGS=$LDFLAGS
      CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS -L$CUDA_LIBDIR"
      AC_CHECK_HEADER([nccl.h], [
        AC_CHECK_LIB([nccl], [ncclCommInitRank], [fp_nccl_ok=yes],
                     [fp_nccl_why="libnccl not found in $CUDA_LIBDIR"], [-lcudart])],
        [fp_nccl_why="nccl.h not found in $CUDA_HOME/include"])
      CPPFLAGS=$fp_save_CPPFLAGS; LIBS=$fp_save_LIBS; LDFLAGS=$fp_save_LDFLAGS])
    AS_IF([test "x$fp_nccl_ok" = xyes], [
      NCCL_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR -lnccl"
      AC_DEFINE([HAVE_NCCL], [1], [Define to 1 for the NCCL all-reduce of GPU ranks])
      fp_nccl_summary="yes ($CUDA_LIBDIR)"], [fp_nccl_summary="no ($fp_nccl_why)"])
  ], [
    fp_mpi_ok=no; MPI_CFLAGS=""; MPI_LIBS=""
    fp_mpi_summary="no ($fp_mpi_why)"
    fp_nccl_summary="no (needs MPI)"
  ])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([NCCL_LIBS])
  AM_CONDITIONAL([HAVE_MPI], [test "x$fp_mpi_ok" = xyes])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$fp_nccl_ok" = xyes])
])
