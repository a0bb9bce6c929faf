# The optional GPU parts.
#
# HP_CHECK_CUDA: the CUDA module (libhipress_cuda.so, kernels compiled by
# nvcc).  --with-cuda[=PATH] (default: $CUDA_HOME, else /usr/local/cuda, when
# it holds nvcc and the headers; plain --with-cuda makes a missing toolkit an
# error), --without-cuda, --with-cuda-arch=LIST.
#   AM_CONDITIONAL HP_CUDA; AC_SUBST NVCC NVCC_ARCH_FLAGS NVCCFLAGS CUDA_HOME
#   CUDA_CPPFLAGS CUDA_LIBDIR; config.h HP_HAVE_CUDA_MODULE HP_CUDA_VERSION
#   HP_CUDA_ARCH_LIST HP_CUDA_HOME.
#
# HP_CHECK_NCCL: the ncclAllReduce interception (headers only: the real
# functions are found at run time).  --with-nccl[=PATH] (default: the CUDA
# toolkit's include directory, then /usr; without CUDA only when asked for),
# --without-nccl.
#   AM_CONDITIONAL HP_NCCL, HP_NCCL_LIB (libnccl.so found, for a GPU test);
#   AC_SUBST NCCL_CPPFLAGS NCCL_LIBDIR; config.h HP_HAVE_NCCL_INTERCEPT
#   HP_NCCL_VERSION.

# The architectures built by default: those of this list that nvcc supports,
# and PTX of the newest for later GPUs.
m4_define([HP_CUDA_DEFAULT_ARCHS], [75 80 86 89 90])   dnl also in --with-cuda-arch's help

