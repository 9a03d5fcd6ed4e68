import * as path from 'path';
import { readFileSync } from 'fs';
import { Stack } from 'aws-cdk-lib';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { Construct } from 'constructs';
import { parse } from 'yaml';
import { REPO_ROOT } from './functions';

export const DOCUMENT_NAMES = ['discover', 'freeze', 'thaw', 'assemble', 'release', 'prewarm'] as const;
export type DocumentName = (typeof DOCUMENT_NAMES)[number];

const INCLUDE = /^@include ([a-z0-9_-]+\.sh)$/;

/** Load `ssm/documents/<name>.yaml` and put the lines of each `@include <script>.sh` step
 * in place, so the script is a real file that shellcheck and the VM tests see, and the
 * document carries it inline. */
export function renderDocument(name: string): Record<string, unknown> {
  const file = path.join(REPO_ROOT, 'ssm', 'documents', `${name}.yaml`);
  const doc = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const steps = (doc.mainSteps ?? []) as Array<{ inputs?: { runCommand?: unknown } }>;
  for (const step of steps) {
    const run = step.inputs?.runCommand;
    if (!Array.isArray(run) || run.length !== 1 || typeof run[0] !== 'string') continue;
    const match = INCLUDE.exec(run[0]);
    if (!match) continue;
    const script = readFileSync(path.join(REPO_ROOT, 'ssm', 'scripts', match[1]), 'utf8');
    step.inputs!.runCommand = script.replace(/\n$/, '').split('\n');
  }
  return doc;
}

/** The stack's SSM Command documents, named `<stack>-<name>`. */
export class Documents extends Construct {
  readonly names: Record<DocumentName, string>;
  readonly documents: Record<DocumentName, ssm.CfnDocument>;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const stackName = Stack.of(this).stackName;
    const names = {} as Record<DocumentName, string>;
    const documents = {} as Record<DocumentName, ssm.CfnDocument>;
    for (const name of DOCUMENT_NAMES) {
      names[name] = `${stackName}-${name}`;
      documents[name] = new ssm.CfnDocument(this, name, {
        name: names[name],
        documentType: 'Command',
        documentFormat: 'JSON',
        updateMethod: 'NewVersion',
        content: renderDocument(name),
      });
    }
    this.names = names;
    this.documents = documents;
  }

  /** ARNs for ssm:SendCommand on these documents. */
  arns(...which: DocumentName[]): string[] {
    const stack = Stack.of(this);
    return which.map((name) => stack.formatArn({ service: 'ssm', resource: 'document', resourceName: this.names[name] }));
  }
}
