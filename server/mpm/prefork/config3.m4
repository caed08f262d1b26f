dnl In-tree build: the MPM's objects (static or shared, as httpd's
dnl --enable-mpms-shared says).  The source list is every prefork*.c of
dnl this directory and of its capability folders (buckets/, conn/, guard/,
dnl steering/), read when configure runs, so a new prefork_*.c file is built
dnl without a change here.  httpd's .c.lo rule compiles without -o, so each
dnl object lands in this directory under its file's own name (the names are
dnl unique: the prefork_ prefix), and this directory's Makefile finds the
dnl sources through VPATH.  The kernel's programs (*.bpf.c) are not objects
dnl of the MPM but compiled by that Makefile into a skeleton header.  With
dnl them the MPM links libbpf, and with libseccomp that (config.m4 found
dnl both).
prefork_mpm_objects=`cd "$abs_srcdir/server/mpm/prefork" && ls prefork*.c */prefork*.c | grep -v '\.bpf\.c$' | sed 's|^.*/||; s/\.c$/.lo/' | tr '\n' ' '`
APACHE_MPM_MODULE(prefork, $enable_mpm_prefork, $prefork_mpm_objects, , ,
                  [$PREFORK_STEERING_LIBS $prefork_mpm_libs])
