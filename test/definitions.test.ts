import * as fs from 'fs';
import * as path from 'path';
import { expandDefinition, LAMBDA_CALLBACK, placeholdersOf } from '../lib/constructs/workflow';
import { EXAMPLE_CONFIG, resourcesOf, synth } from './helpers';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const aslValidator = require('asl-validator');

const DIR = path.join(__dirname, '..', 'statemachines');
const FILES = fs.readdirSync(DIR).filter((f) => f.endsWith('.asl.json')).sort();
const LAMBDA_ERRORS = ['Lambda.ServiceException', 'Lambda.AWSLambdaException', 'Lambda.SdkClientException', 'Lambda.TooManyRequestsException'];
// What a states:startExecution.sync Task reports when the child could not be started for a
// passing reason (lib/constructs/workflow.ts names the sources).
const START_EXECUTION_ERRORS = [
  'StepFunctions.ExecutionLimitExceeded', 'StepFunctions.ExecutionLimitExceededException',
  'StepFunctions.AWSStepFunctionsException', 'StepFunctions.SdkClientException',
  'StepFunctions.ThrottlingException',
];
// The errors a Task may retry, by kind: the transient ones its integration can raise (and
// raidsnap's ThrottledError from a function). Anything else (States.ALL, States.TaskFailed,
// States.Timeout, Lambda.Unknown, a function's own errors, StartExecution's
// ExecutionAlreadyExists / InvalidArn / ...) fails the same way again, or would run a step (or a
// nested restore) a second time after it ran; another integration's errors cannot occur.
const TRANSIENT = {
  lambda: new Set([...LAMBDA_ERRORS, 'ThrottledError']),
  sync: new Set(START_EXECUTION_ERRORS),
};

type Retrier = { ErrorEquals: string[]; MaxAttempts?: number };
type State = { Type: string; Retry?: Retrier[]; Catch?: Array<{ ErrorEquals: string[]; Next: string }>; Resource?: string; Parameters?: Record<string, unknown>; ResultPath?: string | null; ResultSelector?: Record<string, unknown>; States?: Record<string, State>; Branches?: Array<{ States: Record<string, State> }>; ItemProcessor?: { States: Record<string, State> } };

function allStates(states: Record<string, State>): Array<[string, State]> {
  return Object.entries(states).flatMap(([name, s]) => [
    [name, s] as [string, State],
    ...(s.Branches ?? []).flatMap((b) => allStates(b.States)),
    ...(s.ItemProcessor ? allStates(s.ItemProcessor.States) : []),
  ]);
}

interface Synthesized {
  /** DefinitionString as deployed, `${...}` placeholders left in. */
  readonly text: string;
  readonly doc: any;
  readonly substitutions: Record<string, any>;
  /** The placeholders that stand for a Lambda function's ARN. */
  readonly lambdaPlaceholders: string[];
}

/** The synthesized state machines (not the files), by the first word of their Comment. */
function synthesized(): Record<string, Synthesized> {
  const { template } = synth(EXAMPLE_CONFIG);
  const functions = new Set(Object.keys(resourcesOf(template, 'AWS::Lambda::Function')));
  const out: Record<string, Synthesized> = {};
  for (const machine of Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))) {
    const text = String(machine.Properties.DefinitionString);
    const substitutions: Record<string, any> = machine.Properties.DefinitionSubstitutions ?? {};
    const lambdaPlaceholders = Object.entries(substitutions)
      .filter(([, v]) => functions.has(v?.['Fn::GetAtt']?.[0]) && v['Fn::GetAtt'][1] === 'Arn')
      .map(([k]) => k);
    const doc = JSON.parse(text);
    out[String(doc.Comment).split(':')[0].replace(/^raidsnap /, '')] = { text, doc, substitutions, lambdaPlaceholders };
  }
  return out;
}

/** A synthesized definition with CloudFormation's substitutions applied as fake ARNs. */
function resolved(machine: Synthesized): any {
  let text = machine.text;
  for (const key of Object.keys(machine.substitutions)) {
    text = text.split('${' + key + '}').join(`arn:aws:lambda:eu-west-1:123456789012:function:${key}`);
  }
  return JSON.parse(text);
}

const MACHINES = synthesized();

describe('state machine definition files', () => {
  test('there is a backup and a restore definition', () => {
    expect(FILES).toEqual(expect.arrayContaining(['backup.asl.json', 'restore.asl.json']));
  });

  test('each file is deployed as one state machine', () => {
    expect(Object.keys(MACHINES).sort()).toEqual(FILES.map((f) => f.replace('.asl.json', '')).sort());
  });

  test.each(FILES)('%s writes no standard Retry: the loader adds it', (file) => {
    const doc = JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8'));
    const own = allStates(doc.States).filter(([, s]) => s.Type === 'Task' && s.Retry !== undefined);
    expect(own.map(([n]) => n)).toEqual([]);
  });
});

