// llama.cpp's side of the chat template's proof (tests/test_gguf_chat.cpp), through
// node-llama-cpp: renders each conversation with the GGUF's own tokenizer.chat_template
// (its Jinja engine, add_generation_prompt) and tokenizes the text with the file's
// vocabulary, then continues those tokens greedily up to an end-of-generation token
// (left out of the reply).
//   NODE_PATH=DIR/node_modules node gguf_chat_llamacpp.mjs JOB.json N > OUT.json
// JOB.json: {"model": "a.gguf", "conversations": [[{"role", "content"}, ...], ...]}, each
// ending with a user turn. OUT: {"template", "eot", "runs": [{"rendered": [ids], "reply": [ids]}]}.
import {readFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

const {getLlama, JinjaTemplateChatWrapper, TokenBias} =
    await import(pathToFileURL(process.env.NODE_PATH + "/node-llama-cpp/dist/index.js").href);

const [jobPath, count] = process.argv.slice(2);
const job = JSON.parse(readFileSync(jobPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: job.model});
const meta = model.fileInfo.metadata;
const template = meta.tokenizer.chat_template;
const wrapper = new JinjaTemplateChatWrapper({template});
const bias = new TokenBias(model.tokenizer);
for (const id of meta.tokenizer.ggml.suppress_tokens ?? []) bias.set(id, "never");
const context = await model.createContext({contextSize: 256, threads: 1, sequences: 1});
const sequence = context.getSequence();
const runs = [];
for (const conversation of job.conversations) {
  // node-llama-cpp's chat history: the reply to come is an empty model turn.
  const chatHistory = conversation.map((m) => m.role === "assistant" ? {type: "model", response: [m.content]}
                                                                     : {type: m.role, text: m.content});
  chatHistory.push({type: "model", response: []});
  const rendered = Array.from(wrapper.generateContextState({chatHistory}).contextText.tokenize(model.tokenizer));
  await sequence.clearHistory();
  const reply = [];
  for await (const token of sequence.evaluate(rendered, {temperature: 0, tokenBias: bias})) {
    if (model.isEogToken(token)) break;  // the reply's end, not part of it
    reply.push(token);
    if (reply.length >= Number(count)) break;
  }
  runs.push({rendered, reply});
}
process.stdout.write(JSON.stringify({template, eot: meta.tokenizer.ggml.eot_token_id, runs}));
await context.dispose();
await model.dispose();
await llama.dispose();
