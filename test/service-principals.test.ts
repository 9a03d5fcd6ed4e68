import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';

type Statement = { Sid?: string; Effect: string; Principal?: any; Action: string | string[]; Condition?: Record<string, Record<string, any>> };

/** Every statement in a resource policy (key, topic) that lets an AWS service principal in. */
function serviceStatements(configPath?: string): Array<{ where: string; service: string; statement: Statement }> {
  const { template } = synth(configPath);
  const out: Array<{ where: string; service: string; statement: Statement }> = [];
  const policies: Array<[string, Statement[]]> = [
    ...Object.entries(resourcesOf(template, 'AWS::KMS::Key')).map(([id, r]) => [id, r.Properties.KeyPolicy.Statement] as [string, Statement[]]),
    ...Object.entries(resourcesOf(template, 'AWS::SNS::TopicPolicy')).map(([id, r]) => [id, r.Properties.PolicyDocument.Statement] as [string, Statement[]]),
  ];
  for (const [where, statements] of policies) {
    for (const statement of statements) {
      if (statement.Effect !== 'Allow' || !statement.Principal?.Service) continue;
      for (const service of ([] as unknown[]).concat(statement.Principal.Service)) {
        out.push({ where, service: typeof service === 'string' ? service : JSON.stringify(service), statement });
      }
    }
  }
  return out;
}

const ACCOUNT = '123456789012';
const TOPIC_ARN = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':sns:eu-west-1:123456789012:raidsnap-notifications']] };

describe.each([['no config', undefined], ['the example config', EXAMPLE_CONFIG]])('service principals (%s)', (_name, config) => {
  const statements = serviceStatements(config);

  test('no service principal is let in without a condition', () => {
    const bare = statements.filter((s) => !s.statement.Condition || !Object.keys(s.statement.Condition).length);
    expect(bare.map((s) => `${s.where}: ${s.service}`)).toEqual([]);
  });

  test('EventBridge publishes to the topic only for the stack\'s own rules of this account', () => {
    const { template } = synth(config);
    const rules = Object.entries(resourcesOf(template, 'AWS::Events::Rule'))
      .filter(([, r]) => (r.Properties.Targets ?? []).some((t: any) => JSON.stringify(t.Arn).includes('MonitoringNotifications')))
      .map(([id]) => id).sort();
    expect(rules.length).toBeGreaterThan(0);
    const publish = statements.filter((s) => s.service === 'events.amazonaws.com' && s.where.startsWith('MonitoringNotificationsPolicy'));
    expect(publish).toHaveLength(1);
    const { Condition } = publish[0].statement;
    expect(Condition!.StringEquals).toEqual({ 'aws:SourceAccount': ACCOUNT });
    const named = (Condition!.ArnEquals['aws:SourceArn'] as Array<{ 'Fn::GetAtt': [string, string] }>).map((a) => a['Fn::GetAtt'][0]).sort();
    expect(named).toEqual(rules);
  });

  test('EventBridge and CloudWatch may use the key only for the notification topic', () => {
    const onKey = statements.filter((s) => s.where.startsWith('RaidsnapKey') && ['events.amazonaws.com', 'cloudwatch.amazonaws.com'].includes(s.service));
    expect(onKey.map((s) => s.service).sort()).toEqual(['cloudwatch.amazonaws.com', 'events.amazonaws.com']);
    for (const { service, statement } of onKey) {
      expect([service, [statement.Action].flat().sort()]).toEqual([service, ['kms:Decrypt', 'kms:GenerateDataKey*']]);
      expect(statement.Condition!.StringEquals['kms:EncryptionContext:aws:sns:topicArn']).toEqual(TOPIC_ARN);
    }
    const alarms = onKey.find((s) => s.service === 'cloudwatch.amazonaws.com')!;
    expect(alarms.statement.Condition!.StringEquals['aws:SourceAccount']).toEqual(ACCOUNT);
  });

  test('the topic the key names is the notification topic', () => {
    const { template } = synth(config);
    const topics = Object.values(resourcesOf(template, 'AWS::SNS::Topic'));
    expect(topics.map((t) => t.Properties.TopicName)).toEqual(['raidsnap-notifications']);
  });

  test('CloudWatch Logs may use the key only for raidsnap\'s own log groups, and every raidsnap log group is one of them', () => {
    const logs = statements.filter((s) => s.service.includes('logs.'));
    expect(logs).toHaveLength(1);
    const arns = logs[0].statement.Condition!.ArnLike['kms:EncryptionContext:aws:logs:arn'] as Array<{ 'Fn::Join': [string, unknown[]] }>;
    const prefixes = arns.map((a) => String(a['Fn::Join'][1].at(-1)).replace(/^:logs:eu-west-1:123456789012:log-group:/, '').replace(/\*$/, '')).sort();
    expect(prefixes).toEqual(['/aws/vendedlogs/states/raidsnap/raidsnap/', '/raidsnap/raidsnap/functions/']);
    const { template } = synth(config);
    const groups = Object.values(resourcesOf(template, 'AWS::Logs::LogGroup')).filter((g) => g.Properties.KmsKeyId);
    expect(groups.length).toBeGreaterThan(0);
    for (const group of groups) {
      expect(prefixes.some((p) => String(group.Properties.LogGroupName).startsWith(p))).toBe(true);
    }
  });
});
