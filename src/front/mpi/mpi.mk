# src/front/mpi/mpi.mk: the MPI front end; appends to the variables of
# Makefile.am.  Its files call MPI, so they are libhpcore.la's, never
# libhipress_nccl.so's (doc/dev/architecture.md, "Two libraries");
# hp_mpi_lib.c names libhipress.so and is that library's alone.
libhpcore_la_SOURCES += src/front/mpi/hp_front_mpi.h src/front/mpi/hp_front_mpi.c src/front/mpi/hp_mpi_comm.c \
	src/front/mpi/hp_mpi_hook.c src/front/mpi/hp_mpi_entry.h src/front/mpi/hp_mpi_entry.c \
	src/front/mpi/hp_mpi_stage.h src/front/mpi/hp_mpi_stage.c
libhipress_la_SOURCES += src/front/mpi/hp_mpi_lib.c
