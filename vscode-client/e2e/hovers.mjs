// Issue 31 steps of the end-to-end run (run.mjs calls them): hovers inside kernel bodies and the message after a
// tuning whose best is within the worth-applying margin, on e2e/fixtures/body_hovers.py (three kernels written as
// upstream Helion writes them). Checked: a torch reduction says what it becomes and the VMEM it takes;
// hl.register_block_size says its block size, where it comes from and its legal values; a block read only for
// its shape (`x[tile_m, 0]` in `torch.zeros_like`) says it is not loaded; after a tuning whose stored best is 1 %
// faster than the current config the message says so and points at no Apply lens, and the lens offers none.
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { lensesOver } from "./lenses.mjs";

export const HOVERS_FILE = "body_hovers.py";

// Records two model trials for shape set 0 of rms_norm_fwd in the file argv[1], store argv[2]: the config it
// compiles with now and another, 1 % faster, both faster than anything the model estimates (so they stay the
// stored figures after a tuning).
const WITHIN_MARGIN = `
import sys, compiler
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore
kernel = compiler.load(open(sys.argv[1]).read()).kernels["rms_norm_fwd"]
current = dict(kernel.compile(shape_set=0, chip="v7x").config)
other = {**current, "block_sizes": [8 if current["block_sizes"][0] != 8 else 16]}
key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[0]), "v7x", "model")
with TuningStore(sys.argv[2]) as store:
    store.record_trial(key, current, 1.01e-7, "ok", {"vmem_verdict": "fits"})
    store.record_trial(key, other, 1.00e-7, "ok", {"vmem_verdict": "fits"})
print(current, other)
`;

/** Puts the fixture into the run's workspace folder. */
export function prepareHovers(here, workspace) {
  copyFileSync(join(here, "fixtures", HOVERS_FILE), join(workspace, HOVERS_FILE));
}

/** In the page: the centre of character `offset` of the first `needle` on the line of `file` whose text is `text`. */
const charBox = ([file, text, needle, offset]) => {
  const editor = document.querySelector(`.monaco-editor[data-uri$="${file}"]`);
  const line = [...(editor?.querySelectorAll(".view-lines .view-line") ?? [])].find(
    (n) => n.textContent.replace(/\u00a0/g, " ").trim() === text.trim(),
  );
  if (!line) return null;
  const at = line.textContent.replace(/\u00a0/g, " ").indexOf(needle) + offset;
  const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
  let seen = 0;
  for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
    const length = node.textContent.length;
    if (seen + length > at) {
      const range = document.createRange();
      range.setStart(node, at - seen);
      range.setEnd(node, at - seen + 1);
      const r = range.getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
    }
    seen += length;
  }
  return null;
};

