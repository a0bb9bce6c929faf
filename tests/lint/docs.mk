# tests/lint/docs.mk: the checks of the documentation and of the layering; appends to the
# variables of Makefile.am.  tests/lint/check_docs.sh reads HP_BUILDDIR and
# HP_SRCDIR from AM_TESTS_ENVIRONMENT (tests/tests.mk).
TESTS += tests/lint/check_docs.sh
EXTRA_DIST += tests/lint/check_docs.sh
# tests/lint/check_layers.sh: the layering drawn from the includes (what the
# entry layer may include among it), and the size of every hand-written C,
# C++ and CUDA file (doc/dev/architecture.md); its self-test plants
# violations in a copy of the tree.
TESTS += tests/lint/check_layers.sh tests/lint/check_layers_selftest.sh
EXTRA_DIST += tests/lint/check_layers.sh tests/lint/check_layers_selftest.sh tests/lint/graph.awk
# tests/lint/check_names.sh: the layering drawn from the names the built objects
# use of each other (nm, after the build); its self-test plants violations in a
# small tree of its own.
TESTS += tests/lint/check_names.sh tests/lint/check_names_selftest.sh
EXTRA_DIST += tests/lint/check_names.sh tests/lint/check_names_selftest.sh
# scripts/lab/scale_model.py --selftest: the cost model's byte formulas (doc/scale.md).
TESTS += scripts/lab/scale_model.py
TEST_EXTENSIONS = .test .py
# (the flags of PY_LOG_COMPILER go to the interpreter, so a shell passes --selftest)
PY_LOG_COMPILER = $(SHELL) -c 'exec python3 "$$0" --selftest'
