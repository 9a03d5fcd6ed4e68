import * as fs from 'fs';
import * as path from 'path';
import { Match } from 'aws-cdk-lib/assertions';
import { expandDefinition } from '../lib/constructs/workflow';
import { actionsOf, EXAMPLE_CONFIG, functionId, resourcesOf, statementsOf, synth } from './helpers';

const FILE = fs.readFileSync(path.join(__dirname, '..', 'statemachines', 'drill.asl.json'), 'utf8');
const DRILL_MODULES = ['drill_prepare', 'drill_verify', 'drill_teardown', 'drill_report'];

function drillMachine(template: ReturnType<typeof synth>['template']): [string, any] {
  const found = Object.entries(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))
    .filter(([, m]) => String(m.Properties.DefinitionString).includes('raidsnap drill:'));
  expect(found).toHaveLength(1);
  return found[0];
}

function drillSchedules(template: ReturnType<typeof synth>['template']) {
  const [machineId] = drillMachine(template);
  return Object.values(resourcesOf(template, 'AWS::Scheduler::Schedule'))
    .filter((s) => JSON.stringify(s.Properties.Target.Arn).includes(machineId));
}

describe('drills with the example config', () => {
  const { template } = synth(EXAMPLE_CONFIG);

  test('each configured drill gets a schedule that starts the drill workflow with its input, in its time zone', () => {
    const schedules = drillSchedules(template);
    expect(schedules).toHaveLength(1);
    expect(schedules[0].Properties).toMatchObject({
      ScheduleExpression: 'cron(0 3 ? * SUN *)',
      ScheduleExpressionTimezone: 'Europe/Berlin',
      State: 'ENABLED',
      FlexibleTimeWindow: { Mode: 'OFF' },
      Target: {
        Input: JSON.stringify({
          array: 'db1', targetInstanceId: 'i-0aaaabbbbccccdddd', mountPoint: '/mnt/raidsnap-drill',
          mdDevice: '/dev/md100', initialization: 'none', trigger: 'schedule',
        }),
        RetryPolicy: { MaximumRetryAttempts: 3, MaximumEventAgeInSeconds: 3600 },
      },
    });
  });

  test('the drill schedule\'s role may start only the drill workflow', () => {
    const [machineId] = drillMachine(template);
    const roleId = drillSchedules(template)[0].Properties.Target.RoleArn['Fn::GetAtt'][0];
    const statements = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
      .filter((p) => (p.Properties.Roles as Array<{ Ref: string }>).some((r) => r.Ref === roleId))
      .flatMap((p) => p.Properties.PolicyDocument.Statement);
    expect(statements).toEqual([expect.objectContaining({ Action: 'states:StartExecution', Resource: { Ref: machineId } })]);
  });

  test('the drill state machine carries its definition inline with its functions and the restore workflow', () => {
    const [, machine] = drillMachine(template);
    const subs = machine.Properties.DefinitionSubstitutions;
    const functions = Object.keys(subs).filter((k) => k.endsWith('FunctionArn'));
    expect(JSON.parse(machine.Properties.DefinitionString)).toEqual(expandDefinition('drill.asl.json', FILE, functions));
    expect(Object.keys(subs).sort()).toEqual([
      'CommandPollFunctionArn', 'DrillPrepareFunctionArn', 'DrillReportFunctionArn', 'DrillTeardownFunctionArn',
      'DrillVerifyFunctionArn', 'RestoreStateMachineArn',
    ]);
    expect(subs.RestoreStateMachineArn.Ref).toMatch(/^RestoreWorkflowStateMachine/);
    expect(subs.CommandPollFunctionArn).toEqual({ 'Fn::GetAtt': [functionId(template, 'command_poll'), 'Arn'] });
    for (const module of DRILL_MODULES) {
      const key = module.split('_').map((w) => w[0].toUpperCase() + w.slice(1)).join('') + 'FunctionArn';
      expect(subs[key]).toEqual({ 'Fn::GetAtt': [functionId(template, module), 'Arn'] });
    }
  });

  test('the drill restores read-only in attach mode, nested, and tears down on every path after it', () => {
    const doc = JSON.parse(drillMachine(template)[1].Properties.DefinitionString);
    expect(doc.States.Restore).toMatchObject({
      Resource: 'arn:aws:states:::states:startExecution.sync:2',
      Parameters: { 'StateMachineArn': '${RestoreStateMachineArn}', 'Name.$': '$.plan.restoreName', 'Input.$': '$.plan.restoreInput' },
    });
    // Teardown starts with the release on every path: a restore preempted after assembly
    // left the copy mounted, and only the release step can tell (it skips when nothing of the
    // drill's restore is attached).
    for (const name of ['Restore', 'Discover', 'PollDiscover', 'Verify']) {
      expect(doc.States[name].Catch[0].Next).toBe('Release');
    }
    expect(doc.States.Verify.Next).toBe('Release');
    expect(doc.States.Release.Next).toBe('IsReleaseNeeded');
    expect(doc.States.IsReleaseNeeded).toMatchObject({
      Default: 'WaitForRelease',
      Choices: [{ Variable: '$.release.status', StringEquals: 'skipped', Next: 'RemoveVolumes' }],
    });
    expect(doc.States.RemoveVolumes.Catch[0].Next).toBe('Report');
    expect(doc.States.AreVolumesRemoved).toMatchObject({ Default: 'Report', Choices: [{ Next: 'WaitForVolumes' }] });
    expect(doc.States.WaitForVolumes).toEqual(expect.objectContaining({ Type: 'Wait', Next: 'RemoveVolumes' }));
    expect(doc.States.Failed).toEqual({ Type: 'Fail', ErrorPath: '$.report.error', CausePath: '$.report.cause' });
  });

  test('the drill state machine may start only the restore workflow', () => {
    const [, machine] = drillMachine(template);
    const roleId = machine.Properties.RoleArn['Fn::GetAtt'][0];
    const statements = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
      .filter((p) => (p.Properties.Roles as Array<{ Ref: string }>).some((r) => r.Ref === roleId))
      .flatMap((p) => p.Properties.PolicyDocument.Statement);
    const starts = statements.filter((s: any) => actionsOf(s).includes('states:StartExecution'));
    expect(starts).toEqual([expect.objectContaining({ Resource: { Ref: expect.stringMatching(/^RestoreWorkflowStateMachine/) } })]);
    const follows = statements.filter((s: any) => actionsOf(s).includes('states:DescribeExecution'));
    expect(follows).toHaveLength(1);
    expect(actionsOf(follows[0])).toEqual(['states:DescribeExecution', 'states:StopExecution']);
    expect(JSON.stringify(follows[0].Resource)).toMatch(/:execution:raidsnap-restore:drill-\*"\]\]\}$/);
    const invoked = statements.filter((s: any) => actionsOf(s).includes('lambda:InvokeFunction'))
      .flatMap((s: any) => s.Resource).filter((r: any) => r['Fn::GetAtt']).map((r: any) => r['Fn::GetAtt'][0]);
    expect(new Set(invoked)).toEqual(new Set([...DRILL_MODULES, 'command_poll'].map((m) => functionId(template, m))));
  });

  test('the teardown deletes volumes only where they carry the tag of a restore the drill started', () => {
    const deletes = statementsOf(template, 'drill_teardown').filter((s) => actionsOf(s).includes('ec2:DeleteVolume'));
    expect(deletes).toHaveLength(1);
    expect(actionsOf(deletes[0])).toEqual(['ec2:DetachVolume', 'ec2:DeleteVolume']);
    const condition = deletes[0].Condition.StringLike['aws:ResourceTag/raidsnap:restore-execution'];
    expect(JSON.stringify(condition)).toMatch(/:execution:raidsnap-restore:drill-\*"\]\]\}$/);
    expect(Object.keys(deletes[0].Condition)).toEqual(['StringLike']);
    for (const module of DRILL_MODULES.filter((m) => m !== 'drill_teardown')) {
      const actions = statementsOf(template, module).flatMap(actionsOf);
      expect(actions.filter((a) => /^ec2:(Delete|Detach|Attach|Create)/.test(a))).toEqual([]);
    }
  });

  test('the report may publish only to the notification topic, with its key', () => {
    const statements = statementsOf(template, 'drill_report');
    const publishes = statements.filter((s) => actionsOf(s).includes('sns:Publish'));
    expect(publishes).toEqual([expect.objectContaining({ Resource: { Ref: expect.stringMatching(/^MonitoringNotifications/) } })]);
    const kms = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('kms:')));
    expect(kms).toEqual([expect.objectContaining({
      Action: ['kms:GenerateDataKey', 'kms:Decrypt'],
      Resource: { 'Fn::GetAtt': [expect.stringMatching(/^RaidsnapKey/), 'Arn'] },
    })]);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'raidsnap.handlers.drill_report.handler',
      Environment: { Variables: Match.objectLike({ TOPIC_ARN: { Ref: Match.stringLikeRegexp('^MonitoringNotifications') } }) },
    });
    for (const s of Object.values(resourcesOf(template, 'AWS::IAM::Policy')).flatMap((p) => p.Properties.PolicyDocument.Statement)) {
      if (actionsOf(s).includes('sns:Publish')) expect(s).toEqual(publishes[0]);
    }
  });

  test('drill functions run the discover and release documents only', () => {
    const verify = JSON.stringify(statementsOf(template, 'drill_verify'));
    expect(verify).toContain('document/raidsnap-discover');
    expect(verify).not.toMatch(/document\/raidsnap-(assemble|release|freeze)/);
    const teardown = JSON.stringify(statementsOf(template, 'drill_teardown'));
    expect(teardown).toContain('document/raidsnap-release');
    expect(teardown).not.toMatch(/document\/raidsnap-(assemble|discover|freeze)/);
  });
});

test('the dashboard shows drill and recovery outcomes by array', () => {
  const { template } = synth(EXAMPLE_CONFIG);
  const body = JSON.stringify(Object.values(resourcesOf(template, 'AWS::CloudWatch::Dashboard'))[0].Properties.DashboardBody);
  for (const text of ['recovery runs', 'drill runs', 'recoveries and drills by array', 'DrillFailed', 'RecoveryFailed']) {
    expect(body).toContain(text);
  }
});

test('a drill\'s restore is not announced as a recovery', () => {
  const { template } = synth(EXAMPLE_CONFIG);
  template.hasResourceProperties('AWS::Events::Rule', {
    EventPattern: Match.objectLike({
      detail: {
        stateMachineArn: [{ Ref: Match.stringLikeRegexp('^RestoreWorkflowStateMachine') }],
        status: ['SUCCEEDED'],
        name: [{ 'anything-but': { prefix: 'drill-' } }],
      },
    }),
  });
});

describe('drills without a config', () => {
  const { template } = synth();

  test('the drill workflow exists (start it by hand), with no schedule', () => {
    drillMachine(template);
    expect(drillSchedules(template)).toEqual([]);
  });
});
