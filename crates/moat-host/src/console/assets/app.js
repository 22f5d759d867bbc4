// The moat console's page: tabs, the live list of calls waiting for consent (server-sent
// events), and the views read from /api/*. Every value from the gateway is put in the page
// as text (textContent), never as markup. Every action sends the session's CSRF token.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const sections = ["pending", "servers", "tools", "pins", "audit", "config"];
const status = document.getElementById("status");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function say(text) {
  status.textContent = text;
}

async function getJson(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function time(ms) {
  return new Date(ms).toLocaleString();
}

// Tabs: the fragment names the section, so a section can be linked to and the browser's
// back button works; arrow keys move between tabs.
function show(name) {
  if (!sections.includes(name)) name = "pending";
  for (const s of sections) {
    const panel = document.getElementById(s);
    const tab = document.getElementById("tab-" + s);
    panel.hidden = s !== name;
    tab.setAttribute("aria-selected", String(s === name));
    tab.tabIndex = s === name ? 0 : -1;
  }
  refresh(name);
}

document.querySelector('[role="tablist"]').addEventListener("keydown", (event) => {
  const current = sections.findIndex((s) => document.getElementById("tab-" + s).getAttribute("aria-selected") === "true");
  let next = null;
  if (event.key === "ArrowRight") next = (current + 1) % sections.length;
  if (event.key === "ArrowLeft") next = (current + sections.length - 1) % sections.length;
  if (next === null) return;
  event.preventDefault();
  location.hash = sections[next];
  document.getElementById("tab-" + sections[next]).focus();
});
window.addEventListener("hashchange", () => show(location.hash.slice(1)));

function refresh(name) {
  const views = { servers: loadServers, tools: loadTools, pins: loadPins, config: loadConfig };
  if (views[name]) views[name]().catch((e) => say("Could not load " + name + ": " + e.message));
}

for (const button of document.querySelectorAll("button.refresh")) {
  button.addEventListener("click", () => refresh(button.dataset.view));
}

// Pending consent, live.
const choices = [
  ["once", "Approve once", "approve"],
  ["session", "Approve for this session", "approve"],
  ["always", "Always approve", "approve"],
  ["deny", "Deny", "deny"],
];
let seen = new Set();

function renderPending(list) {
  const box = document.getElementById("pending-list");
  box.replaceChildren();
  const count = document.getElementById("pending-count");
  count.textContent = String(list.length);
  count.classList.toggle("on", list.length > 0);
  document.getElementById("pending-empty").hidden = list.length > 0;
  for (const item of list) {
    const heading = "call-" + item.id;
    const actions = el("div", { class: "actions", role: "group", "aria-label": "Answer for " + item.tool });
    for (const [choice, label, kind] of choices) {
      actions.append(el("button", {
        type: "button",
        class: kind,
        "data-choice": choice,
        onclick: () => answer(item, choice, label),
      }, label));
    }
    box.append(el("article", { class: "card pending", "aria-labelledby": heading, "data-tool": item.tool, "data-id": String(item.id) },
      el("h3", { id: heading }, item.tool),
      el("p", { class: "meta" }, "Why: ", item.reason),
      el("p", { class: "meta" }, "Asked ", time(item.time_ms),
        item.client ? " by " + item.client : "", item.user ? " (user " + item.user + ")" : ""),
      el("pre", { "aria-label": "Arguments (redacted)" }, JSON.stringify(item.arguments, null, 2)),
      actions));
  }
  const fresh = list.filter((i) => !seen.has(i.id));
  seen = new Set(list.map((i) => i.id));
  if (fresh.length && "Notification" in window && Notification.permission === "granted") {
    for (const item of fresh) new Notification("moat: allow " + item.tool + "?", { body: item.reason, tag: "moat-" + item.id });
  }
}

async function answer(item, choice, label) {
  try {
    await post("/api/consent", { id: item.id, choice });
    say(label + ": " + item.tool);
  } catch (e) {
    say("Could not answer: " + e.message);
  }
}

function connect() {
  const live = document.getElementById("live-state");
  const events = new EventSource("/api/events");
  events.addEventListener("open", () => { live.textContent = "Live."; });
  events.addEventListener("pending", (event) => renderPending(JSON.parse(event.data)));
  events.addEventListener("error", () => { live.textContent = "Reconnecting…"; });
}

const notify = document.getElementById("notify");
if (!("Notification" in window)) {
  notify.hidden = true;
} else {
  notify.addEventListener("click", async () => {
    const permission = await Notification.requestPermission();
    say(permission === "granted" ? "Desktop notifications on." : "Desktop notifications are not allowed.");
  });
}

// Servers, tools, pins, configuration.
async function loadServers() {
  const list = await getJson("/api/servers");
  const body = document.getElementById("servers-body");
  body.replaceChildren(...list.map((s) => el("tr", { "data-server": s.name },
    el("th", { scope: "row" }, s.name, s.server ? el("div", { class: "meta" }, s.server) : null),
    el("td", { class: "state-" + s.state }, s.state),
    el("td", {}, s.revision || "—"),
    el("td", {}, String(s.restarts)),
    el("td", {}, (s.stderr.length || s.why)
      ? el("pre", {}, [s.why, ...s.stderr].filter(Boolean).join("\n"))
      : "—"))));
}

async function loadTools() {
  const list = await getJson("/api/tools");
  const body = document.getElementById("tools-body");
  body.replaceChildren(...list.map((t) => {
    const labels = t.labels
      ? Object.entries(t.labels).filter(([, on]) => on).map(([name]) => name.replace("_", " ")).join(", ") || "none"
      : "—";
    const policy = t.held
      ? el("span", { class: "decision-deny" }, "held: " + t.held)
      : el("span", { class: "decision-" + t.decision }, t.decision + " (" + t.rule + ")");
    return el("tr", { "data-tool": t.name },
      el("th", { scope: "row" }, t.name),
      el("td", {}, t.server),
      el("td", {}, t.listed ? "yes" : "no"),
      el("td", {}, policy),
      el("td", {}, labels));
  }));
}

function diffView(text) {
  const pre = el("pre", { "aria-label": "Changes to the definition", tabindex: "0" });
  for (const line of (text || "").split("\n")) {
    const kind = line.startsWith("+") ? "diff-add" : line.startsWith("-") ? "diff-del" : "";
    pre.append(el("span", { class: kind }, line + "\n"));
  }
  return pre;
}

async function loadPins() {
  const pins = await getJson("/api/pins");
  const box = document.getElementById("pins-list");
  box.replaceChildren(...pins.tools.map((p) => {
    const heading = "pin-" + p.server_id + "-" + p.name;
    return el("article", { class: "card pin", "aria-labelledby": heading, "data-pin": p.name },
      el("h3", { id: heading }, p.name),
      el("p", { class: "meta" }, "Server ", p.server, " (", p.identity, "); changed definition seen ", time(p.seen_at * 1000)),
      diffView(p.diff),
      el("div", { class: "actions" },
        el("button", { type: "button", class: "approve", onclick: () => approvePin(p) }, "Approve " + p.name)));
  }));
  document.getElementById("pins-empty").hidden = pins.tools.length > 0;
  const servers = document.getElementById("held-servers");
  servers.replaceChildren(...pins.servers.map((s) => el("li", {}, el("strong", {}, s.name), ": ", s.why)));
  if (!pins.servers.length) servers.append(el("li", { class: "empty" }, "None."));
}

async function approvePin(pin) {
  try {
    await post("/api/pins/approve", { name: pin.name, server_id: pin.server_id, hash: pin.hash });
    say("Approved " + pin.name + ": the gateway lists it again within a second.");
  } catch (e) {
    say("Could not approve " + pin.name + ": " + e.message);
  }
  loadPins().catch(() => {});
}

async function loadConfig() {
  const config = await getJson("/api/config");
  document.getElementById("config-path").textContent = config.path || "(none)";
  const list = document.getElementById("config-errors");
  list.replaceChildren(...config.errors.map((e) => el("li", {}, time(e.time_ms), ": ", el("pre", {}, e.message))));
  document.getElementById("config-ok").hidden = config.errors.length > 0;
}

// The audit trail.
document.getElementById("audit-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const params = new URLSearchParams();
  for (const [key, value] of form.entries()) {
    if (!value) continue;
    if (key === "since" || key === "until") params.set(key + "_ms", String(new Date(value).getTime()));
    else params.set(key, value);
  }
  try {
    const result = await getJson("/api/audit?" + params.toString());
    renderAudit(result);
  } catch (e) {
    say("Could not search the audit trail: " + e.message);
  }
});

