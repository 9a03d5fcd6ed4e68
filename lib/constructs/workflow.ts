import * as path from 'path';
import { readFileSync } from 'fs';
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { REPO_ROOT } from './functions';
import { logGroupName, stackKey } from './encryption';
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
  /** Tasks (by state name) whose standard retry is replaced by another. */
  readonly retries?: Record<string, readonly Retrier[]>;
}

const PLACEHOLDER = /\$\{([A-Za-z0-9_]+)\}/g;

/** Placeholders a definition file uses. */
export function placeholdersOf(definition: string): string[] {
  return [...new Set([...definition.matchAll(PLACEHOLDER)].map((m) => m[1]))].sort();
}

type Json = Record<string, unknown>;
export type Retrier = { ErrorEquals: string[] } & Json;

/** Lambda's transient service errors as a Task reports them, retried as the Step Functions
 * developer guide advises ("Handle transient Lambda service exceptions",
 * https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html; the
 * concurrency limit is `Lambda.TooManyRequestsException`, same page). `ThrottledError` is
 * raidsnap's own: a function raises it when EC2 or SSM throttled it beyond the SDK's retries
 * (lambdas/raidsnap/errors.py). EC2 answers a request over its account's token bucket with
 * RequestLimitExceeded and asks callers to retry with exponential backoff ("Request throttling
 * for the Amazon EC2 API", Amazon EC2 Developer Guide, "Retries and exponential backoff",
 * https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html); when a fleet of
 * restores runs at once the buckets stay empty for many minutes (bench/fleet.py: CreateVolume's
 * refills 5 a second, 1,000 restores of 3 members need 3,000), and a step that gives up fails
 * its run and sends its clean-up into the same buckets. So the wait grows 5 s, 10 s, ... to
 * 300 s and goes on for 40 attempts: about 88 minutes on average with full jitter (each wait
 * random between 0 and its bound, "Retrying after an error", Step Functions developer guide,
 * JitterStrategy), at most about 2.9 hours, inside the workflows' own time limits. Every step
 * retried here is safe to run again: it looks before it acts, and what it creates carries a
 * ClientToken or a record of the run. Each retry is a billed state transition; only a
 * throttled step pays for them. */
export const LAMBDA_RETRY: readonly Retrier[] = [
  {
    ErrorEquals: ['Lambda.ServiceException', 'Lambda.AWSLambdaException', 'Lambda.SdkClientException', 'Lambda.TooManyRequestsException'],
    IntervalSeconds: 2, MaxAttempts: 6, BackoffRate: 2, JitterStrategy: 'FULL',
  },
  { ErrorEquals: ['ThrottledError'], IntervalSeconds: 5, MaxAttempts: 40, BackoffRate: 2, MaxDelaySeconds: 300, JitterStrategy: 'FULL' },
];

/** The longest a Task's retries can keep it from its next state, in seconds: every wait at its
 * bound (full jitter waits less, never more: each wait is random between 0 and
 * IntervalSeconds x BackoffRate^(n-1), capped by MaxDelaySeconds, "Retrying after an error",
 * Step Functions developer guide), and every attempt running for `attemptSeconds` (the function's
 * timeout). Each retrier counts its own attempts, so the retriers add up. */
export function worstCaseRetrySeconds(retriers: readonly Retrier[], attemptSeconds: number): number {
  let waits = 0;
  let attempts = 1;
  for (const r of retriers) {
    const interval = Number(r.IntervalSeconds ?? 1);
    const backoff = Number(r.BackoffRate ?? 2);
    const cap = r.MaxDelaySeconds === undefined ? Infinity : Number(r.MaxDelaySeconds);
    const max = Number(r.MaxAttempts ?? 3);
    for (let n = 1; n <= max; n++) waits += Math.min(cap, interval * backoff ** (n - 1));
    attempts += max;
  }
  return Math.ceil(waits + attempts * attemptSeconds);
}

/** The retry of a launch's heartbeat (the recovery's KeepLaunchAlive): short, so that a
 * heartbeat held back by errors gives up well inside the hook's heartbeat timeout and hands over
 * to Settle, which records a heartbeat before anything else (LAMBDA_RETRY's 2.9 hours would
 * outlast the timeout: Auto Scaling then ends the action with its default result, ABANDON,
 * "Amazon EC2 Auto Scaling lifecycle hooks", user guide). lib/constructs/recovery.ts checks the
 * bound against LIFECYCLE_HEARTBEAT. */
export const HEARTBEAT_RETRY: readonly Retrier[] = [
  { ...LAMBDA_RETRY[0], MaxAttempts: 3 },
  { ErrorEquals: ['ThrottledError'], IntervalSeconds: 5, MaxAttempts: 5, BackoffRate: 2, MaxDelaySeconds: 60, JitterStrategy: 'FULL' },
];

