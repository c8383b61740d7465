// Calls to bunq serve's HTTP API, with the token (sessionStorage) when the server wants one.
const KEY = "bunq-token";

function headers(extra = {}) {
  const token = sessionStorage.getItem(KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

function askToken() {
  const dialog = document.getElementById("login");
  const input = document.getElementById("token-input");
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (input.value) sessionStorage.setItem(KEY, input.value);
      input.value = "";
      resolve();
    }, { once: true });
    if (!dialog.open) dialog.showModal();
  });
}

export async function api(method, path, body) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const resp = await fetch(path, init);
    if (resp.status === 401) { await askToken(); continue; }
    const out = await resp.json().catch(() => ({ ok: false, error: resp.statusText }));
    if (!out.ok) throw new Error(`${out.error || resp.statusText}${out.code ? ` (${out.code})` : ""}`);
    return out;
  }
  throw new Error("not signed in");
}

// Server-Sent Events over fetch (EventSource cannot send an Authorization header).
export function events(path, onEvent, onState) {
  let stopped = false;
  async function run() {
    while (!stopped) {
      try {
        const resp = await fetch(path, { headers: headers() });
        if (resp.status === 401) { onState(false); await askToken(); continue; }
        onState(true);
        const reader = resp.body.getReader();
        const decoder = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done || stopped) break;
          buf += decoder.decode(value, { stream: true });
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let kind = "message", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) kind = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (data) onEvent(kind, JSON.parse(data));
          }
        }
      } catch (e) { /* reconnect below */ }
      onState(false);
      if (!stopped) await new Promise((r) => setTimeout(r, 2000));
    }
  }
  run();
  return () => { stopped = true; };
}
