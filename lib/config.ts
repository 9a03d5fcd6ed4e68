import { readFileSync } from 'fs';
import * as path from 'path';
import { longestBackupGap } from './schedule-gap';
import { ConfigError } from './config-error';
import { readYaml } from './config-yaml';
import { CopyConfig, parseCopies } from './copies';
import { DEFAULT_FSR_QUOTA, FastRestoreConfig, parseFastRestore } from './fast-restore';
import { checkHooksFit, HooksConfig, parseHooks } from './hooks-config';
import { parsePrices, PricesConfig } from './prices-config';
import { checkTakeWith, parseTakeWith } from './take-with';
import { LockConfig, parseLock } from './snapshot-lock';

export { ConfigError };

/** What an operator may configure. Everything is optional: with no file at all, both
 * workflows still work for any array found by tags; the file only adds schedules, retention,
 * restore defaults and automated recovery. */
export interface RaidsnapConfig {
  readonly defaults: ArrayDefaults;
  readonly arrays: Record<string, ArrayConfig>;
  readonly notifications: NotificationsConfig;
  /** Unset: no tag protection policy is made. */
  readonly tagProtection?: TagProtectionConfig;
  /** Accounts whose raidsnap stacks may have this one copy their sets here (this stack is
   * their backup account's): their stacks start copies as this stack's copy-requests role. */
  readonly acceptCopiesFrom: readonly string[];
  /** Overrides of the list prices a run's cost is computed with (lib/prices-config.ts). */
  readonly prices?: PricesConfig;
}

/** The managed policy that keeps raidsnap:* tags to raidsnap and its administrators. */
export interface TagProtectionConfig {
  /** IAM roles and users (their ARNs) who may still write raidsnap:* tags by hand. */
  readonly administrators: readonly string[];
}

export interface NotificationsConfig {
  /** Addresses subscribed to the notification topic (each confirms by mail). */
  readonly emails: readonly string[];
}

export type Consistency = 'crash' | 'fsfreeze';
export type Initialization = 'auto' | 'fsr' | 'rate' | 'prewarm' | 'none';

export interface ArrayDefaults {
  readonly retention: number;
  readonly consistency: Consistency;
  readonly initialization: Initialization;
  readonly timezone: string;
  readonly maxFreezeSeconds: number;
  /** The directories restored arrays may be mounted under ("<array>" stands for the array's
   * name); a restore may also mount an array where its own set recorded it. */
  readonly allowedMountPoints: readonly string[];
  /** The Region's quota of snapshots with Fast Snapshot Restore on, as the account has it
   * (Service Quotas, EBS "Fast snapshot restore", L-631ECBD3): fastRestore policies must fit. */
  readonly fastRestoreQuota: number;
}

export interface ScheduleConfig {
  readonly expression: string;
  readonly timezone: string;
  readonly retryAttempts: number;
  readonly maxEventAgeMinutes: number;
  /** EventBridge Scheduler starts the backup at a time of its choosing within this many minutes
   * after the scheduled time (FlexibleTimeWindow, 1..1440); unset: at the scheduled time. Many
   * arrays on one expression need it: bench/fleet.py and the README's fleet section. */
  readonly flexibleWindowMinutes?: number;
}

export interface ArrayConfig {
  readonly name: string;
  readonly schedules: readonly ScheduleConfig[];
  readonly retention: number;
  readonly consistency: Consistency;
  readonly initialization: Initialization;
  readonly rpoMinutes?: number;
  readonly recovery?: RecoveryConfig;
  readonly drill?: DrillConfig;
  /** Keep FSR enabled on the newest complete sets (lib/fast-restore.ts). */
  readonly fastRestore?: FastRestoreConfig;
  readonly hooks?: HooksConfig;
  /** Copy each complete set to other Regions or accounts (lib/copies.ts); none: []. */
  readonly copies: readonly CopyConfig[];
  /** Lock the newest sets' snapshots against deletion (lib/snapshot-lock.ts). */
  readonly lock?: LockConfig;
  /** Other arrays of the instance its backups take in the same call (lib/take-with.ts). */
  readonly takeWith?: readonly string[];
}

