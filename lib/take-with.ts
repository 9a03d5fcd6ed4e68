/** Arrays an array's scheduled backups take with it (arrays.<name>.takeWith): the other arrays
 * of the same instance whose sets the same CreateSnapshots call takes, one point in time for
 * all of them, each set its own (lambdas/raidsnap/workflows/backup/together.py). The run has one
 * consistency: crash, or fsfreeze (every array's filesystem frozen around the call,
 * lambdas/raidsnap/workflows/backup/freezes.py), so the arrays of a group are configured alike.
 * One array of a group may have hooks: its pre hook runs before any freeze, its post hook after
 * every thaw; a second one's pre hook would run while the first array is frozen. */

import type { Problem } from './config-error';
import { HooksConfig, hooksRun } from './hooks-config';

const ARRAY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
// An fsfreeze group's freezes (lambdas/raidsnap/workflows/backup/freezes.py, seconds_needed):
// every freeze after the first ends GROUP_GAP_SECONDS before the first one's guard (freeze.sh),
// comes FREEZE_STEP_SECONDS after the one before (the workflow's 2 s wait before it looks, and a
// second allowed for sending the next one and the agent picking it up), and is refused with less
// than MIN_WINDOW_SECONDS left for the snapshots.
const GROUP_GAP_SECONDS = 2;
const FREEZE_STEP_SECONDS = 3;
const MIN_WINDOW_SECONDS = 10;

/** The least maxFreezeSeconds with which `arrays` freezes of one run can all be made. */
export function freezeSecondsNeeded(arrays: number): number {
  return (arrays - 1) * FREEZE_STEP_SECONDS + GROUP_GAP_SECONDS + MIN_WINDOW_SECONDS;
}
// The backup input's limit (raidsnap.models.BackupInput.takeWith).
const MAX_ARRAYS = 8;

/** What the cross-array check needs to know of each configured array. */
export interface TakeWithFacts {
  readonly consistency: string;
  readonly hooks?: Pick<HooksConfig, 'preSnapshot' | 'postSnapshot'>;
  readonly recovery?: { readonly instanceId: string };
  readonly fastRestore?: unknown;
  readonly copies?: readonly unknown[];
  readonly takeWith?: readonly string[];
}

export function parseTakeWith(raw: unknown, field: string, name: string, problem: Problem): string[] {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_ARRAYS) {
    throw problem(field, `is not a list of 1 to ${MAX_ARRAYS} array names`, 'list the other arrays of the instance, such as [logs]');
  }
  const names = raw.map((entry, i) => {
    if (typeof entry !== 'string' || !ARRAY_NAME.test(entry)) {
      throw problem(`${field}[${i}]`, 'is not an array name', 'use 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit');
    }
    return entry;
  });
  if (names.includes(name) || new Set(names).size !== names.length) {
    throw problem(field, `names ${name} itself or an array twice`, 'list each other array once');
  }
  return names;
}

/** Refuse what the configuration itself shows cannot be taken together: two arrays of the group
 * whose backups run hooks, a named array configured with another consistency than the
 * array's (its sets would be frozen, or not, against its own setting), a named array with a
 * fastRestore policy or copies (they run for the array a backup is started for), or named
 * arrays whose recovery names another instance (where both name one; arrays found by tags alone
 * are checked at run time), or an fsfreeze group that maxFreezeSeconds cannot hold. */
export function checkTakeWith(arrays: Record<string, TakeWithFacts>, problem: Problem, maxFreezeSeconds: number): void {
  for (const [name, array] of Object.entries(arrays)) {
    if (!array.takeWith) continue;
    const field = `arrays.${name}.takeWith`;
    const needed = freezeSecondsNeeded(1 + array.takeWith.length);
    if (array.consistency === 'fsfreeze' && maxFreezeSeconds < needed) {
      throw problem(field, `${1 + array.takeWith.length} arrays frozen one after the other need a maxFreezeSeconds of at least ${needed} s (each freeze comes 3 s or more after the one before, ends 2 s before the first one's guard and needs 10 s for the snapshots); defaults.maxFreezeSeconds is ${maxFreezeSeconds}`,
        `raise defaults.maxFreezeSeconds to ${needed} or more, or take fewer arrays together`);
    }
    // Only hooks a backup runs by default count: a block of named commands alone runs nothing
    // unless a run names them, and a run's own hooks are checked when it starts (together.py).
    const hooked = [name, ...array.takeWith].filter((member) => hooksRun(arrays[member]?.hooks)).sort();
    if (hooked.length > 1) {
      throw problem(field, `${hooked.join(' and ')} both have hooks; one array of those taken together may have hooks`,
        `keep the hooks of one of ${hooked.join(', ')}, or back them up one by one`);
    }
    for (const member of [name, ...array.takeWith]) {
      const other = arrays[member];
      if (!other) continue;
      if (other.consistency !== array.consistency) {
        throw problem(field, `${member} is configured with ${other.consistency}, ${name} with ${array.consistency}: arrays taken together get one consistency, ${name}'s`,
          `give ${member} consistency ${array.consistency}, or back it up on its own schedule`);
      }
      if (member !== name && other.fastRestore !== undefined) {
        throw problem(field, `${member} has a fastRestore policy, which runs only for the array a backup is started for`,
          `back ${member} up on its own schedule, or remove its fastRestore`);
      }
      if (member !== name && other.copies !== undefined && other.copies.length > 0) {
        throw problem(field, `${member} has copies, which run only for the array a backup is started for`,
          `back ${member} up on its own schedule, or remove its copies`);
      }
      const here = array.recovery?.instanceId;
      const there = other.recovery?.instanceId;
      if (here && there && here !== there) {
        throw problem(field, `${member} recovers on ${there}, ${name} on ${here}: only arrays of one instance are taken together`,
          'list only arrays of the same instance');
      }
    }
  }
}
