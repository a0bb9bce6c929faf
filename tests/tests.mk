# Tests, driven by `make check`.  Check suites for pure functions; MPI
# behaviour through small programs under mpirun, driven by shell scripts.
AM_TESTS_ENVIRONMENT = \
	MPIEXEC='$(MPIEXEC)'; export MPIEXEC; \
	HP_PYTHON='$(HP_PYTHON)'; export HP_PYTHON; \
	HP_BUILDDIR='$(abs_top_builddir)'; export HP_BUILDDIR; \
	HP_SRCDIR='$(abs_top_srcdir)'; export HP_SRCDIR;
