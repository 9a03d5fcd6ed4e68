import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { ConfigError, parseConfig } from '../lib/config';
import { HooksConfig, hooksRun } from '../lib/hooks-config';
import { RaidsnapStack } from '../lib/raidsnap-stack';
import { actionsOf, resourcesOf, statementsOf } from './helpers';

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

// A run's own takeWith naming an array with a fastRestore policy is refused at Prepare
// (lambdas/raidsnap/workflows/backup/together.py): Prepare knows those arrays by name only.
describe('takeWith: what the backup\'s Prepare knows of fastRestore policies', () => {
  function prepareOf(raw: unknown): { environment: Record<string, string>; actions: string[] } {
    const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
    const stack = new RaidsnapStack(app, 'raidsnap', { config: parseConfig(raw), env: { account: '123456789012', region: 'eu-west-1' } });
    const template = Template.fromStack(stack);
    const fn = Object.values(resourcesOf(template, 'AWS::Lambda::Function'))
      .find((f) => f.Properties.Handler === 'raidsnap.handlers.backup_prepare.handler')!;
    const actions = statementsOf(template, 'backup_prepare').flatMap(actionsOf).sort();
    return { environment: fn.Properties.Environment.Variables, actions };
  }

  test('the names of the arrays with a policy, and nothing more: no policy, no grant', () => {
    const policy = { zones: ['eu-west-1a', 'eu-west-1b'], sets: 1, members: 2 };
    const kept = prepareOf({ defaults: { fastRestoreQuota: 10 }, arrays: { db1: {}, logs: { fastRestore: policy }, web: { fastRestore: policy } } });
    const plain = prepareOf({ arrays: { db1: {}, logs: {} } });
    expect(kept.environment.FAST_RESTORE_ARRAYS).toBe(JSON.stringify(['logs', 'web']));
    expect(kept.environment.FAST_RESTORE_BY_ARRAY).toBeUndefined();
    expect(plain.environment.FAST_RESTORE_ARRAYS).toBe('[]');
    expect(kept.actions).toEqual(plain.actions);
  });
});

// After a failure with several arrays frozen, the thaw that runs a post hook waits for the
// others' to end (lambdas/raidsnap/workflows/backup/finish.py _wait_for_thaws).
describe('takeWith: the backup\'s failure function', () => {
  test('may ask how its thaws went, and cancels none', () => {
    const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
    const stack = new RaidsnapStack(app, 'raidsnap', { config: parseConfig(undefined), env: { account: '123456789012', region: 'eu-west-1' } });
    const actions = statementsOf(Template.fromStack(stack), 'backup_failed').flatMap(actionsOf);
    expect(actions).toContain('ssm:GetCommandInvocation');
    expect(actions).not.toContain('ssm:CancelCommand');
  });
});
