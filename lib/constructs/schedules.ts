import { Duration, Stack, TimeZone } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as targets from 'aws-cdk-lib/aws-scheduler-targets';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { ArrayConfig } from '../config';
import { acknowledge } from '../nag';
import { stackKey } from './encryption';

export interface SchedulesProps {
  readonly arrays: readonly ArrayConfig[];
  readonly backup: sfn.IStateMachine;
}

/** One EventBridge Scheduler schedule per configured schedule of each array; each starts the
 * backup workflow with that array's input. Runs that cannot start land in a dead-letter queue. */
export class Schedules extends Construct {
  readonly deadLetterQueue?: sqs.Queue;
  readonly schedules: scheduler.Schedule[] = [];

  constructor(scope: Construct, id: string, props: SchedulesProps) {
    super(scope, id);
    const scheduled = props.arrays.filter((a) => a.schedules.length > 0);
    if (scheduled.length === 0) return;
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetters', {
      enforceSSL: true,
      encryption: sqs.QueueEncryption.KMS,
      encryptionMasterKey: stackKey(this),
      retentionPeriod: Duration.days(14),
    });
    acknowledge(this.deadLetterQueue, 'AwsSolutions-SQS3',
      'this queue is itself the dead-letter queue of the backup schedules; a queue behind it would only move the problem');
    const group = new scheduler.ScheduleGroup(this, 'Group', {});
    // One role for every backup schedule: start the backup, and put a start that failed into the
    // dead-letter queue, which is encrypted with the stack key.
    const role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
      }),
      description: 'raidsnap: lets the backup schedules start the backup workflow',
    });
    stackKey(this).grant(role, 'kms:GenerateDataKey', 'kms:Decrypt');
    for (const array of scheduled) {
      array.schedules.forEach((s, i) => {
        const target = new targets.StepFunctionsStartExecution(props.backup, {
          input: scheduler.ScheduleTargetInput.fromObject({
            array: array.name,
            consistency: array.consistency,
            trigger: 'schedule',
            ...(array.takeWith ? { takeWith: array.takeWith } : {}),
          }),
          deadLetterQueue: this.deadLetterQueue,
          role,
          retryAttempts: s.retryAttempts,
          maxEventAge: Duration.minutes(s.maxEventAgeMinutes),
        });
        this.schedules.push(new scheduler.Schedule(this, `${array.name}-${i}`, {
          description: `raidsnap backup of ${array.name}`,
          schedule: scheduler.ScheduleExpression.expression(s.expression, TimeZone.of(s.timezone)),
          scheduleGroup: group,
          target,
          // FlexibleTimeWindow (EventBridge Scheduler API Reference, 1..1440 minutes): the
          // target is invoked within the window after the scheduled time, dispersing a fleet's
          // starts; without it, every array on one expression starts at the same second.
          ...(s.flexibleWindowMinutes ? { timeWindow: scheduler.TimeWindow.flexible(Duration.minutes(s.flexibleWindowMinutes)) } : {}),
        }));
      });
    }
  }
}
