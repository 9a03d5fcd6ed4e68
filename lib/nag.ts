import { CfnElement, IResolvable, Stack, Token, Validations } from 'aws-cdk-lib';
import { IConstruct } from 'constructs';

/** Acknowledge one cdk-nag finding on one resource, with the reason a reviewer reads.
 * Findings are always narrowed to a resource pattern: never a whole rule, never the stack. */
export function acknowledge(scope: IConstruct, finding: string, reason: string): void {
  if (!/^AwsSolutions-[A-Z0-9]+(\[[^\]]+\])?$/.test(finding)) {
    throw new Error(`raidsnap: not a cdk-nag finding id: ${finding}`);
  }
  Validations.of(scope).acknowledge({ id: finding, reason });
}

/** `<LogicalId.Arn>` as cdk-nag prints a GetAtt in a finding id. */
export function arnRef(resource: IConstruct): string {
  const cfn = (resource.node.defaultChild ?? resource) as CfnElement;
  const stack = Stack.of(resource);
  const logicalId = stack.resolve(stack.getLogicalId(cfn) as unknown as IResolvable) as string;
  return `<${logicalId}.Arn>`;
}

/** An ARN of this stack's account and region as cdk-nag prints it in a finding id. */
export function nagArn(scope: IConstruct, service: string, resource: string): string {
  const stack = Stack.of(scope);
  const region = Token.isUnresolved(stack.region) ? '<AWS::Region>' : stack.region;
  const account = Token.isUnresolved(stack.account) ? '<AWS::AccountId>' : stack.account;
  return `arn:<AWS::Partition>:${service}:${region}:${account}:${resource}`;
}

export const REASONS = {
  describe: 'EC2 Describe*, SSM DescribeInstanceInformation/GetCommandInvocation/CancelCommand, Step Functions SendTaskSuccess/SendTaskFailure and X-Ray writes support no resource-level permissions (Service Authorization Reference); CancelCommand reaches only command ids raidsnap got from its own tag-scoped SendCommand, SendTask* only the Task whose token a parent wrote in the lock table under the run\'s own name (operators cannot write that table); every other mutating action is scoped separately',
  instances: 'limited by condition to instances tagged raidsnap:array (the array instances raidsnap serves)',
  snapshots: 'limited by condition to snapshots that carry the raidsnap:array tag (or are being created with it)',
  volumes: 'limited by condition to volumes tagged by raidsnap (raidsnap:restore-execution, raidsnap:replaced-by)',
  snapshotVolumes: 'CreateSnapshots authorizes each volume of the one instance it names, and the volume resource has no key naming that instance; the same call must also pass the instance grant, which requires raidsnap:array on the instance',
  invoke: 'grantInvoke also covers versions and aliases of this one function (ARN:*)',
  runtime: 'Python 3.13 is the runtime the Powertools layer parameter and the test suite pin; moving runtimes is a deliberate change',
};
