// End-to-end check of the extension in a real VS Code: code-server (from e2e/setup.sh) with the built
// helion-ls.vsix installed, driven by playwright-core through Debian's chromium. It opens a copy of the repo's
// examples/attention.py and checks what a user sees, step by step, saving a screenshot of each step in
// e2e/screenshots/ (step 07b's is also the README's picture, docs/images/editor.png); steps 07f* hover inside
// kernel bodies and read the message after a tuning (e2e/hovers.mjs);
// one step opens a Jupyter notebook (e2e/notebook.mjs); the last step starts a second code-server with
// workspace trust on (Restricted Mode).
// Exits non-zero when any step does not show what it should.
//
// Env: HELION_PYTHON (default python3) runs the server; CODE_SERVER_PORT (default: a free port);
// E2E_KEEP=1 keeps the temporary user-data/workspace folders; E2E_ONLY=01,06 runs only the steps whose names
// start with one of those prefixes (for working on one step).
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { callsSteps, prepareCalls } from "./calls.mjs";
import { hoverSteps, prepareHovers } from "./hovers.mjs";
import { lensesOver } from "./lenses.mjs";
import { notebookSteps, prepareNotebook } from "./notebook.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const CLIENT = resolve(HERE, "..");
const REPO = resolve(CLIENT, "..");
const ENTRY = join(HERE, ".code-server/node_modules/code-server/out/node/entry.js");
const VSIX = join(CLIENT, "helion-ls.vsix");
const EXAMPLE = join(REPO, "examples/attention.py");
const SHOTS = join(HERE, "screenshots");
// The README's picture of the editor (hover, lenses, a diagnostic): step 07b's screenshot, kept current by every run.
const EDITOR_SHOT = join(REPO, "docs/images/editor.png");
const PYTHON = process.env.HELION_PYTHON || "python3";
const RUN_BUDGET = 420_000; // the whole run stays under 7 minutes
const RUN_DEADLINE = Date.now() + RUN_BUDGET;
const TUNE_MAX_EVALS = 30;
// Records a model trial for shape set 0 of the kernel in argv[1], in the store argv[2]: 8k's `unroll` config.
const STORE_BEST = `
import sys, compiler
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore
kernel = compiler.load(open(sys.argv[1]).read()).kernels["attention"]
key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[0]), "v7x", "model")
with TuningStore(sys.argv[2]) as store:
    store.record_trial(key, {"block_sizes": [1, 256, 512], "pallas_loop_type": "unroll"}, 1e-6, "ok", {"tflops": 1.0})
`;
const ONLY = process.env.E2E_ONLY ? process.env.E2E_ONLY.split(",") : null;

const log = (...args) => console.log(`[e2e ${((Date.now() - (RUN_DEADLINE - RUN_BUDGET)) / 1000).toFixed(1)}s]`, ...args);

function need(condition, message) {
  if (!condition) throw new Error(message);
}

/** The time left for a wait: `ms`, but never past the run's deadline. */
function budget(ms) {
  const left = RUN_DEADLINE - Date.now();
  need(left > 1000, "the whole run exceeded its 7 minute budget");
  return Math.min(ms, left);
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

async function waitForHealth(url, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`code-server did not answer ${url} within ${ms} ms`);
}

/** Every log file under `dir` (code-server's and the extension host's), newest last. */
function logFiles(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith(".log")) out.push(p);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Set-up: a temporary user-data dir with settings, the extension installed, a workspace with the example.

need(existsSync(ENTRY), `code-server is not installed: run bash ${join(HERE, "setup.sh")}`);
need(existsSync(VSIX), `no ${VSIX}: run npm run package`);
need(existsSync(EXAMPLE), `no ${EXAMPLE}`);
need(existsSync("/usr/bin/chromium"), "no /usr/bin/chromium: run e2e/setup.sh");

mkdirSync(SHOTS, { recursive: true });
for (const name of readdirSync(SHOTS)) if (name.endsWith(".png")) rmSync(join(SHOTS, name));

const tmp = mkdtempSync(join(tmpdir(), "helion-e2e-"));
const storePath = join(tmp, "tuning.sqlite");
const userData = join(tmp, "user-data");
const extensionsDir = join(tmp, "extensions");
const workspace = join(tmp, "workspace");
mkdirSync(join(userData, "User"), { recursive: true });
mkdirSync(workspace, { recursive: true });
const exampleCopy = join(workspace, "attention.py");
copyFileSync(EXAMPLE, exampleCopy);
prepareNotebook(REPO, workspace);
prepareCalls(HERE, workspace);
prepareHovers(HERE, workspace);
const exampleLines = readFileSync(exampleCopy, "utf8").split("\n");

writeFileSync(
  join(userData, "User/settings.json"),
  JSON.stringify(
    {
      "helion.interpreter": PYTHON,
      "helion.tuneMaxEvals": TUNE_MAX_EVALS,
      "helion.tuneBudgetSeconds": 60,
      "helion.storePath": storePath, // a fresh store: no Best lens before this run tunes
      "workbench.startupEditor": "none",
      "workbench.tips.enabled": false,
      "workbench.colorTheme": "Default Dark Modern",
      "workbench.editor.enablePreview": false,
      "security.workspace.trust.enabled": false,
      "telemetry.telemetryLevel": "off",
      "update.mode": "none",
      "extensions.ignoreRecommendations": true,
      "extensions.autoCheckUpdates": false,
      "chat.commandCenter.enabled": false,
      "chat.disableAIFeatures": true,
      "editor.minimap.enabled": false,
      "editor.autoClosingBrackets": "never",
      "editor.autoClosingQuotes": "never",
      "editor.autoIndent": "none",
      "editor.quickSuggestions": { other: false, comments: false, strings: false },
      "editor.suggestOnTriggerCharacters": false,
      "editor.acceptSuggestionOnEnter": "off",
      "editor.parameterHints.enabled": false,
      "editor.hover.delay": 300,
      "editor.hover.sticky": true,
      "files.autoSave": "off",
    },
    null,
    2,
  ),
);

