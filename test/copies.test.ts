import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { parseConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';
import { functionId, resourcesOf, statementsOf, synth } from './helpers';

const COPIES = {
  arrays: {
    db1: {
      retention: 14,
      rpoMinutes: 300,
      copies: [
        { region: 'us-west-2', kmsKeyArn: 'arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab' },
        { region: 'eu-central-1', account: '222233334444', roleArn: 'arn:aws:iam::222233334444:role/raidsnap-copy-requests-eu-central-1', retention: 30 },
      ],
    },
  },
};

function configFile(raw: unknown): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-copies-')), 'c.json');
  fs.writeFileSync(file, JSON.stringify(raw));
  return file;
}

const copied = synth(configFile(COPIES));
const plain = synth();

function env(template: Template, module: string): Record<string, string> {
  const vars = resourcesOf(template, 'AWS::Lambda::Function')[functionId(template, module)].Properties.Environment.Variables;
  return Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, text(v)]));
}

/** Conditions with their values as text (`<AWS::Partition>` for the partition). */
function plainText(value: unknown): unknown {
  if (value && typeof value === 'object' && !Array.isArray(value) && !('Fn::Join' in value) && !('Ref' in value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plainText(v)]));
  }
  return Array.isArray(value) ? value.map(plainText) : text(value);
}

function text(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as Record<string, any>;
  if (v?.['Fn::Join']) return (v['Fn::Join'][1] as unknown[]).map(text).join(v['Fn::Join'][0]);
  if (v?.Ref) return `<${v.Ref}>`;
  if (v?.['Fn::GetAtt']) return `<${v['Fn::GetAtt'].join('.')}>`;
  return JSON.stringify(value);
}

function granted(template: Template, module: string, action: string): Array<{ resources: string[]; condition: any }> {
  return statementsOf(template, module)
    .filter((s) => ([] as string[]).concat(s.Action).includes(action))
    .map((s) => ({ resources: ([] as unknown[]).concat(s.Resource).map(text), condition: plainText(s.Condition ?? {}) as any }));
}

