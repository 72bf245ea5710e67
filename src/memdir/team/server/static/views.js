// Rendering memories: the result list, one memory's fields, the conflicts, and the edit form.
//
// Invariants: memory text (names, bodies, tags) comes from other people on a team server, so
// it is only ever set with textContent, never parsed as HTML; views build DOM and report user
// intent through callbacks, they never call the API themselves (app.js does).

// The icons of the built-in taxonomies (src/memdir/core/taxonomy.py); unknown types get their
// initial, so a custom taxonomy still reads well.
const ICONS = {
  user: "[U]", feedback: "[!]", preference: "[*]", preferences: "[*]", policy: "[P]",
  decision: "[D]", decisions: "[D]", procedure: "[>]", procedures: "[>]", workflow: "[>]",
  pitfall: "[X]", incidents: "[X]", fact: "[F]", reference: "[R]", project: "[J]",
  summary: "[~]", episode: "[E]", solution: "[S]", pattern: "[P]", principles: "[P]",
  architecture: "[A]", session: "[#]",
};

// The default preset's types, offered in the edit form (the server checks the real taxonomy
// and its error lists the valid types).
export const KNOWN_TYPES = ["user", "feedback", "preference", "policy", "decision", "procedure",
  "pitfall", "fact", "reference", "project"];

export function icon(type) {
  return ICONS[type] || `[${(type || "?").charAt(0).toUpperCase()}]`;
}

