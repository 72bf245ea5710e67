// The page's wiring: the token, the filters, the result list, the selected memory, the
// charts and the conflicts, kept in one small `state` and redrawn from it.
//
// Invariants: only the answer to the latest list request is drawn (a slow answer to an older
// query never overwrites a newer one, and the same for the conflicts); after any change to a
// memory (save, archive, restore) the list, the stats, the charts and the conflicts are
// fetched again, so what the page shows is what the server holds; the conflicts' names come
// from the memories the page already holds (never one request per memory, and never
// GET /api/memory/{id}, which counts as an access); a 401 from any call stops and asks for
// the token again, with the API's message and hint.

import { ApiError, adoptTokenFromFragment, api, clearToken, getToken, setToken } from "./api.js";
import { activityChart, barChart } from "./charts.js";
import {
  renderConflicts, renderDetail, renderEditForm, renderResults, renderUsefulness,
} from "./views.js";

const $ = (selector) => document.querySelector(selector);
const AGE_ORDER = ["today", "this week", "this month", "older"];
const LIST_LIMIT = 200;
const CONFLICT_PAGE = 10;
const CONFLICT_MAX = 500; // the API's largest page

const state = {
  q: "", type: "", scope: "", status: "active", order: "relevance",
  stats: null, activity: [], selected: null, listSeq: 0,
  conflicts: [], conflictTotal: 0, conflictSeq: 0,
  known: new Map(), // id -> the latest copy of that memory any answer brought
};

function remember(memories) {
  for (const memory of memories) state.known.set(memory.id, memory);
}

// -- errors and the token ---------------------------------------------------------------------

function showBanner(error) {
  const banner = $("[data-testid=app-error]");
  if (!error) {
    banner.hidden = true;
    return;
  }
  banner.replaceChildren();
  const message = document.createElement("strong");
  message.textContent = error.message;
  const hint = document.createElement("span");
  hint.textContent = error.hint ? ` — ${error.hint}` : "";
  banner.append(message, hint);
  banner.hidden = false;
}

function askForToken(error) {
  $("#app").hidden = true;
  $("#token-panel").hidden = false;
  const box = $("[data-testid=token-error]");
  box.hidden = !error;
  if (error) {
    $("[data-testid=token-error-message]").textContent = error.message;
    $("[data-testid=token-error-hint]").textContent = error.hint || "";
  }
  $("#token-input").value = "";
  // Changing a token that works can be given up; after a 401 there is none to go back to.
  $("#token-cancel").hidden = !getToken();
  $("#token-input").focus();
}

/** Run an API action; a 401 asks for the token, other errors go to `onError` or the banner. */
async function guarded(action, onError) {
  try {
    const result = await action();
    showBanner(null);
    return result;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.status === 401) {
      clearToken();
      askForToken(error);
    } else if (onError) {
      onError(error);
    } else {
      showBanner(error);
    }
    return undefined;
  }
}

// -- loading --------------------------------------------------------------------------------

function fillSelect(select, counts, allLabel) {
  const current = select.value;
  const options = [new Option(allLabel, "")];
  for (const [name, count] of Object.entries(counts)) options.push(new Option(`${name} (${count})`, name));
  select.replaceChildren(...options);
  // Keep the chosen filter even when nothing of it is left (e.g. the last one archived).
  if (current && !(current in counts)) select.append(new Option(`${current} (0)`, current));
  select.value = current;
}

function drawCharts() {
  const stats = state.stats;
  if (!stats) return;
  const types = Object.keys(stats.by_type);
  barChart($("[data-testid=chart-type]"), Object.entries(stats.by_type), {
    title: "Memories by type", emptyText: "No memories yet.",
    colour: (label) => `c${types.indexOf(label) % 8}`,
  });
  const age = stats.by_age || {};
  barChart($("[data-testid=chart-age]"), AGE_ORDER.filter((k) => k in age).map((k) => [k, age[k]]),
    { title: "Memories by age", emptyText: "No memories yet.", colour: () => "age" });
  // The bands' long labels carry notes in parentheses; the chart's caption explains them.
  const strength = Object.entries(stats.strength || {})
    .map(([band, count]) => [band.replace(/\s*\(.*\)$/, ""), count]);
  barChart($("[data-testid=chart-strength]"), strength,
    { title: "Active memories by strength", emptyText: "No active memories.",
      colour: (_, index) => `s${index}` });
  activityChart($("[data-testid=chart-activity]"), state.activity, { onOpen: openMemory });
  if (stats.usefulness) {
    renderUsefulness($("[data-testid=usefulness]"), stats.usefulness, { onOpen: openMemory });
  }
}

