import { Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { stackKey } from './encryption';

/** IAM statements shared by the workflows. Mutating EC2 actions carry raidsnap tag
 * conditions, so raidsnap cannot touch what it did not tag. */
export const ARRAY_TAG = 'raidsnap:array';
export const SET_ID_TAG = 'raidsnap:set-id';
/** Sid of the one wildcard grant whose scope comes from another resource of the same call. */
export const VOLUMES_OF_TAGGED_INSTANCE = 'VolumesOfTaggedInstance';

export class Permissions {
  private readonly stack: Stack;

  constructor(scope: Construct) {
    this.stack = Stack.of(scope);
  }

  ec2Arn(resource: string): string {
    const account = resource.startsWith('snapshot/') ? '' : this.stack.account;
    return `arn:${this.stack.partition}:ec2:${this.stack.region}:${account}:${resource}`;
  }

  /** Describe* calls cannot be scoped to resources. */
  describe(...actions: string[]): iam.PolicyStatement {
    return new iam.PolicyStatement({ actions, resources: ['*'] });
  }

  /** Run one of raidsnap's documents, only on instances tagged with an array. */
  sendCommand(documentArns: string[]): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({ actions: ['ssm:SendCommand'], resources: documentArns }),
      new iam.PolicyStatement({
        actions: ['ssm:SendCommand'],
        resources: [this.ec2Arn('instance/*')],
        conditions: { StringLike: { [`ssm:resourceTag/${ARRAY_TAG}`]: '*' } },
      }),
    ];
  }

  /** Read and cancel commands. Neither action takes resource-level permissions (Service
   * Authorization Reference: ssm:GetCommandInvocation and ssm:CancelCommand support only "*"),
   * so a grant on instance ARNs would match nothing; raidsnap cancels only the commands it sent
   * (their ids come from its own SendCommand, which is scoped to tagged instances). */
  readCommands(): iam.PolicyStatement[] {
    return [
      this.commandInvocations(),
      new iam.PolicyStatement({ actions: ['ssm:CancelCommand'], resources: ['*'] }),
    ];
  }

  /** Read how a command went, without cancelling any (as readCommands says, only "*"). */
  commandInvocations(): iam.PolicyStatement {
    return new iam.PolicyStatement({ actions: ['ssm:GetCommandInvocation'], resources: ['*'] });
  }

  /** CreateSnapshots of a tagged instance's volumes, into snapshots that carry the array tag.
   * EC2 authorizes the instance, each volume and each snapshot. The volume resource has no key
   * that names its instance (ec2:InstanceID exists for the instance resource only, and members
   * need carry no raidsnap tag), so the volume grant is scoped by the call itself:
   * CreateSnapshots snapshots only volumes attached to the one instance it names, and that
   * instance must carry raidsnap:array. */
  createSnapshots(): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({
        actions: ['ec2:CreateSnapshots'],
        resources: [this.ec2Arn('instance/*')],
        conditions: { StringLike: { [`aws:ResourceTag/${ARRAY_TAG}`]: '*' } },
      }),
      new iam.PolicyStatement({
        sid: VOLUMES_OF_TAGGED_INSTANCE,
        actions: ['ec2:CreateSnapshots'],
        resources: [this.ec2Arn('volume/*')],
      }),
      new iam.PolicyStatement({
        actions: ['ec2:CreateSnapshots'],
        resources: [this.ec2Arn('snapshot/*')],
        conditions: { StringLike: { [`aws:RequestTag/${ARRAY_TAG}`]: '*' } },
      }),
      new iam.PolicyStatement({
        actions: ['ec2:CreateTags'],
        resources: [this.ec2Arn('snapshot/*')],
        conditions: { StringEquals: { 'ec2:CreateAction': 'CreateSnapshots' } },
      }),
    ];
  }

  /** Tag, delete, enable FSR on or restore only snapshots of a raidsnap set: they carry the array
   * tag and the set id. The array tag alone is not enough: every volume a restore creates carries
   * it, so a snapshot another tool takes of such a volume with its tags copied (Data Lifecycle
   * Manager's CopyTags, the console) would pass; restored volumes never carry the set id. */
  manageTaggedSnapshots(...actions: string[]): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions,
      resources: [this.ec2Arn('snapshot/*')],
      conditions: { StringLike: setSnapshotTags() },
    });
  }
}

