import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { ConfigError, parseConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';

describe('arrays.<name>.hooks', () => {
  test('a ready-made pre hook and a command post hook, with their time limit', () => {
    const config = parseConfig({
      arrays: { db1: { hooks: { preSnapshot: 'builtin:postgresql-checkpoint', postSnapshot: '/usr/local/sbin/app-hook --done', timeoutSeconds: 20 } } },
    });
    expect(config.arrays.db1.hooks).toEqual({
      preSnapshot: 'builtin:postgresql-checkpoint', postSnapshot: '/usr/local/sbin/app-hook --done', timeoutSeconds: 20,
    });
    expect(parseConfig({ arrays: { db1: {} } }).arrays.db1.hooks).toBeUndefined();
  });

  test('a ready-made pre hook that holds the database is let go only by its own post phase', () => {
    const hooks = { preSnapshot: 'builtin:mysql-lock', postSnapshot: '/usr/local/sbin/app-hook --done' };
    expect(() => parseConfig({ arrays: { db1: { hooks } } })).toThrow(/arrays\.db1\.hooks\.postSnapshot/);
    expect(parseConfig({ arrays: { db1: { hooks: { preSnapshot: 'builtin:mysql-lock' } } } }).arrays.db1.hooks?.preSnapshot).toBe('builtin:mysql-lock');
  });

  test('a post hook without a pre hook, which would never run, is refused', () => {
    const hooks = { postSnapshot: '/usr/local/sbin/app-hook --resume' };
    expect(() => parseConfig({ arrays: { db1: { hooks } } })).toThrow(ConfigError);
    expect(() => parseConfig({ arrays: { db1: { hooks } } })).toThrow(/arrays\.db1\.hooks\.postSnapshot.*without a preSnapshot/);
  });

  test.each([
    [{ preSnapshot: 'psql -c CHECKPOINT' }, 'arrays.db1.hooks.preSnapshot'],
    [{ preSnapshot: '/usr/bin/psql -c "CHECKPOINT"; reboot' }, 'arrays.db1.hooks.preSnapshot'],
    [{ postSnapshot: '/opt/../bin/sh' }, 'arrays.db1.hooks.postSnapshot'],
    [{ postSnapshot: 'builtin:oracle' }, 'arrays.db1.hooks.postSnapshot'],
    [{ timeoutSeconds: 0 }, 'arrays.db1.hooks.timeoutSeconds'],
    [{ pre: '/bin/true' }, 'arrays.db1.hooks.pre'],
    [{ commands: ['/bin/true'] }, 'arrays.db1.hooks.commands'],
    [{ commands: { Flush: '/usr/local/sbin/flush' } }, 'arrays.db1.hooks.commands.Flush'],
    [{ commands: { 'builtin:x': '/usr/local/sbin/flush' } }, 'arrays.db1.hooks.commands.builtin:x'],
    [{ commands: { flush: 'flush --all' } }, 'arrays.db1.hooks.commands.flush'],
    [{ commands: { flush: '/bin/sh -c reboot;' } }, 'arrays.db1.hooks.commands.flush'],
  ])('%j is refused at %s', (hooks, field) => {
    expect(() => parseConfig({ arrays: { db1: { hooks } } })).toThrow(ConfigError);
    expect(() => parseConfig({ arrays: { db1: { hooks } } })).toThrow(field);
  });

  test('named commands, which a run may choose by name', () => {
    const commands = { flush: '/usr/local/sbin/db-hook --flush', release: '/usr/local/sbin/db-hook --release' };
    const config = parseConfig({ arrays: { db1: { hooks: { commands } } } });
    expect(config.arrays.db1.hooks).toEqual({ timeoutSeconds: 60, commands });
  });

  test('the backup functions get each array\'s hooks with their named commands', () => {
    const commands = { flush: '/usr/local/sbin/db-hook --flush' };
    const config = parseConfig({ arrays: { db1: { hooks: { preSnapshot: 'builtin:postgresql-checkpoint', commands } } } });
    const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
    const stack = new RaidsnapStack(app, 'raidsnap', { config, env: { account: '123456789012', region: 'eu-west-1' } });
    Template.fromStack(stack).hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'raidsnap.handlers.backup_prepare.handler',
      Environment: {
        Variables: Match.objectLike({
          HOOKS_BY_ARRAY: JSON.stringify({ db1: { preSnapshot: 'builtin:postgresql-checkpoint', timeoutSeconds: 60, commands } }),
        }),
      },
    });
  });
});