export type RecoveryMode = 'replace' | 'attach';

/** Automated recovery of one array (arrays.<name>.recovery). */
export interface RecoveryConfig {
  /** The array's instance: its StatusCheckFailed_AttachedEBS alarm starts a recovery. */
  readonly instanceId: string;
  /** replace: restore onto the same instance, releasing the broken array; attach: restore
   * onto the replacement instance. */
  readonly mode: RecoveryMode;
  /** Restore here when the instance is terminated (and, in attach mode, when its EBS fails). */
  readonly replacementInstanceId?: string;
  /** An Auto Scaling group of one: each instance it launches gets the array restored before it
   * goes InService (a launch lifecycle hook holds it). */
  readonly autoScalingGroup?: string;
  readonly initialization: Initialization;
  /** Where the recovered array is mounted; unset: the mount point its set recorded. */
  readonly mountPoint?: string;
}

export type DrillInitialization = 'fsr' | 'prewarm' | 'none';

/** A scheduled restore drill of one array (arrays.<name>.drill). */
export interface DrillConfig {
  readonly schedule: ScheduleConfig;
  /** The drill instance: tagged raidsnap:array with another name, never the array's own. */
  readonly targetInstanceId: string;
  readonly mountPoint: string;
  readonly mdDevice: string;
  readonly initialization: DrillInitialization;
}

// What to write where a mapping was expected.
const INDENT = 'write its settings as "key: value" lines indented below it';

const ARRAY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
// EventBridge Scheduler expressions: cron(6 fields), rate(n unit), or at(yyyy-mm-ddThh:mm:ss).
const SCHEDULE = /^(cron\(\S+( \S+){5}\)|rate\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\)|at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\))$/;
const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;
const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;
// Auto Scaling group names: 1-255 characters; raidsnap takes the plain ones (the name also goes
// into an IAM resource ARN and an EventBridge pattern).
const ASG_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$/;
// The assemble and release documents' patterns.
const MOUNT_POINT = /^(\/([A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,61}|\.\.[A-Za-z0-9._-]{1,61})){1,16}$/;
const MD_DEVICE = /^\/dev\/md[0-9]{1,3}$/;
export const DRILL_DEFAULTS = { mountPoint: '/mnt/raidsnap-drill', mdDevice: '/dev/md100', initialization: 'none' as DrillInitialization };
const TIMEZONE = /^(UTC|[A-Za-z]+(\/[A-Za-z0-9_+-]+){1,2})$/;

export const DEFAULT_ALLOWED_MOUNT_POINTS = ['/data', '/mnt', '/srv', '/opt/<array>'];
export const BUILT_IN_DEFAULTS: ArrayDefaults = {
  allowedMountPoints: DEFAULT_ALLOWED_MOUNT_POINTS,
  retention: 7,
  consistency: 'crash',
  initialization: 'auto',
  timezone: 'UTC',
  maxFreezeSeconds: 60,
  fastRestoreQuota: DEFAULT_FSR_QUOTA,
};

type Raw = Record<string, unknown>;

function isObject(value: unknown): value is Raw {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function only(obj: Raw, field: string, allowed: readonly string[]): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) {
      throw new ConfigError(`${field}.${key}`, 'unknown setting', `allowed here: ${allowed.join(', ')} (check the spelling and the indentation)`);
    }
  }
}

function integer(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(field, typeof value === 'number' && Number.isInteger(value) ? `${value} is out of range` : `${JSON.stringify(value)} is not an integer`,
      `use an integer from ${min} to ${max}`);
  }
  return value;
}

function oneOf<T extends string>(value: unknown, field: string, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(field, `${JSON.stringify(value)} is not a known value`, `use one of: ${allowed.join(', ')}`);
  }
  return value as T;
}

function matching(value: unknown, field: string, pattern: RegExp, what: string): string {
  if (typeof value !== 'string' || !pattern.test(value)) {
    throw new ConfigError(field, `${JSON.stringify(value)} is not valid`, `use ${what}`);
  }
  return value;
}

