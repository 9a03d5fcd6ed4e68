import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import { IConstruct } from 'constructs';

const ID = 'RaidsnapKey';

/** The stack's one customer-managed key (rotated yearly): log groups, the set manifests, the
 * restore lock table and the notification topic are encrypted with it. Created on first use, shared after that. */
export function stackKey(scope: IConstruct): kms.Key {
  const stack = Stack.of(scope);
  const existing = stack.node.tryFindChild(ID) as kms.Key | undefined;
  if (existing) return existing;
  const key = new kms.Key(stack, ID, {
    description: 'raidsnap: encrypts its log groups, snapshot set manifests, restore lock table and notifications',
    enableKeyRotation: true,
    rotationPeriod: Duration.days(365),
    removalPolicy: RemovalPolicy.RETAIN,
  });
  // CloudWatch Logs encrypts each raidsnap log group with this key, and only this account's.
  key.addToResourcePolicy(new iam.PolicyStatement({
    principals: [new iam.ServicePrincipal(`logs.${stack.region}.amazonaws.com`)],
    actions: ['kms:Encrypt*', 'kms:Decrypt*', 'kms:ReEncrypt*', 'kms:GenerateDataKey*', 'kms:Describe*'],
    resources: ['*'],
    conditions: {
      ArnLike: { 'kms:EncryptionContext:aws:logs:arn': `arn:${stack.partition}:logs:${stack.region}:${stack.account}:log-group:*` },
    },
  }));
  return key;
}
