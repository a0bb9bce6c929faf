/*
 * Unit tests of the pure parts of the core, with no MPI traffic: the settings
 * parser and loader, the eligibility rule, the ring's chunk arithmetic, the
 * residual store, the message header and the fp16 conversions.
 *
 * The fp16 reference is the F16C instruction itself (_cvtss_sh/_cvtsh_ss),
 * compiled for F16C in this file only (function target attribute), so the
 * library keeps its portable C conversion and is checked against hardware.
 */
#include <check.h>
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_plan.h"
#include "hp_ops.h"
#include "hp_ops_sparse.h"
#include "hp_config.h"
#include "hp_elem.h"
#include "hp_eligible.h"
#include "hp_residual.h"

/* ck_assert_msg records a checkpoint (a write and flush) on every success,
 * which costs seconds over the millions of checks of the loops below; this
 * one only acts on failure. */
#define REQUIRE(expr, fmt, ...) \
    do { if (HP_UNLIKELY(!(expr))) ck_abort_msg("'%s' failed: " fmt, #expr, ##__VA_ARGS__); } while (0)

/* ================================================================ settings */

static int id_of(const char *name)
{
    int id = hp_setting_find(name);
    REQUIRE(id >= 0, "setting %s missing from hp_settings.def", name);
    return id;
}

/* Parse `text` for setting `name`; returns the status and leaves the error
 * message in err. */
static hp_status_t parse(const char *name, const char *text, hp_value_t *v, char *err, size_t len)
{
    err[0] = '\0';
    return hp_setting_parse(id_of(name), text, v, NULL, err, len);
}

static void expect_int(const char *name, const char *text, long long want)
{
    hp_value_t v = {0};
    char err[512];
    hp_status_t st = parse(name, text, &v, err, sizeof(err));
    REQUIRE(st == HP_OK, "%s='%s' rejected: %s", name, text, err);
    REQUIRE(v.i == want, "%s='%s' parsed as %lld, want %lld", name, text, v.i, want);
}

static void expect_double(const char *name, const char *text, double want)
{
    hp_value_t v = {0};
    char err[512];
    hp_status_t st = parse(name, text, &v, err, sizeof(err));
    REQUIRE(st == HP_OK, "%s='%s' rejected: %s", name, text, err);
    REQUIRE(v.d == want, "%s='%s' parsed as %.17g, want %.17g", name, text, v.d, want);
}

/* A rejected value: the message must name the variable, quote the value and
 * contain `accepted` (the part that tells the user what would work). */
static void expect_bad(const char *name, const char *text, const char *accepted)
{
    hp_value_t v;
    char err[512], quoted[300];
    v.i = 0x5a5a5a5a;
    hp_status_t st = parse(name, text, &v, err, sizeof(err));
    REQUIRE(st == HP_ERR_INVALID, "%s='%s' accepted (want rejected)", name, text);
    REQUIRE(v.i == 0x5a5a5a5a, "%s='%s': output written on error", name, text);
    REQUIRE(strstr(err, name) != NULL, "message '%s' does not name %s", err, name);
    snprintf(quoted, sizeof(quoted), "'%s'", text);
    REQUIRE(strstr(err, quoted) != NULL, "message '%s' does not quote the value %s", err, quoted);
    REQUIRE(strstr(err, accepted) != NULL, "message '%s' does not say what is accepted ('%s')", err,
                  accepted);
    REQUIRE(strchr(err, '\n') == NULL, "message '%s' is not one line", err);
}

START_TEST(settings_table)
{
    /* every entry is well formed and its default parses */
    for (int i = 0; i < HP_S_COUNT; i++) {
        const hp_setting_desc_t *s = &hp_settings[i];
        hp_value_t v;
        char err[512] = "";
        REQUIRE(strncmp(s->name, "HIPRESS_", 8) == 0, "%s lacks the prefix", s->name);
        REQUIRE(s->help != NULL && s->help[0] != '\0', "%s has no help", s->name);
        ck_assert_int_eq(hp_setting_find(s->name), i);
        for (int j = 0; j < i; j++)
            REQUIRE(strcmp(s->name, hp_settings[j].name) != 0, "%s declared twice", s->name);
        REQUIRE(hp_setting_parse(i, s->def, &v, NULL, err, sizeof(err)) == HP_OK,
                      "default of %s does not parse: %s", s->name, err);
        if (s->type == HP_T_ENUM)
            REQUIRE(strchr(hp_setting_accepted(i), '|') != NULL, "%s: enum without alternatives", s->name);
    }
    ck_assert_int_eq(hp_setting_find("HIPRESS_NOPE"), -1);
    ck_assert_int_eq(hp_setting_find("MIN_BYTES"), -1);
    ck_assert_int_eq(hp_setting_find("hipress_min_bytes"), -1);
}
END_TEST

START_TEST(settings_bool)
{
    static const char *yes[] = {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", " 1 ", "\ttrue\n"};
    static const char *no[] = {"0", "false", "FALSE", "no", "No", "off", "OFF", "  0"};
    for (size_t i = 0; i < HP_ARRAY_SIZE(yes); i++)
        expect_int("HIPRESS_ENABLE", yes[i], 1);
    for (size_t i = 0; i < HP_ARRAY_SIZE(no); i++)
        expect_int("HIPRESS_STATS", no[i], 0);
    expect_bad("HIPRESS_ENABLE", "2", "true");
    expect_bad("HIPRESS_ENABLE", "", "false");
    expect_bad("HIPRESS_ENABLE", "maybe", "yes");
    expect_bad("HIPRESS_ENABLE", "10", "off");
    expect_bad("HIPRESS_VERIFY", "truee", "true");
    expect_bad("HIPRESS_VERIFY", "-1", "0, 1");
}
END_TEST

START_TEST(settings_size)
{
    expect_int("HIPRESS_MIN_BYTES", "0", 0);
    expect_int("HIPRESS_MIN_BYTES", "4096", 4096);
    expect_int("HIPRESS_MIN_BYTES", "1K", 1024);
    expect_int("HIPRESS_MIN_BYTES", "1k", 1024);
    expect_int("HIPRESS_MIN_BYTES", "64K", 65536);
    expect_int("HIPRESS_MIN_BYTES", "1M", 1048576);
    expect_int("HIPRESS_MIN_BYTES", "3m", 3LL << 20);
    expect_int("HIPRESS_MIN_BYTES", "2G", 2LL << 30);
    expect_int("HIPRESS_MIN_BYTES", "1T", 1LL << 40);
    expect_int("HIPRESS_MIN_BYTES", "1KiB", 1024);
    expect_int("HIPRESS_MIN_BYTES", "2MB", 2LL << 20);
    expect_int("HIPRESS_MIN_BYTES", " 8M ", 8LL << 20);
    expect_int("HIPRESS_PARTITION_BYTES", "256K", 256LL << 10);
    expect_int("HIPRESS_RESIDUAL_MAX_MB", "1048576", 1048576);
    /* a negative size is an error, never a huge unsigned value */
    expect_bad("HIPRESS_MIN_BYTES", "-3", "byte count");
    expect_bad("HIPRESS_MIN_BYTES", "-1M", "K, M, G");
    expect_bad("HIPRESS_MIN_BYTES", "", "byte count");
    expect_bad("HIPRESS_MIN_BYTES", "K", "byte count");
    expect_bad("HIPRESS_MIN_BYTES", "1X", "byte count");
    expect_bad("HIPRESS_MIN_BYTES", "1.5M", "byte count");
    expect_bad("HIPRESS_MIN_BYTES", "1M2", "byte count");
    expect_bad("HIPRESS_MIN_BYTES", "0x10", "byte count");
    expect_bad("HIPRESS_MIN_BYTES", "2T", "1T");                     /* above the range */
    expect_bad("HIPRESS_MIN_BYTES", "99999999999999999999", "byte count"); /* overflows */
    expect_bad("HIPRESS_MIN_BYTES", "16777216T", "byte count");      /* overflows after the suffix */
    expect_bad("HIPRESS_RESIDUAL_MAX_MB", "1048577", "1048576");
}
END_TEST

START_TEST(settings_int)
{
    expect_int("HIPRESS_NODE_SIZE", "0", 0);
    expect_int("HIPRESS_NODE_SIZE", "65536", 65536);
    expect_int("HIPRESS_SEED", "2147483647", 2147483647);
    expect_int("HIPRESS_TEST_CORRUPT", "-1", -1);
    expect_int("HIPRESS_POWERSGD_RANK", " 7 ", 7);
    expect_bad("HIPRESS_NODE_SIZE", "65537", "from 0 to 65536");
    expect_bad("HIPRESS_NODE_SIZE", "-1", "from 0 to 65536");
    expect_bad("HIPRESS_SEED", "2147483648", "integers");
    expect_bad("HIPRESS_SEED", "99999999999999999999999", "integers");
    expect_bad("HIPRESS_TEST_CORRUPT", "-2", "from -1 to 65535");
    expect_bad("HIPRESS_POWERSGD_RANK", "0", "from 1 to 256");
    expect_bad("HIPRESS_POWERSGD_RANK", "4x", "integers");
    expect_bad("HIPRESS_POWERSGD_RANK", "", "integers");
    expect_bad("HIPRESS_POWERSGD_RANK", "2.5", "integers");
}
END_TEST

START_TEST(settings_onebit_block)
{
    for (long long b = 32; b <= 1048576; b *= 2) {
        char t[32];
        snprintf(t, sizeof(t), "%lld", b);
        expect_int("HIPRESS_ONEBIT_BLOCK", t, b);
    }
    expect_bad("HIPRESS_ONEBIT_BLOCK", "48", "powers of two");
    expect_bad("HIPRESS_ONEBIT_BLOCK", "4095", "powers of two");
    expect_bad("HIPRESS_ONEBIT_BLOCK", "1048575", "powers of two");
    expect_bad("HIPRESS_ONEBIT_BLOCK", "16", "32");           /* a power of two below the range */
    expect_bad("HIPRESS_ONEBIT_BLOCK", "2097152", "1048576"); /* and above it */
    expect_bad("HIPRESS_ONEBIT_BLOCK", "0", "32");
    /* the q codecs' block, the same rule */
    expect_int("HIPRESS_Q_BLOCK", "32", 32);
    expect_int("HIPRESS_Q_BLOCK", "1048576", 1048576);
    expect_bad("HIPRESS_Q_BLOCK", "100", "powers of two");
    expect_bad("HIPRESS_Q_BLOCK", "16", "32");
    expect_bad("HIPRESS_Q_BLOCK", "2097152", "1048576");
}
END_TEST

START_TEST(settings_double)
{
    expect_double("HIPRESS_TBQ_SCALE", "1", 1.0);
    expect_double("HIPRESS_TBQ_SCALE", "0.000001", 0.000001);
    expect_double("HIPRESS_TBQ_SCALE", "1e3", 1000.0);
    expect_double("HIPRESS_SPARSE_RATIO", "1", 1.0);
    expect_double("HIPRESS_SPARSE_RATIO", " 0.25 ", 0.25);
    expect_double("HIPRESS_DGC_MOMENTUM", "0.999999", 0.999999);
    expect_double("HIPRESS_DGC_MOMENTUM", "0", 0.0);
    expect_double("HIPRESS_NET_GBPS", "12.5", 12.5);
    expect_double("HIPRESS_TBQ_THRESHOLD", "1e30", 1e30);
    expect_bad("HIPRESS_TBQ_SCALE", "0", "numbers from");
    expect_bad("HIPRESS_TBQ_SCALE", "1000.5", "1000");
    expect_bad("HIPRESS_SPARSE_RATIO", "1.01", "numbers from");
    expect_bad("HIPRESS_DGC_MOMENTUM", "1", "0.999999");
    expect_bad("HIPRESS_NET_GBPS", "-1", "numbers from");
    expect_bad("HIPRESS_NET_GBPS", "nan", "numbers from");
    expect_bad("HIPRESS_NET_GBPS", "inf", "numbers from");
    expect_bad("HIPRESS_NET_GBPS", "abc", "numbers from");
    expect_bad("HIPRESS_NET_GBPS", "1.5x", "numbers from");
    expect_bad("HIPRESS_NET_GBPS", "", "numbers from");
    expect_bad("HIPRESS_TBQ_THRESHOLD", "1e31", "numbers from");
}
END_TEST

START_TEST(settings_enum)
{
    expect_int("HIPRESS_ALGO", "auto", HP_ALGO_AUTO);
    expect_int("HIPRESS_ALGO", "ring", HP_ALGO_RING);
    expect_int("HIPRESS_ALGO", "RING", HP_ALGO_RING);
    expect_int("HIPRESS_ALGO", "Tree", HP_ALGO_TREE);
    expect_int("HIPRESS_ALGO", "pS", HP_ALGO_PS);
    expect_int("HIPRESS_ALGO", " allgather ", HP_ALGO_ALLGATHER);
    expect_int("HIPRESS_HIERARCHICAL", "OFF", HP_HIER_OFF);
    /* the settings' order is the operator layer's levels (hp_ops.h) */
    expect_int("HIPRESS_ISA", "auto", HP_ISA_AUTO);
    expect_int("HIPRESS_ISA", "generic", HP_ISA_GENERIC);
    expect_int("HIPRESS_ISA", "avx2", HP_ISA_AVX2);
    expect_int("HIPRESS_DEBUG", "info", HP_LOG_INFO);
    expect_int("HIPRESS_DEBUG", "TRACE", HP_LOG_TRACE);
    expect_int("HIPRESS_DEBUG", "none", HP_LOG_NONE);
    expect_int("HIPRESS_TERNGRAD_BITS", "4", 2);   /* the index in "1|2|4|8" */
    expect_int("HIPRESS_Q_ROUNDING", "stochastic", 1);
    expect_bad("HIPRESS_ALGO", "nope", "auto|ring|tree|ps|allgather");
    expect_bad("HIPRESS_ALGO", "rin", "auto|ring|tree|ps|allgather");
    expect_bad("HIPRESS_ALGO", "rings", "auto|ring|tree|ps|allgather");
    expect_bad("HIPRESS_ALGO", "ring|tree", "auto|ring|tree|ps|allgather");
    expect_bad("HIPRESS_ALGO", "", "auto|ring|tree|ps|allgather");
    expect_bad("HIPRESS_TERNGRAD_BITS", "3", "1|2|4|8");
    expect_bad("HIPRESS_Q_ROUNDING", "up", "nearest|stochastic");
    expect_bad("HIPRESS_DEBUG", "verbose", "NONE|WARN|INFO|TRACE");

    /* the value's name round-trips through hp_cfg_enum_name */
    hp_config_t cfg;
    char err[512], buf[32];
    char *env[] = {"HIPRESS_ALGO=PS", "HIPRESS_DEBUG=Trace", NULL};
    ck_assert_int_eq(hp_config_load(&cfg, env, NULL, err, sizeof(err)), HP_OK);
    ck_assert_str_eq(hp_cfg_enum_name(&cfg, id_of("HIPRESS_ALGO"), buf, sizeof(buf)), "ps");
    ck_assert_str_eq(hp_cfg_enum_name(&cfg, id_of("HIPRESS_DEBUG"), buf, sizeof(buf)), "TRACE");
    ck_assert_str_eq(hp_cfg_enum_name(&cfg, id_of("HIPRESS_HIERARCHICAL"), buf, sizeof(buf)), "auto");
}
END_TEST

static int name_ok_calls;
static int only_alpha_beta(const char *name)
{
    name_ok_calls++;
    return strcmp(name, "alpha") == 0 || strcmp(name, "beta_2") == 0;
}

START_TEST(settings_name)
{
    int id = id_of("HIPRESS_COMPRESSOR");
    hp_value_t v;
    char err[512];

    ck_assert_int_eq(hp_settings[id].type, HP_T_NAME);
    name_ok_calls = 0;
    ck_assert_int_eq(hp_setting_parse(id, "alpha", &v, only_alpha_beta, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_setting_parse(id, " beta_2 ", &v, only_alpha_beta, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_setting_parse(id, "gamma", &v, only_alpha_beta, err, sizeof(err)), HP_ERR_INVALID);
    REQUIRE(strstr(err, "HIPRESS_COMPRESSOR") && strstr(err, "'gamma'"), "message: %s", err);
    REQUIRE(strstr(err, "compressor") != NULL, "message does not say what is accepted: %s", err);
    ck_assert_int_eq(name_ok_calls, 3);
    /* names are case-sensitive (the callback decides, no folding) */
    ck_assert_int_eq(hp_setting_parse(id, "ALPHA", &v, only_alpha_beta, err, sizeof(err)), HP_ERR_INVALID);
    /* empty is never a name, with or without a callback */
    ck_assert_int_eq(hp_setting_parse(id, "", &v, only_alpha_beta, err, sizeof(err)), HP_ERR_INVALID);
    ck_assert_int_eq(hp_setting_parse(id, "  ", &v, NULL, err, sizeof(err)), HP_ERR_INVALID);
    /* without a callback any non-empty name passes (checked after plugins load) */
    ck_assert_int_eq(hp_setting_parse(id, "whatever", &v, NULL, err, sizeof(err)), HP_OK);
    /* the real registry as the callback */
    ck_assert_int_eq(hp_setting_parse(id, "fp16", &v, hp_comp_name_ok, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_setting_parse(id, "none", &v, hp_comp_name_ok, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_setting_parse(id, "bogus", &v, hp_comp_name_ok, err, sizeof(err)), HP_ERR_INVALID);

    /* STRING takes anything; an over-long value is rejected for every type */
    char big[HP_STR_MAX + 10];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert_int_eq(hp_setting_parse(id_of("HIPRESS_PLUGIN"), "/x/y z.so", &v, NULL, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_setting_parse(id_of("HIPRESS_PLUGIN"), big, &v, NULL, err, sizeof(err)), HP_ERR_INVALID);
    REQUIRE(strstr(err, "HIPRESS_PLUGIN") != NULL, "message: %s", err);
    ck_assert_int_eq(hp_setting_parse(-1, "1", &v, NULL, err, sizeof(err)), HP_ERR_INVALID);
    ck_assert_int_eq(hp_setting_parse(HP_S_COUNT, "1", &v, NULL, err, sizeof(err)), HP_ERR_INVALID);
}
END_TEST

START_TEST(config_load_defaults)
{
    hp_config_t cfg;
    char err[512] = "";
    char *env[] = {"PATH=/usr/bin", "HOME=/root", "HIPRESSX=1", "NOT_HIPRESS_ALGO=tree", "hipress_algo=tree", NULL};

    memset(&cfg, 0x7f, sizeof(cfg));
    ck_assert_int_eq(hp_config_load(&cfg, env, NULL, err, sizeof(err)), HP_OK);
    for (int i = 0; i < HP_S_COUNT; i++) {
        hp_value_t v;
        char e2[512];
        ck_assert_int_eq(hp_setting_parse(i, hp_settings[i].def, &v, NULL, e2, sizeof(e2)), HP_OK);
        REQUIRE(memcmp(&v, &cfg.v[i], sizeof(v)) == 0, "%s is not its default", hp_settings[i].name);
        ck_assert_int_eq(cfg.from_env[i], 0);
        ck_assert_str_eq(cfg.str[i], hp_settings[i].def);
    }
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_MIN_BYTES), 1048576);   /* DESIGN: at least 1 MiB */
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_ENABLE), 1);
    ck_assert_str_eq(hp_cfg_s(&cfg, HP_S_COMPRESSOR), "none");
    /* NULL environment: defaults only */
    ck_assert_int_eq(hp_config_load(&cfg, NULL, NULL, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_ALGO), HP_ALGO_AUTO);
}
END_TEST

START_TEST(config_load_env)
{
    hp_config_t cfg;
    char err[512] = "";
    char *env[] = {"PATH=/usr/bin", "HIPRESS_MIN_BYTES=2M", "HIPRESS_ALGO=Ring",
                   "HIPRESS_COMPRESSOR=fp16", "HIPRESS_TBQ_SCALE=0.5", "HIPRESS_PLUGIN=",
                   "HIPRESS_ALGO=tree", /* the later entry wins, as in a shell */
                   NULL};

    ck_assert_int_eq(hp_config_load(&cfg, env, hp_comp_name_ok, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_MIN_BYTES), 2 << 20);
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_ALGO), HP_ALGO_TREE);
    ck_assert_str_eq(hp_cfg_s(&cfg, HP_S_COMPRESSOR), "fp16");
    ck_assert(hp_cfg_d(&cfg, HP_S_TBQ_SCALE) == 0.5);
    ck_assert_str_eq(hp_cfg_s(&cfg, HP_S_MIN_BYTES), "2M");
    ck_assert_int_eq(cfg.from_env[HP_S_MIN_BYTES], 1);
    ck_assert_int_eq(cfg.from_env[HP_S_PLUGIN], 1);
    ck_assert_int_eq(cfg.from_env[HP_S_SEED], 0);
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_SEED), 12345);
}
END_TEST