function parseDefaults(raw: unknown): ArrayDefaults {
  if (raw === undefined) return BUILT_IN_DEFAULTS;
  if (!isObject(raw)) throw new ConfigError('defaults', 'is not a mapping', INDENT);
  only(raw, 'defaults', ['retention', 'consistency', 'initialization', 'timezone', 'maxFreezeSeconds', 'allowedMountPoints', 'fastRestoreQuota']);
  const d = BUILT_IN_DEFAULTS;
  return {
    allowedMountPoints: raw.allowedMountPoints === undefined ? d.allowedMountPoints
      : allowedMountPoints(raw.allowedMountPoints, 'defaults.allowedMountPoints'),
    retention: raw.retention === undefined ? d.retention : integer(raw.retention, 'defaults.retention', 1, 1000),
    consistency: raw.consistency === undefined ? d.consistency : oneOf(raw.consistency, 'defaults.consistency', ['crash', 'fsfreeze'] as const),
    initialization: raw.initialization === undefined ? d.initialization
      : oneOf(raw.initialization, 'defaults.initialization', ['auto', 'fsr', 'rate', 'prewarm', 'none'] as const),
    timezone: raw.timezone === undefined ? d.timezone : matching(raw.timezone, 'defaults.timezone', TIMEZONE, 'an IANA time zone such as Europe/Berlin'),
    maxFreezeSeconds: raw.maxFreezeSeconds === undefined ? d.maxFreezeSeconds
      : integer(raw.maxFreezeSeconds, 'defaults.maxFreezeSeconds', 1, 900),
    fastRestoreQuota: raw.fastRestoreQuota === undefined ? d.fastRestoreQuota
      : integer(raw.fastRestoreQuota, 'defaults.fastRestoreQuota', 1, 100000),
  };
}

function parseSchedule(raw: unknown, field: string, defaults: ArrayDefaults): ScheduleConfig {
  const obj: Raw = typeof raw === 'string' ? { expression: raw } : isObject(raw) ? raw : {};
  if (!isObject(raw) && typeof raw !== 'string') {
    throw new ConfigError(field, 'is neither a schedule expression nor a mapping', 'write an expression such as cron(0 */4 * * ? *), or a mapping with "expression"');
  }
  only(obj, field, ['expression', 'timezone', 'retryAttempts', 'maxEventAgeMinutes', 'flexibleWindowMinutes']);
  return {
    expression: matching(obj.expression, `${field}.expression`, SCHEDULE,
      'an EventBridge Scheduler expression: cron(m h dom mon dow y), rate(n unit) or at(...)'),
    timezone: obj.timezone === undefined ? defaults.timezone
      : matching(obj.timezone, `${field}.timezone`, TIMEZONE, 'an IANA time zone such as Europe/Berlin'),
    retryAttempts: obj.retryAttempts === undefined ? 3 : integer(obj.retryAttempts, `${field}.retryAttempts`, 0, 185),
    maxEventAgeMinutes: obj.maxEventAgeMinutes === undefined ? 60
      : integer(obj.maxEventAgeMinutes, `${field}.maxEventAgeMinutes`, 1, 1440),
    ...(obj.flexibleWindowMinutes === undefined ? {}
      : { flexibleWindowMinutes: integer(obj.flexibleWindowMinutes, `${field}.flexibleWindowMinutes`, 1, 1440) }),
  };
}