describe('copies to other Regions and accounts', () => {
  test('every stack has the copy workflow, named so a source stack can start it', () => {
    for (const { template } of [plain, copied]) {
      const names = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine')).map((m) => m.Properties.StateMachineName);
      expect(names).toContain('raidsnap-copy');
    }
  });

  test('the backup hands a set only to the configured copy workflows, and starts one in another account only as the role named for it', () => {
    expect(granted(plain.template, 'backup_copies', 'states:StartExecution')).toEqual([]);
    expect(granted(plain.template, 'backup_copies', 'sts:AssumeRole')).toEqual([]);
    expect(JSON.parse(env(plain.template, 'backup_prepare').COPIES_BY_ARRAY)).toEqual({});
    const starts = granted(copied.template, 'backup_copies', 'states:StartExecution');
    expect(starts.flatMap((g) => g.resources)).toEqual(['arn:<AWS::Partition>:states:us-west-2:123456789012:stateMachine:raidsnap-copy']);
    expect(granted(copied.template, 'backup_copies', 'states:DescribeExecution').flatMap((g) => g.resources))
      .toEqual(['arn:<AWS::Partition>:states:us-west-2:123456789012:execution:raidsnap-copy:*']);
    expect(granted(copied.template, 'backup_copies', 'sts:AssumeRole').flatMap((g) => g.resources))
      .toEqual(['arn:aws:iam::222233334444:role/raidsnap-copy-requests-eu-central-1']);
  });

  test('with no copies configured the copy step may do nothing; with copies, it records them in the manifests only', () => {
    const none = statementsOf(plain.template, 'backup_copies').flatMap((s) => ([] as string[]).concat(s.Action));
    expect(none.filter((a) => !/^(logs|xray):/.test(a))).toEqual([]);
    const writes = statementsOf(copied.template, 'backup_copies')
      .filter((s) => ([] as string[]).concat(s.Action).some((a) => a.startsWith('dynamodb:')));
    expect(writes.map((s) => [s.Action, text(s.Resource)])).toEqual([
      [['dynamodb:GetItem', 'dynamodb:UpdateItem'], expect.stringMatching(/^<SnapshotSetsTable/)],
    ]);
  });

  test('the copy step knows each destination: its retention (default the array\'s), key and workflow', () => {
    const byArray = JSON.parse(env(copied.template, 'backup_copies').COPIES_BY_ARRAY);
    expect(byArray.db1.map((c: any) => [c.id, c.retention, c.kmsKeyArn ?? null, c.roleArn ?? null])).toEqual([
      ['us-west-2', 14, 'arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab', null],
      ['222233334444/eu-central-1', 30, null, 'arn:aws:iam::222233334444:role/raidsnap-copy-requests-eu-central-1'],
    ]);
    expect(byArray.db1[1].stateMachineArn).toContain(':states:eu-central-1:222233334444:stateMachine:raidsnap-copy');
  });

  test('CopySnapshot is allowed by one statement, for the source and the copy alike: the set\'s tags and its run\'s on the request, the owner this account where the key exists', () => {
    const copies = granted(plain.template, 'copy_progress', 'ec2:CopySnapshot');
    expect(copies).toEqual([
      {
        resources: ['arn:<AWS::Partition>:ec2:*::snapshot/*'],
        condition: {
          StringLike: {
            'aws:RequestTag/raidsnap:array': '*', 'aws:RequestTag/raidsnap:set-id': '*',
            'aws:RequestTag/raidsnap:copy-execution': 'arn:<AWS::Partition>:states:eu-west-1:123456789012:execution:raidsnap-copy:*',
          },
          StringEqualsIfExists: { 'ec2:Owner': ['123456789012'] },
        },
      },
    ]);
    expect(granted(plain.template, 'copy_progress', 'ec2:CreateTags')).toEqual([
      { resources: ['arn:<AWS::Partition>:ec2:eu-west-1::snapshot/*'], condition: { StringEquals: { 'ec2:CreateAction': 'CopySnapshot' } } },
    ]);
    expect(granted(plain.template, 'copy_progress', 'ec2:DeleteSnapshot')).toEqual([]);
    const deletes = granted(plain.template, 'copy_failed', 'ec2:DeleteSnapshot');
    expect(deletes.map((g) => g.condition.StringLike['aws:ResourceTag/raidsnap:copy-execution']))
      .toEqual(['arn:<AWS::Partition>:states:eu-west-1:123456789012:execution:raidsnap-copy:*']);
  });

  test('keys are used for copies only through EC2, and grants only for AWS resources', () => {
    const kms = statementsOf(plain.template, 'copy_progress').filter((s) => ([] as string[]).concat(s.Action).some((a) => a.startsWith('kms:'))
      && text(s.Resource).includes(':key/*'));
    expect(kms.length).toBe(2);
    for (const s of kms) {
      expect(s.Condition.StringLike).toEqual({ 'kms:ViaService': 'ec2.*.amazonaws.com' });
      expect(text(s.Resource)).toBe('arn:<AWS::Partition>:kms:*:123456789012:key/*');
    }
    const grant = kms.find((s) => ([] as string[]).concat(s.Action).includes('kms:CreateGrant'));
    expect(grant?.Condition.Bool).toEqual({ 'kms:GrantIsForAWSResource': 'true' });
  });

  test('the RPO covers each copy: an alarm per place on the age of the newest set copied there, silence breaching', () => {
    const alarms = Object.values(resourcesOf(copied.template, 'AWS::CloudWatch::Alarm'))
      .filter((a) => a.Properties.MetricName === 'NewestCopiedSetAgeMinutes');
    const byPlace = Object.fromEntries(alarms.map((a) => [
      a.Properties.Dimensions.find((d: any) => d.Name === 'Destination').Value, a.Properties,
    ]));
    expect(Object.keys(byPlace).sort()).toEqual(['222233334444/eu-central-1', 'us-west-2']);
    for (const props of Object.values(byPlace) as any[]) {
      expect(props).toMatchObject({
        Namespace: 'raidsnap', Threshold: 300, ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'breaching', Statistic: 'Maximum', Period: 900,
      });
      expect(props.Dimensions).toEqual(expect.arrayContaining([{ Name: 'Array', Value: 'db1' }, { Name: 'service', Value: 'raidsnap' }]));
      expect(props.AlarmActions).toHaveLength(1);
    }
    // The array's own RPO alarm stays as it is; without copies there is no copy alarm.
    expect(Object.values(resourcesOf(plain.template, 'AWS::CloudWatch::Alarm'))
      .filter((a) => a.Properties.MetricName === 'NewestCopiedSetAgeMinutes')).toEqual([]);
    const reporter = JSON.parse(env(copied.template, 'monitor_set_age').COPIES_BY_ARRAY);
    expect(reporter.db1.map((c: any) => c.id)).toEqual(['us-west-2', '222233334444/eu-central-1']);
  });

  test('the dashboard shows the age of the newest set in every place it is copied to', () => {
    const [dashboard] = Object.values(resourcesOf(copied.template, 'AWS::CloudWatch::Dashboard'));
    const body = text(dashboard.Properties.DashboardBody);
    expect(body).toContain('{raidsnap,Array,Destination,service} MetricName=\\"NewestCopiedSetAgeMinutes\\"');
    expect(body).toContain('{raidsnap,Array,service} MetricName=\\"NewestCompleteSetAgeMinutes\\"');
    const [plainDashboard] = Object.values(resourcesOf(plain.template, 'AWS::CloudWatch::Dashboard'));
    expect(text(plainDashboard.Properties.DashboardBody)).not.toContain('NewestCopiedSetAgeMinutes');
  });

  test('a set is shared only with the backup accounts, only a set\'s snapshots, and shared no more once copied', () => {
    expect(granted(plain.template, 'backup_copies', 'ec2:ModifySnapshotAttribute')).toEqual([]);
    const shares = granted(copied.template, 'backup_copies', 'ec2:ModifySnapshotAttribute');
    const ofSets = { 'aws:ResourceTag/raidsnap:array': '*', 'aws:ResourceTag/raidsnap:set-id': '*' };
    // Never with a group: GroupNames ["all"] in the same call would make the set public.
    const noGroup = { 'ec2:Add/group': 'true' };
    expect(shares).toEqual([
      { resources: ['arn:<AWS::Partition>:ec2:eu-west-1::snapshot/*'],
        condition: { StringLike: ofSets, StringEquals: { 'ec2:Add/userId': ['222233334444'] }, Null: noGroup } },
      { resources: ['arn:<AWS::Partition>:ec2:eu-west-1::snapshot/*'],
        condition: { StringLike: ofSets, StringEquals: { 'ec2:Remove/userId': ['222233334444'] }, Null: noGroup } },
    ]);
  });

  test('a backup account\'s stack lets the accounts it accepts start and follow copies there, and nothing else', () => {
    const vault = synth(configFile({ acceptCopiesFrom: ['111122223333'] }));
    const roles = Object.values(resourcesOf(vault.template, 'AWS::IAM::Role'))
      .filter((r) => r.Properties.RoleName === 'raidsnap-copy-requests-eu-west-1');
    expect(roles).toHaveLength(1);
    expect(roles[0].Properties.AssumeRolePolicyDocument.Statement.map((st: any) => [st.Action, text(st.Principal.AWS)]))
      .toEqual([['sts:AssumeRole', 'arn:<AWS::Partition>:iam::111122223333:root']]);
    const [roleId] = Object.entries(resourcesOf(vault.template, 'AWS::IAM::Role'))
      .find(([, r]) => r.Properties.RoleName === 'raidsnap-copy-requests-eu-west-1')!;
    const statements = Object.values(resourcesOf(vault.template, 'AWS::IAM::Policy'))
      .filter((pol) => (pol.Properties.Roles as Array<{ Ref: string }>).some((r) => r.Ref === roleId))
      .flatMap((pol) => pol.Properties.PolicyDocument.Statement);
    expect(statements.map((st: any) => [st.Action, text(st.Resource)])).toEqual([
      ['states:StartExecution', 'arn:<AWS::Partition>:states:eu-west-1:123456789012:stateMachine:raidsnap-copy'],
      ['states:DescribeExecution', 'arn:<AWS::Partition>:states:eu-west-1:123456789012:execution:raidsnap-copy:*'],
    ]);
    // Its copies may come from that account's snapshots, encrypted with that account's keys.
    const sources = granted(vault.template, 'copy_progress', 'ec2:CopySnapshot')[0];
    expect(sources.condition.StringEqualsIfExists).toEqual({ 'ec2:Owner': ['123456789012', '111122223333'] });
    expect(Object.keys(sources.condition.StringLike)).toContain('aws:RequestTag/raidsnap:copy-execution');
    const keys = statementsOf(vault.template, 'copy_progress')
      .filter((st) => ([] as string[]).concat(st.Action).includes('kms:Decrypt') && st.Condition?.StringLike);
    expect(([] as unknown[]).concat(keys[0].Resource).map(text))
      .toEqual(['arn:<AWS::Partition>:kms:*:123456789012:key/*', 'arn:<AWS::Partition>:kms:*:111122223333:key/*']);
    // A stack that accepts no copies has no such role.
    expect(Object.values(resourcesOf(plain.template, 'AWS::IAM::Role')).filter((r) => r.Properties.RoleName === 'raidsnap-copy-requests-eu-west-1'))
      .toEqual([]);
  });

  test('a copy to the stack\'s own Region of its own account is refused at synth', () => {
    const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
    const config = parseConfig({ arrays: { db1: { copies: [{ region: 'eu-west-1' }] } } });
    expect(() => new RaidsnapStack(app, 'raidsnap', { config, env: { account: '123456789012', region: 'eu-west-1' } }))
      .toThrow('arrays.db1.copies[0].region');
  });
});

describe('what a copy workflow keeps, and a backup run that ends early', () => {
  test('the copy workflow keeps its own stack\'s retention, which a request may raise but never lower', () => {
    expect(env(copied.template, 'copy_finish')).toMatchObject({ DEFAULT_RETENTION: '7', RETENTION_BY_ARRAY: JSON.stringify({ db1: 14 }) });
    expect(env(plain.template, 'copy_finish')).toMatchObject({ DEFAULT_RETENTION: '7', RETENTION_BY_ARRAY: '{}' });
  });

  test('a backup that fails, is stopped or times out brings its end to the copy step, which takes back its share', () => {
    const rules = (t: Template) => Object.values(resourcesOf(t, 'AWS::Events::Rule'))
      .filter((r) => JSON.stringify(r.Properties.EventPattern).includes('"TIMED_OUT"')
        && JSON.stringify(r.Properties.Targets).includes(functionId(t, 'backup_copies')));
    const [rule] = rules(copied.template);
    expect(rule.Properties.EventPattern.detail.status).toEqual(['FAILED', 'ABORTED', 'TIMED_OUT']);
    expect(rules(plain.template)).toEqual([]);
  });
});
