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
 * @file  prefork_policy_unit.h
 * @brief For the unit tests only: functions of prefork_policy.c that are
 *        static in the module and get external linkage only where the
 *        file is compiled with PF_UNIT_TEST (make check-unit).  Their
 *        comments are at their definitions.
 */

#ifndef PREFORK_POLICY_UNIT_H
#define PREFORK_POLICY_UNIT_H

#ifndef PF_UNIT_TEST
#error "prefork_policy_unit.h is for the unit tests (PF_UNIT_TEST) only"
#endif

int pf_share(int total, int num_buckets, int b);
int pf_bucket_min_spare(int min_spare_servers, int num_buckets, int b);
int pf_bucket_max_spare(int min_spare_servers, int max_spare_servers,
                        int num_buckets, int b);

#endif /* PREFORK_POLICY_UNIT_H */
