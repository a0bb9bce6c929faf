# A real Horovod (PyTorch, MPI) under the preload: tests/study/run_horovod.sh.  It
# skips (77) without the venv of scripts/install_horovod.sh, which
# scripts/test.sh installs first.
TESTS += tests/study/run_horovod.sh
EXTRA_DIST += tests/study/run_horovod.sh tests/study/horovod_train.py
