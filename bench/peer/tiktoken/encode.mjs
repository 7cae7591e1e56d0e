// One side of bench/peer/tiktoken/encode.sh: GPT-2's encoding of a text file by an npm
// tokenizer, timed RUNS times after one untimed warm-up (which also lets V8 compile
// js-tiktoken's loop and @dqbd/tiktoken instantiate its WASM), the ids written to IDS.
//   NODE_PATH=DIR/node_modules node encode.mjs js-tiktoken|@dqbd/tiktoken TEXT RUNS IDS
// Prints {"tokens": N, "bytes": B, "seconds": [...]} on stdout.
import fs from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(process.env.NODE_PATH + "/");

const [lib, textPath, runsArg, idsPath] = process.argv.slice(2);
const text = fs.readFileSync(textPath, "utf8");
let encode, done = () => {};
if (lib === "js-tiktoken") {
  const enc = require("js-tiktoken").getEncoding("gpt2");  // ranks ship in the package
  encode = (t) => enc.encode(t, [], []);  // <|endoftext|> as plain text, as folio encodes it
} else if (lib === "@dqbd/tiktoken") {
  const enc = require("@dqbd/tiktoken").get_encoding("gpt2");  // ranks ship in the package: no download
  encode = (t) => enc.encode(t, [], []);
  done = () => enc.free();  // WASM memory is not garbage-collected
} else {
  throw new Error(`unknown tokenizer ${lib}`);
}
let ids = encode(text);  // warm-up
const seconds = [];
for (let i = 0; i < Number(runsArg); ++i) {
  const t0 = process.hrtime.bigint();
  ids = encode(text);
  seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
fs.writeFileSync(idsPath, Array.from(ids).join(" ") + "\n");
done();
console.log(JSON.stringify({ tokens: ids.length, bytes: Buffer.byteLength(text, "utf8"), seconds }));
