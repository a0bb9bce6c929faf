/*
 * check_core (check_core.c): the eligibility rule, the ring's chunk
 * arithmetic and the grain-aligned spans, the plan's stages, budgets and
 * ties between candidates, the sum codec's resolution and dgc's warm-up.
 */
#include "check_core.h"

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
    /* the finer candidate the exploration also times: partitions of about
     * 1 MiB where that is at least twice the model's K (a slow per-message
     * latency keeps the model's K small), at most HP_PLAN_MAX_PARTS */
    {
        hp_plan_inputs_t slow = {3e7, 7e-4, 8e9, 3e10};
        size_t n = (size_t)7 << 20;   /* 28 MiB */
        hp_plan_t pl = hp_plan_choose(&slow, &same, n, 4, HP_ALGO_ALLGATHER, 0, 0, 0), f;
        ck_assert(pl.compress && pl.parts <= 4);
        f = hp_plan_finer(&slow, &same, n, 4, &pl);
        ck_assert(f.compress && f.algo == HP_ALGO_ALLGATHER);
        ck_assert_uint_eq(f.parts, 28);
        ck_assert(f.t_model == hp_plan_cost(&slow, &same, n, 4, HP_ALGO_ALLGATHER, 28));
        ck_assert(f.wire == pl.wire);
        pl = hp_plan_choose(&slow, &same, (size_t)1 << 18, 4, HP_ALGO_ALLGATHER, 0, 0, 0);   /* 1 MiB */
        ck_assert(!hp_plan_finer(&slow, &same, (size_t)1 << 18, 4, &pl).compress);
        pl = hp_plan_choose(&slow, &same, (size_t)1 << 30, 4, HP_ALGO_ALLGATHER, 0, 0, 0);   /* 4 GiB */
        f = hp_plan_finer(&slow, &same, (size_t)1 << 30, 4, &pl);
        ck_assert(f.compress && f.parts == 256);
        pl.compress = 0;
        ck_assert(!hp_plan_finer(&slow, &same, n, 4, &pl).compress);
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

/* The "eligible" case. */
void core_eligible_tests(TCase *tc)
{
    tcase_add_test(tc, eligible_reasons);
    tcase_add_test(tc, eligible_overlap);
    tcase_add_test(tc, eligible_names);
}

/* The "chunk" case. */
void core_chunk_tests(TCase *tc)
{
    tcase_add_test(tc, chunk_tiling);
    tcase_add_test(tc, chunk_two_level);
}

/* The first tests of the "residual" case (the spans and the plan). */
void core_plan_tests(TCase *tc)
{
    tcase_add_test(tc, span_grain);
    tcase_add_test(tc, plan_stages_budget);
    tcase_add_test(tc, plan_tie_break);
    tcase_add_test(tc, sum_codec_resolution);
    tcase_add_test(tc, dgc_warmup_density);
}
