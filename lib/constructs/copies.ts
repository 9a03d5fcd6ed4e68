import { CfnOutput, Duration, Stack, Token } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct, IConstruct } from 'constructs';
import { ArrayConfig, ConfigError } from '../config';
import { CopyConfig, destinationId } from '../copies';
import { acknowledge } from '../nag';
import { FunctionFactory, FunctionSpec } from './functions';
import { ARRAY_TAG, lockSetSnapshots, Permissions, SET_ID_TAG } from './permissions';
import { lockPolicies } from '../snapshot-lock';
import { nagPattern, RestoreLock } from './restore-workflow';
import { SnapshotSets } from './snapshot-sets';
import { Workflow } from './workflow';

export const COPY_EXECUTION_TAG = 'raidsnap:copy-execution';

/** The name of a stack's copy workflow: fixed, so that a stack in another Region or account can
 * start it by name (and be granted exactly that). */
export function copyWorkflowName(stackName: string): string {
  return `${stackName}-copy`;
}

/** What the backup's copy step gets of each array's copies (COPIES_BY_ARRAY). */
export function copiesByArray(scope: IConstruct, arrays: readonly ArrayConfig[]): Record<string, object[]> {
  const stack = Stack.of(scope);
  for (const a of arrays) {
    a.copies.forEach((c, i) => {
      // Known at synth only for a stack deployed to a named Region and account (env).
      const sameAccount = !c.account || (!Token.isUnresolved(stack.account) && c.account === stack.account);
      if (!Token.isUnresolved(stack.region) && c.region === stack.region && sameAccount) {
        throw new ConfigError(`arrays.${a.name}.copies[${i}].region`, `is this stack's own Region (${stack.region})`,
          'copy to another Region, or give the backup account that copies go to as account');
      }
    });
  }
  return Object.fromEntries(arrays.filter((a) => a.copies.length).map((a) => [a.name, a.copies.map((c) => ({
    id: destinationId(c),
    region: c.region,
    account: c.account ?? stack.account,
    retention: c.retention,
    stateMachineArn: copyMachineArn(scope, c),
    ...(c.roleArn ? { roleArn: c.roleArn } : {}),
    ...(c.kmsKeyArn ? { kmsKeyArn: c.kmsKeyArn } : {}),
  }))]));
}

function copyMachineArn(scope: IConstruct, c: CopyConfig): string {
  const stack = Stack.of(scope);
  return `arn:${stack.partition}:states:${c.region}:${c.account ?? stack.account}:stateMachine:${copyWorkflowName(c.stackName ?? stack.stackName)}`;
}

/** The backup's copy step (the source side): start each destination's copy workflow with the
 * set and follow it; a copy to another account first shares the set's snapshots with it and
 * starts the copy as the role that account's stack lets this one assume. */
export function handOverStatements(scope: IConstruct, arrays: readonly ArrayConfig[], sets: SnapshotSets): iam.PolicyStatement[] {
  const stack = Stack.of(scope);
  const p = new Permissions(scope);
  const copies = arrays.flatMap((a) => a.copies);
  // No array is copied anywhere: the step never runs, and may do nothing.
  if (!copies.length) return [];
  const statements = [
    // The set's snapshots and their tags go with the request (another account cannot read them).
    p.describe('ec2:DescribeSnapshots'),
    // The set's record of where it was copied and how that went.
    ...sets.statements('GetItem', 'UpdateItem'),
  ];
  const here = copies.filter((c) => !c.account || c.account === stack.account);
  if (here.length) {
    const machines = [...new Set(here.map((c) => copyMachineArn(scope, c)))];
    statements.push(
      new iam.PolicyStatement({ actions: ['states:StartExecution'], resources: machines }),
      new iam.PolicyStatement({
        actions: ['states:DescribeExecution'],
        resources: machines.map((m) => `${m.replace(':stateMachine:', ':execution:')}:*`),
      }),
    );
  }
  const roles = [...new Set(copies.map((c) => c.roleArn).filter((r): r is string => Boolean(r)))];
  if (roles.length) statements.push(new iam.PolicyStatement({ actions: ['sts:AssumeRole'], resources: roles }));
  const accounts = [...new Set(copies.map((c) => c.account).filter((a): a is string => Boolean(a) && a !== stack.account))];
  if (accounts.length) {
    // Share a set's snapshots with the backup accounts, and stop sharing them once copied
    // (ModifySnapshotAttribute, createVolumePermission): only snapshots of raidsnap sets, and
    // only with those accounts (ec2:Add/userId, ec2:Remove/userId: Service Authorization
    // Reference, ec2:ModifySnapshotAttribute), and never with a group: the same call may add
    // GroupNames ["all"] (public) alongside the account (API reference, ModifySnapshotAttribute),
    // so ec2:Add/group must be absent (Null).
    const snapshots = [`arn:${stack.partition}:ec2:${stack.region}::snapshot/*`];
    const ofSets = { [`aws:ResourceTag/${ARRAY_TAG}`]: '*', [`aws:ResourceTag/${SET_ID_TAG}`]: '*' };
    for (const key of ['ec2:Add/userId', 'ec2:Remove/userId']) {
      statements.push(new iam.PolicyStatement({
        actions: ['ec2:ModifySnapshotAttribute'],
        resources: snapshots,
        conditions: { StringLike: ofSets, StringEquals: { [key]: accounts }, Null: { 'ec2:Add/group': 'true' } },
      }));
    }
  }
  return statements;
}

