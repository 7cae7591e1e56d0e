// The official openai npm client (v4) against folio serve on a chat model: a system and
// a user message through client.chat.completions.create, whole and streamed (greedy).
// Both replies must be EXPECTED (folio chat --greedy's reply to the same messages, its
// newlines written \n), end at the model's end of turn (finish_reason "stop"), and hold
// no template marker; the streamed chunks must add up to the whole reply.
//   node serve_openai_chat_client.mjs BASE_URL SYSTEM USER EXPECTED   (NODE_PATH: where openai is)
import { createRequire } from "node:module";
const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai");
const [baseURL, system, user, expected] = process.argv.slice(2);
const fail = (what) => { console.error("FAILED: chat model: " + what); process.exit(1); };
const oneLine = (text) => text.replaceAll("\n", "\\n");  // as folio chat writes a reply
const markers = (text) => ["<|im_end|>", "<|im_start|>"].filter((m) => text.includes(m));

const client = new OpenAI({ apiKey: "unused", baseURL, maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
const messages = [{ role: "system", content: system }, { role: "user", content: user }];
const request = { model, messages, max_tokens: 40, temperature: 0 };

const whole = await client.chat.completions.create(request);
const choice = whole.choices[0];
const reply = choice.message.content;
console.log(`chat model: ${JSON.stringify(reply)}, finish ${choice.finish_reason}; ` +
            `folio chat: ${JSON.stringify(expected)}`);
if (oneLine(reply) !== expected)
  fail(`the reply ${JSON.stringify(reply)} is not folio chat's ${JSON.stringify(expected)}`);
if (markers(reply).length) fail("the reply shows " + markers(reply).join(" and "));
if (choice.finish_reason !== "stop")
  fail("finish_reason " + choice.finish_reason + ": the reply did not end at its turn's end");
if (whole.usage.completion_tokens >= request.max_tokens) fail("usage " + JSON.stringify(whole.usage));

const stream = await client.chat.completions.create({ ...request, stream: true });
let said = "", chunks = 0, finish = null;
for await (const chunk of stream) {
  said += chunk.choices[0]?.delta?.content ?? "";
  ++chunks;
  if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
}
console.log(`chat model streamed: ${JSON.stringify(said)} in ${chunks} chunks, finish ${finish}`);
if (said !== reply)
  fail(`the streamed chunks make ${JSON.stringify(said)}, the whole reply is ${JSON.stringify(reply)}`);
if (markers(said).length) fail("the stream shows " + markers(said).join(" and "));
if (finish !== "stop") fail("the stream's finish_reason " + finish);
console.log("ok");
