// The notebook step of the end-to-end run (run.mjs calls it): a real .ipynb (tests/notebooks/row_kernels.ipynb,
// a %pip cell, kernels in cells, calls in later cells) opened in code-server's notebook editor (its built-in
// ipynb extension). Checked on the cells themselves: a squiggle after an edit breaks a kernel cell, the kernel
// hover, Show Generated Pallas from a cell, a Tune lens that tunes and an Apply that edits the kernel's cell.
import { copyFileSync } from "node:fs";
import { join } from "node:path";

export const NOTEBOOK_FILE = "row_kernels.ipynb";

/** Puts the notebook into the run's workspace folder. */
export function prepareNotebook(repo, workspace) {
  copyFileSync(join(repo, "tests/notebooks", NOTEBOOK_FILE), join(workspace, NOTEBOOK_FILE));
}

/** In the page: the cell editor (a .monaco-editor of the notebook) whose text holds `needle`. */
const cellEditor = (page, needle) =>
  page.locator(".notebook-editor .cell-editor-container .monaco-editor", { hasText: needle }).first();

/** In the page: the cell editor's error squiggle on the line whose trimmed text is `text`, or null. */
const squiggleInCell = ([needle, text]) => {
  const editor = [...document.querySelectorAll(".notebook-editor .cell-editor-container .monaco-editor")].find((e) =>
    e.textContent.replace(/\u00a0/g, " ").includes(needle),
  );
  const line = [...(editor?.querySelectorAll(".view-line") ?? [])].find((n) => n.textContent.replace(/\u00a0/g, " ").trim() === text);
  if (!line) return null;
  const top = line.getBoundingClientRect().top;
  for (const s of editor.querySelectorAll(".view-overlays .squiggly-error")) {
    const r = s.getBoundingClientRect();
    if (Math.abs(r.top - top) < 4) return { x: r.x, y: r.y, width: r.width, height: r.height };
  }
  return null;
};

