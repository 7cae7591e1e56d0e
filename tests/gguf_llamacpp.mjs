// llama.cpp's side of the GGUF proof (tests/test_gguf_llamacpp.cpp), through
// node-llama-cpp: loads GGUF files folio exported and, for each prompt, continues folio's
// prompt ids greedily, recording the next-token probabilities at every step; also
// tokenizes each prompt's text with the file's own vocabulary.
//   NODE_PATH=DIR/node_modules node gguf_llamacpp.mjs JOBS.json N > OUT.json
// JOBS.json: [{"model": "a.gguf", "prompts": [{"text": "...", "ids": [...]}]}], one
// process for them all (starting llama.cpp takes seconds). The tokens the file lists in
// tokenizer.ggml.suppress_tokens are banned, as llama.cpp's own samplers do.
import {readFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

// The package lives in the build tree's cache (NODE_PATH), which ES modules do not search.
const {getLlama, TokenBias} = await import(pathToFileURL(process.env.NODE_PATH + "/node-llama-cpp/dist/index.js").href);

const [jobsPath, count] = process.argv.slice(2);
const jobs = JSON.parse(readFileSync(jobsPath, "utf8"));
const n = Number(count);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const results = [];
for (const job of jobs) {
  const model = await llama.loadModel({modelPath: job.model});
  const meta = model.fileInfo.metadata;
  const suppress = meta.tokenizer.ggml.suppress_tokens ?? [];
  const nVocab = meta.tokenizer.ggml.tokens.length;
  const bias = new TokenBias(model.tokenizer);
  for (const id of suppress) bias.set(id, "never");
  const context = await model.createContext({contextSize: 256, threads: 1, sequences: 1});
  const sequence = context.getSequence();
  const runs = [];
  for (const prompt of job.prompts) {
    await sequence.clearHistory();
    const ids = [], probs = [];
    const steps = sequence.evaluateWithMetadata(prompt.ids, {probabilities: true}, {temperature: 0, tokenBias: bias});
    for await (const step of steps) {
      const dense = new Array(nVocab).fill(0);  // (n_vocab): the map holds only the tokens it lists
      for (const [id, p] of step.probabilities) dense[id] = p;
      ids.push(step.token);
      probs.push(dense);
      if (ids.length >= n) break;
    }
    runs.push({tokenized: Array.from(model.tokenize(prompt.text, false)), ids, probs});
  }
  results.push({arch: meta.general.architecture, n_vocab: nVocab, suppress, runs});
  await context.dispose();
  await model.dispose();
}
process.stdout.write(JSON.stringify(results));
await llama.dispose();
