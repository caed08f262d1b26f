/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Directive values: what pf_parse_bounded_int() accepts and refuses, and
 * the message the admin sees.
 */

#include <string.h>

#include "unit.h"
#include "prefork_policy.h"

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

    memset(buf, 'x', sizeof(buf));
    pf_format_parse_error(buf, sizeof(buf), "MaxRequestWorkers", "123456789",
                          1, 200000, PF_PARSE_OUT_OF_RANGE);
    ck_assert_int_eq((int)strlen(buf), (int)sizeof(buf) - 1);
}
END_TEST

Suite *parse_suite(void)
{
    Suite *s = suite_create("parse");
    TCase *tc = tcase_create("Directive values");

    tcase_add_loop_test(tc, parse_bounded_int_follows_table, 0,
                        (int)(sizeof(parse_rows) / sizeof(parse_rows[0])));
    tcase_add_test(tc, parse_bounded_int_refuses_null);
    tcase_add_test(tc, error_message_names_directive_value_and_range);
    tcase_add_test(tc, error_message_is_truncated_not_overflowed);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);
    return s;
}
