import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as eventTargets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { ArrayConfig, ArrayDefaults } from '../config';
import { acknowledge } from '../nag';
import { PricesConfig, runPriceTable } from '../prices-config';
import { Documents } from './documents';
import { stackKey } from './encryption';
import { FunctionFactory, FunctionSpec } from './functions';
import { RestorePermissions } from './permissions';
import { SnapshotSets } from './snapshot-sets';
import { Workflow } from './workflow';

/** A resource ARN as cdk-nag prints it in a finding id: pseudo-parameter tokens become
 * `<AWS::...>`, values known at synth stay as they are. */
export function nagPattern(resource: string): string {
  return resource
    .replace(/\$\{Token\[AWS\.Partition\.\d+\]\}/, '<AWS::Partition>')
    .replace(/\$\{Token\[AWS\.Region\.\d+\]\}/, '<AWS::Region>')
    .replace(/\$\{Token\[AWS\.AccountId\.\d+\]\}/, '<AWS::AccountId>');
}

/** The backup state machine's name, as the template resolves it (it has no fixed name). */
function backupName(backup: sfn.StateMachine): string {
  return (backup.node.defaultChild as sfn.CfnStateMachine).attrName;
}

/** One item per array while a restore of it runs: the execution that holds it and its set. */
export class RestoreLock extends Construct {
  readonly table: dynamodb.Table;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'array', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      timeToLiveAttribute: 'expiresAt',
      encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: stackKey(this),
      // Locks, claims and records of runs; the fastRestore policies' claims outlive runs: the
      // sweeper's custom resource turns their FSR off when the stack is deleted, before this
      // table goes (lib/constructs/sweeper.ts).
      removalPolicy: RemovalPolicy.DESTROY,
    });
  }

  /** Plain item access on this table only (without the key: see statements()). */
  statement(...actions: string[]): iam.PolicyStatement {
    return lockTableStatements(this.table, actions)[0];
  }

  /** Item access on this table only, and use of the table's key through DynamoDB only. */
  statements(...actions: string[]): iam.PolicyStatement[] {
    return lockTableStatements(this.table, actions);
  }
}

/** Item actions on the lock table, with the KMS actions DynamoDB performs for the caller on the
 * table's customer-managed key (reads decrypt; writes also encrypt). */
export function lockTableStatements(table: dynamodb.ITable, actions: string[]): iam.PolicyStatement[] {
  const statements = [new iam.PolicyStatement({
    actions: actions.map((a) => `dynamodb:${a}`),
    resources: [table.tableArn],
  })];
  if (table.encryptionKey) {
    const writes = actions.some((a) => !/^(Get|Query|Scan|Describe)/.test(a));
    statements.push(new iam.PolicyStatement({
      actions: writes
        ? ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:ReEncryptFrom', 'kms:ReEncryptTo']
        : ['kms:Decrypt', 'kms:DescribeKey'],
      resources: [table.encryptionKey.keyArn],
      conditions: { StringEquals: { 'kms:ViaService': `dynamodb.${Stack.of(table).region}.amazonaws.com` } },
    }));
  }
  return statements;
}

export interface RestoreWorkflowProps {
  readonly factory: FunctionFactory;
  readonly documents: Documents;
  readonly defaults: ArrayDefaults;
  readonly arrays: readonly ArrayConfig[];
  readonly lock: RestoreLock;
  /** The shared CommandPoll function (made by the backup workflow). */
  readonly commandPoll: lambda.IFunction;
  /** The sets' manifests: a restore reads which snapshots make a set. */
  readonly sets: SnapshotSets;
  /** The config's overrides of the list prices a run's cost is computed with. */
  readonly prices?: PricesConfig;
  /** The backup workflow: is the backup holding an array still running? */
  readonly backup?: sfn.StateMachine;
}

// The restore reaches its lock table, documents and functions for 3 days at most: a prewarm of
// a large array may read for up to 48 hours (the prewarm document's own limit). The recovery's
// StartRestore Task waits this long and 15 minutes more (statemachines/recovery.asl.json,
// test/recovery.test.ts).
export const RESTORE_TIMEOUT = Duration.days(3);
const TIMEOUT = RESTORE_TIMEOUT;