async function loadStats() {
  const [stats, recent] = await Promise.all([
    api("/api/memory/stats"),
    api("/api/memory", { params: { order: "updated", status: "all", limit: 10 } }),
  ]);
  state.stats = stats;
  state.activity = recent.memories;
  remember(recent.memories);
  const status = stats.by_status || {};
  $("[data-testid=totals]").textContent =
    `${stats.total} memories · ${status.active || 0} active · ${status.archived || 0} archived`;
  fillSelect($("#f-type"), stats.by_type, "all");
  fillSelect($("#f-scope"), stats.by_scope, "all");
  drawCharts();
}

async function fetchItems() {
  const filters = { type: state.type, scope: state.scope };
  if (!state.q) {
    const answer = await api("/api/memory", { params: {
      ...filters, status: state.status, order: state.order, limit: LIST_LIMIT } });
    return answer.memories.map((memory) => ({ memory }));
  }
  const answer = await api("/api/memory/search", { params: {
    q: state.q, ...filters, limit: 100, include_archived: state.status !== "active" } });
  // Search has no status filter of its own: "archived" keeps the archived hits only.
  let items = answer.hits.filter((hit) => state.status !== "archived" ||
    hit.memory.status === "archived");
  if (state.order === "recent") {
    items = [...items].sort((a, b) => b.memory.created.localeCompare(a.memory.created));
  }
  return items.map((hit) => ({ memory: hit.memory, score: hit.score }));
}

async function loadList() {
  const seq = ++state.listSeq;
  const list = $("[data-testid=results]");
  list.setAttribute("aria-busy", "true");
  const items = await guarded(fetchItems);
  if (seq !== state.listSeq || items === undefined) return;
  remember(items.map((item) => item.memory));
  list.removeAttribute("aria-busy");
  renderResults(list, items, { selectedId: state.selected?.id, onOpen: openMemory });
  const what = state.q ? `for “${state.q}”` : "";
  $("[data-testid=results-summary]").textContent =
    `${items.length} ${items.length === 1 ? "memory" : "memories"} ${what}`.trim();
  list.dataset.state = "ready";
}

// -- conflicts ------------------------------------------------------------------------------

const pairKey = (conflict) => conflict.memories.join(" ");

/** One page of conflicts, with every memory it names in `state.known`: the list and the
 * recent activity usually hold them all; otherwise one list of the active memories (the
 * conflicts are among them) fills the gaps. */
async function fetchConflicts(offset, limit) {
  const answer = await api("/api/memory/conflicts", { params: { limit, offset } });
  const missing = answer.conflicts.some((c) => c.memories.some((id) => !state.known.has(id)));
  if (missing) remember((await api("/api/memory", { params: { status: "active" } })).memories);
  return answer;
}

function drawConflicts(focusFrom) {
  const panel = $("[data-testid=conflicts]");
  renderConflicts(panel, {
    conflicts: state.conflicts, total: state.conflictTotal, known: state.known,
    onOpen: openMemory, onMore: moreConflicts,
  });
  // After "Show more", the keyboard goes on at the first conflict it added.
  if (focusFrom !== undefined) {
    panel.querySelectorAll("[data-testid=conflict]")[focusFrom]
      ?.querySelector("button")?.focus();
  }
}

/** The first page again, as long as the pages shown so far (a refresh keeps "Show more"). */
async function loadConflicts() {
  const seq = ++state.conflictSeq;
  const limit = Math.min(CONFLICT_MAX, Math.max(CONFLICT_PAGE, state.conflicts.length));
  const answer = await guarded(() => fetchConflicts(0, limit));
  if (seq !== state.conflictSeq || !answer) return;
  state.conflicts = answer.conflicts;
  state.conflictTotal = answer.total;
  drawConflicts();
}

