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
 * @file  prefork_config_log.h
 * @brief The corrections check_config made to the directives
 *        (pf_correct_pool_config()), said in the log in httpd's words
 *        where httpd's prefork makes the same correction.  Apart from
 *        prefork_config.c, whose pure functions the unit tests link alone.
 *
 * prefork.c calls it from check_config at start-up's first pass (on the
 * console) and, at every later pass, once core has opened the error log.
 */

#ifndef PREFORK_CONFIG_LOG_H
#define PREFORK_CONFIG_LOG_H

#include "httpd.h"

#include "prefork_config.h"

/**
 * One warning per correction in @a conf, in order.  At start-up's first
 * pass (@a startup) to the console, the error log not being open yet;
 * otherwise to @a s's error log, once core has opened it.
 */
void pf_config_log_fixes(const pf_config_t *conf, int startup, server_rec *s);

#endif /* PREFORK_CONFIG_LOG_H */
