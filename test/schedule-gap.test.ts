import { ConfigError, parseConfig } from '../lib/config';
import { longestBackupGap } from '../lib/schedule-gap';

describe('the longest time between two backups', () => {
  test.each([
    [[{ expression: 'rate(4 hours)', flexibleWindowMinutes: 60 }], 240, 60],
    [[{ expression: 'cron(0 */4 * * ? *)', flexibleWindowMinutes: 15 }], 240, 15],
    [[{ expression: 'cron(30 1,13 * * ? *)' }], 720, 0],
    // weekdays only: Friday 02:00 to Monday 02:00
    [[{ expression: 'cron(0 2 ? * MON-FRI *)', flexibleWindowMinutes: 30 }], 3 * 1440, 30],
    // two expressions together: 01:00 and 03:00, the second in a window
    [[{ expression: 'cron(0 1 * * ? *)' }, { expression: 'cron(0 3 * * ? *)', flexibleWindowMinutes: 20 }], 22 * 60, 0],
  ])('%j: %d minutes apart, the later one up to %d late', (schedules, interval, window) => {
    expect(longestBackupGap(schedules)).toEqual({ interval, window, minutes: interval + window });
  });

  test.each([
    [[{ expression: 'cron(0 2 L * ? *)' }]],
    [[{ expression: 'at(2026-01-01T00:00:00)' }]],
    [[{ expression: 'rate(1 day)' }, { expression: 'cron(0 3 * * ? *)' }]],
  ])('%j: not computed, nothing refused', (schedules) => {
    expect(longestBackupGap(schedules)).toBeUndefined();
  });
});

describe('an RPO inside a flexible window', () => {
  const config = (rpoMinutes: number, flexibleWindowMinutes?: number) => ({
    arrays: {
      db1: {
        schedule: { expression: 'cron(0 */4 * * ? *)', ...(flexibleWindowMinutes ? { flexibleWindowMinutes } : {}) },
        rpoMinutes,
      },
    },
  });

  test('is refused with the array, the interval, the window and the RPO named', () => {
    let thrown: unknown;
    try {
      parseConfig(config(250, 15));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    const error = thrown as ConfigError;
    expect(error.field).toBe('arrays.db1.rpoMinutes');
    expect(error.message).toContain('250 minutes');
    expect(error.message).toContain('two backups of db1');
    expect(error.message).toContain('240 minutes apart');
    expect(error.message).toContain('15 minutes late');
    expect(error.message).toContain('above 255');
  });

  test('an RPO above the interval plus the window is taken', () => {
    expect(parseConfig(config(256, 15)).arrays.db1.rpoMinutes).toBe(256);
  });

  test('without a flexible window the RPO is taken as before', () => {
    expect(parseConfig(config(200)).arrays.db1.rpoMinutes).toBe(200);
  });
});

describe('the longest time between two backups, in a schedule\'s time zone', () => {
  test('an hour that comes twice in the fall runs each of its times once, whichever of the two it picks: 65 minutes between 5-minute backups', () => {
    expect(longestBackupGap([{ expression: 'cron(0/5 * * * ? *)', timezone: 'Europe/Berlin' }])?.minutes).toBe(65);
  });

  test('a zone without daylight-saving changes keeps its gaps', () => {
    expect(longestBackupGap([{ expression: 'cron(0 */4 * * ? *)', timezone: 'Asia/Tokyo' }])?.minutes).toBe(240);
  });

  test('a daily run in the spring-forward hour is skipped once a year: 47 hours', () => {
    expect(longestBackupGap([{ expression: 'cron(30 2 * * ? *)', timezone: 'America/New_York' }])?.minutes).toBe(47 * 60);
  });
});
