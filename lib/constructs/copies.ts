import { Duration, Stack, Token } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct, IConstruct } from 'constructs';
import { ArrayConfig, ConfigError } from '../config';
import { CopyConfig, destinationId } from '../copies';
import { acknowledge } from '../nag';
import { FunctionFactory, FunctionSpec } from './functions';
import { ARRAY_TAG, Permissions, SET_ID_TAG } from './permissions';
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
        throw new ConfigError(`arrays.${a.name}.copies[${i}].region`, `is this stack's own Region (${stack.region}): a copy goes to another Region or account`);
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

  constructor(scope: Construct, id: string, props: CopyWorkflowProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const p = new Permissions(this);
    this.stateMachineName = copyWorkflowName(stack.stackName);
    const executions = `arn:${stack.partition}:states:${stack.region}:${stack.account}:execution:${this.stateMachineName}:*`;
    const copiesHere = `arn:${stack.partition}:ec2:${stack.region}::snapshot/*`;
    // The copies carry the set's tags and this workflow's run from the moment they exist
    // (CopySnapshot's TagSpecifications; its resource-level permissions "apply to both the
    // snapshot copy and the source snapshot": Service Authorization Reference, ec2:CopySnapshot).
    const makeCopies = [
      new iam.PolicyStatement({
        actions: ['ec2:CopySnapshot'],
        resources: [copiesHere],
        conditions: {
          StringLike: {
            [`aws:RequestTag/${ARRAY_TAG}`]: '*',
            [`aws:RequestTag/${SET_ID_TAG}`]: '*',
            [`aws:RequestTag/${COPY_EXECUTION_TAG}`]: executions,
          },
        },
      }),
      // The source, in any Region (where the set was taken): a snapshot of this account. For
      // CopySnapshot the reference lists no aws:ResourceTag key on the snapshot (only
      // aws:RequestTag, aws:TagKeys and ec2:* keys such as ec2:Owner), so its owner scopes it.
      new iam.PolicyStatement({
        actions: ['ec2:CopySnapshot'],
        resources: [`arn:${stack.partition}:ec2:*::snapshot/*`],
        conditions: { StringEquals: { 'ec2:Owner': [stack.account] } },
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
    const specs: FunctionSpec[] = [
      {
        id: 'CopyPrepare', module: 'copy_prepare',
        description: 'check a copy request against the source set and record the copy intent',
        statements: [p.describe('ec2:DescribeSnapshots'), ...props.sets.statements('GetItem', 'PutItem')],
      },
      {
        id: 'CopyProgress', module: 'copy_progress',
        description: 'start the copies of a set the Region has room for and follow them',
        statements: [p.describe('ec2:DescribeSnapshots'), ...makeCopies, ...props.sets.statements('GetItem', 'PutItem')],
      },
      {
        id: 'CopyFinish', module: 'copy_finish',
        description: 'record a copied set complete and keep the newest copied sets',
        statements: [
          p.describe('ec2:DescribeSnapshots', 'ec2:DescribeVolumes'),
          p.manageTaggedSnapshots('ec2:DeleteSnapshot'),
          ...props.sets.statements('GetItem', 'PutItem', 'Query', 'DeleteItem'),
          ...props.lock.statements('GetItem'),
        ],
      },
      {
        id: 'CopyFailed', module: 'copy_failed',
        description: 'delete the copies a failed copy run made and name the failure',
        statements: [p.describe('ec2:DescribeSnapshots'), deleteCopies, ...props.sets.statements('GetItem', 'DeleteItem')],
      },
    ];
    const environment = { RESTORE_LOCK_TABLE: props.lock.table.tableName };
    this.functions = props.factory.createAll(this, specs.map((s) => ({ ...s, environment })));
    this.encryptedCopies(this.functions.CopyProgress);
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
  }

  /** A copy encrypted with a customer managed key (the request's kmsKeyId, or the source's key
   * where the source is encrypted) is made by EC2 with that key on the caller's behalf, as a
   * volume is ("Share the KMS key used to encrypt a shared Amazon EBS snapshot", EBS User Guide,
   * lists what a copier needs of the key: DescribeKey, CreateGrant, GenerateDataKey*,
   * ReEncrypt*, Decrypt). Only through EC2 (kms:ViaService), on keys of this account: the copy's
   * key is in this Region, the source's in the Region the set was taken in. */
  private encryptedCopies(fn: lambda.Function): void {
    const stack = Stack.of(this);
    const keys = `arn:${stack.partition}:kms:*:${stack.account}:key/*`;
    const viaEc2 = { 'kms:ViaService': 'ec2.*.amazonaws.com' };
    fn.addToRolePolicy(new iam.PolicyStatement({
      actions: ['kms:Decrypt', 'kms:DescribeKey', 'kms:GenerateDataKeyWithoutPlaintext', 'kms:ReEncryptFrom', 'kms:ReEncryptTo'],
      resources: [keys],
      conditions: { StringLike: viaEc2 },
    }));
    fn.addToRolePolicy(new iam.PolicyStatement({
      actions: ['kms:CreateGrant'],
      resources: [keys],
      conditions: { StringLike: viaEc2, Bool: { 'kms:GrantIsForAWSResource': 'true' } },
    }));
    const policy = fn.role?.node.tryFindChild('DefaultPolicy');
    if (policy) {
      acknowledge(policy, `AwsSolutions-IAM5[Resource::${nagPattern(keys)}]`,
        'the copies\' and the sources\' keys are the operator\'s and unknown at deploy time; use is limited by condition to EC2 (kms:ViaService) and grants to those EC2 makes for AWS resources');
    }
  }
}
