/* Licensed to the Apache Software Foundation (ASF) under one or more
 * contributor license agreements.  See the NOTICE file distributed with
 * this work for additional information regarding copyright ownership.
 * The ASF licenses this file to You under the Apache License, Version 2.0
 * (the "License"); you may not use this file except in compliance with
 * the License.  You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/**
 * @file  prefork_guard_unit.h
 * @brief For the unit tests only: what prefork_guard.c builds only where
 *        it is compiled with PF_UNIT_TEST (make check-unit).
 */

#ifndef PREFORK_GUARD_UNIT_H
#define PREFORK_GUARD_UNIT_H

#ifndef PF_UNIT_TEST
#error "prefork_guard_unit.h is for the unit tests (PF_UNIT_TEST) only"
#endif

/**
 * Writes the children's system-call filter, as pf_guard_install_filter()
 * would install it for @a bucket_fds, to @a out_fd in libseccomp's pseudo
 * filter code (seccomp_export_pfc()), without loading it.
 * @return 0, or a negative errno
 */
int pf_guard_filter_export(int out_fd, const int *bucket_fds, int num_fds);

#endif /* PREFORK_GUARD_UNIT_H */