function parseArray(name: string, raw: unknown, defaults: ArrayDefaults): ArrayConfig {
  const field = `arrays.${name}`;
  if (!ARRAY_NAME.test(name)) {
    throw new ConfigError(field, 'is not a valid array name', 'use 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit');
  }
  if (!isObject(raw)) throw new ConfigError(field, 'is not a mapping', INDENT);
  only(raw, field, ['schedule', 'schedules', 'retention', 'consistency', 'initialization', 'rpoMinutes', 'recovery', 'drill', 'fastRestore', 'hooks', 'lock', 'copies', 'takeWith']);
  if (raw.schedule !== undefined && raw.schedules !== undefined) {
    throw new ConfigError(field, 'has both schedule and schedules', 'keep one of them (schedules takes a list)');
  }
  let schedules: ScheduleConfig[] = [];
  if (raw.schedule !== undefined) {
    schedules = [parseSchedule(raw.schedule, `${field}.schedule`, defaults)];
  } else if (raw.schedules !== undefined) {
    if (!Array.isArray(raw.schedules)) throw new ConfigError(`${field}.schedules`, 'is not a list', 'write a list, such as [rate(1 day)], or use schedule for one');
    schedules = raw.schedules.map((s, i) => parseSchedule(s, `${field}.schedules[${i}]`, defaults));
  }
  const initialization = raw.initialization === undefined ? defaults.initialization
    : oneOf(raw.initialization, `${field}.initialization`, ['auto', 'fsr', 'rate', 'prewarm', 'none'] as const);
  const recovery = raw.recovery === undefined ? undefined : parseRecovery(raw.recovery, `${field}.recovery`, initialization);
  const drill = raw.drill === undefined ? undefined : parseDrill(raw.drill, `${field}.drill`, defaults);
  if (recovery?.mountPoint) refuseUnallowed(recovery.mountPoint, `${field}.recovery.mountPoint`, name, defaults);
  if (drill) refuseUnallowed(drill.mountPoint, `${field}.drill.mountPoint`, name, defaults);
  if (recovery && drill && [recovery.instanceId, recovery.replacementInstanceId].includes(drill.targetInstanceId)) {
    throw new ConfigError(`${field}.drill.targetInstanceId`, 'names the array\'s instance or its replacement', 'name a separate drill instance');
  }
  const retention = raw.retention === undefined ? defaults.retention : integer(raw.retention, `${field}.retention`, 1, 1000);
  const fastRestore = raw.fastRestore === undefined ? undefined
    : parseFastRestore(raw.fastRestore, `${field}.fastRestore`, retention, (f, why, fix) => new ConfigError(f, why, fix));
  const lock = raw.lock === undefined ? undefined
    : parseLock(raw.lock, `${field}.lock`, retention, (f, why, fix) => new ConfigError(f, why, fix));
  const copies = raw.copies === undefined ? []
    : parseCopies(raw.copies, `${field}.copies`, retention, (f, why, fix) => new ConfigError(f, why, fix));
  const rpoMinutes = raw.rpoMinutes === undefined ? undefined : integer(raw.rpoMinutes, `${field}.rpoMinutes`, 5, 525600);
  if (rpoMinutes !== undefined) refuseRpoInsideWindow(name, field, schedules, rpoMinutes);
  return {
    name,
    schedules,
    retention,
    consistency: raw.consistency === undefined ? defaults.consistency
      : oneOf(raw.consistency, `${field}.consistency`, ['crash', 'fsfreeze'] as const),
    initialization,
    rpoMinutes,
    ...(recovery ? { recovery } : {}),
    ...(drill ? { drill } : {}),
    ...(fastRestore ? { fastRestore } : {}),
    ...(raw.hooks === undefined ? {} : { hooks: parseHooks(raw.hooks, `${field}.hooks`, (f, why, fix) => new ConfigError(f, why, fix)) }),
    ...(lock ? { lock } : {}),
    copies,
    ...(raw.takeWith === undefined ? {}
      : { takeWith: parseTakeWith(raw.takeWith, `${field}.takeWith`, name, (f, why, fix) => new ConfigError(f, why, fix)) }),
  };
}

/** With a flexible time window two backups may start up to their interval plus the window apart
 * (lib/schedule-gap.ts): an RPO no longer than that makes the RPO alarm (the newest complete
 * set older than rpoMinutes) fire on an array whose backups all succeed. */
function refuseRpoInsideWindow(name: string, field: string, schedules: readonly ScheduleConfig[], rpoMinutes: number): void {
  if (!schedules.some((s) => s.flexibleWindowMinutes !== undefined)) return;
  const gap = longestBackupGap(schedules);
  if (gap === undefined || rpoMinutes > gap.minutes) return;
  const expressions = schedules.map((s) => s.expression).join(', ');
  throw new ConfigError(`${field}.rpoMinutes`,
    `${rpoMinutes} minutes is not more than the longest time between two backups of ${name}: its schedule ${expressions} ` +
    `starts backups ${gap.interval} minutes apart and its flexible window lets the later one start ${gap.window} minutes late ` +
    `(${gap.minutes} minutes), so its RPO alarm would fire on a healthy array`,
    `set rpoMinutes above ${gap.minutes} (with room for a backup's own duration), or make flexibleWindowMinutes smaller`);
}

