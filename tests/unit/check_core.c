/*
 * Unit tests of the pure parts of the core, with no MPI traffic: the settings
 * parser and loader, the eligibility rule, the ring's chunk arithmetic, the
 * residual store, the message header and the fp16 conversions.
 *
 * This file holds the settings tests and builds the suite; the others are
 * check_core_plan.c, check_core_residual.c, check_core_msg.c and
 * check_core_fp16.c (check_core.h).
 */
#include "check_core.h"

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
    core_eligible_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("chunk");
    core_chunk_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("residual");
    core_plan_tests(tc);
    core_residual_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("message");
    core_msg_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("fp16");
    /* 2^24 conversions, twice: generous for sanitizer and valgrind builds */
    tcase_set_timeout(tc, 300);
    core_fp16_tests(tc);
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
