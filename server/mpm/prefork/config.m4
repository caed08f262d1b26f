dnl In-tree build (httpd 2.4 source tree): whether prefork can build here,
dnl and the checks its SO_REUSEPORT listener buckets need.
AC_MSG_CHECKING(if prefork MPM supports this platform)
if test $forking_mpms_supported != yes; then
    AC_MSG_RESULT(no - This is not a forking platform)
else
    AC_MSG_RESULT(yes)
    APACHE_MPM_SUPPORTED(prefork, yes, no)
fi

AC_CACHE_CHECK([for SO_REUSEPORT], [ac_cv_so_reuseport],
    [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <sys/socket.h>]],
                                        [[int opt = SO_REUSEPORT; (void)opt;]])],
                       [ac_cv_so_reuseport=yes], [ac_cv_so_reuseport=no])])
if test "$ac_cv_so_reuseport" = "yes"; then
    AC_DEFINE([HAVE_SO_REUSEPORT], [1], [Define if <sys/socket.h> defines SO_REUSEPORT])
fi
AC_CACHE_CHECK([for TCP_INFO], [ac_cv_tcp_info],
    [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <netinet/in.h>
#include <netinet/tcp.h>]],
                                        [[struct tcp_info ti; int opt = TCP_INFO; (void)ti; (void)opt;]])],
                       [ac_cv_tcp_info=yes], [ac_cv_tcp_info=no])])
if test "$ac_cv_tcp_info" = "yes"; then
    AC_DEFINE([HAVE_TCP_INFO], [1], [Define if <netinet/tcp.h> has struct tcp_info])
fi
AC_CHECK_HEADERS([sched.h])
AC_CHECK_FUNCS([sched_getaffinity sched_setaffinity])