// Remembered analyses of their own, like the store: with the user's, a second run on this machine finds its
// tunings' searches remembered and step 04 never sees "Tuning…".
const env = {
  ...process.env,
  PYTHONPATH: [REPO, process.env.PYTHONPATH].filter(Boolean).join(":"),
  HELION_LS_ANALYSIS_CACHE: join(tmp, "analysis.sqlite"),
};
// A config file of its own, so code-server does not write one into the user's home.
const common = ["--config", join(tmp, "config.yaml"), "--user-data-dir", userData, "--extensions-dir", extensionsDir];
log(`installing ${VSIX}`);
const install = spawnSync(process.execPath, [ENTRY, ...common, "--install-extension", VSIX], { env, encoding: "utf8" });
need(install.status === 0, `--install-extension failed:\n${install.stdout}\n${install.stderr}`);

const port = Number(process.env.CODE_SERVER_PORT) || (await freePort());
const codeServer = spawn(
  process.execPath,
  [
    ENTRY,
    ...common,
    "--bind-addr",
    `127.0.0.1:${port}`,
    "--auth",
    "none",
    "--disable-telemetry",
    "--disable-update-check",
    "--disable-workspace-trust",
    "--disable-getting-started-override",
    workspace,
  ],
  { env, stdio: ["ignore", "pipe", "pipe"] },
);
let codeServerOutput = "";
codeServer.stdout.on("data", (d) => (codeServerOutput += d));
codeServer.stderr.on("data", (d) => (codeServerOutput += d));

let browser;
const results = [];

async function cleanUp() {
  await browser?.close().catch(() => undefined);
  codeServer.kill("SIGTERM");
  if (!process.env.E2E_KEEP) rmSync(tmp, { recursive: true, force: true });
}

