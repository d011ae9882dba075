// The shapes-from-calls step of the end-to-end run (run.mjs calls it): a file written as upstream Helion writes
// its examples (e2e/fixtures/row_stats.py: no shape lines, bare `@helion.kernel()`, `main()` calls `check(m, n)`,
// which runs the kernels through `run_example`) opened in the editor. Checked: every kernel check() calls gets a
// lens per shape set labelled with the call it came from, and a Tune lens; the kernel hover lists the shape sets
// with their VMEM tables; nothing is an error; the kernel nothing calls gets an information hint (HPL107) whose
// quick fix writes `# helion: args(...)` lines — it takes the same `x` as center_rows, so center_rows's shape
// sets — after which that kernel compiles.
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const CALLS_FILE = "row_stats.py";
const CALLED = ["center_rows", "row_logsumexp", "sigmoid_gate"];
const UNCALLED = "row_range";

/** Puts the fixture into the run's workspace folder. */
export function prepareCalls(here, workspace) {
  copyFileSync(join(here, "fixtures", CALLS_FILE), join(workspace, CALLS_FILE));
}

/**
 * In the page: for the kernel whose def line starts with `def <name>(`, the lens items drawn above its
 * decorator line (the line before the def) and over the line above it, the boxes of the squiggles of `kind` on that decorator line, and
 * the text of the line above the decorator. Null while the def line is not rendered.
 */
const kernelDecorations = ([file, name, kind]) => {
  const editor = document.querySelector(`.monaco-editor[data-uri$="${file}"]`);
  const lines = [...(editor?.querySelectorAll(".view-lines .view-line") ?? [])]
    .map((n) => ({ node: n, top: n.getBoundingClientRect().top, text: n.textContent.replace(/\u00a0/g, " ") }))
    .sort((a, b) => a.top - b.top);
  const def = lines.findIndex((l) => l.text.startsWith(`def ${name}(`));
  if (def < 2) return null;
  const decorator = lines[def - 1];
  const top = decorator.top;
  const lensesOver = (lineTop) => {
    const deco = [...editor.querySelectorAll(".codelens-decoration")].find((d) => {
      const r = d.getBoundingClientRect();
      return d.querySelector("a") !== null && r.bottom <= lineTop + 2 && r.bottom > lineTop - r.height - 4;
    });
    return [...(deco?.querySelectorAll("a") ?? [])].map((a) => a.textContent.trim());
  };
  const box = (r) => ({ x: r.x, y: r.y, width: r.width, height: r.height });
  return {
    decorator: decorator.text,
    above: lines[def - 2].text,
    lenses: lensesOver(top),
    lensesAbove: lensesOver(lines[def - 2].top), // a shape line's lenses sit over the shape line
    squiggles: [...editor.querySelectorAll(`.view-overlays .squiggly-${kind}`)]
      .map((s) => s.getBoundingClientRect())
      .filter((r) => Math.abs(r.top - top) < 4)
      .map(box),
    name: box(
      [...lines[def].node.querySelectorAll("span span")].find((s) => s.textContent === name)?.getBoundingClientRect() ?? { x: 0, y: 0, width: 0, height: 0 },
    ),
  };
};

