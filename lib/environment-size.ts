import { CfnResource, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Problem } from './config-error';

/**
 * Lambda allows 4 KB for all of a function's environment variables together ("Total size of
 * environment variables set | 4 KB", Lambda quotas,
 * https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html); CreateFunction and
 * UpdateFunctionConfiguration refuse more, so a configuration that passes synth would fail at
 * deploy, or fail the stack update that added a hook or a copy. The size is taken here as the
 * JSON of the variables map (keys, values, quotes and escapes), which is more than the keys and
 * values alone: a function that fits by this measure fits by either.
 */
export const ENVIRONMENT_BYTES = 4096;

// What an unresolved value becomes at deploy, at most: each part of an ARN or a generated name.
const PARTITION = 'aws-us-gov'.length;
const REGION = 16; // the longest Region code today is 14 characters
const ACCOUNT = 12;
const URL_SUFFIX = 20;
// CloudFormation names a resource without a name of its own <stack>-<logical id>-<13 random>.
const GENERATED_SUFFIX = 15;
// Anything this estimate does not know (it knows what raidsnap puts in its environments).
const UNKNOWN = 256;

type Resolved = string | number | boolean | null | Resolved[] | { [key: string]: Resolved };

/** Refuse, by name, a function whose environment would not fit: the function, its size and its
 * largest variables. Run once the stack is built (variables are added to functions late). */
export function checkEnvironmentsFit(stack: Stack, problem: Problem): void {
  const resources = new Map<string, CfnResource>();
  for (const child of stack.node.findAll()) {
    if (CfnResource.isCfnResource(child)) resources.set(stack.resolve(child.logicalId) as string, child);
  }
  for (const fn of stack.node.findAll().filter((c): c is lambda.Function => c instanceof lambda.Function)) {
    const cfn = fn.node.defaultChild as lambda.CfnFunction;
    const environment = stack.resolve(cfn.environment) as { variables?: Record<string, Resolved> } | undefined;
    const variables = environment?.variables ?? {};
    const estimated = Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, text(v, stack, resources)]));
    const bytes = Buffer.byteLength(JSON.stringify(estimated));
    if (bytes <= ENVIRONMENT_BYTES) continue;
    const largest = Object.entries(estimated)
      .map(([k, v]) => [k, Buffer.byteLength(JSON.stringify({ [k]: v })) - 2] as const)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3)
      .map(([k, n]) => `${k} ${n} bytes`)
      .join(', ');
    throw problem('arrays',
      `their hooks, copies and other settings take the environment variables of Lambda function ${fn.node.path} to about ${bytes} bytes, more than the ${ENVIRONMENT_BYTES} Lambda allows a function; the largest: ${largest}`,
      'configure fewer or shorter hook commands (HOOKS_BY_ARRAY) or fewer copy places per array (COPIES_BY_ARRAY), or split the arrays between two stacks');
  }
}

/** The value as it will be at deploy, with each unresolved part replaced by as many characters
 * as it can take (no character that JSON escapes). */
function text(value: Resolved, stack: Stack, resources: Map<string, CfnResource>): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return String(value);
  if (Array.isArray(value)) return value.map((v) => text(v, stack, resources)).join('');
  const [fn, arg] = Object.entries(value)[0] ?? ['', null];
  if (fn === 'Fn::Join' && Array.isArray(arg) && Array.isArray(arg[1])) {
    return arg[1].map((v) => text(v, stack, resources)).join(String(arg[0]));
  }
  return 'x'.repeat(intrinsicLength(fn, arg, stack, resources));
}

function intrinsicLength(fn: string, arg: Resolved, stack: Stack, resources: Map<string, CfnResource>): number {
  if (fn === 'Ref' && typeof arg === 'string') {
    const pseudo: Record<string, number> = {
      'AWS::Partition': PARTITION, 'AWS::Region': REGION, 'AWS::AccountId': ACCOUNT,
      'AWS::URLSuffix': URL_SUFFIX, 'AWS::StackName': stack.stackName.length,
    };
    if (arg in pseudo) return pseudo[arg];
    const resource = resources.get(arg);
    if (resource instanceof dynamodb.CfnTable || resource instanceof lambda.CfnFunction) return nameLength(resource, arg, stack);
    if (resource instanceof sns.CfnTopic) return arnLength('sns', nameLength(resource, arg, stack));
    if (resource instanceof sfn.CfnStateMachine) return arnLength('states', 'stateMachine:'.length + nameLength(resource, arg, stack));
    return UNKNOWN;
  }
  if (fn === 'Fn::GetAtt' && Array.isArray(arg) && typeof arg[0] === 'string') {
    const resource = resources.get(arg[0]);
    const name = resource ? nameLength(resource, arg[0], stack) : UNKNOWN;
    if (resource instanceof dynamodb.CfnTable) return arnLength('dynamodb', 'table/'.length + name);
    if (resource instanceof lambda.CfnFunction) return arnLength('lambda', 'function:'.length + name);
    if (resource instanceof sfn.CfnStateMachine) return arnLength('states', 'stateMachine:'.length + name);
    if (resource instanceof sns.CfnTopic) return arnLength('sns', name);
  }
  return UNKNOWN;
}

function arnLength(service: string, resource: number): number {
  return 'arn:'.length + PARTITION + 1 + service.length + 1 + REGION + 1 + ACCOUNT + 1 + resource;
}

/** The resource's name: its own (resolved), else what CloudFormation generates. */
function nameLength(resource: CfnResource, logicalId: string, stack: Stack): number {
  const own = resource instanceof dynamodb.CfnTable ? resource.tableName
    : resource instanceof lambda.CfnFunction ? resource.functionName
      : resource instanceof sns.CfnTopic ? resource.topicName
        : resource instanceof sfn.CfnStateMachine ? resource.stateMachineName : undefined;
  if (own !== undefined) return text(stack.resolve(own) as Resolved, stack, new Map()).length;
  return stack.stackName.length + 1 + logicalId.length + GENERATED_SUFFIX;
}
