// Charts drawn as inline SVG, no library: horizontal bar charts (by type, age, strength) and the
// recent-activity timeline.
//
// Invariants: charts are drawn at the pixel width of their container (redrawn on resize by the
// caller), so text stays crisp and readable; every colour comes from style.css classes (the
// page's Content-Security-Policy forbids inline styles); text is set with textContent only, as
// memory names come from other people; each bar is a <g data-testid="bar"> carrying its
// label and value, so tests and assistive tools can read the numbers.

const SVG_NS = "http://www.w3.org/2000/svg";
const ROW = 26;
const BAR = 16;
const CHAR = 7; // average width of one 12px character, for label columns

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function frame(container, height, label) {
  const width = Math.max(container.clientWidth || 0, 240);
  const root = svg("svg", {
    width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label,
  });
  root.append(svg("title", {}, label));
  container.replaceChildren(root);
  return { root, width };
}

/** Shorten a drawn text node's last piece with "…" until the node fits in `maxWidth` pixels
 * (measured, so it works whatever the font; the node must already be in the document). */
function fit(node, piece, maxWidth) {
  const full = piece.textContent;
  if (node.getComputedTextLength() <= maxWidth) return;
  let low = 1;
  let high = full.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    piece.textContent = `${full.slice(0, mid)}…`;
    if (node.getComputedTextLength() <= maxWidth) low = mid;
    else high = mid - 1;
  }
  piece.textContent = `${full.slice(0, low)}…`;
}

function empty(container, message) {
  const note = document.createElement("p");
  note.className = "chart-empty";
  note.textContent = message;
  container.replaceChildren(note);
}

/**
 * Horizontal bars, one per [label, value] entry, in the order given.
 * `colour(label, index)` names a CSS class for the bar; `title` is the chart's accessible name.
 */
export function barChart(container, entries, { title, colour = () => "c0", emptyText } = {}) {
  if (!entries.length || entries.every(([, value]) => !value)) {
    if (emptyText) {
      empty(container, emptyText);
      return;
    }
  }
  const height = entries.length * ROW + 4;
  const { root, width } = frame(container, height, title);
  const longest = Math.max(...entries.map(([label]) => label.length), 4);
  const labelWidth = Math.min(longest * CHAR + 12, Math.round(width * 0.45));
  const valueWidth = 36;
  const span = Math.max(width - labelWidth - valueWidth, 40);
  const max = Math.max(...entries.map(([, value]) => value), 1);
  entries.forEach(([label, value], index) => {
    const y = index * ROW + 2;
    const barWidth = value ? Math.max((value / max) * span, 2) : 0;
    const group = svg("g", { "data-testid": "bar", "data-label": label, "data-value": value });
    const name = svg("text", { x: labelWidth - 8, y: y + BAR - 3, class: "label",
      "text-anchor": "end" }, label);
    group.append(
      svg("title", {}, `${label}: ${value}`),
      name,
      svg("rect", { x: labelWidth, y, width: barWidth, height: BAR, rx: 3,
        class: `bar ${colour(label, index)}` }),
      svg("text", { x: labelWidth + barWidth + 6, y: y + BAR - 3, class: "value" }, value),
    );
    root.append(group);
    fit(name, name, labelWidth - 10);
  });
}

function ago(iso, now) {
  const seconds = Math.max((now - Date.parse(iso)) / 1000, 0);
  if (seconds < 60) return "just now";
  const steps = [[60, "min"], [3600, "h"], [86400, "d"], [86400 * 30, "mo"], [86400 * 365, "y"]];
  let unit = steps[0];
  for (const step of steps) if (seconds >= step[0]) unit = step;
  return `${Math.floor(seconds / unit[0])} ${unit[1]} ago`;
}

/** What changed to a memory most recently: "created", "archived" or "updated". */
export function change(memory) {
  if (memory.status === "archived") return "archived";
  return memory.created === memory.updated ? "created" : "updated";
}

/**
 * The last changes, newest first: one row per memory with when, what happened and its name,
 * the dots placed on a time axis so bursts of activity show as clusters. `onOpen(id)` is
 * called when a row is clicked or activated with the keyboard.
 */
export function activityChart(container, memories, { onOpen } = {}) {
  if (!memories.length) {
    empty(container, "Nothing has changed yet.");
    return;
  }
  const now = Date.now();
  const height = memories.length * ROW + 4;
  const { root, width } = frame(container, height, "Recent activity");
  const times = memories.map((m) => Date.parse(m.updated));
  const newest = Math.max(...times);
  const oldest = Math.min(...times);
  const whenWidth = 84;
  const axisLeft = whenWidth;
  const axisWidth = Math.min(90, Math.round(width * 0.2));
  const textLeft = axisLeft + axisWidth + 14;
  memories.forEach((memory, index) => {
    const y = index * ROW + 2;
    const mid = y + BAR / 2;
    // Oldest on the left, newest on the right, over the span these rows cover.
    const share = newest === oldest ? 1 : (times[index] - oldest) / (newest - oldest);
    const what = change(memory);
    const row = svg("g", { "data-testid": "activity-row", "data-id": memory.id,
      "data-change": what, class: "activity-row", tabindex: 0, role: "button",
      "aria-label": `${what} ${memory.name}, ${ago(memory.updated, now)}` });
    row.append(
      svg("rect", { x: 0, y: y - 4, width, height: ROW - 2, rx: 4, class: "row-bg" }),
      svg("text", { x: whenWidth - 10, y: mid + 4, class: "when", "text-anchor": "end" },
        ago(memory.updated, now)),
      svg("line", { x1: axisLeft, x2: axisLeft + axisWidth, y1: mid, y2: mid, class: "track" }),
      svg("circle", { cx: axisLeft + share * axisWidth, cy: mid, r: 5, class: `dot ${what}` }),
      svg("text", { x: textLeft, y: mid + 4, class: "label" }),
    );
    const label = row.lastChild;
    const name = svg("tspan", {}, memory.name);
    label.append(svg("tspan", { class: `change ${what}` }, `${what} `), name);
    row.append(svg("title", {}, `${memory.name} — ${what} ${memory.updated}`));
    if (onOpen) {
      row.addEventListener("click", () => onOpen(memory.id));
      row.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          onOpen(memory.id);
        }
      });
    }
    root.append(row);
    fit(label, name, width - textLeft - 8);
  });
}

export { ago };
