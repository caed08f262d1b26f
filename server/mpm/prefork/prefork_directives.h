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
 * @file  prefork_directives.h
 * @brief The MPM's directives as httpd reads them: the command table, the
 *        one pf_config_t its handlers fill, and the corrections
 *        check_config makes to it, said in the log in httpd's words where
 *        httpd's prefork makes the same correction.
 *
 * prefork.c resets the values at pre_config (pf_directives_reset(), whose
 * const pointer is all it reads them by), corrects them at check_config
 * (pf_directives_correct()), and says what was corrected at start-up's
 * first pass (on the console) and, at every later pass, once core has
 * opened the error log (pf_directives_log_fixes()).
 */

#ifndef PREFORK_DIRECTIVES_H
#define PREFORK_DIRECTIVES_H

#include "httpd.h"
#include "http_config.h"

#include "prefork_config.h"

/** The command table: core's Listen handlers and this MPM's directives,
 *  each value parsed strictly (prefork_config.c). */
extern const command_rec pf_directives_cmds[];

/** pre_config: every directive back to its default, for the pass over the
 *  configuration that follows.  @return the values, read-only, which stay
 *  at this address for the server's life */
const pf_config_t *pf_directives_reset(void);

/** check_config: the values httpd's prefork corrects, corrected as it does
 *  (pf_correct_pool_config()), ServerLimit kept at @a first_server_limit
 *  once the server started (0: at the first start). */
void pf_directives_correct(int first_server_limit);

/**
 * One warning per correction check_config made, in order.  At start-up's
 * first pass (@a startup) to the console, the error log not being open
 * yet; otherwise to @a s's error log, once core has opened it.
 */
void pf_directives_log_fixes(int startup, server_rec *s);

#endif /* PREFORK_DIRECTIVES_H */
