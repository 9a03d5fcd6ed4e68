import { Duration, Stack } from 'aws-cdk-lib';
import * as autoscaling from 'aws-cdk-lib/aws-autoscaling';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as eventTargets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { ArrayConfig, RecoveryConfig } from '../config';
import { acknowledge, nagArn } from '../nag';
import { PricesConfig, runPriceTable } from '../prices-config';
import { Documents } from './documents';
import { FunctionFactory } from './functions';
import { RestorePermissions } from './permissions';
import { RestoreLock, RestoreWorkflow } from './restore-workflow';
import { SnapshotSets } from './snapshot-sets';
import { HEARTBEAT_RETRY, Workflow, worstCaseRetrySeconds } from './workflow';

export const ATTACHED_EBS_METRIC = 'StatusCheckFailed_AttachedEBS';
/** Every restore a drill starts is named drill-<hash> (lambdas/raidsnap/workflows/drill/prepare.py). */
export const DRILL_RESTORE_PREFIX = 'drill-';
/** Every restore a recovery starts is named <recovery name>-restore
 * (lambdas/raidsnap/workflows/recovery/following.py). */
export const RECOVERY_RESTORE_SUFFIX = '-restore';
/** A launching instance waits this long in Pending:Wait for its array before the hook's
 * default result (ABANDON) ends it. */
export const LIFECYCLE_HEARTBEAT = Duration.hours(1);
/** The recovery step's Lambda timeout (FunctionFactory's default). */
const STEP_TIMEOUT = Duration.seconds(60);
/** KeepLaunchAlive records a heartbeat every third of the heartbeat timeout
 * (raidsnap.workflows.recovery.following); its retries must give up (and hand over to Settle,
 * whose first call is a heartbeat) well before the timeout runs out after the last heartbeat:
 * the wait, the retries at their worst, and Settle's first attempt fit in two thirds. */
export function heartbeatFits(heartbeat: Duration = LIFECYCLE_HEARTBEAT): boolean {
  const third = Math.floor(heartbeat.toSeconds() / 3);
  return third + worstCaseRetrySeconds(HEARTBEAT_RETRY, STEP_TIMEOUT.toSeconds()) + STEP_TIMEOUT.toSeconds()
    <= 2 * third;
}

export interface RecoveryProps {
  readonly factory: FunctionFactory;
  readonly arrays: readonly ArrayConfig[];
  readonly restore: RestoreWorkflow;
  readonly lock: RestoreLock;
  readonly documents: Documents;
  /** The sets' manifests: which set is the newest restorable one, and how old it is. */
  readonly sets: SnapshotSets;
  /** The config's overrides of the list prices a run's cost is computed with. */
  readonly prices?: PricesConfig;
}

/** The restore input's limit for the recovery: a restore may take 3 days (prewarm). */
const TIMEOUT = Duration.hours(73);

/** Lifecycle hook names take letters, digits, "-", "_" and "/". */
export function lifecycleHookName(array: string): string {
  return `raidsnap-${array.replace(/[^A-Za-z0-9_-]/g, '-')}`;
}

/** statemachines/recovery.asl.json, its functions, and per configured array what starts it:
 * an alarm on the instance's attached-EBS status check, the instance's termination (where a
 * replacement is configured), and launches into its Auto Scaling group of one. */
