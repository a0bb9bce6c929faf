/*
 * Settings: the HIPRESS_* table, its parser and validation.  Pure functions
 * (no MPI), unit-tested in tests/unit/check_core.c.
 */
#ifndef HP_CONFIG_H
#define HP_CONFIG_H

#include "hp_core.h"

typedef enum { HP_T_BOOL, HP_T_SIZE, HP_T_INT, HP_T_DOUBLE, HP_T_ENUM, HP_T_NAME, HP_T_STRING } hp_setting_type_t;

typedef enum {
#define HP_SETTING(id, type, def, acc, agree, help) HP_S_##id,
#include "hp_settings.def"
#undef HP_SETTING
    HP_S_COUNT
} hp_setting_id_t;

typedef struct {
    const char       *name;     /* "HIPRESS_MIN_BYTES" */
    hp_setting_type_t type;
    const char       *def;
    const char       *accepted;
    int               agree;
    const char       *help;
} hp_setting_desc_t;

typedef union {
    long long   i;   /* BOOL, SIZE, INT, ENUM (index into accepted) */
    double      d;   /* DOUBLE */
} hp_value_t;

#define HP_STR_MAX 256
typedef struct hp_config {
    hp_value_t v[HP_S_COUNT];
    char       str[HP_S_COUNT][HP_STR_MAX]; /* the text each value came from */
    int        from_env[HP_S_COUNT];        /* 1 when set in the environment */
} hp_config_t;

extern const hp_setting_desc_t hp_settings[HP_S_COUNT];

/* Index of a setting by full name ("HIPRESS_ALGO"), or -1. */
int hp_setting_find(const char *name);

/* The accepted values of a setting: the table's, or a list an upper layer
 * registered for it (HIPRESS_ALGO's names come from the algorithm table,
 * src/algo/hp_algos.def, registered by hp_algo_register_settings before the
 * settings are loaded).  hp_setting_accept keeps the pointer. */
void hp_setting_accept(int id, const char *accepted);
const char *hp_setting_accepted(int id);

/* Parse one value.  NAME values are checked with `name_ok` when not NULL.
 * On error writes "HIPRESS_X='val': <what is accepted>" to err. */
hp_status_t hp_setting_parse(int id, const char *text, hp_value_t *value_p,
                             int (*name_ok)(const char *), char *err, size_t errlen);

/* Fill cfg from an environment array (NULL-terminated "NAME=value" strings):
 * defaults first, then every HIPRESS_* entry.  Unknown HIPRESS_* names are an
 * error.  Returns the first error, with its message in err. */
hp_status_t hp_config_load(hp_config_t *cfg, char *const *envp,
                           int (*name_ok)(const char *), char *err, size_t errlen);

/* Set one value of an existing config (hipress_comm_set). */
hp_status_t hp_config_set(hp_config_t *cfg, const char *name, const char *text,
                          int (*name_ok)(const char *), char *err, size_t errlen);

/* Hash of the text of one setting, for the cross-rank agreement check. */
uint64_t hp_config_hash(const hp_config_t *cfg, int id);

/* Accessors. */
static inline long long hp_cfg_i(const hp_config_t *c, int id) { return c->v[id].i; }
static inline double hp_cfg_d(const hp_config_t *c, int id) { return c->v[id].d; }
static inline const char *hp_cfg_s(const hp_config_t *c, int id) { return c->str[id]; }

/* Enum values, in the order of their accepted list. */
enum { HP_HIER_AUTO, HP_HIER_ON, HP_HIER_OFF };
/* HIPRESS_ISA's values are the instruction-set levels of the operator layer
 * (hp_isa_t, src/ops/hp_ops.h), declared there once. */

/* The value of an ENUM setting as text ("ring"). */
const char *hp_cfg_enum_name(const hp_config_t *c, int id, char *buf, size_t len);

#endif
