import { App } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ConfigError, parseConfig } from '../lib/config';
import { checkFastRestore, fastRestoreCost } from '../lib/fast-restore';
import { RaidsnapStack } from '../lib/raidsnap-stack';
import { actionsOf, resourcesOf, statementsOf, synth } from './helpers';

const POLICY = { zones: ['eu-west-1a'], sets: 1, members: 2 };
const problem = (field: string, why: string, fix: string) => new ConfigError(field, why, fix);

function stackOf(raw: unknown, region = 'eu-west-1'): RaidsnapStack {
  const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
  return new RaidsnapStack(app, 'raidsnap', { config: parseConfig(raw), env: { account: '123456789012', region } });
}

function kept(policy: unknown = POLICY, defaults: Record<string, unknown> = {}): unknown {
  return { defaults, arrays: { db1: { retention: 7, fastRestore: policy } } };
}

describe('fastRestore config', () => {
  test('a policy parses with its zones, sets and member count', () => {
    expect(parseConfig(kept()).arrays.db1.fastRestore).toEqual(POLICY);
    expect(parseConfig(kept()).defaults.fastRestoreQuota).toBe(5);
  });

  test.each([
    [{ ...POLICY, zones: [] }, 'arrays.db1.fastRestore.zones'],
    [{ ...POLICY, zones: 'eu-west-1a' }, 'arrays.db1.fastRestore.zones'],
    [{ ...POLICY, zones: ['eu-west-1'] }, 'arrays.db1.fastRestore.zones[0]'],
    // A Local Zone: FSR is not supported there.
    [{ ...POLICY, zones: ['us-west-2-lax-1a'] }, 'arrays.db1.fastRestore.zones[0]'],
    [{ ...POLICY, zones: ['eu-west-1a', 'eu-west-1a'] }, 'arrays.db1.fastRestore.zones'],
    [{ ...POLICY, zones: ['eu-west-1a', 'us-east-1a'] }, 'arrays.db1.fastRestore.zones'],
    [{ ...POLICY, sets: 0 }, 'arrays.db1.fastRestore.sets'],
    // Retention deletes older sets (and a deleted snapshot's FSR goes off with it).
    [{ ...POLICY, sets: 8 }, 'arrays.db1.fastRestore.sets'],
    [{ zones: ['eu-west-1a'], sets: 1 }, 'arrays.db1.fastRestore.members'],
    [{ ...POLICY, count: 1 }, 'arrays.db1.fastRestore.count'],
    ['eu-west-1a', 'arrays.db1.fastRestore'],
  ])('%j is refused, naming %s', (policy, field) => {
    expect(() => parseConfig(kept(policy))).toThrow(ConfigError);
    expect(() => parseConfig(kept(policy))).toThrow(`raidsnap config: ${field}:`);
  });

  test('zones must be in the stack\'s Region', () => {
    expect(() => stackOf(kept({ ...POLICY, zones: ['us-east-1a'] })))
      .toThrow('raidsnap config: arrays.db1.fastRestore.zones: us-east-1a not in the stack\'s Region eu-west-1');
  });

  test('the policies must fit the stated quota while a new set is enabled beside the one it replaces', () => {
    // 2 sets of 2 snapshots: 6 at once while the third is enabled; the default quota is 5.
    expect(() => stackOf(kept({ ...POLICY, sets: 2 })))
      .toThrow(/arrays\.db1\.fastRestore: keeping FSR needs up to 6 snapshots with FSR at once .* assumed to be 5 \(defaults\.fastRestoreQuota/);
    expect(() => stackOf(kept({ ...POLICY, sets: 2 }, { fastRestoreQuota: 6 }))).not.toThrow();
  });

  test('all arrays\' policies share the quota', () => {
    const policies = { db1: POLICY, db2: POLICY };
    expect(() => checkFastRestore(policies, 6, 'eu-west-1', problem)).toThrow(/arrays\.\*\.fastRestore: keeping FSR needs up to 8/);
    expect(checkFastRestore(policies, 8, 'eu-west-1', problem)).toEqual([
      expect.stringMatching(/may take all 8 snapshots of the Region's FSR quota/),
    ]);
    expect(checkFastRestore(policies, 9, 'eu-west-1', problem)).toEqual([]);
  });

  test('an environment-agnostic stack is told where its zones are', () => {
    expect(checkFastRestore({ db1: { ...POLICY, zones: ['us-east-1a'] } }, 5, undefined, problem))
      .toEqual([expect.stringMatching(/zones are in us-east-1: deploy the stack there/)]);
  });
});

describe('fastRestore cost at synth', () => {
  test('synth prints what each policy costs a month at the list price', () => {
    const stack = stackOf(kept({ zones: ['eu-west-1a', 'eu-west-1b'], sets: 1, members: 2 }, { fastRestoreQuota: 4 }));
    // 1 set x 2 snapshots x 2 AZs = 4 pairs x $0.75 x 730 h = $2,190.00
    Annotations.fromStack(stack).hasInfo('/raidsnap', Match.stringLikeRegexp(
      'arrays\\.db1\\.fastRestore keeps FSR on 1 set\\(s\\) x 2 snapshots x 2 AZ\\(s\\) \\(eu-west-1a, eu-west-1b\\) = 4 snapshot-AZ pairs: about \\$2,190\\.00 per month at the us-east-1 list price of \\$0\\.75 per DSU-hour'));
  });

  test('the figure is pairs x price x hours a month', () => {
    expect(fastRestoreCost('db1', { zones: ['us-east-1a'], sets: 2, members: 4 }).perMonth).toBeCloseTo(8 * 0.75 * 730);
  });

  test('no policy, nothing printed', () => {
    const stack = stackOf({ arrays: { db1: {} } });
    expect(Annotations.fromStack(stack).findInfo('*', Match.stringLikeRegexp('fastRestore'))).toEqual([]);
  });
});

describe('fastRestore in the template', () => {
  const stack = stackOf(kept());
  const template = Template.fromStack(stack);

  test('the backup\'s KeepFsr function gets the policies, and the sweeper too', () => {
    const env = (module: string) => Object.values(resourcesOf(template, 'AWS::Lambda::Function'))
      .find((f) => f.Properties.Handler === `raidsnap.handlers.${module}.handler`)!.Properties.Environment.Variables;
    const policies = JSON.stringify({ db1: { zones: ['eu-west-1a'], sets: 1 } });
    expect(env('backup_keep_fsr').FAST_RESTORE_BY_ARRAY).toBe(policies);
    expect(env('sweep').FAST_RESTORE_BY_ARRAY).toBe(policies);
    expect(env('backup_keep_fsr').RESTORE_LOCK_TABLE).toBeDefined();
  });

  test('KeepFsr may enable and disable FSR only on snapshots of raidsnap sets, as a restore may', () => {
    const fsr = statementsOf(template, 'backup_keep_fsr').filter((s) => actionsOf(s).some((a) => a.includes('FastSnapshotRestores') && !a.startsWith('ec2:Describe')));
    expect(fsr).toHaveLength(1);
    expect(actionsOf(fsr[0]).sort()).toEqual(['ec2:DisableFastSnapshotRestores', 'ec2:EnableFastSnapshotRestores']);
    expect(JSON.stringify(fsr[0].Resource)).toContain('::snapshot/*');
    expect(fsr[0].Condition).toEqual({ StringLike: { 'aws:ResourceTag/raidsnap:array': '*', 'aws:ResourceTag/raidsnap:set-id': '*' } });
    const restores = statementsOf(template, 'restore_fsr').filter((s) => actionsOf(s).includes('ec2:EnableFastSnapshotRestores'));
    expect(fsr[0].Condition).toEqual(restores[0].Condition);
  });

  test('KeepFsr reads only the FSR quota, and only items of the lock table', () => {
    const statements = statementsOf(template, 'backup_keep_fsr');
    const quota = statements.filter((s) => actionsOf(s).includes('servicequotas:GetServiceQuota'));
    expect(JSON.stringify(quota.map((s) => s.Resource))).toContain(':ebs/L-631ECBD3');
    const dynamo = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')));
    // Scan: the restores' FSR claims, to tell a pair a raidsnap restore enabled from one
    // someone else did (that one is never turned off).
    expect(dynamo.flatMap(actionsOf).sort()).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Scan']);
    expect(JSON.stringify(dynamo[0].Resource)).toMatch(/RestoreLockTable/);
    const other = statements.flatMap(actionsOf).filter((a) => !/^(ec2:Describe|ec2:(Enable|Disable)FastSnapshotRestores|servicequotas:|dynamodb:|kms:|logs:|xray:)/.test(a));
    expect(other).toEqual([]);
  });

  test('a restore\'s steps that turn FSR off may read the policy\'s claim', () => {
    for (const module of ['restore_fsr', 'restore_check_volumes', 'restore_cleanup', 'restore_abandoned', 'sweep']) {
      const reads = statementsOf(template, module).filter((s) => actionsOf(s).includes('dynamodb:GetItem'));
      expect([module, reads.length]).toEqual([module, 1]);
    }
  });

  test('cdk-nag finds nothing unacknowledged in a stack with a policy', () => {
    expect(new AwsSolutionsChecks().validateScope(stack).violations).toEqual([]);
  });

  test('an alarm notifies when a backup could not keep FSR on its new set', () => {
    const alarms = Object.values(resourcesOf(template, 'AWS::CloudWatch::Alarm'))
      .filter((a) => a.Properties.MetricName === 'FastRestoreNotKept');
    expect(alarms).toHaveLength(1);
    expect(alarms[0].Properties).toMatchObject({
      Namespace: 'raidsnap',
      Dimensions: [{ Name: 'service', Value: 'raidsnap' }],
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      TreatMissingData: 'notBreaching',
      AlarmActions: [{ Ref: expect.stringMatching(/^MonitoringNotifications/) }],
    });
  });

  test('without a policy there is no such alarm, and the functions get an empty map', () => {
    const plain = synth().template;
    const alarms = Object.values(resourcesOf(plain, 'AWS::CloudWatch::Alarm'))
      .filter((a) => a.Properties.MetricName === 'FastRestoreNotKept');
    expect(alarms).toEqual([]);
    plain.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'raidsnap.handlers.backup_keep_fsr.handler',
      Environment: { Variables: Match.objectLike({ FAST_RESTORE_BY_ARRAY: '{}' }) },
    });
  });
});
