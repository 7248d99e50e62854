// Building the page: elements from data (text always as text, never parsed as HTML, so no name,
// message or traceback from the platform can inject markup), and number formats.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  return append(el, ...children);
}

// Children into an element as h() takes them: arrays flattened, null, undefined and false (a
// part the page leaves out) skipped, the rest as nodes or text. The DOM's own append would
// write "null" and "[object HTMLDivElement]" instead.
export function append(el, ...children) {
  el.append(...children.flat(Infinity)
    .filter((c) => c !== undefined && c !== null && c !== false)
    .map((c) => (c instanceof Node ? c : String(c))));
  return el;
}

export function table(columns, rows, { id, empty = "nothing yet" } = {}) {
  // columns: [header, (row) => cell] pairs; a cell is text or a node
  const head = h("tr", {}, columns.map(([title]) => h("th", {}, title)));
  const body = rows.length
    ? rows.map((row) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(row)))))
    : [h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, empty))];
  return h("table", { id }, h("thead", {}, head), h("tbody", {}, body));
}

export function fields(pairs) {
  return h("dl", { class: "fields" },
    pairs.filter(([, v]) => v !== undefined)
      .map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v ?? "–"))));
}

export function num(value, digits = 2) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  return value.toLocaleString("en-US", { maximumFractionDigits: digits,
                                         minimumFractionDigits: Math.min(digits, 1) });
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1) return `${(value * 1000).toFixed(1)} ms`;
  if (value < 120) return `${value.toFixed(2)} s`;
  return `${(value / 60).toFixed(1)} min`;
}

export function usd(value) {
  if (value === null || value === undefined) return "–";
  return `$${value < 0.01 ? value.toFixed(6) : value.toFixed(4)}`;
}

export function when(epochSeconds) {
  if (!epochSeconds) return "–";
  return new Date(epochSeconds * 1000).toLocaleString("en-GB", { hour12: false });
}

export function badge(status) {
  return h("span", { class: `badge ${status}` }, status);
}

export function link(href, text) {
  return h("a", { href }, text);
}

export function pre(value) {
  return h("pre", {}, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}
