// llama.cpp's side of tests/test_hf_gpt2_ggufpy.sh, through node-llama-cpp: loads the
// GGUF file gguf-py wrote from folio's HF export and continues each prompt's ids (folio's
// tokenization) greedily, recording llama.cpp's text and next-token probabilities.
//   NODE_PATH=DIR/node_modules node hf_gpt2_ggufpy.mjs MODEL.gguf PROMPTS.json N OUT_DIR
// PROMPTS.json: [{text, ids}, ...]. Writes OUT_DIR/llama.json ([{ids, text, tokenized}])
// and OUT_DIR/probs.f32: (prompts, N, n_vocab) float32, which as JSON would be ~100 MB.
import {readFileSync, writeFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

// The package lives in the build tree's cache (NODE_PATH), which ES modules do not search.
const {getLlama} = await import(pathToFileURL(process.env.NODE_PATH + "/node-llama-cpp/dist/index.js").href);

const [modelPath, promptsPath, count, out] = process.argv.slice(2);
const prompts = JSON.parse(readFileSync(promptsPath, "utf8"));
const n = Number(count);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
const context = await model.createContext({contextSize: 128, threads: 1, sequences: 1});
const sequence = context.getSequence();
const probs = new Float32Array(prompts.length * n * nVocab);
const runs = [];
for (const [p, prompt] of prompts.entries()) {
  await sequence.clearHistory();
  const ids = [];
  const steps = sequence.evaluateWithMetadata(prompt.ids, {probabilities: true}, {temperature: 0});
  for await (const step of steps) {
    const row = (p * n + ids.length) * nVocab;
    for (const [id, q] of step.probabilities) probs[row + id] = q;  // the map lists only some tokens
    ids.push(step.token);
    if (ids.length >= n) break;
  }
  // llama.cpp's own detokenization, and its tokenization of the prompt's text (gpt-2's
  // pre-tokenizer with the file's merges), to set beside folio's ids.
  runs.push({ids, text: model.detokenize(ids), tokenized: Array.from(model.tokenize(prompt.text, false))});
}
writeFileSync(out + "/llama.json", JSON.stringify({arch: model.fileInfo.metadata.general.architecture, n_vocab: nVocab, runs}));
writeFileSync(out + "/probs.f32", Buffer.from(probs.buffer));
await context.dispose();
await model.dispose();
await llama.dispose();
