import { Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { TagProtectionConfig } from '../config';
import { acknowledge } from '../nag';

/** The name of the managed policy (per stack): `raidsnap doctor` looks for it. */
export const tagProtectionPolicyName = (stackName: string) => `${stackName}-tag-protection`;

/** The one statement, shared by the managed policy and the SCP that `raidsnap
 * tag-protection-policy` prints: deny ec2:CreateTags and ec2:DeleteTags whenever the request
 * names any raidsnap:* key, to every principal but raidsnap's own roles, the named
 * administrators and AWS service-linked roles.
 * - aws:TagKeys holds the keys in the request; ForAnyValue:StringLike matches if any one is
 *   raidsnap:* (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-tagkeys).
 * - Tag-on-create (CreateVolume, CreateSnapshot(s), RunInstances with TagSpecifications) is
 *   authorized as ec2:CreateTags as well, so one deny covers it: the create fails as a whole
 *   ("Grant permission to tag Amazon EC2 resources during creation",
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/supported-iam-actions-tagging.html).
 * - aws:PrincipalArn is the role's ARN (not the session's) for an assumed role
 *   (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn).
 * - Only raidsnap:* keys are matched: aws:* tags (CloudFormation's, AWS Backup's) and every
 *   other key stay as they were; service-linked roles (aws-service-role/) are left out
 *   explicitly, although SCPs do not apply to them anyway. */
export function tagProtectionStatement(partition: string, exempt: readonly string[]): Record<string, unknown> {
  return {
    Sid: 'OnlyRaidsnapWritesRaidsnapTags',
    Effect: 'Deny',
    Action: ['ec2:CreateTags', 'ec2:DeleteTags'],
    Resource: '*',
    Condition: {
      'ForAnyValue:StringLike': { 'aws:TagKeys': ['raidsnap:*'] },
      'ArnNotLike': { 'aws:PrincipalArn': [...exempt, `arn:${partition}:iam::*:role/aws-service-role/*`] },
    },
  };
}

export interface TagProtectionProps {
  readonly config: TagProtectionConfig;
}

/** A customer managed policy holding the statement, for the operator to attach to the roles,
 * users and groups that may call ec2:CreateTags (a deny in an identity policy binds only the
 * identities it is attached to; an SCP binds the whole account). Made last in the stack: it
 * names every role the stack made. */
export class TagProtection extends Construct {
  readonly policy: iam.ManagedPolicy;

  constructor(scope: Construct, id: string, props: TagProtectionProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const roles = stack.node.findAll().filter((c): c is iam.Role => c instanceof iam.Role).map((r) => r.roleArn);
    const statement = tagProtectionStatement(stack.partition, [...roles, ...props.config.administrators]);
    this.policy = new iam.ManagedPolicy(this, 'Policy', {
      managedPolicyName: tagProtectionPolicyName(stack.stackName),
      description: 'raidsnap: only raidsnap and its administrators write raidsnap:* tags on EC2 resources; attach to whoever may call ec2:CreateTags',
      document: iam.PolicyDocument.fromJson({ Version: '2012-10-17', Statement: [statement] }),
    });
    acknowledge(this.policy, 'AwsSolutions-IAM5[Resource::*]', 'a Deny: it names every EC2 resource on purpose, limited by its condition to requests that name raidsnap:* tag keys');
  }
}