/** Acknowledge the copy step's execution ARNs: the destination's copy runs are known only once
 * started. */
export function acknowledgeHandOver(fn: lambda.Function, arrays: readonly ArrayConfig[]): void {
  const policy = fn.role?.node.tryFindChild('DefaultPolicy');
  if (!policy) return;
  const stack = Stack.of(fn);
  for (const c of arrays.flatMap((a) => a.copies).filter((x) => !x.account || x.account === stack.account)) {
    const executions = `${copyMachineArn(fn, c).replace(':stateMachine:', ':execution:')}:*`;
    acknowledge(policy, `AwsSolutions-IAM5[Resource::${nagPattern(executions)}]`,
      'DescribeExecution of the destination\'s copy workflow only: the copy runs this step started are known only once started');
  }
}

export interface CopyWorkflowProps {
  readonly factory: FunctionFactory;
  readonly sets: SnapshotSets;
  readonly lock: RestoreLock;
  /** Accounts whose stacks may have this one copy their sets (acceptCopiesFrom). */
  readonly sourceAccounts?: readonly string[];
  /** This stack's arrays: an array's lock policy here locks its newest copied sets here. */
  readonly arrays?: readonly ArrayConfig[];
  /** This stack's default retention: the fewest copied sets of an array kept per source. */
  readonly defaultRetention?: number;
}

/** The role a source stack of another account assumes to start a copy here: named, so that
 * its config can name it (copies[].roleArn). Its name carries the Region: "IAM user, group,
 * role, and policy names must be unique within the account" (IAM API reference, CreateRole,
 * RoleName), and the backup account's stack of one name is deployed in each Region copies go
 * to. */
export function copyRequestsRoleName(stackName: string, region: string): string {
  return `${stackName}-copy-requests-${region}`;
}

// A first copy to a Region is a full copy; the run's own limit (raidsnap.workflows.copy.progress
// TIME_LIMIT, 36 hours) fails it, and deletes its copies, well before this.
const TIMEOUT = Duration.hours(48);

/** statemachines/copy.asl.json: copies of a set made in this stack's Region (and account) from
 * where it was taken, recorded here as a set once all are completed. Every stack has it, named
 * `<stackName>-copy`: a source stack starts it by that name. */
