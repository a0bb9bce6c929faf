# tests/mpi/golden.mk: golden hashes of compressed MPI_Allreduce; appends to the
# variables of Makefile.am.
#   run_golden.sh  tests/mpi/mpi_golden at 2, 3, 4 and 5 ranks: every compressor
#                  (the plugin example_int8 included) x fixed algorithm x
#                  HIPRESS_ISA x partition size x buffer size, 3 calls each,
#                  on host buffers and on the emulated device path; the
#                  hashes of results and residuals against
#                  tests/mpi/golden/hashes.txt (HP_GOLDEN_RECORD=1 rewrites it)
check_PROGRAMS += tests/mpi/mpi_golden
tests_mpi_mpi_golden_SOURCES = tests/mpi/mpi_golden.c
tests_mpi_mpi_golden_LDADD = libhipress.la -ldl -lm
TESTS += tests/mpi/run_golden.sh
EXTRA_DIST += tests/mpi/run_golden.sh tests/mpi/golden/hashes.txt
