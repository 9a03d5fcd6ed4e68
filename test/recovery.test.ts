import * as fs from 'fs';
import * as path from 'path';
import { Match } from 'aws-cdk-lib/assertions';
import { heartbeatFits, LIFECYCLE_HEARTBEAT } from '../lib/constructs/recovery';
import { expandDefinition, HEARTBEAT_RETRY, LAMBDA_RETRY, worstCaseRetrySeconds } from '../lib/constructs/workflow';
import { actionsOf, EXAMPLE_CONFIG, functionId, resourcesOf, statementsOf, synth } from './helpers';

const FILE = fs.readFileSync(path.join(__dirname, '..', 'statemachines', 'recovery.asl.json'), 'utf8');

function recoveryMachine(template: ReturnType<typeof synth>['template']) {
  const machines = Object.entries(resourcesOf(template, 'AWS::StepFunctions::StateMachine'));
  const found = machines.filter(([, m]) => String(m.Properties.DefinitionString).includes('raidsnap recovery:'));
  expect(found).toHaveLength(1);
  return found[0];
}

function roleStatements(template: ReturnType<typeof synth>['template'], roleId: string): Array<Record<string, any>> {
  return Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
    .filter((p) => (p.Properties.Roles as Array<{ Ref: string }>).some((r) => r.Ref === roleId))
    .flatMap((p) => p.Properties.PolicyDocument.Statement);
}

