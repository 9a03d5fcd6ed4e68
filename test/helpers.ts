import * as fs from 'fs';
import * as path from 'path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { loadConfig, parseConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';

export const EXAMPLE_CONFIG = path.join(__dirname, '..', 'config', 'example.yaml');

export interface Synth {
  readonly stack: RaidsnapStack;
  readonly template: Template;
}

const cache = new Map<string, Synth>();

/** Synthesize the stack once per config (undefined: no config file at all). */
export function synth(configPath?: string): Synth {
  const key = configPath ?? '';
  const hit = cache.get(key);
  if (hit) return hit;
  // Staging would copy the dependency layer for every App; the template is what is tested.
  const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
  const config = configPath ? loadConfig(configPath) : parseConfig(undefined);
  const stack = new RaidsnapStack(app, 'raidsnap', {
    config,
    env: { account: '123456789012', region: 'eu-west-1' },
  });
  const result = { stack, template: Template.fromStack(stack) };
  cache.set(key, result);
  return result;
}

export type Resource = { Type: string; Properties: Record<string, any> };

export function resourcesOf(template: Template, type: string): Record<string, Resource> {
  return template.findResources(type) as Record<string, Resource>;
}

/** The logical id of the one function whose handler module is `module`. */
export function functionId(template: Template, module: string): string {
  const matches = Object.entries(resourcesOf(template, 'AWS::Lambda::Function'))
    .filter(([, r]) => r.Properties.Handler === `raidsnap.handlers.${module}.handler`);
  if (matches.length !== 1) throw new Error(`expected one function for ${module}, found ${matches.length}`);
  return matches[0][0];
}

/** Every IAM statement attached to the role of the function with this handler module. */
export function statementsOf(template: Template, module: string): Array<Record<string, any>> {
  const fn = resourcesOf(template, 'AWS::Lambda::Function')[functionId(template, module)];
  const roleId = fn.Properties.Role['Fn::GetAtt'][0];
  const policies = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
    .filter((p) => (p.Properties.Roles as Array<{ Ref: string }>).some((r) => r.Ref === roleId));
  return policies.flatMap((p) => p.Properties.PolicyDocument.Statement);
}

export function actionsOf(statement: Record<string, any>): string[] {
  return ([] as string[]).concat(statement.Action);
}

/** Write a shell file of these lines (a scratch script or library for the inliner's tests). */
export function writeLines(file: string, lines: string[]): string {
  fs.writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

/** The two lines by which a script sources `rel` beside itself, as ssm/scripts do. */
export function sourceLine(rel: string): string[] {
  return [`# shellcheck source=${rel}`, `source "$(dirname "\${BASH_SOURCE[0]}")/${rel}"`];
}
