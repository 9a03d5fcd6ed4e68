/** An array's snapshot lock (arrays.<name>.lock): after each backup, lock every snapshot of
 * the newest `sets` restorable sets with EBS snapshot lock, for `days` days, so that no one, of
 * whatever IAM permissions, can delete them until the lock ends (or, in governance mode, until
 * someone allowed to unlock them does). Amazon EBS User Guide, "Amazon EBS snapshot lock";
 * EC2 API Reference, LockSnapshot. */

import type { Problem } from './config-error';
export type LockMode = 'governance' | 'compliance';

export interface LockConfig {
  /** governance: unlockable by those allowed ec2:UnlockSnapshot; compliance: by no one once
   * the cooling-off period is over, until the lock expires. */
  readonly mode: LockMode;
  /** The lock duration (LockDuration), counted from when the snapshot completes. */
  readonly days: number;
  /** How many of the newest restorable sets are locked. */
  readonly sets: number;
  /** Compliance only: hours during which the lock can still be undone (CoolOffPeriod). */
  readonly coolOffHours?: number;
}


// LockSnapshot's limits (botocore's EC2 model: LockDuration 1-36500 days, CoolOffPeriod 1-72
// hours, compliance mode only: "If you are locking the snapshot in governance mode, omit this
// parameter").
const MAX_DAYS = 36500;
const MAX_COOL_OFF_HOURS = 72;

type Raw = Record<string, unknown>;

function isObject(value: unknown): value is Raw {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function parseLock(raw: unknown, field: string, retention: number, problem: Problem): LockConfig {
  if (!isObject(raw)) throw problem(field, 'must be a mapping with mode, days and sets', 'indent them below lock');
  for (const key of Object.keys(raw)) {
    if (!['mode', 'days', 'sets', 'coolOffHours'].includes(key)) throw problem(`${field}.${key}`, 'unknown setting', 'allowed here: mode, days, sets, coolOffHours');
  }
  if (raw.mode !== 'governance' && raw.mode !== 'compliance') {
    throw problem(`${field}.mode`, `must be governance (unlockable by those allowed ec2:UnlockSnapshot) or compliance (by no one until it expires), not ${JSON.stringify(raw.mode)}`,
      'write one of the two');
  }
  const count = (value: unknown, at: string, max: number, what: string): number => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
      throw problem(at, `must be ${what}, an integer from 1 to ${max}, not ${JSON.stringify(value)}`,
        'write a whole number in that range');
    }
    return value;
  };
  const days = count(raw.days, `${field}.days`, MAX_DAYS, 'the lock duration in days');
  const sets = count(raw.sets, `${field}.sets`, retention,
    `how many of the newest restorable sets are locked, at most the array's retention (${retention}: a locked set older than that would only be held, never deleted)`);
  if (raw.coolOffHours === undefined) return { mode: raw.mode, days, sets };
  if (raw.mode !== 'compliance') {
    throw problem(`${field}.coolOffHours`, 'applies to compliance mode only (a governance lock can be undone at any time)',
      'remove it, or use mode compliance');
  }
  const coolOffHours = count(raw.coolOffHours, `${field}.coolOffHours`, MAX_COOL_OFF_HOURS, 'the hours during which a compliance lock can still be undone');
  return { mode: raw.mode, days, sets, coolOffHours };
}

/** What the backup's retention function gets of each array's lock (LOCK_BY_ARRAY). */
export function lockPolicies(arrays: readonly { name: string; lock?: LockConfig }[]): Record<string, LockConfig> {
  return Object.fromEntries(arrays.filter((a) => a.lock).map((a) => [a.name, a.lock as LockConfig]));
}
