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
 * @file  pfb_log.h
 * @brief This project's log-message tags.
 */

#ifndef PFB_LOG_H
#define PFB_LOG_H

/**
 * Tag for this project's log messages: the same shape as httpd's APLOGNO,
 * with the project's own prefix so that it never collides with httpd's
 * catalogue.  The next free number is in docs/log-message-tags/next-number,
 * and `make check-tags` refuses an empty or reused one.
 */
#define PFBLOGNO(n) "PFB" #n ": "

#endif /* PFB_LOG_H */
