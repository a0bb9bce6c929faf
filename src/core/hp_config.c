/* The HIPRESS_* settings table, parser and validation. */
#include "hp_config.h"
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const hp_setting_desc_t hp_settings[HP_S_COUNT] = {
#define HP_SETTING(id, type, def, acc, agree, help) \
    [HP_S_##id] = {"HIPRESS_" #id, HP_T_##type, def, acc, agree, help},
#include "hp_settings.def"
#undef HP_SETTING
};

#define HP_PREFIX "HIPRESS_"

int hp_setting_find(const char *name)
{
    for (int i = 0; i < HP_S_COUNT; i++)
        if (strcmp(hp_settings[i].name, name) == 0)
            return i;
    return -1;
}

static void trim_copy(const char *in, char *out, size_t len)
{
    while (isspace((unsigned char)*in))
        in++;
    snprintf(out, len, "%s", in);
    size_t n = strlen(out);
    while (n > 0 && isspace((unsigned char)out[n - 1]))
        out[--n] = '\0';
}

/* "min:max" of an INT/SIZE/DOUBLE setting. */
static void parse_range(const char *acc, double *lo, double *hi)
{
    char *end;
    *lo = -INFINITY;
    *hi = INFINITY;
    if (acc == NULL || *acc == '\0')
        return;
    *lo = strtod(acc, &end);
    if (*end == ':') {
        const char *h = end + 1;
        double mul = 1;
        *hi = strtod(h, &end);
        if (*end == 'T')
            mul = 1099511627776.0;
        *hi *= mul;
    }
}

static int parse_bool(const char *t, long long *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"};
    static const char *no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < HP_ARRAY_SIZE(yes); i++) {
        if (strcasecmp(t, yes[i]) == 0) { *out = 1; return 1; }
        if (strcasecmp(t, no[i]) == 0)  { *out = 0; return 1; }
    }
    return 0;
}

/* Non-negative integer with an optional binary suffix (K, M, G, T, KiB...). */
static int parse_size(const char *t, long long *out)
{
    char *end;
    unsigned long long v, mul = 1;
    if (!isdigit((unsigned char)t[0]))
        return 0;
    errno = 0;
    v = strtoull(t, &end, 10);
    if (errno != 0)
        return 0;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': mul = 1ULL << 10; end++; break;
    case 'M': mul = 1ULL << 20; end++; break;
    case 'G': mul = 1ULL << 30; end++; break;
    case 'T': mul = 1ULL << 40; end++; break;
    default: return 0;
    }
    if (mul > 1 && (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0))
        end += strlen(end);
    if (*end != '\0' || v > (unsigned long long)LLONG_MAX / mul)
        return 0;
    *out = (long long)(v * mul);
    return 1;
}

static int parse_int(const char *t, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (errno != 0 || end == t || *end != '\0')
        return 0;
    *out = v;
    return 1;
}

