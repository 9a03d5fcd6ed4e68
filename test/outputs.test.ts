import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';

/** What `cdk deploy` prints at its end, and the CloudFormation console shows under Outputs: where
 * the workflows, the dashboard, the topic and the tables are. */
describe.each([
  ['without a config', undefined],
  ['with the example config', EXAMPLE_CONFIG],
])('stack outputs %s', (_label, config) => {
  const { template } = synth(config);
  const machineId = (file: string): string => {
    const ids = Object.entries(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))
      .filter(([, r]) => JSON.stringify(r.Properties.DefinitionString).includes(`raidsnap ${file}:`))
      .map(([id]) => id);
    expect(ids).toHaveLength(1);
    return ids[0];
  };
  // The console's Regional endpoint, https://<region>.console.aws.amazon.com (AWS General
  // Reference, "AWS Management Console endpoints and quotas"); the helper synthesizes in eu-west-1.
  const consoleLink = (service: string, page: string, id: string): Record<string, unknown> => ({
    'Fn::Join': ['', [`https://eu-west-1.console.aws.amazon.com/${service}/home?region=eu-west-1${page}`, { Ref: id }]],
  });

  test.each([
    ['Restore', 'restore'],
    ['Backup', 'backup'],
    ['Drill', 'drill'],
    ['Recovery', 'recovery'],
  ])('the %s state machine: its name, and its page in the Step Functions console', (output, file) => {
    const id = machineId(file);
    template.hasOutput(`${output}StateMachineName`, { Value: { 'Fn::GetAtt': [id, 'Name'] } });
    template.hasOutput(`${output}StateMachineConsole`, {
      Value: consoleLink('states', '#/statemachines/view/', id),
      Condition: 'InAwsPartition',
    });
  });

  test('the restore and recovery state machines keep the names the CLI and the runbook use', () => {
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', { StateMachineName: 'raidsnap-restore' });
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', { StateMachineName: 'raidsnap-recovery' });
  });

  test('the dashboard: its name and its page in the CloudWatch console', () => {
    const [id] = Object.keys(resourcesOf(template, 'AWS::CloudWatch::Dashboard'));
    template.hasOutput('DashboardName', { Value: { Ref: id } });
    template.hasOutput('DashboardConsole', {
      Value: consoleLink('cloudwatch', '#dashboards:name=', id),
      Condition: 'InAwsPartition',
    });
  });

  test('the notification topic ARN, to subscribe to', () => {
    const [id] = Object.keys(resourcesOf(template, 'AWS::SNS::Topic'));
    template.hasOutput('NotificationTopicArn', { Value: { Ref: id } });
  });

  test('the snapshot set table and the restore lock table', () => {
    const tables = resourcesOf(template, 'AWS::DynamoDB::Table');
    const sets = Object.keys(tables).filter((id) => id.startsWith('SnapshotSets'));
    const lock = Object.keys(tables).filter((id) => id.startsWith('RestoreLock'));
    expect([sets.length, lock.length]).toEqual([1, 1]);
    template.hasOutput('SnapshotSetsTableName', { Value: { Ref: sets[0] } });
    template.hasOutput('RestoreLockTableName', { Value: { Ref: lock[0] } });
  });

  test('console links are given only where their address is known: the aws partition', () => {
    expect(template.toJSON().Conditions.InAwsPartition).toEqual({ 'Fn::Equals': [{ Ref: 'AWS::Partition' }, 'aws'] });
  });

  test('every output says what it is', () => {
    const outputs = Object.values(template.findOutputs('*'));
    expect(outputs.length).toBe(13);
    for (const output of outputs) expect(output.Description).toMatch(/^[A-Z].{30,}$/);
  });
});

describe('Step Functions log groups', () => {
  // Step Functions writes the CloudWatch Logs resource policy for a state machine's log group
  // unless the group's name starts with /aws/vendedlogs/; that policy is limited to 5,120
  // characters (Step Functions developer guide, "Avoiding CloudWatch Logs resource policy size
  // restrictions").
  test('every state machine logs to a group under /aws/vendedlogs/states/', () => {
    const { template } = synth(EXAMPLE_CONFIG);
    const groups = resourcesOf(template, 'AWS::Logs::LogGroup');
    const machines = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'));
    expect(machines.length).toBe(4);
    for (const machine of machines) {
      const [destination] = machine.Properties.LoggingConfiguration.Destinations;
      const [groupId] = destination.CloudWatchLogsLogGroup.LogGroupArn['Fn::GetAtt'];
      expect(groups[groupId].Properties.LogGroupName).toMatch(/^\/aws\/vendedlogs\/states\//);
    }
  });
});