describe('recovery with the example config', () => {
  const { template } = synth(EXAMPLE_CONFIG);
  const start = () => functionId(template, 'recovery_start');

  test('an alarm per configured array watches StatusCheckFailed_AttachedEBS: Maximum >= 1 for 2 x 1 minute', () => {
    for (const [array, instance] of [['db1', 'i-0123456789abcdef0'], ['analytics', 'i-0bbbbccccddddeeee']]) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/EC2',
        MetricName: 'StatusCheckFailed_AttachedEBS',
        Dimensions: [{ Name: 'InstanceId', Value: instance }],
        Statistic: 'Maximum',
        Period: 60,
        EvaluationPeriods: 2,
        DatapointsToAlarm: 2,
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
        AlarmDescription: Match.stringLikeRegexp(`array ${array}`),
        AlarmActions: [{ Ref: Match.stringLikeRegexp('^MonitoringNotifications') }],
      });
    }
  });

  test('the alarm\'s state change to ALARM, and only its own, starts the recovery trigger', () => {
    const alarms = Object.entries(resourcesOf(template, 'AWS::CloudWatch::Alarm'))
      .filter(([, a]) => a.Properties.MetricName === 'StatusCheckFailed_AttachedEBS');
    expect(alarms).toHaveLength(2);
    for (const [alarmId] of alarms) {
      template.hasResourceProperties('AWS::Events::Rule', {
        EventPattern: {
          'source': ['aws.cloudwatch'],
          'detail-type': ['CloudWatch Alarm State Change'],
          'resources': [{ 'Fn::GetAtt': [alarmId, 'Arn'] }],
          'detail': { state: { value: ['ALARM'] } },
        },
        State: 'ENABLED',
        Targets: [Match.objectLike({
          Arn: { 'Fn::GetAtt': [start(), 'Arn'] },
          RetryPolicy: { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 3600 },
        })],
      });
    }
  });

  test('the termination of an instance with a configured replacement, or of the replacement (where a recovery may have moved the array), starts the trigger; without one, nothing', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        'source': ['aws.ec2'],
        'detail-type': ['EC2 Instance State-change Notification'],
        'detail': { 'instance-id': ['i-0123456789abcdef0', 'i-0fedcba9876543210'], 'state': ['terminated'] },
      },
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [start(), 'Arn'] } })],
    });
    const lost = Object.values(resourcesOf(template, 'AWS::Events::Rule'))
      .filter((r) => r.Properties.EventPattern?.['detail-type']?.[0] === 'EC2 Instance State-change Notification');
    expect(lost).toHaveLength(1);
  });

  test('the recovery step may read and rewrite the arrays\' attached-EBS alarms, and no other alarm', () => {
    const alarms = Object.keys(resourcesOf(template, 'AWS::CloudWatch::Alarm'))
      .filter((id) => id.startsWith('RecoveryAttachedEbs'));
    expect(alarms).toHaveLength(2);
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([{
          Action: ['cloudwatch:DescribeAlarms', 'cloudwatch:PutMetricAlarm'],
          Effect: 'Allow',
          Resource: alarms.map((id) => ({ 'Fn::GetAtt': [id, 'Arn'] })),
        }]),
      },
    });
    const step = Object.entries(resourcesOf(template, 'AWS::Lambda::Function'))
      .find(([id]) => id.startsWith('RecoveryRecoveryStep'));
    const env = step?.[1].Properties.Environment.Variables.ALARM_BY_ARRAY;
    expect(JSON.stringify(env)).toContain(alarms[0]);
    expect(JSON.stringify(env)).toContain(alarms[1]);
    // The trigger reads the same map: the alarm that fired names the array of an instance
    // that holds several.
    const start = Object.entries(resourcesOf(template, 'AWS::Lambda::Function'))
      .find(([id]) => id.startsWith('RecoveryRecoveryStart'));
    expect(start?.[1].Properties.Environment.Variables.ALARM_BY_ARRAY).toEqual(env);
  });

  test('a launch lifecycle hook on the configured group holds new instances up to an hour, ABANDON by default', () => {
    template.resourceCountIs('AWS::AutoScaling::LifecycleHook', 1);
    template.hasResourceProperties('AWS::AutoScaling::LifecycleHook', {
      AutoScalingGroupName: 'analytics',
      LifecycleHookName: 'raidsnap-analytics',
      LifecycleTransition: 'autoscaling:EC2_INSTANCE_LAUNCHING',
      HeartbeatTimeout: 3600,
      DefaultResult: 'ABANDON',
    });
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        'source': ['aws.autoscaling'],
        'detail-type': ['EC2 Instance-launch Lifecycle Action'],
        'detail': { AutoScalingGroupName: ['analytics'], LifecycleHookName: ['raidsnap-analytics'] },
      },
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [start(), 'Arn'] } })],
    });
  });

  test('EventBridge may invoke the trigger, from raidsnap\'s rules only', () => {
    const permissions = Object.values(resourcesOf(template, 'AWS::Lambda::Permission'))
      .filter((p) => JSON.stringify(p.Properties.FunctionName).includes(start()));
    expect(permissions).toHaveLength(4);
    for (const p of permissions) {
      expect(p.Properties.Principal).toBe('events.amazonaws.com');
      expect(p.Properties.SourceArn['Fn::GetAtt'][0]).toMatch(/^RecoveryOn(Alarm|InstanceLost|Launch)/);
    }
  });

  test('the trigger knows each array\'s recovery settings and may start only the recovery workflow', () => {
    const [machineId] = recoveryMachine(template);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'raidsnap.handlers.recovery_start.handler',
      Environment: {
        Variables: Match.objectLike({
          RECOVERY_STATE_MACHINE_ARN: { Ref: machineId },
          LOCK_TABLE: { Ref: Match.stringLikeRegexp('^RestoreLockTable') },
          RECOVERY_BY_ARRAY: JSON.stringify({
            db1: { instanceId: 'i-0123456789abcdef0', mode: 'replace', replacementInstanceId: 'i-0fedcba9876543210', initialization: 'auto' },
            analytics: { instanceId: 'i-0bbbbccccddddeeee', mode: 'replace', autoScalingGroup: 'analytics', initialization: 'auto' },
          }),
        }),
      },
    });
    const starts = statementsOf(template, 'recovery_start').filter((s) => actionsOf(s).includes('states:StartExecution'));
    expect(starts).toEqual([expect.objectContaining({ Resource: { Ref: machineId } })]);
    const all = statementsOf(template, 'recovery_start').flatMap(actionsOf).sort();
    // The claim item (one recovery per array) is written and removed; a skipped recovery is
    // notified on the encrypted topic, naming the newest set (from the set manifests).
    expect([...new Set(all)]).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'ec2:DescribeInstances', 'ec2:DescribeSnapshots',
      'kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:ReEncryptFrom', 'kms:ReEncryptTo', 'logs:CreateLogStream', 'logs:PutLogEvents',
      'sns:Publish', 'states:DescribeExecution', 'states:StartExecution', 'states:StopExecution', 'xray:PutTelemetryRecords', 'xray:PutTraceSegments']);
    const describes = statementsOf(template, 'recovery_start').filter((s) => actionsOf(s).includes('states:DescribeExecution'));
    expect(describes.map((s) => JSON.stringify(s.Resource)).sort()).toEqual([
      expect.stringMatching(/:execution:raidsnap-recovery:\*"\]\]\}$/),
      expect.stringMatching(/:execution:raidsnap-restore:\*"\]\]\}$/),
    ]);
    // It may stop only the restores that drills start: a recovery preempts a drill, never a restore.
    const stops = statementsOf(template, 'recovery_start').filter((s) => actionsOf(s).includes('states:StopExecution'));
    expect(stops).toHaveLength(1);
    expect(actionsOf(stops[0])).toEqual(['states:StopExecution']);
    expect(JSON.stringify(stops[0].Resource)).toMatch(/:execution:raidsnap-restore:drill-\*"\]\]\}$/);
  });

  test('CompleteLifecycleAction and its heartbeats are allowed only on the configured group, to the recovery step only', () => {
    const completes = statementsOf(template, 'recovery_step').filter((s) => actionsOf(s).includes('autoscaling:CompleteLifecycleAction'));
    expect(completes).toHaveLength(1);
    expect(actionsOf(completes[0])).toEqual(['autoscaling:RecordLifecycleActionHeartbeat', 'autoscaling:CompleteLifecycleAction']);
    expect(completes[0].Condition).toBeUndefined();
    expect(JSON.stringify(completes[0].Resource)).toMatch(/:autoScalingGroup:\*:autoScalingGroupName\/analytics"\]\]\}$/);
    // And, to the recovery step only, the instances' lifecycle states (no resource type: "*"),
    // which say what became of an action no longer open.
    const looks = statementsOf(template, 'recovery_step').filter((s) => actionsOf(s).includes('autoscaling:DescribeAutoScalingInstances'));
    expect(looks).toEqual([{ Action: 'autoscaling:DescribeAutoScalingInstances', Effect: 'Allow', Resource: '*' }]);
    for (const s of Object.values(resourcesOf(template, 'AWS::IAM::Policy')).flatMap((p) => p.Properties.PolicyDocument.Statement)) {
      if (actionsOf(s).some((a) => a.startsWith('autoscaling:'))) expect([completes[0], looks[0]]).toContainEqual(s);
    }
  });

  test('the recovery step may move the array tag (that key only) between instances, and touch nothing else', () => {
    const statements = statementsOf(template, 'recovery_step');
    const tagging = statements.filter((s) => actionsOf(s).some((a) => /^ec2:(Create|Delete)Tags$/.test(a)));
    // The tag goes onto an instance that carries none, and off one that carries it.
    expect(tagging).toEqual([
      expect.objectContaining({
        Action: 'ec2:CreateTags',
        Condition: {
          'ForAllValues:StringEquals': { 'aws:TagKeys': ['raidsnap:array'] },
          Null: { 'aws:TagKeys': 'false', 'aws:ResourceTag/raidsnap:array': 'true' },
        },
      }),
      expect.objectContaining({
        Action: 'ec2:DeleteTags',
        Condition: {
          'ForAllValues:StringEquals': { 'aws:TagKeys': ['raidsnap:array'] },
          Null: { 'aws:TagKeys': 'false', 'aws:ResourceTag/raidsnap:array': 'false' },
        },
      }),
    ]);
    for (const t of tagging) expect(JSON.stringify(t.Resource)).toMatch(/:instance\/\*"\]\]\}$/);
    const mutating = statements.flatMap(actionsOf).filter((a) => /^ec2:(?!Describe)/.test(a));
    expect(mutating.sort()).toEqual(['ec2:CreateTags', 'ec2:DeleteTags']);
  });

  test('the recovery state machine carries its definition inline; its step starts the restore, which reports back', () => {
    const [, machine] = recoveryMachine(template);
    expect(JSON.parse(machine.Properties.DefinitionString)).toEqual(
      expandDefinition('recovery.asl.json', FILE, ['RecoveryStepFunctionArn'], { KeepLaunchAlive: HEARTBEAT_RETRY }));
    expect(Object.keys(machine.Properties.DefinitionSubstitutions).sort()).toEqual(['RecoveryStepFunctionArn']);
    expect(machine.Properties.DefinitionSubstitutions.RecoveryStepFunctionArn)
      .toEqual({ 'Fn::GetAtt': [functionId(template, 'recovery_step'), 'Arn'] });
    expect(machine.Properties.StateMachineName).toBe('raidsnap-recovery');
    const doc = JSON.parse(machine.Properties.DefinitionString);
    // The step starts the restore with the waiting Task's token (not startExecution.sync): the
    // restore reports once its array is mounted, long before a prewarm ends, and a lifecycle
    // action gets heartbeats from the other branch meanwhile.
    const [restore, launch] = doc.States.RunRestore.Branches;
    expect(restore.States.StartRestore).toMatchObject({
      Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
      Parameters: { FunctionName: '${RecoveryStepFunctionArn}', Payload: { 'step': 'restore', 'taskToken.$': '$$.Task.Token', 'state.$': '$' } },
    });
    expect(restore.States.StartRestore.Catch).toBeUndefined();
    expect(restore.States.RestoreUsable).toMatchObject({ Type: 'Fail', Error: 'RestoreUsable' });
    expect(launch.States.KeepLaunchAlive).toMatchObject({ Resource: '${RecoveryStepFunctionArn}', Parameters: { step: 'heartbeat' } });
    // Every other end of the wait looks at the restore itself before the run ends (Settle).
    expect(doc.States.RunRestore.Catch).toEqual([
      { ErrorEquals: ['RestoreUsable'], ResultPath: '$.usable', Next: 'Finish' },
      { ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'Settle' },
    ]);
    expect(doc.States.Settle).toMatchObject({ Parameters: { step: 'settle' }, ResultPath: '$.settled', Next: 'IsSettled' });
    expect(doc.States.IsSettled.Choices.map((c: any) => [c.StringEquals, c.Next]))
      .toEqual([['running', 'WaitToSettle'], ['mounted', 'Finish']]);
    expect(doc.States.IsSettled.Default).toBe('Failure');
    // A report Finish does not believe sends the run back to look at the restore.
    expect(doc.States.Finish.Catch[0]).toEqual({ ErrorEquals: ['UntrustedReportError'], ResultPath: '$.error', Next: 'Settle' });
    expect(doc.States.Failed).toEqual({ Type: 'Fail', ErrorPath: '$.failure.error', CausePath: '$.failure.cause' });
  });

  test('a launch\'s heartbeat is retried briefly: it gives up and hands over to Settle well inside the hook\'s heartbeat timeout', () => {
    const [, machine] = recoveryMachine(template);
    const doc = JSON.parse(machine.Properties.DefinitionString);
    const keepAlive = doc.States.RunRestore.Branches[1].States.KeepLaunchAlive;
    expect(keepAlive.Retry).toEqual(HEARTBEAT_RETRY);
    // 20 minutes' wait, then at most 689 s of attempts and retries, then Settle's first attempt
    expect(worstCaseRetrySeconds(HEARTBEAT_RETRY, 60)).toBe(689);
    expect(heartbeatFits(LIFECYCLE_HEARTBEAT)).toBe(true);
    // the standard retry of the other steps would not fit (2.9 hours and more)
    expect(worstCaseRetrySeconds(LAMBDA_RETRY, 60)).toBeGreaterThan(LIFECYCLE_HEARTBEAT.toSeconds());
    // the hook's own timeout is the one the steps pace their heartbeats by
    template.hasResourceProperties('AWS::AutoScaling::LifecycleHook', { HeartbeatTimeout: LIFECYCLE_HEARTBEAT.toSeconds() });
  });

  test('the wait for the restore times out 15 minutes after the restore itself would have, inside the recovery\'s own timeout', () => {
    const [, machine] = recoveryMachine(template);
    const doc = JSON.parse(machine.Properties.DefinitionString);
    const restore = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))
      .map((m) => JSON.parse(m.Properties.DefinitionString))
      .find((d) => String(d.Comment).startsWith('raidsnap restore:'));
    const wait = doc.States.RunRestore.Branches[0].States.StartRestore.TimeoutSeconds;
    expect(wait).toBe(restore.TimeoutSeconds + 900);
    // Before the restore starts: Assess and CheckTarget (up to 15 minutes for the target's
    // agent); after the wait: Settle, Finish or Failure.
    expect(doc.TimeoutSeconds - wait).toBeGreaterThanOrEqual(2 * 900);
  });

  test('the heartbeat branch ends the wait when the restore\'s answer was lost, and only then', () => {
    const [, machine] = recoveryMachine(template);
    const branch = JSON.parse(machine.Properties.DefinitionString).States.RunRestore.Branches[1].States;
    expect(branch.IsLaunchHeld.Choices).toEqual([
      { Variable: '$.keepAlive.status', StringEquals: 'open', Next: 'WaitToKeepAlive' },
      { Variable: '$.keepAlive.status', StringEquals: 'unanswered', Next: 'RestoreUnanswered' },
    ]);
    expect(branch.RestoreUnanswered).toMatchObject({ Type: 'Fail', Error: 'RestoreUnanswered' });
    const fails = Object.entries(branch).filter(([, st]: [string, any]) => st.Type === 'Fail').map(([n]) => n);
    expect(fails).toEqual(['RestoreUnanswered']);
  });

  test('the recovery step may start only the restore workflow, and look only at the restores recoveries start', () => {
    const [machineId, machine] = recoveryMachine(template);
    const own = roleStatements(template, machine.Properties.RoleArn['Fn::GetAtt'][0]);
    expect(own.flatMap(actionsOf).filter((a) => a.startsWith('states:'))).toEqual([]);
    const statements = statementsOf(template, 'recovery_step');
    const starts = statements.filter((s) => actionsOf(s).includes('states:StartExecution'));
    expect(starts).toEqual([expect.objectContaining({ Resource: { Ref: expect.stringMatching(/^RestoreWorkflowStateMachine/) } })]);
    expect(statements.flatMap(actionsOf).filter((a) => a.startsWith('states:')).sort())
      .toEqual(['states:DescribeExecution', 'states:GetExecutionHistory', 'states:StartExecution']);
    const looks = statements.filter((s) => actionsOf(s).includes('states:DescribeExecution'));
    expect(looks).toHaveLength(1);
    expect(JSON.stringify(looks[0].Resource)).toMatch(/:execution:raidsnap-restore:\*-restore"/);
    // Its own history only, which a finished recovery's cost is read from
    const history = statements.filter((s) => actionsOf(s).includes('states:GetExecutionHistory'));
    expect(history).toHaveLength(1);
    expect(JSON.stringify(history[0].Resource)).toMatch(/:execution:raidsnap-recovery:\*"/);
    expect(machineId).toMatch(/^RecoveryWorkflow/);
  });

  test('every end of a restore reaches the function that tells a workflow still waiting on it', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        'source': ['aws.states'],
        'detail-type': ['Step Functions Execution Status Change'],
        'detail': {
          stateMachineArn: [{ Ref: Match.stringLikeRegexp('^RestoreWorkflowStateMachine') }],
          status: ['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED'],
        },
      },
      Targets: [Match.objectLike({
        Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^RestoreRestoreEnded'), 'Arn'] },
        RetryPolicy: { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 21600 },
        DeadLetterConfig: { Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^RestoreEndedDeadLetters'), 'Arn'] } },
      })],
    });
    // It reads who waits from the lock table (never from the restore's input), and writes nothing.
    expect(statementsOf(template, 'restore_ended').flatMap(actionsOf).filter((a) => !/^(xray|logs|kms):/.test(a)).sort())
      .toEqual(['dynamodb:GetItem', 'states:SendTaskFailure', 'states:SendTaskSuccess']);
    expect(statementsOf(template, 'restore_report').flatMap(actionsOf).filter((a) => !/^(xray|logs|kms):/.test(a)).sort())
      .toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem', 'states:SendTaskFailure', 'states:SendTaskSuccess']);
  });

  test('an end that cannot be delivered lands in an encrypted queue, whose alarm tells the operators', () => {
    const queues = Object.entries(resourcesOf(template, 'AWS::SQS::Queue')).filter(([id]) => id.startsWith('RestoreEndedDeadLetters'));
    expect(queues).toHaveLength(1);
    const [queueId, queue] = queues[0];
    expect(queue.Properties).toMatchObject({ SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 86400 });
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      Queues: [{ Ref: queueId }],
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [queueId, 'QueueName'] } }],
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      TreatMissingData: 'notBreaching',
      AlarmActions: [{ Ref: Match.stringLikeRegexp('^MonitoringNotifications') }],
    });
  });

  test('failed recoveries are notified with every other failed run', () => {
    const [machineId] = recoveryMachine(template);
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: Match.objectLike({
        detail: Match.objectLike({ stateMachineArn: Match.arrayWith([{ Ref: machineId }]), status: ['FAILED', 'TIMED_OUT', 'ABORTED'] }),
      }),
    });
  });
});

