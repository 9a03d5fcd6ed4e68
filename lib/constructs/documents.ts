import * as path from 'path';
import { existsSync, readFileSync } from 'fs';
import { Stack } from 'aws-cdk-lib';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { Construct } from 'constructs';
import { parse } from 'yaml';
import { REPO_ROOT } from './functions';

export const DOCUMENT_NAMES = ['discover', 'freeze', 'thaw', 'assemble', 'release', 'prewarm'] as const;
export type DocumentName = (typeof DOCUMENT_NAMES)[number];

const SCRIPTS_DIR = path.join(REPO_ROOT, 'ssm', 'scripts');
export const LIBRARY_DIR = path.join(SCRIPTS_DIR, 'lib');

const INCLUDE = /^@include ([a-z0-9_-]+\.sh)$/;
/** How a script or a library pulls in a library: shellcheck's directive naming the file (so that
 * `shellcheck -x` checks it with the library's definitions), then the `source` line that finds it
 * next to the file when the script is run from the repository by hand. */
const DIRECTIVE = /^# shellcheck source=(\S+)$/;
const SOURCE = /^source "\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)\/([a-z0-9_/.-]+)"$/;
/** `source` or `.` as a command anywhere on a line: at its start, after a list or pipeline
 * operator, an opening brace or parenthesis, `!`, a keyword that starts a command (then, do, else, elif)
 * or the builtins that run another command (builtin, command). Only the form SOURCE matches is
 * inlined; any other is refused. (A word in a quoted string may trip this: rephrase the string.) */