async function moreConflicts() {
  const seq = ++state.conflictSeq;
  const shown = state.conflicts.length;
  const answer = await guarded(() => fetchConflicts(shown, CONFLICT_PAGE));
  if (seq !== state.conflictSeq || !answer) return;
  // Should the store have changed between pages, a pair already shown is not shown twice.
  const seen = new Set(state.conflicts.map(pairKey));
  state.conflicts = [...state.conflicts, ...answer.conflicts.filter((c) => !seen.has(pairKey(c)))];
  state.conflictTotal = Math.max(answer.total, state.conflicts.length);
  drawConflicts(shown);
}

async function refreshAll() {
  await Promise.all([guarded(loadStats), loadList()]);
  await loadConflicts(); // after the lists, whose memories give the conflicts their names
}

// -- one memory ----------------------------------------------------------------------------

function showMemory(memory, message) {
  state.selected = memory;
  for (const node of document.querySelectorAll("[data-testid=result]")) {
    if (node.dataset.id === memory.id) node.setAttribute("aria-current", "true");
    else node.removeAttribute("aria-current");
  }
  return renderDetail($("#detail"), memory, {
    message,
    onEdit: () => editMemory(memory),
    onArchive: () => changeStatus(memory, "archive"),
    onRestore: () => changeStatus(memory, "restore"),
  });
}

async function openMemory(id) {
  const answer = await guarded(() => api(`/api/memory/${encodeURIComponent(id)}`));
  if (!answer) return;
  remember([answer.memory]);
  showMemory(answer.memory).focus();
}

function editMemory(memory) {
  const { form, showError } = renderEditForm($("#detail"), memory, {
    onCancel: () => showMemory(memory).focus(),
    onSave: async (changes) => {
      if (!Object.keys(changes).length) {
        showMemory(memory, "Nothing changed.").focus();
        return;
      }
      const answer = await guarded(() => api(`/api/memory/${encodeURIComponent(memory.id)}`,
        { method: "PATCH", body: changes }), showError);
      if (!answer) return;
      remember([answer.memory]);
      // The memories the edited one may contradict (any type and scope); both are kept.
      const contradicted = (answer.conflicts || []).map((m) => `${m.name} (${m.id})`);
      const note = contradicted.length ? ` May contradict: ${contradicted.join(", ")}.` : "";
      showMemory(answer.memory, `Saved.${note}`).focus();
      await refreshAll();
    },
  });
  form.querySelector("input").focus();
}

async function changeStatus(memory, action) {
  const answer = await guarded(() => api(
    `/api/memory/${encodeURIComponent(memory.id)}/${action}`, { method: "POST" }));
  if (!answer) return;
  remember([answer.memory]);
  showMemory(answer.memory, action === "archive"
    ? "Archived: still searchable, never injected." : "Restored.");
  await refreshAll();
  $(`[data-testid=${action === "archive" ? "restore" : "archive"}]`)?.focus();
}

// -- start ---------------------------------------------------------------------------------

async function start() {
  $("#token-panel").hidden = true;
  $("#app").hidden = false;
  await refreshAll();
}

function bindControls() {
  $("#search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.q = $("#q").value.trim();
    loadList();
  });
  let typing;
  $("#q").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      const q = $("#q").value.trim();
      if (q !== state.q) {
        state.q = q;
        loadList();
      }
    }, 300);
  });
  for (const [id, key] of [["#f-type", "type"], ["#f-scope", "scope"], ["#f-status", "status"],
    ["#f-order", "order"]]) {
    $(id).addEventListener("change", (event) => {
      state[key] = event.target.value;
      loadList();
    });
  }
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("#token-input").value.trim();
    if (!token) return;
    setToken(token);
    start();
  });
  $("#token-change").addEventListener("click", () => askForToken(null));
  $("#token-cancel").addEventListener("click", () => {
    $("#token-panel").hidden = true;
    $("#app").hidden = false;
  });
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest?.("input, textarea, select");
    if (event.key === "/" && !typing) {
      event.preventDefault();
      $("#q").focus();
    }
  });
  let resizing;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(drawCharts, 150);
  });
}

async function showServer() {
  try {
    const health = await api("/healthz", { auth: false });
    $("[data-testid=server-info]").textContent = `${health.store} store · v${health.version}`;
  } catch (error) {
    showBanner(error);
  }
}

function boot() {
  bindControls();
  adoptTokenFromFragment();
  showServer();
  if (getToken()) start();
  else askForToken(null);
}

boot();