/** statemachines/restore.asl.json and the functions it calls, each with only its permissions. */
export class RestoreWorkflow extends Construct {
  readonly stateMachine: sfn.StateMachine;
  /** The per-deployment secret in every run's nonce (raidsnap.aws.run_secret): without it, no
   * one can compute a run's nonce from what Step Functions shows of the run. */
  readonly runSecret: secretsmanager.Secret;
  readonly functions: Record<string, lambda.Function>;
  readonly stateMachineName: string;
  /** Restore ends that never reached the function telling a waiting workflow, after all of
   * EventBridge's retries; and the alarm that says one is there. */
  readonly endedDeadLetters: sqs.Queue;
  readonly endedDeadLettersAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: RestoreWorkflowProps) {
    super(scope, id);
    const p = new RestorePermissions(this);
    const docs = props.documents;
    const lock = props.lock;
    this.stateMachineName = `${Stack.of(this).stackName}-restore`;
    this.runSecret = new secretsmanager.Secret(this, 'RunSecret', {
      description: 'raidsnap: the key of every restore run\'s nonce (an HMAC of its execution ARN and start time); generated, never shown',
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // Encrypted with the stack key. Set on the resource itself: the construct's encryptionKey
    // would also add a key-policy statement for every principal of the account through Secrets
    // Manager, which the key's delegation to IAM makes needless (each reader's own policy
    // grants kms:Decrypt through Secrets Manager: Permissions.readRunSecret).
    (this.runSecret.node.defaultChild as secretsmanager.CfnSecret).kmsKeyId = stackKey(this).keyArn;
    acknowledge(this.runSecret, 'AwsSolutions-SMG4',
      'not a credential: it keys the nonce each run tags its volumes with, and a new value would leave the runs in flight unable to name their own volumes');
    const environment = {
      RUN_NONCE_SECRET: this.runSecret.secretArn,
      ASSEMBLE_DOCUMENT: docs.names.assemble,
      RELEASE_DOCUMENT: docs.names.release,
      PREWARM_DOCUMENT: docs.names.prewarm,
      DISCOVER_DOCUMENT: docs.names.discover,
      LOCK_TABLE: lock.table.tableName,
      LOCK_LEASE_SECONDS: String(TIMEOUT.toSeconds()),
      DEFAULT_INITIALIZATION: props.defaults.initialization,
      INITIALIZATION_BY_ARRAY: JSON.stringify(Object.fromEntries(props.arrays.map((a) => [a.name, a.initialization]))),
      // The table Finish prices the run's cost with (lib/prices-config.ts).
      RUN_PRICES: runPriceTable(props.prices),
    };
    const specs: FunctionSpec[] = [
      {
        id: 'RestorePrepare', module: 'restore_prepare',
        description: 'validate a restore request, resolve set and target, take the restore lock',
        statements: [
          p.describe('ec2:DescribeInstances', 'ec2:DescribeSnapshots', 'ec2:DescribeVolumes', 'ssm:DescribeInstanceInformation'),
          // initialization auto: the target type's EBS bandwidth, the set's FSR state in its AZ,
          // and (only when a way that enables FSR would win) the Region's FSR quota.
          p.describe('ec2:DescribeInstanceTypes', 'ec2:DescribeFastSnapshotRestores'),
          p.readFsrQuota(),
          // A set whose members were deleted into the Recycle Bin: which ones, to say how to
          // get them back (List, resource "*" only: Service Authorization Reference).
          p.describe('ec2:ListSnapshotsInRecycleBin'),
          // DeleteItem: a refusal made under the lock gives it back.
          ...lock.statements('GetItem', 'PutItem', 'DeleteItem'),
          ...props.sets.statements('GetItem', 'Query'),
          p.describeExecutions(this.stateMachineName),
          // A backup's hold counts only while the backup runs (one stopped by hand never lets go).
          ...(props.backup ? [p.describeExecutions(backupName(props.backup))] : []),
          ...p.readRunSecret(this.runSecret),
        ],
      },
      {
        id: 'RestoreFsr', module: 'restore_fsr',
        description: 'enable Fast Snapshot Restore for the set in the target AZ and follow it',
        statements: [
          p.describe('ec2:DescribeFastSnapshotRestores'),
          p.fastSnapshotRestores('ec2:EnableFastSnapshotRestores', 'ec2:DisableFastSnapshotRestores'),
          p.readFsrQuota(),
          // Its own FSR claim, and the others' (is FSR that is on already someone else's?), and
          // the array's fastRestore claim (pairs the policy keeps are never this run's).
          ...lock.statements('UpdateItem', 'Scan', 'GetItem'),
          p.describeExecutions(this.stateMachineName),
        ],
      },
      {
        id: 'RestoreCreateVolumes', module: 'restore_create_volumes',
        description: 'create the member volumes of a restore and record them as the run\'s own',
        // UpdateItem: the run's record of the volumes it created (all its cleanups may delete).
        statements: [...p.createVolumes(), ...lock.statements('UpdateItem')],
      },
      {
        id: 'RestoreCheckVolumes', module: 'restore_check_volumes',
        description: 'follow the new volumes and disable the FSR of this run once they exist',
        statements: [
          p.describe('ec2:DescribeVolumes'),
          p.fastSnapshotRestores('ec2:DisableFastSnapshotRestores'),
          // The array's fastRestore claim: a pair the policy took over stays on.
          ...lock.statements('GetItem'),
        ],
      },
      {
        id: 'RestoreCommand', module: 'restore_command',
        description: 'run the release, assemble or prewarm document on the target',
        statements: p.sendCommand(docs.arns('release', 'assemble', 'prewarm')),
      },
      {
        id: 'RestoreDetachOld', module: 'restore_detach_old',
        description: 'replace mode: tag the old members replaced-by and detach them',
        statements: [
          p.describe('ec2:DescribeInstances', 'ec2:DescribeVolumes'),
          ...p.replaceOldMembers(this.stateMachineName),
        ],
      },
      {
        id: 'RestoreAttach', module: 'restore_attach',
        description: 'attach the new volumes to the target in member order',
        statements: [
          p.describe('ec2:DescribeInstances', 'ec2:DescribeVolumes'),
          ...p.manageRestoredVolumes('ec2:AttachVolume'),
          p.tagArrayInstance(),
        ],
      },
      {
        id: 'RestoreFinish', module: 'restore_finish',
        description: 'release the restore lock and shape the output',
        statements: [
          // PutItem: the target recorded as the array's instance when the restore made it so.
          ...lock.statements('DeleteItem', 'GetItem', 'PutItem'),
          ...props.sets.statements('Query'),
          p.describe('ec2:DescribeInstances'),
          // One more look at a prewarm the workflow could not follow, to say how far it got.
          p.readCommands()[0],
          p.tagRestoredIdentity(this.stateMachineName),
          // The run's own history, which its cost is read from (raidsnap.aws.costs).
          new iam.PolicyStatement({
            actions: ['states:GetExecutionHistory'],
            resources: [`${p.executionArnPrefix(this.stateMachineName)}*`],
          }),
          // raidsnap:array:<array>=<md UUID> on the target follows the array's new md UUID.
          p.tagFurtherArrayIdentity(),
        ],
      },
      {
        id: 'RestoreReport', module: 'restore_report',
        description: 'tell the workflow waiting on a restore (its record in the lock table) that the array is mounted, or that the run failed',
        // GetItem: who waits (callback#<run name>); UpdateItem: what the run reached, written
        // back for a parent that hears nothing.
        statements: [p.answerWaitingTask(), ...lock.statements('GetItem', 'UpdateItem')],
      },
      {
        id: 'RestoreEnded', module: 'restore_ended',
        description: 'a restore ended: tell the workflow still waiting on it (its record in the lock table), if one does',
        statements: [p.answerWaitingTask(), ...lock.statements('GetItem')],
      },
      {
        id: 'RestoreCleanup', module: 'restore_cleanup',
        description: 'after a failed restore: remove only what the run created, release its lock',
        statements: [
          // DescribeInstances: whether the target carries the tag the run put on it.
          p.describe('ec2:DescribeVolumes', 'ec2:DescribeInstances'),
          // Before detaching an attached volume: does any md device or mount use it? And after a
          // replace released the array: assemble it again from its old members (put back).
          ...p.sendCommand(docs.arns('discover', 'release', 'assemble')),
          p.readCommands()[0],
          ...p.manageRestoredVolumes('ec2:DetachVolume', 'ec2:DeleteVolume'),
          p.fastSnapshotRestores('ec2:DisableFastSnapshotRestores'),
          p.untagArrayInstance(),
          p.untagReplacedMembers(this.stateMachineName),
          // ... and attach back the old members the replace had detached, before that.
          ...p.reattachReplacedMembers(this.stateMachineName),
          // A failed run whose array was assembled and mounted keeps it: its md UUID is recorded.
          p.tagRestoredIdentity(this.stateMachineName),
          p.tagFurtherArrayIdentity(),
          ...lock.statements('GetItem', 'DeleteItem'),
        ],
      },
      {
        id: 'RestoreAbandoned', module: 'restore_abandoned',
        description: 'after a restore stopped or timed out: its FSR off, its lock released, its unattached volumes deleted',
        statements: [
          // DescribeInstances: whether the new target still carries the tag the run put on it.
          p.describe('ec2:DescribeVolumes', 'ec2:DescribeInstances'),
          ...p.manageRestoredVolumes('ec2:DeleteVolume'),
          p.fastSnapshotRestores('ec2:DisableFastSnapshotRestores'),
          ...lock.statements('GetItem', 'DeleteItem', 'Scan'),
          // The run's nonce, from its ARN and start time: which volumes and record are its own.
          ...p.readRunSecret(this.runSecret),
          // The run's plan and how far it got (did it tag a new target, did it assemble?), and
          // the tag it put on a target it never assembled on.
          new iam.PolicyStatement({
            actions: ['states:GetExecutionHistory'],
            resources: [`${p.executionArnPrefix(this.stateMachineName)}*`],
          }),
          p.untagArrayInstance(),
        ],
      },
    ];
    this.functions = props.factory.createAll(this, specs.map((s) => ({ ...s, environment })));
    const preparePolicy = this.functions.RestorePrepare.role?.node.tryFindChild('DefaultPolicy');
    if (props.backup && preparePolicy) {
      const machine = props.backup.node.defaultChild as sfn.CfnStateMachine;
      const logicalId = Stack.of(this).resolve(Stack.of(this).getLogicalId(machine)) as string;
      acknowledge(
        preparePolicy,
        `AwsSolutions-IAM5[Resource::${nagPattern(`${p.executionArnPrefix(`<${logicalId}.Name>`)}*`)}]`,
        'DescribeExecution of the backup workflow\'s executions only: does the backup holding an array still run?',
      );
    }
    for (const id of ['RestorePrepare', 'RestoreFsr']) {
      const policy = this.functions[id].role?.node.tryFindChild('DefaultPolicy');
      if (policy) {
        acknowledge(
          policy,
          `AwsSolutions-IAM5[Resource::${nagPattern(`${p.executionArnPrefix(this.stateMachineName)}*`)}]`,
          'DescribeExecution of this restore workflow\'s own executions only: is the holder of a restore lock still running?',
        );
      }
    }
    const finishPolicy = this.functions.RestoreFinish.role?.node.tryFindChild('DefaultPolicy');
    if (finishPolicy) {
      acknowledge(
        finishPolicy,
        `AwsSolutions-IAM5[Resource::${nagPattern(`${p.executionArnPrefix(this.stateMachineName)}*`)}]`,
        'GetExecutionHistory of this restore workflow\'s own executions only: the run\'s cost, read from its own history',
      );
    }
    const abandonedPolicy = this.functions.RestoreAbandoned.role?.node.tryFindChild('DefaultPolicy');
    if (abandonedPolicy) {
      acknowledge(
        abandonedPolicy,
        `AwsSolutions-IAM5[Resource::${nagPattern(`${p.executionArnPrefix(this.stateMachineName)}*`)}]`,
        'GetExecutionHistory of this restore workflow\'s own executions only: what a stopped run planned and how far it got',
      );
    }
    // A volume from a snapshot encrypted with a customer managed key is created and attached
    // with that key (and so is an old member a failed replace attaches back): EBS and EC2 use it
    // on the caller's behalf, so the caller needs these KMS actions, only through EC2 in this
    // region (AWS managed keys need none of this).
    const kmsKeys = Stack.of(this).formatArn({ service: 'kms', resource: 'key', resourceName: '*' });
    const viaEc2 = { 'kms:ViaService': `ec2.${Stack.of(this).region}.amazonaws.com` };
    for (const id of ['RestoreCreateVolumes', 'RestoreAttach', 'RestoreCleanup']) {
      const fn = this.functions[id];
      fn.addToRolePolicy(new iam.PolicyStatement({
        actions: ['kms:Decrypt', 'kms:DescribeKey', 'kms:GenerateDataKeyWithoutPlaintext', 'kms:ReEncryptFrom', 'kms:ReEncryptTo'],
        resources: [kmsKeys],
        conditions: { StringEquals: viaEc2 },
      }));
      fn.addToRolePolicy(new iam.PolicyStatement({
        actions: ['kms:CreateGrant'],
        resources: [kmsKeys],
        conditions: { StringEquals: viaEc2, Bool: { 'kms:GrantIsForAWSResource': 'true' } },
      }));
      const policy = fn.role?.node.tryFindChild('DefaultPolicy');
      if (policy) {
        acknowledge(
          policy,
          `AwsSolutions-IAM5[Resource::${nagPattern(kmsKeys)}]`,
          'the snapshots\' keys are the operator\'s and unknown at deploy time; use is limited by condition to EC2 in this region (kms:ViaService) and grants to those EC2 makes for AWS resources',
        );
      }
    }
    const f = this.functions;
    const workflow = new Workflow(this, 'Workflow', {
      definitionFile: 'restore.asl.json',
      comment: 'raidsnap restore: volumes from a complete snapshot set, assembled and mounted on the target',
      timeout: TIMEOUT,
      functions: {
        RestorePrepareFunctionArn: f.RestorePrepare,
        RestoreFsrFunctionArn: f.RestoreFsr,
        RestoreCreateVolumesFunctionArn: f.RestoreCreateVolumes,
        RestoreCheckVolumesFunctionArn: f.RestoreCheckVolumes,
        RestoreCommandFunctionArn: f.RestoreCommand,
        RestoreDetachOldFunctionArn: f.RestoreDetachOld,
        RestoreAttachFunctionArn: f.RestoreAttach,
        RestoreFinishFunctionArn: f.RestoreFinish,
        RestoreReportFunctionArn: f.RestoreReport,
        RestoreCleanupFunctionArn: f.RestoreCleanup,
        CommandPollFunctionArn: props.commandPoll,
      },
    });
    this.stateMachine = workflow.stateMachine;
    // A run stopped by hand or past its timeout skips its Catch, so its cleanup never runs:
    // this rule sends such a run's end to a function that removes what it left behind.
    new events.Rule(this, 'Abandoned', {
      description: 'raidsnap: clean up after a restore that was stopped or timed out',
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: { stateMachineArn: [this.stateMachine.stateMachineArn], status: ['ABORTED', 'TIMED_OUT'] },
      },
      targets: [new eventTargets.LambdaFunction(this.functions.RestoreAbandoned, {
        retryAttempts: 8, maxEventAge: Duration.hours(6),
      })],
    });
    // Every end of a run reaches a parent still waiting on it (its record in the lock table),
    // whether or not the run could tell it itself: stopped, timed out, or a report that failed.
    // An end EventBridge could not deliver within its retries goes to a dead-letter queue
    // ("Using dead-letter queues to process undelivered events", EventBridge user guide),
    // encrypted by SQS (SSE-SQS: EventBridge sends to it with no key policy of ours to name
    // it), and its alarm tells the operators: the recovery waiting on that restore then hears
    // of it only from its own look at the restore (Settle) or its timeout.
    this.endedDeadLetters = new sqs.Queue(this, 'EndedDeadLetters', {
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      retentionPeriod: Duration.days(14),
    });
    // checkov's CKV_AWS_27 looks for a KMS key only; SSE-SQS is encryption at rest too ("Amazon
    // SQS managed server-side encryption", SQS developer guide, Encryption at rest).
    (this.endedDeadLetters.node.defaultChild as sqs.CfnQueue).addMetadata('checkov', {
      skip: [{ id: 'CKV_AWS_27', comment: 'encrypted with SSE-SQS (SqsManagedSseEnabled), which this check does not recognise' }],
    });
    acknowledge(this.endedDeadLetters, 'AwsSolutions-SQS3',
      'this queue is itself the dead-letter queue of the rule on restore ends; a queue behind it would only move the problem');
    new events.Rule(this, 'Ended', {
      description: 'raidsnap: tell the workflow waiting on a restore that the restore ended',
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: { stateMachineArn: [this.stateMachine.stateMachineArn], status: ['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED'] },
      },
      targets: [new eventTargets.LambdaFunction(this.functions.RestoreEnded, {
        retryAttempts: 8, maxEventAge: Duration.hours(6), deadLetterQueue: this.endedDeadLetters,
      })],
    });
    this.endedDeadLettersAlarm = new cloudwatch.Alarm(this, 'EndedUndelivered', {
      alarmDescription: 'raidsnap: the end of a restore could not be delivered to the function that tells a waiting recovery (see the EndedDeadLetters queue); the recovery finds out from the restore itself or its timeout',
      metric: this.endedDeadLetters.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5), statistic: 'Maximum' }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    // A fixed name, so the functions can be granted DescribeExecution on its executions
    // without depending on the state machine itself.
    (this.stateMachine.node.defaultChild as sfn.CfnStateMachine).stateMachineName = this.stateMachineName;
  }
}
