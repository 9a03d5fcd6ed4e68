import * as fs from 'fs';
import * as path from 'path';
import { placeholdersOf } from '../lib/constructs/workflow';
import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const aslValidator = require('asl-validator');

const DIR = path.join(__dirname, '..', 'statemachines');
const FILES = fs.readdirSync(DIR).filter((f) => f.endsWith('.asl.json')).sort();
const LAMBDA_ERRORS = ['Lambda.ServiceException', 'Lambda.AWSLambdaException', 'Lambda.SdkClientException', 'Lambda.TooManyRequestsException'];

type State = { Type: string; Retry?: Array<{ ErrorEquals: string[] }>; Catch?: Array<{ ErrorEquals: string[]; Next: string }>; Resource?: string; States?: Record<string, State>; Branches?: Array<{ States: Record<string, State> }>; ItemProcessor?: { States: Record<string, State> } };

function allStates(states: Record<string, State>): Array<[string, State]> {
  return Object.entries(states).flatMap(([name, s]) => [
    [name, s] as [string, State],
    ...(s.Branches ?? []).flatMap((b) => allStates(b.States)),
    ...(s.ItemProcessor ? allStates(s.ItemProcessor.States) : []),
  ]);
}

/** The synthesized definitions, with CloudFormation's substitutions applied as fake ARNs. */
function synthesizedDefinitions(): Record<string, any> {
  const { template } = synth(EXAMPLE_CONFIG);
  const out: Record<string, any> = {};
  for (const machine of Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))) {
    let text = String(machine.Properties.DefinitionString);
    for (const key of Object.keys(machine.Properties.DefinitionSubstitutions ?? {})) {
      text = text.split('${' + key + '}').join(`arn:aws:lambda:eu-west-1:123456789012:function:${key}`);
    }
    const doc = JSON.parse(text);
    out[String(doc.Comment).split(':')[0]] = doc;
  }
  return out;
}

describe('state machine definition files', () => {
  test('there is a backup and a restore definition', () => {
    expect(FILES).toEqual(expect.arrayContaining(['backup.asl.json']));
  });

  describe.each(FILES)('%s', (file) => {
    const text = fs.readFileSync(path.join(DIR, file), 'utf8');
    const doc = JSON.parse(text);
    const states = allStates(doc.States);
    const tasks = states.filter(([, s]) => s.Type === 'Task');

    test('every placeholder gets a substitution, and every substitution has a placeholder', () => {
      const { template } = synth();
      const machine = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))
        .find((m) => String(m.Properties.DefinitionString) === text);
      expect(machine).toBeDefined();
      expect(Object.keys(machine!.Properties.DefinitionSubstitutions).sort()).toEqual(placeholdersOf(text));
    });

    test.each(tasks.map(([n]) => n))('task %s retries Lambda service errors and throttling', (name) => {
      const state = tasks.find(([n]) => n === name)![1];
      const retried = (state.Retry ?? []).flatMap((r) => r.ErrorEquals);
      expect(retried).toEqual(expect.arrayContaining([...LAMBDA_ERRORS, 'ThrottledError']));
    });

    test.each(tasks.map(([n]) => n))('task %s catches every error', (name) => {
      const state = tasks.find(([n]) => n === name)![1];
      expect((state.Catch ?? []).some((c) => c.ErrorEquals.includes('States.ALL'))).toBe(true);
    });

    test('every run that fails ends in a Fail state that names the error', () => {
      const fails = states.filter(([, s]) => s.Type === 'Fail');
      expect(fails.length).toBeGreaterThan(0);
      for (const [, s] of fails) {
        const f = s as unknown as { Error?: string; ErrorPath?: string; Cause?: string; CausePath?: string };
        expect(f.Error ?? f.ErrorPath).toBeDefined();
        expect(f.Cause ?? f.CausePath).toBeDefined();
      }
    });
  });

  test.each(Object.entries(synthesizedDefinitions()))('asl-validator accepts the synthesized %s definition', (_name, doc) => {
    const { isValid, errorsText } = aslValidator(doc, { checkArn: true, checkPaths: true });
    if (!isValid) throw new Error(errorsText('\n'));
    expect(isValid).toBe(true);
  });
});
