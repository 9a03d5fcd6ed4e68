/**
 * arrays.<name>.hooks: the application hooks a backup of the array runs on its instance
 * (preSnapshot before the snapshot instant, postSnapshot once after it), each bounded by
 * timeoutSeconds. A hook is a ready-made one (builtin:postgresql-checkpoint,
 * builtin:postgresql-backup, builtin:mysql-lock) or an absolute path and its arguments; the
 * freeze and thaw documents refuse anything else (their allowedPattern is HOOK_PATTERN's).
 */
export interface HooksConfig {
  readonly preSnapshot?: string;
  readonly postSnapshot?: string;
  readonly timeoutSeconds: number;
}

export const HOOK_PATTERN = new RegExp(
  '^(builtin:(postgresql-checkpoint|postgresql-backup|mysql-lock)'
  + '|(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){1,16}'
  + '( [A-Za-z0-9_=:,@%+-][A-Za-z0-9._=:,@%+-]{0,99}){0,15})$');

export function parseHooks(raw: unknown, field: string, error: (field: string, why: string, fix: string) => Error): HooksConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw error(field, 'is not a mapping', 'give preSnapshot, postSnapshot or timeoutSeconds, indented below hooks');
  const found = raw as Record<string, unknown>;
  for (const key of Object.keys(found)) {
    if (!['preSnapshot', 'postSnapshot', 'timeoutSeconds'].includes(key)) {
      throw error(`${field}.${key}`, 'unknown setting', 'allowed here: preSnapshot, postSnapshot, timeoutSeconds');
    }
  }
  const hook = (key: 'preSnapshot' | 'postSnapshot'): string | undefined => {
    const value = found[key];
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || value.length > 2000 || !HOOK_PATTERN.test(value)) {
      throw error(`${field}.${key}`, `${JSON.stringify(value)} is not a hook`,
        'use builtin:<name> or an absolute path and its arguments (letters, digits, . _ = : , @ % + -), separated by single spaces');
    }
    return value;
  };
  const timeout = found.timeoutSeconds ?? 60;
  if (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < 1 || timeout > 999) {
    throw error(`${field}.timeoutSeconds`, `${JSON.stringify(timeout)} is not an integer from 1 to 999`, 'use an integer from 1 to 999');
  }
  const preSnapshot = hook('preSnapshot');
  const postSnapshot = hook('postSnapshot');
  return { ...(preSnapshot ? { preSnapshot } : {}), ...(postSnapshot ? { postSnapshot } : {}), timeoutSeconds: timeout };
}
