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
 * @file  prefork_pick.h
 * @brief Which ready listener a child takes, when its bucket holds
 *        several: conn/'s own, for prefork_accept.c.
 *
 * A pure function over positions in the bucket, apart from
 * prefork_accept.c because that file needs httpd and APR's pollset and so
 * cannot be in the unit tests' binary; this one can.
 */

#ifndef PREFORK_PICK_H
#define PREFORK_PICK_H

/**
 * Which of the ready listeners a child holding its bucket's accept mutex
 * accepts from.  The pollset reports ready sockets in the same order each
 * time, so always taking the first would leave the others' connections
 * queued for as long as the first stays busy.  The child takes the first
 * ready listener after the one it served last, in the bucket's order: a
 * listener that stays ready is served within one round of the child's
 * accepts.
 * @param ready Positions in the bucket (0 .. num_listeners - 1) of the
 *        ready listeners, in the pollset's order
 * @param num_ready Entries in ready
 * @param num_listeners Listeners in the bucket
 * @param last_served Position served last, or -1 for none yet
 * @return An index into ready, or -1 when no entry is a valid position
 */
int pf_pick_ready_listener(const int *ready, int num_ready, int num_listeners,
                           int last_served);

#endif /* PREFORK_PICK_H */