export async function notebookSteps({ page, url, step, shot, budget, need, log }) {
  async function runCommand(title) {
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: budget(10_000) });
    await input.fill(`>${title}`);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: budget(10_000) });
    await page.keyboard.press("Enter");
  }

  /**
   * Replaces the text of the cell line `original` (indentation kept), typing as a user would. The cursor gets
   * there with the keyboard: cells above may still grow (their lenses arrive) and move a clicked line.
   */
  async function retype(editor, original, replacement) {
    const lines = await editor.locator(".view-line").evaluateAll((nodes) =>
      nodes
        .map((n) => ({ top: parseFloat(n.style.top || "0"), text: n.textContent.replace(/\u00a0/g, " ") }))
        .sort((a, b) => a.top - b.top)
        .map((l) => l.text.trim()),
    );
    const index = lines.indexOf(original.trim());
    need(index >= 0, `no line "${original.trim()}" in the cell: ${JSON.stringify(lines)}`);
    await editor.locator(".view-line").first().click();
    await page.keyboard.press("Control+Home");
    for (let i = 0; i < index; i++) await page.keyboard.press("ArrowDown");
    await page.keyboard.press("End");
    await page.keyboard.press("Home"); // to the first non-blank character
    await page.keyboard.press("Shift+End");
    await page.keyboard.type(replacement.trim());
  }

  /**
   * Hovers the squiggle `squiggleInCell(target)` finds until a hover matching `pattern` shows. The cells still
   * move while the server re-sends lenses after an edit, so a box measured once can be stale by the time the
   * mouse gets there: each try measures again, after the box has held still for 300 ms.
   */
  async function hoverSquiggle(target, pattern) {
    const hover = page.locator(".monaco-hover").filter({ hasText: pattern }).first();
    for (let attempt = 1; ; attempt++) {
      let box = await page.evaluate(squiggleInCell, target);
      for (let settled = 0; settled < 10; settled++) {
        await page.waitForTimeout(300);
        const again = await page.evaluate(squiggleInCell, target);
        const still = box && again && Math.abs(again.x - box.x) < 1 && Math.abs(again.y - box.y) < 1;
        box = again;
        if (still) break;
      }
      need(box !== null, `the squiggle on ${JSON.stringify(target[1])} went away`);
      await page.mouse.move(5, 500);
      await page.mouse.move(box.x + Math.min(box.width / 2, 30), box.y + box.height / 2);
      try {
        await hover.waitFor({ state: "visible", timeout: budget(8_000) });
        return;
      } catch (error) {
        if (attempt === 3) throw error;
        log(`no hover on try ${attempt}; measuring the squiggle again`);
      }
    }
  }

  const softmax = () => cellEditor(page, "def row_softmax(");
  const rowSum = () => cellEditor(page, "def row_sum(");
  const lensTexts = (editor) => editor.locator(".codelens-decoration a").allInnerTexts();
  const clickLens = async (editor, pattern) => {
    const lens = editor.locator(".codelens-decoration a", { hasText: pattern }).first();
    await lens.waitFor({ state: "visible", timeout: budget(10_000) });
    const text = await lens.innerText();
    await lens.click();
    return text;
  };

  await step("12-notebook", [], async () => {
    if ((await page.locator(".monaco-workbench").count()) === 0) {
      await page.goto(url, { timeout: budget(60_000) });
      await page.locator(".monaco-workbench").waitFor({ timeout: budget(60_000) });
    }
    await page.keyboard.press("Escape");
    if (await page.locator(".tab.dirty").count()) await runCommand("File: Save All");
    await runCommand("View: Close All Editors");
    await page.keyboard.press("Control+P");
    const quickOpen = page.locator(".quick-input-widget input");
    await quickOpen.waitFor({ state: "visible", timeout: budget(20_000) });
    await quickOpen.fill(NOTEBOOK_FILE);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: NOTEBOOK_FILE }).first().waitFor({ timeout: budget(20_000) });
    await page.keyboard.press("Enter");
    await softmax().waitFor({ timeout: budget(60_000) });
    // The kernel cell gets its lenses from the server: the shapes and "Tune on <chip>".
    await softmax().locator(".codelens-decoration", { hasText: /Tune on/ }).first().waitFor({ timeout: budget(90_000) });
    log(`row_softmax cell lenses: ${(await lensTexts(softmax())).join(" | ")}`);
    need((await page.locator(".notebook-editor .squiggly-error").count()) === 0, "an error squiggle in the untouched notebook");
    await shot("12-notebook");

    // A cell edit that breaks the kernel: squiggled on that line of that cell, without a save.
    const original = "acc = acc + x[tile_r, tile_c].sum(dim=1)";
    const broken = "acc = acc + x_typo[tile_r, tile_c].sum(dim=1)";
    await rowSum().scrollIntoViewIfNeeded();
    await retype(rowSum(), original, broken);
    await page.waitForFunction(squiggleInCell, ["def row_sum(", broken], { timeout: budget(60_000) });
    await hoverSquiggle(["def row_sum(", broken], /x_typo/);
    await page.waitForTimeout(400);
    await shot("12a-notebook-squiggle");
    await page.keyboard.press("Escape");
    await retype(rowSum(), broken, original);
    await page.waitForFunction(`!(${squiggleInCell})(${JSON.stringify(["def row_sum(", original])})`, undefined, { timeout: budget(60_000) });

    // The kernel hover, on the cell's own position: generated Pallas and the VMEM table.
    await softmax().scrollIntoViewIfNeeded();
    const name = await softmax()
      .locator(".view-line", { hasText: "def row_softmax(" })
      .evaluate((line) => {
        for (const span of line.querySelectorAll("span span")) {
          if (span.textContent === "row_softmax") {
            const r = span.getBoundingClientRect();
            return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
          }
        }
        return null;
      });
    need(name !== null, "no 'row_softmax' token on the def line");
    await page.mouse.move(name.x, name.y);
    const hover = page.locator(".monaco-hover").filter({ hasText: /VMEM/ }).first();
    await hover.waitFor({ state: "visible", timeout: budget(60_000) });
    const text = await hover.innerText();
    need(/row_softmax/.test(text) && /pallas_call/.test(text) && (await hover.locator("table").count()) > 0, `not the kernel hover: ${text.slice(0, 300)}`);
    await page.waitForTimeout(400);
    await shot("12b-notebook-hover");
    await page.keyboard.press("Escape");
    await page.mouse.move(5, 500);

    // Show Generated Pallas from the cell the cursor is in.
    await rowSum().locator(".view-line", { hasText: "for tile_c in hl.tile(cols):" }).first().click();
    await runCommand("Helion: Show Generated Pallas");
    const generated = page.locator('.monaco-editor[data-uri*="row_kernels.ipynb.row_sum.0.pallas.py"]').first();
    await generated.waitFor({ timeout: budget(60_000) });
    await page.waitForFunction(
      () => /pallas_call/.test(document.querySelector('.monaco-editor[data-uri*="row_kernels.ipynb.row_sum.0.pallas.py"]')?.textContent ?? ""),
      undefined,
      { timeout: budget(60_000) },
    );
    await shot("12c-notebook-generated");
    await page.locator(".tab", { hasText: "row_sum.0.pallas.py" }).locator(".tab-actions .action-label").first().click();

    // Tune from the cell's lens, then Apply: the kernel's cell gets the config.
    await softmax().scrollIntoViewIfNeeded();
    log(`clicked lens: ${await clickLens(softmax(), /^Tune on/)}`);
    await softmax().locator(".codelens-decoration", { hasText: /Best/ }).first().waitFor({ timeout: budget(150_000) });
    log(`after tuning: ${(await lensTexts(softmax())).join(" | ")}`);
    await shot("12d-notebook-best-lens");
    await clickLens(softmax(), /^Apply/);
    // The cell's decorator had `block_sizes=[8]` (slow enough for Apply's 2 % gain); Apply writes the tuned best.
    const applied = softmax().locator(".view-line", { hasText: /@helion\.kernel\(.*config=helion\.Config\(block_sizes=\[(?!8\])\d+/ });
    await applied.first().waitFor({ timeout: budget(30_000) });
    log(`decorator after Apply: ${await applied.first().innerText()}`);
    await page.locator(".notification-toast", { hasText: /unsaved changes/ }).first().waitFor({ timeout: budget(30_000) });
    await softmax().locator(".codelens-decoration", { hasText: /\(current\)/ }).first().waitFor({ timeout: budget(60_000) });
    await page.waitForTimeout(300);
    await shot("12e-notebook-apply");
    await page.keyboard.press("Control+S");
  });
}
