/**
 * The flow language: load YAML flows, check them, compile each to the provider's speechcall
 * menu and to the xstate machine that follows a call, and prove the two agree.
 *
 * @example
 * import { loadFlows, renderMenu, createFlowMachine, startFlow, stepFlow } from './flows/index.ts';
 */
export * from './checks.ts';
export * from './compile.ts';
export * from './executor.ts';
export * from './graph.ts';
export * from './loader.ts';
export * from './machine.ts';
export * from './machine-config.ts';
export * from './mermaid.ts';
export * from './render.ts';
export * from './schema.ts';
export * from './simulate.ts';
export * from './template.ts';
export * from './test-schema.ts';
export * from './testing.ts';
export * from './token.ts';
export * from './unroll.ts';
export * from './vars.ts';
