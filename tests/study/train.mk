# tests/study/train.mk: training under the preload (the convergence study
# work stream); appends to the variables of Makefile.am.
#   run_train.sh  scripts/lab/convergence.py --preset quick --check: a short
#                 data-parallel training at 4 ranks, plain against onebit
#                 under auto and ps; accuracy bound, compressed calls counted;
#                 then at 4 and 8 ranks onebit under ps with its
#                 sum codec against its single-stage reference, paired by
#                 seed (--check-ref: 1 point, test loss +0.05)
TESTS += tests/study/run_train.sh
EXTRA_DIST += tests/study/run_train.sh
