import { Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { EXAMPLE_CONFIG, synth } from './helpers';

describe.each([
  ['without a config', undefined],
  ['with the example config', EXAMPLE_CONFIG],
])('cdk-nag AwsSolutions %s', (_label, config) => {
  test('has no unacknowledged finding', () => {
    const { stack } = synth(config);
    const report = new AwsSolutionsChecks().validateScope(stack);
    const open = report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.resourceLogicalId).join(', ')}`);
    expect(open).toEqual([]);
  });

  test('every acknowledgment names one finding and carries a reason', () => {
    const { stack } = synth(config);
    const acks = stack.node.findAll().flatMap((c) => c.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) => Object.entries(m.data as Record<string, string>))
      .map(([key, reason]) => ({ id: key.replace(/^Annotation::/, ''), reason })));
    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) {
      expect(ack.id).toMatch(/^AwsSolutions-[A-Z0-9]+(\[[^\]]+\])?$/);
      expect(ack.reason.length).toBeGreaterThan(30);
    }
    // A bare rule id is only used for rules whose findings carry no detail to narrow by.
    const bare = acks.filter((a) => !a.id.includes('[')).map((a) => a.id);
    // SMG4 (secret rotation) is a finding on the secret itself, with no detail either.
    for (const id of bare) expect(['AwsSolutions-L1', 'AwsSolutions-SQS3', 'AwsSolutions-SMG4']).toContain(id);
  });
});
