import { Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

/** IAM statements shared by the workflows. Mutating EC2 actions carry raidsnap tag
 * conditions, so raidsnap cannot touch what it did not tag. */
export const ARRAY_TAG = 'raidsnap:array';

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

  /** Read and cancel commands (SSM has no resource scoping for reading invocations). */
  readCommands(): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({ actions: ['ssm:GetCommandInvocation'], resources: ['*'] }),
      new iam.PolicyStatement({
        actions: ['ssm:CancelCommand'],
        resources: [this.ec2Arn('instance/*')],
        conditions: { StringLike: { [`ssm:resourceTag/${ARRAY_TAG}`]: '*' } },
      }),
    ];
  }

  /** CreateSnapshots of a tagged instance's volumes, into snapshots that carry the array tag. */
  createSnapshots(): iam.PolicyStatement[] {
    return [
      new iam.PolicyStatement({
        actions: ['ec2:CreateSnapshots'],
        resources: [this.ec2Arn('instance/*')],
        conditions: { StringLike: { [`aws:ResourceTag/${ARRAY_TAG}`]: '*' } },
      }),
      new iam.PolicyStatement({
        actions: ['ec2:CreateSnapshots'],
        resources: [this.ec2Arn('volume/*')],
        conditions: { StringLike: { 'ec2:InstanceId': '*' } },
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

  /** Tag and delete only snapshots that already carry the array tag. */
  manageTaggedSnapshots(...actions: string[]): iam.PolicyStatement {
    return new iam.PolicyStatement({
      actions,
      resources: [this.ec2Arn('snapshot/*')],
      conditions: { StringLike: { [`aws:ResourceTag/${ARRAY_TAG}`]: '*' } },
    });
  }
}
