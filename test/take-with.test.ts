import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Match } from 'aws-cdk-lib/assertions';
import { ConfigError, parseConfig } from '../lib/config';
import { synth } from './helpers';

const INSTANCE = 'i-0123456789abcdef0';
const OTHER = 'i-0fedcba9876543210';

describe('arrays.<name>.takeWith', () => {
  test('names the other arrays its backups take in the same call', () => {
    const config = parseConfig({ arrays: { db1: { takeWith: ['logs'] }, logs: {} } });
    expect(config.arrays.db1.takeWith).toEqual(['logs']);
    expect(config.arrays.logs.takeWith).toBeUndefined();
  });

  test.each([
    [{ db1: { takeWith: [] } }, 'arrays.db1.takeWith: is not a list'],
    [{ db1: { takeWith: 'logs' } }, 'arrays.db1.takeWith: is not a list'],
    [{ db1: { takeWith: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'] } }, 'arrays.db1.takeWith: is not a list'],
    [{ db1: { takeWith: ['bad name'] } }, 'arrays.db1.takeWith[0]: is not an array name'],
    [{ db1: { takeWith: ['db1'] } }, 'names db1 itself'],
    [{ db1: { takeWith: ['logs', 'logs'] } }, 'an array twice'],
    [{ db1: { takeWith: ['logs'] }, logs: { consistency: 'fsfreeze' } }, 'logs is configured with fsfreeze, db1 with crash'],
    [{ db1: { takeWith: ['logs'], consistency: 'fsfreeze' }, logs: {} }, 'logs is configured with crash, db1 with fsfreeze'],
    [
      { db1: { takeWith: ['logs'], hooks: { preSnapshot: 'builtin:postgresql-checkpoint' } }, logs: { hooks: { preSnapshot: '/usr/local/bin/x' } } },
      'db1 and logs both have hooks',
    ],
    [{ db1: { takeWith: ['logs'] }, logs: { copies: [{ region: 'eu-west-1' }] } }, 'logs has copies'],
    [{ db1: { takeWith: ['logs'] }, logs: { fastRestore: { zones: ['us-east-1a'], sets: 1, members: 3 } } }, 'logs has a fastRestore policy'],
    [
      { db1: { takeWith: ['logs'], recovery: { instanceId: INSTANCE } }, logs: { recovery: { instanceId: OTHER } } },
      'only arrays of one instance',
    ],
  ])('refuses %j', (arrays, message) => {
    expect(() => parseConfig({ arrays })).toThrow(ConfigError);
    expect(() => parseConfig({ arrays })).toThrow(message);
  });

  test('an fsfreeze group refuses a maxFreezeSeconds its freezes cannot fit in, naming what it needs', () => {
    const arrays = { db1: { takeWith: ['logs'], consistency: 'fsfreeze' }, logs: { consistency: 'fsfreeze' } };
    // 2 arrays: the second freeze comes 3 s after the first, ends 2 s before it, and needs 10 s
    // for the snapshots.
    expect(() => parseConfig({ defaults: { maxFreezeSeconds: 14 }, arrays })).toThrow(
      'arrays.db1.takeWith: 2 arrays frozen one after the other need a maxFreezeSeconds of at least 15 s');
    expect(parseConfig({ defaults: { maxFreezeSeconds: 15 }, arrays }).arrays.db1.takeWith).toEqual(['logs']);
    // crash-consistent groups freeze nothing: any bound will do.
    expect(parseConfig({ defaults: { maxFreezeSeconds: 1 }, arrays: { db1: { takeWith: ['logs'] }, logs: {} } })
      .arrays.db1.takeWith).toEqual(['logs']);
    const nine = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    const big = Object.fromEntries([['db1', { takeWith: nine, consistency: 'fsfreeze' }], ...nine.map((n) => [n, { consistency: 'fsfreeze' }])]);
    expect(() => parseConfig({ defaults: { maxFreezeSeconds: 35 }, arrays: big })).toThrow('need a maxFreezeSeconds of at least 36 s');
    expect(parseConfig({ arrays: big }).defaults.maxFreezeSeconds).toBe(60);
  });

  test('one array of a group may have hooks, the array a backup is started for or a named one', () => {
    const hooks = { preSnapshot: 'builtin:postgresql-backup' };
    expect(parseConfig({ arrays: { db1: { takeWith: ['logs'], hooks }, logs: {} } }).arrays.db1.hooks?.preSnapshot)
      .toBe('builtin:postgresql-backup');
    expect(parseConfig({ arrays: { db1: { takeWith: ['logs'] }, logs: { hooks } } }).arrays.logs.hooks?.preSnapshot)
      .toBe('builtin:postgresql-backup');
  });

  test('arrays frozen alike are taken together, fsfreeze-consistent', () => {
    const config = parseConfig({
      arrays: { db1: { takeWith: ['logs'], consistency: 'fsfreeze' }, logs: { consistency: 'fsfreeze' }, web: {} },
    });
    expect(config.arrays.db1.consistency).toBe('fsfreeze');
    expect(parseConfig({ arrays: { db1: { takeWith: ['logs'], consistency: 'fsfreeze' } } }).arrays.db1.takeWith).toEqual(['logs']);
  });

  test('a schedule of the array starts the backup with takeWith in its input', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-takewith-'));
    const file = path.join(dir, 'config.yaml');
    fs.writeFileSync(file, [
      'arrays:',
      '  db1:',
      '    schedule: rate(1 hour)',
      '    takeWith: [logs]',
      '',
    ].join('\n'));
    const { template } = synth(file);
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(1 hour)',
      Target: Match.objectLike({
        Input: JSON.stringify({ array: 'db1', consistency: 'crash', trigger: 'schedule', takeWith: ['logs'] }),
      }),
    });
  });

  test('a schedule of an fsfreeze array asks for fsfreeze with takeWith', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-takewith-'));
    const file = path.join(dir, 'config.yaml');
    fs.writeFileSync(file, [
      'arrays:',
      '  db1:',
      '    schedule: rate(1 hour)',
      '    consistency: fsfreeze',
      '    takeWith: [logs]',
      '  logs:',
      '    consistency: fsfreeze',
      '',
    ].join('\n'));
    const { template } = synth(file);
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      Target: Match.objectLike({
        Input: JSON.stringify({ array: 'db1', consistency: 'fsfreeze', trigger: 'schedule', takeWith: ['logs'] }),
      }),
    });
  });
});
