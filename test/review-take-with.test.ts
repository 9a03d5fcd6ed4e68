import { ConfigError, parseConfig } from '../lib/config';
import { HooksConfig, hooksRun } from '../lib/hooks-config';

// Review of takeWith: an array counts as hooked for arrays.<name>.takeWith only where its
// backups run hooks, as the backup workflow decides (lambdas/raidsnap/hooks.py: hooks_for gives
// none for a hooks block without preSnapshot or postSnapshot;
// test/python/unit/test_review_take_with_hooks.py checks the same cases there).
const COMMANDS = { commands: { hold: '/usr/local/sbin/db-hook --hold', release: '/usr/local/sbin/db-hook --release' } };
const PRE = { preSnapshot: '/usr/local/sbin/db-hook --hold' };

describe('takeWith: which arrays of a group have hooks', () => {
  test.each([
    [{ db1: { takeWith: ['logs'], hooks: COMMANDS }, logs: { hooks: PRE } }],
    [{ db1: { takeWith: ['logs'], hooks: PRE }, logs: { hooks: COMMANDS } }],
    [{ db1: { takeWith: ['logs'], hooks: COMMANDS }, logs: { hooks: { ...COMMANDS, timeoutSeconds: 30 } } }],
  ])('a hooks block of named commands alone runs nothing, so it is not a second hooked array: %j', (arrays) => {
    expect(parseConfig({ arrays }).arrays.db1.takeWith).toEqual(['logs']);
  });

  test('two arrays whose backups run hooks are still refused', () => {
    const arrays = { db1: { takeWith: ['logs'], hooks: { ...PRE, ...COMMANDS } }, logs: { hooks: PRE } };
    expect(() => parseConfig({ arrays })).toThrow(ConfigError);
    expect(() => parseConfig({ arrays })).toThrow('db1 and logs both have hooks');
  });

  test.each<[Partial<HooksConfig> | undefined, boolean]>([
    [undefined, false],
    [{ timeoutSeconds: 30 }, false],
    [{ ...COMMANDS, timeoutSeconds: 30 }, false],
    [PRE, true],
    [{ ...PRE, postSnapshot: '/usr/local/sbin/db-hook --release' }, true],
    [{ preSnapshot: 'builtin:postgresql-checkpoint', ...COMMANDS }, true],
  ])('hooks %j run by default: %s', (hooks, runs) => {
    expect(hooksRun(hooks)).toBe(runs);
  });
});
