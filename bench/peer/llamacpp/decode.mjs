// llama.cpp's single-stream decode speed on a GGUF file, through node-llama-cpp:
// times the prompt's evaluation (until its first token, as folio generate --timings
// does), then N greedy tokens more (one sequence, the given threads).
//   NODE_PATH=DIR/node_modules node decode.mjs MODEL.gguf PROMPT_IDS_JSON N THREADS
// Prints one JSON line: {"prompt_tokens": P, "prompt_seconds": S0, "prompt_tokens_per_s": P / S0,
// "tokens": N, "seconds": S, "tokens_per_s": N / S}.
import {pathToFileURL} from "node:url";

const {getLlama, TokenBias} = await import(pathToFileURL(process.env.NODE_PATH + "/node-llama-cpp/dist/index.js").href);
const [modelPath, promptJson, count, threads] = process.argv.slice(2);
const n = Number(count);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const meta = model.fileInfo.metadata;
const bias = new TokenBias(model.tokenizer);
for (const id of meta.tokenizer.ggml.suppress_tokens ?? []) bias.set(id, "never");
const context = await model.createContext({contextSize: Number(meta[meta.general.architecture].context_length),
                                           threads: Number(threads), sequences: 1});
const sequence = context.getSequence();
const prompt = JSON.parse(promptJson);
let made = 0, start = 0;
const asked = performance.now();
for await (const token of sequence.evaluate(prompt, {temperature: 0, tokenBias: bias})) {
  if (made === 0) start = performance.now();  // the prompt's evaluation is not decode
  if (++made > n) break;
}
const seconds = (performance.now() - start) / 1000, promptSeconds = (start - asked) / 1000;
console.log(JSON.stringify({prompt_tokens: prompt.length, prompt_seconds: promptSeconds,
                            prompt_tokens_per_s: prompt.length / promptSeconds, tokens: n, seconds,
                            tokens_per_s: n / seconds}));
await context.dispose();
await model.dispose();
await llama.dispose();
