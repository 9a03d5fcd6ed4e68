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
  // CloudWatch Logs may use the key for raidsnap's own log groups only: CloudWatch Logs puts the
  // log group's ARN in the encryption context of every request it makes with the key
  // (kms:EncryptionContext:aws:logs:arn, matched with ArnLike as AWS's own
  // CloudWatchLogsAPIKeyAccess policy does:
  // https://docs.aws.amazon.com/aws-managed-policy/latest/reference/CloudWatchLogsAPIKeyAccess.html;
  // the key policy: https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html),
  // and the condition names raidsnap's two name prefixes (below).
  // The group names are explicit because a condition on the key cannot name the groups' own ARNs:
  // each group names the key, so the key naming them would be a circular reference.
  key.addToResourcePolicy(new iam.PolicyStatement({
    principals: [new iam.ServicePrincipal(`logs.${stack.region}.amazonaws.com`)],
    actions: ['kms:Encrypt*', 'kms:Decrypt*', 'kms:ReEncrypt*', 'kms:GenerateDataKey*', 'kms:Describe*'],
    resources: ['*'],
    conditions: {
      ArnLike: {
        'kms:EncryptionContext:aws:logs:arn': Object.values(LOG_GROUP_PREFIX).map((prefix) =>
          `arn:${stack.partition}:logs:${stack.region}:${stack.account}:log-group:${prefix(stack.stackName)}*`),
      },
    },
  }));
  return key;
}

/** Where raidsnap's log groups live, by kind: functions under one prefix, state machines under
 * /aws/vendedlogs/states/. Step Functions adds a state machine's log group to the account's
 * CloudWatch Logs resource policy when it creates the state machine, and that policy is limited to
 * 5,120 characters; "To avoid reaching the CloudWatch Logs resource policy size limit, prefix
 * your CloudWatch Logs log group names with /aws/vendedlogs/" (Step Functions developer guide,
 * "Avoiding CloudWatch Logs resource policy size restrictions",
 * https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html): otherwise CreateStateMachine
 * can fail in an account whose policy is near its limit. The stack name keeps two stacks apart. */
export const LOG_GROUP_PREFIX = {
  functions: (stackName: string) => `/raidsnap/${stackName}/functions/`,
  states: (stackName: string) => `/aws/vendedlogs/states/raidsnap/${stackName}/`,
};

/** The log group name for a construct of `kind`: the prefix, then the construct's path below
 * the stack (unique in it). */
export function logGroupName(scope: IConstruct, kind: keyof typeof LOG_GROUP_PREFIX, id?: string): string {
  const stack = Stack.of(scope);
  const below = scope.node.scopes.slice(stack.node.scopes.length).map((c) => c.node.id);
  return LOG_GROUP_PREFIX[kind](stack.stackName) + [...below, ...(id ? [id] : [])].join('/');
}
