import { Match } from 'aws-cdk-lib/assertions';
import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';

describe('monitoring', () => {
  const { template } = synth(EXAMPLE_CONFIG);

  test('notifications go to one topic encrypted with the stack key, refusing plain HTTP', () => {
    template.resourceCountIs('AWS::SNS::Topic', 1);
    template.hasResourceProperties('AWS::SNS::Topic', {
      KmsMasterKeyId: { 'Fn::GetAtt': [Match.stringLikeRegexp('^RaidsnapKey'), 'Arn'] },
    });
    template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: Match.objectLike({
        Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
      }),
    });
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'storage-oncall@example.com' });
  });

  test('CloudWatch may publish to the topic for exactly the stack\'s alarms of this account', () => {
    const alarms = Object.keys(template.findResources('AWS::CloudWatch::Alarm')).sort();
    expect(alarms.length).toBeGreaterThan(0);
    const statements = Object.values(template.findResources('AWS::SNS::TopicPolicy'))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as Array<Record<string, any>>)
      .filter((s) => s.Principal?.Service === 'cloudwatch.amazonaws.com');
    expect(statements).toHaveLength(1);
    const [s] = statements;
    expect([s.Effect, s.Action, s.Resource]).toEqual(['Allow', 'sns:Publish', { Ref: expect.stringMatching(/^MonitoringNotifications/) }]);
    expect(s.Condition.StringEquals).toEqual({ 'aws:SourceAccount': '123456789012' });
    const named = (s.Condition.ArnLike['aws:SourceArn'] as Array<{ 'Fn::GetAtt': [string, string] }>).map((a) => a['Fn::GetAtt'][0]).sort();
    expect(named).toEqual(alarms);
  });

  test('the stack key rotates', () => {
    template.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
  });

  test('every failed, timed out or aborted run of either workflow is notified', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        'source': ['aws.states'],
        'detail-type': ['Step Functions Execution Status Change'],
        'detail': {
          stateMachineArn: Match.arrayWith([{ Ref: Match.stringLikeRegexp('^BackupWorkflowStateMachine') }]),
          status: ['FAILED', 'TIMED_OUT', 'ABORTED'],
        },
      },
      Targets: [Match.objectLike({ Arn: { Ref: Match.stringLikeRegexp('^MonitoringNotifications') } })],
    });
  });

  test('a succeeded restore is notified as a recovery', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: Match.objectLike({
        detail: { stateMachineArn: [{ Ref: Match.stringLikeRegexp('^RestoreWorkflowStateMachine') }], status: ['SUCCEEDED'] },
      }),
    });
  });

  test('the set-age reporter runs every 15 minutes and may only read snapshots', () => {
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(15 minutes)',
      Target: Match.objectLike({ Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^MonitoringSetAgeReporter'), 'Arn'] } }),
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'raidsnap.handlers.monitor_set_age.handler',
      Environment: { Variables: Match.objectLike({ CONFIGURED_ARRAYS: 'db1,analytics' }) },
    });
  });

  test('an array with an RPO gets an alarm on the age of its newest complete set; missing data breaches', () => {
    // (The recovery's attached-EBS alarms are tested in recovery.test.ts.)
    const alarms = Object.values(resourcesOf(template, 'AWS::CloudWatch::Alarm'))
      .filter((a) => a.Properties.Namespace === 'raidsnap' && a.Properties.MetricName === 'NewestCompleteSetAgeMinutes');
    expect(alarms).toHaveLength(1);
    expect(alarms[0].Properties).toMatchObject({
      MetricName: 'NewestCompleteSetAgeMinutes',
      Namespace: 'raidsnap',
      Dimensions: expect.arrayContaining([{ Name: 'Array', Value: 'db1' }, { Name: 'service', Value: 'raidsnap' }]),
      Threshold: 300,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'breaching',
      Period: 900,
    });
    expect(JSON.stringify(alarms[0].Properties.AlarmActions)).toContain('MonitoringNotifications');
  });

  test('what retention could not delete, what the sweeper found and an array tag on a second instance each page the operators', () => {
    const alarms = Object.values(resourcesOf(template, 'AWS::CloudWatch::Alarm'))
      .filter((a) => a.Properties.Namespace === 'raidsnap' && a.Properties.MetricName !== 'NewestCompleteSetAgeMinutes');
    expect(alarms.map((a) => a.Properties.MetricName).sort()).toEqual(['ArrayTagConflicts', 'LeftoversFound', 'SnapshotsNotDeleted']);
    for (const a of alarms) {
      expect(a.Properties).toMatchObject({
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
      expect(JSON.stringify(a.Properties.AlarmActions)).toContain('MonitoringNotifications');
    }
  });

  test('one dashboard shows runs, durations and set ages', () => {
    const dashboards = Object.values(resourcesOf(template, 'AWS::CloudWatch::Dashboard'));
    expect(dashboards).toHaveLength(1);
    const body = JSON.stringify(dashboards[0].Properties.DashboardBody);
    for (const text of ['backup runs', 'restore runs', 'run duration', 'NewestCompleteSetAgeMinutes', 'RPO alarms']) {
      expect(body).toContain(text);
    }
  });

  test('the dashboard sums each array\'s run costs over 30-day periods', () => {
    // Each run's last step publishes its own cost (RunCostUsd, dimension Array): the widget
    // adds them up per array, one bar a 30 days (CloudWatch periods are fixed, not calendar).
    const dashboards = Object.values(resourcesOf(template, 'AWS::CloudWatch::Dashboard'));
    const body = JSON.stringify(dashboards[0].Properties.DashboardBody);
    expect(body).toContain('run cost by array');
    expect(body).toMatch(/SEARCH\('\{raidsnap,Array,service\} MetricName=\W+RunCostUsd\W+', 'Sum', 2592000\)/);
  });

  test('every log group is encrypted with the stack key', () => {
    const groups = Object.values(resourcesOf(template, 'AWS::Logs::LogGroup'));
    expect(groups.length).toBeGreaterThan(10);
    for (const g of groups) expect(JSON.stringify(g.Properties.KmsKeyId)).toContain('RaidsnapKey');
  });
});
