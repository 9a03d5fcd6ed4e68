import { Duration, Lazy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import { ArrayConfig } from '../config';
import { destinationId } from '../copies';
import { acknowledge, arnRef, REASONS } from '../nag';
import { copiesByArray } from './copies';
import { stackKey } from './encryption';
import { FunctionFactory } from './functions';
import { Permissions } from './permissions';
import { DRILL_RESTORE_PREFIX } from './recovery';
import { SnapshotSets } from './snapshot-sets';

export const SET_AGE_METRIC = 'NewestCompleteSetAgeMinutes';
/** The age of the newest set copied to each place an array is copied to (raidsnap.monitoring). */
export const COPY_AGE_METRIC = 'NewestCopiedSetAgeMinutes';
export const NOT_DELETED_METRIC = 'SnapshotsNotDeleted';
export const FSR_NOT_KEPT_METRIC = 'FastRestoreNotKept';
/** Published by each run's last step: what the run itself cost, US dollars (raidsnap.aws.costs). */
export const RUN_COST_METRIC = 'RunCostUsd';
export const REPORT_EVERY = Duration.minutes(15);

export interface MonitoringProps {
  readonly factory: FunctionFactory;
  readonly arrays: readonly ArrayConfig[];
  /** Workflow name (`backup`, `restore`, ...) -> its state machine. */
  readonly workflows: Record<string, sfn.IStateMachine>;
  readonly emails: readonly string[];
  /** The sets' manifests: only recorded, complete sets count. */
  readonly sets: SnapshotSets;
  /** Some array has a fastRestore policy: alarm when a backup could not keep FSR on its set. */
  readonly fastRestore?: boolean;
}

/** An EventBridge target that publishes to the topic and grants nothing itself: the stock
 * target's grant adds an unconditioned topic policy and key policy statement for every
 * EventBridge rule of any account; Monitoring writes conditioned ones instead. */
class TopicTarget implements events.IRuleTarget {
  constructor(private readonly topic: sns.ITopic, private readonly message: events.RuleTargetInput) {}

  bind(): events.RuleTargetConfig {
    return { arn: this.topic.topicArn, input: this.message, targetResource: this.topic };
  }
}

/** What an operator watches: a notification for every failed run and every recovery, the age
 * of each array's newest complete set with an alarm past its RPO, and one dashboard. */
export class Monitoring extends Construct {
  readonly topic: sns.Topic;
  private readonly notifying: cloudwatch.IAlarm[] = [];
  readonly reporter: lambda.Function;
  readonly rpoAlarms: Record<string, cloudwatch.Alarm> = {};
  readonly retentionAlarm: cloudwatch.Alarm;
  readonly tagConflictAlarm: cloudwatch.Alarm;
  readonly fastRestoreAlarm?: cloudwatch.Alarm;
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const key = stackKey(this);
    // Named, so that the key policy below can name the topic: the topic names the key, and the
    // key naming the topic's generated ARN would be a circular reference.
    const topicName = `${stack.stackName}-notifications`;
    this.topic = new sns.Topic(this, 'Notifications', {
      topicName,
      displayName: 'raidsnap',
      masterKey: key,
      enforceSSL: true,
    });
    const topicArn = `arn:${stack.partition}:sns:${stack.region}:${stack.account}:${topicName}`;
    // EventBridge and CloudWatch alarms publish to the encrypted topic: they need the key, for
    // this topic only. SNS names the topic in the encryption context of every request it makes
    // with the key on a publisher's behalf (kms:EncryptionContext:aws:sns:topicArn, the key AWS
    // documents for a service publishing to an SSE topic: "Set up an SNS topic with server-side
    // encryption", https://docs.aws.amazon.com/gamelift/latest/flexmatchguide/queue-notification-sns-sse.html;
    // the statement itself: https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services).
    // CloudWatch alarms also carry aws:SourceAccount (the confused-deputy keys CloudWatch documents
    // for alarm actions). For EventBridge, AWS documents aws:SourceArn/aws:SourceAccount on the
    // topic policy (below) but not in a key policy for a rule publishing to an encrypted topic
    // (its key-policy page covers event buses only), so its key statement holds to the
    // encryption context, which SNS sets whoever publishes.
    key.addToResourcePolicy(new iam.PolicyStatement({
      sid: 'EventBridgePublishesToTheTopic',
      principals: [new iam.ServicePrincipal('events.amazonaws.com')],
      actions: ['kms:GenerateDataKey*', 'kms:Decrypt'],
      resources: ['*'],
      conditions: { StringEquals: { 'kms:EncryptionContext:aws:sns:topicArn': topicArn } },
    }));
    key.addToResourcePolicy(new iam.PolicyStatement({
      sid: 'AlarmsPublishToTheTopic',
      principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
      actions: ['kms:GenerateDataKey*', 'kms:Decrypt'],
      resources: ['*'],
      conditions: { StringEquals: { 'aws:SourceAccount': stack.account, 'kms:EncryptionContext:aws:sns:topicArn': topicArn } },
    }));
    for (const email of props.emails) this.topic.addSubscription(new subscriptions.EmailSubscription(email));

    const machines = Object.values(props.workflows);
    const detail = (path: string) => events.EventField.fromPath(`$.detail.${path}`);
    const rules: events.Rule[] = [];
    rules.push(new events.Rule(this, 'RunFailed', {
      description: 'raidsnap: a backup, restore or drill run failed, timed out or was aborted',
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: { stateMachineArn: machines.map((m) => m.stateMachineArn), status: ['FAILED', 'TIMED_OUT', 'ABORTED'] },
      },
      targets: [new TopicTarget(this.topic, events.RuleTargetInput.fromText(
        `raidsnap run ${detail('name')} ${detail('status')}: ${detail('error')}: ${detail('cause')} (${detail('executionArn')})`))],
    }));
    if (props.workflows.restore) {
      rules.push(new events.Rule(this, 'Recovered', {
        description: 'raidsnap: a restore completed, the array is back',
        eventPattern: {
          source: ['aws.states'],
          detailType: ['Step Functions Execution Status Change'],
          detail: {
            stateMachineArn: [props.workflows.restore.stateMachineArn],
            status: ['SUCCEEDED'],
            // A drill's restore is not a recovery: the drill reports its own outcome.
            name: [{ 'anything-but': { prefix: DRILL_RESTORE_PREFIX } }],
          },
        },
        targets: [new TopicTarget(this.topic, events.RuleTargetInput.fromText(
          `raidsnap restore ${detail('name')} succeeded: ${detail('output')}`))],
      }));
    }
    // EventBridge may publish only for these rules of this account: aws:SourceArn is the ARN of
    // the rule that sends the event, aws:SourceAccount its account ("Using IAM policy conditions
    // in Amazon EventBridge", https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html).
    this.topic.addToResourcePolicy(new iam.PolicyStatement({
      sid: 'RulesPublish',
      principals: [new iam.ServicePrincipal('events.amazonaws.com')],
      actions: ['sns:Publish'],
      resources: [this.topic.topicArn],
      conditions: {
        ArnEquals: { 'aws:SourceArn': rules.map((r) => r.ruleArn) },
        StringEquals: { 'aws:SourceAccount': stack.account },
      },
    }));

    const p = new Permissions(this);
    this.reporter = props.factory.create(this, {
      id: 'SetAgeReporter',
      module: 'monitor_set_age',
      description: 'publish the age of each array newest complete snapshot set',
      statements: [p.describe('ec2:DescribeSnapshots'), ...props.sets.statements('Scan')],
      environment: {
        CONFIGURED_ARRAYS: props.arrays.map((a) => a.name).join(','),
        // Each copied array's places: the reporter publishes the age of the newest copy there.
        COPIES_BY_ARRAY: JSON.stringify(copiesByArray(this, props.arrays)),
      },
    });
    const schedulerRole = new iam.Role(this, 'ReportSetAgeRole', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': stack.account } },
      }),
      description: 'raidsnap: lets the set-age schedule invoke its reporter',
    });
    new scheduler.Schedule(this, 'ReportSetAge', {
      description: 'raidsnap: report the age of the newest complete set of every array',
      schedule: scheduler.ScheduleExpression.rate(REPORT_EVERY),
      target: new schedulerTargets.LambdaInvoke(this.reporter, { retryAttempts: 0, role: schedulerRole }),
    });
    const invokePolicy = schedulerRole.node.tryFindChild('DefaultPolicy');
    if (invokePolicy) acknowledge(invokePolicy, `AwsSolutions-IAM5[Resource::${arnRef(this.reporter)}:*]`, REASONS.invoke);

    const age = (array: string) => new cloudwatch.Metric({
      namespace: 'raidsnap',
      metricName: SET_AGE_METRIC,
      // Powertools adds the service dimension to every metric it publishes.
      dimensionsMap: { Array: array, service: 'raidsnap' },
      statistic: 'Maximum',
      period: REPORT_EVERY,
    });
    for (const array of props.arrays.filter((a) => a.rpoMinutes !== undefined)) {
      const alarm = new cloudwatch.Alarm(this, `Rpo-${array.name}`, {
        alarmDescription: `raidsnap: the newest complete snapshot set of ${array.name} is older than its RPO of ${array.rpoMinutes} minutes`,
        metric: age(array.name),
        threshold: array.rpoMinutes!,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        // No report at all means nobody is watching: that breaches the RPO as well.
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      });
      this.notify(alarm);
      this.rpoAlarms[array.name] = alarm;
      // The RPO covers each copy too: an alarm per place the array is copied to, on the age of
      // the newest set copied there (a place that reports nothing breaches, as here).
      for (const copy of array.copies) {
        const where = destinationId(copy);
        const copyAlarm = new cloudwatch.Alarm(this, `Rpo-${array.name}-${where.replace('/', '-')}`, {
          alarmDescription: `raidsnap: the newest set of ${array.name} copied to ${where} is older than its RPO of ${array.rpoMinutes} minutes`,
          metric: new cloudwatch.Metric({
            namespace: 'raidsnap',
            metricName: COPY_AGE_METRIC,
            dimensionsMap: { Array: array.name, Destination: where, service: 'raidsnap' },
            statistic: 'Maximum',
            period: REPORT_EVERY,
          }),
          threshold: array.rpoMinutes!,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cloudwatch.TreatMissingData.BREACHING,
        });
        this.notify(copyAlarm);
        this.rpoAlarms[`${array.name}@${where}`] = copyAlarm;
      }
    }

    // Retention reports every snapshot EC2 refused to delete (in use by an AMI, locked, managed
    // by AWS Backup) at every backup, and 0 once none is left: one alarm for every array.
    this.retentionAlarm = new cloudwatch.Alarm(this, 'RetentionBlocked', {
      alarmDescription: 'raidsnap: retention could not delete snapshots of sets it no longer keeps (in use by an AMI, locked, or managed by AWS Backup); the backup output names them and why',
      metric: new cloudwatch.Metric({
        namespace: 'raidsnap',
        metricName: NOT_DELETED_METRIC,
        dimensionsMap: { service: 'raidsnap' },
        statistic: 'Maximum',
        period: Duration.hours(6),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    this.notify(this.retentionAlarm);

    // A backup or restore that found the array's tag on another instance beside the one it
    // recorded goes on with the recorded one (raidsnap.aws.homes); someone tagged an instance
    // that is not the array's, or the array moved without anyone confirming it.
    this.tagConflictAlarm = new cloudwatch.Alarm(this, 'ArrayTagConflicts', {
      alarmDescription: 'raidsnap: an array\'s raidsnap:array tag is where it should not be (another instance carries it besides the one raidsnap recorded, or a configured replacement carries another name, so its recovery would be refused); the backup\'s notes say which and what to do',
      metric: new cloudwatch.Metric({
        namespace: 'raidsnap',
        metricName: 'ArrayTagConflicts',
        dimensionsMap: { service: 'raidsnap' },
        statistic: 'Sum',
        period: Duration.hours(6),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    this.notify(this.tagConflictAlarm);

    // A backup whose new set could not get its FSR (the Region's quota had no room, EC2 refused
    // or failed it, zones of another Region) reports 1, a backup that kept it 0.
    if (props.fastRestore) {
      this.fastRestoreAlarm = new cloudwatch.Alarm(this, 'FastRestoreNotKept', {
        alarmDescription: 'raidsnap: a backup could not keep Fast Snapshot Restore on its new set (fastRestore): restores find FSR only on an older set, or none; the backup output\'s fastRestore.warning says why',
        metric: new cloudwatch.Metric({
          namespace: 'raidsnap',
          metricName: FSR_NOT_KEPT_METRIC,
          dimensionsMap: { service: 'raidsnap' },
          statistic: 'Maximum',
          period: Duration.hours(6),
        }),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      this.notify(this.fastRestoreAlarm);
    }

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: `${stack.stackName}-raidsnap`,
      defaultInterval: Duration.days(7),
    });
    const runs = Object.entries(props.workflows).map(([name, machine]) => new cloudwatch.GraphWidget({
      title: `${name} runs`,
      left: [machine.metricStarted({ label: 'started' }), machine.metricSucceeded({ label: 'succeeded' }), machine.metricFailed({ label: 'failed' }),
        machine.metricTimedOut({ label: 'timed out' })],
      width: 8,
    }));
    const durations = new cloudwatch.GraphWidget({
      title: 'run duration (p90)',
      left: Object.entries(props.workflows).map(([name, machine]) => machine.metricTime({ statistic: 'p90', label: name })),
      width: 8,
    });
    const ages = new cloudwatch.GraphWidget({
      title: 'age of the newest complete set (minutes), here and where it is copied',
      left: [new cloudwatch.MathExpression({
        expression: `SEARCH('{raidsnap,Array,service} MetricName="${SET_AGE_METRIC}"', 'Maximum', ${REPORT_EVERY.toSeconds()})`,
        label: '',
        period: REPORT_EVERY,
      }), ...(props.arrays.some((a) => a.copies.length) ? [new cloudwatch.MathExpression({
        // One line per array and place it is copied to (Destination: a Region, or account/Region).
        expression: `SEARCH('{raidsnap,Array,Destination,service} MetricName="${COPY_AGE_METRIC}"', 'Maximum', ${REPORT_EVERY.toSeconds()})`,
        label: '',
        period: REPORT_EVERY,
      })] : [])],
      leftAnnotations: props.arrays.filter((a) => a.rpoMinutes).map((a) => ({ value: a.rpoMinutes!, label: `${a.name} RPO` })),
      width: 24,
    });
    this.dashboard.addWidgets(...runs, durations);
    this.dashboard.addWidgets(ages);
    if (props.workflows.recovery || props.workflows.drill) {
      // Published by the recovery's last step and the drill's report, per array.
      const outcomes = ['RecoverySucceeded', 'RecoveryFailed', 'DrillSucceeded', 'DrillFailed'];
      this.dashboard.addWidgets(new cloudwatch.GraphWidget({
        title: 'recoveries and drills by array',
        left: outcomes.map((name) => new cloudwatch.MathExpression({
          expression: `SEARCH('{raidsnap,Array,service} MetricName="${name}"', 'Sum', 86400)`,
          label: name,
          period: Duration.days(1),
        })),
        width: 24,
      }));
    }
    // Each run's last step publishes what the run itself cost at list prices (RunCostUsd,
    // US dollars, dimension Array; a nested restore publishes its own, so nothing counts
    // twice): one bar per array a 30 days. CloudWatch periods are fixed lengths, not calendar
    // months. A backup's is published once it ended, by BackupCost (README, What one run cost).
    this.dashboard.addWidgets(new cloudwatch.GraphWidget({
      title: 'run cost by array (US dollars, 30 days)',
      view: cloudwatch.GraphWidgetView.BAR,
      left: [new cloudwatch.MathExpression({
        expression: `SEARCH('{raidsnap,Array,service} MetricName="${RUN_COST_METRIC}"', 'Sum', ${Duration.days(30).toSeconds()})`,
        label: '',
        period: Duration.days(30),
      })],
      width: 24,
    }));
    if (Object.keys(this.rpoAlarms).length) {
      this.dashboard.addWidgets(new cloudwatch.AlarmStatusWidget({
        title: 'RPO alarms', alarms: Object.values(this.rpoAlarms), width: 24,
      }));
    }
  }

  /** The alarm notifies the topic when it fires and when it clears. An explicit topic policy
   * replaces the default one, so CloudWatch may publish only where the policy says: exactly
   * these alarms of this account (aws:SourceArn, aws:SourceAccount, as AWS recommends against
   * the confused deputy). */
  notify(alarm: cloudwatch.Alarm): void {
    alarm.addAlarmAction(new actions.SnsAction(this.topic));
    alarm.addOkAction(new actions.SnsAction(this.topic));
    if (!this.notifying.length) {
      this.topic.addToResourcePolicy(new iam.PolicyStatement({
        sid: 'AlarmsPublish',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: {
          ArnLike: { 'aws:SourceArn': Lazy.list({ produce: () => this.notifying.map((a) => a.alarmArn) }) },
          StringEquals: { 'aws:SourceAccount': Stack.of(this).account },
        },
      }));
    }
    this.notifying.push(alarm);
  }
}
