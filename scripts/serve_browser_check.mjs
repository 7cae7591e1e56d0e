// Drives folio serve's page in headless Chromium (puppeteer-core): waits for the
// model's description (and its own first line as the prompt), types a prompt, waits
// for streamed text, hovers a token, checks that every heatmap row sums to 1, presses
// "Explore attention", and saves screenshots. With KEY (a server started with an API
// key): the header first says to type the key, and once it is typed in the page's box
// everything above works. Any page error, and any console error after the key is
// typed (or a missing favicon at any time), fails it. Run by scripts/serve-browser-check.sh.
//   node serve_browser_check.mjs BASE_URL OUT_DIR|- PROFILE_DIR [KEY]   (NODE_PATH: puppeteer-core)
import { createRequire } from "node:module";
const require = createRequire(process.env.NODE_PATH + "/");
const puppeteer = require("puppeteer-core");
const [base, out, profile, key] = process.argv.slice(2);
const shots = out !== "-";
const fail = (what) => { console.error("FAILED: " + what); process.exit(1); };

const browser = await puppeteer.launch({
  executablePath: "/usr/bin/chromium", headless: true, userDataDir: profile,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  let keyTyped = !key;
  page.on("pageerror", (e) => fail("page error: " + e.message));
  page.on("console", (m) => {
    // Before the key is typed the description's fetch gets 401, as it should.
    if (m.type() === "error" && keyTyped) fail("console error: " + m.text() + " " + JSON.stringify(m.location()));
  });
  page.on("response", (r) => {
    if (r.url().includes("favicon") && !r.ok()) fail(`${r.url()}: ${r.status()}`);
  });
  await page.goto(base + "/", { waitUntil: "networkidle0" });
  const model = () => page.$eval("#model", (e) => e.textContent);
  if (key) {
    await page.waitForFunction(() => document.querySelector("#model").textContent.includes("API key box"));
    console.log("without the key, the header said:", JSON.stringify(await model()));
    keyTyped = true;
    await page.type("#api-key", key);
  }
  await page.waitForFunction(() => document.querySelector("#model").textContent.includes("layers"));
  console.log("model:", await model());
  const meta = await page.evaluate((k) => fetch("/v1/models", { headers: k ? { Authorization: "Bearer " + k } : {} })
    .then((r) => r.json()), key || "");
  const { n_layer, n_head, prompt } = meta.data[0].meta;
  // The prompt box starts with the model's own first line of training text.
  const shown = await page.$eval("#prompt", (e) => e.value);
  if (shown !== prompt) fail(`the prompt box holds ${JSON.stringify(shown)}, the server's prompt is ${JSON.stringify(prompt)}`);
  console.log("the prompt box started with:", JSON.stringify(shown));

  await page.$eval("#prompt", (e) => { e.value = ""; });
  await page.type("#prompt", "ROMEO:\nWhat light ");
  await page.$eval("#max-tokens", (e) => { e.value = "48"; });
  await page.click("#generate");
  // Text arrives while the stream is still open: the status says "streaming".
  await page.waitForFunction(() => document.querySelector("#generated")?.textContent.length > 0);
  const midway = await page.$eval("#status", (e) => e.textContent);
  console.log("while streaming, the status said:", JSON.stringify(midway));
  await page.waitForFunction(() => document.querySelector("#status").textContent.includes("tokens in"),
                             { timeout: 60000 });
  const generated = await page.$eval("#generated", (e) => e.textContent);
  console.log("streamed:", JSON.stringify(generated), "|", await page.$eval("#status", (e) => e.textContent));
  if (generated.length < 10) fail("too little text streamed");

  // The explorer: hover a token of the strip, and every layer x head row sums to 1.
  await page.waitForSelector("#strip span");
  const n = await page.$$eval("#strip span", (s) => s.length);
  const spans = await page.$$("#strip span");
  const target = Math.min(n - 1, 12);
  await spans[target].hover();
  await page.waitForFunction((t) => document.querySelector("#strip span.query")?.dataset.index === String(t), {}, target);
  const rows = await page.$$eval("#heatmap tr.weights", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td.w")].map((td) => Number(td.dataset.w))));
  if (rows.length !== n_layer * n_head) fail(`${rows.length} rows, expected ${n_layer} x ${n_head}`);
  for (const r of rows) {
    const sum = r.reduce((a, b) => a + b, 0);
    if (r.length !== target + 1 || Math.abs(sum - 1) > 1e-3) fail(`a row of ${r.length} weights sums to ${sum}`);
  }
  console.log(`hovered token ${target} of ${n}: ${rows.length} rows (layers x heads), each of ${target + 1} weights ` +
              `summing to 1 (within 1e-3)`);
  if (shots) await page.screenshot({ path: out + "/serve-page.png" });

  // One head whole: every query's row sums to 1.
  await page.select("#layer", String(n_layer - 1));
  await page.select("#head", "0");
  const matrix = await page.$$eval("#heatmap tr.weights", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td.w")].map((td) => Number(td.dataset.w))));
  matrix.forEach((r, q) => {
    const sum = r.reduce((a, b) => a + b, 0);
    if (r.length !== q + 1 || Math.abs(sum - 1) > 1e-3) fail(`query ${q}: ${r.length} weights summing to ${sum}`);
  });
  console.log(`layer ${n_layer - 1}, head 0: ${matrix.length} query rows, each summing to 1`);
  if (shots) await page.screenshot({ path: out + "/serve-head.png" });

  // "Explore attention" on a new prompt alone: the strip is the prompt's tokens.
  await page.$eval("#prompt", (e) => { e.value = ""; });
  await page.type("#prompt", "To be, or");
  await page.$eval("#output", (e) => { e.textContent = ""; });
  const expected = await page.evaluate((k) => fetch("/tokenize", { method: "POST", body: '{"content": "To be, or"}',
    headers: k ? { Authorization: "Bearer " + k } : {} }).then((r) => r.json()).then((j) => j.tokens.length), key || "");
  await page.click("#explore");
  await page.waitForFunction((t) => document.querySelectorAll("#strip span").length === t ||
                                    document.querySelector("#status").className === "error", { timeout: 20000 }, expected);
  if ((await page.$eval("#status", (e) => e.className)) === "error")
    fail("Explore attention: " + await page.$eval("#status", (e) => e.textContent));
  console.log(`Explore attention: ${await page.$$eval("#strip span", (s) => s.length)} tokens in the strip`);
  if (shots) console.log("ok: wrote " + out + "/serve-page.png and " + out + "/serve-head.png");
  else console.log("ok" + (key ? " (with an API key typed in the page)" : ""));
} finally {
  await browser.close();
}
