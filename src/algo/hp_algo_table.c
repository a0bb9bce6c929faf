/*
 * The algorithm table: one row per line of hp_algos.def, built here and
 * nowhere else.  The plan, the settings and the stats read the algorithms
 * through it; adding an algorithm is its row and its own file.
 */
#include "hp_algo.h"
#include "hp_config.h"

static const hp_algo_desc_t algos[HP_ALGO_COUNT] = {
    [HP_ALGO_AUTO] = {"auto", hp_algo_collective, NULL, NULL, HP_UNIT_ALL},
#define HP_ALGO(ID, name, unit) \
    [HP_ALGO_##ID] = {#name, hp_algo_##name##_run, hp_algo_##name##_stages, hp_algo_##name##_volume, unit},
#include "hp_algos.def"
#undef HP_ALGO
};

static const char accepted[] = "auto"
#define HP_ALGO(ID, name, unit) "|" #name
#include "hp_algos.def"
#undef HP_ALGO
    ;

const hp_algo_desc_t *hp_algo_get(int id)
{
    return id > HP_ALGO_AUTO && id < HP_ALGO_COUNT ? &algos[id] : NULL;
}

const char *hp_algo_name(int id)
{
    return id >= 0 && id < HP_ALGO_COUNT ? algos[id].name : "?";
}

const char *hp_algo_accepted(void)
{
    return accepted;
}

void hp_algo_register_settings(void)
{
    hp_setting_accept(HP_S_ALGO, accepted);
}

size_t hp_algo_unit_elems(int id, size_t n, int N, size_t g)
{
    const hp_algo_desc_t *a = hp_algo_get(id);
    if (a == NULL || a->unit == HP_UNIT_ALL || N < 1)
        return n;
    return hp_span_len(n, (size_t)N, 0, g ? g : 1);
}
