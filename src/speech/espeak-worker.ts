/**
 * The worker thread of `createEspeakEngine` (src/speech/espeak.ts): eSpeak NG's WebAssembly
 * runs here, off the server's event loop, and goes away with the thread when it is ended
 * idle. It loads only src/speech/espeak-core.ts (nothing else of Switchboard: every module
 * here costs memory for as long as the thread lives); the checks and the cutting of batches
 * happen in the parent. A run's WAV goes back transferred, not copied again.
 */
import { parentPort } from 'node:worker_threads';
import type { EspeakWorkerReply, EspeakWorkerRequest } from './espeak.ts';
import { espeakThreadStartup, espeakVoices, runEspeak } from './espeak-core.ts';

const port = parentPort;
if (!port) throw new Error('espeak-worker.ts runs as a worker thread only');

port.on('message', async (request: EspeakWorkerRequest) => {
  let reply: EspeakWorkerReply;
  const transfer: ArrayBuffer[] = [];
  try {
    if (request.kind === 'voices') {
      reply = { id: request.id, ok: true, voices: await espeakVoices() };
    } else {
      const done = await runEspeak(request.args, request.text);
      if ('failure' in done) reply = { id: request.id, ok: false, failure: done.failure };
      else {
        // the device's buffer is the next run's: the parent gets a copy of its own
        const wav = done.wav.slice();
        transfer.push(wav.buffer);
        reply = { id: request.id, ok: true, wav };
      }
    }
  } catch (e) {
    // the engine could not be loaded (runEspeak and espeakVoices throw only for that)
    const failure = e instanceof Error ? e.message : String(e);
    reply = { id: request.id, ok: false, failure, loading: true };
  }
  const startup = espeakThreadStartup();
  if (startup) reply.startup = startup;
  port.postMessage(reply, transfer);
});
