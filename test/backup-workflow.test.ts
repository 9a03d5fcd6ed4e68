import { Match } from 'aws-cdk-lib/assertions';
import { LAMBDA_RETRY, worstCaseRetrySeconds } from '../lib/constructs/workflow';
import { actionsOf, functionId, resourcesOf, statementsOf, synth } from './helpers';

const BACKUP_MODULES = [
  'backup_prepare', 'backup_members', 'backup_freeze', 'backup_thaw', 'command_poll',
  'backup_snapshot', 'backup_check', 'backup_retention', 'backup_keep_fsr', 'backup_copies', 'backup_failed',
];

describe('backup workflow', () => {
  const { template } = synth();

  test('the state machine is Standard, traced, logged, and carries its definition inline', () => {
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', {
      StateMachineType: 'STANDARD',
      DefinitionString: Match.stringLikeRegexp('raidsnap backup:'),
      TracingConfiguration: { Enabled: true },
      LoggingConfiguration: Match.objectLike({ Level: 'ALL', IncludeExecutionData: true }),
    });
    const machines = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'));
    const backup = machines.find((m) => String(m.Properties.DefinitionString).includes('raidsnap backup:'))!;
    expect(backup.Properties.DefinitionS3Location).toBeUndefined();
    expect(Object.keys(backup.Properties.DefinitionSubstitutions).sort()).toEqual([
      'BackupCheckFunctionArn', 'BackupCopiesFunctionArn', 'BackupFailedFunctionArn', 'BackupFreezeFunctionArn',
      'BackupKeepFsrFunctionArn', 'BackupMembersFunctionArn', 'BackupPrepareFunctionArn', 'BackupRetentionFunctionArn',
      'BackupSnapshotFunctionArn', 'BackupThawFunctionArn', 'CommandPollFunctionArn',
    ]);
  });

  test('a backup holds its array against restores for as long as the steps up to its snapshot step may be retried', () => {
    const machines = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'));
    const backup = machines.find((m) => String(m.Properties.DefinitionString).includes('raidsnap backup:'))!;
    const states = JSON.parse(backup.Properties.DefinitionString).States;
    const fns = resourcesOf(template, 'AWS::Lambda::Function');
    const held: Array<[string, string]> = [
      ['ResolveMembers', 'backup_members'], ['Freeze', 'backup_freeze'], ['PollFreeze', 'command_poll'], ['TakeSnapshotSet', 'backup_snapshot'],
    ];
    let total = 0;
    for (const [state, module] of held) {
      expect(states[state].Retry).toEqual(LAMBDA_RETRY);
      total += worstCaseRetrySeconds(states[state].Retry, fns[functionId(template, module)].Properties.Timeout);
    }
    const variables = fns[functionId(template, 'backup_prepare')].Properties.Environment.Variables;
    expect(Number(variables.SNAPSHOT_STEP_SECONDS)).toBe(total);
    // four steps, each with every wait at its bound (126 s + 10,515 s) and 47 attempts of 60 s
    expect(Number(variables.SNAPSHOT_STEP_SECONDS)).toBe(4 * 13461);
  });

  test.each(BACKUP_MODULES)('%s runs Python 3.13 on arm64 with Powertools and the pinned boto3 layer', (module) => {
    const fn = resourcesOf(template, 'AWS::Lambda::Function')[functionId(template, module)];
    expect(fn.Properties).toMatchObject({
      Runtime: 'python3.13',
      Architectures: ['arm64'],
      TracingConfig: { Mode: 'Active' },
      LoggingConfig: { LogFormat: 'JSON' },
    });
    expect(fn.Properties.Layers).toHaveLength(2);
    expect(fn.Properties.Environment.Variables).toMatchObject({
      POWERTOOLS_SERVICE_NAME: 'raidsnap',
      POWERTOOLS_METRICS_NAMESPACE: 'raidsnap',
      DISCOVER_DOCUMENT: 'raidsnap-discover',
      FREEZE_DOCUMENT: 'raidsnap-freeze',
      THAW_DOCUMENT: 'raidsnap-thaw',
      DEFAULT_RETENTION: '7',
    });
  });

  test('the Powertools layer is resolved at deploy time from the public SSM parameter', () => {
    const params = template.toJSON().Parameters as Record<string, { Default?: string }>;
    expect(Object.values(params).map((p) => p.Default)).toContain(
      '/aws/service/powertools/python/arm64/python3.13/latest');
  });

  test('the state machine may invoke exactly its own functions', () => {
    const policies = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles).includes('BackupWorkflowStateMachineRole'));
    const invoked = policies.flatMap((p) => p.Properties.PolicyDocument.Statement)
      .filter((s: any) => actionsOf(s).includes('lambda:InvokeFunction'))
      .flatMap((s: any) => s.Resource)
      .filter((r: any) => r['Fn::GetAtt'])
      .map((r: any) => r['Fn::GetAtt'][0]);
    expect(new Set(invoked)).toEqual(new Set(BACKUP_MODULES.map((m) => functionId(template, m))));
  });

  test('only the snapshot step may call CreateSnapshots, on tagged instances into tagged snapshots', () => {
    for (const module of BACKUP_MODULES) {
      const creates = statementsOf(template, module).filter((s) => actionsOf(s).includes('ec2:CreateSnapshots'));
      if (module !== 'backup_snapshot') {
        expect(creates).toEqual([]);
        continue;
      }
      expect(creates).toEqual(expect.arrayContaining([
        expect.objectContaining({
          Resource: { 'Fn::Join': ['', expect.arrayContaining([expect.stringMatching(/instance\/\*$/)])] },
          Condition: { StringLike: { 'aws:ResourceTag/raidsnap:array': '*' } },
        }),
        expect.objectContaining({
          Condition: { StringLike: { 'aws:RequestTag/raidsnap:array': '*' } },
        }),
      ]));
    }
  });

  test('snapshots are deleted only where they carry the array tag and a set id, and only by snapshot and retention steps', () => {
    for (const module of BACKUP_MODULES) {
      const deletes = statementsOf(template, module).filter((s) => actionsOf(s).includes('ec2:DeleteSnapshot'));
      if (!['backup_snapshot', 'backup_retention'].includes(module)) {
        expect(deletes).toEqual([]);
        continue;
      }
      expect(deletes.length).toBeGreaterThan(0);
      for (const s of deletes) {
        expect(s.Condition).toEqual({ StringLike: { 'aws:ResourceTag/raidsnap:array': '*', 'aws:ResourceTag/raidsnap:set-id': '*' } });
      }
    }
  });

  test('no backup function can touch volumes, and only the fastRestore step FSR', () => {
    const volumes = ['ec2:CreateVolume', 'ec2:DeleteVolume', 'ec2:AttachVolume', 'ec2:DetachVolume'];
    const fsr = ['ec2:EnableFastSnapshotRestores', 'ec2:DisableFastSnapshotRestores'];
    for (const module of BACKUP_MODULES) {
      const actions = statementsOf(template, module).flatMap(actionsOf);
      const forbidden = module === 'backup_keep_fsr' ? volumes : [...volumes, ...fsr];
      expect(actions.filter((a) => forbidden.includes(a))).toEqual([]);
    }
  });

  test('SendCommand is limited to raidsnap documents and array instances', () => {
    const sends = statementsOf(template, 'backup_prepare').filter((s) => actionsOf(s).includes('ssm:SendCommand'));
    expect(JSON.stringify(sends)).toContain('document/raidsnap-discover');
    expect(JSON.stringify(sends)).not.toContain('document/raidsnap-assemble');
    const onInstances = sends.filter((s) => JSON.stringify(s.Resource).includes('instance/*'));
    expect(onInstances).toEqual([
      expect.objectContaining({ Condition: { StringLike: { 'ssm:resourceTag/raidsnap:array': '*' } } }),
    ]);
  });

  test('every function logs to its own log group with a retention period', () => {
    const groups = resourcesOf(template, 'AWS::Logs::LogGroup');
    for (const module of BACKUP_MODULES) {
      const fn = resourcesOf(template, 'AWS::Lambda::Function')[functionId(template, module)];
      const group = groups[fn.Properties.LoggingConfig.LogGroup.Ref];
      expect(group.Properties.RetentionInDays).toBe(90);
    }
  });

  test('EBS\'s createSnapshots event, and only it, reaches the check function, which alone may answer a waiting Task and keep its token', () => {
    const check = functionId(template, 'backup_check');
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        'source': ['aws.ec2'],
        'detail-type': ['EBS Multi-Volume Snapshots Completion Status'],
        'detail': { event: ['createSnapshots'] },
      },
      State: 'ENABLED',
      Targets: [Match.objectLike({
        Arn: { 'Fn::GetAtt': [check, 'Arn'] },
        RetryPolicy: { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 3600 },
      })],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      FunctionName: { 'Fn::GetAtt': [check, 'Arn'] },
      Principal: 'events.amazonaws.com',
      SourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('SnapshotsCompleted'), 'Arn'] },
    });
    const answering = BACKUP_MODULES.filter((m) => statementsOf(template, m)
      .some((s) => actionsOf(s).includes('states:SendTaskSuccess')));
    expect(answering).toEqual(['backup_check']);
    const table = statementsOf(template, 'backup_check').filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')));
    expect(table.flatMap(actionsOf).sort()).toEqual(
      ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'].sort());
  });

  test('AwaitSnapshots waits on its token for an hour, then the run looks by itself', () => {
    const machines = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'));
    const backup = machines.find((m) => String(m.Properties.DefinitionString).includes('raidsnap backup:'))!;
    const states = JSON.parse(backup.Properties.DefinitionString).States;
    expect(states.AwaitSnapshots).toMatchObject({
      Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
      Parameters: { FunctionName: '${BackupCheckFunctionArn}', Payload: { 'taskToken.$': '$$.Task.Token' } },
      TimeoutSeconds: 3600,
      Retry: LAMBDA_RETRY,
    });
    expect(states.AwaitSnapshots.Catch[0]).toEqual({ ErrorEquals: ['States.Timeout'], ResultPath: '$.snapshotWait', Next: 'AwaitedTooLong' });
    expect(states.AwaitSnapshots.Catch[1]).toEqual({ ErrorEquals: ['SnapshotsNotSeenError'], ResultPath: '$.snapshotWait', Next: 'WaitForSnapshots' });
    expect(states.AwaitSnapshots.Catch[2]).toEqual({ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'ExplainFailure' });
    expect(states.AwaitedTooLong.Result).toBe(states.AwaitSnapshots.TimeoutSeconds);
  });
});
