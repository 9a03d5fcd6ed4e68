import { Aws, CfnCondition, CfnOutput, Fn, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';

export interface OutputsProps {
  /** The workflows by the name their outputs carry (Restore, Backup, Drill, Recovery). */
  readonly workflows: Record<string, sfn.StateMachine>;
  readonly dashboard: cloudwatch.Dashboard;
  readonly topic: sns.ITopic;
  readonly snapshotSets: dynamodb.ITable;
  readonly restoreLock: dynamodb.ITable;
}

/** What `cdk deploy` prints when it ends (and the CloudFormation console shows under Outputs):
 * where to start a restore, watch the runs, subscribe to the notifications and find the set
 * manifests. The output ids are part of the README's runbook: keep them. */
export class Outputs extends Construct {
  constructor(scope: Construct, id: string, props: OutputsProps) {
    super(scope, id);
    const stack = Stack.of(this);
    // The console's Regional endpoint is https://<region>.console.aws.amazon.com in the aws
    // partition (AWS General Reference, "AWS Management Console endpoints and quotas",
    // https://docs.aws.amazon.com/general/latest/gr/mgmt-console.html); other partitions have
    // consoles of their own, so the links are given only there. The pages' fragments
    // (#/statemachines/view/<ARN>, #dashboards:name=<name>) are the consoles' own addresses.
    const inAws = new CfnCondition(stack, 'InAwsPartition', { expression: Fn.conditionEquals(Aws.PARTITION, 'aws') });
    const consoleOf = (service: string, page: string): string =>
      `https://${stack.region}.console.aws.amazon.com/${service}/home?region=${stack.region}${page}`;
    const out = (name: string, value: string, description: string, condition?: CfnCondition): void => {
      const output = new CfnOutput(stack, name, { value, description });
      if (condition) output.condition = condition;
    };
    for (const [name, machine] of Object.entries(props.workflows)) {
      const what = name.toLowerCase();
      out(`${name}StateMachineName`, machine.stateMachineName,
        `The ${what} workflow (Step Functions state machine): start, stop and follow its runs there or with the raidsnap CLI`);
      out(`${name}StateMachineConsole`, consoleOf('states', `#/statemachines/view/${machine.stateMachineArn}`),
        `The ${what} workflow in the Step Functions console: its runs, and Start execution`, inAws);
    }
    out('DashboardName', props.dashboard.dashboardName, 'The CloudWatch dashboard: runs, durations, failures and the age of each array\'s newest complete set');
    out('DashboardConsole', consoleOf('cloudwatch', `#dashboards:name=${props.dashboard.dashboardName}`),
      'The dashboard in the CloudWatch console', inAws);
    out('NotificationTopicArn', props.topic.topicArn,
      'Failed runs, recoveries, drills and alarms are published here; each email subscription must be confirmed from its mail');
    out('SnapshotSetsTableName', props.snapshotSets.tableName,
      'The manifest of every snapshot set (which snapshot is which slot), kept when the stack is deleted');
    out('RestoreLockTableName', props.restoreLock.tableName,
      'Restore locks, the volumes each restore created, and where each array lives (raidsnap move writes it)');
  }
}
