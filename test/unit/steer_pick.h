/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The idle and local steering rules over plain counts, for what runs them
 * outside the MPM: the steering rules' unit tests and the scale model
 * (bench/sim/bucketsim.py, through build/libpfpolicy.so and ctypes).
 */

#ifndef PREFORK_STEER_PICK_H
#define PREFORK_STEER_PICK_H

#include <stdint.h>

#include "steering/prefork_steering_rules.h"

/**
 * pf_steer_idle_choose() over plain counts.
 * @param idle The @a per_listen idle counts of one Listen
 * @param moved Set as pf_steer_idle_choose() sets it
 * @return the shard, or -1 on bad input
 */
int pf_steer_idle_pick(const int64_t *idle, int per_listen, uint32_t hash,
                       uint32_t random, int *moved);

/**
 * pf_steer_local_choose() over plain counts.
 * @param idle The @a per_listen idle counts of one Listen
 * @param entry The receiving CPU's entry (NULL for none)
 * @param moved Set as pf_steer_local_choose() sets it
 * @return the shard, or -1 on bad input
 */
int pf_steer_local_pick(const int64_t *idle, int per_listen,
                        const pf_steer_cpu_entry_t *entry, uint32_t hash,
                        uint32_t random, int *moved);

#endif /* PREFORK_STEER_PICK_H */
