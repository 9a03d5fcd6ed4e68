import { Stack, StackProps } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { ArrayConfig, ConfigError, RaidsnapConfig } from './config';
import { BackupWorkflow } from './constructs/backup-workflow';
import { CopyWorkflow } from './constructs/copies';
import { Documents } from './constructs/documents';
import { Drills } from './constructs/drills';
import { stackKey } from './constructs/encryption';
import { FunctionFactory } from './constructs/functions';
import { Monitoring } from './constructs/monitoring';
import { Outputs } from './constructs/outputs';
import { notifyAlarms, notifyRecoveryTo, Recovery } from './constructs/recovery';
import { RestoreLock, RestoreWorkflow } from './constructs/restore-workflow';
import { Schedules } from './constructs/schedules';
import { SnapshotSets } from './constructs/snapshot-sets';
import { Sweeper } from './constructs/sweeper';
import { TagProtection } from './constructs/tag-protection';
import { checkEnvironmentsFit } from './environment-size';
import { fastRestorePolicies } from './fast-restore';

export interface RaidsnapStackProps extends StackProps {
  readonly config: RaidsnapConfig;
}

/** The instances the config names for each array: those that are or become its own (its
 * instance, its replacement, the launches of its Auto Scaling group), and those that only ever
 * receive copies of it (its drill instance). */
function arrayInstances(arrays: ArrayConfig[]): Record<string, { instances: string[]; copies: string[]; autoScalingGroup?: string }> {
  return Object.fromEntries(arrays.map((a) => [a.name, {
    instances: [a.recovery?.instanceId, a.recovery?.replacementInstanceId].filter((i): i is string => Boolean(i)),
    copies: a.drill ? [a.drill.targetInstanceId] : [],
    ...(a.recovery?.autoScalingGroup ? { autoScalingGroup: a.recovery.autoScalingGroup } : {}),
  }]));
}

/** Composition only: each part lives in lib/constructs. */
export class RaidsnapStack extends Stack {
  readonly backup: BackupWorkflow;
  readonly copy: CopyWorkflow;
  readonly documents: Documents;
  readonly drills: Drills;
  readonly monitoring: Monitoring;
  readonly recovery: Recovery;
  readonly restore: RestoreWorkflow;
  readonly schedules: Schedules;
  readonly sweeper: Sweeper;
  readonly tagProtection?: TagProtection;

  constructor(scope: Construct, id: string, props: RaidsnapStackProps) {
    super(scope, id, props);
    const arrays = Object.values(props.config.arrays);
    const fastRestore = fastRestorePolicies(this, props.config, (f, why, fix) => new ConfigError(f, why, fix));
    this.documents = new Documents(this, 'Documents');
    const sets = new SnapshotSets(this, 'SnapshotSets');
    const factory = new FunctionFactory(this, 'Functions', {
      environment: {
        SNAPSHOT_SETS_TABLE: sets.table.tableName,
        // Where restored arrays may be mounted, and which instances the config names for each
        // array (plan/targets.py): a restore acts on nothing else.
        ALLOWED_MOUNT_POINTS: JSON.stringify(props.config.defaults.allowedMountPoints),
        ARRAY_INSTANCES: JSON.stringify(arrayInstances(arrays)),
      },
    });
    const restoreLock = new RestoreLock(this, 'RestoreLock');
    this.backup = new BackupWorkflow(this, 'Backup', {
      factory, documents: this.documents, defaults: props.config.defaults, arrays, restoreLock: restoreLock.table, sets, fastRestore,
      prices: props.config.prices,
    });
    this.restore = new RestoreWorkflow(this, 'Restore', {
      factory, documents: this.documents, defaults: props.config.defaults, arrays,
      lock: restoreLock, commandPoll: this.backup.functions.CommandPoll, sets, prices: props.config.prices,
      backup: this.backup.stateMachine,
    });
    // Copies of sets taken in other Regions or accounts are made here by this workflow.
    this.copy = new CopyWorkflow(this, 'Copy', { factory, sets, lock: restoreLock, sourceAccounts: props.config.acceptCopiesFrom, arrays,
      defaultRetention: props.config.defaults.retention });
    this.recovery = new Recovery(this, 'Recovery', {
      factory, arrays, restore: this.restore, lock: restoreLock, documents: this.documents, sets, prices: props.config.prices,
    });
    this.drills = new Drills(this, 'Drills', {
      factory, arrays, documents: this.documents, restore: this.restore, lock: restoreLock, commandPoll: this.backup.functions.CommandPoll, sets,
      prices: props.config.prices,
    });
    this.schedules = new Schedules(this, 'Schedules', { arrays, backup: this.backup.stateMachine });
    this.monitoring = new Monitoring(this, 'Monitoring', {
      factory, arrays, emails: props.config.notifications.emails, sets, fastRestore: Object.keys(fastRestore).length > 0,
      workflows: {
        backup: this.backup.stateMachine, restore: this.restore.stateMachine,
        recovery: this.recovery.stateMachine, drill: this.drills.stateMachine, copy: this.copy.stateMachine,
      },
    });
    this.sweeper = new Sweeper(this, 'Sweeper', {
      factory, restore: this.restore, lock: restoreLock, notifier: this.monitoring, fastRestore,
      workflows: [this.backup.stateMachine, this.restore.stateMachine, this.recovery.stateMachine, this.drills.stateMachine, this.copy.stateMachine],
    });
    // What starts runs goes first when the stack is deleted (it DependsOn the clean-up), so
    // that no run starts after the clean-up looked.
    for (const starter of [...this.schedules.schedules, ...this.drills.schedules, ...this.recovery.rules]) {
      starter.node.addDependency(this.sweeper.onDelete);
    }
    this.drills.notifyTo(this.monitoring.topic, stackKey(this));
    notifyRecoveryTo(this.recovery, this.monitoring.topic, stackKey(this));
    notifyAlarms(this.recovery, this.monitoring);
    this.monitoring.notify(this.restore.endedDeadLettersAlarm);
    new Outputs(this, 'Outputs', {
      workflows: {
        Restore: this.restore.stateMachine, Backup: this.backup.stateMachine,
        Drill: this.drills.stateMachine, Recovery: this.recovery.stateMachine,
      },
      dashboard: this.monitoring.dashboard, topic: this.monitoring.topic,
      snapshotSets: sets.table, restoreLock: restoreLock.table,
    });
    // Last: it names every role made above.
    if (props.config.tagProtection) {
      this.tagProtection = new TagProtection(this, 'TagProtection', { config: props.config.tagProtection });
    }
    // Once every function has all its variables: each must fit in Lambda's 4 KB.
    checkEnvironmentsFit(this, (f, why, fix) => new ConfigError(f, why, fix));
  }
}