export class Recovery extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly functions: Record<string, lambda.Function>;
  readonly alarms: Record<string, cloudwatch.Alarm> = {};
  readonly rules: events.Rule[] = [];
  readonly hooks: autoscaling.CfnLifecycleHook[] = [];
  readonly stateMachineName: string;

  constructor(scope: Construct, id: string, props: RecoveryProps) {
    super(scope, id);
    const p = new RestorePermissions(this);
    const restoreName = props.restore.stateMachineName;
    const configured = props.arrays.filter((a) => a.recovery !== undefined) as Array<ArrayConfig & { recovery: RecoveryConfig }>;
    const groups = [...new Set(configured.map((a) => a.recovery.autoScalingGroup).filter((g): g is string => !!g))];

    const restoreArn = props.restore.stateMachine.stateMachineArn;
    this.stateMachineName = `${Stack.of(this).stackName}-recovery`;
    const step = props.factory.create(this, {
      id: 'RecoveryStep',
      module: 'recovery_step',
      timeout: STEP_TIMEOUT,
      description: 'recovery: look for evidence, wait for the target, start the restore, keep the lifecycle action alive, report',
      statements: [
        p.describe('ec2:DescribeInstances', 'ssm:DescribeInstanceInformation', 'ec2:DescribeVolumeStatus',
          'ec2:DescribeVolumes', 'ec2:DescribeSnapshots'),
        // Evidence from the instance: what the discover document reports of the array.
        ...p.sendCommand(props.documents.arns('discover')),
        p.readCommands()[0],
        // Attach mode onto a replacement: the array's tag (that key only) moves off the failed
        // instance, and back onto it if the restore fails.
        p.tagArrayInstance(), p.untagArrayInstance(),
        ...(groups.length ? [p.completeLifecycleActions(groups)] : []),
        // A lifecycle action found no longer open: the instance's lifecycle state says whether
        // it went into service or was abandoned. DescribeAutoScalingInstances has no resource
        // type (Service Authorization Reference: "*" only).
        ...(groups.length ? [p.describe('autoscaling:DescribeAutoScalingInstances')] : []),
        // The restore it starts, named <recovery name>-restore. It reports back to the waiting
        // Task itself; the recovery looks at it (DescribeExecution) only when no report arrives.
        new iam.PolicyStatement({ actions: ['states:StartExecution'], resources: [restoreArn] }),
        new iam.PolicyStatement({
          actions: ['states:DescribeExecution'],
          resources: [`${p.executionArnPrefix(restoreName)}*${RECOVERY_RESTORE_SUFFIX}`],
        }),
        // Gives back the array's recovery claim; writes, reads and at its end removes its record
        // of the restore it waits on (callback#<restore name>: who waits, with which token).
        ...props.lock.statements('DeleteItem', 'GetItem', 'UpdateItem'),
        ...props.sets.statements('Query'),
        // The recovery's own history, which its cost is read from (raidsnap.aws.costs).
        new iam.PolicyStatement({
          actions: ['states:GetExecutionHistory'],
          resources: [`${p.executionArnPrefix(this.stateMachineName)}*`],
        }),
      ],
      environment: {
        RUN_PRICES: runPriceTable(props.prices),
        RESTORE_STATE_MACHINE_ARN: restoreArn,
        DISCOVER_DOCUMENT: props.documents.names.discover,
        LOCK_TABLE: props.lock.table.tableName,
        LIFECYCLE_HEARTBEAT_SECONDS: String(LIFECYCLE_HEARTBEAT.toSeconds()),
      },
    });
    const stepPolicy = step.role?.node.tryFindChild('DefaultPolicy');
    if (stepPolicy) {
      acknowledge(stepPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${restoreName}:*${RECOVERY_RESTORE_SUFFIX}`)}]`,
        'DescribeExecution of the restores recoveries start only (named <recovery name>-restore): what became of a restore whose report did not arrive');
      acknowledge(stepPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${this.stateMachineName}:*`)}]`,
        'GetExecutionHistory of the recovery workflow\'s own executions only: the run\'s cost, read from its own history');
    }
    if (groups.length) {
      const policy = step.role?.node.tryFindChild('DefaultPolicy');
      for (const g of groups) {
        if (policy) {
          acknowledge(policy,
            `AwsSolutions-IAM5[Resource::${nagArn(this, 'autoscaling', `autoScalingGroup:*:autoScalingGroupName/${g}`)}]`,
            `the group's generated id is not known at deploy time; the ARN names exactly the configured group ${g}`);
        }
      }
    }

    const workflow = new Workflow(this, 'Workflow', {
      definitionFile: 'recovery.asl.json',
      comment: 'raidsnap recovery: restore an array after its instance or EBS failed, or onto a new instance of its Auto Scaling group',
      timeout: TIMEOUT,
      functions: { RecoveryStepFunctionArn: step },
      retries: { KeepLaunchAlive: HEARTBEAT_RETRY },
    });
    this.stateMachine = workflow.stateMachine;
    // A fixed name: the trigger asks whether the execution holding an array's recovery claim
    // still runs, without depending on the state machine.
    (this.stateMachine.node.defaultChild as sfn.CfnStateMachine).stateMachineName = this.stateMachineName;

    const start = props.factory.create(this, {
      id: 'RecoveryStart',
      module: 'recovery_start',
      description: 'turn an alarm, a lost instance or a lifecycle launch into one recovery run',
      statements: [
        new iam.PolicyStatement({ actions: ['states:StartExecution'], resources: [this.stateMachine.stateMachineArn] }),
        // One recovery of an array at a time: a claim item per array, and whether its holder runs.
        ...props.lock.statements('GetItem', 'PutItem', 'DeleteItem'),
        p.describeExecutions(restoreName),
        p.describeExecutions(this.stateMachineName),
        // A recovery preempts a drill of the same array: it may stop the drills' restores only.
        new iam.PolicyStatement({
          actions: ['states:StopExecution'],
          resources: [`${p.executionArnPrefix(restoreName)}${DRILL_RESTORE_PREFIX}*`],
        }),
        // A skipped recovery's notification names the newest complete set and its age.
        p.describe('ec2:DescribeInstances', 'ec2:DescribeSnapshots'),
        ...props.sets.statements('Query'),
      ],
      environment: {
        RECOVERY_STATE_MACHINE_ARN: this.stateMachine.stateMachineArn,
        LOCK_TABLE: props.lock.table.tableName,
        RECOVERY_BY_ARRAY: JSON.stringify(Object.fromEntries(configured.map((a) => [a.name, a.recovery]))),
      },
    });
    const startPolicy = start.role?.node.tryFindChild('DefaultPolicy');
    if (startPolicy) {
      acknowledge(startPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${restoreName}:*`)}]`,
        'DescribeExecution of the restore workflow\'s own executions only: is the holder of a restore lock still running?');
      acknowledge(startPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${this.stateMachineName}:*`)}]`,
        'DescribeExecution of the recovery workflow\'s own executions only: is the holder of an array\'s recovery claim still running?');
      acknowledge(startPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${restoreName}:${DRILL_RESTORE_PREFIX}*`)}]`,
        'StopExecution of the restores that drills start (named drill-...), so that a recovery is never blocked by a drill');
    }
    this.functions = { RecoveryStart: start, RecoveryStep: step };
    const target = new eventTargets.LambdaFunction(start, { retryAttempts: 8, maxEventAge: Duration.hours(1) });

    for (const array of configured) {
      const r = array.recovery;
      const alarm = new cloudwatch.Alarm(this, `AttachedEbs-${array.name}`, {
        alarmDescription: `raidsnap: an attached EBS volume of ${r.instanceId} (array ${array.name}) fails its status check; a recovery restores the array`,
        metric: new cloudwatch.Metric({
          namespace: 'AWS/EC2',
          metricName: ATTACHED_EBS_METRIC,
          dimensionsMap: { InstanceId: r.instanceId },
          statistic: 'Maximum',
          period: Duration.minutes(1),
        }),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 2,
        datapointsToAlarm: 2,
        // A stopped or terminated instance reports nothing: that is not an EBS failure.
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      this.alarms[array.name] = alarm;
      this.rules.push(new events.Rule(this, `OnAlarm-${array.name}`, {
        description: `raidsnap: recover ${array.name} when its attached EBS status check alarm fires`,
        eventPattern: {
          source: ['aws.cloudwatch'],
          detailType: ['CloudWatch Alarm State Change'],
          resources: [alarm.alarmArn],
          detail: { state: { value: ['ALARM'] } },
        },
        targets: [target],
      }));
      if (r.replacementInstanceId) {
        // Both instances: once a recovery has moved the array to the replacement, the
        // replacement's end is what matters (the trigger asks the raidsnap:array tag which of
        // them holds the array, and says why it starts nothing for the other).
        this.rules.push(new events.Rule(this, `OnInstanceLost-${array.name}`, {
          description: `raidsnap: restore ${array.name} onto ${r.replacementInstanceId} when ${r.instanceId} is terminated; report the end of either`,
          eventPattern: {
            source: ['aws.ec2'],
            detailType: ['EC2 Instance State-change Notification'],
            detail: { 'instance-id': [r.instanceId, r.replacementInstanceId], 'state': ['terminated'] },
          },
          targets: [target],
        }));
      }
      if (r.autoScalingGroup) {
        const hookName = lifecycleHookName(array.name);
        this.hooks.push(new autoscaling.CfnLifecycleHook(this, `Launch-${array.name}`, {
          autoScalingGroupName: r.autoScalingGroup,
          lifecycleHookName: hookName,
          lifecycleTransition: 'autoscaling:EC2_INSTANCE_LAUNCHING',
          heartbeatTimeout: LIFECYCLE_HEARTBEAT.toSeconds(),
          defaultResult: 'ABANDON',
        }));
        this.rules.push(new events.Rule(this, `OnLaunch-${array.name}`, {
          description: `raidsnap: restore ${array.name} onto each instance launched into ${r.autoScalingGroup}`,
          eventPattern: {
            source: ['aws.autoscaling'],
            detailType: ['EC2 Instance-launch Lifecycle Action'],
            detail: { AutoScalingGroupName: [r.autoScalingGroup], LifecycleHookName: [hookName] },
          },
          targets: [target],
        }));
      }
    }

    // After a recovery moves an array, its alarm is pointed at the array's new instance
    // (lambdas/raidsnap/workflows/recovery/protection.py): read and rewrite exactly these alarms.
    const alarms = Object.entries(this.alarms);
    if (alarms.length) {
      const alarmByArray = Stack.of(this).toJsonString(
        Object.fromEntries(alarms.map(([name, alarm]) => [name, alarm.alarmName])));
      step.addEnvironment('ALARM_BY_ARRAY', alarmByArray);
      // Several arrays of one instance each have an alarm on it: the one that fired names the
      // array whose recovery starts.
      start.addEnvironment('ALARM_BY_ARRAY', alarmByArray);
      step.addToRolePolicy(new iam.PolicyStatement({
        actions: ['cloudwatch:DescribeAlarms', 'cloudwatch:PutMetricAlarm'],
        resources: alarms.map(([, alarm]) => alarm.alarmArn),
      }));
    }
  }
}

/** The recovery's trigger and steps tell the operators what they did and did not do (a
 * recovery that does not start, or finds nothing to replace, is news): made after the
 * monitoring, which owns the topic. */
export function notifyRecoveryTo(recovery: Recovery, topic: sns.ITopic, key: kms.IKey): void {
  for (const fn of Object.values(recovery.functions)) {
    fn.addEnvironment('TOPIC_ARN', topic.topicArn);
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['sns:Publish'], resources: [topic.topicArn] }));
    // SNS encrypts the message with the topic's key on the publisher's behalf (through SNS
    // only: the same functions use the key through DynamoDB, under its own condition).
    fn.addToRolePolicy(new iam.PolicyStatement({
      actions: ['kms:GenerateDataKey', 'kms:Decrypt'],
      resources: [key.keyArn],
      conditions: { StringEquals: { 'kms:ViaService': `sns.${Stack.of(fn).region}.amazonaws.com` } },
    }));
  }
}

/** Alarms also notify the operators (the recovery itself starts from EventBridge). */
export function notifyAlarms(recovery: Recovery, notifier: { notify(alarm: cloudwatch.Alarm): void }): void {
  for (const alarm of Object.values(recovery.alarms)) notifier.notify(alarm);
}

/** The findings a nested restore's statements raise on a state machine's role. */
export function acknowledgeNestedRestore(machine: sfn.StateMachine, restoreName: string, names: string): void {
  const policy = machine.role.node.tryFindChild('DefaultPolicy');
  if (!policy) return;
  acknowledge(policy,
    `AwsSolutions-IAM5[Resource::${nagArn(machine, 'states', `execution:${restoreName}:${names}`)}]`,
    'follow and stop only the nested restore executions this workflow starts (names are chosen per run)');
}