function renderAudit(result) {
  const body = document.getElementById("audit-body");
  const records = result.records;
  document.getElementById("audit-count").textContent = result.off
    ? "The audit trail is off ([audit] in the configuration)."
    : records.length + " record" + (records.length === 1 ? "" : "s") + ", newest first.";
  body.replaceChildren(...records.map((r, i) => el("tr", { class: "record", "data-tool": r.exposed_name, "data-outcome": r.outcome },
    el("td", {}, time(r.time_ms)),
    el("th", { scope: "row" }, r.exposed_name),
    el("td", { class: "decision-" + r.decision }, r.decision, r.rule ? " (" + r.rule + ")" : ""),
    el("td", {}, r.outcome),
    el("td", {}, r.consent || "—"),
    el("td", {}, r.subject || "—"),
    el("td", {}, el("button", { type: "button", onclick: () => detail(r), "aria-label": "Details of record " + (i + 1) }, "Details")))));
}

function detail(record) {
  const box = document.getElementById("audit-detail");
  document.getElementById("audit-detail-text").textContent = JSON.stringify(record, null, 2);
  box.hidden = false;
  document.getElementById("audit-detail-text").focus();
}

document.getElementById("audit-detail-close").addEventListener("click", () => {
  document.getElementById("audit-detail").hidden = true;
});

show(location.hash.slice(1));
connect();