/* hp_config_load over a bad environment: error status and a message naming
 * the variable, the value and what is accepted. */
static void expect_load_error(char *entry, const char *var, const char *value, const char *accepted)
{
    hp_config_t cfg;
    char err[512] = "";
    char *env[] = {"HIPRESS_ALGO=ring", entry, "HIPRESS_SEED=7", NULL};
    REQUIRE(hp_config_load(&cfg, env, hp_comp_name_ok, err, sizeof(err)) == HP_ERR_INVALID,
                  "%s accepted", entry);
    REQUIRE(strstr(err, var) != NULL, "'%s': message '%s' does not name %s", entry, err, var);
    if (value != NULL)
        REQUIRE(strstr(err, value) != NULL, "'%s': message '%s' does not quote %s", entry, err, value);
    REQUIRE(strstr(err, accepted) != NULL, "'%s': message '%s' lacks '%s'", entry, err, accepted);
}

START_TEST(config_load_errors)
{
    expect_load_error("HIPRESS_FOO=1", "HIPRESS_FOO", "'1'", "unknown setting");
    expect_load_error("HIPRESS_BOGUS=yes", "HIPRESS_BOGUS", "'yes'", "hipress_info --settings");
    expect_load_error("HIPRESS_=1", "HIPRESS_", "'1'", "unknown setting");
    expect_load_error("HIPRESS_MIN_BYTES=-3", "HIPRESS_MIN_BYTES", "'-3'", "byte count");
    expect_load_error("HIPRESS_ALGO=nope", "HIPRESS_ALGO", "'nope'", "auto|ring|tree|ps|allgather");
    expect_load_error("HIPRESS_COMPRESSOR=bogus", "HIPRESS_COMPRESSOR", "'bogus'", "compressor");
    expect_load_error("HIPRESS_ENABLE=perhaps", "HIPRESS_ENABLE", "'perhaps'", "true");
    expect_load_error("HIPRESS_ONEBIT_BLOCK=100", "HIPRESS_ONEBIT_BLOCK", "'100'", "powers of two");
    expect_load_error("HIPRESS_SPARSE_RATIO=2", "HIPRESS_SPARSE_RATIO", "'2'", "numbers from");

    /* a very long unknown name still gives a message naming it (truncated) */
    char longname[400];
    memset(longname, 'Z', sizeof(longname));
    memcpy(longname, "HIPRESS_", 8);
    strcpy(longname + sizeof(longname) - 3, "=1");
    expect_load_error(longname, "HIPRESS_ZZZZ", NULL, "unknown setting");
}
END_TEST

