import { CfnResource, CustomResource, Duration, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { acknowledge, arnRef, REASONS } from '../nag';
import { KeptPolicy } from '../fast-restore';
import { FunctionFactory } from './functions';
import { RestorePermissions } from './permissions';
import { nagPattern, RestoreLock, RestoreWorkflow } from './restore-workflow';

export const LEFTOVERS_METRIC = 'LeftoversFound';
/** FSR is billed per hour with a one-hour minimum: a quarter of that bounds what a leak costs
 * before the sweep ends it, at 96 small invocations a day. */
export const SWEEP_EVERY = Duration.minutes(15);
/** The sweeper function's logical id, fixed: it names the function, whose ARN is the custom
 * resource's ServiceToken, and CloudFormation does not support updating a ServiceToken
 * (CloudFormation User Guide, custom resources). A refactor that moved the function in the
 * construct tree would otherwise change the id, replace the function and fail the update.
 * (The value is the id the function had when the resource was added.) */
export const SWEEP_FUNCTION_LOGICAL_ID = 'SweeperSweep951AF619';

export interface SweeperProps {
  readonly factory: FunctionFactory;
  readonly restore: RestoreWorkflow;
  readonly lock: RestoreLock;
  /** Where the alarm on what the sweeper finds notifies the operators. */
  readonly notifier: { notify(alarm: cloudwatch.Alarm): void };
  /** The arrays' fastRestore policies: the FSR a removed one kept goes off. */
  readonly fastRestore?: Record<string, KeptPolicy>;
  /** Every state machine of the stack whose runs may enable or keep FSR (backup, restore,
   * recovery, drill): the stack's deletion waits for none of them, so it is refused while one
   * runs, and they are deleted after the clean-up. */
  readonly workflows: readonly sfn.IStateMachine[];
}

/** A scheduled function that removes what ended restores left behind: the Fast Snapshot Restore
 * each run recorded as its own, and the volumes of runs that failed, timed out or were stopped
 * (never an attached one, never one of a run that succeeded), with an alarm when it finds any. */
export class Sweeper extends Construct {
  readonly function: lambda.Function;
  readonly alarm: cloudwatch.Alarm;
  /** The custom resource whose Delete turns off what the stack keeps on: what starts runs
   * (schedules, rules) must DependOn it, so that CloudFormation deletes them first. */
  readonly onDelete: CustomResource;

  constructor(scope: Construct, id: string, props: SweeperProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const p = new RestorePermissions(this);
    const restoreName = props.restore.stateMachineName;
    const prefix = p.executionArnPrefix(restoreName);
    this.function = props.factory.create(this, {
      id: 'Sweep',
      module: 'sweep',
      description: 'remove the FSR and the unattached volumes that ended restores left behind',
      timeout: Duration.minutes(5),
      statements: [
        p.describe('ec2:DescribeVolumes', 'ec2:DescribeFastSnapshotRestores'),
        p.fastSnapshotRestores('ec2:DisableFastSnapshotRestores'),
        p.deleteRestoredVolumes(restoreName),
        p.describeExecutions(restoreName, '', true),
        // GetItem: whether a restore holds a set whose FSR a removed fastRestore policy kept;
        // PutItem: the claim rewritten with the sets left when a restore holds one of them
        // (raidsnap.aws.kept_fsr._write).
        ...props.lock.statements('Scan', 'DeleteItem', 'GetItem', 'PutItem'),
        // An ended run's nonce, from its ARN and start time: which tagged volumes are its own.
        ...p.readRunSecret(props.restore.runSecret),
        // As the stack's custom resource: is a Delete the stack's own deletion?
        new iam.PolicyStatement({ actions: ['cloudformation:DescribeStacks'], resources: [stack.stackId] }),
        // ... and does any run still go on? (ListExecutions, statusFilter RUNNING)
        new iam.PolicyStatement({ actions: ['states:ListExecutions'], resources: props.workflows.map((w) => w.stateMachineArn) }),
      ],
      environment: {
        RUN_NONCE_SECRET: props.restore.runSecret.secretArn,
        LOCK_TABLE: props.lock.table.tableName,
        RESTORE_EXECUTION_PREFIX: prefix,
        FAST_RESTORE_BY_ARRAY: JSON.stringify(props.fastRestore ?? {}),
        STATE_MACHINE_ARNS: stack.toJsonString(props.workflows.map((w) => w.stateMachineArn)),
      },
    });
    (this.function.node.defaultChild as CfnResource).overrideLogicalId(SWEEP_FUNCTION_LOGICAL_ID);
    // When the stack is deleted, the FSR a fastRestore policy keeps on would stay on, billed by
    // the hour, with nothing left to turn it off: the sweeper does it, as this resource's
    // provider (raidsnap.workflows.stack_deletion). It DependsOn every workflow, so it is
    // deleted before them (CloudFormation Template Reference, DependsOn attribute: a resource
    // is deleted before the resources it depends on), and can still ask whether any runs. A
    // fixed logical id: a renamed one would be deleted on an update.
    const onDelete = new CustomResource(this, 'FsrOffWhenDeleted', {
      serviceToken: this.function.functionArn,
      resourceType: 'Custom::RaidsnapFsrOffWhenDeleted',
      serviceTimeout: Duration.minutes(10),
    });
    (onDelete.node.defaultChild as CfnResource).overrideLogicalId('RaidsnapFsrOffWhenDeleted');
    for (const workflow of props.workflows) onDelete.node.addDependency(workflow);
    this.onDelete = onDelete;
    const policy = this.function.role?.node.tryFindChild('DefaultPolicy');
    if (policy) {
      acknowledge(policy, `AwsSolutions-IAM5[Resource::${nagPattern(`${prefix}*`)}]`,
        'DescribeExecution and GetExecutionHistory of this stack\'s restore executions only: has the run that owns a leftover ended, and did it reach Assemble?');
    }
    const role = new iam.Role(this, 'ScheduleRole', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': stack.account } },
      }),
      description: 'raidsnap: lets the sweep schedule invoke the sweeper',
    });
    new scheduler.Schedule(this, 'Schedule', {
      description: 'raidsnap: remove what ended restores left behind (FSR, unattached volumes)',
      schedule: scheduler.ScheduleExpression.rate(SWEEP_EVERY),
      target: new schedulerTargets.LambdaInvoke(this.function, { retryAttempts: 0, role }),
    });
    const invokePolicy = role.node.tryFindChild('DefaultPolicy');
    if (invokePolicy) acknowledge(invokePolicy, `AwsSolutions-IAM5[Resource::${arnRef(this.function)}:*]`, REASONS.invoke);

    this.alarm = new cloudwatch.Alarm(this, 'Leftovers', {
      alarmDescription: 'raidsnap: the sweeper removed FSR or volumes that an ended restore left behind; see the sweeper\'s log for which run',
      metric: new cloudwatch.Metric({
        namespace: 'raidsnap',
        metricName: LEFTOVERS_METRIC,
        // Powertools adds the service dimension to every metric it publishes.
        dimensionsMap: { service: 'raidsnap' },
        statistic: 'Sum',
        period: Duration.hours(1),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    props.notifier.notify(this.alarm);
  }
}
