/**
 * Review of issue 25: a schedule's flexibleWindowMinutes and the array's RPO alarm.
 *
 * EventBridge Scheduler invokes a schedule with a flexible time window at any time within
 * MaximumWindowInMinutes (1..1440) after the scheduled time ("Configuring flexible time windows
 * in EventBridge Scheduler", EventBridge Scheduler User Guide; API reference FlexibleTimeWindow).
 * Two consecutive backups may then start up to interval + window apart (the first at the
 * scheduled second, the next at the end of its window), so the newest complete set's age
 * reaches interval + window + a backup's duration before the next set completes. An rpoMinutes
 * below interval + window makes the RPO alarm (NewestCompleteSetAgeMinutes > rpoMinutes,
 * lib/constructs/monitoring.ts) fire on a healthy array whose backups all succeed; the config
 * takes it without a word (the README's configuration table does not relate the two either).
 */
import { ConfigError, parseConfig } from '../lib/config';

describe('a flexible window and the RPO alarm', () => {
  test('an RPO shorter than the schedule\'s interval plus its flexible window is refused', () => {
    const raw = {
      arrays: {
        db1: {
          // every 4 h, in a 60-minute window: two backups up to 5 h apart
          schedule: { expression: 'rate(4 hours)', flexibleWindowMinutes: 60 },
          rpoMinutes: 250,
        },
      },
    };
    expect(() => parseConfig(raw)).toThrow(ConfigError);
  });
});
