/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * guard/prefork_os.c: a bucket's duplicate of a listener, whose
 * connections need no TCP_NODELAY setsockopt() from core.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/guard/prefork_os.c"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "apr_general.h"
#include "apr_network_io.h"
#include "apr_portable.h"

#include "unit.h"

/* A bucket's duplicate of a Listen whose socket has TCP_NODELAY: the
 * duplicate has the kernel option and APR's record of it, so a connection
 * accepted from it has both, and core's apr_socket_opt_set() for it makes
 * no system call. */
START_TEST(duplicate_listener_passes_nodelay_to_connections)
{
    apr_pool_t *pool;
    apr_socket_t *orig, *dup, *client, *conn;
    apr_sockaddr_t *sa, *bound;
    apr_os_sock_t fd;
    apr_int32_t on = 0;
    int kernel_on = 0;
    socklen_t len = sizeof(kernel_on);

    ck_assert_int_eq(apr_pool_create(&pool, NULL), APR_SUCCESS);
    ck_assert_int_eq(apr_sockaddr_info_get(&sa, "127.0.0.1", APR_INET, 0, 0,
                                           pool), APR_SUCCESS);
    ck_assert_int_eq(apr_socket_create(&orig, APR_INET, SOCK_STREAM,
                                       APR_PROTO_TCP, pool), APR_SUCCESS);
    ck_assert_int_eq(pf_os_set_reuseport(orig), APR_SUCCESS);
    ck_assert_int_eq(apr_socket_opt_set(orig, APR_TCP_NODELAY, 1),
                     APR_SUCCESS);
    ck_assert_int_eq(apr_socket_bind(orig, sa), APR_SUCCESS);
    ck_assert_int_eq(apr_socket_listen(orig, 16), APR_SUCCESS);
    ck_assert_int_eq(apr_socket_addr_get(&bound, APR_LOCAL, orig),
                     APR_SUCCESS);

    ck_assert_int_eq(pf_os_duplicate_listener(&dup, orig, bound, 16, NULL,
                                              pool),
                     APR_SUCCESS);
    ck_assert_int_eq(apr_socket_opt_get(dup, APR_TCP_NODELAY, &on),
                     APR_SUCCESS);
    ck_assert_msg(on == 1, "APR has no TCP_NODELAY on the duplicate");

    /* Only the duplicate is left listening, so it gets the connection. */
    ck_assert_int_eq(apr_socket_close(orig), APR_SUCCESS);
    ck_assert_int_eq(apr_socket_create(&client, APR_INET, SOCK_STREAM,
                                       APR_PROTO_TCP, pool), APR_SUCCESS);
    ck_assert_int_eq(apr_socket_connect(client, bound), APR_SUCCESS);
    ck_assert_int_eq(apr_socket_accept(&conn, dup, pool), APR_SUCCESS);

    on = 0;
    ck_assert_int_eq(apr_socket_opt_get(conn, APR_TCP_NODELAY, &on),
                     APR_SUCCESS);
    ck_assert_msg(on == 1, "APR does not mark the connection TCP_NODELAY: "
                  "core would set it with a setsockopt() per connection");
    apr_os_sock_get(&fd, conn);
    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &kernel_on,
                                &len), 0);
    ck_assert_msg(kernel_on != 0, "the connection lacks TCP_NODELAY");
    apr_pool_destroy(pool);
}
END_TEST

Suite *os_suite(void)
{
    Suite *s = suite_create("os");
    TCase *dup = tcase_create("duplicate");

    apr_initialize();

    tcase_add_test(dup, duplicate_listener_passes_nodelay_to_connections);
    suite_add_tcase(s, dup);
    return s;
}