AC_DEFUN([HP_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=PATH@:>@],
      [build the CUDA module with the toolkit at PATH (default: $CUDA_HOME or /usr/local/cuda, when present)])],
    [], [with_cuda=check])
  AC_ARG_WITH([cuda-arch],
    [AS_HELP_STRING([--with-cuda-arch=LIST],
      [GPU architectures, e.g. "80 90" or "sm_80,sm_90,compute_90": NN or sm_NN builds code for NN, compute_NN its PTX; without a compute_ entry PTX of the newest is added (default: those of 75 80 86 89 90 that nvcc supports)])],
    [], [with_cuda_arch=default])
  AC_ARG_VAR([NVCC], [CUDA compiler (default: the toolkit's bin/nvcc)])
  AC_ARG_VAR([NVCCFLAGS], [extra nvcc flags for the CUDA module])

  hp_have_cuda=no; hp_cuda_home=; hp_cuda_version=; hp_cuda_archs=; NVCC_ARCH_FLAGS=; CUDA_LIBDIR=
  AS_CASE([$with_cuda],
    [no], [],
    [check|yes], [hp_cuda_home=${CUDA_HOME:-/usr/local/cuda}],
    [hp_cuda_home=$with_cuda])
  AS_IF([test -n "$hp_cuda_home"], [
    AC_MSG_CHECKING([for the CUDA toolkit in $hp_cuda_home])
    hp_nvcc=${NVCC:-$hp_cuda_home/bin/nvcc}
    hp_cuda_why=
    AS_IF([test ! -x "$hp_nvcc"], [hp_cuda_why="no nvcc at $hp_nvcc"],
          [test ! -f "$hp_cuda_home/include/cuda.h" || test ! -f "$hp_cuda_home/include/cuda_runtime.h"],
            [hp_cuda_why="no cuda.h and cuda_runtime.h in $hp_cuda_home/include"])
    for hp_d in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do
      AS_IF([test -z "$CUDA_LIBDIR" && test -f "$hp_cuda_home/$hp_d/libcudart_static.a"], [CUDA_LIBDIR=$hp_cuda_home/$hp_d])
    done
    AS_IF([test -z "$hp_cuda_why" && test -z "$CUDA_LIBDIR"], [hp_cuda_why="no libcudart_static.a under $hp_cuda_home"])
    AS_IF([test -z "$hp_cuda_why"], [
      hp_cuda_version=`"$hp_nvcc" --version 2>/dev/null | sed -n 's/.*release \(@<:@0-9.@:>@*\),.*/\1/p'`
      AC_MSG_RESULT([nvcc $hp_cuda_version])
    ], [
      AC_MSG_RESULT([no: $hp_cuda_why])
      AS_IF([test "x$with_cuda" != xcheck], [AC_MSG_ERROR([--with-cuda: $hp_cuda_why])])
      hp_cuda_home=
    ])
  ])

  AS_IF([test -n "$hp_cuda_home"], [
    NVCC=$hp_nvcc
    dnl what this nvcc can target (nvcc 11+); older ones are trusted
    hp_supported=`"$NVCC" --list-gpu-arch 2>/dev/null | sed -n 's/^compute_\(@<:@0-9@:>@*\)$/\1/p' | tr '\n' ' ' | sed 's/ *$//'`
    AS_IF([test "x$with_cuda_arch" = xdefault || test "x$with_cuda_arch" = xyes], [
      hp_sass=; hp_ptx=
      for hp_a in HP_CUDA_DEFAULT_ARCHS; do
        case " $hp_supported " in
          *" $hp_a "*|"  ") hp_sass="$hp_sass $hp_a" ;;
        esac
      done
    ], [
      hp_sass=; hp_ptx=
      for hp_a in `echo "$with_cuda_arch" | tr ',;' '  '`; do
        dnl plain shell case: @<:@ and @:>@ are [ and ]
        case $hp_a in
          sm_*) hp_n=${hp_a#sm_}; hp_kind=sass ;;
          compute_*) hp_n=${hp_a#compute_}; hp_kind=ptx ;;
          *) hp_n=$hp_a; hp_kind=sass ;;
        esac
        case $hp_n in
          ""|*@<:@!0-9@:>@*) AC_MSG_ERROR([--with-cuda-arch: '$hp_a' is not NN, sm_NN or compute_NN]) ;;
        esac
        AS_IF([test -n "$hp_supported"], [
          case " $hp_supported " in
            *" $hp_n "*) ;;
            *) AC_MSG_ERROR([--with-cuda-arch: $NVCC cannot build for $hp_a (it supports: $hp_supported)]) ;;
          esac])
        AS_IF([test $hp_kind = sass], [hp_sass="$hp_sass $hp_n"], [hp_ptx="$hp_ptx $hp_n"])
      done
    ])
    AS_IF([test -z "$hp_sass$hp_ptx"], [AC_MSG_ERROR([no GPU architecture to build for (nvcc supports: $hp_supported)])])
    dnl PTX of the newest architecture, unless the list names its own
    AS_IF([test -z "$hp_ptx"], [hp_ptx=`for hp_a in $hp_sass; do echo $hp_a; done | sort -n | tail -n 1`])
    for hp_a in $hp_sass; do
      NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$hp_a,code=sm_$hp_a"
      hp_cuda_archs="$hp_cuda_archs sm_$hp_a"
    done
    for hp_a in $hp_ptx; do
      NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$hp_a,code=compute_$hp_a"
      hp_cuda_archs="$hp_cuda_archs compute_$hp_a"
    done
    NVCC_ARCH_FLAGS=${NVCC_ARCH_FLAGS# }
    hp_cuda_archs=${hp_cuda_archs# }

    dnl the module's flags must work: build a kernel with them
    AC_MSG_CHECKING([whether $NVCC builds for $hp_cuda_archs with warnings as errors])
    hp_cu=conftest_hp.cu
    cat > $hp_cu <<'HP_EOF'
__global__ void hp_conftest(float *x, float a) { x@<:@threadIdx.x@:>@ = a * x@<:@threadIdx.x@:>@ + 1.0f; }
HP_EOF
    AS_IF([$NVCC $NVCC_ARCH_FLAGS -Werror all-warnings --fmad=false -Xcompiler -fPIC $NVCCFLAGS -c $hp_cu -o conftest_hp.o >&AS_MESSAGE_LOG_FD 2>&1],
      [AC_MSG_RESULT([yes]); hp_have_cuda=yes],
      [AC_MSG_RESULT([no])
       AS_IF([test "x$with_cuda" != xcheck || test "x$with_cuda_arch" != xdefault],
             [AC_MSG_ERROR([$NVCC failed to build a test kernel for $hp_cuda_archs (see config.log)])])
       hp_cuda_home=])
    rm -f $hp_cu conftest_hp.o
  ])

  AS_IF([test "x$hp_have_cuda" = xyes], [
    AC_DEFINE([HP_HAVE_CUDA_MODULE], [1], [the CUDA module libhipress_cuda.so is built])
    AC_DEFINE_UNQUOTED([HP_CUDA_VERSION], ["$hp_cuda_version"], [CUDA toolkit version of the module])
    AC_DEFINE_UNQUOTED([HP_CUDA_ARCH_LIST], ["$hp_cuda_archs"], [GPU architectures of the module])
  ], [hp_cuda_archs=; hp_cuda_version=])
  AC_DEFINE_UNQUOTED([HP_CUDA_HOME], ["$hp_cuda_home"], [CUDA toolkit used by the build, or empty])
  AM_CONDITIONAL([HP_CUDA], [test "x$hp_have_cuda" = xyes])
  AC_SUBST([CUDA_HOME], [$hp_cuda_home])
  AC_SUBST([CUDA_CPPFLAGS], [${hp_cuda_home:+-I$hp_cuda_home/include}])
  AC_SUBST([CUDA_LIBDIR])
  AC_SUBST([NVCC_ARCH_FLAGS])
])