/** Build an element: h("p", {class: "x", "data-testid": "y"}, "text", child, ...). */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function when(iso) {
  if (!iso) return "never";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function typeBadge(type) {
  return h("span", { class: "type", "data-testid": "type" },
    h("span", { class: "icon", "aria-hidden": "true" }, icon(type)), ` ${type}`);
}

/** The result list. `items` are {memory, score?}; `selectedId` gets aria-current. */
export function renderResults(list, items, { selectedId, onOpen }) {
  list.replaceChildren(...items.map(({ memory, score }) => {
    const meta = score === undefined
      ? h("span", { class: "score" }, `relevance ${memory.relevance}`)
      : h("span", { class: "score", "data-testid": "score" }, `score ${score.toFixed(3)}`);
    const button = h("button", {
      type: "button", class: "result", "data-testid": "result", "data-id": memory.id,
      "data-type": memory.type, "data-status": memory.status,
      "aria-current": memory.id === selectedId ? "true" : undefined,
      onclick: () => onOpen(memory.id),
    },
    h("span", { class: "result-head" }, typeBadge(memory.type),
      h("span", { class: "name", "data-testid": "result-name" }, memory.name),
      memory.status === "archived" ? h("span", { class: "badge" }, "archived") : null,
      meta),
    h("span", { class: "description", "data-testid": "result-description" },
      memory.description));
    return h("li", {}, button);
  }));
}

function field(label, value, testid) {
  return [h("dt", {}, label), h("dd", { "data-testid": testid }, value)];
}

function chips(values) {
  if (!values.length) return h("span", { class: "none" }, "none");
  return h("span", { class: "chips" }, values.map((v) => h("code", { class: "chip" }, v)));
}

/** One memory, all of its fields, with Edit and Archive/Restore actions. */
export function renderDetail(panel, memory, { onEdit, onArchive, onRestore, message }) {
  const archived = memory.status === "archived";
  const title = h("h2", { tabindex: "-1", "data-testid": "detail-name" }, memory.name);
  panel.replaceChildren(h("article", { class: "memory", "data-id": memory.id },
    h("header", { class: "memory-head" }, typeBadge(memory.type), title,
      h("span", { class: `badge ${memory.status}`, "data-testid": "detail-status" },
        memory.status)),
    h("p", { class: "description", "data-testid": "detail-description" }, memory.description),
    h("div", { class: "actions" },
      h("button", { type: "button", "data-testid": "edit", onclick: onEdit }, "Edit"),
      archived
        ? h("button", { type: "button", "data-testid": "restore", onclick: onRestore }, "Restore")
        : h("button", { type: "button", class: "quiet", "data-testid": "archive",
          onclick: onArchive }, "Archive")),
    h("p", { class: "status-message", role: "status", "data-testid": "detail-message" },
      message || ""),
    h("dl", { class: "fields" },
      field("Type", memory.type, "detail-type"),
      field("Scope", memory.scope, "detail-scope"),
      field("Relevance", String(memory.relevance), "detail-relevance"),
      field("Tags", chips(memory.tags), "detail-tags"),
      field("Paths", chips(memory.paths), "detail-paths"),
      field("Source", memory.source, "detail-source"),
      field("Created", when(memory.created), "detail-created"),
      field("Updated", when(memory.updated), "detail-updated"),
      field("Reinforced", String(memory.reinforced), "detail-reinforced"),
      field("Access count", String(memory.access_count), "detail-access-count"),
      field("Last accessed", when(memory.last_accessed), "detail-last-accessed"),
      field("Used", String(memory.used_count ?? 0), "detail-used-count"),
      field("Last used", when(memory.last_used), "detail-last-used"),
      field("Id", h("code", {}, memory.id), "detail-id"),
      field("File", h("code", { class: "path" }, memory.file || "—"), "detail-file")),
    h("h3", {}, "Content"),
    h("pre", { class: "content", "data-testid": "detail-content" }, memory.content)));
  return title;
}

const percent = (ratio) => (ratio === null || ratio === undefined
  ? "–" : `${Math.round(ratio * 100)}%`);

function useList(memories, testid, emptyText, describe, onOpen) {
  if (!memories.length) return h("p", { class: "chart-empty", "data-testid": testid }, emptyText);
  return h("ol", { class: "use-list", "data-testid": testid }, memories.map((m) =>
    h("li", {}, h("button", {
      type: "button", class: "use-row", "data-testid": "use-row", "data-id": m.id,
      "data-used": m.used, "data-injected": m.injected, onclick: () => onOpen(m.id),
    }, typeBadge(m.type), h("span", { class: "name" }, m.name),
    h("span", { class: "score" }, describe(m))))));
}

/** ": 37 (showing 10)" after the never-used heading; ": 3" when all are listed. */
function neverUsedCount(use) {
  const listed = (use.never_used || []).length;
  const count = use.never_used_count ?? listed;
  return count > listed ? `: ${count} (showing ${listed})` : (count ? `: ${count}` : "");
}

/**
 * How useful injected memories were (GET /api/memory/stats `usefulness`): the injections the
 * agent drew on, per scope, the most used memories and those injected often but never used.
 */
export function renderUsefulness(panel, use, { onOpen }) {
  const scopes = Object.entries(use.by_scope || {});
  panel.replaceChildren(
    h("p", { class: "use-summary", "data-testid": "use-summary", "data-used": use.used,
      "data-injected": use.injected },
    `${use.used} of ${use.injected} injections used (${percent(use.ratio)}) · ` +
      `shown ${use.shown} times in all`),
    scopes.length > 1 ? h("ul", { class: "use-scopes" }, scopes.map(([scope, c]) =>
      h("li", { "data-testid": "use-scope", "data-scope": scope },
        `${scope}: ${c.used} of ${c.injected} used (${percent(c.ratio)})`))) : "",
    h("div", { class: "use-columns" },
      h("div", {}, h("h3", {}, "Most useful"),
        useList(use.most_useful || [], "most-useful", "No memory used yet.",
          (m) => `${m.used} used · ${m.reinforced} reinforced`, onOpen)),
      h("div", {}, h("h3", {}, `Injected ${use.never_used_after}+ times, never used` +
          neverUsedCount(use)),
        useList(use.never_used || [], "never-used", "None: nothing to archive.",
          (m) => `${m.injected} injected · ${m.shown} shown`, onOpen))));
}

/** "10 of 37 conflicts" while more are left to show; "13 conflicts", "1 conflict" when all are. */
export function conflictCount(shown, total) {
  const noun = total === 1 ? "conflict" : "conflicts";
  return shown < total ? `${shown} of ${total} ${noun}` : `${total} ${noun}`;
}

function conflictSide(id, label, known, onOpen) {
  const memory = known.get(id);
  return h("li", {}, h("button", {
    type: "button", class: "use-row conflict-memory", "data-testid": "conflict-memory",
    "data-id": id, "data-side": label, onclick: () => onOpen(id),
  }, h("span", { class: "side" }, label),
  memory ? typeBadge(memory.type) : null,
  h("span", { class: "name", "data-testid": "conflict-name" }, memory ? memory.name : id),
  h("code", { class: "score", "data-testid": "conflict-id" }, id)));
}

/**
 * The conflicts shown so far (GET /api/memory/conflicts pages, in order): per conflict the
 * reason and the two memories, the older first, each opening in the detail pane. `known`
 * maps ids to memories the page already holds (their names); an unknown id is shown as is.
 * "Show more" (`onMore`) is there while fewer than `total` are shown.
 */
export function renderConflicts(panel, { conflicts, total, known, onOpen, onMore }) {
  if (!total) {
    panel.replaceChildren(h("p", { class: "chart-empty", "data-testid": "conflicts-summary",
      "data-shown": 0, "data-total": 0 }, "No conflicts."));
    return;
  }
  panel.replaceChildren(
    h("p", { class: "use-summary", "data-testid": "conflicts-summary",
      "data-shown": conflicts.length, "data-total": total },
    conflictCount(conflicts.length, total)),
    h("ol", { class: "conflict-list", "data-testid": "conflict-list" }, conflicts.map((c) =>
      h("li", { class: "conflict", "data-testid": "conflict", "data-older": c.memories[0],
        "data-newer": c.memories[1] },
      h("p", { class: "reason" },
        h("span", { "data-testid": "conflict-reason" }, c.reason),
        h("span", { class: "muted" }, ` · ${c.type} · ${c.scope}`)),
      h("ul", { class: "conflict-pair", "aria-label": "The two memories" },
        conflictSide(c.memories[0], "older", known, onOpen),
        conflictSide(c.memories[1], "newer", known, onOpen))))));
  if (conflicts.length < total) {
    panel.append(h("button", { type: "button", class: "quiet", "data-testid": "conflicts-more",
      onclick: onMore }, "Show more"));
  }
}

function input(label, name, value, attrs = {}) {
  const id = `edit-${name}`;
  return h("div", { class: "form-row" },
    h("label", { for: id }, label),
    h("input", { id, name, value: value ?? "", "data-testid": id, ...attrs }));
}

const splitList = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);

