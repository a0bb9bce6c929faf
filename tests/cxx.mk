# C++ callers are intercepted too (tests/run_cxx.sh).
check_PROGRAMS += tests/mpi_cxx
tests_mpi_cxx_SOURCES = tests/mpi_cxx.cc
tests_mpi_cxx_LDADD = -ldl
TESTS += tests/run_cxx.sh
EXTRA_DIST += tests/run_cxx.sh
