import { Annotations, Stack, Token } from 'aws-cdk-lib';
import type { RaidsnapConfig } from './config';
import type { Problem } from './config-error';

/** An array's fastRestore policy (arrays.<name>.fastRestore): keep Fast Snapshot Restore enabled
 * on its newest complete snapshot sets in chosen Availability Zones, so that a restore there
 * finds FSR ready at its first look. What it costs, and whether it fits the Region's quota, is
 * known at synth from the config alone. */
export interface FastRestoreConfig {
  /** The Availability Zones where the newest sets keep FSR (where restores will run). */
  readonly zones: readonly string[];
  /** How many of the newest complete sets keep FSR. */
  readonly sets: number;
  /** The array's member count (snapshots per set): the quota check and the cost use it. */
  readonly members: number;
}

/** What the backup's KeepFsr function gets of each policy (FAST_RESTORE_BY_ARRAY). */
export interface KeptPolicy {
  readonly zones: readonly string[];
  readonly sets: number;
}


// "You can enable up to 5 snapshots for fast snapshot restore per Region" (EBS User Guide,
// "Amazon EBS fast snapshot restore", Considerations); adjustable: Service Quotas, EBS quota
// "Fast snapshot restore", L-631ECBD3. It counts snapshots, whatever the number of AZs each is
// enabled in (raidsnap.plan.fsr.quota_problem reads it the same way at run time).
export const DEFAULT_FSR_QUOTA = 5;
// FSR is billed per DSU-hour for each snapshot in each AZ it is enabled in, per minute with a
// one-hour minimum; $0.75 per DSU-hour is the list price in US East (N. Virginia) (Amazon EBS
// pricing; "How AWS Pricing Works", Amazon EBS). Other Regions' prices differ.
export const FSR_PRICE_PER_HOUR = 0.75;
export const FSR_PRICE_REGION = 'us-east-1';
// 8,760 hours a year over 12 months, as AWS prices a month.
export const HOURS_PER_MONTH = 730;
// An Availability Zone's name: its Region's name and one letter (the pattern Data Lifecycle
// Manager's FastRestoreRule takes). Local Zones and Wavelength Zones do not match: FSR is not
// supported there (EBS User Guide, fast snapshot restore, Considerations).
const ZONE = /^([a-z]+-){2,3}\d[a-z]$/;
// DLM's FastRestoreRule takes at most 10 Availability Zones.
const MAX_ZONES = 10;

type Raw = Record<string, unknown>;

function isObject(value: unknown): value is Raw {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The Region an Availability Zone belongs to (its name without the letter). */
export function regionOf(zone: string): string {
  return zone.slice(0, -1);
}

export function parseFastRestore(raw: unknown, field: string, retention: number, problem: Problem): FastRestoreConfig {
  if (!isObject(raw)) throw problem(field, 'is not a mapping', 'give zones, sets and members, indented below fastRestore');
  for (const key of Object.keys(raw)) {
    if (!['zones', 'sets', 'members'].includes(key)) throw problem(`${field}.${key}`, 'unknown setting', 'allowed here: zones, sets, members');
  }
  const zones = raw.zones;
  if (!Array.isArray(zones) || zones.length === 0 || zones.length > MAX_ZONES) {
    throw problem(`${field}.zones`, `is not a list of 1 to ${MAX_ZONES} Availability Zones`, 'list the zones where restores will run, such as [us-east-1a]');
  }
  zones.forEach((z, i) => {
    if (typeof z !== 'string' || !ZONE.test(z)) {
      throw problem(`${field}.zones[${i}]`, `${JSON.stringify(z)} is not an Availability Zone name (Local and Wavelength Zones do not support FSR)`,
        'use a zone name such as us-east-1a');
    }
  });
  if (new Set(zones).size !== zones.length) throw problem(`${field}.zones`, 'names a zone twice', 'list each zone once');
  if (new Set(zones.map((z) => regionOf(z as string))).size !== 1) throw problem(`${field}.zones`, 'names zones of several Regions', 'keep the zones of the stack\'s Region');
  const count = (value: unknown, at: string, max: number, what: string): number => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
      throw problem(at, `${JSON.stringify(value)} is not valid`, `use ${what}, an integer from 1 to ${max}`);
    }
    return value;
  };
  const sets = count(raw.sets, `${field}.sets`, retention,
    `how many of the newest complete sets keep FSR, at most the array's retention (${retention}: retention deletes older sets, and deleting a snapshot disables its FSR)`);
  const members = count(raw.members, `${field}.members`, 1000, 'the array\'s member count (snapshots per set)');
  return { zones: zones as string[], sets, members };
}