describe.each(Object.keys(MACHINES).sort())('the synthesized %s definition', (name) => {
  const machine = MACHINES[name];
  const states = allStates(machine.doc.States);
  const tasks = states.filter(([, s]) => s.Type === 'Task');
  // A function, invoked plainly or with a task token (its Task then waits for the callback).
  const isLambda = (s: State) => machine.lambdaPlaceholders.some((p) => s.Resource === '${' + p + '}'
    || (s.Resource === LAMBDA_CALLBACK && s.Parameters?.FunctionName === '${' + p + '}'));
  // The top-level state whose Catch handles a Task's errors: the Task itself, or the Parallel
  // whose branch holds it (an error that ends a branch fails the Parallel).
  const catcher = (n: string): State => {
    const top = machine.doc.States as Record<string, State>;
    if (top[n]?.Type === 'Task') return top[n];
    const parallel = Object.values(top).find((s) => (s.Branches ?? []).some((b) => n in b.States));
    return parallel!;
  };
  const lambdaTasks = tasks.filter(([, s]) => isLambda(s)).map(([n]) => n);
  const syncTasks = tasks.filter(([, s]) => /^arn:aws:states:::states:startExecution\.sync(:2)?$/.test(String(s.Resource))).map(([n]) => n);
  const state = (n: string) => tasks.find(([t]) => t === n)![1];
  const retried = (n: string) => (state(n).Retry ?? []).filter((r) => r.MaxAttempts !== 0).flatMap((r) => r.ErrorEquals);

  test('every placeholder gets a substitution, and every substitution has a placeholder', () => {
    expect(Object.keys(machine.substitutions).sort()).toEqual(placeholdersOf(machine.text));
  });

  test('is plain ASL: nothing of the file format is left', () => {
    expect(machine.doc.DefaultCatch).toBeUndefined();
  });

  test('every Task calls a function or starts a nested workflow', () => {
    expect([...lambdaTasks, ...syncTasks].sort()).toEqual(tasks.map(([n]) => n).sort());
  });

  test.each(lambdaTasks)('Lambda task %s retries Lambda service errors and throttling', (n) => {
    expect(retried(n)).toEqual(expect.arrayContaining([...LAMBDA_ERRORS, 'ThrottledError']));
  });

  if (syncTasks.length) {
    test.each(syncTasks)('nested-workflow task %s retries Step Functions\' transient and limit errors', (n) => {
      expect(retried(n)).toEqual(expect.arrayContaining(START_EXECUTION_ERRORS));
    });
  }

  test.each(tasks.map(([n]) => n))('task %s retries only transient errors of its own integration', (n) => {
    const allowed = lambdaTasks.includes(n) ? TRANSIENT.lambda : TRANSIENT.sync;
    expect(retried(n).filter((e) => !allowed.has(e))).toEqual([]);
  });

  test.each(tasks.map(([n]) => n))('task %s catches every error into a state of its workflow', (n) => {
    const all = (catcher(n).Catch ?? []).filter((c) => c.ErrorEquals.includes('States.ALL'));
    expect(all).toHaveLength(1);
    expect(machine.doc.States[all[0].Next]).toBeDefined();
    // A Task in a branch catches nothing itself: its error must reach the Parallel's Catch.
    if (catcher(n) !== state(n)) expect(state(n).Catch).toBeUndefined();
  });

  test.each(tasks.map(([n]) => n))('task %s names what it reads and writes its result to a key of its own', (n) => {
    const s = state(n);
    // Parameters (or, for the nested workflow, its StartExecution fields) name the keys read;
    // "$" would let a step replace what earlier steps wrote.
    expect(s.Parameters).toBeDefined();
    if (n === machine.doc.StartAt && s.ResultPath === '$') {
      // The first state may replace the input as sent (no step wrote anything yet) with the
      // run's object, whose keys its ResultSelector names (the backup's Prepare).
      expect(Object.keys(s.ResultSelector ?? {}).length).toBeGreaterThan(0);
      return;
    }
    expect(s.ResultPath).toMatch(/^\$\.[A-Za-z][A-Za-z0-9]*$/);
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

  test('no Succeed state has an InputPath or OutputPath (CloudFormation\'s schema for the definition refuses them there, cfn-lint E3601): a Pass state ends the run instead', () => {
    const refused = states.filter(([, s]) => s.Type === 'Succeed')
      .filter(([, s]) => 'OutputPath' in s || 'InputPath' in s).map(([n]) => n);
    expect(refused).toEqual([]);
  });

  test('asl-validator accepts it', () => {
    const { isValid, errorsText } = aslValidator(resolved(machine), { checkArn: true, checkPaths: true });
    if (!isValid) throw new Error(errorsText('\n'));
    expect(isValid).toBe(true);
  });
});

describe('the definition loader', () => {
  const file = (states: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ StartAt: 'A', ...extra, States: states });
  const task = (resource: string, more: Record<string, unknown> = {}) => ({ Type: 'Task', Resource: resource, ...more, Next: 'Done' });
  const done = { Done: { Type: 'Succeed' }, Oops: { Type: 'Fail', Error: 'E', Cause: 'C' } };

  test('a Task without Retry/Catch gets the standard ones, in ASL key order, and DefaultCatch goes', () => {
    const doc: any = expandDefinition('t.asl.json', file({ A: task('${FnArn}'), ...done }, { DefaultCatch: { ResultPath: '$.error', Next: 'Oops' } }), ['FnArn']);
    expect(doc.DefaultCatch).toBeUndefined();
    expect(Object.keys(doc.States.A)).toEqual(['Type', 'Resource', 'Retry', 'Catch', 'Next']);
    expect(doc.States.A.Retry.flatMap((r: Retrier) => r.ErrorEquals)).toEqual([...LAMBDA_ERRORS, 'ThrottledError']);
    expect(doc.States.A.Catch).toEqual([{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'Oops' }]);
  });

  test('a Task\'s own Retry and Catch are left as written', () => {
    const own = { Retry: [], Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.other', Next: 'Done' }] };
    const doc: any = expandDefinition('t.asl.json', file({ A: task('${FnArn}', own), ...done }, { DefaultCatch: { ResultPath: '$.error', Next: 'Oops' } }), ['FnArn']);
    expect(doc.States.A).toMatchObject(own);
  });

  test('a Task of another kind without its own Retry is refused, by name', () => {
    expect(() => expandDefinition('t.asl.json', file({ A: task('arn:aws:states:::sns:publish'), ...done }, { DefaultCatch: { ResultPath: '$.error', Next: 'Oops' } }), []))
      .toThrow(/t\.asl\.json: Task A: no standard retry for arn:aws:states:::sns:publish/);
  });

  test('a Task without Catch in a file without DefaultCatch is refused', () => {
    expect(() => expandDefinition('t.asl.json', file({ A: task('${FnArn}'), ...done }), ['FnArn']))
      .toThrow(/t\.asl\.json: Task A has no Catch and the file no DefaultCatch/);
  });

  test('a Parallel\'s branch Tasks get the standard Retry and no Catch; the Parallel gets DefaultCatch and no Retry', () => {
    const callback = { Type: 'Task', Resource: LAMBDA_CALLBACK, Parameters: { FunctionName: '${FnArn}' }, End: true };
    const parallel = { Type: 'Parallel', Branches: [
      { StartAt: 'B', States: { B: { Type: 'Task', Resource: '${FnArn}', End: true } } },
      { StartAt: 'C', States: { C: callback } },
    ], Next: 'Done' };
    const doc: any = expandDefinition('t.asl.json', file({ A: parallel, ...done }, { DefaultCatch: { ResultPath: '$.error', Next: 'Oops' } }), ['FnArn']);
    for (const [branch, name] of [[0, 'B'], [1, 'C']] as const) {
      const t = doc.States.A.Branches[branch].States[name];
      expect(t.Retry.flatMap((r: Retrier) => r.ErrorEquals)).toEqual([...LAMBDA_ERRORS, 'ThrottledError']);
      expect(t.Catch).toBeUndefined();
    }
    expect(doc.States.A.Catch).toEqual([{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'Oops' }]);
    expect(doc.States.A.Retry).toBeUndefined();
    expect(Object.keys(doc.States.A)).toEqual(['Type', 'Branches', 'Catch', 'Next']);
  });

  test('a Map is refused: its Tasks would deploy without the standard Retry and Catch', () => {
    const map = { Type: 'Map', ItemProcessor: { StartAt: 'B', States: { B: { Type: 'Task', Resource: '${FnArn}', End: true } } }, Next: 'Done' };
    expect(() => expandDefinition('t.asl.json', file({ A: map, ...done }, { DefaultCatch: { ResultPath: '$.error', Next: 'Oops' } }), ['FnArn']))
      .toThrow(/t\.asl\.json: A: the loader completes Tasks of the top level and of Parallel branches only/);
  });

  test.each([[undefined], ['$']])('a DefaultCatch whose error would replace the whole state (ResultPath %p) is refused', (resultPath) => {
    const catchTo = { Next: 'Oops', ...(resultPath === undefined ? {} : { ResultPath: resultPath }) };
    expect(() => expandDefinition('t.asl.json', file({ A: task('${FnArn}'), ...done }, { DefaultCatch: catchTo }), ['FnArn']))
      .toThrow(/DefaultCatch\.ResultPath must name a field for the error/);
  });

  test('a DefaultCatch to a state that does not exist is refused', () => {
    expect(() => expandDefinition('t.asl.json', file({ A: task('${FnArn}'), ...done }, { DefaultCatch: { ResultPath: '$.error', Next: 'Nowhere' } }), ['FnArn']))
      .toThrow(/DefaultCatch\.Next names no state/);
  });
});
