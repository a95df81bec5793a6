// Switchboard console: progressive enhancement only. Every page reads without this script;
// with it, diagrams are drawn by the locally served Mermaid bundle, a call in progress
// updates live (server-sent events), the keypad presses keys without a page load and plays
// the prompt of the menu the callee is in, and a flow's prompt preview plays in place.
(() => {
  const mermaid = window.mermaid;
  let drawn = 0;

  // renders are queued by Mermaid; only the newest one for a container is shown
  async function draw(container, source) {
    if (!mermaid) return;
    const mine = ++drawn;
    container.dataset.drawing = String(mine);
    try {
      const { svg } = await mermaid.render(`diagram-svg-${mine}`, source);
      if (container.dataset.drawing !== String(mine)) return;
      container.innerHTML = svg;
      const el = container.querySelector('svg');
      if (el) {
        el.setAttribute('role', 'img');
        el.setAttribute('aria-label', container.dataset.label || 'flow diagram');
        // the unrolled graph is wide: full size, scrolled, rather than shrunk unreadable
        if (container.dataset.diagram === 'unrolled' && el.viewBox?.baseVal?.width) {
          el.style.maxWidth = 'none';
          el.setAttribute('width', String(el.viewBox.baseVal.width));
        }
      }
      container.dataset.rendered = String(mine);
    } catch (err) {
      container.dataset.error = String(err);
    }
  }

  if (mermaid) {
    mermaid.initialize({
      startOnLoad: false,
      securityLevel: 'strict',
      theme: 'default',
      flowchart: { htmlLabels: true, useMaxWidth: true },
    });
  }
  for (const container of document.querySelectorAll('[data-diagram]')) {
    const pre = container.querySelector('pre');
    const source = pre ? pre.textContent : '';
    container.dataset.source = source;
    draw(container, source);
  }

  // the keypad page's player: a new menu's prompt is loaded, and played once the user has
  // pressed something (browsers refuse sound before any interaction)
  const player = document.querySelector('audio[data-now-playing]');
  let interacted = false;
  function nowPlaying(data) {
    if (!player || data.prompt === undefined) return;
    const menu = document.getElementById('now-playing-menu');
    if (menu && typeof data.now === 'string') menu.innerHTML = data.now;
    const src = data.prompt || '';
    if (player.getAttribute('src') === src || (!src && !player.hasAttribute('src'))) return;
    if (src) player.setAttribute('src', src);
    else player.removeAttribute('src');
    player.hidden = !src;
    player.dataset.changed = String(Number(player.dataset.changed || '0') + 1);
    if (src && interacted) player.play().catch(() => {});
    else player.pause();
  }

  // a call in progress: the server sends the live part of the page and the diagram source
  const live = document.querySelector('[data-live]');
  if (live && window.EventSource) {
    const events = new EventSource(live.dataset.live);
    events.addEventListener('call', (ev) => {
      const data = JSON.parse(ev.data);
      live.innerHTML = data.html;
      live.dataset.state = data.state;
      nowPlaying(data);
      for (const container of document.querySelectorAll('[data-diagram]')) {
        const source = data.diagrams?.[container.dataset.diagram];
        if (source && source !== container.dataset.source) {
          container.dataset.source = source;
          draw(container, source);
        }
      }
    });
    events.addEventListener('done', () => {
      events.close();
      live.dataset.done = 'true';
    });
  }

  // the keypad: each button submits the form; with this script it is sent in the background
  const pad = document.querySelector('form[data-keypad]');
  if (pad) {
    const status = document.getElementById('keypad-status');
    pad.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const key = ev.submitter?.value;
      if (!key) return;
      interacted = true;
      if (status) status.textContent = `Pressing ${key}…`;
      try {
        const res = await fetch(pad.action, {
          method: 'POST',
          headers: { accept: 'application/json' },
          body: new URLSearchParams({ key }),
        });
        const body = await res.json();
        if (status) status.textContent = body.message;
        pad.dataset.pressed = String(Number(pad.dataset.pressed || '0') + (res.ok ? 1 : 0));
      } catch (err) {
        if (status) status.textContent = `Could not press ${key}: ${err}`;
      }
    });
    // the phone's keys on the keyboard too, unless typing in a field
    document.addEventListener('keydown', (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
      const target = ev.target;
      if (target instanceof HTMLElement && target.closest('input, select, textarea')) return;
      const button = pad.querySelector(`button[value="${CSS.escape(ev.key)}"]`);
      if (button && /^[0-9*#]$/.test(ev.key)) {
        ev.preventDefault();
        button.click();
      }
    });
  }

  // a flow's prompt with typed vars: played under its form instead of opening the audio
  for (const form of document.querySelectorAll('form[data-say]')) {
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const url = `${form.action}?${new URLSearchParams(new FormData(form))}`;
      let audio = form.nextElementSibling;
      if (!(audio instanceof HTMLAudioElement)) {
        audio = document.createElement('audio');
        audio.controls = true;
        audio.setAttribute('aria-label', form.getAttribute('aria-label') || 'prompt');
        form.after(audio);
      }
      audio.src = url;
      audio.play().catch(() => {});
    });
  }
})();
