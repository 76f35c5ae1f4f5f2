// The fleet dashboard: one WebSocket that receives a whole snapshot of the
// fleet as JSON every few seconds (and soon after each committed turn or
// dead letter); each snapshot redraws the page. Text goes in through
// textContent only.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);

  // el makes an element with a class and text.
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function time(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleTimeString();
  }

  function ms(n) {
    if (!n) return "";
    return n < 1000 ? n + " ms" : (n / 1000).toFixed(n < 10000 ? 2 : 1) + " s";
  }

  function setConn(state, text) {
    const c = $("conn");
    c.className = "conn " + state;
    c.textContent = text;
  }

  function renderTurn(t) {
    const li = el("li", "turn" + (t.failed ? " failed" : ""));
    li.dataset.turnId = t.turn_id || "";
    li.dataset.seq = t.seq;
    const head = el("div", "head");
    head.append(el("span", "when", time(t.completed)), el("span", "session", t.session));
    if (t.duration_ms) head.append(el("span", "duration", ms(t.duration_ms)));
    if (t.tools.length) head.append(el("span", "ntools", t.tools.length + (t.tools.length === 1 ? " tool call" : " tool calls")));
    if (t.failed) head.append(el("span", "status", "failed"));
    li.append(head);
    if (t.problem) li.append(el("div", "reply", t.problem));
    if (t.user) li.append(el("div", "user", t.user));
    if (t.tools.length) {
      const ul = el("ul", "tools");
      for (const c of t.tools) {
        const item = el("li", "tool" + (c.answered ? "" : " unanswered"));
        item.dataset.name = c.name;
        item.append(el("span", "name", c.name), document.createTextNode(" "), el("span", "args", c.args));
        if (c.duration_ms) item.append(document.createTextNode(" "), el("span", "ms", ms(c.duration_ms)));
        if (!c.answered) item.append(document.createTextNode(" "), el("span", "result", "no result"));
        item.title = c.result || "";
        ul.append(item);
      }
      li.append(ul);
    }
    if (t.reply) li.append(el("div", "reply", t.reply));
    return li;
  }

  function renderDeadLetter(d) {
    const li = el("li", "dead-letter");
    li.dataset.seq = d.seq;
    li.append(el("div", "reason", d.reason || d.problem || "(no reason)"));
    const meta = [time(d.failed_at), d.source, d.subject, d.deliveries ? d.deliveries + " deliveries" : ""].filter(Boolean).join(" · ");
    li.append(el("div", "meta", meta));
    return li;
  }

  function row(cls, cells) {
    const tr = el("tr", cls);
    cells.forEach((c, i) => tr.append(el("td", i > 0 && typeof c === "number" ? "num" : "", c)));
    return tr;
  }

  function render(s) {
    $("workers").textContent = s.workers;
    $("tool-runners").textContent = s.tool_runners;
    $("in-flight").textContent = s.turns_in_flight;
    $("queued").textContent = s.queued;
    $("dead-letter-count").textContent = s.dead_letter_count;
    $("updated").textContent = "updated " + time(s.at);

    $("problems").replaceChildren(...(s.problems || []).map((p) => el("li", "", p)));
    $("turns").replaceChildren(...s.turns.map(renderTurn));
    $("no-turns").classList.toggle("hidden", s.turns.length > 0);
    $("dead-letters").replaceChildren(...s.dead_letters.map(renderDeadLetter));
    $("no-dead-letters").classList.toggle("hidden", s.dead_letters.length > 0);

    const u = s.usage || {};
    const usage = [];
    const tokens = (cls, label, t) => row(cls, [label, t.turns, t.prompt, t.cached, t.completion, t.reasoning]);
    if (u.total) usage.push(tokens("stream", "total", u.total));
    for (const [kind, list] of [["model", u.models], ["user", u.users], ["session", u.sessions]]) {
      for (const t of list || []) usage.push(tokens("consumer", kind + " " + t.key, t));
    }
    $("usage").tBodies[0].replaceChildren(...usage);

    const streams = [];
    for (const st of s.streams) {
      streams.push(row("stream", [st.name, st.msgs, "", "", "", ""]));
      for (const c of st.consumers) {
        // A client's consumer (a CLI command's, a gateway's watch) lags
        // once its client exits, until the server deletes it: not a backlog.
        const kind = c.ephemeral ? "consumer client" : "consumer" + (c.pending > 0 ? " lagging" : "");
        streams.push(row(kind, [c.ephemeral ? c.name + " (client)" : c.name, "", c.pending, c.in_flight, c.redelivered, c.waiting]));
      }
    }
    $("streams").tBodies[0].replaceChildren(...streams);

    const services = s.services.map((v) => {
      const meta = Object.entries(v.metadata || {}).map(([k, val]) => k + "=" + val).join(" ");
      const tr = row("service", [v.name, v.id, v.version, meta]);
      tr.dataset.name = v.name;
      return tr;
    });
    $("services").tBodies[0].replaceChildren(...services);

    const chans = s.channels || [];
    // A channel's row, then one under it for each running gateway that
    // says something else (a start retried beside the connected gateway).
    const chanRow = (cls, name, c) => row(cls + " " + c.state.replace(/ /g, "-"), [name, c.state + (c.reason ? ": " + c.reason : ""), c.account || "", c.holder || ""]);
    $("channels").tBodies[0].replaceChildren(...chans.flatMap((c) => {
      const tr = chanRow("channel", c.channel, c);
      tr.dataset.channel = c.channel;
      return [tr, ...(c.others || []).map((o) => chanRow("channel other", "", o))];
    }));
    $("no-channels").classList.toggle("hidden", chans.length > 0);
    // A channel waiting for its QR code to be scanned (WhatsApp) shows it;
    // the image is fetched again when the code changes.
    const qr = $("qr");
    const linking = chans.find((c) => c.state === "linking" && c.qr);
    if (!linking) {
      qr.replaceChildren();
    } else if (qr.dataset.code !== linking.qr) {
      qr.dataset.code = linking.qr;
      const img = el("img");
      img.alt = "QR code to link " + linking.channel;
      img.src = "/dashboard/api/qr/" + encodeURIComponent(linking.channel) + "?t=" + encodeURIComponent(linking.updated);
      qr.replaceChildren(el("p", "", "Scan in WhatsApp: Settings → Linked devices → Link a device"), img);
    }
    if (!linking) delete qr.dataset.code;

    document.body.dataset.snapshots = String(Number(document.body.dataset.snapshots || 0) + 1);
  }

  let delay = 500;
  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(proto + location.host + "/dashboard/api/live");
    ws.onopen = () => { delay = 500; setConn("live", "live"); };
    ws.onmessage = (e) => {
      try {
        render(JSON.parse(e.data));
      } catch (err) {
        setConn("lost", "bad snapshot: " + err);
      }
    };
    ws.onclose = () => {
      setConn("lost", "reconnecting…");
      // A lost login shows as a refused socket: back to the login form.
      fetch("/dashboard/api/snapshot", { credentials: "same-origin" }).then((r) => {
        if (r.status === 401) location.reload();
      }).catch(() => {});
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
