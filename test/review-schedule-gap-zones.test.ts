/**
 * Review of fix25a (lib/schedule-gap.ts): an RPO not above the longest gap between two backups
 * (interval + flexible window) is refused at synth, but the gap is counted with every schedule
 * read in UTC, whatever its `timezone` ("Gaps are counted in UTC: a time zone's daylight-saving
 * change moves a gap by an hour at most").
 *
 * EventBridge Scheduler evaluates a cron expression in the schedule's time zone
 * (ScheduleExpressionTimezone; "Schedule types in EventBridge Scheduler", EventBridge Scheduler
 * User Guide, "Time zones on EventBridge Scheduler" and "Daylight saving time on EventBridge
 * Scheduler"): "When the time shifts forward in Spring, your schedule invocation gets skipped if
 * the cron expression falls on a non-existent date and time. When the time shifts back in the
 * Fall, your schedule runs only once" (also AWS re:Post knowledge center,
 * eventbridge-scheduler-adjust-dst). So:
 * - two schedules of one array in different time zones start backups at other UTC times than
 *   their expressions read in UTC, and their gaps are not the ones computed;
 * - a daily 02:30 schedule in America/New_York skips the spring-forward day: 47 hours between
 *   two backups, not 24 (nor 25);
 * - a daily 01:30 one runs once on the fall-back day: 25 hours.
 * Each RPO below is taken at synth, and the RPO alarm (NewestCompleteSetAgeMinutes >
 * rpoMinutes) then fires on a healthy array whose every scheduled backup succeeds.
 */
import { ConfigError, parseConfig } from '../lib/config';

const refused = (schedules: unknown[], rpoMinutes: number) => () =>
  parseConfig({ arrays: { db1: { schedules, rpoMinutes } } });

describe('the longest gap between backups, in the schedules\' own time zones', () => {
  test('two schedules in different time zones: 01:00 UTC and 13:00 Tokyo (04:00 UTC) leave 21 hours between backups', () => {
    // read in UTC: 01:00 and 13:00, 12 hours apart (+30 min window): 800 minutes looks safe
    const schedules = [
      { expression: 'cron(0 1 * * ? *)', timezone: 'UTC' },
      { expression: 'cron(0 13 * * ? *)', timezone: 'Asia/Tokyo', flexibleWindowMinutes: 30 },
    ];
    expect(refused(schedules, 800)).toThrow(ConfigError);
  });

  test('a daily 02:30 New York schedule skips the spring-forward day: 47 hours between two backups', () => {
    const schedules = [{ expression: 'cron(30 2 * * ? *)', timezone: 'America/New_York', flexibleWindowMinutes: 60 }];
    // computed: 1,440 + 60 = 1,500; a 26-hour RPO is taken
    expect(refused(schedules, 1560)).toThrow(ConfigError);
  });

  test('a daily 01:30 New York schedule runs once on the fall-back day: 25 hours between two backups', () => {
    const schedules = [{ expression: 'cron(30 1 * * ? *)', timezone: 'America/New_York', flexibleWindowMinutes: 60 }];
    // computed: 1,500; the real longest gap is 1,500 + 60 = 1,560 minutes
    expect(refused(schedules, 1530)).toThrow(ConfigError);
  });
});
