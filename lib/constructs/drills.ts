import { Duration, Stack, TimeZone } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as targets from 'aws-cdk-lib/aws-scheduler-targets';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { ArrayConfig, DrillConfig } from '../config';
import { acknowledge } from '../nag';
import { PricesConfig, runPriceTable } from '../prices-config';
import { Documents } from './documents';
import { FunctionFactory, FunctionSpec } from './functions';
import { RestorePermissions } from './permissions';
import { nagArn } from '../nag';
import { acknowledgeNestedRestore, DRILL_RESTORE_PREFIX } from './recovery';
import { RestoreLock, RestoreWorkflow } from './restore-workflow';
import { SnapshotSets } from './snapshot-sets';
import { Workflow } from './workflow';

export { DRILL_RESTORE_PREFIX };

export interface DrillsProps {
  readonly factory: FunctionFactory;
  readonly arrays: readonly ArrayConfig[];
  readonly documents: Documents;
  readonly restore: RestoreWorkflow;
  /** The restore lock table: the drill restore's own record of the volumes it created. */
  readonly lock: RestoreLock;
  /** The shared CommandPoll function (made by the backup workflow). */
  readonly commandPoll: lambda.IFunction;
  /** The sets' manifests: the check reads what the restored set recorded. */
  readonly sets: SnapshotSets;
  /** The config's overrides of the list prices a run's cost is computed with. */
  readonly prices?: PricesConfig;
}

const TIMEOUT = Duration.hours(73);

