// ds4server chat page: several chats in localStorage, streaming via /v1/chat/completions
// (SSE), Markdown (marked) with highlighted code (highlight.js), collapsible reasoning,
// stop button (aborts the request; the server cancels the turn and keeps the partial text),
// sampler/thinking settings and per-turn stats (tokens, TTFT, tok/s, cached tokens).
"use strict";

const $ = (id) => document.getElementById(id);
const STORE = "ds4.chats.v1", SETTINGS = "ds4.settings.v1";
const state = { chats: [], current: null, abort: null };

function load() {
  try { state.chats = JSON.parse(localStorage.getItem(STORE)) || []; } catch { state.chats = []; }
  const s = JSON.parse(localStorage.getItem(SETTINGS) || "{}");
  for (const k of ["thinking", "temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "api_key"])
    if (s[k] !== undefined) $("set-" + k).value = s[k];
  if (!state.chats.length) newChat(); else state.current = state.chats[0].id;
}
function save() {
  localStorage.setItem(STORE, JSON.stringify(state.chats));
  const s = {};
  for (const k of ["thinking", "temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "api_key"]) s[k] = $("set-" + k).value;
  localStorage.setItem(SETTINGS, JSON.stringify(s));
}
const chat = () => state.chats.find((c) => c.id === state.current);

function newChat() {
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: "New chat", messages: [] };
  state.chats.unshift(c);
  state.current = c.id;
  save();
  render();
}

function renderList() {
  const ul = $("chat-list");
  ul.innerHTML = "";
  for (const c of state.chats) {
    const li = document.createElement("li");
    li.className = "chat-item" + (c.id === state.current ? " active" : "");
    li.dataset.id = c.id;
    const t = document.createElement("span");
    t.textContent = c.title;
    const del = document.createElement("button");
    del.className = "del"; del.textContent = "×"; del.title = "delete chat";
    del.onclick = (e) => {
      e.stopPropagation();
      state.chats = state.chats.filter((x) => x.id !== c.id);
      if (!state.chats.length) return newChat();
      if (state.current === c.id) state.current = state.chats[0].id;
      save(); render();
    };
    li.append(t, del);
    li.onclick = () => { if (state.abort) return; state.current = c.id; render(); };
    ul.append(li);
  }
}

function markdown(el, text) {
  // Rendering must never break the stream: fall back to plain text.
  try { el.innerHTML = marked.parse(text || ""); } catch { el.textContent = text || ""; return; }
  if (typeof hljs === "undefined") return;
  // Debian's highlight.js may predate highlightElement (then highlightBlock does the same).
  const hl = hljs.highlightElement || hljs.highlightBlock;
  el.querySelectorAll("pre code").forEach((b) => { try { hl.call(hljs, b); } catch { /* leave unhighlighted */ } });
}

function messageView(m) {
  const div = document.createElement("div");
  div.className = "msg " + m.role;
  if (m.role === "user") { div.textContent = m.content; return div; }
  const det = document.createElement("details");
  det.className = "reasoning";
  det.innerHTML = "<summary>Reasoning</summary><div class=body></div>";
  det.hidden = !m.reasoning;
  det.querySelector(".body").textContent = m.reasoning || "";
  const body = document.createElement("div");
  body.className = "content";
  markdown(body, m.content);
  const tools = document.createElement("div");
  for (const tc of m.tool_calls || []) {
    const t = document.createElement("div");
    t.className = "tool-call";
    t.textContent = `${tc.function.name}(${tc.function.arguments})`;
    tools.append(t);
  }
  const stats = document.createElement("div");
  stats.className = "stats";
  stats.textContent = m.stats || "";
  div.append(det, body, tools, stats);
  return div;
}

function render() {
  renderList();
  const box = $("messages");
  box.innerHTML = "";
  for (const m of chat().messages) box.append(messageView(m));
  box.scrollTop = box.scrollHeight;
}

function requestBody(c) {
  const body = { model: "default", stream: true, stream_options: { include_usage: true },
    messages: c.messages.map((m) => {
      const o = { role: m.role, content: m.content || "" };
      if (m.tool_calls && m.tool_calls.length) o.tool_calls = m.tool_calls;
      return o;
    }) };
  const num = (k, int) => { const v = $("set-" + k).value; if (v !== "") body[k] = int ? parseInt(v, 10) : parseFloat(v); };
  num("temperature"); num("top_p"); num("top_k", true); num("min_p"); num("seed", true); num("max_tokens", true);
  if ($("set-thinking").value) body.reasoning_effort = $("set-thinking").value;
  return body;
}

async function* sse(response) {
  const reader = response.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of block.split("\n")) if (line.startsWith("data: ")) yield line.slice(6);
    }
  }
}

