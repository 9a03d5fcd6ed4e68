import { App } from 'aws-cdk-lib';
import { ConfigError, parseConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';

// Lambda: "Total size of environment variables set | 4 KB" (Lambda quotas). The stack refuses,
// at synth and by name, a configuration that takes a function's environment past it.
function synth(raw: unknown): RaidsnapStack {
  const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
  return new RaidsnapStack(app, 'raidsnap', { config: parseConfig(raw), env: { account: '123456789012', region: 'eu-west-1' } });
}

const arg = 'x'.repeat(99);
const commands = Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((n) => [`cmd-${n}`, `/usr/local/sbin/db-hook ${arg} ${arg}`]));
const copies = ['us-west-2', 'eu-central-1', 'ap-southeast-2'].map((region) => ({
  region,
  account: '222233334444',
  roleArn: 'arn:aws:iam::222233334444:role/raidsnap-copy-requests',
  kmsKeyArn: `arn:aws:kms:${region}:222233334444:key/1234abcd-12ab-34cd-56ef-1234567890ab`,
  retention: 30,
}));

describe('every function\'s environment fits in Lambda\'s 4 KB', () => {
  test('hooks and copies that together take a function past it are refused, naming the function and what takes the space', () => {
    const raw = { arrays: { db1: { hooks: { commands }, copies }, logs: { copies } } };
    let thrown: unknown;
    try {
      synth(raw);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    const message = (thrown as ConfigError).message;
    expect(message).toMatch(/Lambda function raidsnap\/\w+\/\w+ to about \d{4} bytes, more than the 4096/);
    expect(message).toMatch(/HOOKS_BY_ARRAY \d+ bytes/);
    expect(message).toMatch(/COPIES_BY_ARRAY \d+ bytes/);
  });

  test('the same hooks alone, or the copies alone, fit', () => {
    expect(() => synth({ arrays: { db1: { hooks: { commands } }, logs: {} } })).not.toThrow();
    expect(() => synth({ arrays: { db1: { copies }, logs: { copies } } })).not.toThrow();
  });
});