export async function hoverSteps({ page, step, shot, budget, need, log, here, python, repo, storePath, runCommand }) {
  const source = readFileSync(join(here, "fixtures", HOVERS_FILE), "utf8").split("\n");
  const lineOf = (needle) => {
    const index = source.findIndex((l) => l.includes(needle));
    need(index >= 0, `${HOVERS_FILE} has no line with ${JSON.stringify(needle)}`);
    return index + 1;
  };
  const editor = page.locator(`.monaco-editor[data-uri$="${HOVERS_FILE}"]`).first();

  async function goToLine(line) {
    await page.keyboard.press("Control+G");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: budget(10_000) });
    await input.fill(`:${line}:1`);
    await page.keyboard.press("Enter");
    await input.waitFor({ state: "hidden", timeout: budget(5_000) });
  }

  /** Hovers character `offset` of `needle` on the line holding it; the hover's text once it matches `pattern`. */
  async function hoverOn(needle, offset, pattern, name) {
    await page.keyboard.press("Escape");
    await page.mouse.move(5, 500);
    const line = lineOf(needle);
    await goToLine(line);
    const text = source[line - 1];
    await page.waitForFunction(`(${charBox})(${JSON.stringify([HOVERS_FILE, text, needle, offset])}) !== null`, undefined, { timeout: budget(10_000) });
    const box = await page.evaluate(charBox, [HOVERS_FILE, text, needle, offset]);
    await page.mouse.move(box.x, box.y);
    const hover = page.locator(".monaco-hover").filter({ hasText: pattern }).first();
    await hover.waitFor({ state: "visible", timeout: budget(30_000) });
    await page.waitForTimeout(400); // let the hover finish fading in
    await shot(name);
    return hover.innerText();
  }

  await step("07f-open-body-hovers", ["01-open-example"], async () => {
    await page.keyboard.press("Escape");
    if (await page.locator(".tab.dirty").count()) await runCommand("File: Save All");
    await runCommand("View: Close All Editors");
    await page.locator(".explorer-folders-view .monaco-list-row", { hasText: HOVERS_FILE }).first().click({ timeout: budget(20_000) });
    await editor.locator(".view-line", { hasText: "def rms_norm_fwd(" }).waitFor({ timeout: budget(20_000) });
    // compiled once the first shape set has its Tune lens
    await page.waitForFunction(`(${lensesOver})(${JSON.stringify([HOVERS_FILE, source[lineOf("# helion: args(x=f32[2048")- 1]])}).some((l) => /^Tune/.test(l.text))`, undefined, {
      timeout: budget(90_000),
    });
  });

  await step("07f-hover-torch-reduction", ["07f-open-body-hovers"], async () => {
    const text = await hoverOn("torch.mean(x_squared", 7, /jnp\.mean/, "07f-hover-torch-reduction");
    need(/Spelled in jax: jnp\.mean\(x_squared, axis=1\)/.test(text), `no jax spelling: ${text.slice(0, 400)}`);
    need(/Reduces f32\[256, 4096\]/.test(text) && /live together while it runs/.test(text), `no reduction VMEM: ${text.slice(0, 600)}`);
    need(/Generated code \(line \d+ of the module\)/.test(text), `no generated statement: ${text.slice(0, 600)}`);
    log(`torch.mean hover: ${text.replace(/\s+/g, " ").slice(0, 300)}`);
  });

  await step("07f-hover-register-block-size", ["07f-open-body-hovers"], async () => {
    const text = await hoverOn("hl.register_block_size(n)", 5, /Legal values/, "07f-hover-register-block-size");
    need(/block size 512: block_sizes\[1\] of this config/.test(text), `no block size: ${text.slice(0, 400)}`);
    need(/a multiple of 128 .* up to the whole extent 4096/.test(text), `no legal values: ${text.slice(0, 600)}`);
    need(/From: a default/.test(text), `not where it comes from: ${text.slice(0, 600)}`);
    log(`register_block_size hover: ${text.replace(/\s+/g, " ").slice(0, 300)}`);
  });

  await step("07f-hover-shape-only-block", ["07f-open-body-hovers"], async () => {
    const text = await hoverOn("x[tile_m, 0]", 0, /not loaded/, "07f-hover-shape-only-block");
    need(/read only for its shape and dtype, f32\[128\]/.test(text), `not said to be shape-only: ${text.slice(0, 400)}`);
    need(/no BlockSpec, DMA or VMEM buffer/.test(text), `not said to take nothing: ${text.slice(0, 400)}`);
    log(`x[tile_m, 0] hover: ${text.replace(/\s+/g, " ").slice(0, 300)}`);
  });

  await step("07f-message-within-margin", ["07f-open-body-hovers"], async () => {
    await page.keyboard.press("Escape");
    await page.mouse.move(5, 500);
    const args = source[lineOf("# helion: args(x=f32[2048") - 1];
    await goToLine(lineOf("# helion: args(x=f32[2048"));
    const record = spawnSync(python, ["-c", WITHIN_MARGIN, join(here, "fixtures", HOVERS_FILE), storePath], {
      env: { ...process.env, PYTHONPATH: repo },
      encoding: "utf8",
    });
    need(record.status === 0, `could not write the store: ${record.stderr}`);
    log(`recorded (current, 1 % faster): ${record.stdout.trim()}`);
    // The store changed: the lens shows the recorded best, 1 % ahead, without Apply; clicking it tunes again.
    await page.waitForFunction(`(${lensesOver})(${JSON.stringify([HOVERS_FILE, args])}).some((l) => /^Best: .*: too little to apply/.test(l.text))`, undefined, {
      timeout: budget(60_000),
    });
    const lens = (await page.evaluate(lensesOver, [HOVERS_FILE, args])).find((l) => /^Best/.test(l.text));
    await page.mouse.click(lens.x + lens.width / 2, lens.y + lens.height / 2);
    const message = page.locator(".notification-toast", { hasText: /Tuned rms_norm_fwd \(shape set 0\)/ }).first();
    await message.waitFor({ state: "visible", timeout: budget(150_000) });
    const said = (await message.innerText()).replace(/\s+/g, " ");
    log(`message after the tuning: ${said}`);
    need(/1\.0 % faster than the current config, under the 2% worth applying: no Apply lens/.test(said), `the message does not say the best is within the margin: ${said}`);
    need(!/Click \*?Apply|Use the Apply lens/.test(said), `the message points at an Apply lens: ${said}`);
    await page.waitForFunction(`(${lensesOver})(${JSON.stringify([HOVERS_FILE, args])}).some((l) => /^Best: .*: too little to apply/.test(l.text))`, undefined, {
      timeout: budget(30_000),
    });
    // the tuning's own progress notification closes once it is done
    await page.locator(".notification-toast", { hasText: /Tuning rms_norm_fwd/ }).first().waitFor({ state: "hidden", timeout: budget(60_000) });
    const titles = (await page.evaluate(lensesOver, [HOVERS_FILE, args])).map((l) => l.text);
    need(!titles.some((t) => t.startsWith("Apply")), `an Apply lens is offered: ${titles.join(" | ")}`);
    log(`lenses: ${titles.join(" | ")}`);
    await page.waitForTimeout(300);
    await shot("07f-message-within-margin");
  });

  await step("07f-back-to-the-example", ["07f-open-body-hovers"], async () => {
    // Back to the example, alone in its group, for the steps that follow.
    await page.keyboard.press("Escape");
    await runCommand("View: Close All Editors");
    await page.locator(".explorer-folders-view .monaco-list-row", { hasText: "attention.py" }).first().click();
    await page.locator('.monaco-editor[data-uri$="attention.py"] .view-line', { hasText: "def attention(" }).first().waitFor({ timeout: budget(20_000) });
    await page.locator('.monaco-editor[data-uri$="attention.py"] .codelens-decoration', { hasText: /Tune|Best/ }).first().waitFor({ timeout: budget(30_000) });
  });
}
