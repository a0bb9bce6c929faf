# src/compll_powersgd.mk: powersgd work stream