function parseRecovery(raw: unknown, field: string, arrayInitialization: Initialization): RecoveryConfig {
  if (!isObject(raw)) throw new ConfigError(field, 'is not a mapping', 'give at least instanceId, indented below recovery');
  only(raw, field, ['instanceId', 'mode', 'replacementInstanceId', 'autoScalingGroup', 'initialization', 'mountPoint']);
  const instanceId = matching(raw.instanceId, `${field}.instanceId`, INSTANCE_ID, 'the array instance\'s id (i- and hex digits, such as i-0123456789abcdef0)');
  const mode = raw.mode === undefined ? 'replace' : oneOf(raw.mode, `${field}.mode`, ['replace', 'attach'] as const);
  const replacementInstanceId = raw.replacementInstanceId === undefined ? undefined
    : matching(raw.replacementInstanceId, `${field}.replacementInstanceId`, INSTANCE_ID, 'an instance id (i- and hex digits, such as i-0123456789abcdef0)');
  if (replacementInstanceId === instanceId) {
    throw new ConfigError(`${field}.replacementInstanceId`, 'is the same instance as instanceId', 'name another instance, or leave it out');
  }
  if (mode === 'attach' && !replacementInstanceId) {
    throw new ConfigError(`${field}.replacementInstanceId`, 'is missing, and mode attach restores onto the replacement', 'add replacementInstanceId, or use mode replace');
  }
  const autoScalingGroup = raw.autoScalingGroup === undefined ? undefined
    : matching(raw.autoScalingGroup, `${field}.autoScalingGroup`, ASG_NAME, 'an Auto Scaling group name (letters, digits, ".", "_", "-")');
  const mountPoint = raw.mountPoint === undefined ? undefined
    : recoveryMountPoint(raw.mountPoint, `${field}.mountPoint`, mode, replacementInstanceId, autoScalingGroup);
  return {
    instanceId,
    mode,
    ...(replacementInstanceId ? { replacementInstanceId } : {}),
    ...(autoScalingGroup ? { autoScalingGroup } : {}),
    ...(mountPoint ? { mountPoint } : {}),
    initialization: raw.initialization === undefined ? arrayInitialization
      : oneOf(raw.initialization, `${field}.initialization`, ['auto', 'fsr', 'rate', 'prewarm', 'none'] as const),
  };
}

// The restore's rule (raidsnap.models.system_directory): never "/" or a system tree; a system
// directory itself (/srv, /home, ...) only as the array's own mount point, where a replace puts
// it back. A recovery that restores onto another instance (attach mode, a replacement, an Auto
// Scaling launch) mounts there anew: such a mount point would be refused at every recovery.
const SYSTEM_TREES = ['/bin', '/boot', '/dev', '/etc', '/lib', '/lib32', '/lib64', '/libx32', '/proc', '/root',
  '/run', '/sbin', '/sys', '/usr', '/tmp', '/var/tmp', '/var/run', '/var/lock', '/var/spool', '/var/log'];
const SYSTEM_DIRECTORIES = ['/var', '/home', '/opt', '/srv', '/mnt', '/media'];

/** An allowed place must not open a system tree: not "/", not in a tree, not above one (/var
 * holds /var/log, and /var/lib/cloud, whose scripts run as root at boot). */
function allowedMountPoints(raw: unknown, field: string): string[] {
  if (!Array.isArray(raw) || raw.length === 0) throw new ConfigError(field, 'is empty or not a list', 'list the directories restores may mount under, such as [/data, /mnt]');
  return raw.map((entry, i) => {
    const at = `${field}[${i}]`;
    const value = matching(typeof entry === 'string' ? entry.replace(/<array>/g, 'array') : entry, at, MOUNT_POINT,
      'an absolute path of plain segments, not "/" ("<array>" stands for the array\'s name)');
    const normal = path.posix.normalize(value).replace(/\/+$/, '') || '/';
    const tree = SYSTEM_TREES.find((t) => normal === t || normal.startsWith(`${t}/`) || t.startsWith(`${normal}/`));
    if (normal === '/' || tree) {
      throw new ConfigError(at, `opens the system tree ${tree ?? '/'}: a restored filesystem is never mounted there`, 'remove it, or name a directory of its own such as /data');
    }
    return entry as string;
  });
}