/** The checks that need every array's policy and the stack's Region. `region`: the Region the
 * stack deploys to, when known at synth. Returns what synth should say (notes). */
export function checkFastRestore(
  policies: Record<string, FastRestoreConfig>, quota: number, region: string | undefined, problem: Problem,
): string[] {
  const notes: string[] = [];
  const regions = new Set<string>();
  for (const [name, p] of Object.entries(policies)) {
    const wrong = p.zones.filter((z) => region !== undefined && regionOf(z) !== region);
    if (wrong.length) {
      throw problem(`arrays.${name}.fastRestore.zones`, `${wrong.join(', ')} not in the stack's Region ${region}`, `name zones of ${region}, or deploy the stack to their Region`);
    }
    p.zones.forEach((z) => regions.add(regionOf(z)));
  }
  if (regions.size > 1) {
    throw problem('arrays.*.fastRestore.zones', `name zones of several Regions (${[...regions].join(', ')})`, 'keep one Region\'s zones: the stack deploys to one');
  }
  if (regions.size && region === undefined) {
    notes.push(`fastRestore zones are in ${[...regions][0]}: deploy the stack there (elsewhere each backup warns and keeps no FSR)`);
  }
  // While a new set is enabled, the set it replaces stays on: sets + 1 sets at once.
  const peak = (p: FastRestoreConfig) => (p.sets + 1) * p.members;
  const total = Object.values(policies).reduce((n, p) => n + peak(p), 0);
  if (total > quota) {
    const each = Object.entries(policies).map(([name, p]) => `${name}: ${p.sets} set(s) of ${p.members} snapshots, up to ${peak(p)}`);
    const field = each.length === 1 ? `arrays.${Object.keys(policies)[0]}.fastRestore` : 'arrays.*.fastRestore';
    throw problem(field,
      `keeping FSR needs up to ${total} snapshots with FSR at once (${each.join('; ')}: a new set is enabled before the one it replaces is disabled), but the Region's quota of snapshots with FSR is assumed to be ${quota} (defaults.fastRestoreQuota; Service Quotas, EBS "Fast snapshot restore", L-631ECBD3, default ${DEFAULT_FSR_QUOTA}, counts snapshots in any number of AZs)`,
      'raise the quota and set defaults.fastRestoreQuota to it, or keep fewer sets');
  }
  if (total && total === quota) {
    notes.push(`fastRestore policies may take all ${quota} snapshots of the Region's FSR quota while a new set is enabled: a restore with initialization fsr then falls back to prewarm`);
  }
  return notes;
}

/** What keeping FSR on an array's newest sets costs a month, as synth prints it. */
export function fastRestoreCost(name: string, p: FastRestoreConfig): { perMonth: number; text: string } {
  const pairs = p.sets * p.members * p.zones.length;
  const perMonth = pairs * FSR_PRICE_PER_HOUR * HOURS_PER_MONTH;
  const money = (n: number) => `$${n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  return {
    perMonth,
    text: `raidsnap: arrays.${name}.fastRestore keeps FSR on ${p.sets} set(s) x ${p.members} snapshots x ${p.zones.length} AZ(s) (${p.zones.join(', ')}) = ${pairs} snapshot-AZ pairs: about ${money(perMonth)} per month at the ${FSR_PRICE_REGION} list price of ${money(FSR_PRICE_PER_HOUR)} per DSU-hour (${HOURS_PER_MONTH} h a month; other Regions' prices differ), plus the hours each new set overlaps the one it replaces while it is enabled (billed per minute, at least one hour per pair)`,
  };
}

/** The arrays' fastRestore policies as the functions get them, checked against the Region the
 * stack deploys to (its own, else the CLI's default Region, which an environment-agnostic stack
 * deploys to) and the quota; synth prints what each costs. */
export function fastRestorePolicies(stack: Stack, config: RaidsnapConfig, problem: Problem): Record<string, KeptPolicy> {
  const policies = Object.fromEntries(Object.values(config.arrays)
    .filter((a) => a.fastRestore).map((a) => [a.name, a.fastRestore!]));
  const region = Token.isUnresolved(stack.region) ? process.env.CDK_DEFAULT_REGION : stack.region;
  const notes = checkFastRestore(policies, config.defaults.fastRestoreQuota, region, problem);
  for (const [name, p] of Object.entries(policies)) Annotations.of(stack).addInfo(fastRestoreCost(name, p).text);
  for (const note of notes) Annotations.of(stack).addWarning(`raidsnap: ${note}`);
  return Object.fromEntries(Object.entries(policies).map(([name, p]) => [name, { zones: p.zones, sets: p.sets }]));
}
