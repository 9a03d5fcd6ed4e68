import { ConfigError, parseConfig } from '../lib/config';

describe('arrays.<name>.hooks', () => {
  test('a ready-made pre hook and a command post hook, with their time limit', () => {
    const config = parseConfig({
      arrays: { db1: { hooks: { preSnapshot: 'builtin:mysql-lock', postSnapshot: '/usr/local/sbin/app-hook --done', timeoutSeconds: 20 } } },
    });
    expect(config.arrays.db1.hooks).toEqual({
      preSnapshot: 'builtin:mysql-lock', postSnapshot: '/usr/local/sbin/app-hook --done', timeoutSeconds: 20,
    });
    expect(parseConfig({ arrays: { db1: {} } }).arrays.db1.hooks).toBeUndefined();
  });

  test.each([
    [{ preSnapshot: 'psql -c CHECKPOINT' }, 'arrays.db1.hooks.preSnapshot'],
    [{ preSnapshot: '/usr/bin/psql -c "CHECKPOINT"; reboot' }, 'arrays.db1.hooks.preSnapshot'],
    [{ postSnapshot: '/opt/../bin/sh' }, 'arrays.db1.hooks.postSnapshot'],
    [{ postSnapshot: 'builtin:oracle' }, 'arrays.db1.hooks.postSnapshot'],
    [{ timeoutSeconds: 0 }, 'arrays.db1.hooks.timeoutSeconds'],
    [{ pre: '/bin/true' }, 'arrays.db1.hooks.pre'],
  ])('%j is refused at %s', (hooks, field) => {
    expect(() => parseConfig({ arrays: { db1: { hooks } } })).toThrow(ConfigError);
    expect(() => parseConfig({ arrays: { db1: { hooks } } })).toThrow(field);
  });
});
