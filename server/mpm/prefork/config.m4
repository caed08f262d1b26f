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

dnl ---- ListenBucketSteering: programs attached to the reuseport groups --------
dnl The kernel is asked at run time whether it takes them; without the headers
dnl the directive falls back to hash.
AC_CACHE_CHECK([for SO_ATTACH_REUSEPORT_CBPF and bpf(2) headers],
    [ac_cv_reuseport_steering],
    [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <linux/filter.h>]],
        [[int a = SO_ATTACH_REUSEPORT_CBPF, b = SO_ATTACH_REUSEPORT_EBPF;
          int c = BPF_PROG_TYPE_SK_REUSEPORT, d = BPF_MAP_TYPE_REUSEPORT_SOCKARRAY;
          int e = BPF_F_MMAPABLE; long f = SYS_bpf;
          (void)a; (void)b; (void)c; (void)d; (void)e; (void)f;]])],
        [ac_cv_reuseport_steering=yes], [ac_cv_reuseport_steering=no])])
if test "$ac_cv_reuseport_steering" = "yes"; then
    AC_DEFINE([HAVE_REUSEPORT_STEERING], [1],
              [Define if the headers have SO_ATTACH_REUSEPORT_CBPF/EBPF and bpf(2)])
fi

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