START_TEST(config_set_keeps_value_on_error)
{
    hp_config_t cfg;
    char err[512];
    ck_assert_int_eq(hp_config_load(&cfg, NULL, NULL, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_config_set(&cfg, "HIPRESS_MIN_BYTES", "64K", NULL, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_MIN_BYTES), 65536);
    ck_assert_int_eq(hp_config_set(&cfg, "HIPRESS_MIN_BYTES", "-3", NULL, err, sizeof(err)), HP_ERR_INVALID);
    ck_assert_int_eq(hp_cfg_i(&cfg, HP_S_MIN_BYTES), 65536);
    ck_assert_str_eq(hp_cfg_s(&cfg, HP_S_MIN_BYTES), "64K");
    ck_assert_int_eq(hp_config_set(&cfg, "HIPRESS_NOPE", "1", NULL, err, sizeof(err)), HP_ERR_INVALID);
    REQUIRE(strstr(err, "HIPRESS_NOPE") != NULL, "message: %s", err);
    ck_assert_int_eq(hp_config_set(&cfg, "HIPRESS_COMPRESSOR", "nope", hp_comp_name_ok, err, sizeof(err)),
                     HP_ERR_INVALID);
    ck_assert_str_eq(hp_cfg_s(&cfg, HP_S_COMPRESSOR), "none");
    /* setting a value from its own stored text (hp_state.c re-checks the
     * compressor that way) must not corrupt it */
    ck_assert_int_eq(hp_config_set(&cfg, "HIPRESS_COMPRESSOR", "fp16", NULL, err, sizeof(err)), HP_OK);
    ck_assert_int_eq(hp_config_set(&cfg, "HIPRESS_COMPRESSOR", hp_cfg_s(&cfg, HP_S_COMPRESSOR),
                                   hp_comp_name_ok, err, sizeof(err)), HP_OK);
    ck_assert_str_eq(hp_cfg_s(&cfg, HP_S_COMPRESSOR), "fp16");
}
END_TEST

static uint64_t hash_of(const char *entry, const char *name)
{
    hp_config_t cfg;
    char err[512] = "";
    char *env[] = {(char *)entry, NULL};
    REQUIRE(hp_config_load(&cfg, env, NULL, err, sizeof(err)) == HP_OK, "%s: %s", entry, err);
    return hp_config_hash(&cfg, id_of(name));
}

START_TEST(config_hash)
{
    /* the parsed value is what ranks must agree on, not its spelling */
    ck_assert(hash_of("HIPRESS_MIN_BYTES=1M", "HIPRESS_MIN_BYTES") ==
              hash_of("HIPRESS_MIN_BYTES=1048576", "HIPRESS_MIN_BYTES"));
    ck_assert(hash_of("HIPRESS_MIN_BYTES=1M", "HIPRESS_MIN_BYTES") ==
              hash_of("HIPRESS_MIN_BYTES=1024K", "HIPRESS_MIN_BYTES"));
    ck_assert(hash_of("HIPRESS_MIN_BYTES=1M", "HIPRESS_MIN_BYTES") ==
              hash_of("X=1", "HIPRESS_MIN_BYTES"));   /* the default is 1M */
    ck_assert(hash_of("HIPRESS_MIN_BYTES=1M", "HIPRESS_MIN_BYTES") !=
              hash_of("HIPRESS_MIN_BYTES=2M", "HIPRESS_MIN_BYTES"));
    ck_assert(hash_of("HIPRESS_MIN_BYTES=0", "HIPRESS_MIN_BYTES") !=
              hash_of("HIPRESS_MIN_BYTES=1", "HIPRESS_MIN_BYTES"));
    ck_assert(hash_of("HIPRESS_ALGO=ring", "HIPRESS_ALGO") == hash_of("HIPRESS_ALGO=RING", "HIPRESS_ALGO"));
    ck_assert(hash_of("HIPRESS_ALGO=ring", "HIPRESS_ALGO") != hash_of("HIPRESS_ALGO=tree", "HIPRESS_ALGO"));
    ck_assert(hash_of("HIPRESS_ENABLE=yes", "HIPRESS_ENABLE") == hash_of("HIPRESS_ENABLE=1", "HIPRESS_ENABLE"));
    ck_assert(hash_of("HIPRESS_TBQ_SCALE=0.5", "HIPRESS_TBQ_SCALE") ==
              hash_of("HIPRESS_TBQ_SCALE=5e-1", "HIPRESS_TBQ_SCALE"));
    ck_assert(hash_of("HIPRESS_TBQ_SCALE=0.5", "HIPRESS_TBQ_SCALE") !=
              hash_of("HIPRESS_TBQ_SCALE=0.25", "HIPRESS_TBQ_SCALE"));
    /* names compare by text */
    ck_assert(hash_of("HIPRESS_COMPRESSOR=fp16", "HIPRESS_COMPRESSOR") !=
              hash_of("HIPRESS_COMPRESSOR=none", "HIPRESS_COMPRESSOR"));
    ck_assert(hash_of("HIPRESS_COMPRESSOR=fp16", "HIPRESS_COMPRESSOR") ==
              hash_of("HIPRESS_COMPRESSOR= fp16", "HIPRESS_COMPRESSOR"));
    /* two settings with equal values do not collide (the id is hashed) */
    {
        hp_config_t cfg;
        char err[512];
        char *env[] = {"HIPRESS_MIN_BYTES=0", "HIPRESS_PARTITION_BYTES=0", NULL};
        ck_assert_int_eq(hp_config_load(&cfg, env, NULL, err, sizeof(err)), HP_OK);
        ck_assert(hp_config_hash(&cfg, HP_S_MIN_BYTES) != hp_config_hash(&cfg, HP_S_PARTITION_BYTES));
    }
}
END_TEST

/* ============================================================= eligibility */

static float elig_buf[4096];

static hp_call_desc_t good_desc(void)
{
    hp_call_desc_t d;
    memset(&d, 0, sizeof(d));
    d.enabled = 1;
    d.op_is_sum = 1;
    d.dtype_is_float = 1;
    d.count = 1024;
    d.elem_size = sizeof(float);
    d.sendbuf = elig_buf;
    d.recvbuf = elig_buf + 2048;
    d.comm_size = 4;
    d.min_bytes = 4096;
    return d;
}

START_TEST(eligible_reasons)
{
    hp_call_desc_t d = good_desc();
    ck_assert_int_eq(hp_eligible(&d), HP_ELIG_YES);

#define EXPECT_REASON(field, value, reason) \
    do { d = good_desc(); d.field = value; \
         REQUIRE(hp_eligible(&d) == (reason), "%s = %s: got %s, want %s", #field, #value, \
                       hp_elig_name(hp_eligible(&d)), hp_elig_name(reason)); } while (0)
    EXPECT_REASON(enabled, 0, HP_ELIG_DISABLED);
    EXPECT_REASON(null_handle, 1, HP_ELIG_NULL_HANDLE);
    EXPECT_REASON(op_is_sum, 0, HP_ELIG_OP);
    EXPECT_REASON(dtype_is_float, 0, HP_ELIG_DATATYPE);
    EXPECT_REASON(count, 0, HP_ELIG_COUNT);
    EXPECT_REASON(count, -1, HP_ELIG_COUNT);
    EXPECT_REASON(count, -2147483648LL, HP_ELIG_COUNT);
    EXPECT_REASON(sendbuf, NULL, HP_ELIG_NULL_BUFFER);
    EXPECT_REASON(recvbuf, NULL, HP_ELIG_NULL_BUFFER);
    EXPECT_REASON(is_inter, 1, HP_ELIG_INTERCOMM);
    EXPECT_REASON(comm_size, 1, HP_ELIG_SMALL_COMM);
    EXPECT_REASON(opted_out, 1, HP_ELIG_OPTED_OUT);
    EXPECT_REASON(device, 1, HP_ELIG_DEVICE);
    EXPECT_REASON(min_bytes, 4097, HP_ELIG_TOO_SMALL);
    EXPECT_REASON(min_bytes, 4096, HP_ELIG_YES);          /* the bound is inclusive */
    EXPECT_REASON(min_bytes, 0, HP_ELIG_YES);
    EXPECT_REASON(count, 1, HP_ELIG_TOO_SMALL);
    EXPECT_REASON(comm_size, 2, HP_ELIG_YES);

    /* in place: sendbuf is MPI_IN_PLACE, never compared with recvbuf */
    d = good_desc();
    d.in_place = 1;
    d.sendbuf = d.recvbuf;
    ck_assert_int_eq(hp_eligible(&d), HP_ELIG_YES);
    d.sendbuf = NULL;
    ck_assert_int_eq(hp_eligible(&d), HP_ELIG_YES);
    d.recvbuf = NULL;
    ck_assert_int_eq(hp_eligible(&d), HP_ELIG_NULL_BUFFER);
    d = good_desc();
    d.in_place = 1;
    d.count = 1;
    d.min_bytes = 0;
    ck_assert_int_eq(hp_eligible(&d), HP_ELIG_YES);
#undef EXPECT_REASON
}
END_TEST

START_TEST(eligible_overlap)
{
    hp_call_desc_t d = good_desc();
    const long long n = d.count;
    /* recvbuf at every element offset around sendbuf: overlapping exactly
     * when |offset| < n, including partial overlaps of one element and
     * offsets that are not a multiple of the element size */
    d.sendbuf = elig_buf + 1500;
    for (long long off = -n - 3; off <= n + 3; off++) {
        d.recvbuf = elig_buf + 1500 + off;
        hp_elig_t want = (off > -n && off < n) ? HP_ELIG_OVERLAP : HP_ELIG_YES;
        REQUIRE(hp_eligible(&d) == want, "element offset %lld: got %s", off, hp_elig_name(hp_eligible(&d)));
    }
    for (long long boff = -5; boff <= 5; boff++) {
        d.recvbuf = (const char *)(elig_buf + 1500 + n) + boff;
        REQUIRE(hp_eligible(&d) == (boff < 0 ? HP_ELIG_OVERLAP : HP_ELIG_YES), "byte offset n*4%+lld", boff);
        d.recvbuf = (const char *)(elig_buf + 1500 - n) + boff;
        REQUIRE(hp_eligible(&d) == (boff > 0 ? HP_ELIG_OVERLAP : HP_ELIG_YES), "byte offset -n*4%+lld", boff);
    }
    /* overlap is an argument error: reported before the size check, so an
     * erroneous small call still goes to PMPI for the same reason */
    d.recvbuf = d.sendbuf;
    d.min_bytes = 1 << 30;
    ck_assert_int_eq(hp_eligible(&d), HP_ELIG_OVERLAP);
}
END_TEST

START_TEST(eligible_names)
{
    for (int i = 0; i < HP_ELIG_NREASONS; i++) {
        const char *a = hp_elig_name((hp_elig_t)i);
        REQUIRE(a != NULL && a[0] != '\0' && strcmp(a, "?") != 0, "reason %d has no name", i);
        for (int j = 0; j < i; j++)
            REQUIRE(strcmp(a, hp_elig_name((hp_elig_t)j)) != 0, "reasons %d and %d share '%s'", i, j, a);
    }
    ck_assert_str_eq(hp_elig_name(HP_ELIG_NREASONS), "?");
    ck_assert_str_eq(hp_elig_name((hp_elig_t)-1), "?");
}
END_TEST

/* ================================================================ chunking */

static void check_tiling(size_t n, size_t parts)
{
    size_t expect_off = 0, minlen = (size_t)-1, maxlen = 0;
    for (size_t i = 0; i < parts; i++) {
        size_t off = hp_chunk_off(n, parts, i), len = hp_chunk_len(n, parts, i);
        REQUIRE(off == expect_off, "n=%zu parts=%zu chunk %zu starts at %zu, want %zu", n, parts, i, off,
                      expect_off);
        /* the first n % parts chunks are the longer ones */
        REQUIRE(len == n / parts + (i < n % parts), "n=%zu parts=%zu chunk %zu len %zu", n, parts, i, len);
        expect_off += len;
        minlen = HP_MIN(minlen, len);
        maxlen = HP_MAX(maxlen, len);
    }
    REQUIRE(expect_off == n, "n=%zu parts=%zu: chunks sum to %zu", n, parts, expect_off);
    REQUIRE(maxlen - minlen <= 1, "n=%zu parts=%zu: lengths %zu..%zu", n, parts, minlen, maxlen);
    REQUIRE(hp_chunk_off(n, parts, parts) == n, "n=%zu parts=%zu: end offset", n, parts);
}

START_TEST(chunk_tiling)
{
    for (size_t n = 0; n <= 300; n++)
        for (size_t parts = 1; parts <= 70; parts++)
            check_tiling(n, parts);
    static const size_t big[] = {1000003, (1u << 20) + 3, 4294967311ULL, 1ULL << 40, 999999999989ULL};
    static const size_t bigparts[] = {1, 2, 3, 5, 7, 64, 1000, 65537};
    for (size_t a = 0; a < HP_ARRAY_SIZE(big); a++)
        for (size_t b = 0; b < HP_ARRAY_SIZE(bigparts); b++)
            check_tiling(big[a], bigparts[b]);
    /* n < parts: n chunks of one element then empty ones */
    for (size_t i = 0; i < 10; i++)
        ck_assert_uint_eq(hp_chunk_len(3, 10, i), i < 3 ? 1 : 0);
}
END_TEST

/* The ring's two-level split (chunks, then partitions of each chunk) tiles
 * the whole buffer too. */
START_TEST(chunk_two_level)
{
    static const size_t ns[] = {0, 1, 2, 3, 5, 17, 1000, 1000003, (1u << 20) + 3};
    for (size_t a = 0; a < HP_ARRAY_SIZE(ns); a++)
        for (size_t N = 1; N <= 9; N++)
            for (size_t P = 1; P <= 6; P++) {
                size_t next = 0;
                for (size_t c = 0; c < N; c++)
                    for (size_t p = 0; p < P; p++) {
                        size_t clen = hp_chunk_len(ns[a], N, c);
                        size_t off = hp_chunk_off(ns[a], N, c) + hp_chunk_off(clen, P, p);
                        ck_assert_uint_eq(off, next);
                        next += hp_chunk_len(clen, P, p);
                    }
                ck_assert_uint_eq(next, ns[a]);
            }
}
END_TEST

/* The grain-aligned two-level split (spans, then partitions of each span)
 * tiles the buffer, puts every boundary on a multiple of the grain (or n),
 * and its first piece is the longest (the algorithms size messages by it). */
START_TEST(span_grain)
{
    static const size_t ns[] = {0, 1, 31, 32, 33, 100, 4095, 4096, 4097, 65536 * 3 + 7, 1000003};
    static const size_t gs[] = {1, 32, 4096, 65536};
    for (size_t a = 0; a < HP_ARRAY_SIZE(ns); a++)
        for (size_t gi = 0; gi < HP_ARRAY_SIZE(gs); gi++)
            for (size_t N = 1; N <= 9; N++)
                for (size_t P = 1; P <= 5; P++) {
                    const size_t n = ns[a], g = gs[gi];
                    size_t next = 0, first = hp_span_len(hp_span_len(n, N, 0, g), P, 0, g);
                    for (size_t c = 0; c < N; c++) {
                        size_t clen = hp_span_len(n, N, c, g), coff = hp_span_off(n, N, c, g);
                        REQUIRE(clen <= hp_span_len(n, N, 0, g), "n %zu g %zu N %zu: span %zu longer than the first",
                                n, g, N, c);
                        for (size_t p = 0; p < P; p++) {
                            size_t off = coff + hp_span_off(clen, P, p, g), len = hp_span_len(clen, P, p, g);
                            REQUIRE(off == next, "n %zu g %zu N %zu P %zu: gap at %zu", n, g, N, P, off);
                            REQUIRE(off % g == 0 || off == n, "n %zu g %zu: boundary %zu off grain", n, g, off);
                            REQUIRE(len <= first, "n %zu g %zu N %zu P %zu: piece %zu.%zu longer than the first",
                                    n, g, N, P, c, p);
                            next += len;
                        }
                    }
                    REQUIRE(next == n, "n %zu g %zu N %zu P %zu: covers %zu", n, g, N, P, next);
                }
    /* g = 1 is the plain split */
    for (size_t i = 0; i <= 7; i++)
        ck_assert_uint_eq(hp_span_off(1000, 7, i, 1), hp_chunk_off(1000, 7, i));
}
END_TEST

/* ================================================================ plan */

START_TEST(plan_stages_budget)
{
    hp_plan_inputs_t in = {1e8, 1e-5, 1e9, 1e9};
    hipress_comp_params_t p;
    int onebit = hp_comp_find("onebit"), fp16 = hp_comp_find("fp16");
    hp_codecs_t same, q4;

    hipress_comp_params_default(&p);
    same = (hp_codecs_t){onebit, onebit, &p, &p};
    q4 = (hp_codecs_t){onebit, hp_comp_find("q4"), &p, &p};
    /* stages on an element's longest path */
    ck_assert_int_eq(hp_plan_stages(HP_ALGO_ALLGATHER, 8), 1);
    ck_assert_int_eq(hp_plan_stages(HP_ALGO_PS, 8), 2);
    ck_assert_int_eq(hp_plan_stages(HP_ALGO_RING, 5), 5);
    ck_assert_int_eq(hp_plan_stages(HP_ALGO_TREE, 2), 2);
    ck_assert_int_eq(hp_plan_stages(HP_ALGO_TREE, 5), 4);
    ck_assert_int_eq(hp_plan_stages(HP_ALGO_TREE, 8), 4);
    ck_assert_int_eq(hp_plan_stages(HP_ALGO_RING, 1), 0);
    /* budgets: the setting wins, else the class default */
    ck_assert_int_eq(hp_plan_budget(onebit, 7), 7);
    ck_assert_int_eq(hp_plan_budget(onebit, 0), hp_plan_default_budget(HP_QCLASS_QUANT));
    ck_assert_int_eq(hp_plan_budget(fp16, 0), hp_plan_default_budget(HP_QCLASS_ROUNDING));
    /* auto never returns an algorithm over the budget (allgather always
     * qualifies); a fixed algorithm is planned whatever its stages */
    for (int budget = 1; budget <= 6; budget++)
        for (int N = 2; N <= 9; N++)
            for (int rank = 0; rank < 4; rank++) {
                hp_plan_t pl = hp_plan_choose(&in, &same, 1 << 20, N, HP_ALGO_AUTO, 0, budget, rank);
                if (!pl.compress)
                    continue;
                REQUIRE(pl.stages == hp_plan_stages(pl.algo, N), "stages of the plan");
                REQUIRE(pl.cost == pl.stages, "a sum codec that is the worker's costs a stage");
                REQUIRE(pl.stages <= budget || pl.algo == HP_ALGO_ALLGATHER,
                        "budget %d N %d: %s has %d stages", budget, N, hp_algo_name(pl.algo), pl.stages);
            }
    {
        hp_plan_t pl = hp_plan_choose(&in, &same, 1 << 20, 8, HP_ALGO_RING, 0, 2, 0);
        ck_assert(pl.compress && pl.algo == HP_ALGO_RING && pl.stages == 8);
        pl = hp_plan_choose(&in, &same, 1 << 20, 8, HP_ALGO_AUTO, 0, 1, 1);
        ck_assert(!pl.compress);   /* only allgather qualifies */
    }
    /* a q4 owner stage is free: ps (2 stages, cost 1) within onebit's budget
     * of 1, named in the plan; ring and tree have no owner stage in it */
    ck_assert_int_eq(hp_plan_stage_cost(HP_ALGO_PS, 8, &q4), 1);
    ck_assert_int_eq(hp_plan_stage_cost(HP_ALGO_PS, 8, &same), 2);
    ck_assert_int_eq(hp_plan_stage_cost(HP_ALGO_RING, 8, &q4), 8);
    ck_assert_int_eq(hp_plan_stage_cost(HP_ALGO_TREE, 8, &q4), 4);
    ck_assert_int_eq(hp_plan_stage_cost(HP_ALGO_PS, 1, &q4), 0);
    {
        int seen_ps = 0;
        for (int rank = 0; rank < 4; rank++) {
            hp_plan_t pl = hp_plan_choose(&in, &q4, 1 << 20, 8, HP_ALGO_AUTO, 0, 1, rank);
            if (!pl.compress)
                break;
            ck_assert(pl.algo == HP_ALGO_PS || pl.algo == HP_ALGO_ALLGATHER);
            if (pl.algo == HP_ALGO_PS) {
                char s[96], want[96];
                seen_ps = 1;
                ck_assert(pl.sum != NULL && strcmp(pl.sum, "q4") == 0 && pl.cost == 1 && pl.stages == 2);
                snprintf(want, sizeof(want), "ps K=%zu, 2 stages, sum q4", pl.parts);
                ck_assert_str_eq(hp_plan_str(&pl, s, sizeof(s)), want);
            } else {
                ck_assert(pl.sum == NULL);
            }
        }
        ck_assert(seen_ps);
    }
    /* K never exceeds the grains of the unit */
    {
        hp_plan_t pl = hp_plan_choose(&in, &same, 3 * 4096, 2, HP_ALGO_TREE, 1024, 0, 0);
        ck_assert_uint_eq(pl.parts, 3);
    }
}
END_TEST

/* The exploration's choice among compressed candidates: the lowest median,
 * unless another within HP_PLAN_MARGIN of it sends fewer bytes (onebit on 4
 * ranks: allgather 63/N x fewer than plain's ring, ps with q4 12.45x; on 16
 * ranks the other way round); the wire volume is the model's. */
START_TEST(plan_tie_break)
{
    hp_plan_inputs_t in = {1e8, 1e-5, 1e9, 1e9};
    hipress_comp_params_t p;
    int onebit = hp_comp_find("onebit");
    hp_codecs_t q4;
    size_t n = (size_t)16 << 20;   /* 64 MiB */
    hp_plan_t cand[3];
    double med[3];

    hipress_comp_params_default(&p);
    q4 = (hp_codecs_t){onebit, hp_comp_find("q4"), &p, &p};
    cand[0] = (hp_plan_t){.compress = 0};
    cand[1] = hp_plan_choose(&in, &q4, n, 4, HP_ALGO_PS, 0, 0, 0);
    cand[2] = hp_plan_choose(&in, &q4, n, 4, HP_ALGO_ALLGATHER, 0, 0, 0);
    /* the model's volumes are the formulas: plain ring 2(N-1)/N 4n, over
     * 12.45 (ps, q4 per 512) and 15.75 (allgather, 63/N) */
    ck_assert(cand[1].wire > cand[2].wire && cand[2].wire > 0);
    ck_assert_double_eq_tol(2.0 * 3 / 4 * 4 * (double)n / cand[2].wire, 15.75, 0.01);
    ck_assert_double_eq_tol(2.0 * 3 / 4 * 4 * (double)n / cand[1].wire, 12.45, 0.01);
    /* ps 5% faster: a tie, allgather's fewer bytes win */
    med[0] = 0.5; med[1] = 0.95; med[2] = 1.0;
    ck_assert_int_eq(hp_plan_tie_break(cand, med, 3, 1), 2);
    /* ps 20% faster: it wins; plain is never picked here */
    med[1] = 0.8;
    ck_assert_int_eq(hp_plan_tie_break(cand, med, 3, 1), 1);
    /* allgather the faster: it stays */
    med[1] = 1.02; med[2] = 1.0;
    ck_assert_int_eq(hp_plan_tie_break(cand, med, 3, 2), 2);
    ck_assert_int_eq(hp_plan_tie_break(cand, med, 3, -1), -1);
    /* on 16 ranks allgather sends the most: a tie goes to ps */
    cand[1] = hp_plan_choose(&in, &q4, n, 16, HP_ALGO_PS, 0, 0, 0);
    cand[2] = hp_plan_choose(&in, &q4, n, 16, HP_ALGO_ALLGATHER, 0, 0, 0);
    ck_assert(cand[1].wire < cand[2].wire);
    med[1] = 1.05; med[2] = 1.0;
    ck_assert_int_eq(hp_plan_tie_break(cand, med, 3, 2), 1);
}
END_TEST

/* HIPRESS_SUM_CODEC resolved per worker codec; the owner-stage cost; the
 * two-codec grain. */
START_TEST(sum_codec_resolution)
{
    hipress_comp_params_t p;
    int onebit = hp_comp_find("onebit"), tbq = hp_comp_find("tbq"), tg = hp_comp_find("terngrad");
    int q2 = hp_comp_find("q2"), q4 = hp_comp_find("q4"), q8 = hp_comp_find("q8");
    int fp16 = hp_comp_find("fp16"), none = hp_comp_find("none"), dgc = hp_comp_find("dgc");
    int psgd = hp_comp_find("powersgd");

    hipress_comp_params_default(&p);
    ck_assert_int_eq(hp_comp_sum_kind(onebit, HP_SUM_AUTO, &p), q4);
    ck_assert_int_eq(hp_comp_sum_kind(tbq, HP_SUM_AUTO, &p), q4);
    p.terngrad_bits = 2;
    ck_assert_int_eq(hp_comp_sum_kind(tg, HP_SUM_AUTO, &p), q2);
    p.terngrad_bits = 1;
    ck_assert_int_eq(hp_comp_sum_kind(tg, HP_SUM_AUTO, &p), q2);
    p.terngrad_bits = 4;
    ck_assert_int_eq(hp_comp_sum_kind(tg, HP_SUM_AUTO, &p), q4);
    p.terngrad_bits = 8;
    ck_assert_int_eq(hp_comp_sum_kind(tg, HP_SUM_AUTO, &p), q8);
    /* the others keep their own under auto */
    ck_assert_int_eq(hp_comp_sum_kind(fp16, HP_SUM_AUTO, &p), fp16);
    ck_assert_int_eq(hp_comp_sum_kind(dgc, HP_SUM_AUTO, &p), dgc);
    ck_assert_int_eq(hp_comp_sum_kind(none, HP_SUM_AUTO, &p), none);
    /* explicit values; same; a collective compressor keeps itself */
    ck_assert_int_eq(hp_comp_sum_kind(onebit, HP_SUM_SAME, &p), onebit);
    ck_assert_int_eq(hp_comp_sum_kind(onebit, HP_SUM_Q2, &p), q2);
    ck_assert_int_eq(hp_comp_sum_kind(onebit, HP_SUM_Q8, &p), q8);
    ck_assert_int_eq(hp_comp_sum_kind(onebit, HP_SUM_FP16, &p), fp16);
    ck_assert_int_eq(hp_comp_sum_kind(onebit, HP_SUM_BF16, &p), hp_comp_find("bf16"));
    ck_assert_int_eq(hp_comp_sum_kind(onebit, HP_SUM_NONE, &p), none);
    ck_assert_int_eq(hp_comp_sum_kind(psgd, HP_SUM_Q4, &p), psgd);
    ck_assert_int_eq(hp_comp_sum_kind(onebit, 99, &p), onebit);
    /* costs: another codec that is free, else a stage */
    ck_assert_int_eq(hp_comp_sum_cost(onebit, q4), 0);
    ck_assert_int_eq(hp_comp_sum_cost(onebit, q8), 0);
    ck_assert_int_eq(hp_comp_sum_cost(onebit, fp16), 0);
    ck_assert_int_eq(hp_comp_sum_cost(onebit, none), 0);
    ck_assert_int_eq(hp_comp_sum_cost(onebit, q2), 1);
    ck_assert_int_eq(hp_comp_sum_cost(onebit, onebit), 1);
    ck_assert_int_eq(hp_comp_sum_cost(q4, q4), 1);
    /* the grain is the lcm of both blocks */
    p.onebit_block = 4096;
    p.q_block = 512;
    ck_assert_uint_eq(hp_comp_grain2(onebit, q4, &p), 4096);
    p.q_block = 8192;
    ck_assert_uint_eq(hp_comp_grain2(onebit, q4, &p), 8192);
    ck_assert_uint_eq(hp_comp_grain2(fp16, none, &p), hp_comp_grain(fp16, &p));
}
END_TEST

START_TEST(dgc_warmup_density)
{
    /* from 25% down to the ratio over the warm-up, then the ratio */
    ck_assert(hp_dgc_density(0.001, 32, 0) == 0.25);
    ck_assert(fabs(hp_dgc_density(0.001, 32, 16) - 0.25 * sqrt(0.004)) < 1e-12);
    ck_assert(hp_dgc_density(0.001, 32, 32) == 0.001);
    ck_assert(hp_dgc_density(0.001, 32, 1000) == 0.001);
    ck_assert(hp_dgc_density(0.001, 0, 0) == 0.001);
    ck_assert(hp_dgc_density(0.5, 32, 0) == 0.5);
    for (unsigned c = 1; c < 32; c++)
        ck_assert(hp_dgc_density(0.001, 32, c) < hp_dgc_density(0.001, 32, c - 1));
}
END_TEST

/* ================================================================ residual */

/* The residual vector of buffer (addr, count), n floats; `want_new` says
 * whether it must be a fresh (zeroed) one. */
static float *rget(hp_residual_store_t *s, uintptr_t addr, size_t count, size_t n, int want_new)
{
    hp_res_buf_t *b = hp_residual_buffer(s, addr, count, 1, HP_LAYOUT_TRUST, NULL);
    int was_new;
    float *p;
    REQUIRE(b != NULL, "no buffer for %#lx", (unsigned long)addr);
    was_new = b->vec[HP_RES_R] == NULL;
    p = hp_residual_vec(s, b, HP_RES_R, n);
    REQUIRE(p != NULL, "residual for %#lx not given", (unsigned long)addr);
    REQUIRE(was_new == want_new, "%#lx: new %d, want %d", (unsigned long)addr, was_new, want_new);
    if (want_new)
        for (size_t i = 0; i < n; i++)
            REQUIRE(p[i] == 0.0f, "new residual not zero at %zu", i);
    return p;
}

static void expect_info(hp_residual_store_t *s, size_t buffers, size_t bytes, size_t created,
                        size_t evicted)
{
    hp_residual_info_t in;
    hp_residual_info(s, &in);
    REQUIRE(in.buffers == buffers && in.bytes == bytes && in.created == created &&
                in.drop_buffers[HP_RES_DROP_EVICTED] == evicted,
            "info buffers %zu bytes %zu created %zu evicted %zu, want %zu %zu %zu %zu", in.buffers,
            in.bytes, in.created, in.drop_buffers[HP_RES_DROP_EVICTED], buffers, bytes, created, evicted);
}

START_TEST(residual_lru)
{
    const size_t n = 100;
    hp_residual_store_t *s = hp_residual_create(3 * n * sizeof(float));
    const uintptr_t A = 0x1000, B = 0x2000, C = 0x3000, D = 0x4000;
    hp_residual_info_t in;
    float *a, *b, *c;

    ck_assert_ptr_nonnull(s);
    expect_info(s, 0, 0, 0, 0);
    a = rget(s, A, n, n, 1);
    b = rget(s, B, n, n, 1);
    c = rget(s, C, n, n, 1);
    a[0] = 1; b[0] = -2; b[1] = 0.5f; c[0] = 3;
    a[n - 1] = 11;
    expect_info(s, 3, 3 * n * 4, 3, 0);
    /* a hit returns the same vector, contents kept, and makes A most recent */
    ck_assert_ptr_eq(rget(s, A, n, n, 0), a);
    ck_assert(a[0] == 1 && a[n - 1] == 11);
    /* D needs room: the least recently used (B) goes, not A, and the
     * gradient it owed is counted */
    rget(s, D, n, n, 1);
    expect_info(s, 3, 3 * n * 4, 4, 1);
    hp_residual_info(s, &in);
    ck_assert(in.drop_l1[HP_RES_DROP_EVICTED] == 2.5);
    ck_assert_uint_eq(in.drop_bytes[HP_RES_DROP_EVICTED], n * 4);
    ck_assert_uint_eq(in.stranded, 1);   /* B was used in no counted call */
    ck_assert(rget(s, A, n, n, 0)[0] == 1);
    ck_assert(rget(s, C, n, n, 0)[0] == 3);
    /* B comes back new (zeroed) and evicts D, now the oldest */
    rget(s, B, n, n, 1);
    expect_info(s, 3, 3 * n * 4, 5, 2);
    /* larger than the whole bound: refused, nothing evicted, counted */
    {
        hp_res_buf_t *e = hp_residual_buffer(s, 0x9000, 3 * n + 1, 1, HP_LAYOUT_TRUST, NULL);
        ck_assert_ptr_nonnull(e);
        ck_assert_ptr_null(hp_residual_vec(s, e, HP_RES_R, 3 * n + 1));
        hp_residual_info(s, &in);
        ck_assert_uint_eq(in.oversize, 1);
        ck_assert_uint_eq(in.drop_buffers[HP_RES_DROP_EVICTED], 2);
    }
    /* two vectors of one buffer count together; a new length restarts one */
    {
        hp_res_buf_t *e = hp_residual_buffer(s, A, n, 0, HP_LAYOUT_TRUST, NULL);
        float *u;
        ck_assert_ptr_nonnull(e);
        u = hp_residual_vec(s, e, HP_RES_U, n);   /* evicts the oldest other buffer */
        ck_assert_ptr_nonnull(u);
        ck_assert_ptr_eq(hp_residual_vec(s, e, HP_RES_R, n), a);
        u[3] = 5;
        u = hp_residual_vec(s, e, HP_RES_U, n / 2);
        ck_assert(u != NULL && u[3] == 0);
    }
    /* a smaller bound evicts down to it; dropping all counts the reason */
    hp_residual_set_max(s, n * sizeof(float));
    hp_residual_info(s, &in);
    ck_assert(in.bytes <= n * sizeof(float));
    hp_residual_drop_all(s, HP_RES_DROP_OPTOUT);
    hp_residual_info(s, &in);
    ck_assert_uint_eq(in.buffers, 0);
    ck_assert_uint_eq(in.bytes, 0);
    hp_residual_destroy(s, HP_RES_DROP_FREED);

    /* a bound of zero stores nothing; a NULL store reports zeros */
    s = hp_residual_create(0);
    {
        hp_res_buf_t *e = hp_residual_buffer(s, A, 1, 1, HP_LAYOUT_TRUST, NULL);
        ck_assert_ptr_null(hp_residual_vec(s, e, HP_RES_R, 1));
    }
    hp_residual_destroy(s, HP_RES_DROP_FREED);
    hp_residual_info_t z;
    memset(&z, 0xff, sizeof(z));
    hp_residual_info(NULL, &z);
    ck_assert(z.buffers == 0 && z.bytes == 0 && z.created == 0);
    hp_residual_destroy(NULL, HP_RES_DROP_FREED);
}
END_TEST

/* Layout rules: an address seen with two counts is a staging buffer. */
START_TEST(residual_layout)
{
    hp_residual_store_t *s = hp_residual_create(1 << 20);
    hp_residual_info_t in;
    hp_res_buf_t *b;
    int staging = -1;
    float *r;

    /* detect: one count per address keeps its state */
    b = hp_residual_buffer(s, 0x10, 8, 1, HP_LAYOUT_DETECT, &staging);
    ck_assert(b != NULL && staging == 0);
    r = hp_residual_vec(s, b, HP_RES_R, 8);
    r[0] = -4;
    r[7] = 1;
    ck_assert_ptr_eq(hp_residual_buffer(s, 0x10, 8, 1, HP_LAYOUT_DETECT, &staging), b);
    /* another address is another buffer */
    ck_assert_ptr_nonnull(hp_residual_buffer(s, 0x20, 8, 1, HP_LAYOUT_DETECT, &staging));
    /* the same address with another count: a staging buffer, found once;
     * what was held there is dropped and counted */
    ck_assert_ptr_null(hp_residual_buffer(s, 0x10, 9, 1, HP_LAYOUT_DETECT, &staging));
    ck_assert_int_eq(staging, 1);
    hp_residual_info(s, &in);
    ck_assert_uint_eq(in.staging, 1);
    ck_assert_uint_eq(in.drop_buffers[HP_RES_DROP_LAYOUT], 1);
    ck_assert(in.drop_l1[HP_RES_DROP_LAYOUT] == 5.0);
    /* never again a residual at that address, whatever the count */
    ck_assert_ptr_null(hp_residual_buffer(s, 0x10, 8, 1, HP_LAYOUT_DETECT, &staging));
    ck_assert_int_eq(staging, 0);
    ck_assert_ptr_null(hp_residual_buffer(s, 0x10, 9, 1, HP_LAYOUT_DETECT, &staging));
    hp_residual_info(s, &in);
    ck_assert_uint_eq(in.staging, 1);
    ck_assert_uint_eq(in.buffers, 1);
    /* trust: the client vouches for each (address, count) */
    ck_assert_ptr_nonnull(hp_residual_buffer(s, 0x30, 8, 1, HP_LAYOUT_TRUST, NULL));
    ck_assert_ptr_nonnull(hp_residual_buffer(s, 0x30, 9, 1, HP_LAYOUT_TRUST, NULL));
    /* none: no state at all */
    ck_assert_ptr_null(hp_residual_buffer(s, 0x40, 8, 1, HP_LAYOUT_NONE, NULL));
    hp_residual_destroy(s, HP_RES_DROP_FREED);
}
END_TEST

/* A random sequence of gets against a plain reference model of an LRU
 * cache bounded in bytes: same hits, same evictions, same counters, and
 * the stored contents survive. */
#define REF_MAX 64
typedef struct { int key; size_t n; } ref_entry_t;

START_TEST(residual_random_vs_model)
{
    const size_t max_bytes = 4000;
    hp_residual_store_t *s = hp_residual_create(max_bytes);
    ref_entry_t ref[REF_MAX];          /* ref[0] most recent */
    size_t nref = 0, bytes = 0, created = 0, evicted = 0;
    uint64_t rng = 88172645463325252ULL;

    for (int it = 0; it < 20000; it++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        int key = (int)(rng % 40);
        size_t n = 10 + (size_t)key * 7;   /* each key always has the same length */
        /* keys that share a hash chain (same address bits modulo the
         * table) and distinct addresses, each with one count */
        uintptr_t addr = 0x100000 + (uintptr_t)key * 0x1000;
        hp_res_buf_t *b = hp_residual_buffer(s, addr, n, 1, HP_LAYOUT_DETECT, NULL);
        int is_new;
        float *p;
        size_t pos = nref;

        REQUIRE(b != NULL, "it %d key %d: no buffer", it, key);
        is_new = b->vec[HP_RES_R] == NULL;
        p = hp_residual_vec(s, b, HP_RES_R, n);
        for (size_t i = 0; i < nref; i++)
            if (ref[i].key == key)
                pos = i;
        if (pos < nref) {
            REQUIRE(p != NULL && is_new == 0, "it %d key %d: expected a hit", it, key);
            REQUIRE(p[0] == (float)key && p[n - 1] == (float)-key, "it %d key %d: contents lost", it, key);
            ref_entry_t e = ref[pos];
            memmove(ref + 1, ref, pos * sizeof(ref[0]));
            ref[0] = e;
        } else {
            while (bytes + 4 * n > max_bytes && nref > 0) {
                bytes -= 4 * ref[--nref].n;
                evicted++;
            }
            REQUIRE(p != NULL && is_new == 1, "it %d key %d: expected a new vector", it, key);
            memmove(ref + 1, ref, nref * sizeof(ref[0]));
            ref[0].key = key;
            ref[0].n = n;
            nref++;
            bytes += 4 * n;
            created++;
            p[0] = (float)key;
            p[n - 1] = (float)-key;
        }
        expect_info(s, nref, bytes, created, evicted);
        ck_assert(bytes <= max_bytes);
    }
    REQUIRE(evicted > 1000, "the sequence should evict often (evicted %zu)", evicted);
    hp_residual_destroy(s, HP_RES_DROP_FREED);
}
END_TEST

/* ================================================================ messages */

static const hipress_comp_params_t *params(void)
{
    static hipress_comp_params_t p;
    static int done;
    if (!done) {
        hipress_comp_params_default(&p);
        done = 1;
    }
    return &p;
}

/* Encode n values with compressor `name` into msg (cap bytes); returns the
 * message length. */
static size_t encode_msg(const char *name, const float *in, size_t n, void *msg, size_t cap, int *nonfinite)
{
    int kind = hp_comp_find(name);
    hipress_encode_args_t a;
    size_t len = 0;
    REQUIRE(kind >= 0, "compressor %s not registered", name);
    ck_assert_uint_ge(cap, hp_msg_max_bytes(kind, n, params()));
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.n = n;
    a.params = params();
    ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, nonfinite), HP_OK);
    return len;
}

