/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * prefork_config.c, directive values: what pf_parse_bounded_int() accepts
 * and refuses, and the message the admin sees; the pool's corrections;
 * ListenBucketSteering's modes and which of them this build runs.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/prefork_config.c"

#include <string.h>

#include "unit.h"
#include "prefork_buckets.h"

typedef struct {
    const char *arg;
    long long min, max;
    pf_parse_e expect;
    int value;
} parse_row_t;

static const parse_row_t parse_rows[] = {
    { "0", 0, 10, PF_PARSE_OK, 0 },
    { "10", 0, 10, PF_PARSE_OK, 10 },
    { " 7 ", 0, 10, PF_PARSE_OK, 7 },
    { "+3", 0, 10, PF_PARSE_OK, 3 },
    { "200000", 0, 200000, PF_PARSE_OK, 200000 },
    { "", 0, 10, PF_PARSE_EMPTY, 0 },
    { "   ", 0, 10, PF_PARSE_EMPTY, 0 },
    { "abc", 0, 10, PF_PARSE_NOT_A_NUMBER, 0 },
    /* httpd's own prefork used atoi(): "8x" became 8. */
    { "8x", 0, 10, PF_PARSE_NOT_A_NUMBER, 0 },
    { "0x10", 0, 100, PF_PARSE_NOT_A_NUMBER, 0 },
    { "1e3", 0, 10000, PF_PARSE_NOT_A_NUMBER, 0 },
    { "1.5", 0, 10, PF_PARSE_NOT_A_NUMBER, 0 },
    { "-", 0, 10, PF_PARSE_NOT_A_NUMBER, 0 },
    { "--1", -10, 10, PF_PARSE_NOT_A_NUMBER, 0 },
    { "-1", 0, 10, PF_PARSE_OUT_OF_RANGE, 0 },
    { "11", 0, 10, PF_PARSE_OUT_OF_RANGE, 0 },
    { "2147483648", 0, 2147483647LL, PF_PARSE_OUT_OF_RANGE, 0 },
    { "9223372036854775808", 0, 2147483647LL, PF_PARSE_OUT_OF_RANGE, 0 },
    { "99999999999999999999999", 0, 10, PF_PARSE_OUT_OF_RANGE, 0 },
    { "2147483647", 0, 2147483647LL, PF_PARSE_OK, 2147483647 },
};

START_TEST(parse_bounded_int_follows_table)
{
    const parse_row_t *row = &parse_rows[_i];
    int out = -12345;
    pf_parse_e got = pf_parse_bounded_int(row->arg, row->min, row->max, &out);

    ck_assert_msg(got == row->expect, "'%s': got %d, expected %d", row->arg,
                  (int)got, (int)row->expect);
    if (row->expect == PF_PARSE_OK) {
        ck_assert_int_eq(out, row->value);
    }
    else {
        ck_assert_int_eq(out, -12345);
    }
}
END_TEST

START_TEST(parse_bounded_int_refuses_null)
{
    int out = 1;

    ck_assert_int_eq(pf_parse_bounded_int(NULL, 0, 10, &out), PF_PARSE_EMPTY);
    ck_assert_int_eq(out, 1);
}
END_TEST

START_TEST(error_message_names_directive_value_and_range)
{
    char buf[256];

    pf_format_parse_error(buf, sizeof(buf), "ListenBuckets", "4x", 0, 200000,
                          PF_PARSE_NOT_A_NUMBER);
    ck_assert_str_eq(buf, "ListenBuckets: '4x' is not a whole number; "
                          "expected an integer from 0 to 200000");
    pf_format_parse_error(buf, sizeof(buf), "ServerLimit", "-1", 1, 200000,
                          PF_PARSE_OUT_OF_RANGE);
    ck_assert_str_eq(buf, "ServerLimit: '-1' is out of range; expected an "
                          "integer from 1 to 200000");
    pf_format_parse_error(buf, sizeof(buf), "StartServers", "", 0, 5,
                          PF_PARSE_EMPTY);
    ck_assert_ptr_nonnull(strstr(buf, "is empty"));
}
END_TEST

START_TEST(error_message_is_truncated_not_overflowed)
{
    char buf[16];
    /* Out of the compiler's sight: it sees pf_format_parse_error()'s
     * snprintf() in this file, and would refuse to build the truncation
     * this test is about (-Wformat-truncation). */
    volatile size_t room = sizeof(buf);

    memset(buf, 'x', sizeof(buf));
    pf_format_parse_error(buf, room, "MaxRequestWorkers", "123456789", 1,
                          200000, PF_PARSE_OUT_OF_RANGE);
    ck_assert_int_eq((int)strlen(buf), (int)sizeof(buf) - 1);
}
END_TEST