AC_DEFUN([HP_CHECK_NCCL], [
  AC_REQUIRE([HP_CHECK_CUDA])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=PATH@:>@],
      [intercept ncclAllReduce, with nccl.h from PATH/include (default: the CUDA toolkit's, then /usr, when CUDA is found)])],
    [], [with_nccl=check])
  hp_have_nccl=no; hp_nccl_home=; hp_nccl_version=; NCCL_CPPFLAGS=
  AS_CASE([$with_nccl],
    [no], [hp_nccl_cands=],
    [check], [hp_nccl_cands=; AS_IF([test -n "$hp_cuda_home"], [hp_nccl_cands="$hp_cuda_home /usr"])],
    [yes], [hp_nccl_cands="${hp_cuda_home:-/usr/local/cuda} /usr"],
    [hp_nccl_cands=$with_nccl])
  for hp_n in $hp_nccl_cands; do
    AS_IF([test -z "$hp_nccl_home" && test -f "$hp_n/include/nccl.h"], [hp_nccl_home=$hp_n])
  done
  AS_IF([test -n "$hp_nccl_home"], [
    AC_MSG_CHECKING([for nccl.h (2.18 or newer) in $hp_nccl_home/include])
    dnl nccl.h includes cuda_runtime.h
    NCCL_CPPFLAGS="-I$hp_nccl_home/include"
    AS_IF([test -n "$hp_cuda_home" && test "$hp_cuda_home" != "$hp_nccl_home"], [NCCL_CPPFLAGS="$NCCL_CPPFLAGS -I$hp_cuda_home/include"])
    AS_IF([test -z "$hp_cuda_home" && test -f "$hp_nccl_home/include/cuda_runtime.h"], [],
          [test -z "$hp_cuda_home" && test -d /usr/local/cuda/include], [NCCL_CPPFLAGS="$NCCL_CPPFLAGS -I/usr/local/cuda/include"])
    hp_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $NCCL_CPPFLAGS"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]], [[
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error NCCL too old
#endif
ncclComm_t c = 0; ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
return (int)ncclCommSplit(c, 0, 0, &c, &cfg) + (int)ncclBfloat16 + (int)ncclAvg;]])],
      [hp_have_nccl=yes
       AC_COMPUTE_INT([hp_nccl_major], [NCCL_MAJOR], [[#include <nccl.h>]])
       AC_COMPUTE_INT([hp_nccl_minor], [NCCL_MINOR], [[#include <nccl.h>]])
       AC_COMPUTE_INT([hp_nccl_patch], [NCCL_PATCH], [[#include <nccl.h>]])
       hp_nccl_version=$hp_nccl_major.$hp_nccl_minor.$hp_nccl_patch],
      [])
    CPPFLAGS=$hp_save_CPPFLAGS
    AC_MSG_RESULT([$hp_have_nccl${hp_nccl_version:+ ($hp_nccl_version)}])
  ])
  AS_IF([test "x$hp_have_nccl" = xno && test "x$with_nccl" != xno && test "x$with_nccl" != xcheck],
        [AC_MSG_ERROR([--with-nccl: no usable nccl.h (2.18 or newer, with cuda_runtime.h) in ${hp_nccl_home:-$hp_nccl_cands}])])
  AS_IF([test "x$hp_have_nccl" = xyes], [
    AC_DEFINE([HP_HAVE_NCCL_INTERCEPT], [1], [ncclAllReduce is intercepted])
    AC_DEFINE_UNQUOTED([HP_NCCL_VERSION], ["$hp_nccl_version"], [NCCL headers the interception was built with])
  ], [NCCL_CPPFLAGS=; hp_nccl_home=])
  AM_CONDITIONAL([HP_NCCL], [test "x$hp_have_nccl" = xyes])
  AC_SUBST([NCCL_CPPFLAGS])
  dnl libnccl itself only for the test that runs the real NCCL on a GPU
  NCCL_LIBDIR=
  AS_IF([test "x$hp_have_nccl" = xyes], [
    for hp_d in "$hp_nccl_home/lib64" "$hp_nccl_home/lib" /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
      AS_IF([test -z "$NCCL_LIBDIR" && test -e "$hp_d/libnccl.so"], [NCCL_LIBDIR=$hp_d])
    done])
  AC_SUBST([NCCL_LIBDIR])
  AM_CONDITIONAL([HP_NCCL_LIB], [test -n "$NCCL_LIBDIR"])
])
