/**
 * arrays.<name>.hooks: the application hooks a backup of the array runs on its instance
 * (preSnapshot before the snapshot instant, postSnapshot once after it), each bounded by
 * timeoutSeconds. A hook is a ready-made one (builtin:postgresql-checkpoint,
 * builtin:postgresql-backup, builtin:mysql-lock) or an absolute path and its arguments; the
 * freeze and thaw documents refuse anything else (their allowedPattern is HOOK_PATTERN's).
 * commands names the array's own commands: a backup's input may choose hooks by those names or
 * the ready-made ones, never give a command itself (lambdas/raidsnap/hooks.py resolves them), so
 * that starting a backup does not mean choosing what runs as root on the instance.
 */
export interface HooksConfig {
  readonly preSnapshot?: string;
  readonly postSnapshot?: string;
  readonly timeoutSeconds: number;
  readonly commands?: Readonly<Record<string, string>>;
}

/** A command's name: what a run's input gives (lambdas/raidsnap/hooks.py checks the same). */
export const COMMAND_NAME = /^[a-z][a-z0-9-]{0,31}$/;
const MAX_COMMANDS = 8;
/**
 * The backup functions carry every array's hooks in HOOKS_BY_ARRAY (lib/constructs/backup-workflow.ts),
 * and Lambda allows 4 KB for all of a function's environment variables together ("Total size of
 * environment variables set | 4 KB", Lambda quotas,
 * https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html): a larger set is refused
 * at deploy. The hooks may take half of it; the other variables (document names, retention and copy
 * targets per array) keep the rest.
 */
export const HOOKS_ENVIRONMENT_BYTES = 2048;
/** Ready-made hooks that hold the application until their own post phase (lambdas/raidsnap/hooks.py). */
const HOLDING = ['builtin:postgresql-backup', 'builtin:mysql-lock'];

export const HOOK_PATTERN = new RegExp(
  '^(builtin:(postgresql-checkpoint|postgresql-backup|mysql-lock)'
  + '|(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}){1,16}'
  + '( [A-Za-z0-9_=:,@%+-][A-Za-z0-9._=:,@%+-]{0,99}){0,15})$');

export function parseHooks(raw: unknown, field: string, error: (field: string, why: string, fix: string) => Error): HooksConfig {
  if (!isMapping(raw)) throw error(field, 'is not a mapping', 'give preSnapshot, postSnapshot, timeoutSeconds or commands, indented below hooks');
  const found = raw as Record<string, unknown>;
  for (const key of Object.keys(found)) {
    if (!['preSnapshot', 'postSnapshot', 'timeoutSeconds', 'commands'].includes(key)) {
      throw error(`${field}.${key}`, 'unknown setting', 'allowed here: preSnapshot, postSnapshot, timeoutSeconds, commands');
    }
  }
  const hook = (key: 'preSnapshot' | 'postSnapshot'): string | undefined => {
    const value = found[key];
    if (value === undefined) return undefined;
    return command(value, `${field}.${key}`, error);
  };
  const timeout = found.timeoutSeconds ?? 60;
  if (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < 1 || timeout > 999) {
    throw error(`${field}.timeoutSeconds`, `${JSON.stringify(timeout)} is not an integer from 1 to 999`, 'use an integer from 1 to 999');
  }
  const preSnapshot = hook('preSnapshot');
  const postSnapshot = hook('postSnapshot');
  if (preSnapshot && HOLDING.includes(preSnapshot) && postSnapshot && postSnapshot !== preSnapshot) {
    throw error(`${field}.postSnapshot`, `must be ${preSnapshot} when preSnapshot is ${preSnapshot}: only its own post phase lets go of what it holds`,
      `set postSnapshot to ${preSnapshot} or leave it out (it is then run as the post hook)`);
  }
  if (postSnapshot && !preSnapshot) {
    throw error(`${field}.postSnapshot`, 'is given without a preSnapshot: a post hook runs only after a pre hook started, so it would never run',
      'give the preSnapshot it follows, or name the command under commands for runs that choose both');
  }
  const commands = found.commands === undefined ? undefined : parseCommands(found.commands, `${field}.commands`, error);
  return {
    ...(preSnapshot ? { preSnapshot } : {}),
    ...(postSnapshot ? { postSnapshot } : {}),
    timeoutSeconds: timeout,
    ...(commands ? { commands } : {}),
  };
}

/** Whether a backup of the array runs these hooks by default: a pre or a post hook is given. A
 * hooks block with only commands (and timeoutSeconds) runs nothing unless a run names them, as
 * lambdas/raidsnap/hooks.py reads it (ConfiguredHooks.default, Hooks.active). */
export function hooksRun(hooks: Pick<HooksConfig, 'preSnapshot' | 'postSnapshot'> | undefined): boolean {
  return Boolean(hooks?.preSnapshot || hooks?.postSnapshot);
}

function isMapping(raw: unknown): raw is Record<string, unknown> {
  return typeof raw === 'object' && raw !== null && !Array.isArray(raw);
}

function command(value: unknown, field: string, error: (field: string, why: string, fix: string) => Error): string {
  if (typeof value !== 'string' || value.length > 2000 || !HOOK_PATTERN.test(value)) {
    throw error(field, `${JSON.stringify(value)} is not a hook`,
      'use builtin:<name> or an absolute path and its arguments (letters, digits, . _ = : , @ % + -), separated by single spaces');
  }
  return value;
}

function parseCommands(raw: unknown, field: string, error: (field: string, why: string, fix: string) => Error): Record<string, string> {
  if (!isMapping(raw)) throw error(field, 'is not a mapping', 'give each command as <name>: <absolute path and arguments>, indented below commands');
  const names = Object.keys(raw);
  if (names.length > MAX_COMMANDS) throw error(field, `names ${names.length} commands`, `name at most ${MAX_COMMANDS}`);
  const commands: Record<string, string> = {};
  for (const name of names) {
    if (!COMMAND_NAME.test(name)) {
      throw error(`${field}.${name}`, 'is not a command name', 'use a lower-case letter, then up to 31 lower-case letters, digits or -');
    }
    commands[name] = command(raw[name], `${field}.${name}`, error);
  }
  return commands;
}

/** Refuse, by name, hooks that would not fit in the backup functions' environment. */
export function checkHooksFit(arrays: Readonly<Record<string, { readonly hooks?: HooksConfig }>>,
  error: (field: string, why: string, fix: string) => Error): void {
  const carried: Record<string, HooksConfig> = {};
  for (const [name, array] of Object.entries(arrays)) {
    if (!array.hooks) continue;
    carried[name] = array.hooks;
    const bytes = Buffer.byteLength(JSON.stringify(carried));
    if (bytes > HOOKS_ENVIRONMENT_BYTES) {
      throw error(`arrays.${name}.hooks`, `brings the hooks of all arrays to ${bytes} bytes, more than the ${HOOKS_ENVIRONMENT_BYTES} they may take of a Lambda function's 4 KB environment`,
        'name fewer or shorter commands (a command may be a script on the instance that takes few arguments)');
    }
  }
}
