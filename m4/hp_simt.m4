dnl HP_CHECK_SIMT_CXX: the compiler of the SIMT emulator's kernels
dnl (tests/gpu/simt/simt.mk).  Its shared-memory race detector
dnl (tests/gpu/simt/hp_simt_race.cc) sees the kernels' loads and stores through
dnl clang's -fsanitize-coverage=trace-loads,trace-stores (clang 14 or newer);
dnl gcc has no such hooks.  HP_SIMT_CXX names it; without one the kernels
dnl are built with CXX and tests/gpu/simt/run_simt.sh fails, saying so.
AC_DEFUN([HP_CHECK_SIMT_CXX], [
AC_ARG_VAR([HP_SIMT_CXX], [clang++ for the SIMT emulator's kernels (default: clang++-14 or clang++)])
AS_IF([test -z "$HP_SIMT_CXX"], [AC_CHECK_PROGS([HP_SIMT_CXX], [clang++-14 clang++], [])])
hp_simt_race=no
AS_IF([test -n "$HP_SIMT_CXX"], [
  AC_MSG_CHECKING([whether $HP_SIMT_CXX calls hooks on loads and stores])
  echo 'int hp_f(int *p) { return *p; }' >conftest.cc
  AS_IF([$HP_SIMT_CXX -fsanitize-coverage=func,trace-loads,trace-stores -c conftest.cc -o conftest.$OBJEXT \
         >&AS_MESSAGE_LOG_FD 2>&1 && $NM conftest.$OBJEXT 2>/dev/null | grep __sanitizer_cov_load4 >/dev/null],
    [hp_simt_race=yes], [HP_SIMT_CXX=])
  rm -f conftest.cc conftest.$OBJEXT
  AC_MSG_RESULT([$hp_simt_race])])
AM_CONDITIONAL([HP_SIMT_RACE], [test "x$hp_simt_race" = xyes])
])
