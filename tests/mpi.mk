# tests/mpi.mk: owned by one work stream; appends to the variables of Makefile.am
