# C++ callers are intercepted too (tests/mpi/run_cxx.sh).
check_PROGRAMS += tests/mpi/mpi_cxx
tests_mpi_mpi_cxx_SOURCES = tests/mpi/mpi_cxx.cc
tests_mpi_mpi_cxx_LDADD = -ldl
TESTS += tests/mpi/run_cxx.sh
EXTRA_DIST += tests/mpi/run_cxx.sh
