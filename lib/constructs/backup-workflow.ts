import { Duration, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as eventTargets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { ArrayConfig, ArrayDefaults } from '../config';
import { KeptPolicy } from '../fast-restore';
import { acknowledgeHandOver, copiesByArray, handOverStatements } from './copies';
import { Documents } from './documents';
import { FunctionFactory, FunctionSpec } from './functions';
import { lockSetSnapshots, Permissions, RestorePermissions } from './permissions';
import { lockPolicies } from '../snapshot-lock';
import { PricesConfig, runPriceTable } from '../prices-config';
import { acknowledge } from '../nag';
import { nagArn } from '../nag';
import { lockTableStatements } from './restore-workflow';
import { SnapshotSets } from './snapshot-sets';
import { LAMBDA_RETRY, Workflow, worstCaseRetrySeconds } from './workflow';

export interface BackupWorkflowProps {
  readonly factory: FunctionFactory;
  readonly documents: Documents;
  readonly defaults: ArrayDefaults;
  readonly arrays: readonly ArrayConfig[];
  /** The restore lock table: retention keeps the set a running restore holds. */
  readonly restoreLock?: dynamodb.ITable;
  /** Where each set's snapshots are recorded when it is taken. */
  readonly sets: SnapshotSets;
  /** Each array's fastRestore policy (none: no array keeps FSR on its sets). */
  readonly fastRestore?: Record<string, KeptPolicy>;
  /** The configuration's price overrides: an ended backup is priced with them. */
  readonly prices?: PricesConfig;
}

/** The snapshot step's Lambda timeout (FunctionFactory's default). */
const SNAPSHOT_TIMEOUT = Duration.seconds(60);

/** The longest the steps from Prepare to the end of the snapshot step (ResolveMembers, Freeze,
 * PollFreeze, TakeSnapshotSet) may take with the Retry each is deployed with (LAMBDA_RETRY:
 * each Task's retriers count their own attempts, so one throttled step after another adds up),
 * every attempt at its function's timeout: a backup holds its array against restores this long
 * past discovery and the freeze (lambdas/raidsnap/workflows/backup/prepare.py). Each step's
 * retries are counted once: a discovery or freeze poll retried at length in more than one round
 * is not (the hold then ends at this bound; a restore still asks whether the backup runs). */
export function heldStepsSeconds(functions: readonly lambda.Function[]): number {
  return functions.reduce(
    (sum, fn) => sum + worstCaseRetrySeconds(LAMBDA_RETRY, (fn.timeout ?? SNAPSHOT_TIMEOUT).toSeconds()), 0);
}

/** statemachines/backup.asl.json and the functions it calls, each with only its permissions. */
export class BackupWorkflow extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly functions: Record<string, lambda.Function>;

  constructor(scope: Construct, id: string, props: BackupWorkflowProps) {
    super(scope, id);
    const p = new Permissions(this);
    const docs = props.documents;
    const environment = {
      DISCOVER_DOCUMENT: docs.names.discover,
      FREEZE_DOCUMENT: docs.names.freeze,
      THAW_DOCUMENT: docs.names.thaw,
      DEFAULT_RETENTION: String(props.defaults.retention),
      MAX_FREEZE_SECONDS: String(props.defaults.maxFreezeSeconds),
      RETENTION_BY_ARRAY: JSON.stringify(Object.fromEntries(props.arrays.map((a) => [a.name, a.retention]))),
      // Each array's application hooks from the configuration (a run's input may override them).
      HOOKS_BY_ARRAY: JSON.stringify(Object.fromEntries(props.arrays.flatMap((a) => (a.hooks ? [[a.name, a.hooks]] : [])))),
      // Where each array's sets are copied (lib/copies.ts): Prepare plans the copy step by it.
      COPIES_BY_ARRAY: JSON.stringify(copiesByArray(this, props.arrays)),
      ...(props.restoreLock ? { RESTORE_LOCK_TABLE: props.restoreLock.tableName } : {}),
    };
    const lockStatements = (actions: string[]) => props.restoreLock ? lockTableStatements(props.restoreLock, actions) : [];
    const readLock = lockStatements(['GetItem']);
    // A backup holds its array until its snapshots are taken (its own entry in an item of the
    // restore lock table, added and removed with UpdateItem); whether the restore holding the
    // lock still runs is asked of Step Functions.
    const restoreName = `${Stack.of(this).stackName}-restore`;
    // A fixed name: the snapshot step asks whether its own run still runs (DescribeExecution)
    // without its policy depending on the state machine, which depends on the function.
    const backupName = `${Stack.of(this).stackName}-backup`;
    // PutItem: the array's recorded instance, when the configuration names the one it is on now.
    const holdArray = props.restoreLock
      ? [...lockStatements(['GetItem', 'UpdateItem', 'PutItem']), new RestorePermissions(this).describeExecutions(restoreName)]
      : [];
    const releaseHold = lockStatements(['UpdateItem']);
    const fsrGrants = new RestorePermissions(this);
    const locks = lockPolicies(props.arrays);
    const longestLock = Math.max(0, ...Object.values(locks).map((l) => l.days));
    const specs: FunctionSpec[] = [
      {
        id: 'BackupPrepare', module: 'backup_prepare',
        description: 'validate a backup request, find the array instance, start discovery',
        statements: [
          p.describe('ec2:DescribeInstances', 'ssm:DescribeInstanceInformation'),
          ...p.sendCommand(docs.arns('discover')),
          ...holdArray,
          // The array's recorded instance: the newest set's (raidsnap.aws.homes).
          ...props.sets.statements('Query'),
        ],
        // The arrays with a fastRestore policy, by name only (the policies are KeepFsr's): a
        // run that names one in takeWith is refused (lambdas/raidsnap/workflows/backup/together.py),
        // and the plan says whether KeepFsr has work (with the claim of a removed policy, read
        // from the lock table as the hold is).
        environment: { FAST_RESTORE_ARRAYS: JSON.stringify(Object.keys(props.fastRestore ?? {}).sort()) },
      },
      {
        id: 'BackupMembers', module: 'backup_members',
        description: 'resolve the member volumes from discovery or volume tags',
        statements: [p.describe('ec2:DescribeInstances', 'ec2:DescribeVolumes'), ...p.readCommands()],
      },
      {
        id: 'BackupFreeze', module: 'backup_freeze',
        description: 'freeze the array filesystem (bounded by a guard on the instance)',
        statements: p.sendCommand(docs.arns('freeze')),
      },
      {
        id: 'BackupThaw', module: 'backup_thaw',
        description: 'thaw the array filesystem',
        statements: p.sendCommand(docs.arns('thaw')),
      },
      {
        id: 'CommandPoll', module: 'command_poll',
        description: 'look at a running SSM command',
        statements: p.readCommands(),
      },
      {
        id: 'BackupSnapshot', module: 'backup_snapshot',
        description: 'take the multi-volume snapshot set of the members',
        timeout: SNAPSHOT_TIMEOUT,
        statements: [
          p.describe('ec2:DescribeInstances', 'ec2:DescribeVolumes', 'ec2:DescribeSnapshots'),
          ...p.createSnapshots(),
          p.manageTaggedSnapshots('ec2:CreateTags', 'ec2:DeleteSnapshot'),
          ...props.sets.statements('GetItem', 'PutItem'),
          // Its own run, right before CreateSnapshots: a run stopped by hand takes no snapshots.
          new RestorePermissions(this).describeExecutions(backupName),
        ],
      },
      {
        id: 'BackupCheck', module: 'backup_check',
        description: 'follow a snapshot set: wait for EBS to report it done, or look at its progress',
        statements: [
          p.describe('ec2:DescribeSnapshots'), ...props.sets.statements('GetItem'), ...releaseHold,
          // AwaitSnapshots: its token is written down under each set ("snapshots#..." items of
          // the lock table), read back when EBS's event comes, and answered.
          ...lockStatements(['PutItem', 'GetItem', 'DeleteItem']),
          new RestorePermissions(this).answerWaitingTask(),
        ],
      },
      {
        id: 'BackupRetention', module: 'backup_retention',
        description: 'lock the newest sets (the array lock policy), keep the newest complete sets and delete older ones',
        statements: [
          // DescribeLockedSnapshots: retention never asks to delete a locked snapshot.
          p.describe('ec2:DescribeSnapshots', 'ec2:DescribeVolumes', 'ec2:DescribeLockedSnapshots'),
          p.manageTaggedSnapshots('ec2:DeleteSnapshot'),
          // Only where some array has a lock policy, and never longer than the longest.
          ...(longestLock > 0 ? [lockSetSnapshots(p, longestLock)] : []),
          ...props.sets.statements('Query', 'DeleteItem'),
          ...readLock,
        ],
        environment: { LOCK_BY_ARRAY: JSON.stringify(locks) },
      },
      {
        id: 'BackupKeepFsr', module: 'backup_keep_fsr',
        description: 'keep Fast Snapshot Restore enabled on the newest sets (the array fastRestore policy)',
        statements: [
          p.describe('ec2:DescribeSnapshots', 'ec2:DescribeFastSnapshotRestores'),
          // On snapshots of raidsnap's sets only, as a restore's FSR grant.
          fsrGrants.fastSnapshotRestores('ec2:EnableFastSnapshotRestores', 'ec2:DisableFastSnapshotRestores'),
          fsrGrants.readFsrQuota(),
          // The policy's claim (an item of its own in the lock table, replaced under a version
          // condition, deleted once empty), the restore lock (a set a restore holds keeps FSR)
          // and the restores' FSR claims (Scan: a pair on before the policy claims it is taken
          // over only when a raidsnap restore enabled it; anyone else's is never turned off).
          ...lockStatements(['GetItem', 'PutItem', 'DeleteItem', 'Scan']),
        ],
        environment: { FAST_RESTORE_BY_ARRAY: JSON.stringify(props.fastRestore ?? {}) },
      },
      {
        id: 'BackupCopies', module: 'backup_copies',
        description: 'hand a new set to the copy workflow of each Region or account it is copied to, and follow the copies',
        statements: handOverStatements(this, props.arrays, props.sets),
        environment: { STACK_NAME: Stack.of(this).stackName },
        timeout: Duration.minutes(2),
      },
      {
        id: 'BackupCost', module: 'backup_cost',
        description: 'price an ended backup run from its history and publish RunCostUsd for its array',
        // Its run's history only (the rule on the backup's end names the run), and the FSR
        // its fastRestore policy turned on (DescribeFastSnapshotRestores).
        statements: [
          new iam.PolicyStatement({
            actions: ['states:GetExecutionHistory'],
            resources: [`arn:${Stack.of(this).partition}:states:${Stack.of(this).region}:${Stack.of(this).account}:execution:${backupName}:*`],
          }),
          p.describe('ec2:DescribeFastSnapshotRestores'),
        ],
        environment: { RUN_PRICES: runPriceTable(props.prices) },
      },
      {
        id: 'BackupFailed', module: 'backup_failed',
        description: 'thaw after a failed backup and name the error',
        statements: [
          ...p.sendCommand(docs.arns('thaw')),
          // With several arrays frozen, the hooked array's thaw waits for the others' to end.
          p.commandInvocations(),
          ...releaseHold,
          // A post hook that failed after the set was taken lowers the set's consistency label.
          p.manageTaggedSnapshots('ec2:CreateTags'),
        ],
      },
    ];
    this.functions = props.factory.createAll(this, specs.map((s) => ({ ...s, environment: { ...environment, ...s.environment } })));
    const f = this.functions;
    // The hold against restores lasts as long as the steps up to the snapshot step may
    // (prepare.py).
    f.BackupPrepare.addEnvironment('SNAPSHOT_STEP_SECONDS',
      String(heldStepsSeconds([f.BackupMembers, f.BackupFreeze, f.CommandPoll, f.BackupSnapshot])));
    acknowledgeHandOver(f.BackupCopies, props.arrays);
    const preparePolicy = f.BackupPrepare.role?.node.tryFindChild('DefaultPolicy');
    if (props.restoreLock && preparePolicy) {
      acknowledge(preparePolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${restoreName}:*`)}]`,
        'ask whether the restore holding the lock still runs: its execution is known only at run time');
    }
    this.stateMachine = new Workflow(this, 'Workflow', {
      definitionFile: 'backup.asl.json',
      comment: 'raidsnap backup: a crash-consistent snapshot set of an array, then retention and its fastRestore policy',
      // As statemachines/backup.asl.json: longer than a copy run it follows may take.
      timeout: Duration.hours(72),
      functions: {
        BackupPrepareFunctionArn: f.BackupPrepare,
        BackupMembersFunctionArn: f.BackupMembers,
        BackupFreezeFunctionArn: f.BackupFreeze,
        BackupThawFunctionArn: f.BackupThaw,
        CommandPollFunctionArn: f.CommandPoll,
        BackupSnapshotFunctionArn: f.BackupSnapshot,
        BackupCheckFunctionArn: f.BackupCheck,
        BackupRetentionFunctionArn: f.BackupRetention,
        BackupKeepFsrFunctionArn: f.BackupKeepFsr,
        BackupCopiesFunctionArn: f.BackupCopies,
        BackupFailedFunctionArn: f.BackupFailed,
      },
    }).stateMachine;
    if (props.arrays.some((a) => a.copies.length)) {
      // A run stopped by hand or past its timeout runs no Catch, and one that fails on its way
      // runs only ExplainFailure: none looks at its copies again. This rule sends every end
      // but success to the copy step, which takes back the share with a backup account and
      // records the copies it no longer follows (raidsnap.workflows.backup.copies_ended).
      new events.Rule(this, 'CopiesAbandoned', {
        description: 'raidsnap: after a backup failed, stopped or timed out, stop sharing its set and record its copies as no longer followed',
        eventPattern: {
          source: ['aws.states'],
          detailType: ['Step Functions Execution Status Change'],
          detail: { stateMachineArn: [this.stateMachine.stateMachineArn], status: ['FAILED', 'ABORTED', 'TIMED_OUT'] },
        },
        targets: [new eventTargets.LambdaFunction(f.BackupCopies, { retryAttempts: 8, maxEventAge: Duration.hours(6) })],
      });
    }
    // AwaitSnapshots waits for EBS's word that a CreateSnapshots call's snapshots are done
    // ("EBS Multi-Volume Snapshots Completion Status", event createSnapshots, result succeeded
    // or failed: Amazon EBS User Guide, "Amazon EventBridge events for Amazon EBS"). The event
    // names no tag, so every such call of the account reaches the function, which answers only
    // a run that wrote its token down under the snapshots' set.
    new events.Rule(this, 'SnapshotsCompleted', {
      description: 'raidsnap: a multi-volume snapshot set is done; answer the backup waiting on it',
      eventPattern: {
        source: ['aws.ec2'],
        detailType: ['EBS Multi-Volume Snapshots Completion Status'],
        detail: { event: ['createSnapshots'] },
      },
      targets: [new eventTargets.LambdaFunction(f.BackupCheck, { retryAttempts: 8, maxEventAge: Duration.hours(1) })],
    });
    // Every backup's end, whatever it was: the run is priced from its history once it ended
    // (raidsnap.workflows.backup.ended), for the dashboard's cost per array.
    new events.Rule(this, 'BackupEnded', {
      description: 'raidsnap: a backup run ended; price it and publish its cost for its array',
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: { stateMachineArn: [this.stateMachine.stateMachineArn], status: ['SUCCEEDED', 'FAILED', 'ABORTED', 'TIMED_OUT'] },
      },
      targets: [new eventTargets.LambdaFunction(f.BackupCost, { retryAttempts: 8, maxEventAge: Duration.hours(6) })],
    });
    (this.stateMachine.node.defaultChild as sfn.CfnStateMachine).stateMachineName = backupName;
    const costPolicy = f.BackupCost.role?.node.tryFindChild('DefaultPolicy');
    if (costPolicy) {
      acknowledge(costPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${backupName}:*`)}]`,
        'GetExecutionHistory of the backup workflow\'s own executions only: the ended run the rule names is known only at run time');
    }
    const snapshotPolicy = f.BackupSnapshot.role?.node.tryFindChild('DefaultPolicy');
    if (snapshotPolicy) {
      acknowledge(snapshotPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${backupName}:*`)}]`,
        'DescribeExecution of the backup workflow\'s own executions only: is the run about to snapshot still running?');
    }
  }
}