#define MSG_N 37
#define GUARD 8

/* Decode into the middle of a guarded buffer; returns the status and checks
 * nothing outside out[0..n) was written. */
static hp_status_t guarded_decode(int kind, const void *msg, size_t len, size_t n, float *vals, int accumulate)
{
    float buf[MSG_N + 2 * GUARD + 4];
    ck_assert_uint_le(n, MSG_N + 4);
    for (size_t i = 0; i < HP_ARRAY_SIZE(buf); i++)
        buf[i] = -777.0f;
    if (accumulate)
        memcpy(buf + GUARD, vals, n * sizeof(float));
    hp_status_t st = hp_msg_decode(kind, msg, len, n, buf + GUARD, accumulate, params());
    for (size_t i = 0; i < GUARD; i++)
        REQUIRE(buf[i] == -777.0f && buf[GUARD + n + i] == -777.0f, "decode wrote outside its range");
    if (st == HP_OK && n <= MSG_N)
        memcpy(vals, buf + GUARD, n * sizeof(float));
    return st;
}

START_TEST(msg_good)
{
    float in[MSG_N], out[MSG_N];
    unsigned char msg[HP_MSG_HEADER + 4 * MSG_N + 64];
    hp_msg_header_t h;
    int nf = -1;
    const int none = hp_comp_find("none"), fp16 = hp_comp_find("fp16");

    ck_assert_int_ge(none, 0);
    ck_assert_int_ge(fp16, 0);
    ck_assert_int_eq(none, hp_kind_none);
    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)(i * 3 - 50) * 0.25f;   /* exact in fp16 too */

    size_t len = encode_msg("none", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_uint_eq(len, HP_MSG_HEADER + 4 * MSG_N);
    ck_assert_int_eq(nf, 0);
    ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
    ck_assert_uint_eq(h.magic, HP_MSG_MAGIC);
    ck_assert_uint_eq(h.version, HP_MSG_VERSION);
    ck_assert_uint_eq(h.kind, (unsigned)none);
    ck_assert_uint_eq(h.flags, 0);
    ck_assert_uint_eq(h.n, MSG_N);
    ck_assert_uint_eq(h.payload, 4 * MSG_N);
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 0), HP_OK);
    ck_assert_mem_eq(out, in, sizeof(in));
    /* accumulate adds */
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 1), HP_OK);
    for (int i = 0; i < MSG_N; i++)
        ck_assert(out[i] == 2 * in[i]);
    /* a `none` message is accepted where another kind is expected: the dense
     * fallback of sparse compressors */
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_OK);
    ck_assert_mem_eq(out, in, sizeof(in));

    len = encode_msg("fp16", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_uint_eq(len, HP_MSG_HEADER + 2 * MSG_N + 1); /* halves, one block exponent */
    ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
    ck_assert_uint_eq(h.kind, (unsigned)fp16);
    ck_assert_uint_eq(h.payload, 2 * MSG_N + 1);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_OK);
    ck_assert_mem_eq(out, in, sizeof(in));
    /* but an fp16 message is not accepted where `none` is expected */
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 0), HP_ERR_MESSAGE);

    /* zero elements: a header alone */
    len = encode_msg("fp16", in, 0, msg, sizeof(msg), &nf);
    ck_assert_uint_eq(len, HP_MSG_HEADER);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, 0, out, 0), HP_OK);
}
END_TEST