/* What httpd's prefork corrects (its check_config, and its run hook's
 * silent changes), corrected the same way here. */
typedef struct {
    const char *label;
    pf_pool_config_t given;     /* ServerLimit, MaxRequestWorkers, Start,
                                   MinSpare, MaxSpare, ratio, explicit */
    int first_server_limit;
    pf_pool_config_t used;
    int fixes[PF_FIX_KINDS + 1];    /* kinds in order, -1 ends */
} fix_row_t;

#define DEBIAN { 256, 150, 5, 5, 10, 0, PF_BUCKETS_UNSET }
#define CAP PF_MAX_SERVER_LIMIT

static const fix_row_t fix_rows[] = {
    { "Debian's pool: nothing to correct", DEBIAN, 0, DEBIAN, { -1 } },
    { "ServerLimit above the compile-time cap", { 300000, 150, 5, 5, 10, 0,
      -1 }, 0, { CAP, 150, 5, 5, 10, 0, -1 },
      { PF_FIX_SERVER_LIMIT_ABOVE_CAP, -1 } },
    { "ServerLimit 0", { 0, 150, 5, 5, 10, 0, -1 }, 0,
      { 1, 1, 1, 5, 10, 0, -1 },
      { PF_FIX_SERVER_LIMIT_BELOW_ONE, PF_FIX_WORKERS_ABOVE_LIMIT,
        PF_FIX_START_ABOVE_WORKERS, -1 } },
    { "ServerLimit changed by a restart is kept", { 512, 150, 5, 5, 10, 0,
      -1 }, 256, { 256, 150, 5, 5, 10, 0, -1 },
      { PF_FIX_SERVER_LIMIT_RESTART, -1 } },
    { "ServerLimit the same at a restart", DEBIAN, 256, DEBIAN, { -1 } },
    { "MaxRequestWorkers above ServerLimit", { 8, 20, 5, 5, 10, 0, -1 }, 0,
      { 8, 8, 5, 5, 10, 0, -1 }, { PF_FIX_WORKERS_ABOVE_LIMIT, -1 } },
    { "MaxRequestWorkers above the cap, ServerLimit unset", { 256, 300000,
      5, 5, 10, 0, -1 }, 0, { 256, 256, 5, 5, 10, 0, -1 },
      { PF_FIX_WORKERS_ABOVE_LIMIT, -1 } },
    { "MaxRequestWorkers 0", { 256, 0, 5, 5, 10, 0, -1 }, 0,
      { 256, 1, 1, 5, 10, 0, -1 },
      { PF_FIX_WORKERS_BELOW_ONE, PF_FIX_START_ABOVE_WORKERS, -1 } },
    { "StartServers 0", { 256, 150, 0, 5, 10, 0, -1 }, 0,
      { 256, 150, 1, 5, 10, 0, -1 }, { PF_FIX_START_BELOW_ONE, -1 } },
    { "StartServers above MaxRequestWorkers", { 256, 10, 20, 5, 10, 0, -1 },
      0, { 256, 10, 10, 5, 10, 0, -1 },
      { PF_FIX_START_ABOVE_WORKERS, -1 } },
    { "MinSpareServers 0", { 256, 150, 5, 0, 10, 0, -1 }, 0,
      { 256, 150, 5, 1, 10, 0, -1 }, { PF_FIX_MIN_SPARE_BELOW_ONE, -1 } },
    { "MaxSpareServers 0", { 256, 150, 5, 5, 0, 0, -1 }, 0,
      { 256, 150, 5, 5, 6, 0, -1 }, { PF_FIX_MAX_SPARE_NOT_ABOVE_MIN, -1 } },
    { "MaxSpareServers equal to MinSpareServers", { 256, 150, 5, 5, 5, 0,
      -1 }, 0, { 256, 150, 5, 5, 6, 0, -1 },
      { PF_FIX_MAX_SPARE_NOT_ABOVE_MIN, -1 } },
    { "MaxSpareServers below MinSpareServers", { 256, 150, 5, 10, 5, 0, -1 },
      0, { 256, 150, 5, 10, 11, 0, -1 },
      { PF_FIX_MAX_SPARE_NOT_ABOVE_MIN, -1 } },
    { "MinSpareServers and MaxSpareServers both 0", { 256, 150, 5, 0, 0, 0,
      -1 }, 0, { 256, 150, 5, 1, 2, 0, -1 },
      { PF_FIX_MIN_SPARE_BELOW_ONE, PF_FIX_MAX_SPARE_NOT_ABOVE_MIN, -1 } },
    { "huge spare bounds are cut to the cap, silently", { 256, 150, 5,
      2147483647, 2147483647, 0, -1 }, 0,
      { 256, 150, 5, CAP, CAP + 1, 0, -1 }, { -1 } },
    { "every zero at once", { 0, 0, 0, 0, 0, 0, -1 }, 0,
      { 1, 1, 1, 1, 2, 0, -1 },
      { PF_FIX_SERVER_LIMIT_BELOW_ONE, PF_FIX_WORKERS_BELOW_ONE,
        PF_FIX_START_BELOW_ONE, PF_FIX_MIN_SPARE_BELOW_ONE,
        PF_FIX_MAX_SPARE_NOT_ABOVE_MIN, -1 } },
    { "both bucket directives: ListenBuckets wins", { 256, 150, 5, 5, 10, 1,
      3 }, 0, { 256, 150, 5, 5, 10, 0, 3 },
      { PF_FIX_RATIO_WITH_EXPLICIT, -1 } },
    { "ListenBuckets 0 leaves the ratio", { 256, 150, 5, 5, 10, 2, 0 }, 0,
      { 256, 150, 5, 5, 10, 2, 0 }, { -1 } },
};

