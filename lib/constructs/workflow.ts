import * as path from 'path';
import { readFileSync } from 'fs';
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { REPO_ROOT } from './functions';
import { stackKey } from './encryption';
import { acknowledge, arnRef, REASONS } from '../nag';

export interface WorkflowProps {
  /** File name under statemachines/, e.g. `backup.asl.json`. */
  readonly definitionFile: string;
  /** `${Name}` placeholders of the definition that stand for a function's ARN. */
  readonly functions: Record<string, lambda.IFunction>;
  /** Other `${Name}` placeholders. */
  readonly values?: Record<string, string>;
  readonly timeout: Duration;
  readonly comment: string;
}

const PLACEHOLDER = /\$\{([A-Za-z0-9_]+)\}/g;

/** Placeholders a definition file uses. */
export function placeholdersOf(definition: string): string[] {
  return [...new Set([...definition.matchAll(PLACEHOLDER)].map((m) => m[1]))].sort();
}

/** A Standard state machine whose definition is an ASL file, carried inline in the template
 * (DefinitionString) so offline tools can read it. */
export class Workflow extends Construct {
  readonly stateMachine: sfn.StateMachine;

  constructor(scope: Construct, id: string, props: WorkflowProps) {
    super(scope, id);
    const definition = readFileSync(path.join(REPO_ROOT, 'statemachines', props.definitionFile), 'utf8');
    const substitutions: Record<string, string> = { ...(props.values ?? {}) };
    for (const [name, fn] of Object.entries(props.functions)) substitutions[name] = fn.functionArn;
    const wanted = placeholdersOf(definition);
    const missing = wanted.filter((name) => !(name in substitutions));
    const unused = Object.keys(substitutions).filter((name) => !wanted.includes(name));
    if (missing.length || unused.length) {
      throw new Error(`raidsnap: ${props.definitionFile}: placeholders without a value: [${missing.join(', ')}]; values without a placeholder: [${unused.join(', ')}]`);
    }
    const logGroup = new logs.LogGroup(this, 'Logs', {
      retention: logs.RetentionDays.THREE_MONTHS,
      removalPolicy: RemovalPolicy.RETAIN,
      encryptionKey: stackKey(this),
    });
    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      comment: props.comment,
      definitionBody: sfn.DefinitionBody.fromString(definition),
      definitionSubstitutions: substitutions,
      timeout: props.timeout,
      tracingEnabled: true,
      logs: { destination: logGroup, level: sfn.LogLevel.ALL, includeExecutionData: true },
    });
    for (const fn of Object.values(props.functions)) fn.grantInvoke(this.stateMachine);
    const policy = this.stateMachine.role.node.tryFindChild('DefaultPolicy');
    if (policy) {
      acknowledge(policy, 'AwsSolutions-IAM5[Resource::*]', REASONS.describe);
      for (const fn of new Set(Object.values(props.functions))) {
        acknowledge(policy, `AwsSolutions-IAM5[Resource::${arnRef(fn)}:*]`, REASONS.invoke);
      }
    }
  }
}
