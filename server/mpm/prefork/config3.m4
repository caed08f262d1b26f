dnl In-tree build: the MPM's objects (static or shared, as httpd's
dnl --enable-mpms-shared says).  The source list is this directory's
dnl prefork*.c, read when configure runs, so a new prefork_*.c file is built
dnl without a change here.  prefork_mpm_libs comes from config.m4
dnl (libseccomp, when found).
prefork_mpm_objects=`cd "$abs_srcdir/server/mpm/prefork" && ls prefork*.c | sed 's/\.c$/.lo/' | tr '\n' ' '`
APACHE_MPM_MODULE(prefork, $enable_mpm_prefork, $prefork_mpm_objects, , ,
                  $prefork_mpm_libs)