START_TEST(pool_corrections_follow_table)
{
    const fix_row_t *row = &fix_rows[_i];
    pf_pool_config_t cfg = row->given;
    pf_fix_t fixes[PF_FIX_KINDS];
    int n, i;

    n = pf_correct_pool_config(&cfg, row->first_server_limit, fixes);
    ck_assert_msg(cfg.server_limit == row->used.server_limit,
                  "%s: ServerLimit %d", row->label, cfg.server_limit);
    ck_assert_msg(cfg.max_workers == row->used.max_workers,
                  "%s: MaxRequestWorkers %d", row->label, cfg.max_workers);
    ck_assert_msg(cfg.start_servers == row->used.start_servers,
                  "%s: StartServers %d", row->label, cfg.start_servers);
    ck_assert_msg(cfg.min_spare_servers == row->used.min_spare_servers,
                  "%s: MinSpareServers %d", row->label,
                  cfg.min_spare_servers);
    ck_assert_msg(cfg.max_spare_servers == row->used.max_spare_servers,
                  "%s: MaxSpareServers %d", row->label,
                  cfg.max_spare_servers);
    ck_assert_msg(cfg.ratio == row->used.ratio, "%s: ratio %d", row->label,
                  cfg.ratio);
    ck_assert_msg(cfg.explicit_buckets == row->used.explicit_buckets,
                  "%s: ListenBuckets %d", row->label, cfg.explicit_buckets);
    for (i = 0; i < n; i++) {
        ck_assert_msg(fixes[i].kind == row->fixes[i],
                      "%s: correction %d is %d, expected %d", row->label, i,
                      fixes[i].kind, row->fixes[i]);
    }
    ck_assert_msg(row->fixes[n] == -1, "%s: %d correction(s), expected "
                  "more", row->label, n);
}
END_TEST

/* Each correction names the value configured and the value in force, and
 * a corrected configuration needs no second correction. */
START_TEST(pool_corrections_report_values_and_settle)
{
    pf_pool_config_t cfg = { 0, 300000, 0, 0, 0, 0, -1 };
    pf_fix_t fixes[PF_FIX_KINDS];
    int n;

    n = pf_correct_pool_config(&cfg, 0, fixes);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(fixes[0].kind, PF_FIX_SERVER_LIMIT_BELOW_ONE);
    ck_assert_int_eq(fixes[0].given, 0);
    ck_assert_int_eq(fixes[0].used, 1);
    ck_assert_int_eq(fixes[1].kind, PF_FIX_WORKERS_ABOVE_LIMIT);
    ck_assert_int_eq(fixes[1].given, 300000);
    ck_assert_int_eq(fixes[1].used, 1);
    ck_assert_int_eq(pf_correct_pool_config(&cfg, 1, fixes), 0);
}
END_TEST

/* A directive's value: accepted into place, or refused with the message
 * the admin sees, the value left as it was. */
