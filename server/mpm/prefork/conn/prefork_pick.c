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

/*
 * The accept path's turn over the ready listeners of a bucket that holds
 * several (the single bucket of every Listen, polled under the accept
 * mutex as httpd's prefork polls them).  httpd's child_main() goes round
 * the pollset's results with an index of its own (last_poll_idx); here
 * the turn is kept over the listeners' positions in the bucket, so that
 * whatever the pollset reports, and in whatever order, a listener that
 * stays ready is served within one round.  Kept apart from
 * prefork_accept.c, which calls it, because it is plain arithmetic that
 * the unit tests drive (test_prefork_pick.c), and that file is httpd's
 * glue, which they cannot link.
 */

#include "prefork_pick.h"

int pf_pick_ready_listener(const int *ready, int num_ready, int num_listeners,
                           int last_served)
{
    int i, distance, best = -1, best_distance = num_listeners;

    if (num_listeners <= 0) {
        return -1;
    }
    if (last_served < -1 || last_served >= num_listeners) {
        last_served = -1;
    }
    for (i = 0; i < num_ready; i++) {
        if (ready[i] < 0 || ready[i] >= num_listeners) {
            continue;
        }
        /* How far after the last served listener this one comes, going
         * round the bucket: 0 for the very next one. */
        distance = (ready[i] - last_served - 1 + num_listeners)
                   % num_listeners;
        if (distance < best_distance) {
            best_distance = distance;
            best = i;
        }
    }
    return best;
}
