/*
 * The machine under this process, from hwloc: for hipress_info and for the
 * hierarchy's log (how many cores the ranks of a node share).  The cost
 * model does not read it: its encode, decode and network rates are
 * measured while every rank of the machine works at once, so a node with
 * fewer cores than ranks already shows as slower rates.
 */
#ifndef HP_TOPO_H
#define HP_TOPO_H

typedef struct {
    int packages, numa, cores, pus;   /* in the machine (0: unknown) */
    int bound_pus;                    /* PUs this process may run on (its binding) */
} hp_topo_t;

/* Fills *t (zeros when hwloc cannot read the machine); 0 or -1. */
int hp_topo_get(hp_topo_t *t);

#endif
