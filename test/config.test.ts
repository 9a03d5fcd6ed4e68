import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { BUILT_IN_DEFAULTS, ConfigError, loadConfig, parseConfig } from '../lib/config';
import { runPriceTable } from '../lib/prices-config';
import { EXAMPLE_CONFIG } from './helpers';

describe('config', () => {
  test('no file means built-in defaults and no arrays', () => {
    expect(loadConfig(undefined)).toEqual({ defaults: BUILT_IN_DEFAULTS, arrays: {}, notifications: { emails: [] }, acceptCopiesFrom: [] });
  });

  test('the example config parses with per-array values and inherited defaults', () => {
    const config = loadConfig(EXAMPLE_CONFIG);
    expect(config.arrays.db1).toMatchObject({
      retention: 14, consistency: 'fsfreeze', initialization: 'auto', rpoMinutes: 300,
      schedules: [{ expression: 'cron(0 */4 * * ? *)', timezone: 'Europe/Berlin', retryAttempts: 3 }],
    });
    expect(config.arrays.analytics).toMatchObject({
      retention: 3, consistency: 'crash', initialization: 'auto',
      schedules: [{ expression: 'rate(1 day)', timezone: 'UTC' }],
    });
  });

  test.each([
    [{ arrays: { db1: { retention: 0 } } }, 'arrays.db1.retention'],
    [{ arrays: { db1: { retention: '7' } } }, 'arrays.db1.retention'],
    [{ arrays: { db1: { consistency: 'app' } } }, 'arrays.db1.consistency'],
    [{ arrays: { db1: { initialization: 'fast' } } }, 'arrays.db1.initialization'],
    [{ arrays: { db1: { schedule: 'every day' } } }, 'arrays.db1.schedule.expression'],
    [{ arrays: { db1: { schedule: { expression: 'rate(1 day)', timezone: 'Mars/Olympus Mons' } } } }, 'arrays.db1.schedule.timezone'],
    [{ arrays: { db1: { schedules: ['rate(1 day)', 'cron(1 2 3)'] } } }, 'arrays.db1.schedules[1].expression'],
    [{ arrays: { db1: { schedule: 'rate(1 day)', schedules: [] } } }, 'arrays.db1'],
    [{ arrays: { 'bad name': {} } }, 'arrays.bad name'],
    [{ arrays: { db1: { retension: 3 } } }, 'arrays.db1.retension'],
    [{ defaults: { maxFreezeSeconds: 100000 } }, 'defaults.maxFreezeSeconds'],
    [{ arrays: [] }, 'arrays'],
    [{ array: {} }, '(top level).array'],
    [{ notifications: { emails: ['ops'] } }, 'notifications.emails[0]'],
    [{ notifications: { email: 'ops@example.com' } }, 'notifications.email'],
    [{ tagProtection: { administrators: ['storage-admin'] } }, 'tagProtection.administrators[0]'],
    [{ tagProtection: { administrators: ['arn:aws:iam::123456789012:role/*'] } }, 'tagProtection.administrators[0]'],
    [{ tagProtection: { admins: [] } }, 'tagProtection.admins'],
    [{ tagProtection: true }, 'tagProtection'],
    [{ arrays: { db1: { recovery: {} } } }, 'arrays.db1.recovery.instanceId'],
    [{ arrays: { db1: { recovery: 'i-0123456789abcdef0' } } }, 'arrays.db1.recovery'],
    [{ arrays: { db1: { recovery: { instanceId: 'db1-host' } } } }, 'arrays.db1.recovery.instanceId'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mode: 'swap' } } } }, 'arrays.db1.recovery.mode'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mode: 'attach' } } } }, 'arrays.db1.recovery.replacementInstanceId'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', replacementInstanceId: 'i-0123456789abcdef0' } } } },
      'arrays.db1.recovery.replacementInstanceId'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', autoScalingGroup: 'db1:asg' } } } }, 'arrays.db1.recovery.autoScalingGroup'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', initialization: 'fast' } } } }, 'arrays.db1.recovery.initialization'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', alarm: true } } } }, 'arrays.db1.recovery.alarm'],
    // A mount point no recovery could use: a system tree, or a system directory itself where the
    // recovery restores onto another instance (only a replace in place may put an array back there).
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mountPoint: '/etc/db' } } } }, 'arrays.db1.recovery.mountPoint'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mountPoint: '/srv', replacementInstanceId: 'i-0fedcba9876543210' } } } },
      'arrays.db1.recovery.mountPoint'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mountPoint: 'srv' } } } }, 'arrays.db1.recovery.mountPoint'],
    [{ arrays: { db1: { drill: { targetInstanceId: 'i-0123456789abcdef0' } } } }, 'arrays.db1.drill.schedule'],
    [{ arrays: { db1: { drill: { schedule: 'weekly', targetInstanceId: 'i-0123456789abcdef0' } } } }, 'arrays.db1.drill.schedule.expression'],
    [{ arrays: { db1: { drill: { schedule: 'rate(7 days)' } } } }, 'arrays.db1.drill.targetInstanceId'],
    [{ arrays: { db1: { drill: { schedule: 'rate(7 days)', targetInstanceId: 'i-0123456789abcdef0', mountPoint: '/' } } } },
      'arrays.db1.drill.mountPoint'],
    [{ arrays: { db1: { drill: { schedule: 'rate(7 days)', targetInstanceId: 'i-0123456789abcdef0', mdDevice: '/dev/sdb' } } } },
      'arrays.db1.drill.mdDevice'],
    [{ arrays: { db1: { drill: { schedule: 'rate(7 days)', targetInstanceId: 'i-0123456789abcdef0', initialization: 'rate' } } } },
      'arrays.db1.drill.initialization'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0' }, drill: { schedule: 'rate(7 days)', targetInstanceId: 'i-0123456789abcdef0' } } } },
      'arrays.db1.drill.targetInstanceId'],
    // Where restored arrays may be mounted: never "/", a system tree, or above one (/var holds
    // /var/log and /var/lib/cloud); and a configured mount point must lie under the list.
    [{ defaults: { allowedMountPoints: ['/'] } }, 'defaults.allowedMountPoints[0]'],
    [{ defaults: { allowedMountPoints: ['/data', '/var'] } }, 'defaults.allowedMountPoints[1]'],
    [{ defaults: { allowedMountPoints: ['/etc/db'] } }, 'defaults.allowedMountPoints[0]'],
    [{ defaults: { allowedMountPoints: [] } }, 'defaults.allowedMountPoints'],
    [{ defaults: { allowedMountPoints: '/data' } }, 'defaults.allowedMountPoints'],
    [{ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mountPoint: '/home/db' } } } }, 'arrays.db1.recovery.mountPoint'],
    [{ arrays: { db1: { drill: { schedule: 'rate(7 days)', targetInstanceId: 'i-0123456789abcdef0', mountPoint: '/home/drill' } } } },
      'arrays.db1.drill.mountPoint'],
    // Copies: a Region, at most once per account; another account names the role that starts
    // copies there; a key of that Region (and account), never an alias.
    [{ arrays: { db1: { copies: { region: 'us-west-2' } } } }, 'arrays.db1.copies'],
    [{ arrays: { db1: { copies: [{}] } } }, 'arrays.db1.copies[0].region'],
    [{ arrays: { db1: { copies: [{ region: 'Oregon' }] } } }, 'arrays.db1.copies[0].region'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2' }, { region: 'us-west-2', retention: 3 }] } } }, 'arrays.db1.copies[1]'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', retention: 0 }] } } }, 'arrays.db1.copies[0].retention'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', kmsKeyArn: 'alias/backup' }] } } }, 'arrays.db1.copies[0].kmsKeyArn'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', kmsKeyArn: 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab' }] } } },
      'arrays.db1.copies[0].kmsKeyArn'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', account: 222233334444 }] } } }, 'arrays.db1.copies[0].account'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', account: '222233334444' }] } } }, 'arrays.db1.copies[0].roleArn'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', roleArn: 'arn:aws:iam::222233334444:role/raidsnap-copy-requests' }] } } },
      'arrays.db1.copies[0].roleArn'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', account: '222233334444', roleArn: 'arn:aws:iam::999988887777:role/raidsnap-copy-requests' }] } } },
      'arrays.db1.copies[0].roleArn'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', account: '222233334444', roleArn: 'arn:aws:iam::222233334444:role/raidsnap-copy-requests',
      kmsKeyArn: 'arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab' }] } } }, 'arrays.db1.copies[0].kmsKeyArn'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', stackName: 'raidsnap backup' }] } } }, 'arrays.db1.copies[0].stackName'],
    [{ arrays: { db1: { copies: [{ region: 'us-west-2', vault: 'x' }] } } }, 'arrays.db1.copies[0].vault'],
    [{ acceptCopiesFrom: '123456789012' }, 'acceptCopiesFrom'],
    [{ acceptCopiesFrom: [123456789012] }, 'acceptCopiesFrom[0]'],
    [{ acceptCopiesFrom: ['123456789012', '123456789012'] }, 'acceptCopiesFrom[1]'],
    [{ arrays: { db1: { schedule: { expression: 'rate(1 day)', flexibleWindowMinutes: 0 } } } }, 'arrays.db1.schedule.flexibleWindowMinutes'],
    [{ arrays: { db1: { schedule: { expression: 'rate(1 day)', flexibleWindowMinutes: 1441 } } } }, 'arrays.db1.schedule.flexibleWindowMinutes'],
    [{ prices: { fsrDsuHours: 0.9 } }, 'prices.fsrDsuHours'],
    [{ prices: { fsrDsuHour: -1 } }, 'prices.fsrDsuHour'],
    [{ prices: { fsrDsuHour: '0.9' } }, 'prices.fsrDsuHour'],
    [{ prices: [0.9] }, 'prices'],
  ])('%j is refused naming %s', (raw, field) => {
    expect(() => parseConfig(raw)).toThrow(ConfigError);
    try {
      parseConfig(raw);
    } catch (err) {
      expect((err as ConfigError).field).toBe(field);
      expect((err as Error).message).toContain(field);
    }
  });

  test('prices: overrides the list prices a run\'s cost is computed with (docs/costs/prices.json names them)', () => {
    expect(parseConfig({ prices: { fsrDsuHour: 0.9, transitions1000: 0 } }).prices).toEqual({ fsrDsuHour: 0.9, transitions1000: 0 });
    expect(parseConfig({}).prices).toBeUndefined();
  });

  test('the table a run is priced with carries the config\'s overrides, said to be the config\'s, and fits a function\'s environment', () => {
    const table = JSON.parse(runPriceTable({ fsrDsuHour: 0.9 }));
    expect(table.prices.fsrDsuHour).toEqual({ usd: 0.9, source: 'the config' });
    expect(table.prices.transitions1000).toEqual({ usd: 0.025, source: 'AWS Step Functions pricing' });
    expect(table.prices.gp3IopsMonth.included).toBe(3000);
    expect(table).toMatchObject({ region: 'us-east-1', hoursPerMonth: { value: 730 } });
    expect(runPriceTable(undefined).length).toBeLessThan(1500);
  });

  test('recovery and drill settings take their defaults: replace in place, the array\'s initialization, a read-only copy at /mnt/raidsnap-drill on /dev/md100', () => {
    const config = loadConfig(EXAMPLE_CONFIG);
    expect(config.arrays.db1.recovery).toEqual({
      instanceId: 'i-0123456789abcdef0', mode: 'replace', replacementInstanceId: 'i-0fedcba9876543210', initialization: 'auto',
    });
    expect(config.arrays.analytics.recovery).toEqual({
      instanceId: 'i-0bbbbccccddddeeee', mode: 'replace', autoScalingGroup: 'analytics', initialization: 'auto',
    });
    expect(config.arrays.db1.drill).toEqual({
      schedule: { expression: 'cron(0 3 ? * SUN *)', timezone: 'Europe/Berlin', retryAttempts: 3, maxEventAgeMinutes: 60 },
      targetInstanceId: 'i-0aaaabbbbccccdddd', mountPoint: '/mnt/raidsnap-drill', mdDevice: '/dev/md100', initialization: 'none',
    });
    expect(config.arrays.analytics.drill).toBeUndefined();
  });

  test('allowedMountPoints defaults to /data, /mnt, /srv, /opt/<array>, and a list of its own admits its places', () => {
    expect(parseConfig({}).defaults.allowedMountPoints).toEqual(['/data', '/mnt', '/srv', '/opt/<array>']);
    const own = parseConfig({
      defaults: { allowedMountPoints: ['/home', '/opt/<array>'] },
      arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mountPoint: '/home/db' } } },
    });
    expect(own.defaults.allowedMountPoints).toEqual(['/home', '/opt/<array>']);
    expect(own.arrays.db1.recovery?.mountPoint).toBe('/home/db');
    expect(() => parseConfig({
      defaults: { allowedMountPoints: ['/opt/<array>'] },
      arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mountPoint: '/opt/db2' } } },
    })).toThrow('arrays.db1.recovery.mountPoint');
  });

  test('a recovery may name its mount point: a system directory itself only for a replace in place', () => {
    const inPlace = parseConfig({ arrays: { db1: { recovery: { instanceId: 'i-0123456789abcdef0', mountPoint: '/srv' } } } });
    expect(inPlace.arrays.db1.recovery?.mountPoint).toBe('/srv');
    const moved = parseConfig({ arrays: { db1: { recovery: {
      instanceId: 'i-0123456789abcdef0', mode: 'attach', replacementInstanceId: 'i-0fedcba9876543210', mountPoint: '/srv/db',
    } } } });
    expect(moved.arrays.db1.recovery?.mountPoint).toBe('/srv/db');
  });

  test('copies take the array\'s retention unless they name their own, and name the other account\'s role and keys', () => {
    const config = parseConfig({ arrays: { db1: { retention: 14, copies: [
      { region: 'us-west-2' },
      { region: 'eu-west-1', retention: 30, account: '222233334444', roleArn: 'arn:aws:iam::222233334444:role/raidsnap-copy-requests',
        kmsKeyArn: 'arn:aws:kms:eu-west-1:222233334444:key/1234abcd-12ab-34cd-56ef-1234567890ab', stackName: 'raidsnap-backup' },
    ] } } });
    expect(config.arrays.db1.copies).toEqual([
      { region: 'us-west-2', retention: 14 },
      { region: 'eu-west-1', retention: 30, account: '222233334444', roleArn: 'arn:aws:iam::222233334444:role/raidsnap-copy-requests',
        kmsKeyArn: 'arn:aws:kms:eu-west-1:222233334444:key/1234abcd-12ab-34cd-56ef-1234567890ab', stackName: 'raidsnap-backup' },
    ]);
    // The same Region once for this account and once for another is two places.
    expect(parseConfig({ arrays: { db1: { copies: [{ region: 'us-west-2' }, {
      region: 'us-west-2', account: '222233334444', roleArn: 'arn:aws:iam::222233334444:role/r',
    }] } } }).arrays.db1.copies).toHaveLength(2);
    expect(parseConfig({ arrays: { db1: {} } }).arrays.db1.copies).toEqual([]);
  });

  test('a missing file is a clear error', () => {
    const missing = path.join(os.tmpdir(), 'raidsnap-no-such-config.yaml');
    expect(() => loadConfig(missing)).toThrow(/cannot read/);
  });

  test('YAML that is not a mapping is refused', () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-')), 'c.yaml');
    fs.writeFileSync(file, '- just\n- a list\n');
    expect(() => loadConfig(file)).toThrow(/\(top level\): is not a mapping; /);
  });
});
