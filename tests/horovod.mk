# A real Horovod (PyTorch, MPI) under the preload: tests/run_horovod.sh.  It
# skips (77) without the venv of scripts/install_horovod.sh, which
# scripts/test.sh installs first.
TESTS += tests/run_horovod.sh
EXTRA_DIST += tests/run_horovod.sh tests/horovod_train.py
