# src/front/nccl/nccl.mk: the NCCL front end; appends to the variables of
# Makefile.am.
#
# The group tracking is pure (no NCCL header) and in every build, for the
# unit tests.  When configure finds nccl.h (HP_NCCL) the NCCL front end goes
# into both libraries: libhipress.so (with the MPI layer) and
# libhipress_nccl.so, the NCCL-only library for jobs without MPI (torchrun):
# the same sources over libhpbase.la, the core without the MPI layer, so
# that it needs neither libmpi nor libhwloc (--as-needed drops what the MPI
# compiler wrapper adds; tests/gpu/nccl/run_nompi.sh checks it; -z defs: a
# source missing here fails the link).  Only nccl* and hipress_* are
# exported.  Without NCCL, libhipress.so has the public NCCL calls as stubs.

libhpbase_la_SOURCES += src/front/nccl/hp_nccl_group.h src/front/nccl/hp_nccl_group.c
# NCCL_CPPFLAGS is empty in a build without NCCL
libhipress_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
if HP_NCCL
HP_NCCL_FRONT_SOURCES = src/front/nccl/hp_nccl_entry.h src/front/nccl/hp_nccl_entry.c \
	src/front/nccl/hp_nccl_real.h src/front/nccl/hp_nccl_real.c \
	src/front/nccl/hp_front_nccl.h src/front/nccl/hp_front_nccl.c src/front/nccl/hp_nccl_elem.h \
	src/front/nccl/hp_nccl_elem.c src/front/nccl/hp_nccl_ctx.h src/front/nccl/hp_nccl_ctx.c
libhipress_la_SOURCES += $(HP_NCCL_FRONT_SOURCES)
lib_LTLIBRARIES += libhipress_nccl.la
libhipress_nccl_la_SOURCES = $(HP_NCCL_FRONT_SOURCES) src/front/nccl/hp_nccl_lib.c
libhipress_nccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
libhipress_nccl_la_LIBADD = libhpbase.la
libhipress_nccl_la_LDFLAGS = -version-info 0:0:0 -Wl,--as-needed -Wl,-z,defs -export-symbols-regex '^(hipress_|nccl)'
else
libhipress_la_SOURCES += src/front/nccl/hp_nccl_stub.c
endif