START_TEST(a_directive_takes_its_value_or_says_why_not)
{
    char buf[512];
    int value = 7, mode = -1;

    ck_assert_ptr_null(pf_config_int("StartServers", " 12 ", 0, 100, &value,
                                     buf, sizeof(buf)));
    ck_assert_int_eq(value, 12);
    ck_assert_str_eq(pf_config_int("StartServers", "8x", 0, 100, &value, buf,
                                   sizeof(buf)),
                     "StartServers: '8x' is not a whole number; expected an "
                     "integer from 0 to 100");
    ck_assert_int_eq(value, 12);
    ck_assert_ptr_null(pf_config_steering("ListenBucketSteering", "Hash",
                                          &mode, buf, sizeof(buf)));
    ck_assert_int_eq(mode, PFB_STEER_HASH);
    ck_assert_str_eq(pf_config_steering("ListenBucketSteering", "random",
                                        &mode, buf, sizeof(buf)),
                     "ListenBucketSteering: 'random' is not a steering mode; "
                     "expected hash, cpu, idle or local");
#ifdef HAVE_BPF_STEERING
    ck_assert_ptr_null(pf_config_steering("ListenBucketSteering", "local",
                                          &mode, buf, sizeof(buf)));
    ck_assert_int_eq(mode, PFB_STEER_LOCAL);
#else
    ck_assert_ptr_nonnull(strstr(pf_config_steering("ListenBucketSteering",
                                                    "idle", &mode, buf,
                                                    sizeof(buf)),
                                 "needs the MPM's BPF programs"));
#endif
}
END_TEST

/* ListenBucketSteering's value, and whether this build runs it. */
START_TEST(test_parse_mode)
{
    int mode = -1;

    ck_assert_int_eq(pf_steer_parse_mode("hash", &mode), 0);
    ck_assert_int_eq(mode, PFB_STEER_HASH);
    ck_assert_int_eq(pf_steer_parse_mode("CPU", &mode), 0);
    ck_assert_int_eq(mode, PFB_STEER_CPU);
    ck_assert_int_eq(pf_steer_parse_mode("Idle", &mode), 0);
    ck_assert_int_eq(mode, PFB_STEER_IDLE);
    ck_assert_int_eq(pf_steer_parse_mode("LOCAL", &mode), 0);
    ck_assert_int_eq(mode, PFB_STEER_LOCAL);
    ck_assert_int_eq(pf_steer_parse_mode("idle ", &mode), -1);
    ck_assert_int_eq(pf_steer_parse_mode("", &mode), -1);
    ck_assert_int_eq(pf_steer_parse_mode("random", &mode), -1);
    ck_assert_int_eq(pf_steer_parse_mode(NULL, &mode), -1);
    ck_assert_str_eq(pfb_steer_name(PFB_STEER_IDLE), "idle");
    ck_assert_str_eq(pfb_steer_name(PFB_STEER_LOCAL), "local");
    ck_assert_str_eq(pfb_steer_name(9), "unknown");
}
END_TEST

/* hash always runs; idle, cpu and local only in a build with the programs, and
 * a build without them says what it lacked. */
START_TEST(test_modes_this_build_runs)
{
    ck_assert_ptr_null(pf_steer_mode_missing(PFB_STEER_HASH));
#ifdef HAVE_BPF_STEERING
    ck_assert_ptr_null(pf_steer_mode_missing(PFB_STEER_IDLE));
    ck_assert_ptr_null(pf_steer_mode_missing(PFB_STEER_CPU));
    ck_assert_ptr_null(pf_steer_mode_missing(PFB_STEER_LOCAL));
#else
    ck_assert_ptr_nonnull(pf_steer_mode_missing(PFB_STEER_LOCAL));
    ck_assert_ptr_nonnull(pf_steer_mode_missing(PFB_STEER_IDLE));
    ck_assert_ptr_nonnull(pf_steer_mode_missing(PFB_STEER_CPU));
    ck_assert(*pf_steer_mode_missing(PFB_STEER_CPU) != '\0');
#endif
}
END_TEST

Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("Directive values");
    TCase *steering = tcase_create("Steering mode");

    tcase_add_loop_test(tc, parse_bounded_int_follows_table, 0,
                        (int)(sizeof(parse_rows) / sizeof(parse_rows[0])));
    tcase_add_test(tc, parse_bounded_int_refuses_null);
    tcase_add_test(tc, error_message_names_directive_value_and_range);
    tcase_add_test(tc, error_message_is_truncated_not_overflowed);
    tcase_add_loop_test(tc, pool_corrections_follow_table, 0,
                        (int)(sizeof(fix_rows) / sizeof(fix_rows[0])));
    tcase_add_test(tc, pool_corrections_report_values_and_settle);
    tcase_add_test(tc, a_directive_takes_its_value_or_says_why_not);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);

    tcase_add_test(steering, test_parse_mode);
    tcase_add_test(steering, test_modes_this_build_runs);
    suite_add_tcase(s, steering);
    return s;
}