export async function callsSteps({ page, url, step, shot, budget, need, log, here }) {
  const source = readFileSync(join(here, "fixtures", CALLS_FILE), "utf8").split("\n");
  const lineOf = (text) => {
    const index = source.findIndex((l) => l.startsWith(text));
    need(index >= 0, `${CALLS_FILE} has no line starting with ${JSON.stringify(text)}`);
    return index + 1;
  };
  const calls = source.filter((l) => /^ {4}check\(\d+, \d+\)$/.test(l)).map((l) => l.trim());
  need(calls.length === 2, `main() of ${CALLS_FILE} should call check() twice`);
  const labels = calls.map((call) => `(from ${call} at line ${lineOf(`    ${call}`)})`);
  const editor = page.locator(`.monaco-editor[data-uri$="${CALLS_FILE}"]`).first();
  const at = (name, kind = "error") => page.evaluate(kernelDecorations, [CALLS_FILE, name, kind]);
  const waitFor = (name, kind, condition, ms) =>
    page.waitForFunction(`((k) => k !== null && (${condition})(k))((${kernelDecorations})(${JSON.stringify([CALLS_FILE, name, kind])}))`, undefined, {
      timeout: budget(ms),
    });

  async function runCommand(title) {
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: budget(10_000) });
    await input.fill(`>${title}`);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: budget(10_000) });
    await page.keyboard.press("Enter");
  }

  /** Puts the cursor on line `line`, column `column` (the editor scrolls it into view). */
  async function goToLine(line, column = 1) {
    await page.keyboard.press("Control+1"); // focus the editor (the only one open)
    await page.keyboard.press("Control+G");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: budget(10_000) });
    await input.fill(`:${line}:${column}`);
    await page.keyboard.press("Enter");
    await input.waitFor({ state: "hidden", timeout: budget(5_000) });
  }

  await step("13-shapes-from-calls", [], async () => {
    if ((await page.locator(".monaco-workbench").count()) === 0) {
      await page.goto(url, { timeout: budget(60_000) });
      await page.locator(".monaco-workbench").waitFor({ timeout: budget(60_000) });
    }
    await page.keyboard.press("Escape");
    // Saved unconditionally: an edit the previous step applied may not mark its tab dirty yet; and should
    // closing still ask to save, the answer is Save (a modal left open would block every later step).
    await runCommand("File: Save All");
    await runCommand("View: Close All Editors");
    const save = page.locator(".monaco-dialog-box").getByRole("button", { name: "Save", exact: true });
    if (await save.waitFor({ timeout: 2_000 }).then(() => true, () => false)) await save.click();
    await page.keyboard.press("Control+P");
    const quickOpen = page.locator(".quick-input-widget input");
    await quickOpen.waitFor({ state: "visible", timeout: budget(20_000) });
    await quickOpen.fill(CALLS_FILE);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: CALLS_FILE }).first().waitFor({ timeout: budget(20_000) });
    await page.keyboard.press("Enter");
    await editor.locator(".view-line", { hasText: "def center_rows(" }).waitFor({ timeout: budget(20_000) });

    // Every kernel check() calls: a lens per shape set, labelled with its call in main(), and a Tune lens each.
    for (const name of CALLED) {
      await goToLine(lineOf(`def ${name}(`));
      const wanted = `(k) => ${JSON.stringify(labels)}.every((label) => k.lenses.some((t) => t.endsWith(label))) && k.lenses.filter((t) => /^Tune on /.test(t)).length === 2`;
      await waitFor(name, "error", wanted, 90_000);
      const { lenses, squiggles } = await at(name);
      need(squiggles.length === 0, `an error squiggle on ${name}'s decorator`);
      log(`${name} lenses: ${lenses.join(" | ")}`);
      if (name === CALLED[0]) {
        need(lenses[0] === `x: bf16[1024, 512] ${labels[0]}`, `${name}'s first shape set is not check()'s x: ${lenses[0]}`);
        await shot("13-shapes-from-calls");
      }
    }

    // The kernel hover: each shape set with the call it came from and its VMEM table.
    await goToLine(lineOf("def center_rows("));
    await waitFor("center_rows", "error", "(k) => k.name.width > 0", 10_000);
    const name = (await at("center_rows")).name;
    await page.mouse.move(name.x + name.width / 2, name.y + name.height / 2);
    const hover = page.locator(".monaco-hover").filter({ hasText: /VMEM/ }).first();
    await hover.waitFor({ state: "visible", timeout: budget(60_000) });
    const text = (await hover.innerText()).replace(/\s+/g, " ");
    for (const [index, call] of calls.entries()) {
      const shapes = call.replace(/^check\((\d+), (\d+)\)$/, "x=bf16[$1, $2]"); // check(m, n) builds x as randn([m, n])
      const title = `Shape set ${index}: ${shapes} — from ${call} at line ${lineOf(`    ${call}`)}`;
      need(text.includes(title), `the hover does not show "${title}": ${text.slice(0, 400)}`);
    }
    need((await hover.locator("table").count()) >= 2, "the hover has no VMEM table per shape set");
    await page.waitForTimeout(400); // let the hover finish fading in
    await shot("13a-shapes-from-calls-hover");
    await page.keyboard.press("Escape");
    await page.mouse.move(5, 500);

    // The kernel nothing calls: an information squiggle on its decorator (no error), HPL107 in its hover.
    await goToLine(lineOf(`def ${UNCALLED}(`));
    await waitFor(UNCALLED, "info", "(k) => k.squiggles.length > 0", 60_000);
    need((await at(UNCALLED)).squiggles.length === 0, `an error squiggle on ${UNCALLED}'s decorator`);
    const hint = (await at(UNCALLED, "info")).squiggles[0];
    await page.mouse.move(hint.x + Math.min(hint.width / 2, 20), hint.y + hint.height / 2);
    const message = page.locator(".monaco-hover").filter({ hasText: /HPL107/ }).first();
    await message.waitFor({ state: "visible", timeout: budget(15_000) });
    need(/has no shape set/.test(await message.innerText()), "the HPL107 hover does not say the kernel has no shape set");
    await page.waitForTimeout(400);
    await shot("13b-shapes-from-calls-hint");
    await page.keyboard.press("Escape");
    await page.mouse.move(5, 500);

    // Anywhere in the file: the Problems view lists HPL107 as information and no error at all.
    await runCommand("View: Focus Problems");
    const problems = page.locator(".markers-panel");
    await problems.locator(".monaco-list-row", { hasText: "HPL107" }).first().waitFor({ timeout: budget(20_000) });
    const markers = (await problems.locator(".monaco-list-row").evaluateAll((rows) => {
      let file = "";
      return rows
        .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)
        .map((row) => {
          const text = row.textContent.replace(/\s+/g, " ").trim();
          if (row.getAttribute("aria-level") === "1") file = text;
          const severity = ["error", "warning", "info"].find((s) => row.querySelector(`.codicon-${s}`) !== null);
          return { file, severity, text, level: row.getAttribute("aria-level") };
        })
        .filter((m) => m.level === "2");
    })).filter((m) => m.file.startsWith(CALLS_FILE));
    log(`problems in ${CALLS_FILE}: ${markers.map((m) => `${m.severity}: ${m.text}`).join(" | ")}`);
    need(markers.some((m) => /HPL107/.test(m.text) && m.severity === "info"), "HPL107 is not listed as information");
    need(!markers.some((m) => m.severity === "error"), `errors in ${CALLS_FILE}`);
    await shot("13c-shapes-from-calls-problems");
    await runCommand("View: Hide Panel");

    // Its quick fix writes shape lines above the kernel (center_rows's: the same argument), which then compiles
    // and gets a Tune lens per shape set.
    await goToLine(lineOf(`def ${UNCALLED}(`) - 1, 2);
    const menu = page.locator(".action-widget .monaco-list-row.action", { hasText: "shape line" }).first();
    for (let attempt = 1; ; attempt++) {
      // Asked again as a user would if the first answer comes back empty (a busy machine).
      await page.keyboard.press("Control+.");
      try {
        await menu.waitFor({ state: "visible", timeout: budget(10_000) });
        break;
      } catch (error) {
        if (attempt >= 3) throw error;
        await page.keyboard.press("Escape");
      }
    }
    const fix = (await menu.innerText()).trim();
    const offered = await page.locator(".action-widget .monaco-list-row.action").allInnerTexts();
    log(`quick fixes: ${offered.join(" | ")}`);
    // Chosen with the keyboard, as 07c does: the menu's rows move while it opens.
    for (let i = 0; i < offered.findIndex((t) => t.trim() === fix); i++) await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Enter");
    need(/^Add center_rows's shape lines \(the same arguments\): # helion: args\(x=\w+\[\d+, \d+\]\)$/.test(fix),
      `not center_rows's shape lines: ${fix}`);
    // The lenses follow the text at once (the line right above the decorator is the last shape line written);
    // diagnostics are refreshed on save (as for any .py file).
    await waitFor(UNCALLED, "info", `(k) => k.above.trim().startsWith("# helion: args(x=") && k.lensesAbove.some((t) => /^Tune on /.test(t))`, 90_000);
    await page.keyboard.press("Control+S");
    await page.locator(".tab.active.dirty").waitFor({ state: "detached", timeout: budget(10_000) });
    await waitFor(UNCALLED, "info", "(k) => k.squiggles.length === 0", 60_000);
    need((await at(UNCALLED)).squiggles.length === 0, `an error squiggle on ${UNCALLED}'s decorator after the fix`);
    log(`${UNCALLED} after the fix: ${(await at(UNCALLED)).lensesAbove.join(" | ")}`);
    await page.waitForTimeout(300);
    await shot("13d-shapes-from-calls-quick-fix");
  });
}
