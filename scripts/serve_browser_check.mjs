// Drives folio serve's page in headless Chromium (puppeteer-core): types a prompt,
// waits for streamed text, hovers a token, checks that every heatmap row sums to 1,
// and saves screenshots. Run by scripts/serve-browser-check.sh.
//   node serve_browser_check.mjs BASE_URL OUT_DIR PROFILE_DIR   (NODE_PATH: puppeteer-core)
import { createRequire } from "node:module";
const require = createRequire(process.env.NODE_PATH + "/");
const puppeteer = require("puppeteer-core");
const [base, out, profile] = process.argv.slice(2);
const fail = (what) => { console.error("FAILED: " + what); process.exit(1); };

const browser = await puppeteer.launch({
  executablePath: "/usr/bin/chromium", headless: true, userDataDir: profile,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  page.on("pageerror", (e) => fail("page error: " + e.message));
  await page.goto(base + "/", { waitUntil: "networkidle0" });
  await page.waitForFunction(() => document.querySelector("#model").textContent.includes("layers"));
  console.log("model:", await page.$eval("#model", (e) => e.textContent));

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
  const meta = await page.evaluate(() => fetch("/v1/models").then((r) => r.json()));
  const { n_layer, n_head } = meta.data[0].meta;
  if (rows.length !== n_layer * n_head) fail(`${rows.length} rows, expected ${n_layer} x ${n_head}`);
  for (const r of rows) {
    const sum = r.reduce((a, b) => a + b, 0);
    if (r.length !== target + 1 || Math.abs(sum - 1) > 1e-3) fail(`a row of ${r.length} weights sums to ${sum}`);
  }
  console.log(`hovered token ${target} of ${n}: ${rows.length} rows (layers x heads), each of ${target + 1} weights ` +
              `summing to 1 (within 1e-3)`);
  await page.screenshot({ path: out + "/serve-page.png" });

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
  await page.screenshot({ path: out + "/serve-head.png" });
  console.log("ok: wrote " + out + "/serve-page.png and " + out + "/serve-head.png");
} finally {
  await browser.close();
}