async function send(text) {
  const c = chat();
  c.messages.push({ role: "user", content: text });
  if (c.title === "New chat") c.title = text.slice(0, 40);
  const m = { role: "assistant", content: "", reasoning: "", tool_calls: [], stats: "" };
  c.messages.push(m);
  render();
  const view = $("messages").lastElementChild;
  const body = requestBody({ messages: c.messages.slice(0, -1) });
  state.abort = new AbortController();
  $("send").disabled = true; $("stop").disabled = false;
  const t0 = performance.now();
  let tFirst = null, usage = null, finish = "";
  const headers = { "content-type": "application/json" };
  if ($("set-api_key").value) headers.authorization = "Bearer " + $("set-api_key").value;
  try {
    const r = await fetch("/v1/chat/completions", { method: "POST", headers, body: JSON.stringify(body), signal: state.abort.signal });
    if (!r.ok) throw new Error((await r.json()).error?.message || r.statusText);
    for await (const data of sse(r)) {
      if (data === "[DONE]") break;
      const j = JSON.parse(data);
      if (j.error) throw new Error(j.error.message);
      if (j.usage) usage = j.usage;
      const ch = j.choices && j.choices[0];
      if (!ch) continue;
      const d = ch.delta || {};
      if ((d.content || d.reasoning_content) && tFirst === null) tFirst = performance.now();
      if (d.reasoning_content) { m.reasoning += d.reasoning_content; const det = view.querySelector(".reasoning"); det.hidden = false; det.querySelector(".body").textContent = m.reasoning; }
      if (d.content) { m.content += d.content; markdown(view.querySelector(".content"), m.content); }
      if (d.tool_calls) m.tool_calls.push(...d.tool_calls.map(({ index, ...rest }) => rest));
      if (ch.finish_reason) finish = ch.finish_reason;
      $("messages").scrollTop = $("messages").scrollHeight;
    }
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else { m.content += (m.content ? "\n\n" : "") + "**Error:** " + e.message; finish = "error"; }
  }
  const t1 = performance.now();
  const parts = [];
  if (usage) {
    const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
    const dec = usage.timings?.decode_s || 0;
    parts.push(`${usage.prompt_tokens} prompt (${cached} cached)`, `${usage.completion_tokens} generated`);
    if (dec > 0) parts.push(`${(usage.completion_tokens / dec).toFixed(1)} tok/s`);
  }
  if (tFirst !== null) parts.push(`TTFT ${((tFirst - t0) / 1000).toFixed(2)} s`);
  parts.push(`${((t1 - t0) / 1000).toFixed(2)} s total`, finish);
  m.stats = parts.join(" · ");
  state.abort = null;
  $("send").disabled = false; $("stop").disabled = true;
  save();
  render();
}

$("composer").onsubmit = (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.abort) return;
  $("input").value = "";
  send(text);
};
$("input").onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); } };
$("stop").onclick = () => state.abort && state.abort.abort();
$("new-chat").onclick = () => { if (!state.abort) newChat(); };
document.querySelectorAll("#settings input, #settings select").forEach((el) => (el.onchange = save));

marked.setOptions({ gfm: true, breaks: false });
load();
render();
fetch("/health").then((r) => r.json()).then((h) => {
  $("server-info").textContent = `${h.model} (${h.family})\nsampler ${h.sampler}, context ${h.context_size}`;
}).catch(() => {});