/** What a `states:startExecution.sync` Task may fail with before the child runs, and retries.
 * - `StepFunctions.ExecutionLimitExceeded`: the account's open-execution quota is reached
 *   (1,000,000 per Region, https://docs.aws.amazon.com/step-functions/latest/dg/limits.html); the
 *   guide's "Start workflow executions from a task state" page
 *   (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-nested-workflows.html) names
 *   this error for the Task and says to retry it. The SDK-integration naming rule (ServiceName.
 *   ErrorName, always with the `Exception` suffix: "Learning to use AWS service SDK
 *   integrations", https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html)
 *   gives `StepFunctions.ExecutionLimitExceededException`; both spellings are retried, neither
 *   can mean anything else.
 * - `StepFunctions.AWSStepFunctionsException` / `StepFunctions.SdkClientException`: the service
 *   answered with an error the API has no name for (5xx) or could not be reached: the same two
 *   kinds the guide lists as transient for Lambda (`Lambda.AWSLambdaException`,
 *   `Lambda.SdkClientException`).
 * - `StepFunctions.ThrottlingException`: StartExecution's throttling (a common error of the Step
 *   Functions API, API reference "Common Errors"), named by the same ServiceName.ErrorName rule;
 *   no page says which of these two names the optimized integration reports it under, so both
 *   are retried.
 * Not retried: `ExecutionAlreadyExists`, `InvalidArn`, `InvalidExecutionInput`, `InvalidName`,
 * `StateMachineDeleting`, `StateMachineDoesNotExist` (StartExecution's other errors, API
 * reference) will not pass on a second try, and `States.TaskFailed` / `States.Timeout` /
 * `States.ALL` would run the child again after it ran: a second restore. A retry after the child
 * did start starts nothing: StartExecution with a running execution's name and input answers with
 * that execution, and with a closed one's fails ExecutionAlreadyExists, which goes to the Catch
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html). */
export const START_EXECUTION_RETRY: readonly Retrier[] = [
  {
    ErrorEquals: ['StepFunctions.AWSStepFunctionsException', 'StepFunctions.SdkClientException', 'StepFunctions.ThrottlingException'],
    IntervalSeconds: 2, MaxAttempts: 6, BackoffRate: 2, JitterStrategy: 'FULL',
  },
  {
    ErrorEquals: ['StepFunctions.ExecutionLimitExceeded', 'StepFunctions.ExecutionLimitExceededException'],
    IntervalSeconds: 30, MaxAttempts: 8, BackoffRate: 2, MaxDelaySeconds: 300, JitterStrategy: 'FULL',
  },
];

const START_EXECUTION_SYNC = /^arn:aws:states:::states:startExecution\.sync(:2)?$/;
/** A Lambda function invoked with a task token, whose Task waits for SendTaskSuccess or
 * SendTaskFailure ("Wait for a Callback with Task Token", developer guide, Service integration
 * patterns); its function is named by `Parameters.FunctionName`. */
export const LAMBDA_CALLBACK = 'arn:aws:states:::lambda:invoke.waitForTaskToken';

/**
 * The definition that reaches AWS, from a definition file. A file is ASL with one addition:
 * `"DefaultCatch": { "ResultPath": ..., "Next": ... }` at the top, where a failed step goes
 * unless it says otherwise. To every Task, at the top level and in a Parallel's branches:
 * - without a `Retry`: the retry `retries` names for it, else the standard retry of its kind
 *   (LAMBDA_RETRY for a Resource that is one of
 *   `lambdaPlaceholders`, or LAMBDA_CALLBACK with one as its FunctionName; START_EXECUTION_RETRY
 *   for startExecution.sync); any other kind of Task must carry its own.
 * To every Task and Parallel of the top level:
 * - without a `Catch`: `States.ALL` to DefaultCatch's Next, with its ResultPath.
 * A Task in a branch gets no Catch: a branch cannot go to a state outside it, and an error that
 * ends a branch fails the Parallel ("Parallel", developer guide, Error handling), whose Catch
 * then handles it. A Parallel gets no Retry: a retry would run every branch again.
 * A Task that must not be retried or caught that way writes its own `Retry` / `Catch` (an empty
 * `Retry: []` for none), and is left as written. `DefaultCatch` itself is removed: the result is
 * plain ASL. A Map is refused: its Tasks would deploy as written.
 */