export class CopyWorkflow extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly stateMachineName: string;
  readonly functions: Record<string, lambda.Function>;
  /** The role source accounts assume to start copies here (with acceptCopiesFrom only). */
  readonly requestsRole?: iam.Role;

  constructor(scope: Construct, id: string, props: CopyWorkflowProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const p = new Permissions(this);
    const sources = (props.sourceAccounts ?? []).filter((a) => a !== stack.account);
    this.stateMachineName = copyWorkflowName(stack.stackName);
    const executions = `arn:${stack.partition}:states:${stack.region}:${stack.account}:execution:${this.stateMachineName}:*`;
    const copiesHere = `arn:${stack.partition}:ec2:${stack.region}::snapshot/*`;
    // CopySnapshot's resource-level permissions "apply to both the snapshot copy and the source
    // snapshot" (Service Authorization Reference, Amazon EC2, ec2:CopySnapshot): one statement
    // must hold for both. Its keys there are aws:RequestTag, aws:TagKeys and ec2:* keys such as
    // ec2:Owner, but no aws:ResourceTag: IAM cannot tell a set's snapshot from any other of the
    // same owner (Prepare copies only the snapshots the source's manifest lists). The request's
    // tags are in the context for both resources: no copy is made without the set's tags and
    // this workflow's run. The source, in any Region (where the set was taken), is a snapshot of
    // this account or of an account it accepts copies from (ec2:Owner); the copy is made here
    // and belongs to this account, and whether EC2 gives it an ec2:Owner key is not documented,
    // so the owner is checked where the key exists.
    const makeCopies = [
      new iam.PolicyStatement({
        actions: ['ec2:CopySnapshot'],
        resources: [`arn:${stack.partition}:ec2:*::snapshot/*`],
        conditions: {
          StringLike: {
            [`aws:RequestTag/${ARRAY_TAG}`]: '*',
            [`aws:RequestTag/${SET_ID_TAG}`]: '*',
            [`aws:RequestTag/${COPY_EXECUTION_TAG}`]: executions,
          },
          StringEqualsIfExists: { 'ec2:Owner': [stack.account, ...sources] },
        },
      }),
      new iam.PolicyStatement({
        actions: ['ec2:CreateTags'],
        resources: [copiesHere],
        conditions: { StringEquals: { 'ec2:CreateAction': 'CopySnapshot' } },
      }),
    ];
    // Delete only copies this workflow made (they carry one of its runs).
    const deleteCopies = new iam.PolicyStatement({
      actions: ['ec2:DeleteSnapshot'],
      resources: [copiesHere],
      conditions: {
        StringLike: {
          [`aws:ResourceTag/${ARRAY_TAG}`]: '*',
          [`aws:ResourceTag/${SET_ID_TAG}`]: '*',
          [`aws:ResourceTag/${COPY_EXECUTION_TAG}`]: executions,
        },
      },
    });
    const locks = lockPolicies(props.arrays ?? []);
    const longestLock = Math.max(0, ...Object.values(locks).map((l) => l.days));
    const specs: FunctionSpec[] = [
      {
        id: 'CopyPrepare', module: 'copy_prepare',
        description: 'check a copy request against the source set and record the copy intent',
        // Query: an array of this name taken here (another md UUID) refuses the copy.
        statements: [p.describe('ec2:DescribeSnapshots'), ...props.sets.statements('GetItem', 'PutItem', 'Query')],
      },
      {
        id: 'CopyProgress', module: 'copy_progress',
        description: 'start the copies of a set the Region has room for and follow them',
        statements: [p.describe('ec2:DescribeSnapshots'), ...makeCopies, ...props.sets.statements('GetItem', 'PutItem')],
      },
      {
        id: 'CopyFinish', module: 'copy_finish',
        description: 'record a copied set complete, lock the newest copied sets and keep the newest',
        statements: [
          // DescribeLockedSnapshots: retention here never asks to delete a locked snapshot.
          p.describe('ec2:DescribeSnapshots', 'ec2:DescribeVolumes', 'ec2:DescribeLockedSnapshots'),
          p.manageTaggedSnapshots('ec2:DeleteSnapshot'),
          // This stack's own lock policies (a source never decides how long copies here are
          // locked), on set snapshots only and never longer than the longest of them.
          ...(longestLock > 0 ? [lockSetSnapshots(p, longestLock)] : []),
          ...props.sets.statements('GetItem', 'PutItem', 'Query', 'DeleteItem'),
          ...props.lock.statements('GetItem'),
        ],
        environment: {
          LOCK_BY_ARRAY: JSON.stringify(locks),
          // This stack's own retention, which a copy request may raise but never lower.
          DEFAULT_RETENTION: String(props.defaultRetention ?? 7),
          RETENTION_BY_ARRAY: JSON.stringify(Object.fromEntries((props.arrays ?? []).map((a) => [a.name, a.retention]))),
        },
      },
      {
        id: 'CopyFailed', module: 'copy_failed',
        description: 'delete the copies a failed copy run made and name the failure',
        statements: [p.describe('ec2:DescribeSnapshots'), deleteCopies, ...props.sets.statements('GetItem', 'DeleteItem')],
      },
    ];
    const environment = { RESTORE_LOCK_TABLE: props.lock.table.tableName };
    this.functions = props.factory.createAll(this, specs.map((s) => ({ ...s, environment: { ...environment, ...s.environment } })));
    this.encryptedCopies(this.functions.CopyProgress, sources);
    const f = this.functions;
    this.stateMachine = new Workflow(this, 'Workflow', {
      definitionFile: 'copy.asl.json',
      comment: 'raidsnap copy: a set copied here from another Region or account, recorded here as a set of its own',
      timeout: TIMEOUT,
      functions: {
        CopyPrepareFunctionArn: f.CopyPrepare,
        CopyProgressFunctionArn: f.CopyProgress,
        CopyFinishFunctionArn: f.CopyFinish,
        CopyFailedFunctionArn: f.CopyFailed,
      },
    }).stateMachine;
    (this.stateMachine.node.defaultChild as sfn.CfnStateMachine).stateMachineName = this.stateMachineName;
    if (sources.length) this.requestsRole = this.acceptRequests(sources, executions);
  }

  /** The role the source accounts' stacks assume to start a copy here and follow it, and
   * nothing else: it can neither read nor delete anything of this account. Trusted by those
   * accounts (their own IAM decides who may assume it: their stacks' copy step). */
  private acceptRequests(sources: readonly string[], executions: string): iam.Role {
    const stack = Stack.of(this);
    const role = new iam.Role(this, 'Requests', {
      roleName: copyRequestsRoleName(stack.stackName, stack.region),
      assumedBy: new iam.CompositePrincipal(...sources.map((a) => new iam.AccountPrincipal(a))),
      description: 'raidsnap: lets the source accounts\' raidsnap stacks start and follow copies of their sets into this account',
    });
    role.addToPolicy(new iam.PolicyStatement({
      actions: ['states:StartExecution'],
      resources: [`arn:${stack.partition}:states:${stack.region}:${stack.account}:stateMachine:${this.stateMachineName}`],
    }));
    role.addToPolicy(new iam.PolicyStatement({ actions: ['states:DescribeExecution'], resources: [executions] }));
    const policy = role.node.tryFindChild('DefaultPolicy');
    if (policy) {
      acknowledge(policy, `AwsSolutions-IAM5[Resource::${nagPattern(executions)}]`,
        'DescribeExecution of this stack\'s copy workflow only: a copy run is known only once started');
    }
    new CfnOutput(this, 'RequestsRoleArn', {
      description: 'raidsnap: the roleArn a source account\'s config names for copies into this account (arrays.<name>.copies[].roleArn)',
      value: role.roleArn,
    });
    return role;
  }

  /** A copy encrypted with a customer managed key (the request's kmsKeyId, or the source's key
   * where the source is encrypted) is made by EC2 with that key on the caller's behalf, as a
   * volume is ("Share the KMS key used to encrypt a shared Amazon EBS snapshot", EBS User Guide,
   * lists what a copier needs of the key: DescribeKey, CreateGrant, GenerateDataKey*,
   * ReEncrypt*, Decrypt). Only through EC2 (kms:ViaService), on keys of this account: the copy's
   * key is in this Region, the source's in the Region the set was taken in. */
  private encryptedCopies(fn: lambda.Function, sources: readonly string[]): void {
    const stack = Stack.of(this);
    // A shared snapshot's key is its owner's, which that account's key policy must let this
    // account use ("Share the KMS key used to encrypt a shared Amazon EBS snapshot").
    const keys = [stack.account, ...sources].map((a) => `arn:${stack.partition}:kms:*:${a}:key/*`);
    const viaEc2 = { 'kms:ViaService': 'ec2.*.amazonaws.com' };
    fn.addToRolePolicy(new iam.PolicyStatement({
      actions: ['kms:Decrypt', 'kms:DescribeKey', 'kms:GenerateDataKeyWithoutPlaintext', 'kms:ReEncryptFrom', 'kms:ReEncryptTo'],
      resources: keys,
      conditions: { StringLike: viaEc2 },
    }));
    fn.addToRolePolicy(new iam.PolicyStatement({
      actions: ['kms:CreateGrant'],
      resources: keys,
      conditions: { StringLike: viaEc2, Bool: { 'kms:GrantIsForAWSResource': 'true' } },
    }));
    const policy = fn.role?.node.tryFindChild('DefaultPolicy');
    for (const pattern of keys) {
      if (!policy) break;
      acknowledge(policy, `AwsSolutions-IAM5[Resource::${nagPattern(pattern)}]`,
        'the copies\' and the sources\' keys are the operator\'s and unknown at deploy time; use is limited by condition to EC2 (kms:ViaService) and grants to those EC2 makes for AWS resources');
    }
  }
}
