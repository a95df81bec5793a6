/** Process entry of `npm start`: see cli/serve.ts. */
import { runServe } from './cli/serve.ts';

await runServe(process.env);