START_TEST(msg_nonfinite)
{
    float in[MSG_N], out[MSG_N];
    unsigned char msg[HP_MSG_HEADER + 4 * MSG_N];
    hp_msg_header_t h;
    int nf = -1;
    const int none = hp_comp_find("none"), fp16 = hp_comp_find("fp16");

    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)i;
    in[5] = NAN;
    /* fp16: header only, flagged, decodes to NaN everywhere */
    size_t len = encode_msg("fp16", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_int_eq(nf, 1);
    ck_assert_uint_eq(len, HP_MSG_HEADER);
    ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
    ck_assert_uint_eq(h.flags, HP_MSG_NONFINITE);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_OK);
    for (int i = 0; i < MSG_N; i++)
        ck_assert(isnan(out[i]));
    /* a non-finite message claiming a payload is malformed */
    unsigned char bad[HP_MSG_HEADER + 4];
    memcpy(bad, msg, HP_MSG_HEADER);
    uint32_t p4 = 4;
    memcpy(bad + 8, &p4, 4);
    memset(bad + HP_MSG_HEADER, 0, 4);
    ck_assert_int_eq(guarded_decode(fp16, bad, sizeof(bad), MSG_N, out, 0), HP_ERR_MESSAGE);
    /* Inf counts as non-finite too */
    in[5] = -INFINITY;
    encode_msg("fp16", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_int_eq(nf, 1);
    /* `none` carries NaN as a value: only that element is NaN */
    in[5] = NAN;
    len = encode_msg("none", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_int_eq(nf, 0);
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 0), HP_OK);
    for (int i = 0; i < MSG_N; i++)
        ck_assert(i == 5 ? isnan(out[i]) : out[i] == (float)i);
    /* an error message makes the decoder report the peer's failure */
    len = hp_msg_error(msg, MSG_N);
    ck_assert_uint_eq(len, HP_MSG_HEADER);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_ERR_PEER);
}
END_TEST

