dnl In-tree build: the MPM's objects (static or shared, as httpd's
dnl --enable-mpms-shared says).  The source list is this directory's
dnl prefork*.c, read when configure runs, so a new prefork_*.c file is built
dnl without a change here; the kernel's programs (*.bpf.c) are not objects
dnl of the MPM but compiled by this directory's Makefile into a skeleton
dnl header.  With them the MPM links libbpf, and with libseccomp that
dnl (config.m4 found both).
prefork_mpm_objects=`cd "$abs_srcdir/server/mpm/prefork" && ls prefork*.c | grep -v '\.bpf\.c$' | sed 's/\.c$/.lo/' | tr '\n' ' '`
APACHE_MPM_MODULE(prefork, $enable_mpm_prefork, $prefork_mpm_objects, , ,
                  [$PREFORK_STEERING_LIBS $prefork_mpm_libs])