/** Whether a mount point lies under one of the allowed places. */
export function mountPointAllowed(mountPoint: string, array: string, allowed: readonly string[]): boolean {
  const normal = path.posix.normalize(mountPoint).replace(/\/+$/, '');
  return allowed.some((a) => {
    const base = path.posix.normalize(a.replace(/<array>/g, array)).replace(/\/+$/, '');
    return normal === base || normal.startsWith(`${base}/`);
  });
}

function refuseUnallowed(mountPoint: string, field: string, array: string, defaults: ArrayDefaults): void {
  if (!mountPointAllowed(mountPoint, array, defaults.allowedMountPoints)) {
    throw new ConfigError(field, `${mountPoint} is not under defaults.allowedMountPoints (${defaults.allowedMountPoints.join(', ')}): a restore would refuse it`,
      'add its directory there or choose one under them');
  }
}

function recoveryMountPoint(raw: unknown, field: string, mode: RecoveryMode, replacement?: string, group?: string): string {
  const value = matching(raw, field, MOUNT_POINT, 'an absolute path of plain segments, not "/"');
  const normal = path.posix.normalize(value).replace(/\/+$/, '') || '/';
  const tree = SYSTEM_TREES.find((t) => normal === t || normal.startsWith(`${t}/`));
  if (normal === '/' || tree) {
    throw new ConfigError(field, `is in the system tree ${tree ?? '/'}: a restore never mounts there, so this recovery could never succeed`, 'choose a directory of its own, such as /srv/db');
  }
  if (SYSTEM_DIRECTORIES.includes(normal) && (mode === 'attach' || replacement || group)) {
    throw new ConfigError(field, `is the system directory ${normal} itself: only a replace in place may put an array back there, and this recovery also restores onto another instance (${mode === 'attach' ? 'mode attach' : replacement ? 'replacementInstanceId' : 'autoScalingGroup'}), where it would be refused`, 'choose a directory of its own, such as /srv/db');
  }
  return value;
}

function parseDrill(raw: unknown, field: string, defaults: ArrayDefaults): DrillConfig {
  if (!isObject(raw)) throw new ConfigError(field, 'is not a mapping', 'give schedule and targetInstanceId, indented below drill');
  only(raw, field, ['schedule', 'targetInstanceId', 'mountPoint', 'mdDevice', 'initialization']);
  if (raw.schedule === undefined) throw new ConfigError(`${field}.schedule`, 'is missing', 'say when drills run, such as cron(0 3 ? * SUN *)');
  const d = DRILL_DEFAULTS;
  return {
    schedule: parseSchedule(raw.schedule, `${field}.schedule`, defaults),
    targetInstanceId: matching(raw.targetInstanceId, `${field}.targetInstanceId`, INSTANCE_ID, 'the drill instance\'s id (i- and hex digits, such as i-0123456789abcdef0)'),
    mountPoint: raw.mountPoint === undefined ? d.mountPoint
      : matching(raw.mountPoint, `${field}.mountPoint`, MOUNT_POINT, 'an absolute path of plain segments, not "/"'),
    mdDevice: raw.mdDevice === undefined ? d.mdDevice
      : matching(raw.mdDevice, `${field}.mdDevice`, MD_DEVICE, 'an md device such as /dev/md100'),
    initialization: raw.initialization === undefined ? d.initialization
      : oneOf(raw.initialization, `${field}.initialization`, ['fsr', 'prewarm', 'none'] as const),
  };
}

/** Validate a parsed config document; every problem names the field. */
function parseNotifications(raw: unknown): NotificationsConfig {
  if (raw === undefined) return { emails: [] };
  if (!isObject(raw)) throw new ConfigError('notifications', 'is not a mapping', 'write emails: [...] indented below it');
  only(raw, 'notifications', ['emails']);
  if (raw.emails === undefined) return { emails: [] };
  if (!Array.isArray(raw.emails)) throw new ConfigError('notifications.emails', 'is not a list', 'list the addresses, such as [storage-oncall@example.com]');
  return {
    emails: raw.emails.map((e, i) => matching(e, `notifications.emails[${i}]`, EMAIL, 'an email address')),
  };
}