/* Exceptions: a partial sum of finite values that overflowed (or a value no
 * format carries) travels verbatim, the rest compressed; the source decides
 * whether NaN/Inf is the input's own (a non-finite message) or an overflow. */
START_TEST(msg_except)
{
    const char *names[] = {"fp16", "bf16", "onebit", "tbq", "terngrad", "graddrop", "dgc"};
    enum { N = 300 };
    const float specials[] = {INFINITY, -INFINITY, NAN, 0x1.8p127f, -0x1p126f};
    const uint32_t at[] = {0, 17, 150, 151, 299};
    for (size_t ci = 0; ci < HP_ARRAY_SIZE(names); ci++) {
        const int kind = hp_comp_find(names[ci]);
        const size_t cap = hp_msg_max_bytes(kind, N, params()) + HP_MSG_EXCEPT_BYTES;
        unsigned char *msg = malloc(cap), *bad = malloc(cap);
        float in[N], keep[N], res[N], out[N], acc[N];
        hipress_encode_args_t a;
        size_t len, k;
        int nf;
        hp_msg_header_t h;
        uint32_t u;

        for (int i = 0; i < N; i++)
            in[i] = (float)((i * 37) % 101 - 50) * 0.01f;
        for (size_t j = 0; j < HP_ARRAY_SIZE(at); j++)
            in[at[j]] = specials[j];
        memcpy(keep, in, sizeof(in));
        memset(res, 0, sizeof(res));
        memset(&a, 0, sizeof(a));
        a.in = in;
        a.n = N;
        a.params = params();
        a.residual = (hp_comp_get(kind)->flags & HIPRESS_COMP_EF) ? res : NULL;

        /* a sum: the five travel as exceptions, the input is left as it was */
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_SUM, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 0 && k == 5, "%s: nf %d k %zu", names[ci], nf, k);
        ck_assert_mem_eq(in, keep, sizeof(in));
        ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
        ck_assert_uint_eq(h.flags, HP_MSG_EXCEPT);
        ck_assert_int_eq(hp_msg_decode(kind, msg, len, N, out, 0, params()), HP_OK);
        for (int i = 0; i < N; i++) {
            int sp = -1;
            for (size_t j = 0; j < HP_ARRAY_SIZE(at); j++)
                sp = at[j] == (uint32_t)i ? (int)j : sp;
            if (sp >= 0)
                REQUIRE(memcmp(&out[i], &specials[sp], 4) == 0, "%s: element %d", names[ci], i);
            else
                REQUIRE(isfinite(out[i]) && fabsf(out[i]) < 10.0f, "%s: element %d is %g", names[ci], i, out[i]);
        }
        /* accumulate: prev + the exception's value, exactly */
        for (int i = 0; i < N; i++)
            acc[i] = 1.5f;
        ck_assert_int_eq(hp_msg_decode(kind, msg, len, N, acc, 1, params()), HP_OK);
        ck_assert(acc[0] == INFINITY && acc[17] == -INFINITY && isnan(acc[150]));
        ck_assert(acc[151] == 1.5f + 0x1.8p127f && acc[299] == 1.5f - 0x1p126f);

        /* the decoder's checks */
        memcpy(bad, msg, len);
        u = 0;
        memcpy(bad + HP_MSG_HEADER, &u, 4);                  /* k = 0 */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        u = HP_MSG_MAX_EXCEPT + 1;
        memcpy(bad + HP_MSG_HEADER, &u, 4);                  /* too many */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        u = 17;
        memcpy(bad + HP_MSG_HEADER + 4, &u, 4);              /* 17, 17: not increasing */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        u = N;
        memcpy(bad + HP_MSG_HEADER + 4 + 8 * 4, &u, 4);      /* index n */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        {
            float small = 1.0f;
            memcpy(bad + HP_MSG_HEADER + 8, &small, 4);      /* a value the format carries */
        }
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        bad[2] = HP_MSG_EXCEPT | HP_MSG_NONFINITE;
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        ck_assert_int_eq(hp_msg_decode(kind, msg, len - 1, N, out, 0, params()), HP_ERR_MESSAGE);

        /* the input's own Inf/NaN, or a known non-finite source: the partition is NaN */
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_INPUT, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 1 && k == 0 && len == HP_MSG_HEADER, "%s: input", names[ci]);
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_BAD, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 1 && k == 0, "%s: bad", names[ci]);
        /* without room for the list: non-finite (a dense format's
         * hp_msg_max_bytes has none; a sparse one's holds its dense fallback) */
        if (!(hp_comp_get(kind)->flags & HIPRESS_COMP_SPARSE)) {
            ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, hp_msg_max_bytes(kind, N, params()),
                                             HP_SRC_SUM, &len, &nf, &k), HP_OK);
            REQUIRE(nf == 1 && k == 0, "%s: no room", names[ci]);
        }
        /* more than HP_MSG_MAX_EXCEPT: non-finite */
        for (int i = 0; i < HP_MSG_MAX_EXCEPT + 1; i++)
            in[2 * i] = INFINITY;
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_SUM, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 1 && k == 0, "%s: many", names[ci]);
        /* a finite input: an ordinary message whatever the source */
        for (int i = 0; i < N; i++)
            in[i] = (float)(i % 7) - 3.0f;
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_SUM, &len, &nf, &k), HP_OK);
        ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
        REQUIRE(nf == 0 && k == 0 && h.flags == 0, "%s: finite", names[ci]);
        free(msg);
        free(bad);
    }
}
END_TEST