export function expandDefinition(
  file: string, text: string, lambdaPlaceholders: readonly string[], retries: Record<string, readonly Retrier[]> = {},
): Json {
  const doc = JSON.parse(text) as Json & { States: Record<string, Json>; DefaultCatch?: { ResultPath?: string; Next?: string } };
  const fail = (why: string): never => {
    throw new Error(`raidsnap: ${file}: ${why}`);
  };
  const { DefaultCatch: catchTo, ...rest } = doc;
  if (catchTo !== undefined && (typeof catchTo.Next !== 'string' || !(catchTo.Next in doc.States))) {
    fail(`DefaultCatch.Next names no state of the file: ${JSON.stringify(catchTo.Next)}`);
  }
  if (catchTo !== undefined && (typeof catchTo.ResultPath !== 'string' || catchTo.ResultPath === '$')) {
    // Without a ResultPath (or with "$") the error replaces the whole state, and the failure
    // path would no longer see what the run created: every file keeps its error beside it.
    fail(`DefaultCatch.ResultPath must name a field for the error (e.g. "$.error"), not ${JSON.stringify(catchTo.ResultPath)}`);
  }
  const lambdas = new Set(lambdaPlaceholders.map((name) => '${' + name + '}'));
  const standardRetry = (name: string, body: Json): readonly Retrier[] => {
    if (name in retries) return retries[name];
    const resource = String(body.Resource);
    const callee = String((body.Parameters as Json | undefined)?.FunctionName);
    if (lambdas.has(resource) || (resource === LAMBDA_CALLBACK && lambdas.has(callee))) return LAMBDA_RETRY;
    if (START_EXECUTION_SYNC.test(resource)) return START_EXECUTION_RETRY;
    return fail(`Task ${name}: no standard retry for ${resource}; give it its own Retry`);
  };
  const complete = (states: Record<string, Json>, top: boolean): Record<string, Json> => {
    const out: Record<string, Json> = {};
    for (const [name, state] of Object.entries(states)) {
      if (state.ItemProcessor !== undefined || state.Iterator !== undefined) {
        fail(`${name}: the loader completes Tasks of the top level and of Parallel branches only; a Map would deploy its Tasks as written`);
      }
      if (state.Type === 'Parallel') {
        if (!top) fail(`${name}: a Parallel in a branch is not completed by the loader`);
        const branches = (state.Branches as Array<Json & { States: Record<string, Json> }>)
          .map((b) => ({ ...b, States: complete(b.States, false) }));
        out[name] = withCatch(name, { ...state, Branches: branches });
        continue;
      }
      if (state.Type !== 'Task') {
        out[name] = state;
        continue;
      }
      const { Retry: ownRetry, Catch: ownCatch, Next, End, ...body } = state;
      const Retry = ownRetry ?? standardRetry(name, body);
      // Keys in the order the files always had: what the Task does, then its errors, then where next.
      const errors = top ? { Retry, Catch: ownCatch ?? defaultCatch(name) } : { Retry, ...(ownCatch !== undefined ? { Catch: ownCatch } : {}) };
      out[name] = { ...body, ...errors, ...(Next !== undefined ? { Next } : {}), ...(End !== undefined ? { End } : {}) };
    }
    return out;
  };
  const defaultCatch = (name: string): Json[] => {
    if (catchTo === undefined) return fail(`Task ${name} has no Catch and the file no DefaultCatch`);
    return [{ ErrorEquals: ['States.ALL'], ...(catchTo.ResultPath !== undefined ? { ResultPath: catchTo.ResultPath } : {}), Next: catchTo.Next }];
  };
  const withCatch = (name: string, state: Json): Json => {
    if (state.Catch !== undefined) return state;
    const { Next, End, ...body } = state;
    return { ...body, Catch: defaultCatch(name), ...(Next !== undefined ? { Next } : {}), ...(End !== undefined ? { End } : {}) };
  };
  return { ...rest, States: complete(doc.States, true) };
}

/** A Standard state machine whose definition is an ASL file, carried inline in the template
 * (DefinitionString) so offline tools can read it. */
export class Workflow extends Construct {
  readonly stateMachine: sfn.StateMachine;

  constructor(scope: Construct, id: string, props: WorkflowProps) {
    super(scope, id);
    const file = readFileSync(path.join(REPO_ROOT, 'statemachines', props.definitionFile), 'utf8');
    const definition = JSON.stringify(expandDefinition(props.definitionFile, file, Object.keys(props.functions), props.retries), null, 2) + '\n';
    const substitutions: Record<string, string> = { ...(props.values ?? {}) };
    for (const [name, fn] of Object.entries(props.functions)) substitutions[name] = fn.functionArn;
    const wanted = placeholdersOf(definition);
    const missing = wanted.filter((name) => !(name in substitutions));
    const unused = Object.keys(substitutions).filter((name) => !wanted.includes(name));
    if (missing.length || unused.length) {
      throw new Error(`raidsnap: ${props.definitionFile}: placeholders without a value: [${missing.join(', ')}]; values without a placeholder: [${unused.join(', ')}]`);
    }
    const logGroup = new logs.LogGroup(this, 'Logs', {
      logGroupName: logGroupName(this, 'states'),
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