/** LockSnapshot of a raidsnap set's snapshots only (the tags above), for at most `maxDays`
 * days: ec2:SnapshotLockDuration is the LockDuration a request gives ("Control access to Amazon
 * EBS snapshot lock", Amazon EBS User Guide; listed for ec2:LockSnapshot in the Service
 * Authorization Reference), and a request that gives an ExpirationDate instead sets no such
 * key, so it is refused. Even code gone wrong cannot lock anything else, or longer than the
 * configuration says. */
export function lockSetSnapshots(p: Permissions, maxDays: number): iam.PolicyStatement {
  return new iam.PolicyStatement({
    actions: ['ec2:LockSnapshot'],
    resources: [p.ec2Arn('snapshot/*')],
    conditions: {
      StringLike: setSnapshotTags(),
      NumericLessThanEquals: { 'ec2:SnapshotLockDuration': String(maxDays) },
    },
  });
}

/** The tags a snapshot of a raidsnap set carries from the moment CreateSnapshots makes it. */
function setSnapshotTags(): Record<string, string> {
  return { [`aws:ResourceTag/${ARRAY_TAG}`]: '*', [`aws:ResourceTag/${SET_ID_TAG}`]: '*' };
}

/** Service Quotas' EBS quota of snapshots with Fast Snapshot Restore on per Region. */
export const FSR_QUOTA = 'ebs/L-631ECBD3';
/** Tag keys of the restore's conditions. */
export const RESTORE_EXECUTION_TAG = 'raidsnap:restore-execution';
export const REPLACED_BY_TAG = 'raidsnap:replaced-by';
export const MD_UUID_TAG = 'raidsnap:md-uuid';

/** IAM statements of the restore workflow. Volumes it creates carry raidsnap:restore-execution
 * from the moment they exist (CreateVolume's TagSpecifications), and every later action on them
 * is conditioned on that tag; instances are touched only when tagged raidsnap:array. */
export class RestorePermissions extends Permissions {
  private readonly scopeStack: Stack;

  constructor(scope: Construct) {
    super(scope);
    this.scopeStack = Stack.of(scope);
  }

