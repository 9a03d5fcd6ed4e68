import { ConfigError, loadConfig, parseConfig } from '../lib/config';
import { EXAMPLE_CONFIG, actionsOf, resourcesOf, statementsOf, synth } from './helpers';

describe('arrays.<name>.lock', () => {
  test.each([
    [{ lock: 'governance' }, 'arrays.db1.lock', 'must be a mapping with mode, days and sets'],
    [{ lock: { days: 7, sets: 1 } }, 'arrays.db1.lock.mode', 'must be governance'],
    [{ lock: { mode: 'legal-hold', days: 7, sets: 1 } }, 'arrays.db1.lock.mode', 'not "legal-hold"'],
    [{ lock: { mode: 'governance', sets: 1 } }, 'arrays.db1.lock.days', 'an integer from 1 to 36500'],
    [{ lock: { mode: 'governance', days: 36501, sets: 1 } }, 'arrays.db1.lock.days', 'an integer from 1 to 36500'],
    [{ lock: { mode: 'governance', days: 1.5, sets: 1 } }, 'arrays.db1.lock.days', 'not 1.5'],
    [{ lock: { mode: 'governance', days: 7 } }, 'arrays.db1.lock.sets', 'at most the array\'s retention (7'],
    [{ retention: 3, lock: { mode: 'governance', days: 7, sets: 4 } }, 'arrays.db1.lock.sets', 'an integer from 1 to 3'],
    [{ lock: { mode: 'governance', days: 7, sets: 1, coolOffHours: 24 } }, 'arrays.db1.lock.coolOffHours', 'compliance mode only'],
    [{ lock: { mode: 'compliance', days: 7, sets: 1, coolOffHours: 73 } }, 'arrays.db1.lock.coolOffHours', 'an integer from 1 to 72'],
    [{ lock: { mode: 'compliance', days: 7, sets: 1, until: '2030-01-01' } }, 'arrays.db1.lock.until', 'unknown setting'],
  ])('%j is refused naming %s, in one line', (db1, field, problem) => {
    let error: unknown;
    try {
      parseConfig({ arrays: { db1 } });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe(field);
    expect((error as Error).message).toContain(problem);
    expect((error as Error).message).not.toContain('\n');
  });

  test('a lock takes mode, days and sets, and a cooling-off period in compliance mode only', () => {
    const config = parseConfig({ arrays: {
      db1: { lock: { mode: 'compliance', days: 30, sets: 2, coolOffHours: 24 } },
      db2: { lock: { mode: 'governance', days: 7, sets: 7 } },
    } });
    expect(config.arrays.db1.lock).toEqual({ mode: 'compliance', days: 30, sets: 2, coolOffHours: 24 });
    expect(config.arrays.db2.lock).toEqual({ mode: 'governance', days: 7, sets: 7 });
    expect(loadConfig(EXAMPLE_CONFIG).arrays.db1.lock).toEqual({ mode: 'governance', days: 7, sets: 2 });
  });

  test('retention may read which snapshots are locked, and only it may lock: set snapshots, for the longest configured lock at most', () => {
    const { template } = synth(EXAMPLE_CONFIG);
    const statements = statementsOf(template, 'backup_retention');
    expect(statements.some((s) => actionsOf(s).includes('ec2:DescribeLockedSnapshots') && s.Resource === '*')).toBe(true);
    const locks = statements.filter((s) => actionsOf(s).includes('ec2:LockSnapshot'));
    expect(locks).toHaveLength(1);
    expect(actionsOf(locks[0])).toEqual(['ec2:LockSnapshot']);
    expect(locks[0].Condition).toEqual({
      StringLike: { 'aws:ResourceTag/raidsnap:array': '*', 'aws:ResourceTag/raidsnap:set-id': '*' },
      NumericLessThanEquals: { 'ec2:SnapshotLockDuration': '7' },
    });
    const functions = resourcesOf(template, 'AWS::Lambda::Function');
    const env = Object.values(functions).find((f) => f.Properties.Handler === 'raidsnap.handlers.backup_retention.handler')
      ?.Properties.Environment.Variables;
    expect(JSON.parse(env.LOCK_BY_ARRAY)).toEqual({ db1: { mode: 'governance', days: 7, sets: 2 } });
    const allPolicies = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as Array<Record<string, any>>);
    expect(allPolicies.filter((s) => actionsOf(s).some((a) => ['ec2:LockSnapshot', 'ec2:UnlockSnapshot'].includes(a)))).toHaveLength(1);
  });

  test('without a lock policy no one may lock; retention still reads locks', () => {
    const { template } = synth();
    const statements = statementsOf(template, 'backup_retention');
    expect(statements.some((s) => actionsOf(s).includes('ec2:LockSnapshot'))).toBe(false);
    expect(statements.some((s) => actionsOf(s).includes('ec2:DescribeLockedSnapshots'))).toBe(true);
  });
});
