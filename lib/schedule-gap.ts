/** How far apart an array's backups may start: the longest time between one scheduled start and
 * the next, with a schedule's flexible time window added to the later one (EventBridge
 * Scheduler starts a schedule with a flexible window at any time within that many minutes after
 * its scheduled time: "Configuring flexible time windows in EventBridge Scheduler", EventBridge
 * Scheduler User Guide; API reference FlexibleTimeWindow, MaximumWindowInMinutes 1..1440).
 * Expressions as Scheduler reads them ("Schedule types in EventBridge Scheduler"): rate(n unit),
 * cron(minutes hours day-of-month month day-of-week year) with day-of-week 1-7 = SUN-SAT, and
 * at(...) for one run. A cron expression is read in its schedule's time zone
 * (ScheduleExpressionTimezone), with its daylight-saving changes as Scheduler applies them
 * ("Time zones on EventBridge Scheduler", same guide): a run whose local time does not exist
 * on the spring-forward day is skipped, and a run whose local time comes twice on the
 * fall-back day runs once (the guide does not say at which of the two: both readings are
 * counted, and the longer gap taken). A rate schedule runs every so many
 * minutes of elapsed time, whatever its zone. */

export interface TimedSchedule {
  readonly expression: string;
  readonly flexibleWindowMinutes?: number;
  /** IANA time zone the expression is read in; UTC when absent */
  readonly timezone?: string;
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

const FIRST_DAY = Date.UTC(2025, 0, 1);
const MINUTE_MS = 60_000;

/** The zone's offset from UTC (minutes) at a UTC instant, from the runtime's time zone data. */
function offsetFinder(zone: string): (instantMs: number) => number {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric',
  });
  const cache = new Map<number, number>();
  return (instantMs: number): number => {
    const key = Math.floor(instantMs / MINUTE_MS);
    const known = cache.get(key);
    if (known !== undefined) return known;
    const parts = Object.fromEntries(format.formatToParts(new Date(key * MINUTE_MS)).map((p) => [p.type, p.value]));
    const wall = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute));
    const offset = Math.round((wall - key * MINUTE_MS) / MINUTE_MS);
    cache.set(key, offset);
    return offset;
  };
}

/** The UTC instants (minutes from FIRST_DAY) a local wall time maps to in a zone: none on the
 * spring-forward day's skipped hour, two on the fall-back day's repeated one. */
function instantsOf(wallMs: number, offsetAt: (instantMs: number) => number): number[] {
  const offsets = new Set([-1, 0, 1].map((d) => offsetAt(wallMs + d * 86_400_000)));
  const found = [...offsets]
    .map((o) => wallMs - o * MINUTE_MS)
    .filter((t) => offsetAt(t) === Math.round((wallMs - t) / MINUTE_MS));
  return [...new Set(found)].map((t) => (t - FIRST_DAY) / MINUTE_MS).sort((a, b) => a - b);
}

/** When a cron expression fires over SPAN_DAYS of its zone's local days: each run as its earliest
 * and latest possible UTC start, in minutes from FIRST_DAY (the same but on a fall-back day). */
function cronStarts(expression: string, zone = 'UTC'): Array<[number, number]> | undefined {
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
  const utc = zone === 'UTC' || zone === 'Etc/UTC';
  const offsetAt = utc ? undefined : offsetFinder(zone);
  const starts: Array<[number, number]> = [];
  for (let d = 0; d < SPAN_DAYS; d++) {
    // The local calendar day d days after FIRST_DAY (its fields, read as if in UTC).
    const day = new Date(FIRST_DAY + d * 86_400_000);
    const byDom = dom.has(day.getUTCDate());
    const byDow = dow.has(day.getUTCDay() + 1);
    const dayMatches = anyDom ? byDow : anyDow ? byDom : byDom && byDow;
    if (!months.has(day.getUTCMonth() + 1) || !dayMatches) continue;
    // A zone changes its offset at most once in a few days: the same offset a day before and
    // two days after holds all day; only a day with a change is read time by time.
    const midnight = FIRST_DAY + d * 86_400_000;
    const steady = offsetAt && offsetAt(midnight - 86_400_000) === offsetAt(midnight + 2 * 86_400_000)
      ? offsetAt(midnight) : undefined;
    for (const t of times) {
      const wall = d * MINUTES_PER_DAY + t;
      if (!offsetAt || steady !== undefined) {
        const at = wall - (steady ?? 0);
        starts.push([at, at]);
        continue;
      }
      const at = instantsOf(FIRST_DAY + wall * MINUTE_MS, offsetAt);
      if (at.length) starts.push([at[0], at[at.length - 1]]);
    }
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
  // Each run: its earliest and latest UTC start (minutes) and its flexible window.
  const starts: Array<[number, number, number]> = [];
  for (const s of repeating) {
    const window = s.flexibleWindowMinutes ?? 0;
    const rate = RATE.exec(s.expression);
    if (rate) {
      const every = Number(rate[1]) * UNIT_MINUTES[rate[2]];
      for (let t = 0; t < SPAN_DAYS * MINUTES_PER_DAY; t += every) starts.push([t, t, window]);
      continue;
    }
    const cron = cronStarts(s.expression, s.timezone ?? 'UTC');
    if (!cron || !cron.length) return undefined;
    for (const [early, late] of cron) starts.push([early, late, window]);
  }
  let worst: BackupGap | undefined;
  // A run on a fall-back day at its earlier instant, then at its later one.
  for (const pick of [0, 1]) {
    const at = starts.map((r) => [r[pick], r[2]]).sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < at.length; i++) {
      const interval = at[i][0] - at[i - 1][0];
      const window = at[i][1];
      if (!worst || interval + window > worst.minutes) worst = { interval, window, minutes: interval + window };
    }
  }
  return worst;
}
