# mpi_wrappers/mpi_wrappers.mk: the entry points, MPI_* and nccl*; appends to
# the variables of Makefile.am.  Each wrapper resolves the real function,
# passes what is not a float sum straight to it, and hands the rest to its
# front end (src/front/mpi, src/front/nccl); tests/lint/check_layers.sh
# holds what these files may include.
libhipress_la_SOURCES += mpi_wrappers/hp_mpi_wrap.c
if HP_NCCL
libhipress_la_SOURCES += mpi_wrappers/hp_nccl_wrap.c
libhipress_nccl_la_SOURCES += mpi_wrappers/hp_nccl_wrap.c
endif
