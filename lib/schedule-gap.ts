/** How far apart an array's backups may start: the longest time between one scheduled start and
 * the next, with a schedule's flexible time window added to the later one (EventBridge
 * Scheduler starts a schedule with a flexible window at any time within that many minutes after
 * its scheduled time: "Configuring flexible time windows in EventBridge Scheduler", EventBridge
 * Scheduler User Guide; API reference FlexibleTimeWindow, MaximumWindowInMinutes 1..1440).
 * Expressions as Scheduler reads them ("Schedule types in EventBridge Scheduler"): rate(n unit),
 * cron(minutes hours day-of-month month day-of-week year) with day-of-week 1-7 = SUN-SAT, and
 * at(...) for one run. Gaps are counted in UTC: a time zone's daylight-saving change moves a gap
 * by an hour at most, once in half a year. */

export interface TimedSchedule {
  readonly expression: string;
  readonly flexibleWindowMinutes?: number;
}

const RATE = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/;
const UNIT_MINUTES: Record<string, number> = { minute: 1, minutes: 1, hour: 60, hours: 60, day: 1440, days: 1440 };
const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
const MINUTES_PER_DAY = 1440;
/** Two years of days: a cron expression repeats within a year (its year field aside), so one
 * year's gaps, and the one across its end, are all there are. */
const SPAN_DAYS = 731;

/** The values a cron field takes, or undefined for what this reading does not follow (L, W, #):
 * then no gap is computed and nothing is refused. */
function field(text: string, low: number, high: number, names: readonly string[] = [], nameBase = low): Set<number> | undefined {
  const values = new Set<number>();
  const value = (token: string): number => {
    const named = names.indexOf(token.toUpperCase());
    return named >= 0 ? named + nameBase : Number(token);
  };
  for (const part of text.split(',')) {
    const m = /^(\*|\?|[A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?(?:\/(\d+))?$/.exec(part);
    if (!m) return undefined;
    const wild = m[1] === '*' || m[1] === '?';
    const from = wild ? low : value(m[1]);
    const to = m[2] !== undefined ? value(m[2]) : wild || m[3] !== undefined ? high : from;
    const step = m[3] !== undefined ? Number(m[3]) : 1;
    if (![from, to, step].every(Number.isInteger) || step < 1 || from < low || to > high) return undefined;
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return values;
}

/** Minutes (from an arbitrary UTC midnight) at which a cron expression fires over SPAN_DAYS. */
function cronStarts(expression: string): number[] | undefined {
  const m = /^cron\((.+)\)$/.exec(expression);
  const parts = m ? m[1].trim().split(/\s+/) : [];
  if (parts.length !== 6 || parts[5] !== '*') return undefined;
  const minutes = field(parts[0], 0, 59);
  const hours = field(parts[1], 0, 23);
  const dom = field(parts[2], 1, 31);
  const months = field(parts[3], 1, 12, MONTHS);
  const dow = field(parts[4], 1, 7, DAYS);
  if (!minutes || !hours || !dom || !months || !dow) return undefined;
  const anyDom = parts[2] === '*' || parts[2] === '?';
  const anyDow = parts[4] === '*' || parts[4] === '?';
  const times = [...hours].flatMap((h) => [...minutes].map((mm) => h * 60 + mm)).sort((a, b) => a - b);
  const starts: number[] = [];
  const first = Date.UTC(2025, 0, 1);
  for (let d = 0; d < SPAN_DAYS; d++) {
    const day = new Date(first + d * 86_400_000);
    const byDom = dom.has(day.getUTCDate());
    const byDow = dow.has(day.getUTCDay() + 1);
    const dayMatches = anyDom ? byDow : anyDow ? byDom : byDom && byDow;
    if (!months.has(day.getUTCMonth() + 1) || !dayMatches) continue;
    for (const t of times) starts.push(d * MINUTES_PER_DAY + t);
  }
  return starts;
}

/** The longest time from one backup's start to the next one's latest start. */
export interface BackupGap {
  /** minutes between the two scheduled times */
  readonly interval: number;
  /** the later one's flexible window, in minutes */
  readonly window: number;
  /** interval + window */
  readonly minutes: number;
}

/** The longest gap between an array's backups over all of its schedules; undefined when there is
 * no repeating schedule, or one whose expression this reading does not follow. */
export function longestBackupGap(schedules: readonly TimedSchedule[]): BackupGap | undefined {
  const repeating = schedules.filter((s) => !s.expression.startsWith('at('));
  if (!repeating.length) return undefined;
  // A rate schedule counts from when it was created, which the config does not say: beside
  // another schedule, the gaps between the two are unknown.
  if (repeating.length > 1 && repeating.some((s) => RATE.test(s.expression))) return undefined;
  const starts: Array<[number, number]> = [];
  for (const s of repeating) {
    const window = s.flexibleWindowMinutes ?? 0;
    const rate = RATE.exec(s.expression);
    if (rate) {
      const every = Number(rate[1]) * UNIT_MINUTES[rate[2]];
      for (let t = 0; t < SPAN_DAYS * MINUTES_PER_DAY; t += every) starts.push([t, window]);
      continue;
    }
    const cron = cronStarts(s.expression);
    if (!cron || !cron.length) return undefined;
    for (const t of cron) starts.push([t, window]);
  }
  starts.sort((a, b) => a[0] - b[0]);
  let worst: BackupGap | undefined;
  for (let i = 1; i < starts.length; i++) {
    const interval = starts[i][0] - starts[i - 1][0];
    const window = starts[i][1];
    if (!worst || interval + window > worst.minutes) worst = { interval, window, minutes: interval + window };
  }
  return worst;
}
