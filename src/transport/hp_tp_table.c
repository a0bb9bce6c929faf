/*
 * The table of transports (hp_transports.def) and the choice of a test
 * transport in a test build (HP_TEST_TABLES, tests/mpi/tables.mk): the one the
 * environment variable HP_TEST_TRANSPORT names, wrapped around the
 * transport hipress built.  Not a HIPRESS_* setting: the settings table
 * rejects names it does not know, and a test transport is no user's choice.
 */
#include "hp_transport.h"
#include <stdlib.h>
#include <string.h>

typedef hp_status_t (*hp_tp_wrap_fn)(hp_transport_t *tp, hp_transport_t *inner);

#define HP_TRANSPORT(name, ops) extern const hp_tp_ops_t ops;
#define HP_TRANSPORT_WRAP(name, ops, wrap) extern const hp_tp_ops_t ops; \
    hp_status_t wrap(hp_transport_t *tp, hp_transport_t *inner);
#include "hp_transports.def"
#undef HP_TRANSPORT
#undef HP_TRANSPORT_WRAP

static const struct {
    const char        *name;
    const hp_tp_ops_t *ops;
    hp_tp_wrap_fn      wrap;
} rows[] = {
#define HP_TRANSPORT(name, ops) {#name, &ops, NULL},
#define HP_TRANSPORT_WRAP(name, ops, wrap) {#name, &ops, wrap},
#include "hp_transports.def"
#undef HP_TRANSPORT
#undef HP_TRANSPORT_WRAP
};

const hp_tp_ops_t *hp_tp_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof(rows) / sizeof(rows[0]); i++)
        if (strcmp(rows[i].name, name) == 0)
            return rows[i].ops;
    return NULL;
}

hp_transport_t *hp_tp_select(hp_transport_t *base, hp_transport_t *wrap)
{
#ifdef HP_TEST_TABLES
    const char *want = getenv("HP_TEST_TRANSPORT");
    for (size_t i = 0; want != NULL && base != NULL && i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i].wrap != NULL && strcmp(rows[i].name, want) == 0) {
            if (rows[i].wrap(wrap, base) == HP_OK)
                return wrap;
            HP_WARN("test transport %s: cannot be built; using %s", want, base->ops->name);
            return base;
        }
    if (want != NULL && base != NULL && strcmp(want, base->ops->name) != 0)
        HP_WARN("HP_TEST_TRANSPORT=%s: no such test transport in this build; using %s", want, base->ops->name);
#else
    (void)wrap;
#endif
    return base;
}
