import * as path from 'path';
import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';

// The copies' grants (the source's share and hand-over, a backup account's requests role) exist
// only with copies configured: the same rules hold for them.
const COPIES_CONFIG = path.join(__dirname, '..', 'config', 'copies.example.yaml');
const BACKUP_ACCOUNT_CONFIG = path.join(__dirname, '..', 'config', 'backup-account.example.yaml');

/** Every Allow statement of every IAM policy in the synthesized stack, flattened. */
interface Grant { policy: string; action: string; resource: string; condition: Record<string, Record<string, unknown>>; sid?: string }

function text(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') {
    const v = value as Record<string, any>;
    if (v['Fn::Join']) return (v['Fn::Join'][1] as unknown[]).map(text).join(v['Fn::Join'][0]);
    if (v.Ref) return `<${v.Ref}>`;
    if (v['Fn::GetAtt']) return `<${v['Fn::GetAtt'].join('.')}>`;
  }
  return JSON.stringify(value);
}

function grants(configPath?: string): Grant[] {
  const { template } = synth(configPath);
  const out: Grant[] = [];
  for (const [id, policy] of Object.entries(resourcesOf(template, 'AWS::IAM::Policy'))) {
    for (const s of policy.Properties.PolicyDocument.Statement as Array<Record<string, any>>) {
      if (s.Effect !== 'Allow') continue;
      for (const action of ([] as string[]).concat(s.Action)) {
        for (const resource of ([] as unknown[]).concat(s.Resource)) {
          out.push({ policy: id, action, resource: text(resource), condition: s.Condition ?? {}, sid: s.Sid });
        }
      }
    }
  }
  return out;
}

const READ = /^[a-z0-9-]+:(Describe|Get|List|BatchGet|Query|Scan)/;
/** Mutating actions that take no resource-level permissions (Service Authorization Reference:
 * the action lists no resource type, only "*"); any other resource would match nothing. */
const WILDCARD_ONLY = ['ssm:CancelCommand', 'states:SendTaskSuccess', 'states:SendTaskFailure'];
/** The one wildcard grant scoped by another resource of the same call (see permissions.ts). */
const BY_INSTANCE = 'VolumesOfTaggedInstance';
const PLATFORM = /^(logs|xray):/;
const mutating = (g: Grant) => !READ.test(g.action) && !PLATFORM.test(g.action);
const conditionKeys = (g: Grant) => Object.values(g.condition).flatMap((c) => Object.keys(c));

/** Mutating EC2/SSM actions on wildcard resources, and the condition keys that scope them:
 * a grant must carry at least one of them. Anything not in this table is refused. */
const SCOPED: Array<[string, string, string[]]> = [
  ['ec2:CreateSnapshots', ':instance/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:CreateSnapshots', '::snapshot/*', ['aws:RequestTag/raidsnap:array']],
  // A copy: the new snapshot is made with the set's tags and its copy run's; the source is a
  // snapshot of an account the stack accepts copies from (the grant's resource-level
  // permissions apply to both; CopySnapshot takes no aws:ResourceTag key).
  ['ec2:CopySnapshot', '::snapshot/*', ['aws:RequestTag/raidsnap:copy-execution', 'ec2:Owner']],
  ['ec2:CreateTags', '::snapshot/*', ['ec2:CreateAction', 'aws:ResourceTag/raidsnap:array']],
  ['ec2:DeleteSnapshot', '::snapshot/*', ['aws:ResourceTag/raidsnap:array']],
  // A set's snapshots shared with a backup account, and no longer (createVolumePermission):
  // the accounts added or removed are keys of their own (ec2:Add/userId, ec2:Remove/userId).
  ['ec2:ModifySnapshotAttribute', '::snapshot/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:LockSnapshot', '::snapshot/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:EnableFastSnapshotRestores', '::snapshot/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:DisableFastSnapshotRestores', '::snapshot/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:CreateVolume', ':volume/*', ['aws:RequestTag/raidsnap:restore-execution']],
  ['ec2:CreateVolume', '::snapshot/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:CreateTags', ':volume/*', ['ec2:CreateAction', 'aws:TagKeys']],
  ['ec2:AttachVolume', ':volume/*', ['aws:ResourceTag/raidsnap:restore-execution', 'aws:ResourceTag/raidsnap:replaced-by']],
  ['ec2:AttachVolume', ':instance/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:DetachVolume', ':volume/*', ['aws:ResourceTag/raidsnap:restore-execution', 'aws:ResourceTag/raidsnap:replaced-by']],
  ['ec2:DetachVolume', ':instance/*', ['aws:ResourceTag/raidsnap:array']],
  ['ec2:DeleteVolume', ':volume/*', ['aws:ResourceTag/raidsnap:restore-execution']],
  ['ec2:CreateTags', ':instance/*', ['aws:TagKeys']],
  ['ec2:DeleteTags', ':instance/*', ['aws:TagKeys']],
  ['ec2:DeleteTags', ':volume/*', ['aws:TagKeys', 'aws:ResourceTag/raidsnap:replaced-by']],
  ['ssm:SendCommand', ':instance/*', ['ssm:resourceTag/raidsnap:array']],
  ['kms:Decrypt', ':key/*', ['kms:ViaService']],
  ['kms:GenerateDataKeyWithoutPlaintext', ':key/*', ['kms:ViaService']],
  ['kms:ReEncryptFrom', ':key/*', ['kms:ViaService']],
  ['kms:ReEncryptTo', ':key/*', ['kms:ViaService']],
  ['kms:CreateGrant', ':key/*', ['kms:ViaService']],
];

