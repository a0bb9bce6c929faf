# tests/docs.mk: documentation checks (docs work stream); appends to the
# variables of Makefile.am.  tests/check_docs.sh reads HP_BUILDDIR and
# HP_SRCDIR from AM_TESTS_ENVIRONMENT (tests/tests.mk).
TESTS += tests/check_docs.sh
EXTRA_DIST += tests/check_docs.sh
# tests/check_layers.sh: the layering drawn from the includes (doc/architecture.md).
TESTS += tests/check_layers.sh
EXTRA_DIST += tests/check_layers.sh
