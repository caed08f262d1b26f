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
 * How a child's end is read and how fast its bucket gets another: what a
 * process's exit means to the parent (ours or not, started or not, told
 * to stop or killed from outside, APEXIT_CHILDFATAL), how a child left
 * (lived, stopped, recycled, died at start), and each bucket's pacing
 * once its children keep dying at start: PF_RESPAWN_FORGIVEN deaths in a
 * row forgiven, then a back-off from 1 s doubling up to
 * PF_RESPAWN_MAX_DELAY_US, and at most PF_RESPAWN_FORGIVEN out-of-cycle
 * forks a second whatever the exits say.  The parent's own
 * knowledge only (its clock, its record of the child): an exit status is
 * the child's to choose, so it never alone decides a pace.  Pure: the
 * callers (prefork.c, prefork_generation.c) pass the time, act and log.
 */

#include "prefork_respawn.h"

pf_child_end_e pf_respawn_classify_end(int ours, int ready, int told_to_stop,
                                       int fatal_exit, int killed)
{
    if (ours && ready && fatal_exit) {
        return PF_END_FATAL_STARTED;
    }
    if (fatal_exit) {
        return PF_END_FATAL;
    }
    if (!ours) {
        return PF_END_LOST;
    }
    return killed && !told_to_stop ? PF_END_KILLED : PF_END_LEFT;
}

pf_exit_kind_e pf_respawn_classify_exit(long long lifetime_us,
                                        int told_to_stop, int exited_cleanly,
                                        int recycling)
{
    if (told_to_stop) {
        return PF_EXIT_STOPPED;
    }
    if (lifetime_us >= PF_RESPAWN_YOUNG_US) {
        return PF_EXIT_LIVED;
    }
    return exited_cleanly && recycling ? PF_EXIT_RECYCLED : PF_EXIT_EARLY;
}

int pf_respawn_paced(const pf_respawn_t *r)
{
    return r->early_deaths > PF_RESPAWN_FORGIVEN;
}

/*
 * The wait after the @a early_deaths-th death at start in a row: none up
 * to PF_RESPAWN_FORGIVEN, then 1 s, doubling each time, up to
 * PF_RESPAWN_MAX_DELAY_US.
 */
static long long pf_respawn_delay(int early_deaths)
{
    long long delay = PF_RESPAWN_YOUNG_US;
    int beyond = early_deaths - PF_RESPAWN_FORGIVEN;

    if (beyond <= 0) {
        return 0;
    }
    while (--beyond > 0 && delay < PF_RESPAWN_MAX_DELAY_US) {
        delay *= 2;
    }
    return delay < PF_RESPAWN_MAX_DELAY_US ? delay : PF_RESPAWN_MAX_DELAY_US;
}

int pf_respawn_note_exit(pf_respawn_t *r, pf_exit_kind_e kind,
                         long long child_started, long long now)
{
    long long until;

    switch (kind) {
    case PF_EXIT_LIVED:
        pf_respawn_note_alive(r, child_started, now);
        return 0;
    case PF_EXIT_EARLY:
        /* Counted up to where the delay stops growing, so the count
         * cannot overflow however long an episode lasts. */
        if (r->early_deaths == 0) {
            r->since = child_started;
        }
        if (pf_respawn_delay(r->early_deaths) < PF_RESPAWN_MAX_DELAY_US) {
            r->early_deaths++;
        }
        until = now + pf_respawn_delay(r->early_deaths);
        if (until > r->hold_until) {
            r->hold_until = until;
        }
        return r->early_deaths == PF_RESPAWN_FORGIVEN + 1;
    default:
        return 0;
    }
}

int pf_respawn_note_alive(pf_respawn_t *r, long long child_started,
                          long long now)
{
    int was_paced = pf_respawn_paced(r);

    if (r->early_deaths == 0 || now - child_started < PF_RESPAWN_YOUNG_US
        || child_started < r->since) {
        return 0;
    }
    r->early_deaths = 0;
    r->hold_until = 0;
    return was_paced;
}

int pf_respawn_note_quiet(pf_respawn_t *r, long long now)
{
    if (!pf_respawn_paced(r)
        || now < r->hold_until + pf_respawn_delay(r->early_deaths)) {
        return 0;
    }
    r->early_deaths = 0;
    r->hold_until = 0;
    return 1;
}

int pf_respawn_may_fork(const pf_respawn_t *r, int out_of_cycle,
                        long long now)
{
    if (now < r->hold_until) {
        return 0;
    }
    if (!out_of_cycle) {
        return 1;
    }
    if (pf_respawn_paced(r)) {
        return 0;
    }
    return now - r->window_start >= PF_RESPAWN_YOUNG_US
           || now < r->window_start
           || r->out_of_cycle < PF_RESPAWN_FORGIVEN;
}

void pf_respawn_note_fork(pf_respawn_t *r, int out_of_cycle, long long now)
{
    if (out_of_cycle) {
        if (now - r->window_start >= PF_RESPAWN_YOUNG_US
            || now < r->window_start) {
            r->window_start = now;
            r->out_of_cycle = 0;
        }
        r->out_of_cycle++;
    }
    if (pf_respawn_paced(r)) {
        r->hold_until = now + pf_respawn_delay(r->early_deaths);
    }
}
