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
 * @file  prefork_ready.h
 * @brief The channel children report ready on, once each, after
 *        child_init: from then on an APEXIT_CHILDFATAL is a module or a
 *        script asking to stop the server, not a child that cannot start.
 *
 * An AF_UNIX datagram socket pair kept for the life of the server: the
 * parent's end has SO_PASSCRED, so the kernel names each sender's pid
 * and nothing else in a report is read; every child shares the other
 * end, sends one report and closes it, so that nothing it runs later can
 * report.  A report must never be lost (the child's APEXIT_CHILDFATAL
 * would then stop the whole server): the children's end has room for
 * every child the server can have, twice over, and a child whose report
 * does not fit waits for room.  The children table (prefork_children.h)
 * opens it, keeps its ends, and reads it whenever the parent waits.
 *
 * libc and APR's types only: the unit tests drive it with real processes.
 */

#ifndef PREFORK_READY_H
#define PREFORK_READY_H

#include "apr.h"
#include "apr_errno.h"
#include "apr_time.h"

#include <sys/types.h>

/** How long a child waits for room for its report before it gives up. */
#define PF_READY_PATIENCE apr_time_from_sec(10)

/**
 * Opens the channel with room for @a reports reports waiting at once.
 * @param fds Set to the parent's end [0] and the children's end [1]
 *        (both close-on-exec)
 * @param room Set to how many reports the children's end holds, as the
 *        kernel granted it (fewer where the parent may not raise socket
 *        buffers past the system's maximum)
 */
apr_status_t pf_ready_open(int fds[2], int reports, int *room);

/**
 * Child: sends its one report on @a fd, waiting up to @a patience for
 * room when the channel is full.
 * @return APR_SUCCESS, APR_TIMEUP when there was no room in time, or the
 *         error that ended it
 */
apr_status_t pf_ready_report(int fd, apr_interval_time_t patience);

/**
 * Parent: reads the reports waiting on @a fd (at most @a most), calling
 * @a ready with each sender's pid, as the kernel vouches for it.
 * @return how many were read
 */
int pf_ready_read(int fd, int most, void (*ready)(void *baton, pid_t pid),
                  void *baton);

#endif /* PREFORK_READY_H */