  /** CreateVolume from a raidsnap snapshot, into a volume tagged with the execution. */
  createVolumes(): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({
        actions: ['ec2:CreateVolume'],
        resources: [this.ec2Arn('volume/*')],
        conditions: { StringLike: { [`aws:RequestTag/${RESTORE_EXECUTION_TAG}`]: '*' } },
      }),
      new iam.PolicyStatement({
        actions: ['ec2:CreateVolume'],
        resources: [this.ec2Arn('snapshot/*')],
        conditions: { StringLike: setSnapshotTags() },
      }),
      new iam.PolicyStatement({
        actions: ['ec2:CreateTags'],
        resources: [this.ec2Arn('volume/*')],
        conditions: { StringEquals: { 'ec2:CreateAction': 'CreateVolume' } },
      }),
    ];
  }

  /** Read the Region's quota of snapshots with Fast Snapshot Restore on (Service Quotas, EBS
   * quota L-631ECBD3 "Fast snapshot restore"), and only that quota. */
  readFsrQuota(): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: ['servicequotas:GetServiceQuota'],
      resources: [
        `arn:${this.scopeStack.partition}:servicequotas:${this.scopeStack.region}:${this.scopeStack.account}:${FSR_QUOTA}`,
      ],
    });
  }

  /** Enable/Disable FSR only on snapshots that carry the array tag. */
  fastSnapshotRestores(...actions: string[]): iam.PolicyStatement {
    return this.manageTaggedSnapshots(...actions);
  }

  /** Attach, detach or delete only volumes this restore workflow created; attach and detach
   * only on instances tagged with an array. */
  manageRestoredVolumes(...actions: string[]): iam.PolicyStatement[] {
    const statements = [
      new iam.PolicyStatement({
        actions,
        resources: [this.ec2Arn('volume/*')],
        conditions: { StringLike: { [`aws:ResourceTag/${RESTORE_EXECUTION_TAG}`]: '*' } },
      }),
    ];
    const onInstances = actions.filter((a) => a !== 'ec2:DeleteVolume');
    if (onInstances.length) statements.push(this.onArrayInstances(...onInstances));
    return statements;
  }

  /** Replace mode: the old members may carry no raidsnap tag at all, so the restore first tags
   * them raidsnap:replaced-by (that tag key only, its value an execution of this workflow) and
   * may then detach only volumes so tagged, from instances tagged with an array. */
  replaceOldMembers(stateMachineName: string): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({
        actions: ['ec2:CreateTags'],
        resources: [this.ec2Arn('volume/*')],
        conditions: {
          'ForAllValues:StringEquals': { 'aws:TagKeys': [REPLACED_BY_TAG] },
          Null: { 'aws:TagKeys': 'false' },
          StringLike: { [`aws:RequestTag/${REPLACED_BY_TAG}`]: `${this.executionArnPrefix(stateMachineName)}*` },
        },
      }),
      new iam.PolicyStatement({
        actions: ['ec2:DetachVolume'],
        resources: [this.ec2Arn('volume/*')],
        conditions: { StringLike: { [`aws:ResourceTag/${REPLACED_BY_TAG}`]: '*' } },
      }),
      this.onArrayInstances('ec2:DetachVolume'),
    ];
  }

  /** A failed replace that detached the old members attaches them back to the array's instance
   * before it puts the array back: only volumes tagged replaced-by with an execution of this
   * workflow (the failure path checks it is its own execution), only to instances tagged with
   * an array. */
  reattachReplacedMembers(stateMachineName: string): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({
        actions: ['ec2:AttachVolume'],
        resources: [this.ec2Arn('volume/*')],
        conditions: { StringLike: { [`aws:ResourceTag/${REPLACED_BY_TAG}`]: `${this.executionArnPrefix(stateMachineName)}*` } },
      }),
      this.onArrayInstances('ec2:AttachVolume'),
    ];
  }

  /** A failed replace that puts the released array back takes off the replaced-by tag it put on
   * the old members: that tag key only (DeleteTags names it: aws:TagKeys), and only where its
   * value is an execution of this workflow (aws:ResourceTag; both keys apply to ec2:DeleteTags
   * on volumes in the Service Authorization Reference). */
  untagReplacedMembers(stateMachineName: string): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: ['ec2:DeleteTags'],
      resources: [this.ec2Arn('volume/*')],
      conditions: {
        'ForAllValues:StringEquals': { 'aws:TagKeys': [REPLACED_BY_TAG] },
        Null: { 'aws:TagKeys': 'false' },
        StringLike: { [`aws:ResourceTag/${REPLACED_BY_TAG}`]: `${this.executionArnPrefix(stateMachineName)}*` },
      },
    });
  }

  /** Once a restore assembled its volumes: tag them with the array's own new md UUID, that tag
   * key only, and only on volumes a run of this workflow created (their restore-execution tag
   * names one of its executions). */
  tagRestoredIdentity(stateMachineName: string): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: ['ec2:CreateTags'],
      resources: [this.ec2Arn('volume/*')],
      conditions: {
        'ForAllValues:StringEquals': { 'aws:TagKeys': [MD_UUID_TAG] },
        Null: { 'aws:TagKeys': 'false' },
        StringLike: { [`aws:ResourceTag/${RESTORE_EXECUTION_TAG}`]: `${this.executionArnPrefix(stateMachineName)}*` },
      },
    });
  }

  /** Tag an instance with the array tag key only, and only an instance that carries none: a
   * restore makes an untagged instance the configuration names (or the array's recorded one)
   * the array's instance, and never re-tags another array's instance, even if its code were
   * wrong ("Tag your Amazon EC2 resources": aws:ResourceTag is the tag the resource has before
   * the request; Null true: it has no raidsnap:array). */
  tagArrayInstance(): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: ['ec2:CreateTags'],
      resources: [this.ec2Arn('instance/*')],
      conditions: {
        'ForAllValues:StringEquals': { 'aws:TagKeys': [ARRAY_TAG] },
        // ForAllValues holds when the request names no tag key at all: the key must be present.
        Null: { 'aws:TagKeys': 'false', [`aws:ResourceTag/${ARRAY_TAG}`]: 'true' },
      },
    });
  }

  /** A further array named on its instance by md UUID (raidsnap:array:<name>, README "Several
   * arrays on one instance") gets a new md UUID when restored: the restore points that tag at
   * it. Only keys under raidsnap:array: (aws:TagKeys, the keys of the request; Null false: a
   * request naming no key is no such request), only on an instance that carries the
   * raidsnap:array mark (aws:ResourceTag, the tags it has before the request). Array names are
   * found by tags, not known at deploy, so the key's name cannot be narrower: the code writes
   * its own array's key only. ec2:CreateTags takes aws:TagKeys, aws:RequestTag/${TagKey} and
   * aws:ResourceTag/${TagKey} on the instance resource (Service Authorization Reference, Amazon
   * EC2). */
  tagFurtherArrayIdentity(): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: ['ec2:CreateTags'],
      resources: [this.ec2Arn('instance/*')],
      conditions: {
        'ForAllValues:StringLike': { 'aws:TagKeys': [`${ARRAY_TAG}:?*`] },
        Null: { 'aws:TagKeys': 'false' },
        StringLike: { [`aws:ResourceTag/${ARRAY_TAG}`]: '*' },
      },
    });
  }

  /** Take the array tag (that key only) off an instance that carries it. */
  untagArrayInstance(): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: ['ec2:DeleteTags'],
      resources: [this.ec2Arn('instance/*')],
      conditions: {
        'ForAllValues:StringEquals': { 'aws:TagKeys': [ARRAY_TAG] },
        // DeleteTags without Tags deletes every user-defined tag of the resource.
        Null: { 'aws:TagKeys': 'false', [`aws:ResourceTag/${ARRAY_TAG}`]: 'false' },
      },
    });
  }

  onArrayInstances(...actions: string[]): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions,
      resources: [this.ec2Arn('instance/*')],
      conditions: { StringLike: { [`aws:ResourceTag/${ARRAY_TAG}`]: '*' } },
    });
  }

  executionArnPrefix(stateMachineName: string): string {
    const s = this.scopeStack;
    return `arn:${s.partition}:states:${s.region}:${s.account}:execution:${stateMachineName}:`;
  }

  /** A state machine that runs this restore workflow nested (startExecution.sync:2): start it,
   * follow and stop only executions whose names match `names`, and the managed rule through
   * which Step Functions learns that the child ended. */
  runNestedRestore(restoreArn: string, stateMachineName: string, names = '*'): iam.PolicyStatement[] {
    const s = this.scopeStack;
    return [
      new iam.PolicyStatement({ actions: ['states:StartExecution'], resources: [restoreArn] }),
      new iam.PolicyStatement({
        actions: ['states:DescribeExecution', 'states:StopExecution'],
        resources: [`${this.executionArnPrefix(stateMachineName)}${names}`],
      }),
      new iam.PolicyStatement({
        actions: ['events:PutTargets', 'events:PutRule', 'events:DescribeRule'],
        resources: [`arn:${s.partition}:events:${s.region}:${s.account}:rule/StepFunctionsGetEventsForStepFunctionsExecutionRule`],
      }),
    ];
  }

  /** Answer the Task a parent workflow waits on with the callback pattern (its token in the
   * parent's record in the lock table, never in the run's input): SendTaskSuccess and
   * SendTaskFailure support no resource-level permissions (Service Authorization Reference,
   * AWS Step Functions: no resource type), so only `*`. */
  answerWaitingTask(): iam.PolicyStatement {
    return new iam.PolicyStatement({ actions: ['states:SendTaskSuccess', 'states:SendTaskFailure'], resources: ['*'] });
  }

  /** Keep alive and complete launch lifecycle actions of exactly these Auto Scaling groups
   * (any of their generated ids). */
  completeLifecycleActions(groups: readonly string[]): iam.PolicyStatement {
    const s = this.scopeStack;
    return new iam.PolicyStatement({
      actions: ['autoscaling:RecordLifecycleActionHeartbeat', 'autoscaling:CompleteLifecycleAction'],
      resources: groups.map((g) => `arn:${s.partition}:autoscaling:${s.region}:${s.account}:autoScalingGroup:*:autoScalingGroupName/${g}`),
    });
  }

  /** A drill's teardown: detach and delete only volumes created by a restore the drill started
   * (raidsnap:restore-execution names an execution of the restore workflow called drill-...),
   * detaching only from instances tagged with an array. */
  removeDrillVolumes(stateMachineName: string, namePrefix: string): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({
        actions: ['ec2:DetachVolume', 'ec2:DeleteVolume'],
        resources: [this.ec2Arn('volume/*')],
        conditions: {
          StringLike: { [`aws:ResourceTag/${RESTORE_EXECUTION_TAG}`]: `${this.executionArnPrefix(stateMachineName)}${namePrefix}*` },
        },
      }),
      this.onArrayInstances('ec2:DetachVolume'),
    ];
  }

  /** The sweeper: delete only volumes a restore of this workflow created (raidsnap:restore-execution
   * names one of its executions). Whether the volume is attached, and whether its run ended,
   * the sweeper checks before it asks: EC2 refuses to delete an attached volume anyway. */
  deleteRestoredVolumes(stateMachineName: string): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: ['ec2:DeleteVolume'],
      resources: [this.ec2Arn('volume/*')],
      conditions: {
        StringLike: { [`aws:ResourceTag/${RESTORE_EXECUTION_TAG}`]: `${this.executionArnPrefix(stateMachineName)}*` },
      },
    });
  }

  /** Read the deployment's run nonce secret, that secret only, and only its value
   * (secretsmanager:GetSecretValue authorizes the Secret resource type: Service Authorization
   * Reference); no DescribeSecret, no other version stage. */
  /** The run nonce secret's value; Secrets Manager decrypts it with the stack key on the
   * caller's behalf ("How AWS Secrets Manager uses AWS KMS": GetSecretValue calls kms:Decrypt
   * with the caller's permissions, kms:ViaService secretsmanager). */
  readRunSecret(secret: secretsmanager.ISecret): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [secret.secretArn] }),
      new iam.PolicyStatement({
        actions: ['kms:Decrypt'],
        resources: [stackKey(secret).keyArn],
        conditions: { StringEquals: { 'kms:ViaService': `secretsmanager.${Stack.of(secret).region}.amazonaws.com` } },
      }),
    ];
  }

  /** DescribeExecution of this workflow's own executions (is a lock's holder still running?).
   * Built from a fixed state machine name: the state machine's ARN would make the functions
   * depend on the state machine that depends on them. */
  describeExecutions(stateMachineName: string, namePrefix = '', history = false): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions: history ? ['states:DescribeExecution', 'states:GetExecutionHistory'] : ['states:DescribeExecution'],
      resources: [`${this.executionArnPrefix(stateMachineName)}${namePrefix}*`],
    });
  }
}
