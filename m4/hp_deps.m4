# hipress dependency checks: one macro per dependency.

AC_DEFUN([HP_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc], [AS_HELP_STRING([--with-hwloc=PATH], [hwloc install prefix])], [], [with_hwloc=yes])
  AS_IF([test "x$with_hwloc" != xyes && test "x$with_hwloc" != xno],
        [CPPFLAGS="$CPPFLAGS -I$with_hwloc/include"; LDFLAGS="$LDFLAGS -L$with_hwloc/lib"])
  hp_have_hwloc=no
  AS_IF([test "x$with_hwloc" != xno], [
    AC_CHECK_HEADER([hwloc.h], [AC_CHECK_LIB([hwloc], [hwloc_topology_init], [hp_have_hwloc=yes])])])
  AS_IF([test "x$hp_have_hwloc" = xyes],
        [HWLOC_LIBS=-lhwloc; AC_DEFINE([HP_HAVE_HWLOC], [1], [hwloc available])],
        [AC_MSG_ERROR([hwloc not found: apt-get install libhwloc-dev (or --with-hwloc=PATH)])])
  dnl not in LIBS: only what links libhpcore.la (the MPI layer's topology)
  dnl needs it; libhipress_nccl.so must not (doc/dev/architecture.md)
  AC_SUBST([HWLOC_LIBS])
])

AC_DEFUN([HP_CHECK_BLAS], [
  AC_ARG_WITH([blas], [AS_HELP_STRING([--with-blas=LIB], [BLAS library to link, e.g. -lopenblas])], [], [with_blas=auto])
  hp_blas_name=none
  AC_CHECK_HEADER([cblas.h], [], [AC_MSG_ERROR([cblas.h not found: apt-get install libopenblas-dev])])
  dnl BLAS_LIBS, not LIBS: only the tests that compare against BLAS link it
  hp_blas_save_LIBS=$LIBS
  AS_IF([test "x$with_blas" != xauto], [
    LIBS="$with_blas $LIBS"
    AC_LINK_IFELSE([AC_LANG_CALL([], [cblas_sgemm])], [hp_blas_name="$with_blas"], [AC_MSG_ERROR([cannot link cblas_sgemm with $with_blas])])
    BLAS_LIBS=$with_blas
  ], [
    AC_SEARCH_LIBS([cblas_sgemm], [openblas cblas blas], [hp_blas_name="${ac_cv_search_cblas_sgemm}"],
                   [AC_MSG_ERROR([no BLAS with cblas_sgemm: apt-get install libopenblas-dev])])
    AS_IF([test "x$ac_cv_search_cblas_sgemm" = "xnone required"], [BLAS_LIBS=], [BLAS_LIBS=$ac_cv_search_cblas_sgemm])
  ])
  AC_CHECK_FUNCS([openblas_set_num_threads])
  LIBS=$hp_blas_save_LIBS
  AC_SUBST([BLAS_LIBS])
  AC_DEFINE_UNQUOTED([HP_BLAS_NAME], ["$hp_blas_name"], [BLAS linked])
])

AC_DEFUN([HP_CHECK_CHECK], [
  PKG_CHECK_MODULES([CHECK], [check >= 0.10], [hp_have_check=yes], [hp_have_check=no])
  AS_IF([test "x$hp_have_check" = xno], [AC_MSG_ERROR([Check not found: apt-get install check])])
])

# CUDA and NCCL: m4/hp_cuda.m4.
