// Live updates: server-sent events from the change feed, applied to the page. No framework.
// A page that follows a stream marks <body data-live="open"> once the server has subscribed it.
"use strict";
(function () {
  const badge = document.getElementById("live-status");

  function setState(state) {
    document.body.dataset.live = state;
    if (badge) badge.dataset.state = state;
  }

  function fragment(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html.trim(); // rendered and escaped by the server's templates
    return holder.content.firstElementChild;
  }

  function follow(element, handlers) {
    const source = new EventSource(element.dataset.live);
    let opened = false;
    source.addEventListener("ready", () => {
      if (opened) {
        window.location.reload(); // reconnected: changes may have been missed meanwhile
        return;
      }
      opened = true;
      setState("open");
    });
    source.addEventListener("resync", () => window.location.reload());
    source.onerror = () => setState(source.readyState === EventSource.CLOSED ? "off" : "reconnecting");
    for (const [name, handle] of Object.entries(handlers)) {
      source.addEventListener(name, (event) => handle(JSON.parse(event.data)));
    }
    window.addEventListener("pagehide", () => source.close());
  }

  const rows = document.querySelector("tbody[data-live]");
  if (rows) {
    follow(rows, {
      row(update) {
        const current = rows.querySelector(`tr[data-id="${CSS.escape(update.id)}"]`);
        if (update.action === "remove") {
          if (current) current.remove();
        } else {
          const next = fragment(update.html);
          if (current) current.replaceWith(next);
          else rows.prepend(next);
        }
        const empty = document.getElementById("no-rows");
        if (empty) empty.hidden = rows.children.length > 0;
      },
    });
  }

  const recent = document.querySelector("ul[data-live]");
  if (recent) {
    follow(recent, {
      change(update) {
        recent.prepend(fragment(update.html));
        while (recent.children.length > 50) recent.lastElementChild.remove();
      },
    });
  }
})();