START_TEST(msg_malformed)
{
    float in[MSG_N], out[MSG_N];
    unsigned char good[HP_MSG_HEADER + 4 * MSG_N], m[sizeof(good) + 8];
    hp_msg_header_t h;
    int nf;
    const int fp16 = hp_comp_find("fp16");

    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)i;
    size_t len = encode_msg("fp16", in, MSG_N, good, sizeof(good), &nf);

    /* truncated: every shorter length is rejected, header or payload */
    for (size_t l = 0; l < len; l++) {
        REQUIRE(guarded_decode(fp16, good, l, MSG_N, out, 0) == HP_ERR_MESSAGE, "length %zu accepted", l);
        if (l < HP_MSG_HEADER)
            ck_assert_int_eq(hp_msg_header(good, l, &h), HP_ERR_MESSAGE);
    }
    ck_assert_int_eq(hp_msg_header(NULL, len, &h), HP_ERR_MESSAGE);
    /* trailing bytes the header does not account for */
    memcpy(m, good, len);
    ck_assert_int_eq(guarded_decode(fp16, m, len + 2, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* bad magic */
    memcpy(m, good, len);
    m[0] ^= 0xff;
    ck_assert_int_eq(hp_msg_header(m, len, &h), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* wrong version */
    memcpy(m, good, len);
    m[3] = HP_MSG_VERSION + 1;
    ck_assert_int_eq(hp_msg_header(m, len, &h), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* unknown flag bits */
    memcpy(m, good, len);
    m[2] = 0x80;
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* wrong n: the receiver expects another element count */
    ck_assert_int_eq(guarded_decode(fp16, good, len, MSG_N - 1, out, 0), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, good, len, MSG_N + 1, out, 0), HP_ERR_MESSAGE);
    /* a header whose n lies, consistent length otherwise */
    memcpy(m, good, len);
    uint32_t n2 = MSG_N + 1;
    memcpy(m + 4, &n2, 4);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* payload length field disagrees with the bytes received */
    memcpy(m, good, len);
    uint32_t pl = 2 * MSG_N + 3;
    memcpy(m + 8, &pl, 4);
    ck_assert_int_eq(hp_msg_header(m, len, &h), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* header and length agree but the payload is too short for n: the
     * compressor's own check */
    memcpy(m, good, len - 2);
    pl = 2 * MSG_N - 1;
    memcpy(m + 8, &pl, 4);
    ck_assert_int_eq(hp_msg_header(m, len - 2, &h), HP_OK);
    ck_assert_int_eq(guarded_decode(fp16, m, len - 2, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* an unregistered kind, or another registered kind */
    memcpy(m, good, len);
    m[1] = 200;
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* the test knob's corruption (byte 8 flipped) is caught */
    memcpy(m, good, len);
    m[8] ^= 0x5a;
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* a `none` message of the wrong payload size */
    unsigned char nm[HP_MSG_HEADER + 4 * MSG_N];
    len = encode_msg("none", in, MSG_N, nm, sizeof(nm), &nf);
    pl = 4 * MSG_N - 4;
    memcpy(nm + 8, &pl, 4);
    ck_assert_int_eq(guarded_decode(fp16, nm, len - 4, MSG_N, out, 0), HP_ERR_MESSAGE);
}
END_TEST

/* A message's length read from its header (hp_msg_len), and the check of a
 * transport that knows how many bytes arrived (hp_msg_arrived). */
START_TEST(msg_len)
{
    float in[MSG_N], out[MSG_N];
    unsigned char good[HP_MSG_HEADER + 4 * MSG_N], m[sizeof(good) + 64];
    int nf;
    const int fp16 = hp_comp_find("fp16");

    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)i;
    size_t len = encode_msg("fp16", in, MSG_N, good, sizeof(good), &nf);
    /* in a buffer of any capacity that holds it */
    memset(m, 0x5a, sizeof(m));
    memcpy(m, good, len);
    ck_assert_uint_eq(hp_msg_len(m, len), len);
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), len);
    /* claims more than the capacity, too short for a header, not a message */
    ck_assert_uint_eq(hp_msg_len(m, len - 1), 0);
    ck_assert_uint_eq(hp_msg_len(m, HP_MSG_HEADER - 1), 0);
    ck_assert_uint_eq(hp_msg_len(NULL, sizeof(m)), 0);
    m[3] ^= 0xff;
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    /* error, non-finite and empty messages: a header alone */
    ck_assert_uint_eq(hp_msg_len(m, hp_msg_error(m, MSG_N)), HP_MSG_HEADER);
    in[3] = NAN;
    ck_assert_uint_eq(hp_msg_len(m, encode_msg("fp16", in, MSG_N, m, sizeof(m), &nf)), HP_MSG_HEADER);
    ck_assert_int_eq(nf, 1);
    ck_assert_uint_eq(hp_msg_len(m, encode_msg("fp16", in, 0, m, sizeof(m), &nf)), HP_MSG_HEADER);

    /* exactly the message arrived: left alone */
    memcpy(m, good, len);
    hp_msg_arrived(m, len, sizeof(m));
    ck_assert_int_eq(memcmp(m, good, len), 0);
    /* fewer bytes than the header claims (what is after them is from
     * before): invalid, rejected without reading them */
    hp_msg_arrived(m, len - 2, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    ck_assert_int_eq(guarded_decode(fp16, m, hp_msg_len(m, sizeof(m)), MSG_N, out, 0), HP_ERR_MESSAGE);
    /* more bytes than it claims, nothing at all, more than the capacity */
    memcpy(m, good, len);
    hp_msg_arrived(m, len + 4, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    memcpy(m, good, len);
    hp_msg_arrived(m, 0, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    memcpy(m, good, len);
    hp_msg_arrived(m, len, len - 1);
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    /* the test knob's corruption (HIPRESS_TEST_CORRUPT: byte 8 flipped),
     * all of it arrived: invalid */
    memcpy(m, good, len);
    m[8] ^= 0x5a;
    hp_msg_arrived(m, len, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
}
END_TEST

START_TEST(msg_max_bytes)
{
    for (int k = 0; k < hp_comp_count(); k++)
        for (size_t n = 0; n < 5000; n += 37)
            ck_assert_uint_ge(hp_msg_max_bytes(k, n, params()), HP_MSG_HEADER);
    ck_assert_uint_eq(hp_msg_max_bytes(hp_comp_find("none"), 1000, params()), HP_MSG_HEADER + 4000);
    ck_assert_uint_eq(hp_msg_max_bytes(hp_comp_find("fp16"), 1000, params()), HP_MSG_HEADER + 2000 + 1);
    /* an output buffer below the bound is refused, not overrun */
    float in[4] = {1, 2, 3, 4};
    unsigned char out[HP_MSG_HEADER + 7];
    hipress_encode_args_t a;
    size_t len;
    int nf;
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.n = 4;
    a.params = params();
    hp_log_level = HP_LOG_NONE;   /* the refusals below are expected: no warning */
    ck_assert_int_ne(hp_msg_encode(hp_comp_find("fp16"), &a, out, sizeof(out), &len, &nf), HP_OK);
    ck_assert_int_ne(hp_msg_encode(hp_comp_find("none"), &a, out, sizeof(out), &len, &nf), HP_OK);
    ck_assert_int_ne(hp_msg_encode(-1, &a, out, sizeof(out), &len, &nf), HP_OK);
    hp_log_level = HP_LOG_WARN;
}
END_TEST

/* ==================================================================== fp16 */

/* The hardware reference, compiled for F16C in this function only. */
__attribute__((target("f16c"))) static uint16_t ref_f32_to_f16(float x)
{
    return (uint16_t)_cvtss_sh(x, 0);   /* 0: round to nearest even */
}

__attribute__((target("f16c"))) static float ref_f16_to_f32(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* A machine without F16C cannot run the reference: that is a failure of
 * this test run (a missing dependency), not a pass. */
static void require_f16c(void)
{
    unsigned a, b, c, d;
    REQUIRE(__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C),
                  "this CPU lacks F16C: the fp16 reference cannot run here");
}

static int is_nan16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

START_TEST(fp16_decode_exhaustive)
{
    require_f16c();
    for (uint32_t h = 0; h < 65536; h++) {
        float got = hp_f16_to_f32((uint16_t)h), ref = ref_f16_to_f32((uint16_t)h);
        if (is_nan16((uint16_t)h)) {
            /* NaN stays NaN with its sign and payload; the hardware also
             * sets the quiet bit of a signalling NaN, hipress keeps it as
             * it came (both are NaN, so the sums they enter are NaN) */
            REQUIRE(isnan(got), "half %04x: not NaN", h);
            REQUIRE((hp_f2u(got) | 0x00400000u) == hp_f2u(ref), "half %04x: %08x vs F16C %08x", h,
                          hp_f2u(got), hp_f2u(ref));
            REQUIRE(hp_f32_to_f16(got) == (uint16_t)(h | 0x200u), "NaN half %04x round trip", h);
            continue;
        }
        REQUIRE(hp_f2u(got) == hp_f2u(ref), "half %04x: %08x vs F16C %08x", h, hp_f2u(got), hp_f2u(ref));
        /* every half round-trips exactly, -0 and subnormals included */
        REQUIRE(hp_f32_to_f16(got) == h, "half %04x -> %g -> %04x", h, got, hp_f32_to_f16(got));
    }
}
END_TEST

/* Sample float bit patterns: every sign and exponent (normal, subnormal,
 * Inf/NaN), and for each, mantissas whose low 13 bits (the rounding bits of
 * a normal half) run through every value under 4 random high parts, plus
 * fully random mantissas (the rounding bits of subnormal halves are higher).
 * 2 * 256 * 32768 = 2^24 patterns. */
static uint32_t sample_bits(uint32_t i)
{
    uint32_t sign = (i >> 23) & 1u, exp = (i >> 15) & 0xffu, j = i & 0x7fffu;
    uint64_t r = hp_mix64(0x1234567ULL + i);
    uint32_t mant;
    if (j < 0x4000u)   /* structured: all 2^13 low patterns x 2 random tops */
        mant = ((uint32_t)(r >> 20) & 0x7fe000u) | (j & 0x1fffu);
    else if (j < 0x6000u) {   /* exact ties (and ties plus random high bits) at
                                 every rounding position, normal or subnormal */
        uint32_t s = j & 31u;
        if (s > 24)
            s -= 8;
        mant = ((uint32_t)(r >> 20) & ~((1u << s) - 1u)) | ((j >> 5) & 1u ? (1u << s) >> 1 : 0);
        mant &= 0x7fffffu;
    }
    else
        mant = (uint32_t)(r >> 9) & 0x7fffffu;
    return (sign << 31) | (exp << 23) | mant;
}

START_TEST(fp16_encode_sample)
{
    require_f16c();
    uint32_t mism = 0, first = 0;
    for (uint32_t i = 0; i < (1u << 24); i++) {
        uint32_t b = sample_bits(i);
        float x = hp_u2f(b);
        if (hp_f32_to_f16(x) != ref_f32_to_f16(x) && mism++ == 0)
            first = b;
    }
    REQUIRE(mism == 0, "%u of 2^24 sampled floats convert differently from F16C, first %08x (%a): %04x vs %04x",
                  mism, first, hp_u2f(first), hp_f32_to_f16(hp_u2f(first)), ref_f32_to_f16(hp_u2f(first)));
}
END_TEST

START_TEST(fp16_encode_edges)
{
    static const float edges[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 65519.0f, 65519.996f, 65520.0f, -65520.0f,
        65536.0f, 1e10f, 3.4028235e38f, -3.4028235e38f, 6.1035156e-05f /* smallest normal half */,
        6.0975552e-05f /* largest subnormal half */, 5.9604645e-08f /* 2^-24 */, 2.9802322e-08f /* 2^-25: tie to 0 */,
        2.9802326e-08f, 8.940697e-08f /* 3*2^-25: tie, to even 2^-23 */, 1.1754944e-38f, 1.4e-45f, -1.4e-45f,
        2049.0f, 2051.0f, 4097.0f, 0.1f, 1.0f / 3.0f, 1.00048828125f /* 1 + 2^-11: tie to 1 */,
        1.00146484375f /* 1 + 3*2^-11: tie up */, INFINITY, -INFINITY, NAN, -NAN,
    };
    static const uint32_t nan_bits[] = {0x7f800001u, 0x7fc00000u, 0xffc00001u, 0x7fbfffffu, 0xff800100u,
                                        0x7f802000u, 0x7fffe000u, 0x7f801fffu};
    require_f16c();
    for (size_t i = 0; i < HP_ARRAY_SIZE(edges); i++) {
        float x = edges[i];
        REQUIRE(hp_f32_to_f16(x) == ref_f32_to_f16(x), "%a: %04x vs F16C %04x", x, hp_f32_to_f16(x),
                      ref_f32_to_f16(x));
    }
    /* the overflow boundary walked bit by bit: everything below 65520
     * rounds to 65504 (0x7bff), 65520 and above to Inf */
    for (uint32_t b = 0x477fe000u; b <= 0x47800100u; b++) {
        float x = hp_u2f(b);
        REQUIRE(hp_f32_to_f16(x) == ref_f32_to_f16(x), "%a: %04x vs F16C %04x", x, hp_f32_to_f16(x),
                      ref_f32_to_f16(x));
        ck_assert_uint_eq(hp_f32_to_f16(x), x < 65520.0f ? 0x7bffu : 0x7c00u);
    }
    for (size_t i = 0; i < HP_ARRAY_SIZE(nan_bits); i++) {
        float x = hp_u2f(nan_bits[i]);
        uint16_t h = hp_f32_to_f16(x);
        REQUIRE(h == ref_f32_to_f16(x), "NaN %08x: %04x vs F16C %04x", nan_bits[i], h, ref_f32_to_f16(x));
        REQUIRE(is_nan16(h), "NaN %08x became %04x", nan_bits[i], h);
    }
}
END_TEST

/* The fp16 compressor through each CPU kernel path (generic C and AVX2),
 * against F16C and a block exponent computed here: every block's exponent
 * follows the rule (doc/compressors.md), every half is F16C's rounding of
 * the value times 2^e, Inf saturated to 65504, and the decoder gives
 * F16C's float times 2^-e.  Blocks of 32 and 4096 over the sampled bit
 * patterns (Inf and NaN replaced by finite values of the top binade; a
 * batch holding one must give the non-finite flag). */
START_TEST(fp16_library_encoder)
{
    require_f16c();
    const hipress_compressor_v1_t *c = hipress_compressor_find("fp16");
    enum { BATCH = 1 << 16 };
    float *in = malloc(BATCH * sizeof(float));
    uint8_t *out = malloc(3 * BATCH);
    float *back = malloc(BATCH * sizeof(float));
    hipress_comp_params_t p = *params();
    ck_assert_ptr_nonnull(c);
    ck_assert(in && out && back);
    p.isa = _i;   /* HP_ISA_GENERIC, HP_ISA_AVX2 (a loop test) */
    for (uint32_t base = 0; base < (1u << 24); base += BATCH) {
        hipress_encode_args_t a;
        size_t len = 0, B = base & BATCH ? 32 : 4096, nb = BATCH / B;
        int nf = 0, any_bad = 0;
        p.fp16_block = (uint32_t)B;
        for (uint32_t k = 0; k < BATCH; k++) {
            in[k] = hp_u2f(sample_bits(base + k));
            any_bad |= hp_nonfinite(in[k]);
        }
        memset(&a, 0, sizeof(a));
        a.in = in;
        a.n = BATCH;
        a.out = out;
        a.out_cap = 3 * BATCH;
        a.params = &p;
        if (any_bad) {
            ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
            REQUIRE(nf == 1, "isa %d: non-finite input not flagged", _i);
            for (uint32_t k = 0; k < BATCH; k++)
                if (hp_nonfinite(in[k]))
                    in[k] = hp_u2f(hp_f2u(in[k]) & 0xff7fffffu); /* exponent 254 */
        }
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
        ck_assert_uint_eq(len, 2 * BATCH + nb);
        REQUIRE(nf == 0, "isa %d: finite input flagged non-finite", _i);
        for (size_t b = 0; b < nb; b++) {
            float m = 0.0f;
            int e, X, want;
            for (size_t k = b * B; k < (b + 1) * B; k++)
                m = fabsf(in[k]) > m ? fabsf(in[k]) : m;
            frexpf(m, &X);
            want = m == 0.0f ? 0 : 16 - X < 126 ? 16 - X : 126;
            e = (int8_t)out[2 * BATCH + b];
            REQUIRE(e == want, "isa %d: block %zu of base %u: exponent %d, want %d", _i, b, base, e, want);
            for (size_t k = b * B; k < (b + 1) * B; k++) {
                uint16_t h, r = ref_f32_to_f16(ldexpf(in[k], e));
                memcpy(&h, out + 2 * k, 2);
                if ((r & 0x7fffu) == 0x7c00u)
                    r--;   /* saturated at +-65504 */
                REQUIRE(h == r, "isa %d: %08x (2^%d): library %04x vs F16C %04x", _i, hp_f2u(in[k]), e, h, r);
            }
        }
        ck_assert_int_eq(c->decode(out, len, BATCH, back, 0, &p), HIPRESS_COMP_OK);
        for (size_t k = 0; k < BATCH; k++) {
            uint16_t h;
            int e = (int8_t)out[2 * BATCH + k / B];
            memcpy(&h, out + 2 * k, 2);
            REQUIRE(hp_f2u(back[k]) == hp_f2u(ldexpf(ref_f16_to_f32(h), -e)), "isa %d: decode of %04x (2^%d)",
                    _i, h, -e);
        }
    }
    free(in);
    free(out);
    free(back);
}
END_TEST

/* ==================================================================== main */

static Suite *core_suite(void)
{
    Suite *s = suite_create("core");
    TCase *tc;

    tc = tcase_create("settings");
    tcase_add_test(tc, settings_table);
    tcase_add_test(tc, settings_bool);
    tcase_add_test(tc, settings_size);
    tcase_add_test(tc, settings_int);
    tcase_add_test(tc, settings_onebit_block);
    tcase_add_test(tc, settings_double);
    tcase_add_test(tc, settings_enum);
    tcase_add_test(tc, settings_name);
    tcase_add_test(tc, config_load_defaults);
    tcase_add_test(tc, config_load_env);
    tcase_add_test(tc, config_load_errors);
    tcase_add_test(tc, config_set_keeps_value_on_error);
    tcase_add_test(tc, config_hash);
    suite_add_tcase(s, tc);

    tc = tcase_create("eligible");
    tcase_add_test(tc, eligible_reasons);
    tcase_add_test(tc, eligible_overlap);
    tcase_add_test(tc, eligible_names);
    suite_add_tcase(s, tc);

    tc = tcase_create("chunk");
    tcase_add_test(tc, chunk_tiling);
    tcase_add_test(tc, chunk_two_level);
    suite_add_tcase(s, tc);

    tc = tcase_create("residual");
    tcase_add_test(tc, span_grain);
    tcase_add_test(tc, plan_stages_budget);
    tcase_add_test(tc, plan_tie_break);
    tcase_add_test(tc, sum_codec_resolution);
    tcase_add_test(tc, dgc_warmup_density);
    tcase_add_test(tc, residual_lru);
    tcase_add_test(tc, residual_layout);
    tcase_add_test(tc, residual_random_vs_model);
    suite_add_tcase(s, tc);

    tc = tcase_create("message");
    tcase_add_test(tc, msg_good);
    tcase_add_test(tc, msg_nonfinite);
    tcase_add_test(tc, msg_except);
    tcase_add_test(tc, msg_malformed);
    tcase_add_test(tc, msg_len);
    tcase_add_test(tc, msg_max_bytes);
    suite_add_tcase(s, tc);

    tc = tcase_create("fp16");
    /* 2^24 conversions, twice: generous for sanitizer and valgrind builds */
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, fp16_decode_exhaustive);
    tcase_add_test(tc, fp16_encode_sample);
    tcase_add_test(tc, fp16_encode_edges);
    tcase_add_loop_test(tc, fp16_library_encoder, HP_ISA_GENERIC, HP_ISA_AVX2 + 1);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr;
    hp_algo_register_settings();   /* HIPRESS_ALGO's names (inherited by the forked tests) */
    sr = srunner_create(core_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
