// nanofleet web chat: plain JavaScript, no build step.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { conv: null, ws: null, queue: [], files: [], current: null, answered: new Set() };

async function api(path, opts) {
  const res = await fetch(path, Object.assign({ credentials: "same-origin" }, opts || {}));
  if (res.status === 401) { location.href = "/"; throw new Error("not logged in"); }
  const body = await res.json().catch(() => ({}));
  if (!res.ok) { const e = new Error(body.error || res.statusText); e.status = res.status; throw e; }
  return body;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function scroll() { const m = $("#messages"); m.scrollTop = m.scrollHeight; }

function addUser(text, files) {
  const m = el("div", "msg user", text);
  if (files && files.length) m.appendChild(el("div", "files", "📎 " + files.join(", ")));
  $("#messages").appendChild(m);
  scroll();
}

function addNotice(text, cls) {
  $("#messages").appendChild(el("div", "msg " + (cls || "notice"), text));
  scroll();
}

// assistantBubble makes an answer bubble: a collapsible list of progress
// and tool hints above the body.
function assistantBubble() {
  const m = el("div", "msg assistant");
  const work = el("details", "work");
  work.hidden = true;
  work.appendChild(el("summary", "", "Working…"));
  work.appendChild(el("ul"));
  const body = el("div", "body");
  m.append(work, body);
  m.dataset.deltas = "0";
  $("#messages").appendChild(m);
  return { m, work, body, text: "" };
}

function addHint(b, kind, text) {
  b.work.hidden = false;
  b.work.querySelector("ul").appendChild(el("li", kind, text));
  b.work.querySelector("summary").textContent = "Working… (" + b.work.querySelectorAll("li").length + ")";
}

function addAssistant(html, hints) {
  const b = assistantBubble();
  (hints || []).forEach((h) => addHint(b, "tool_hint", h));
  if (hints && hints.length) b.work.querySelector("summary").textContent = "Steps (" + hints.length + ")";
  b.body.innerHTML = html; // rendered and escaped by the server
  b.m.classList.add("done");
  return b;
}

function onFrame(f) {
  // Live messages travel apart from answers: drop any that come late.
  if (f.reply && state.answered.has(f.reply) && f.type !== "final" && f.type !== "message") return;
  switch (f.type) {
    case "accepted":
      return;
    case "delta": {
      if (!state.current) state.current = assistantBubble();
      const b = state.current;
      b.m.classList.add("streaming");
      b.text += f.text;
      b.body.textContent = b.text;
      b.m.dataset.deltas = String(Number(b.m.dataset.deltas) + 1);
      break;
    }
    case "progress":
    case "tool_hint":
      if (!state.current) state.current = assistantBubble();
      addHint(state.current, f.type, f.text);
      break;
    case "final":
    case "message": {
      const b = state.current || assistantBubble();
      b.m.classList.remove("streaming");
      b.body.innerHTML = f.html;
      if (!b.work.hidden) b.work.querySelector("summary").textContent = "Steps (" + b.work.querySelectorAll("li").length + ")";
      b.m.classList.add("done");
      if (f.type === "final") { state.current = null; if (f.reply) state.answered.add(f.reply); }
      loadConversations();
      break;
    }
    case "error":
      if (state.current) { state.current.m.classList.remove("streaming"); state.current = null; }
      addNotice(f.text, "error");
      break;
  }
  scroll();
}

function connect(id) {
  if (state.ws) { state.ws.onclose = null; state.ws.close(); }
  const proto = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(proto + "://" + location.host + "/api/web/conversations/" + id + "/ws");
  state.ws = ws;
  ws.onopen = () => { while (state.queue.length) ws.send(state.queue.shift()); };
  ws.onmessage = (ev) => { try { onFrame(JSON.parse(ev.data)); } catch (e) { console.error(e); } };
  ws.onclose = () => { if (state.conv === id) setTimeout(() => { if (state.conv === id) connect(id); }, 1000); };
}

async function loadConversations() {
  const list = await api("/api/web/conversations");
  const ul = $("#conversations");
  ul.replaceChildren();
  for (const c of list) {
    const li = el("li", c.id === state.conv ? "active" : "", c.title);
    li.dataset.id = c.id;
    li.onclick = () => openConversation(c.id);
    ul.appendChild(li);
  }
  return list;
}

async function openConversation(id) {
  state.conv = id;
  state.current = null;
  if (location.hash !== "#" + id) history.replaceState(null, "", "#" + id);
  $("#messages").replaceChildren();
  connect(id);
  const msgs = await api("/api/web/conversations/" + id + "/messages");
  for (const m of msgs) {
    if (m.role === "user") addUser(m.text, m.files);
    else if (m.role === "assistant") addAssistant(m.html, m.hints);
    else addNotice(m.text, "error");
  }
  $("#messages").dataset.loaded = id;
  scroll();
  loadConversations();
}

async function newConversation() {
  const c = await api("/api/web/conversations", { method: "POST" });
  await openConversation(c.id);
}

function send() {
  const input = $("#input");
  const text = input.value.trim();
  if (!text && !state.files.length) return;
  const files = state.files;
  addUser(text, files.map((f) => f.name));
  const frame = JSON.stringify({ type: "send", text, files: files.map((f) => ({ object: f.object })) });
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(frame);
  else state.queue.push(frame);
  input.value = "";
  state.files = [];
  $("#attachments").replaceChildren();
}

async function upload(file) {
  const form = new FormData();
  form.append("file", file);
  try {
    const ref = await api("/api/web/conversations/" + state.conv + "/files", { method: "POST", body: form });
    state.files.push(ref);
    $("#attachments").appendChild(el("span", "chip", "📎 " + ref.name));
  } catch (e) {
    addNotice(e.message || "The upload failed.", "error");
  }
}

function init() {
  $("#composer").onsubmit = (e) => { e.preventDefault(); send(); };
  $("#input").onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } };
  $("#new-chat").onclick = () => newConversation();
  $("#attach").onclick = () => $("#file").click();
  $("#file").onchange = (e) => { for (const f of e.target.files) upload(f); e.target.value = ""; };
  loadConversations().then((list) => {
    const want = location.hash.slice(1);
    if (want && list.some((c) => c.id === want)) return openConversation(want);
    if (list.length) return openConversation(list[0].id);
    return newConversation();
  }).catch((e) => addNotice(e.message, "error"));
}

init();
