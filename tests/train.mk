# tests/train.mk: training under the preload (issue 7; the convergence study
# work stream); appends to the variables of Makefile.am.
#   run_train.sh  scripts/convergence.py --preset quick --check: a short
#                 data-parallel training at 4 ranks, plain against onebit
#                 under auto and ring; accuracy bound, compressed calls counted
TESTS += tests/run_train.sh
EXTRA_DIST += tests/run_train.sh
