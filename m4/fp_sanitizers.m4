# fp_sanitizers.m4 — --enable-sanitizers: build everything with AddressSanitizer and UBSan.
# Sets SANITIZER_CFLAGS / SANITIZER_LDFLAGS (added to every target by Makefile.am) and fp_sanitizers.
AC_DEFUN([FP_ENABLE_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [], [enable_sanitizers=no])
  SANITIZER_CFLAGS=""
  SANITIZER_LDFLAGS=""
  fp_sanitizers="no"
  AS_IF([test "x$enable_sanitizers" = xyes], [
    fp_san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    fp_save_CFLAGS=$CFLAGS; fp_save_LDFLAGS=$LDFLAGS
    CFLAGS="$CFLAGS $fp_san"; LDFLAGS="$LDFLAGS $fp_san"
    AC_MSG_CHECKING([whether $CC accepts $fp_san])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [return 0;])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); AC_MSG_ERROR([--enable-sanitizers: the compiler cannot build with ASan/UBSan (Debian: gcc with libasan8 and libubsan1)])])
    CFLAGS=$fp_save_CFLAGS; LDFLAGS=$fp_save_LDFLAGS
    SANITIZER_CFLAGS="$fp_san"
    SANITIZER_LDFLAGS="$fp_san"
    fp_sanitizers="yes (ASan + UBSan)"
  ], [test "x$enable_sanitizers" != xno], [
    AC_MSG_ERROR([--enable-sanitizers takes no value, got '$enable_sanitizers'])
  ])
  AC_SUBST([SANITIZER_CFLAGS])
  AC_SUBST([SANITIZER_LDFLAGS])
])
