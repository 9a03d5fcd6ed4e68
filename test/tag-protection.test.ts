import { Match } from 'aws-cdk-lib/assertions';
import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';

describe('tag protection', () => {
  test('no config: no policy', () => {
    synth().template.resourceCountIs('AWS::IAM::ManagedPolicy', 0);
  });

  const { template } = synth(EXAMPLE_CONFIG);
  const policies = Object.values(resourcesOf(template, 'AWS::IAM::ManagedPolicy'));
  const statement = () => policies[0].Properties.PolicyDocument.Statement[0];

  test('one managed policy named for the stack, attached to nothing by the stack', () => {
    expect(policies).toHaveLength(1);
    expect(policies[0].Properties.ManagedPolicyName).toBe('raidsnap-tag-protection');
    for (const key of ['Roles', 'Users', 'Groups']) expect(policies[0].Properties[key]).toBeUndefined();
  });

  test('it denies creating and deleting any raidsnap:* tag, tag-on-create included (authorized as CreateTags)', () => {
    template.hasResourceProperties('AWS::IAM::ManagedPolicy', {
      PolicyDocument: {
        Version: '2012-10-17',
        Statement: [Match.objectLike({
          Effect: 'Deny',
          Action: ['ec2:CreateTags', 'ec2:DeleteTags'],
          Resource: '*',
          Condition: Match.objectLike({ 'ForAnyValue:StringLike': { 'aws:TagKeys': ['raidsnap:*'] } }),
        })],
      },
    });
  });

  test('every role the stack makes, the named administrators and service-linked roles are exempt', () => {
    const exempt = statement().Condition.ArnNotLike['aws:PrincipalArn'] as unknown[];
    const roles = Object.keys(resourcesOf(template, 'AWS::IAM::Role')).sort();
    const named = exempt.filter((e: any) => e['Fn::GetAtt']).map((e: any) => e['Fn::GetAtt'][0]).sort();
    expect(named).toEqual(roles);
    expect(exempt).toContain('arn:aws:iam::123456789012:role/storage-admin');
    expect(exempt).toContainEqual({ 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::*:role/aws-service-role/*']] });
  });
});
