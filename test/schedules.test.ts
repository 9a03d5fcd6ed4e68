import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Match } from 'aws-cdk-lib/assertions';
import { Template } from 'aws-cdk-lib/assertions';
import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';

function backupSchedules(template: Template) {
  return Object.values(resourcesOf(template, 'AWS::Scheduler::Schedule'))
    .filter((s) => JSON.stringify(s.Properties.Target.Arn).includes('BackupWorkflowStateMachine'));
}

describe('schedules', () => {
  test('without a config there is no schedule and no dead-letter queue', () => {
    const { template } = synth();
    expect(backupSchedules(template)).toHaveLength(0);
    // (the rule on restore ends has a dead-letter queue of its own, with or without a config)
    expect(Object.keys(resourcesOf(template, 'AWS::SQS::Queue')).filter((id) => id.startsWith('Schedules'))).toEqual([]);
  });

  test('each configured schedule starts the backup with the array input, in its time zone', () => {
    const { template } = synth(EXAMPLE_CONFIG);
    expect(backupSchedules(template)).toHaveLength(2);
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'cron(0 */4 * * ? *)',
      ScheduleExpressionTimezone: 'Europe/Berlin',
      State: 'ENABLED',
      Target: Match.objectLike({
        Input: JSON.stringify({ array: 'db1', consistency: 'fsfreeze', trigger: 'schedule' }),
        RetryPolicy: { MaximumRetryAttempts: 3, MaximumEventAgeInSeconds: 3600 },
        DeadLetterConfig: { Arn: Match.anyValue() },
      }),
    });
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(1 day)',
      ScheduleExpressionTimezone: 'UTC',
      Target: Match.objectLike({
        Input: JSON.stringify({ array: 'analytics', consistency: 'crash', trigger: 'schedule' }),
      }),
    });
  });

  test('a schedule with flexibleWindowMinutes starts within that window; without, at its time', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-window-'));
    const file = path.join(dir, 'fleet.yaml');
    fs.writeFileSync(file, [
      'arrays:',
      '  db1: { schedule: { expression: "cron(0 */4 * * ? *)", flexibleWindowMinutes: 15 } }',
      '  db2: { schedule: "cron(0 */4 * * ? *)" }',
    ].join('\n'));
    const { template } = synth(file);
    const byArray = Object.fromEntries(backupSchedules(template).map((s) => [
      JSON.parse(s.Properties.Target.Input).array, s.Properties.FlexibleTimeWindow,
    ]));
    expect(byArray).toEqual({
      db1: { Mode: 'FLEXIBLE', MaximumWindowInMinutes: 15 },
      db2: { Mode: 'OFF' },
    });
  });

  test('the scheduler role may start only the backup state machine', () => {
    const { template } = synth(EXAMPLE_CONFIG);
    // The backup schedules' roles (drill schedules, recovery and drills start other machines).
    const roles = new Set(backupSchedules(template).map((s) => s.Properties.Target.RoleArn['Fn::GetAtt'][0]));
    const policies = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
      .filter((p) => (p.Properties.Roles as Array<{ Ref: string }>).some((r) => roles.has(r.Ref)))
      .map((p) => p.Properties.PolicyDocument.Statement)
      .filter((statements: any[]) => statements.some((s) => [].concat(s.Action).includes('states:StartExecution' as never)));
    expect(policies.length).toBeGreaterThan(0);
    for (const statements of policies) {
      const starts = statements.filter((s: any) => [].concat(s.Action).includes('states:StartExecution' as never));
      for (const s of starts) expect(JSON.stringify(s.Resource)).toContain('BackupWorkflowStateMachine');
    }
  });

  test('per-array retention reaches the retention function', () => {
    const { template } = synth(EXAMPLE_CONFIG);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'raidsnap.handlers.backup_retention.handler',
      Environment: { Variables: Match.objectLike({ RETENTION_BY_ARRAY: JSON.stringify({ db1: 14, analytics: 3 }) }) },
    });
  });

  test('the dead-letter queue refuses plain HTTP and is encrypted with the stack key', () => {
    const { template } = synth(EXAMPLE_CONFIG);
    template.hasResourceProperties('AWS::SQS::Queue', {
      KmsMasterKeyId: { 'Fn::GetAtt': [Match.stringLikeRegexp('^RaidsnapKey'), 'Arn'] },
    });
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      PolicyDocument: Match.objectLike({
        Statement: Match.arrayWith([Match.objectLike({
          Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } },
        })]),
      }),
    });
  });
});

test('the scheduler may put failed starts into the encrypted dead-letter queue', () => {
  const { template } = synth(EXAMPLE_CONFIG);
  const statements = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Array<Record<string, any>>);
  const send = statements.find((s) => [].concat(s.Action).includes('sqs:SendMessage' as never));
  expect(send).toBeDefined();
  const kms = statements.filter((s) => JSON.stringify(s.Resource).includes('RaidsnapKey'));
  expect(kms.flatMap((s) => [].concat(s.Action))).toEqual(expect.arrayContaining(['kms:GenerateDataKey', 'kms:Decrypt']));
});