describe.each([
  ['without a config', undefined], ['with the example config', EXAMPLE_CONFIG],
  ['with copies to another Region and account', COPIES_CONFIG], ['of a backup account', BACKUP_ACCOUNT_CONFIG],
])('IAM %s', (_label, config) => {
  const all = grants(config);

  test('no statement allows a mutating action on "*"', () => {
    expect(all.filter((g) => mutating(g) && g.resource === '*' && !WILDCARD_ONLY.includes(g.action))
      .map((g) => `${g.policy}: ${g.action}`)).toEqual([]);
  });

  test('no statement grants a wildcard action', () => {
    expect(all.filter((g) => g.action.includes('*')).map((g) => `${g.policy}: ${g.action}`)).toEqual([]);
  });

  test('every mutating action on a wildcard resource is in the table, and carries its tag condition', () => {
    const wild = all.filter((g) => mutating(g) && g.resource.endsWith('/*') && !g.resource.includes(':function:'));
    expect(wild.length).toBeGreaterThan(20);
    const problems: string[] = [];
    for (const g of wild) {
      if (g.sid === BY_INSTANCE) continue;
      const row = SCOPED.find(([action, suffix]) => action === g.action && g.resource.endsWith(suffix));
      if (!row) {
        problems.push(`${g.policy}: ${g.action} on ${g.resource} is not an allowed wildcard grant`);
        continue;
      }
      const keys = conditionKeys(g);
      if (!row[2].some((k) => keys.includes(k))) {
        problems.push(`${g.policy}: ${g.action} on ${g.resource} lacks one of ${row[2].join(', ')} (has ${keys.join(', ') || 'none'})`);
      }
    }
    expect(problems).toEqual([]);
  });

  test('CreateSnapshots reaches a volume only in a policy that requires raidsnap:array on the instance', () => {
    const byInstance = all.filter((g) => g.sid === BY_INSTANCE);
    expect(byInstance.length).toBeGreaterThan(0);
    for (const g of byInstance) {
      expect([g.action, g.resource.endsWith(':volume/*'), g.condition]).toEqual(['ec2:CreateSnapshots', true, {}]);
      const instance = all.filter((x) => x.policy === g.policy && x.action === 'ec2:CreateSnapshots' && x.resource.endsWith(':instance/*'));
      expect(instance.map((x) => x.condition)).toEqual([{ StringLike: { 'aws:ResourceTag/raidsnap:array': '*' } }]);
    }
  });

  test('volumes are deleted only where raidsnap created them (raidsnap:restore-execution)', () => {
    const deletes = all.filter((g) => g.action === 'ec2:DeleteVolume');
    expect(deletes.length).toBeGreaterThan(0);
    for (const g of deletes) {
      expect(conditionKeys(g)).toEqual(['aws:ResourceTag/raidsnap:restore-execution']);
    }
  });

  test('tags on instances and old members are limited to raidsnap keys', () => {
    for (const g of all.filter((x) => ['ec2:CreateTags', 'ec2:DeleteTags'].includes(x.action) && /:(instance|volume)\/\*$/.test(x.resource))) {
      const createAction = conditionKeys(g).includes('ec2:CreateAction');
      const furtherArrays = g.condition['ForAllValues:StringLike']?.['aws:TagKeys'];
      if (furtherArrays !== undefined) {
        // A further array's own tag (raidsnap:array:<name>) follows its restored md UUID: keys
        // under raidsnap:array: only, only on an instance that carries the array mark.
        expect([g.action, g.resource.endsWith(':instance/*')]).toEqual(['ec2:CreateTags', true]);
        expect(([] as string[]).concat(furtherArrays as string[])).toEqual(['raidsnap:array:?*']);
        expect(g.condition.Null).toEqual({ 'aws:TagKeys': 'false' });
        expect(g.condition.StringLike).toEqual({ 'aws:ResourceTag/raidsnap:array': '*' });
        expect(Object.keys(g.condition).sort()).toEqual(['ForAllValues:StringLike', 'Null', 'StringLike']);
        continue;
      }
      const keys = g.condition['ForAllValues:StringEquals']?.['aws:TagKeys'];
      expect(createAction || keys !== undefined).toBe(true);
      if (createAction) continue;
      for (const key of ([] as string[]).concat(keys as string[])) expect(key).toMatch(/^raidsnap:/);
      // ForAllValues is true of a request with no tag keys at all; DeleteTags without Tags
      // deletes every tag of the resource. Null false demands that the request names its keys.
      expect(g.condition.Null?.['aws:TagKeys']).toBe('false');
      if (!g.resource.endsWith(':instance/*')) {
        expect(g.condition.Null).toEqual({ 'aws:TagKeys': 'false' });
      } else if (g.action === 'ec2:CreateTags') {
        // Only an instance that carries no array tag yet: never another array's instance.
        expect(g.condition.Null).toEqual({ 'aws:TagKeys': 'false', 'aws:ResourceTag/raidsnap:array': 'true' });
      } else {
        expect(g.condition.Null).toEqual({ 'aws:TagKeys': 'false', 'aws:ResourceTag/raidsnap:array': 'false' });
      }
    }
  });

  test('SendCommand runs only raidsnap documents, on instances tagged with an array', () => {
    const sends = all.filter((g) => g.action === 'ssm:SendCommand');
    expect(sends.length).toBeGreaterThan(0);
    for (const g of sends) {
      if (g.resource.includes(':document/')) {
        expect(g.resource).toMatch(/:document\/raidsnap-(discover|freeze|thaw|assemble|release|prewarm)$/);
      } else {
        expect(g.resource).toMatch(/:instance\/\*$/);
        expect(g.condition).toEqual({ StringLike: { 'ssm:resourceTag/raidsnap:array': '*' } });
      }
    }
  });

  test('DynamoDB is reached only on the restore lock table and the set manifests; only the backup and the copy workflow write manifests', () => {
    const dynamo = all.filter((x) => x.action.startsWith('dynamodb:'));
    for (const g of dynamo) {
      expect(g.resource).toMatch(/^<(RestoreLockTable|SnapshotSetsTable)[A-Za-z0-9]+\.Arn>$/);
    }
    // A manifest says which snapshots retention may delete: only the function that took the set
    // (or made the copies of a copied set) writes it, only retention removes it with the set
    // (and a failed copy run the record of its own copies). With copies configured, the
    // backup's copy step also records where the set was copied (test/copies.test.ts).
    const changes = dynamo
      .filter((g) => g.resource.startsWith('<SnapshotSetsTable') && !READ.test(g.action))
      .map((g) => `${g.policy.replace(/Role.*$/, '')} ${g.action}`)
      .sort();
    expect(changes).toEqual([
      ...(config === COPIES_CONFIG ? ['BackupBackupCopies dynamodb:UpdateItem'] : []),
      'BackupBackupRetention dynamodb:DeleteItem', 'BackupBackupSnapshot dynamodb:PutItem',
      'CopyCopyFailed dynamodb:DeleteItem', 'CopyCopyFinish dynamodb:DeleteItem', 'CopyCopyFinish dynamodb:PutItem',
      'CopyCopyPrepare dynamodb:PutItem', 'CopyCopyProgress dynamodb:PutItem',
    ]);
  });

  test('Step Functions actions name raidsnap state machines or their executions only', () => {
    for (const g of all.filter((x) => x.action.startsWith('states:') && !WILDCARD_ONLY.includes(x.action))) {
      expect(g.resource).toMatch(/(StateMachine[A-Za-z0-9]*>|:execution:raidsnap-[a-z]+:((drill-)?\*|\*-restore)|:stateMachine:raidsnap-[a-z]+|:execution:<BackupWorkflowStateMachine[A-Za-z0-9]*\.Name>:\*)$/);
    }
  });

  test('a restore may ask whether a backup holding its array still runs, and nothing more of backups', () => {
    const grants = all.filter((x) => x.resource.includes(':execution:<BackupWorkflowStateMachine'));
    expect(grants).toHaveLength(1);
    expect(grants[0].policy).toMatch(/^RestoreRestorePrepare/);
    expect(grants[0].action).toBe('states:DescribeExecution');
  });

  test('only the restore\'s report and its end, and the backup\'s snapshot check, answer a waiting Task (SendTask* takes no resource)', () => {
    // Each answers only a token written down in the lock table, which operators cannot write:
    // a recovery's (raidsnap.aws.awaited) or a backup's waiting on its snapshots
    // (raidsnap.aws.snapshot_waits).
    const answers = all.filter((g) => g.action.startsWith('states:SendTask'));
    expect([...new Set(answers.map((g) => g.policy.replace(/Role.*$/, '')))].sort()).toEqual(['BackupBackupCheck', 'RestoreRestoreEnded', 'RestoreRestoreReport']);
    expect([...new Set(answers.map((g) => g.action))].sort()).toEqual(['states:SendTaskFailure', 'states:SendTaskSuccess']);
  });

  test('the run nonce secret: only its value, only that secret, only for the functions that compute a nonce', () => {
    const { template } = synth(config);
    const secrets = Object.keys(resourcesOf(template, 'AWS::SecretsManager::Secret'));
    expect(secrets).toHaveLength(1);
    const reads = all.filter((g) => g.action.startsWith('secretsmanager:'));
    expect(reads.map((g) => [g.action, g.resource, g.condition])).toEqual(
      reads.map(() => ['secretsmanager:GetSecretValue', `<${secrets[0]}>`, {}]));
    // Encrypted with the stack key, which each reader may use through Secrets Manager only.
    const secret = resourcesOf(template, 'AWS::SecretsManager::Secret')[secrets[0]];
    expect(JSON.stringify(secret.Properties.KmsKeyId)).toContain('RaidsnapKey');
    for (const policy of new Set(reads.map((g) => g.policy))) {
      const decrypts = all.filter((g) => g.policy === policy && g.action === 'kms:Decrypt'
        && JSON.stringify(g.condition).includes('secretsmanager.'));
      expect(decrypts).toHaveLength(1);
    }
    expect(reads.map((g) => g.policy.replace(/Role.*$/, '')).sort()).toEqual([
      'DrillsDrillTeardown', 'RestoreRestoreAbandoned', 'RestoreRestorePrepare', 'SweeperSweep',
    ]);
    const generated = resourcesOf(template, 'AWS::SecretsManager::Secret')[secrets[0]].Properties.GenerateSecretString;
    expect(generated).toEqual({ ExcludePunctuation: true, PasswordLength: 64 });
  });

  test('functions may invoke nothing; only state machines and schedules invoke functions', () => {
    const invokes = all.filter((g) => g.action === 'lambda:InvokeFunction');
    for (const g of invokes) expect(g.policy).toMatch(/(StateMachineRole|ReportSetAgeRole|Schedule|Recovery|Drill)/);
  });
});