/**
 * The edit form. `onSave(changes)` receives only the fields that differ from `memory`, in
 * the shape PATCH /api/memory/{id} takes; returns the form and a function that shows an
 * error next to it.
 */
export function renderEditForm(panel, memory, { onSave, onCancel }) {
  const typeList = h("datalist", { id: "type-options" },
    [...new Set([...KNOWN_TYPES, memory.type])].map((t) => h("option", { value: t })));
  const errorBox = h("div", { class: "error", role: "alert", "data-testid": "edit-error",
    hidden: true },
  h("p", { class: "message", "data-testid": "edit-error-message" }),
  h("p", { class: "hint", "data-testid": "edit-error-hint" }));
  const form = h("form", { class: "edit-form", "data-testid": "edit-form", novalidate: true },
    h("h2", { tabindex: "-1" }, "Edit ", h("span", { class: "muted" }, memory.name)),
    input("Name", "name", memory.name, { required: true }),
    input("Description", "description", memory.description),
    input("Type", "type", memory.type, { list: "type-options", autocomplete: "off" }),
    typeList,
    input("Tags (comma-separated)", "tags", memory.tags.join(", ")),
    input("Paths (comma-separated globs)", "paths", memory.paths.join(", ")),
    input("Relevance (0–1)", "relevance", memory.relevance,
      { type: "number", min: 0, max: 1, step: 0.05 }),
    h("div", { class: "form-row" },
      h("label", { for: "edit-content" }, "Content"),
      h("textarea", { id: "edit-content", name: "content", rows: 12,
        "data-testid": "edit-content" }, memory.content)),
    errorBox,
    h("div", { class: "actions" },
      h("button", { type: "submit", "data-testid": "edit-save" }, "Save"),
      h("button", { type: "button", class: "quiet", "data-testid": "edit-cancel",
        onclick: onCancel }, "Cancel"),
      h("span", { class: "muted" }, "Esc cancels")));
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") onCancel();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const changes = {};
    for (const key of ["name", "description", "type", "content"]) {
      const value = String(data.get(key));
      const current = key === "content" ? memory.content : memory[key];
      if (value !== current) changes[key] = value;
    }
    for (const key of ["tags", "paths"]) {
      const values = splitList(String(data.get(key)));
      if (values.join("\n") !== memory[key].join("\n")) changes[key] = values;
    }
    const relevance = String(data.get("relevance")).trim();
    if (relevance !== String(memory.relevance)) {
      // A number when it is one; otherwise the text goes as typed and the API explains.
      changes.relevance = relevance !== "" && !Number.isNaN(Number(relevance))
        ? Number(relevance) : relevance;
    }
    onSave(changes);
  });
  panel.replaceChildren(form);
  const showError = (error) => {
    errorBox.hidden = false;
    errorBox.querySelector(".message").textContent = error.message;
    errorBox.querySelector(".hint").textContent = error.hint || "";
    // Next to the Save button, and scrolled to: the person just clicked there.
    errorBox.scrollIntoView({ block: "nearest" });
  };
  return { form, showError };
}
