// GPT-2's tokenizer as js-tiktoken ships it (its ranks and its encoder, written by
// no one here), turned into the files folio reads, and the ids it gives for texts.
//   NODE_PATH=DIR/node_modules node bytebpe_reference.mjs OUT_DIR
// Writes OUT_DIR/gpt2.tiktoken (base64 bytes and rank a line), OUT_DIR/hf/vocab.json
// and merges.txt (HF's layout: bytes as GPT-2's byte characters, merges in rank
// order, each found by re-running BPE on the token with the lower ranks only), and
// for every text i, OUT_DIR/texts/i.txt with js-tiktoken's ids in OUT_DIR/texts/i.ids.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
const require = createRequire(process.env.NODE_PATH + "/");
const { getEncoding } = require("js-tiktoken");

const out = process.argv[2];
const enc = getEncoding("gpt2");
const tokens = [];  // bytes by rank
for (const [rank, bytes] of enc.textMap) tokens[rank] = Buffer.from(bytes);
fs.mkdirSync(path.join(out, "hf"), { recursive: true });
fs.mkdirSync(path.join(out, "texts"), { recursive: true });
fs.writeFileSync(path.join(out, "gpt2.tiktoken"),
                 tokens.map((b, r) => `${b.toString("base64")} ${r}\n`).join(""));

// GPT-2's byte <-> character table.
const byteChar = [];
let next = 256;
for (let b = 0; b < 256; ++b) {
  const printable = (b >= 33 && b <= 126) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  byteChar[b] = String.fromCodePoint(printable ? b : next++);
}
const hfText = (buf) => Array.from(buf, (b) => byteChar[b]).join("");

const rankOf = new Map(tokens.map((b, r) => [b.toString("latin1"), r]));
// The two parts BPE with ranks below `limit` leaves of `bytes`.
function lastMerge(bytes, limit) {
  let parts = Array.from(bytes, (b) => Buffer.from([b]));
  while (parts.length > 2) {
    let best = Infinity, at = -1;
    for (let i = 0; i + 1 < parts.length; ++i) {
      const r = rankOf.get(Buffer.concat([parts[i], parts[i + 1]]).toString("latin1"));
      if (r !== undefined && r < limit && r < best) best = r, at = i;
    }
    if (at < 0) throw new Error(`rank ${limit}: no merge left with ${parts.length} parts`);
    parts.splice(at, 2, Buffer.concat([parts[at], parts[at + 1]]));
  }
  return parts;
}
const vocab = {};
tokens.forEach((b, r) => { vocab[hfText(b)] = r; });
vocab["<|endoftext|>"] = tokens.length;
fs.writeFileSync(path.join(out, "hf", "vocab.json"), JSON.stringify(vocab));
const merges = ["#version: 0.2"];
tokens.forEach((b, r) => {
  if (b.length < 2) return;
  const [x, y] = lastMerge(b, r);
  merges.push(`${hfText(x)} ${hfText(y)}`);
});
fs.writeFileSync(path.join(out, "hf", "merges.txt"), merges.join("\n") + "\n");

const here = path.dirname(new URL(import.meta.url).pathname);
const corpus = fs.readFileSync(path.join(here, "..", "data", "tinyshakespeare.txt"), "utf8");
const texts = [
  "The quick brown fox jumps over the lazy dog. It's a truth universally acknowledged.",
  corpus.slice(0, 20000),
  fs.readFileSync(path.join(here, "..", "data", "bytebpe_tokenizer.cpp"), "utf8").slice(0, 6000),
  "def f(x):\n    return [i ** 2 for i in range(x)]  # squares\n\n\nclass A:\n\tpass\n",
  "spaces      runs   \n\n\n   and trailing spaces   ",
  "tabs\t\tand\r\nCRLF\r\nlines\r\n",
  "it's we're they've I'm you'll he'd IT'S WE'RE THEY'VE I'M YOU'LL HE'D 's",
  "digits 0 12 345 6789 3.14159 1,000,000 ٣٤٥ ⅷ",
  "CJK 日本語の文章と中文句子 한국어",
  "emoji 👩‍👩‍👧‍👦 👍🏽 🏳️‍🌈 ❤️",
  "combining e\u0301 a\u0300\u0323 Z\u0351\u0352 and NFC é",
  "<|endoftext|> is text here, not a token: a<|endoftext|>b",
  "\u00a0no-break\u2003em space\u3000ideographic\u200bzero width\u2028line sep",
  " leading space, and unicode \u{1F600}\u{10FFFF} at the edges ",
];
texts.forEach((t, i) => {
  fs.writeFileSync(path.join(out, "texts", `${i}.txt`), t);
  fs.writeFileSync(path.join(out, "texts", `${i}.ids`), enc.encode(t, [], []).join(" ") + "\n");
});
console.log(`wrote ${tokens.length} ranks, ${merges.length - 1} merges and ${texts.length} texts to ${out}`);
