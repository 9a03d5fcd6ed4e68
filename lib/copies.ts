import type { Problem } from './config-error';

/** One place an array's sets are copied to (arrays.<name>.copies[i]): another Region of this
 * account, or a Region of another account (a backup account). The raidsnap stack deployed there
 * makes the copies (its copy workflow, `<stackName>-copy`), records them as a set in its own
 * table and applies the retention given here to them. */
export interface CopyConfig {
  readonly region: string;
  /** The backup account; unset: this account. */
  readonly account?: string;
  /** Cross-account only: the role of the backup account's stack that this stack assumes to start
   * a copy there (it may start copies and look at them, nothing else). */
  readonly roleArn?: string;
  /** The key the copies are encrypted with there (a key of that Region and account); unset: the
   * source's encryption, under that Region's default EBS key where the source is encrypted. */
  readonly kmsKeyArn?: string;
  /** Complete copied sets kept there; default: the array's retention. */
  readonly retention: number;
  /** The name of the stack deployed there; default: this stack's name. */
  readonly stackName?: string;
}

type Raw = Record<string, unknown>;

function isObject(value: unknown): value is Raw {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// A commercial, GovCloud or China Region name (us-east-1, us-gov-west-1, ap-southeast-2, ...).
const REGION = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;
const ACCOUNT = /^\d{12}$/;
// CloudFormation stack names: a letter, then letters, digits and hyphens, 128 at most.
const STACK_NAME = /^[A-Za-z][A-Za-z0-9-]{0,127}$/;
// A role by its ARN (paths allowed), no wildcard: the one role of the backup account's stack.
const ROLE_ARN = /^arn:aws[a-z-]*:iam::(\d{12}):role\/[A-Za-z0-9+=,.@_/-]{1,512}$/;
// A key by its ARN (a key id or a multi-Region key id; not an alias, which can be repointed).
const KEY_ARN = /^arn:aws[a-z-]*:kms:([a-z0-9-]+):(\d{12}):key\/(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
const ALLOWED = ['region', 'account', 'roleArn', 'kmsKeyArn', 'retention', 'stackName'];

function text(value: unknown, field: string, pattern: RegExp, what: string, problem: Problem): string {
  if (typeof value !== 'string' || !pattern.test(value)) throw problem(field, `${JSON.stringify(value)} is not valid`, `use ${what}`);
  return value;
}

function parseCopy(raw: unknown, field: string, retention: number, problem: Problem): CopyConfig {
  if (!isObject(raw)) throw problem(field, 'is not a mapping', 'give at least region (and account, roleArn, kmsKeyArn, retention, stackName as needed), indented below the list item');
  for (const key of Object.keys(raw)) {
    if (!ALLOWED.includes(key)) throw problem(`${field}.${key}`, 'unknown setting', `allowed here: ${ALLOWED.join(', ')}`);
  }
  const region = text(raw.region, `${field}.region`, REGION, 'a Region name such as us-west-2', problem);
  const account = raw.account === undefined ? undefined
    : text(raw.account, `${field}.account`, ACCOUNT, 'a 12-digit account id (quoted in YAML)', problem);
  let roleArn: string | undefined;
  if (raw.roleArn !== undefined) {
    roleArn = text(raw.roleArn, `${field}.roleArn`, ROLE_ARN, 'an IAM role ARN (arn:aws:iam::<account>:role/<name>)', problem);
    if (account === undefined) throw problem(`${field}.roleArn`, 'is given without account', 'give the backup account\'s id as account, or drop roleArn for a copy within this account');
    if (ROLE_ARN.exec(roleArn)![1] !== account) throw problem(`${field}.roleArn`, `is not a role of account ${account}, where the copies go`, `name the copy-requests role of the raidsnap stack in ${account}`);
  } else if (account !== undefined) {
    throw problem(`${field}.roleArn`, 'is missing: a copy to another account starts there as a role of that account\'s raidsnap stack',
      `give the ARN of its <stack>-copy-requests-${region} role (docs/copies.md, "Copies to another account")`);
  }
  let kmsKeyArn: string | undefined;
  if (raw.kmsKeyArn !== undefined) {
    kmsKeyArn = text(raw.kmsKeyArn, `${field}.kmsKeyArn`, KEY_ARN, 'a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), not an alias', problem);
    const [, keyRegion, keyAccount] = KEY_ARN.exec(kmsKeyArn)!;
    // KMS keys are Regional: EC2 encrypts the copy with a key of the Region it makes it in.
    if (keyRegion !== region) throw problem(`${field}.kmsKeyArn`, `is a key of ${keyRegion}, but the copies are made in ${region}`, `name a key of ${region}`);
    if (account !== undefined && keyAccount !== account) {
      throw problem(`${field}.kmsKeyArn`, `is a key of account ${keyAccount}, but the copies belong to account ${account}`, `name a key of account ${account}`);
    }
  }
  const kept = raw.retention === undefined ? retention : raw.retention;
  if (typeof kept !== 'number' || !Number.isInteger(kept) || kept < 1 || kept > 1000) {
    throw problem(`${field}.retention`, `${JSON.stringify(kept)} is not valid`, 'use an integer from 1 to 1000');
  }
  const stackName = raw.stackName === undefined ? undefined
    : text(raw.stackName, `${field}.stackName`, STACK_NAME, 'a CloudFormation stack name', problem);
  return {
    region, retention: kept,
    ...(account ? { account } : {}), ...(roleArn ? { roleArn } : {}),
    ...(kmsKeyArn ? { kmsKeyArn } : {}), ...(stackName ? { stackName } : {}),
  };
}

/** arrays.<name>.copies: a list of places, each at most once. */
export function parseCopies(raw: unknown, field: string, retention: number, problem: Problem): CopyConfig[] {
  if (!Array.isArray(raw)) throw problem(field, 'is not a list', 'list the places to copy to, each as "- region: us-west-2" with its settings below');
  const copies = raw.map((c, i) => parseCopy(c, `${field}[${i}]`, retention, problem));
  const seen = new Set<string>();
  copies.forEach((c, i) => {
    const where = `${c.account ?? 'this account'}/${c.region}`;
    if (seen.has(where)) throw problem(`${field}[${i}]`, `copies to ${c.region} of ${c.account ?? 'this account'} a second time`, 'list each place once');
    seen.add(where);
  });
  return copies;
}

/** Where a copy goes, as the copy handover and the monitor name it: the Region, and the account
 * when it is another. */
export function destinationId(copy: CopyConfig): string {
  return copy.account ? `${copy.account}/${copy.region}` : copy.region;
}