const ANY_SOURCE = /(^|[;&|({!]|\b(then|do|else|elif|builtin|command))\s*(source|\.)(\s|$)/;
/** A function definition at the start of a line: `name() {` or `function name [()] {`. */
const FUNCTION_DEF = /^\s*(?:function\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(\s*\))?|([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*\))\s*\{/;
const functionName = (line: string): string | undefined => {
  const m = FUNCTION_DEF.exec(line);
  return m ? (m[1] ?? m[2]) : undefined;
};
/** A variable set at the top level of a library: `name=...`, `export name=...`, `readonly ...`. */
const TOP_ASSIGNMENT = /^(?:export\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?([A-Za-z_][A-Za-z0-9_]*)=/;
/** A library's first line, for shellcheck only; not inlined. */
const LIBRARY_HEADER = '# shellcheck shell=bash';

/** A script pulls in something that cannot be inlined: the document would not be one
 * self-contained script. */
export class ScriptIncludeError extends Error {
  constructor(file: string, line: number, problem: string) {
    super(`${path.relative(REPO_ROOT, file)}:${line}: ${problem}`);
    this.name = 'ScriptIncludeError';
  }
}

/** The lines of a script with the lines of each library it sources (and of the libraries those
 * source) in place of the `source` line, each library once: the first time it is sourced. The
 * agent runs a step's runCommand as one file, so nothing may be left to source. */
export function inlineLibraries(file: string, libraryDir: string = LIBRARY_DIR, included: Set<string> = new Set()): string[] {
  const lines = readFileSync(file, 'utf8').replace(/\n$/, '').split('\n');
  const out: string[] = [];
  lines.forEach((line, i) => {
    if (/^\s*#/.test(line) || !ANY_SOURCE.test(line)) {
      out.push(line);
      return;
    }
    const source = SOURCE.exec(line);
    if (!source) {
      throw new ScriptIncludeError(file, i + 1, `only 'source "$(dirname "\${BASH_SOURCE[0]}")/<library>.sh"' can be inlined, not: ${line}`);
    }
    const directive = DIRECTIVE.exec(i > 0 ? lines[i - 1] : '');
    if (!directive || directive[1] !== source[1]) {
      throw new ScriptIncludeError(file, i + 1, `the line before must be '# shellcheck source=${source[1]}', so that shellcheck reads the library that is inlined`);
    }
    const library = path.resolve(path.dirname(file), source[1]);
    if (path.dirname(library) !== path.resolve(libraryDir)) {
      throw new ScriptIncludeError(file, i + 1, `${source[1]} is not a library in ${path.relative(REPO_ROOT, libraryDir)}`);
    }
    if (!existsSync(library)) {
      throw new ScriptIncludeError(file, i + 1, `${source[1]} does not exist`);
    }
    out.pop(); // the directive
    if (included.has(library)) return;
    included.add(library);
    const body = inlineLibraries(library, libraryDir, included);
    if (body[0] !== LIBRARY_HEADER) {
      throw new ScriptIncludeError(library, 1, `a library starts with '${LIBRARY_HEADER}'`);
    }
    // A blank line between what came before and the library, as between functions.
    const last = out[out.length - 1];
    if (last !== undefined && last !== '' && last !== LIBRARY_HEADER) out.push('');
    out.push(...body.slice(1));
  });
  return out;
}

/** Names a library defines (its functions, and the variables it sets at its top level). */
function definedBy(library: string): { functions: string[]; variables: string[] } {
  const functions: string[] = [];
  const variables: string[] = [];
  let depth = 0;
  for (const line of readFileSync(library, 'utf8').split('\n')) {
    if (/^\s*#/.test(line)) continue;
    const fn = depth === 0 ? functionName(line) : undefined;
    if (fn) functions.push(fn);
    const assigned = depth === 0 && !fn ? TOP_ASSIGNMENT.exec(line) : null;
    if (assigned) variables.push(assigned[1]);
    depth += (line.match(/\{/g) ?? []).length - (line.match(/\}/g) ?? []).length;
    depth = Math.max(depth, 0);
  }
  return { functions, variables };
}

/** Bash runs a library again each time it is sourced; the document carries it once. The two are
 * the same program only if nothing else in the document defines what a library defines: a
 * script or another library that redefined a library's function (or set one of its top-level
 * variables) would see the library's version by hand, after a later `source`, and its own when
 * deployed. Such a document is refused at synth. */
export function checkSingleDefinitions(script: string, lines: readonly string[], libraries: ReadonlySet<string>): void {
  const code = lines.filter((line) => !/^\s*#/.test(line));
  for (const library of libraries) {
    const { functions, variables } = definedBy(library);
    for (const name of new Set(functions)) {
      const count = code.filter((line) => functionName(line) === name).length;
      if (count > 1) {
        throw new ScriptIncludeError(script, 1, `function ${name} of ${path.basename(library)} is defined ${count} times in the document: define each name once`);
      }
    }
    for (const name of new Set(variables)) {
      const own = variables.filter((v) => v === name).length;
      const count = code.filter((line) => TOP_ASSIGNMENT.exec(line)?.[1] === name).length;
      if (count > own) {
        throw new ScriptIncludeError(script, 1, `variable ${name} of ${path.basename(library)} is set elsewhere in the document too: a library's variables are its own`);
      }
    }
  }
}

/** Load `ssm/documents/<name>.yaml` and put the lines of each `@include <script>.sh` step in
 * place, with the libraries the script sources inlined (`inlineLibraries`): the scripts are real
 * files that shellcheck sees, and the document carries one self-contained script. */
export function renderDocument(name: string): Record<string, unknown> {
  const file = path.join(REPO_ROOT, 'ssm', 'documents', `${name}.yaml`);
  const doc = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const steps = (doc.mainSteps ?? []) as Array<{ inputs?: { runCommand?: unknown } }>;
  for (const step of steps) {
    const run = step.inputs?.runCommand;
    if (!Array.isArray(run) || run.length !== 1 || typeof run[0] !== 'string') continue;
    const match = INCLUDE.exec(run[0]);
    if (!match) continue;
    const script = path.join(SCRIPTS_DIR, match[1]);
    const included = new Set<string>();
    const lines = inlineLibraries(script, LIBRARY_DIR, included);
    checkSingleDefinitions(script, lines, included);
    step.inputs!.runCommand = lines;
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
