// Reading code lenses off the page, shared by the e2e steps (run.mjs, hovers.mjs).

/**
 * In the page (page.evaluate, or its source inside page.waitForFunction): the lens texts, with their boxes, drawn
 * just above the line of the editor whose URI ends with `file` and whose text is `text`.
 */
export const lensesOver = ([file, text]) => {
  const node = document.querySelector(`.monaco-editor[data-uri$="${file}"]`);
  const line = [...(node?.querySelectorAll(".view-line") ?? [])].find((n) => n.textContent.replace(/\u00a0/g, " ").trim() === text);
  if (!line) return [];
  const top = line.getBoundingClientRect().top;
  const deco = [...node.querySelectorAll(".codelens-decoration")].find((d) => {
    const r = d.getBoundingClientRect();
    return d.querySelector("a") !== null && r.bottom <= top + 2 && r.bottom > top - r.height - 4;
  });
  return [...(deco?.querySelectorAll("a") ?? [])].map((a) => {
    const r = a.getBoundingClientRect();
    return { text: a.textContent.trim(), x: r.x, y: r.y, width: r.width, height: r.height };
  });
};