try {
  await waitForHealth(`http://127.0.0.1:${port}/healthz`, 30_000);
  log(`code-server on 127.0.0.1:${port}`);
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: `http://127.0.0.1:${port}` });
  const page = await context.newPage();
  await runSteps(page, `http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
} catch (error) {
  results.push({ name: "set-up", ok: false, error: String(error?.stack ?? error) });
} finally {
  const failed = results.filter((r) => !r.ok);
  if (failed.length > 0) {
    console.log("\n--- code-server output (tail) ---\n" + codeServerOutput.split("\n").slice(-40).join("\n"));
    for (const file of logFiles(join(userData, "logs"))) {
      if (/helion|exthost|remoteexthost/i.test(file)) {
        const text = readFileSync(file, "utf8");
        console.log(`\n--- ${file.slice(userData.length)} (tail) ---\n${text.split("\n").slice(-60).join("\n")}`);
      }
    }
  }
  await cleanUp();
  console.log("\nResults:");
  for (const r of results) console.log(`  ${r.ok ? "PASS" : r.skipped ? "SKIP" : "FAIL"} ${r.name}${r.ok ? "" : `: ${r.error}`}`);
  const passed = results.filter((r) => r.ok).length;
  console.log(`e2e: ${passed} passed, ${results.length - passed} failed`);
  process.exit(failed.length > 0 || passed === 0 ? 1 : 0);
}

// ---------------------------------------------------------------------------------------------------------
// The steps.

async function runSteps(page, url) {
  const taken = new Set();
  const shot = (name) => {
    taken.add(name);
    return page.screenshot({ path: join(SHOTS, `${name}.png`) });
  };

  /** Runs a step unless one it needs failed; screenshots it (a -FAILED shot on failure). */
  async function step(name, needs, body) {
    if (ONLY !== null && !ONLY.some((prefix) => name.startsWith(prefix))) return;
    const missing = needs.filter((n) => !results.find((r) => r.name === n)?.ok);
    if (missing.length > 0) {
      results.push({ name, ok: false, skipped: true, error: `skipped: needs ${missing.join(", ")}` });
      return;
    }
    const t0 = Date.now();
    log(`step ${name}`);
    try {
      await body();
      if (!taken.has(name)) await shot(name); // a step that shot its key moment itself keeps that picture
      results.push({ name, ok: true });
      log(`step ${name} ok (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (error) {
      await shot(`${name}-FAILED`).catch(() => undefined);
      const toasts = await page.locator(".notification-toast").allInnerTexts().catch(() => []);
      const shown = toasts.length > 0 ? ` [notifications: ${toasts.join(" | ").replace(/\s+/g, " ")}]` : "";
      results.push({ name, ok: false, error: String(error?.message ?? error).split("\n")[0] + shown });
      log(`step ${name} FAILED: ${error?.stack ?? error}${shown}`);
    }
  }

  /**
   * In the page: the box of an error squiggle on the source line whose text is `text`, or null. A squiggle is
   * on a line when their tops match (both layers are laid out in the same editor coordinates).
   */
  const squiggleOnLine = (text) => {
    const editorNode = document.querySelector('.monaco-editor[data-uri$="attention.py"]');
    const line = [...(editorNode?.querySelectorAll(".view-line") ?? [])].find(
      (n) => n.textContent.replace(/\u00a0/g, " ").trim() === text,
    );
    if (!line) return null;
    const top = line.getBoundingClientRect().top;
    for (const s of editorNode.querySelectorAll(".view-overlays .squiggly-error")) {
      const r = s.getBoundingClientRect();
      if (Math.abs(r.top - top) < 4) return { x: r.x, y: r.y, width: r.width, height: r.height };
    }
    return null;
  };

  /**
   * In the page: the code lens items drawn just above the source line whose text is `text` (the lenses of
   * that line), each as {text, x, y, width, height}.
   */
  const lensesAbove = (text) => {
    const editorNode = document.querySelector('.monaco-editor[data-uri$="attention.py"]');
    const line = [...(editorNode?.querySelectorAll(".view-line") ?? [])].find(
      (n) => n.textContent.replace(/\u00a0/g, " ").trim() === text,
    );
    if (!line) return [];
    const top = line.getBoundingClientRect().top;
    const decoration = [...editorNode.querySelectorAll(".codelens-decoration")].find((d) => {
      const r = d.getBoundingClientRect(); // an editor reused for another file may keep empty decorations
      return d.querySelector("a") !== null && r.bottom <= top + 2 && r.bottom > top - r.height - 4;
    });
    return [...(decoration?.querySelectorAll("a") ?? [])].map((a) => {
      const r = a.getBoundingClientRect();
      return { text: a.textContent.trim(), x: r.x, y: r.y, width: r.width, height: r.height };
    });
  };
  const clickLens = async (lineText, pattern) => {
    const lenses = await page.evaluate(lensesAbove, lineText);
    const lens = lenses.find((l) => pattern.test(l.text));
    need(lens !== undefined, `no lens matching ${pattern} above "${lineText}": ${JSON.stringify(lenses.map((l) => l.text))}`);
    await page.mouse.click(lens.x + lens.width / 2, lens.y + lens.height / 2);
    return lens.text;
  };
  const waitForLens = (lineText, pattern, ms) =>
    page.waitForFunction(
      `(${lensesAbove})(${JSON.stringify(lineText)}).some((l) => ${pattern}.test(l.text))`,
      undefined,
      { timeout: budget(ms) },
    );
  const sourceEditor = page.locator('.monaco-editor[data-uri$="attention.py"]').first();
  const lineOf = (needle) => {
    const index = exampleLines.findIndex((l) => (needle instanceof RegExp ? needle.test(l) : l.includes(needle)));
    need(index >= 0, `examples/attention.py has no line with ${JSON.stringify(needle)}`);
    return index + 1;
  };

  async function runCommand(title) {
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: budget(10_000) });
    await input.fill(`>${title}`);
    const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
    await row.waitFor({ state: "visible", timeout: budget(10_000) });
    await page.keyboard.press("Enter");
  }

  async function goToLine(line, column = 1) {
    await page.keyboard.press("Control+1"); // focus the first editor group: the source
    await page.keyboard.press("Control+G");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: budget(10_000) });
    await input.fill(`:${line}:${column}`);
    await page.keyboard.press("Enter");
    await input.waitFor({ state: "hidden", timeout: budget(5_000) });
  }

  /** The source editor's visible text, line by line (what Monaco renders). */
  async function visibleLines() {
    return sourceEditor.locator(".view-lines .view-line").evaluateAll((nodes) =>
      nodes
        .map((n) => ({ top: parseFloat(n.style.top || "0"), text: n.textContent.replace(/\u00a0/g, " ") }))
        .sort((a, b) => a.top - b.top)
        .map((l) => l.text),
    );
  }

  async function save() {
    await page.keyboard.press("Control+S");
    await page.locator(".tab.active.dirty").waitFor({ state: "detached", timeout: budget(10_000) });
  }

  /** Replaces line `line` (1-based) of the source with `text`, typing it as a user would. */
  async function replaceLine(line, text) {
    await goToLine(line, 1);
    await page.keyboard.press("Shift+End");
    await page.keyboard.type(text);
  }

  await step("01-open-example", [], async () => {
    await page.goto(url, { timeout: budget(60_000) });
    await page.locator(".monaco-workbench").waitFor({ timeout: budget(60_000) });
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: budget(20_000) });
    await input.fill("attention.py");
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "attention.py" }).first().waitFor({ timeout: budget(20_000) });
    await page.keyboard.press("Enter");
    await sourceEditor.locator(".view-line", { hasText: "def attention(" }).waitFor({ timeout: budget(20_000) });
    // The server is up when the kernel gets its code lenses; the status bar says so when it could not start.
    const lens = sourceEditor.locator(".codelens-decoration", { hasText: /Tune/ }).first();
    const down = page.locator(".statusbar-item", { has: page.locator(".codicon-error"), hasText: "Helion" }).first();
    await lens.or(down).first().waitFor({ timeout: budget(90_000) });
    if (await down.isVisible()) {
      const toasts = await page.locator(".notification-toast").allInnerTexts();
      throw new Error(`the language server did not start: ${toasts.join(" | ").replace(/\s+/g, " ")}`);
    }
    const status = page.locator(".statusbar-item", { hasText: "v7x" });
    await status.first().waitFor({ timeout: budget(10_000) });
  });

  await step("02-diagnostic-squiggle", ["01-open-example"], async () => {
    // A typo in the name of the tensor a block is loaded from, in the kernel's inner loop.
    const line = lineOf("k_blk = ");
    const original = exampleLines[line - 1];
    const broken = original.replace(/=\s*(\w+)\[/, "= $1_typo[");
    need(broken !== original, `cannot break line ${line}: ${original}`);
    await replaceLine(line, broken);
    await save();
    await page.waitForFunction(squiggleOnLine, broken.trim(), { timeout: budget(60_000) });
    const box = await page.evaluate(squiggleOnLine, broken.trim());
    await page.mouse.move(box.x + Math.min(box.width / 2, 30), box.y + box.height / 2);
    const hover = page.locator(".monaco-hover").filter({ hasText: /_typo/ });
    await hover.first().waitFor({ state: "visible", timeout: budget(10_000) });
    await page.waitForTimeout(400); // let the hover finish fading in
    await shot("02-diagnostic-squiggle");
    await page.keyboard.press("Escape");
    await replaceLine(line, original);
    await save();
    // Fixed: the squiggle on that line goes away (others the example may have stay).
    await page.waitForFunction(`!(${squiggleOnLine})(${JSON.stringify(original.trim())})`, undefined, { timeout: budget(60_000) });
  });

  await step("03-hover-pallas-vmem", ["01-open-example"], async () => {
    const target = await sourceEditor.locator(".view-line", { hasText: "def attention(" }).evaluate((line) => {
      for (const span of line.querySelectorAll("span span")) {
        if (span.textContent === "attention") {
          const r = span.getBoundingClientRect();
          return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
        }
      }
      return null;
    });
    need(target !== null, "no 'attention' token on the def line");
    await page.mouse.move(target.x, target.y);
    const hover = page.locator(".monaco-hover").filter({ hasText: /VMEM/ }).first();
    await hover.waitFor({ state: "visible", timeout: budget(60_000) });
    const text = await hover.innerText();
    need((await hover.locator("table").count()) > 0 && /buffer/.test(text), "the hover has no VMEM table");
    need(/pl\.pallas_call\(/.test(text) && /Device kernel/.test(text), `the hover shows no generated Pallas: ${text.slice(0, 300)}`);
    const code = hover.getByText("pl.pallas_call(").first();
    await page.waitForTimeout(400); // let the hover finish fading in
    await shot("03-hover-pallas-vmem");
    // Scroll the (sticky) hover down to the generated pallas_call and show that too.
    await code.scrollIntoViewIfNeeded();
    await page.waitForTimeout(200);
    await shot("03b-hover-generated-pallas");
  });
  await page.keyboard.press("Escape");
  await page.mouse.move(5, 500);

  const firstArgs = exampleLines[lineOf("# helion: args(") - 1].trim();

  await step("04-tune-best-lens", ["01-open-example"], async () => {
    // The first shape set's lens line: "<shapes> | Tune on v7x"; after tuning: "... | Best: ... | Apply".
    log(`clicked lens: ${await clickLens(firstArgs, /^Tune\b/)}`);
    const toast = page.locator(".notification-toast", { hasText: /Tuning attention/ }).first();
    await toast.waitFor({ state: "visible", timeout: budget(30_000) });
    await page.locator(".statusbar-item", { hasText: /tuning attention/ }).first().waitFor({ timeout: budget(10_000) });
    await page.locator(".notification-toast", { hasText: /Tuning… (starting|\d+)/ }).first().waitFor({ timeout: budget(60_000) });
    // The lens and the notification say the same words (issue 12, item 5): wait for a moment both show
    // the same progress (each refreshes on its own clock) — unless the tuning ends first (a fork of the warm
    // standby can finish this example's search within a refresh or two), which is logged.
    const synced = await page.waitForFunction(
      `(() => {
        const lenses = (${lensesAbove})(${JSON.stringify(firstArgs)}).map((l) => l.text);
        if (lenses.some((t) => /^Best/.test(t))) return "ended";
        const lens = lenses.find((t) => /^(Tuning|Verifying)/.test(t));
        const toast = [...document.querySelectorAll(".notification-toast")].map((n) => n.textContent).join(" ");
        return lens !== undefined && toast.includes(lens.replace(/ \\(cancel\\)$/, "")) ? "same" : false;
      })()`,
      undefined,
      { timeout: budget(60_000) },
    );
    log(`lens and notification: ${(await synced.jsonValue()) === "same" ? "the same progress seen" : "the tuning ended before they met"}`);
    await page.waitForTimeout(300); // let the toast finish sliding in
    await shot("04a-tuning-progress");
    await waitForLens(firstArgs, /Best/, 150_000);
    await toast.waitFor({ state: "hidden", timeout: budget(60_000) });
    const lenses = await page.evaluate(lensesAbove, firstArgs);
    log(`lenses after tuning: ${lenses.map((l) => l.text).join(" | ")}`);
  });

  await step("05-tuning-plot", ["04-tune-best-lens"], async () => {
    await goToLine(lineOf("def attention("), 5);
    await runCommand("Helion: Plot Tuning Results");
    const frame = page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
    await frame.locator("svg.plot circle").first().waitFor({ timeout: budget(30_000) });
    const circles = await frame.locator("svg.plot circle").count();
    need(circles >= 1, "the plot has no points");
    need((await frame.locator("polyline.best-line").count()) === 1, "the plot has no best-so-far line");
    log(`plot shows ${circles} configs`);
    await shot("05-tuning-plot");
    // Close it again: the source needs its width back for the lenses of the next step.
    await page.locator(".tab", { hasText: "Tuning: attention" }).locator(".tab-actions .action-label").first().click();
    await page.locator(".tab", { hasText: "Tuning: attention" }).waitFor({ state: "detached", timeout: budget(10_000) });
  });

  await step("06-apply-config", ["04-tune-best-lens"], async () => {
    await clickLens(firstArgs, /Apply/);
    await page.waitForFunction(
      () => [...document.querySelectorAll(".view-line")].some((n) => /@helion\.kernel\(.*config/.test(n.textContent)),
      undefined,
      { timeout: budget(30_000) },
    );
    const lines = await visibleLines();
    const decorator = lines.filter((l) => /@helion\.kernel\(|config/i.test(l)).join("\n");
    need(/config[\s\S]*block_sizes/.test(decorator), `the decorator has no applied config:\n${decorator}`);
    log(`decorator after Apply: ${decorator}`);
    // The user is told the file is not saved yet, and the lens follows without a save, still labelled as a
    // model estimate for its chip (issue 12, items 6 and 7).
    await page.locator(".notification-toast", { hasText: /unsaved changes/ }).first().waitFor({ timeout: budget(30_000) });
    await waitForLens(firstArgs, /\(current\).*\[model estimate for v7x\]/, 60_000);
    await shot("06-apply-config");
    await save();
  });

  await step("07-generated-view", ["01-open-example"], async () => {
    await goToLine(lineOf(/^\s+for \w+ in hl\.tile\(\w+\):/)); // the inner loop
    await runCommand("Helion: Show Generated Pallas");
    const generated = page.locator('.monaco-editor[data-uri*="attention.py.attention.0.pallas.py"]').first();
    await generated.waitFor({ timeout: budget(60_000) });
    await page.waitForFunction(
      () => {
        const e = document.querySelector('.monaco-editor[data-uri*="attention.py.attention.0.pallas.py"]');
        return e !== null && /pallas_call/.test(e.textContent) && !/No generated Pallas/.test(e.textContent);
      },
      undefined,
      { timeout: budget(60_000) },
    );
    need((await page.locator(".editor-group-container").count()) >= 2, "the generated code is not beside the source");
    need(await sourceEditor.isVisible(), "the source is no longer visible");
    // Read-only: typing into it changes nothing.
    const before = await generated.locator(".view-lines").innerText();
    await generated.locator(".view-lines").click({ position: { x: 40, y: 10 } });
    await page.keyboard.type("zzz");
    await page.waitForTimeout(500);
    need((await generated.locator(".view-lines").innerText()) === before, "the generated code view is editable");
  });

  // Issue 12, items 1-4: a config that is out of VMEM at 32k, its diagnostic, its quick fix, and Apply
  // writing one config per shape set. The file is rewritten on disk (the editor reloads it, the server
  // recompiles it) so each step starts from a known text whatever the tuner chose before.
  const decoratorLine = lineOf("@helion.kernel(");
  const writeExample = (decorator) => {
    const lines = [...exampleLines];
    lines[decoratorLine - 1] = decorator;
    writeFileSync(exampleCopy, lines.join("\n"));
  };
  const tooBig = '@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 1024, 512], pallas_loop_type="unroll"))';
  const onDecorator = (kind) => `(() => {
      const e = document.querySelector('.monaco-editor[data-uri$="attention.py"]');
      const line = [...(e?.querySelectorAll(".view-line") ?? [])].find((n) => n.textContent.replace(/\\u00a0/g, " ").trim().startsWith("@helion.kernel("));
      if (!line) return null;
      const top = line.getBoundingClientRect().top;
      const hit = [...e.querySelectorAll(".view-overlays .squiggly-${kind}")].find((s) => Math.abs(s.getBoundingClientRect().top - top) < 4);
      if (!hit) return null;
      const r = hit.getBoundingClientRect();
      return { x: r.x, y: r.y, width: r.width, height: r.height };
    })()`;

  await step("07b-vmem-error-on-config", ["01-open-example"], async () => {
    // Only the source, full width: the lenses of these steps must be on screen to be clicked.
    await page.keyboard.press("Escape");
    if (await page.locator(".tab.dirty").count()) await runCommand("File: Save All");
    await runCommand("View: Close All Editors");
    await page.keyboard.press("Control+P");
    const quickOpen = page.locator(".quick-input-widget input");
    await quickOpen.waitFor({ state: "visible", timeout: budget(20_000) });
    await quickOpen.fill("attention.py");
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "attention.py" }).first().waitFor({ timeout: budget(20_000) });
    await page.keyboard.press("Enter");
    await sourceEditor.locator(".view-line", { hasText: "def attention(" }).waitFor({ timeout: budget(20_000) });
    if (await page.locator(".tab.active.dirty").count()) await save();
    writeExample(tooBig);
    await sourceEditor.locator(".view-line", { hasText: "block_sizes=[1, 1024, 512]" }).first().waitFor({ timeout: budget(30_000) });
    await page.waitForFunction(onDecorator("error"), undefined, { timeout: budget(90_000) });
    // The error sits on the config, not on the loop whose blocks it sizes (item 1) ...
    need(!(await page.evaluate(squiggleOnLine, exampleLines[lineOf("hl.tile([") - 1].trim())), "the VMEM error is on the loop, not on the config");
    // ... and the raised scoped limit at 8k is information, not a warning (item 3).
    need(!(await page.evaluate(onDecorator("warning"))), "a warning squiggle on the applied config");
    const box = await page.evaluate(onDecorator("error"));
    await page.mouse.move(box.x + Math.min(box.width / 2, 40), box.y + box.height / 2);
    const hover = page.locator(".monaco-hover").filter({ hasText: /VMEM/ });
    await hover.first().waitFor({ state: "visible", timeout: budget(15_000) });
    const text = await hover.first().innerText();
    need(/MiB/.test(text), `the VMEM error does not say its size in MiB: ${text.slice(0, 300)}`);
    log(`VMEM error: ${text.replace(/\s+/g, " ").slice(0, 300)}`);
    await page.waitForTimeout(400);
    await shot("07b-vmem-error-on-config");
    mkdirSync(dirname(EDITOR_SHOT), { recursive: true });
    copyFileSync(join(SHOTS, "07b-vmem-error-on-config.png"), EDITOR_SHOT);
    await page.keyboard.press("Escape");
  });

  await step("07c-vmem-quick-fix", ["07b-vmem-error-on-config"], async () => {
    const box = await page.evaluate(onDecorator("error"));
    need(box !== null, "no VMEM error to fix");
    await page.mouse.click(box.x + Math.min(box.width / 2, 40), box.y + box.height / 2);
    // The fixes are verified by compiling them (a 3 s budget, then cached for this text): on a busy machine
    // the first ask may come back empty, so ask again as a user would.
    const menu = page.locator(".action-widget .monaco-list-row.action").first();
    for (let attempt = 1; ; attempt++) {
      await page.keyboard.press("Control+.");
      try {
        await menu.waitFor({ state: "visible", timeout: budget(10_000) });
        break;
      } catch (error) {
        if (attempt >= 4) throw error;
        await page.keyboard.press("Escape");
        await page.waitForTimeout(2000);
      }
    }
    const titles = await page.locator(".action-widget .monaco-list-row.action").allInnerTexts();
    log(`quick fixes: ${titles.join(" | ")}`);
    await shot("07c-vmem-quick-fixes-menu");
    await page.keyboard.press("Enter"); // the first (preferred) fix
    await save();
    // The applied fix removes the error it was offered for (item 2).
    await page.waitForFunction(`!${onDecorator("error")}`, undefined, { timeout: budget(90_000) });
    await page.waitForTimeout(300);
    await shot("07c-vmem-quick-fix");
  });

  await step("07d-apply-per-shape-set", ["04-tune-best-lens"], async () => {
    await page.keyboard.press("Escape");
    if (await page.locator(".tab.active.dirty").count()) await save();
    writeExample(exampleLines[decoratorLine - 1]);
    await sourceEditor.locator(".view-line", { hasText: /^@helion\.kernel\(static_shapes=True\)$/ }).first().waitFor({ timeout: budget(30_000) });
    // A best for the 8k shape set that keeps the whole sequence in VMEM: out of VMEM at 32k (item 4).
    const record = spawnSync(PYTHON, ["-c", STORE_BEST, exampleCopy, storePath], { env: { ...process.env, PYTHONPATH: REPO }, encoding: "utf8" });
    need(record.status === 0, `could not write the store: ${record.stderr}`);
    await waitForLens(firstArgs, /Apply \(configs=/, 90_000);
    await clickLens(firstArgs, /Apply \(configs=/);
    await page.waitForFunction(
      () => [...document.querySelectorAll(".view-line")].some((n) => /configs=\[/.test(n.textContent)),
      undefined,
      { timeout: budget(30_000) },
    );
    const lines = await visibleLines();
    const first = lines.findIndex((l) => l.trim().startsWith("@helion.kernel("));
    const written = lines.slice(first, lines.findIndex((l) => l.includes("def attention("))).join("\n");
    need(/pallas_loop_type="unroll"/.test(written) && (written.match(/helion\.Config\(/g) ?? []).length === 2, `not one config per shape set:\n${written}`);
    log(`decorator after Apply: ${written}`);
    await page.waitForTimeout(300);
    await shot("07d-apply-per-shape-set");
    await save();
    // Both shape sets compile cleanly with what was written: no error squiggle on the decorator.
    await page.waitForTimeout(3000);
    need(!(await page.evaluate(onDecorator("error"))), "the per-shape-set configs do not compile cleanly");
  });

  await applyTwoShapeSets(page, step, runCommand, shot);
  // Hovers inside kernel bodies and the message after a tuning within the Apply margin (e2e/hovers.mjs).
  await hoverSteps({ page, step, shot, budget, need, log, here: HERE, python: PYTHON, repo: REPO, storePath, runCommand });

  await step("08-cancel-tuning", ["01-open-example"], async () => {
    // Tune the second shape set, then press Cancel on the progress notification: the run stops (the status
    // bar stops saying "tuning" and the lens offers to tune again: "Tune on …", or — when the search had
    // stored trials before the cancel, as a tuning forked from the warm standby starts at once — the best of
    // them, whose lens tunes again when clicked).
    const secondArgs = exampleLines.filter((l) => l.trim().startsWith("# helion: args("))[1]?.trim();
    need(secondArgs !== undefined, "the example has no second shape set");
    await waitForLens(secondArgs, /^Tune\b/, 30_000);
    await clickLens(secondArgs, /^Tune\b/);
    const toast = page.locator(".notification-toast", { hasText: /Tuning attention/ }).first();
    await toast.waitFor({ state: "visible", timeout: budget(30_000) });
    await page.waitForTimeout(300);
    await shot("08-cancel-tuning");
    await toast.locator(".monaco-button", { hasText: "Cancel" }).click();
    await toast.waitFor({ state: "hidden", timeout: budget(10_000) });
    await page.locator(".statusbar-item", { hasText: /tuning attention/ }).waitFor({ state: "detached", timeout: budget(30_000) });
    await waitForLens(secondArgs, /^(Tune\b|Best: )/, 30_000);
    log(`lenses after the cancel: ${(await page.evaluate(lensesAbove, secondArgs)).map((l) => l.text).join(" | ")}`);
  });

  await step("09-chip-from-status-bar", ["01-open-example"], async () => {
    // Clicking the status bar item changes helion.chip; the running server picks it up (no restart): the
    // lenses then say the new chip.
    await page.locator(".statusbar-item", { hasText: "v7x" }).first().click();
    const pick = page.locator(".quick-input-widget", { hasText: /TPU chip/ });
    await pick.waitFor({ state: "visible", timeout: budget(10_000) });
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "v5e" }).first().click();
    await page.locator(".statusbar-item", { hasText: "v5e" }).first().waitFor({ timeout: budget(10_000) });
    await sourceEditor.locator(".codelens-decoration", { hasText: /v5e/ }).first().waitFor({ timeout: budget(60_000) });
  });

  // A Jupyter notebook in the notebook editor (e2e/notebook.mjs); before step 10 stops the server.
  await notebookSteps({ page, url, step, shot, budget, need, log });
  // A file written as upstream's examples are, its shapes found in its own calls (e2e/calls.mjs).
  await callsSteps({ page, url, step, shot, budget, need, log, here: HERE });

  await step("10-missing-interpreter", ["01-open-example"], async () => {
    // Point helion.interpreter (in the folder's settings) at a program that does not exist: the server
    // restarts, cannot start, and the user is told so, with an action to select another interpreter.
    mkdirSync(join(workspace, ".vscode"), { recursive: true });
    writeFileSync(join(workspace, ".vscode/settings.json"), JSON.stringify({ "helion.interpreter": "/nonexistent/python3" }));
    const toast = page.locator(".notification-toast", { hasText: /nonexistent\/python3.*was not found/ }).first();
    await toast.waitFor({ state: "visible", timeout: budget(30_000) });
    await page.locator(".statusbar-item", { hasText: "Helion" }).first().waitFor({ timeout: budget(10_000) });
    await shot("10-missing-interpreter");
    await toast.locator(".monaco-button", { hasText: "Select Interpreter" }).click();
    const pick = page.locator(".quick-input-widget", { hasText: /Enter interpreter path/ });
    await pick.waitFor({ state: "visible", timeout: budget(10_000) });
  });

  await step("11-restricted-mode", [], async () => {
    // A second code-server with workspace trust on: the folder opens in Restricted Mode. The extension
    // still runs (diagnostics, lenses) but tuning is off, and both the lens and the command say why.
    const restricted = await startRestricted();
    const other = await page.context().newPage();
    try {
      await other.goto(restricted.url, { timeout: budget(60_000) });
      await other.locator(".monaco-workbench").waitFor({ timeout: budget(60_000) });
      await other.keyboard.press("Control+P");
      const input = other.locator(".quick-input-widget input");
      await input.waitFor({ state: "visible", timeout: budget(20_000) });
      await input.fill("attention.py");
      await other.locator(".quick-input-list .monaco-list-row", { hasText: "attention.py" }).first().waitFor({ timeout: budget(20_000) });
      await other.keyboard.press("Enter");
      const editor = other.locator('.monaco-editor[data-uri$="attention.py"]').first();
      await editor.locator(".view-line", { hasText: "def attention(" }).waitFor({ timeout: budget(20_000) });
      await editor.locator(".codelens-decoration", { hasText: /Tuning off: the workspace is not trusted/ }).first().waitFor({ timeout: budget(90_000) });
      need((await editor.locator(".codelens-decoration", { hasText: /Tune on/ }).count()) === 0, "a Tune lens in Restricted Mode");
      await other.keyboard.press("F1");
      const palette = other.locator(".quick-input-widget input");
      await palette.waitFor({ state: "visible", timeout: budget(10_000) });
      await palette.fill(">Helion: Tune Kernel");
      await other.locator(".quick-input-list .monaco-list-row", { hasText: "Tune Kernel" }).first().waitFor({ timeout: budget(10_000) });
      await other.keyboard.press("Enter");
      await other.locator(".notification-toast", { hasText: /Tuning is off in Restricted Mode/ }).first().waitFor({ timeout: budget(20_000) });
      await other.waitForTimeout(300);
      await other.screenshot({ path: join(SHOTS, "11-restricted-mode.png") });
      taken.add("11-restricted-mode");
    } finally {
      await other.close().catch(() => undefined);
      restricted.stop();
    }
  });
}

// ---------------------------------------------------------------------------------------------------------
// Issue 16: Tune -> Apply on a kernel written as upstream Helion writes them (bare `@helion.kernel`, two shape
// sets), in its own file (e2e/fixtures/rms_norm_sets.py), so this step needs nothing of the others.

async function applyTwoShapeSets(page, step, runCommand, shot) {
  const APPLY_FIXTURE = join(HERE, "fixtures/rms_norm_sets.py");
  // Checks the saved file: every config in its decorator is one upstream Helion's Config accepts (the table in
  // tests/upstream_config.py) and compiles cleanly for its shape set (no error, nothing we call illegal).
  const CHECK_APPLIED = `
import sys
sys.path.insert(0, sys.argv[2])
import compiler
from upstream_config import problems
kernel = next(iter(compiler.load(open(sys.argv[1]).read()).kernels.values()))
configs = kernel.decorator_configs or [kernel.decorator_config]
for index in range(len(kernel.shape_sets)):
    config = kernel.config_for(index)
    assert config is not None and not problems(config, tensor_args=2), (index, config, problems(config))
    bad = [d for d in kernel.compile(shape_set=index).diagnostics if d.is_error or d.code.startswith("HPL2")]
    assert not bad, (index, bad)
print(" | ".join(repr(c) for c in configs))
`;
  const file = join(workspace, "rms_sets.py");
  const lines = readFileSync(APPLY_FIXTURE, "utf8").split("\n");
  const argLines = lines.filter((l) => l.startsWith("# helion: args("));
  const editor = page.locator('.monaco-editor[data-uri$="rms_sets.py"]').first();
  const titles = async (text) => (await page.evaluate(lensesOver, ["rms_sets.py", text])).map((l) => l.text);
  const waitLens = (text, pattern, ms) =>
    page.waitForFunction(`(${lensesOver})(["rms_sets.py", ${JSON.stringify(text)}]).some((l) => ${pattern}.test(l.text))`, undefined, {
      timeout: budget(ms),
    });
  const click = async (text, pattern) => {
    const lens = (await page.evaluate(lensesOver, ["rms_sets.py", text])).find((l) => pattern.test(l.text));
    need(lens !== undefined, `no lens matching ${pattern} above "${text}": ${JSON.stringify(await titles(text))}`);
    await page.mouse.click(lens.x + lens.width / 2, lens.y + lens.height / 2);
    return lens.text;
  };
  const decorator = async () => {
    const shown = await editor.locator(".view-lines .view-line").evaluateAll((nodes) =>
      nodes
        .map((n) => ({ top: parseFloat(n.style.top || "0"), text: n.textContent.replace(/\u00a0/g, " ") }))
        .sort((a, b) => a.top - b.top)
        .map((l) => l.text),
    );
    const first = shown.findIndex((l) => l.trim().startsWith("@helion.kernel"));
    return shown.slice(first, shown.findIndex((l) => l.includes("def rms_norm_rows("))).join("\n");
  };
  const saveIt = async () => {
    await page.keyboard.press("Control+S");
    await page.locator(".tab.active.dirty").waitFor({ state: "detached", timeout: budget(10_000) });
  };
  const tuneAndApply = async (args, index) => {
    log(`clicked lens: ${await click(args, /^Tune\b/)}`);
    await waitLens(args, /^Apply/, 150_000);
    const best = (await titles(args)).find((t) => t.startsWith("Best:"));
    need(best !== undefined && /× vs current/.test(best), `shape set ${index}: no gain over the current config: ${best}`);
    log(`shape set ${index}: ${best}; clicked ${await click(args, /^Apply/)}`);
    return best.split(" [")[0];
  };

  await step("07e-apply-two-shape-sets", ["01-open-example"], async () => {
    await page.keyboard.press("Escape");
    if (await page.locator(".tab.dirty").count()) await runCommand("File: Save All");
    await runCommand("View: Close All Editors");
    copyFileSync(APPLY_FIXTURE, file);
    // Opened from the explorer: quick open's file index may not have the new file yet.
    await page.locator(".explorer-folders-view .monaco-list-row", { hasText: "rms_sets.py" }).first().click({ timeout: budget(20_000) });
    await editor.locator(".view-line", { hasText: "def rms_norm_rows(" }).waitFor({ timeout: budget(20_000) });
    await waitLens(argLines[0], /^Tune on v7x/, 90_000);

    // Shape set 0: tune, Apply; the result stays attached: Best ... (current), no Apply (item 1).
    await tuneAndApply(argLines[0], 0);
    await page.waitForFunction(() => [...document.querySelectorAll(".view-line")].some((n) => /@helion\.kernel\(configs?=/.test(n.textContent)), undefined, {
      timeout: budget(30_000),
    });
    log(`decorator after Apply on shape set 0: ${await decorator()}`);
    await waitLens(argLines[0], /^Best: .*\(current\)/, 60_000);
    need(!(await titles(argLines[0])).some((t) => t.startsWith("Apply")), "Apply is still offered for the applied config");
    // The "unsaved changes" notice goes away once the file is saved (item 9).
    const notice = page.locator(".notification-toast", { hasText: /unsaved changes/ }).first();
    await notice.waitFor({ state: "visible", timeout: budget(30_000) });
    await shot("07e-applied-shape-set-0");
    await saveIt();
    await notice.waitFor({ state: "hidden", timeout: budget(10_000) });

    // Shape set 1: tune, Apply: configs=[...] keeps shape set 0's config (item 2).
    const before = await decorator();
    const applied0 = before.match(/block_sizes=\[\d+\]/)[0];
    const best1 = await tuneAndApply(argLines[1], 1);
    let both = before;
    for (const until = Date.now() + budget(30_000); both === before && Date.now() < until; ) {
      await page.waitForTimeout(200);
      both = await decorator();
    }
    const sizes = both.match(/block_sizes=\[\d+\]/g) ?? [];
    need(sizes.length === 2 && sizes[0] === applied0 && sizes[1] !== applied0, `configs=[...] does not hold both shape sets:\n${both}`);
    need(best1.includes(sizes[1].replace("block_sizes=", "bs=")), `shape set 1's entry is not its best (${best1}):\n${both}`);
    log(`decorator after Apply on shape set 1: ${both}`);
    for (const args of argLines) await waitLens(args, /^Best: .*\(current\)/, 60_000);
    await shot("07e-applied-both-shape-sets");
    await saveIt();
    // The file as saved: every config is one upstream Helion's Config takes, and compiles cleanly (item 3).
    const check = spawnSync(PYTHON, ["-c", CHECK_APPLIED, file, join(REPO, "tests")], { env: { ...process.env, PYTHONPATH: REPO }, encoding: "utf8" });
    need(check.status === 0, `the applied configs are not all upstream Helion configs that compile cleanly: ${check.stderr.slice(-600)}`);
    log(`upstream-valid, clean configs: ${check.stdout.trim()}`);

    // A new shape for shape set 1: its lens no longer shows the old figure (item 4).
    const wider = argLines[1].replace("bf16[16384, 2048], weight=bf16[2048]", "bf16[16384, 4096], weight=bf16[4096]");
    need(wider !== argLines[1], "cannot widen the second shape set");
    await page.keyboard.press("Control+G");
    const go = page.locator(".quick-input-widget input");
    await go.waitFor({ state: "visible", timeout: budget(10_000) });
    await go.fill(`:${lines.indexOf(argLines[1]) + 1}:1`);
    await page.keyboard.press("Enter");
    await page.keyboard.press("Shift+End");
    await page.keyboard.type(wider);
    await waitLens(wider, /^Retune on v7x \(shapes changed\)/, 60_000);
    const after = await titles(wider);
    need(!after.some((t) => t.includes(best1)), `the old figure is still shown: ${after.join(" | ")}`);
    log(`lenses after widening shape set 1: ${after.join(" | ")}`);
    await shot("07e-shape-changed-retune");
    await runCommand("File: Revert File");
    await page.locator(".tab.active.dirty").waitFor({ state: "detached", timeout: budget(10_000) });

    // Back to the example, alone in its group, for the steps that follow.
    await page.locator(".tab", { hasText: "rms_sets.py" }).locator(".tab-actions .action-label").first().click();
    await page.locator(".tab", { hasText: "rms_sets.py" }).waitFor({ state: "detached", timeout: budget(10_000) });
    await page.locator(".explorer-folders-view .monaco-list-row", { hasText: "attention.py" }).first().click();
    await page.locator('.monaco-editor[data-uri$="attention.py"] .view-line', { hasText: "def attention(" }).first().waitFor({ timeout: budget(20_000) });
    await page.locator('.monaco-editor[data-uri$="attention.py"] .codelens-decoration', { hasText: /Tune|Best/ }).first().waitFor({ timeout: budget(30_000) });
    // The example's lenses are fetched again once it compiled: wait until they are back.
    const second = exampleLines.filter((l) => l.startsWith("# helion: args("))[1].trim();
    await page.waitForFunction(`(${lensesOver})(["attention.py", ${JSON.stringify(second)}]).some((l) => /^Tune/.test(l.text))`, undefined, {
      timeout: budget(60_000),
    });
    await page.waitForTimeout(2000);
  });
}

/** code-server on a copy of the workspace with workspace trust enabled (so it opens in Restricted Mode). */
async function startRestricted() {
  const root = join(tmp, "restricted");
  const data = join(root, "user-data");
  const folder = join(root, "workspace");
  mkdirSync(join(data, "User"), { recursive: true });
  mkdirSync(folder, { recursive: true });
  copyFileSync(EXAMPLE, join(folder, "attention.py"));
  const settings = JSON.parse(readFileSync(join(userData, "User/settings.json"), "utf8"));
  settings["security.workspace.trust.enabled"] = true;
  settings["security.workspace.trust.startupPrompt"] = "never";
  settings["security.workspace.trust.untrustedFiles"] = "open";
  // a store of its own: a folder never tuned (the first instance's store has results for both shape sets once
  // a cancelled tuning stored trials, and a Best lens then stands where "Tuning off" is expected)
  settings["helion.storePath"] = join(root, "tuning.sqlite");
  writeFileSync(join(data, "User/settings.json"), JSON.stringify(settings, null, 2));
  const port2 = await freePort();
  const args = ["--config", join(root, "config.yaml"), "--user-data-dir", data, "--extensions-dir", extensionsDir];
  const child = spawn(
    process.execPath,
    [ENTRY, ...args, "--bind-addr", `127.0.0.1:${port2}`, "--auth", "none", "--disable-telemetry", "--disable-update-check", "--disable-getting-started-override", folder],
    { env, stdio: ["ignore", "ignore", "ignore"] },
  );
  await waitForHealth(`http://127.0.0.1:${port2}/healthz`, 30_000);
  return { url: `http://127.0.0.1:${port2}/?folder=${encodeURIComponent(folder)}`, stop: () => child.kill("SIGTERM") };
}