/** statemachines/drill.asl.json, its functions, and a schedule per configured drill. */
export class Drills extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly functions: Record<string, lambda.Function>;
  readonly schedules: scheduler.Schedule[] = [];
  /** Fixed, so that Report may read its own run's history without depending on the machine. */
  readonly stateMachineName: string;

  constructor(scope: Construct, id: string, props: DrillsProps) {
    super(scope, id);
    const p = new RestorePermissions(this);
    const docs = props.documents;
    const restoreName = props.restore.stateMachineName;
    this.stateMachineName = `${Stack.of(this).stackName}-drill`;
    const environment = {
      RESTORE_STATE_MACHINE_ARN: props.restore.stateMachine.stateMachineArn,
      RUN_NONCE_SECRET: props.restore.runSecret.secretArn,
      RESTORE_LOCK_TABLE: props.lock.table.tableName,
      DISCOVER_DOCUMENT: docs.names.discover,
      RELEASE_DOCUMENT: docs.names.release,
      // The check warns when a configured recovery of the array could never mount it.
      RECOVERY_BY_ARRAY: JSON.stringify(Object.fromEntries(props.arrays.filter((a) => a.recovery).map((a) => [a.name, a.recovery]))),
      // The table Report prices the drill's cost with (lib/prices-config.ts).
      RUN_PRICES: runPriceTable(props.prices),
    };
    const specs: FunctionSpec[] = [
      {
        id: 'DrillPrepare', module: 'drill_prepare',
        description: 'drill: validate the request and the drill instance',
        statements: [p.describe('ec2:DescribeInstances')],
      },
      {
        id: 'DrillVerify', module: 'drill_verify',
        description: 'drill: discover the copy on the drill instance and check it against the set',
        statements: [
          p.describe('ec2:DescribeSnapshots'), ...p.sendCommand(docs.arns('discover')),
          ...props.sets.statements('GetItem'),
        ],
      },
      {
        id: 'DrillTeardown', module: 'drill_teardown',
        description: 'drill: release the copy, detach and delete only the volumes its restore created',
        statements: [
          p.describe('ec2:DescribeVolumes'),
          ...p.sendCommand(docs.arns('release')),
          ...p.removeDrillVolumes(restoreName, DRILL_RESTORE_PREFIX),
          // The start time of its restore: with the ARN, the run whose volumes it removes.
          p.describeExecutions(restoreName, DRILL_RESTORE_PREFIX),
          // With the restore's start time, its nonce: the run whose volumes it removes.
          ...p.readRunSecret(props.restore.runSecret),
          // The restore's own record of the volumes it created: only those are removed.
          ...props.lock.statements('GetItem'),
        ],
      },
      {
        id: 'DrillReport', module: 'drill_report',
        description: 'drill: publish DrillSucceeded or DrillFailed and notify the operators',
        // The drill's own history, which its cost is read from (raidsnap.aws.costs).
        statements: [new iam.PolicyStatement({
          actions: ['states:GetExecutionHistory'],
          resources: [`${p.executionArnPrefix(this.stateMachineName)}*`],
        })],
      },
    ];
    this.functions = props.factory.createAll(this, specs.map((s) => ({ ...s, environment })));
    const teardownPolicy = this.functions.DrillTeardown.role?.node.tryFindChild('DefaultPolicy');
    if (teardownPolicy) {
      acknowledge(teardownPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${restoreName}:${DRILL_RESTORE_PREFIX}*`)}]`,
        'DescribeExecution of the restores drills start (named drill-...) only: their start time tells the run whose volumes a teardown removes');
    }
    const reportPolicy = this.functions.DrillReport.role?.node.tryFindChild('DefaultPolicy');
    if (reportPolicy) {
      acknowledge(reportPolicy,
        `AwsSolutions-IAM5[Resource::${nagArn(this, 'states', `execution:${this.stateMachineName}:*`)}]`,
        'GetExecutionHistory of the drill workflow\'s own executions only: the drill\'s cost, read from its own history');
    }
    const f = this.functions;
    const workflow = new Workflow(this, 'Workflow', {
      definitionFile: 'drill.asl.json',
      comment: 'raidsnap drill: restore a set read-only onto a drill instance, check it, remove it, report',
      timeout: TIMEOUT,
      functions: {
        DrillPrepareFunctionArn: f.DrillPrepare,
        DrillVerifyFunctionArn: f.DrillVerify,
        DrillTeardownFunctionArn: f.DrillTeardown,
        DrillReportFunctionArn: f.DrillReport,
        CommandPollFunctionArn: props.commandPoll,
      },
      values: { RestoreStateMachineArn: props.restore.stateMachine.stateMachineArn },
    });
    this.stateMachine = workflow.stateMachine;
    (this.stateMachine.node.defaultChild as sfn.CfnStateMachine).stateMachineName = this.stateMachineName;
    // Its restores are named drill-...: it may follow and stop those only.
    const names = `${DRILL_RESTORE_PREFIX}*`;
    for (const s of p.runNestedRestore(props.restore.stateMachine.stateMachineArn, restoreName, names)) {
      this.stateMachine.addToRolePolicy(s);
    }
    acknowledgeNestedRestore(this.stateMachine, restoreName, names);

    const drilled = props.arrays.filter((a) => a.drill !== undefined) as Array<ArrayConfig & { drill: DrillConfig }>;
    if (drilled.length) {
      const group = new scheduler.ScheduleGroup(this, 'Group', {});
      for (const array of drilled) {
        const d = array.drill;
        this.schedules.push(new scheduler.Schedule(this, `${array.name}`, {
          description: `raidsnap restore drill of ${array.name} onto ${d.targetInstanceId}`,
          schedule: scheduler.ScheduleExpression.expression(d.schedule.expression, TimeZone.of(d.schedule.timezone)),
          scheduleGroup: group,
          target: new targets.StepFunctionsStartExecution(this.stateMachine, {
            input: scheduler.ScheduleTargetInput.fromObject({
              array: array.name,
              targetInstanceId: d.targetInstanceId,
              mountPoint: d.mountPoint,
              mdDevice: d.mdDevice,
              initialization: d.initialization,
              trigger: 'schedule',
            }),
            retryAttempts: d.schedule.retryAttempts,
            maxEventAge: Duration.minutes(d.schedule.maxEventAgeMinutes),
          }),
        }));
      }
    }
  }

  /** Send the drill's report to the operators' topic (encrypted with `key`): made after the
   * monitoring, which watches this workflow's runs. */
  notifyTo(topic: sns.ITopic, key: kms.IKey): void {
    const report = this.functions.DrillReport;
    report.addEnvironment('TOPIC_ARN', topic.topicArn);
    report.addToRolePolicy(new iam.PolicyStatement({ actions: ['sns:Publish'], resources: [topic.topicArn] }));
    // SNS encrypts the message with the topic's key on the publisher's behalf.
    report.addToRolePolicy(new iam.PolicyStatement({
      actions: ['kms:GenerateDataKey', 'kms:Decrypt'],
      resources: [key.keyArn],
    }));
  }
}
