dnl In-tree build: the MPM's objects (static or shared, as httpd's
dnl --enable-mpms-shared says).
APACHE_MPM_MODULE(prefork, $enable_mpm_prefork, prefork.lo prefork_policy.lo prefork_steer.lo prefork_os.lo)