dnl ---- ListenBucketSteering: BPF programs in restricted C -----------------------
dnl As in the standalone build (configure.ac): prefork_steering.bpf.c is compiled
dnl with clang -target bpf, bpftool makes a skeleton header of it, and libbpf
dnl loads it at run time.  Without any of the three the MPM is built without
dnl the programs, and ListenBucketSteering idle or cpu then stops start-up
dnl naming what the build lacked.  The results go to this directory's
dnl Makefile (PREFORK_*) and to config3.m4 (PREFORK_STEERING_LIBS).
AC_ARG_ENABLE([prefork-bpf-steering],
    APACHE_HELP_STRING([--disable-prefork-bpf-steering],
        [build the prefork MPM without ListenBucketSteering's BPF programs]),
    [prefork_bpf_steering="$enableval"], [prefork_bpf_steering=auto])
PREFORK_BPF_MISSING=""
PREFORK_STEERING_SKEL=""
PREFORK_STEERING_LIBS=""
PREFORK_BPF_CFLAGS=""
if test "$prefork_bpf_steering" != "no"; then
    AC_PATH_PROGS([PREFORK_CLANG], [clang clang-16 clang-15 clang-14], [], [$PATH])
    AC_PATH_PROGS([PREFORK_BPFTOOL], [bpftool], [], [$PATH:/usr/sbin:/sbin])
    dnl <linux/bpf.h> includes <asm/types.h>, in the multiarch directory
    dnl that clang's bpf target does not search by itself.
    prefork_multiarch=`$CC -print-multiarch 2>/dev/null`
    if test -n "$prefork_multiarch" && test -d "/usr/include/$prefork_multiarch"; then
        PREFORK_BPF_CFLAGS="-idirafter /usr/include/$prefork_multiarch"
    fi
    AC_MSG_CHECKING([whether $PREFORK_CLANG compiles a BPF program with libbpf's headers])
    if test -n "$PREFORK_CLANG"; then
        cat > conftest.bpf.c <<'CONFTEST_EOF'
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("sk_reuseport")
int probe(struct sk_reuseport_md *md)
{
    return md->hash ? SK_PASS : SK_DROP;
}
CONFTEST_EOF
        if $PREFORK_CLANG -g -O2 -target bpf -mcpu=v2 $PREFORK_BPF_CFLAGS \
               -c conftest.bpf.c -o conftest.bpf.o >&AS_MESSAGE_LOG_FD 2>&1; then
            AC_MSG_RESULT(yes)
        else
            AC_MSG_RESULT(no)
            PREFORK_BPF_MISSING="$PREFORK_BPF_MISSING, clang with the bpf target and libbpf's headers (clang, libbpf-dev)"
        fi
        rm -f conftest.bpf.c conftest.bpf.o
    else
        AC_MSG_RESULT(no clang)
        PREFORK_BPF_MISSING="$PREFORK_BPF_MISSING, clang (clang)"
    fi
    test -n "$PREFORK_BPFTOOL" || PREFORK_BPF_MISSING="$PREFORK_BPF_MISSING, bpftool (bpftool)"
    AC_MSG_CHECKING([for libbpf 1.0 or later with pkg-config])
    if test -n "$PKGCONFIG" && $PKGCONFIG --exists 'libbpf >= 1.0'; then
        PREFORK_STEERING_LIBS=`$PKGCONFIG --libs libbpf`
        libbpf_version=`$PKGCONFIG --modversion libbpf`
        AC_MSG_RESULT([yes, $libbpf_version])
    else
        AC_MSG_RESULT(no)
        PREFORK_BPF_MISSING="$PREFORK_BPF_MISSING, libbpf 1.0 or later (libbpf-dev)"
    fi
    AC_CACHE_CHECK([for the reuseport program and socket-map headers],
        [ac_cv_reuseport_bpf_headers],
        [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <sys/socket.h>
#include <linux/bpf.h>]],
            [[int a = SO_ATTACH_REUSEPORT_EBPF, b = SO_COOKIE;
              int c = BPF_PROG_TYPE_SK_REUSEPORT, d = BPF_MAP_TYPE_REUSEPORT_SOCKARRAY;
              int e = BPF_F_MMAPABLE;
              (void)a; (void)b; (void)c; (void)d; (void)e;]])],
            [ac_cv_reuseport_bpf_headers=yes], [ac_cv_reuseport_bpf_headers=no])])
    test "$ac_cv_reuseport_bpf_headers" = "yes" \
        || PREFORK_BPF_MISSING="$PREFORK_BPF_MISSING, Linux headers with SK_REUSEPORT programs (linux-libc-dev)"
    test "$ac_cv_so_reuseport" = "yes" || PREFORK_BPF_MISSING="$PREFORK_BPF_MISSING, SO_REUSEPORT"
    PREFORK_BPF_MISSING=`echo "$PREFORK_BPF_MISSING" | sed 's/^, //'`
    if test -z "$PREFORK_BPF_MISSING"; then
        PREFORK_STEERING_SKEL=prefork_steering.skel.h
        AC_DEFINE([HAVE_BPF_STEERING], [1],
                  [Define to build ListenBucketSteering's BPF programs])
    elif test "$prefork_bpf_steering" = "yes"; then
        AC_MSG_ERROR([--enable-prefork-bpf-steering: missing $PREFORK_BPF_MISSING])
    else
        AC_MSG_WARN([prefork MPM without ListenBucketSteering's BPF programs: missing $PREFORK_BPF_MISSING])
        PREFORK_STEERING_LIBS=""
    fi
else
    PREFORK_BPF_MISSING="them (configured with --disable-prefork-bpf-steering)"
fi
if test -z "$PREFORK_STEERING_SKEL"; then
    AC_DEFINE_UNQUOTED([PF_STEER_BUILD_MISSING], ["$PREFORK_BPF_MISSING"],
                       [What the build lacked for ListenBucketSteering's BPF programs])
fi
APACHE_SUBST(PREFORK_CLANG)
APACHE_SUBST(PREFORK_BPFTOOL)
APACHE_SUBST(PREFORK_BPF_CFLAGS)
APACHE_SUBST(PREFORK_STEERING_SKEL)

dnl ---- the children's system-call filter: libseccomp, when found --------------
dnl Without it the MPM builds without the filter and says so at start.
prefork_mpm_libs=""
AC_CHECK_HEADER([seccomp.h], [
    AC_CHECK_LIB([seccomp], [seccomp_api_get], [
        AC_DEFINE([HAVE_LIBSECCOMP], [1], [Define if libseccomp is available])
        prefork_mpm_libs="-lseccomp"])])

dnl ---- core's ListenTCPDeferAccept handler (2.4.63 and later) ---------------
dnl httpd's own headers cannot be compiled yet at this point (ap_config_auto.h
dnl is written at the end of configure), so read the declaration from the
dnl tree's ap_listen.h.
AC_MSG_CHECKING([for ap_set_listentcpdeferaccept in ap_listen.h])
if grep 'ap_set_listentcpdeferaccept' "$abs_srcdir/include/ap_listen.h" >/dev/null 2>&1; then
    AC_MSG_RESULT(yes)
    AC_DEFINE([HAVE_AP_SET_LISTENTCPDEFERACCEPT], [1],
              [Define if core has a handler for ListenTCPDeferAccept])
else
    AC_MSG_RESULT(no)
fi