static int parse_double(const char *t, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (errno != 0 || end == t || *end != '\0' || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

/* Index of t in "a|b|c" (case-insensitive), or -1. */
static int enum_index(const char *acc, const char *t)
{
    int idx = 0;
    size_t tl = strlen(t);
    const char *p = acc;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == tl && strncasecmp(p, t, len) == 0)
            return idx;
        idx++;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

/* Accepted lists an upper layer registers (the algorithm table's names). */
static const char *accepted_reg[HP_S_COUNT];

void hp_setting_accept(int id, const char *accepted)
{
    if (id >= 0 && id < HP_S_COUNT)
        accepted_reg[id] = accepted;
}

const char *hp_setting_accepted(int id)
{
    if (id < 0 || id >= HP_S_COUNT)
        return "";
    return accepted_reg[id] != NULL ? accepted_reg[id] : hp_settings[id].accepted;
}

hp_status_t hp_setting_parse(int id, const char *text, hp_value_t *value_p,
                             int (*name_ok)(const char *), char *err, size_t errlen)
{
    const hp_setting_desc_t *s;
    char t[HP_STR_MAX];
    hp_value_t v = {0};
    double lo, hi;
    int ok = 0;

    if (id < 0 || id >= HP_S_COUNT || text == NULL)
        return HP_ERR_INVALID;
    s = &hp_settings[id];
    if (strlen(text) >= HP_STR_MAX) {
        snprintf(err, errlen, "%s: value longer than %d characters", s->name, HP_STR_MAX - 1);
        return HP_ERR_INVALID;
    }
    trim_copy(text, t, sizeof(t));
    parse_range(hp_setting_accepted(id), &lo, &hi);
    switch (s->type) {
    case HP_T_BOOL:
        ok = parse_bool(t, &v.i);
        if (!ok)
            snprintf(err, errlen, "%s='%s': accepted values are 0, 1, true, false, yes, no, on, off", s->name, text);
        break;
    case HP_T_SIZE:
        ok = parse_size(t, &v.i) && v.i >= lo && v.i <= hi;
        if (!ok)
            snprintf(err, errlen, "%s='%s': accepted values are a byte count from %.0f to %s, with an optional K, M, G or T suffix",
                     s->name, text, lo, s->accepted[0] ? strchr(s->accepted, ':') + 1 : "any");
        break;
    case HP_T_INT:
        ok = parse_int(t, &v.i) && v.i >= lo && v.i <= hi;
        if (!ok)
            snprintf(err, errlen, "%s='%s': accepted values are integers from %.0f to %.0f", s->name, text, lo, hi);
        else if ((id == HP_S_ONEBIT_BLOCK || id == HP_S_TBQ_BLOCK || id == HP_S_SPARSE_BLOCK ||
                  id == HP_S_FP16_BLOCK || id == HP_S_TERNGRAD_BLOCK || id == HP_S_Q_BLOCK) &&
                 (v.i & (v.i - 1)) != 0) {
            ok = 0;
            snprintf(err, errlen, "%s='%s': accepted values are powers of two from %.0f to %.0f", s->name, text, lo, hi);
        }
        break;
    case HP_T_DOUBLE:
        ok = parse_double(t, &v.d) && v.d >= lo && v.d <= hi;
        if (!ok)
            snprintf(err, errlen, "%s='%s': accepted values are numbers from %g to %g", s->name, text, lo, hi);
        break;
    case HP_T_ENUM:
        v.i = enum_index(hp_setting_accepted(id), t);
        ok = v.i >= 0;
        if (!ok)
            snprintf(err, errlen, "%s='%s': accepted values are %s", s->name, text, hp_setting_accepted(id));
        break;
    case HP_T_NAME:
        ok = t[0] != '\0' && (name_ok == NULL || name_ok(t));
        if (!ok)
            snprintf(err, errlen, "%s='%s': not a known compressor (hipress_info --compressors lists them)", s->name, text);
        break;
    case HP_T_STRING:
        ok = 1;
        break;
    }
    if (!ok)
        return HP_ERR_INVALID;
    *value_p = v;
    return HP_OK;
}

hp_status_t hp_config_set(hp_config_t *cfg, const char *name, const char *text,
                          int (*name_ok)(const char *), char *err, size_t errlen)
{
    int id = hp_setting_find(name);
    char copy[HP_STR_MAX];
    hp_value_t v;
    hp_status_t st;

    if (id < 0) {
        snprintf(err, errlen, "%s='%s': unknown setting (hipress_info --settings lists them)", name, text ? text : "");
        return HP_ERR_INVALID;
    }
    st = hp_setting_parse(id, text, &v, name_ok, err, errlen);
    if (st != HP_OK)
        return st;
    trim_copy(text, copy, sizeof(copy));   /* text may be cfg->str[id] itself */
    cfg->v[id] = v;
    memcpy(cfg->str[id], copy, sizeof(copy));
    return HP_OK;
}

hp_status_t hp_config_load(hp_config_t *cfg, char *const *envp,
                           int (*name_ok)(const char *), char *err, size_t errlen)
{
    hp_status_t st;

    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < HP_S_COUNT; i++) {
        st = hp_config_set(cfg, hp_settings[i].name, hp_settings[i].def, NULL, err, errlen);
        if (st != HP_OK)
            return st;   /* a bad default: a bug caught by the unit tests */
    }
    for (char *const *e = envp; e != NULL && *e != NULL; e++) {
        char name[128];
        const char *eq;
        size_t nl;
        if (strncmp(*e, HP_PREFIX, strlen(HP_PREFIX)) != 0)
            continue;
        eq = strchr(*e, '=');
        if (eq == NULL)
            continue;
        nl = (size_t)(eq - *e);
        if (nl >= sizeof(name)) {
            snprintf(err, errlen, "%.40s...: unknown setting (hipress_info --settings lists them)", *e);
            return HP_ERR_INVALID;
        }
        memcpy(name, *e, nl);
        name[nl] = '\0';
        st = hp_config_set(cfg, name, eq + 1, name_ok, err, errlen);
        if (st != HP_OK)
            return st;
        cfg->from_env[hp_setting_find(name)] = 1;
    }
    return HP_OK;
}

uint64_t hp_config_hash(const hp_config_t *cfg, int id)
{
    /* Hash the parsed value, so "1M" and "1048576" agree. */
    return hp_hash_bytes(HP_HASH_INIT ^ (uint64_t)id, &cfg->v[id], sizeof(cfg->v[id])) ^
           (hp_settings[id].type == HP_T_NAME || hp_settings[id].type == HP_T_STRING
                ? hp_hash_bytes(HP_HASH_INIT, cfg->str[id], strlen(cfg->str[id]))
                : 0);
}

const char *hp_cfg_enum_name(const hp_config_t *c, int id, char *buf, size_t len)
{
    const char *p = hp_setting_accepted(id);
    long long want = c->v[id].i;
    for (long long idx = 0; p != NULL; idx++) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (idx == want) {
            snprintf(buf, len, "%.*s", (int)l, p);
            return buf;
        }
        p = bar ? bar + 1 : NULL;
    }
    snprintf(buf, len, "?");
    return buf;
}
