# hipress dependency checks: one macro per dependency.

AC_DEFUN([HP_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc], [AS_HELP_STRING([--with-hwloc=PATH], [hwloc install prefix])], [], [with_hwloc=yes])
  AS_IF([test "x$with_hwloc" != xyes && test "x$with_hwloc" != xno],
        [CPPFLAGS="$CPPFLAGS -I$with_hwloc/include"; LDFLAGS="$LDFLAGS -L$with_hwloc/lib"])
  hp_have_hwloc=no
  AS_IF([test "x$with_hwloc" != xno], [
    AC_CHECK_HEADER([hwloc.h], [AC_CHECK_LIB([hwloc], [hwloc_topology_init], [hp_have_hwloc=yes])])])
  AS_IF([test "x$hp_have_hwloc" = xyes],
        [LIBS="-lhwloc $LIBS"; AC_DEFINE([HP_HAVE_HWLOC], [1], [hwloc available])],
        [AC_MSG_ERROR([hwloc not found: apt-get install libhwloc-dev (or --with-hwloc=PATH)])])
])

AC_DEFUN([HP_CHECK_BLAS], [
  AC_ARG_WITH([blas], [AS_HELP_STRING([--with-blas=LIB], [BLAS library to link, e.g. -lopenblas])], [], [with_blas=auto])
  hp_blas_name=none
  AC_CHECK_HEADER([cblas.h], [], [AC_MSG_ERROR([cblas.h not found: apt-get install libopenblas-dev])])
  AS_IF([test "x$with_blas" != xauto], [
    hp_save_LIBS=$LIBS; LIBS="$with_blas $LIBS"
    AC_LINK_IFELSE([AC_LANG_CALL([], [cblas_sgemm])], [hp_blas_name="$with_blas"], [AC_MSG_ERROR([cannot link cblas_sgemm with $with_blas])])
  ], [
    AC_SEARCH_LIBS([cblas_sgemm], [openblas cblas blas], [hp_blas_name="${ac_cv_search_cblas_sgemm}"],
                   [AC_MSG_ERROR([no BLAS with cblas_sgemm: apt-get install libopenblas-dev])])
  ])
  AC_CHECK_FUNCS([openblas_set_num_threads])
  AC_DEFINE_UNQUOTED([HP_BLAS_NAME], ["$hp_blas_name"], [BLAS linked])
])

AC_DEFUN([HP_CHECK_CHECK], [
  PKG_CHECK_MODULES([CHECK], [check >= 0.10], [hp_have_check=yes], [hp_have_check=no])
  AS_IF([test "x$hp_have_check" = xno], [AC_MSG_ERROR([Check not found: apt-get install check])])
])

# CUDA and NCCL are optional; the GPU kernels arrive in a later release, the
# options are recognised now so build scripts can pass them.
AC_DEFUN([HP_CHECK_CUDA], [
  AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda=PATH], [CUDA toolkit (default: /usr/local/cuda if present)])], [], [with_cuda=check])
  AC_ARG_WITH([nccl], [AS_HELP_STRING([--with-nccl=PATH], [NCCL install (default: the CUDA toolkit's)])], [], [with_nccl=check])
  hp_have_cuda=no; hp_cuda_home=; hp_have_nccl=no; hp_nccl_home=
  AS_CASE([$with_cuda], [no], [], [check|yes], [hp_cuda_home=/usr/local/cuda], [hp_cuda_home=$with_cuda])
  AS_IF([test -n "$hp_cuda_home"], [
    AS_IF([test -f "$hp_cuda_home/include/cuda_runtime.h" && test -x "$hp_cuda_home/bin/nvcc"], [hp_have_cuda=yes],
          [AS_IF([test "x$with_cuda" != xcheck], [AC_MSG_ERROR([CUDA not found under $hp_cuda_home])]); hp_cuda_home=])])
  AS_CASE([$with_nccl], [no], [], [check|yes], [hp_nccl_home=$hp_cuda_home], [hp_nccl_home=$with_nccl])
  AS_IF([test -n "$hp_nccl_home"], [
    AS_IF([test -f "$hp_nccl_home/include/nccl.h"], [hp_have_nccl=yes],
          [AS_IF([test "x$with_nccl" != xcheck], [AC_MSG_ERROR([nccl.h not found under $hp_nccl_home])]); hp_nccl_home=])])
  AC_MSG_CHECKING([for CUDA]); AC_MSG_RESULT([$hp_have_cuda $hp_cuda_home])
  AC_MSG_CHECKING([for NCCL]); AC_MSG_RESULT([$hp_have_nccl $hp_nccl_home])
  AS_IF([test "x$hp_have_cuda" = xyes], [AC_DEFINE([HP_HAVE_CUDA_TOOLKIT], [1], [CUDA toolkit found at build time])])
  AS_IF([test "x$hp_have_nccl" = xyes], [AC_DEFINE([HP_HAVE_NCCL_HEADERS], [1], [NCCL found at build time])])
  AC_DEFINE_UNQUOTED([HP_CUDA_HOME], ["$hp_cuda_home"], [CUDA prefix])
  AM_CONDITIONAL([HP_CUDA], [test "x$hp_have_cuda" = xyes])
  AC_SUBST([CUDA_HOME], [$hp_cuda_home])
])
