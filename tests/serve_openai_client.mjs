// The official openai npm client (v4) against folio serve: a completion, a streamed
// completion, a chat completion and a streamed one, the model list, and a wrong key
// refused.
//   node serve_openai_client.mjs BASE_URL KEY   (NODE_PATH: where openai is installed)
import { createRequire } from "node:module";
const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai");
const [baseURL, key] = process.argv.slice(2);
const fail = (what) => { console.error("FAILED: " + what); process.exit(1); };

const client = new OpenAI({ apiKey: key, baseURL, maxRetries: 0 });
const models = await client.models.list();
const model = models.data[0].id;
console.log("model:", model);

const c = await client.completions.create({ model, prompt: "ROMEO:", max_tokens: 12, temperature: 0.8, seed: 7 });
if (c.object !== "text_completion") fail("object " + c.object);
if (c.usage.completion_tokens !== 12 || c.usage.prompt_tokens !== 6) fail("usage " + JSON.stringify(c.usage));
if (c.choices[0].finish_reason !== "length") fail("finish_reason " + c.choices[0].finish_reason);
console.log("completion:", JSON.stringify(c.choices[0].text));

const stream = await client.completions.create({ model, prompt: "ROMEO:", max_tokens: 12, temperature: 0.8, seed: 7,
                                                 stream: true });
let text = "", chunks = 0, finish = null;
for await (const chunk of stream) {
  text += chunk.choices[0].text;
  ++chunks;
  if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
}
console.log(`streamed: ${JSON.stringify(text)} in ${chunks} chunks, finish ${finish}`);
if (text !== c.choices[0].text) fail("the streamed text differs from the completion with the same seed");
if (chunks < 2 || finish !== "length") fail("chunks " + chunks + ", finish " + finish);

const messages = [{ role: "system", content: "A play." }, { role: "user", content: "Speak, ROMEO." }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 30, temperature: 0.8, seed: 7 });
const reply = chat.choices[0];
if (chat.object !== "chat.completion") fail("chat object " + chat.object);
if (reply.message.role !== "assistant" || typeof reply.message.content !== "string")
  fail("message " + JSON.stringify(reply));
if (!["stop", "length"].includes(reply.finish_reason)) fail("chat finish_reason " + reply.finish_reason);
if (reply.message.content.includes("\n\n"))
  fail("the reply ran past its turn: " + JSON.stringify(reply.message.content));
if (chat.usage.total_tokens !== chat.usage.prompt_tokens + chat.usage.completion_tokens) fail("chat usage");
console.log(`chat: ${JSON.stringify(reply.message.content)}, finish ${reply.finish_reason}`);

const chatStream = await client.chat.completions.create({ model, messages, max_tokens: 30, temperature: 0.8, seed: 7,
                                                          stream: true });
let said = "", role = null, chatChunks = 0, chatFinish = null, chatUsage = null;
for await (const chunk of chatStream) {
  if (chunk.object !== "chat.completion.chunk") fail("chunk object " + chunk.object);
  const delta = chunk.choices[0].delta;
  if (chatChunks++ === 0) role = delta.role;
  said += delta.content ?? "";
  if (chunk.choices[0].finish_reason) chatFinish = chunk.choices[0].finish_reason;
  if (chunk.usage) chatUsage = chunk.usage;
}
console.log(`chat streamed: ${JSON.stringify(said)} in ${chatChunks} chunks, finish ${chatFinish}`);
if (role !== "assistant") fail("the first chunk's role: " + role);
if (said !== reply.message.content) fail("the streamed reply differs from the whole one with the same seed");
if (chatFinish !== reply.finish_reason || chatUsage?.completion_tokens !== chat.usage.completion_tokens)
  fail("chat stream's end: " + chatFinish + " " + JSON.stringify(chatUsage));

try {
  await new OpenAI({ apiKey: key + "x", baseURL, maxRetries: 0 }).completions.create({ model, prompt: "a" });
  fail("a wrong key was accepted");
} catch (e) {
  if (!(e instanceof OpenAI.AuthenticationError) || e.status !== 401) fail("wrong key: " + e);
  console.log("wrong key:", e.status, e.error && e.error.type);
}
console.log("ok");