describe('recovery without a config', () => {
  const { template } = synth();

  test('the recovery workflow and its trigger exist, but nothing starts them', () => {
    recoveryMachine(template);
    functionId(template, 'recovery_start');
    template.resourceCountIs('AWS::AutoScaling::LifecycleHook', 0);
    const alarms = Object.values(resourcesOf(template, 'AWS::CloudWatch::Alarm'))
      .filter((a) => a.Properties.MetricName === 'StatusCheckFailed_AttachedEBS');
    expect(alarms).toEqual([]);
    const rules = Object.values(resourcesOf(template, 'AWS::Events::Rule'))
      .filter((r) => JSON.stringify(r.Properties.Targets).includes(functionId(template, 'recovery_start')));
    expect(rules).toEqual([]);
  });

  test('no function may complete lifecycle actions', () => {
    const statements = Object.values(resourcesOf(template, 'AWS::IAM::Policy')).flatMap((p) => p.Properties.PolicyDocument.Statement);
    expect(statements.filter((s: any) => actionsOf(s).some((a) => a.startsWith('autoscaling:')))).toEqual([]);
  });
});

describe('a restore that is stopped or times out', () => {
  const { template } = synth(EXAMPLE_CONFIG);

  test('its end reaches the function that removes what it left behind', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        'source': ['aws.states'],
        'detail-type': ['Step Functions Execution Status Change'],
        'detail': {
          stateMachineArn: [{ Ref: Match.stringLikeRegexp('^RestoreWorkflowStateMachine') }],
          status: ['ABORTED', 'TIMED_OUT'],
        },
      },
      Targets: [Match.objectLike({
        Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^RestoreRestoreAbandoned'), 'Arn'] },
        RetryPolicy: { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 21600 },
      })],
    });
  });

  test('that function may delete only volumes a restore created, and never detach', () => {
    const actions = statementsOf(template, 'restore_abandoned').flatMap(actionsOf);
    expect(actions).not.toContain('ec2:DetachVolume');
    const deletes = statementsOf(template, 'restore_abandoned').filter((s) => actionsOf(s).includes('ec2:DeleteVolume'));
    expect(deletes).toEqual([expect.objectContaining({
      Condition: { StringLike: { 'aws:ResourceTag/raidsnap:restore-execution': '*' } },
    })]);
  });
});
