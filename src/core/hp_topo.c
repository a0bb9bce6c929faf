/* hwloc: the machine's packages, NUMA nodes, cores and PUs, and this
 * process's binding. */
#include "hp_topo.h"
#include "hp_core.h"
#include <hwloc.h>
#include <string.h>

static int count_type(hwloc_topology_t topo, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(topo, type);
    return n > 0 ? n : 0;
}

int hp_topo_get(hp_topo_t *t)
{
    hwloc_topology_t topo;
    hwloc_bitmap_t set;

    memset(t, 0, sizeof(*t));
    if (hwloc_topology_init(&topo) != 0)
        return -1;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return -1;
    }
    t->packages = count_type(topo, HWLOC_OBJ_PACKAGE);
    t->numa = count_type(topo, HWLOC_OBJ_NUMANODE);
    t->cores = count_type(topo, HWLOC_OBJ_CORE);
    t->pus = count_type(topo, HWLOC_OBJ_PU);
    set = hwloc_bitmap_alloc();
    if (set != NULL && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0)
        t->bound_pus = hwloc_bitmap_weight(set);
    if (set != NULL)
        hwloc_bitmap_free(set);
    if (t->bound_pus <= 0)
        t->bound_pus = t->pus;
    hwloc_topology_destroy(topo);
    return 0;
}