// An IAM role or user ARN (paths allowed, no wildcards: each administrator is named).
const PRINCIPAL_ARN = /^arn:aws[a-z-]*:iam::\d{12}:(role|user)\/[A-Za-z0-9+=,.@_\/-]{1,512}$/;

function parseTagProtection(raw: unknown): TagProtectionConfig | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) throw new ConfigError('tagProtection', 'is not a mapping', 'write administrators: [...] indented below it');
  only(raw, 'tagProtection', ['administrators']);
  const admins = raw.administrators ?? [];
  if (!Array.isArray(admins)) throw new ConfigError('tagProtection.administrators', 'is not a list', 'list IAM role or user ARNs, such as [arn:aws:iam::123456789012:role/storage-admin]');
  return {
    administrators: admins.map((a, i) => matching(a, `tagProtection.administrators[${i}]`, PRINCIPAL_ARN,
      'an IAM role or user ARN (arn:aws:iam::<account>:role/<name> or :user/<name>)')),
  };
}

function parseAcceptCopiesFrom(raw: unknown): string[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw new ConfigError('acceptCopiesFrom', 'is not a list', 'list the 12-digit ids of the accounts whose sets this stack copies, quoted in YAML');
  const accounts = raw.map((a, i) => matching(a, `acceptCopiesFrom[${i}]`, /^\d{12}$/, 'a 12-digit account id (quoted in YAML)'));
  accounts.forEach((a, i) => {
    if (accounts.indexOf(a) !== i) throw new ConfigError(`acceptCopiesFrom[${i}]`, `names ${a} twice`, 'list each account once');
  });
  return accounts;
}

export function parseConfig(raw: unknown): RaidsnapConfig {
  if (raw === undefined || raw === null) {
    return { defaults: BUILT_IN_DEFAULTS, arrays: {}, notifications: { emails: [] }, acceptCopiesFrom: [] };
  }
  if (!isObject(raw)) throw new ConfigError('(top level)', 'is not a mapping', 'start from config/example.yaml: defaults, arrays, notifications, tagProtection, acceptCopiesFrom, prices');
  only(raw, '(top level)', ['defaults', 'arrays', 'notifications', 'tagProtection', 'acceptCopiesFrom', 'prices']);
  const defaults = parseDefaults(raw.defaults);
  const arrays: Record<string, ArrayConfig> = {};
  if (raw.arrays !== undefined) {
    if (!isObject(raw.arrays)) throw new ConfigError('arrays', 'is not a mapping', 'write each array\'s name with its settings indented below it');
    for (const [name, value] of Object.entries(raw.arrays)) {
      arrays[name] = parseArray(name, value, defaults);
    }
    checkHooksFit(arrays, (f, why, fix) => new ConfigError(f, why, fix));
  }
  checkTakeWith(arrays, (f, why, fix) => new ConfigError(f, why, fix), defaults.maxFreezeSeconds);
  const tagProtection = parseTagProtection(raw.tagProtection);
  const prices = parsePrices(raw.prices, (f, why, fix) => new ConfigError(f, why, fix));
  return {
    defaults, arrays, notifications: parseNotifications(raw.notifications),
    ...(tagProtection ? { tagProtection } : {}), acceptCopiesFrom: parseAcceptCopiesFrom(raw.acceptCopiesFrom),
    ...(prices ? { prices } : {}),
  };
}

/** Read the config file named by the `config` context value; no file means no config. A
 * mistake is a ConfigError that names the file. */
export function loadConfig(path: string | undefined): RaidsnapConfig {
  if (!path) return parseConfig(undefined);
  try {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError('(file)', `cannot read it (${(err as Error).message})`, 'check the path given with -c config=');
    }
    return parseConfig(readYaml(text));
  } catch (err) {
    if (err instanceof ConfigError) err.file = path;
    throw err;
  }
}
