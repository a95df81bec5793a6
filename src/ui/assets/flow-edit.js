// Switchboard console: the flow editor (/ui/flows/{id}/edit). Progressive enhancement only:
// without this script the "Check" button posts the draft and the page comes back with its
// problems and diagram. With it, the draft is checked 300 ms after typing stops (the same
// route, answering JSON), the problems list and the diagram follow, a problem's link puts
// the cursor on its line, and the line numbers follow the text.
(() => {
  const form = document.querySelector('form[data-flow-edit]');
  if (!form) return;
  const source = form.querySelector('#source');
  const gutter = document.getElementById('source-gutter');
  const status = document.getElementById('check-status');
  const problems = document.getElementById('problems');
  const note = document.getElementById('diagram-note');
  const containers = [...document.querySelectorAll('[data-edit-diagram]')];
  // deferred after mermaid.min.js and console.js (in the head), which has initialized Mermaid
  // as every console diagram is drawn: securityLevel strict, no start on load
  const mermaid = window.mermaid;
  const DEBOUNCE_MS = 300;
  let timer;
  let asked = 0;
  let drawn = 0;

  function numberLines() {
    const n = source.value.split('\n').length;
    if (gutter.dataset.lines === String(n)) return;
    gutter.dataset.lines = String(n);
    gutter.textContent = Array.from({ length: n }, (_, i) => String(i + 1)).join('\n');
    gutter.scrollTop = source.scrollTop;
  }

  // the cursor at line:column (1-based), the line scrolled into view
  function goTo(line, column) {
    const rows = source.value.split('\n');
    let offset = 0;
    for (let i = 0; i < line - 1 && i < rows.length; i++) offset += rows[i].length + 1;
    offset += Math.min(Math.max(0, column - 1), (rows[line - 1] ?? '').length);
    source.focus();
    source.setSelectionRange(offset, offset);
    const height = Number.parseFloat(getComputedStyle(source).lineHeight) || 20;
    source.scrollTop = Math.max(0, (line - 4) * height);
    gutter.scrollTop = source.scrollTop;
  }

  async function draw(container, text, version) {
    container.dataset.source = text;
    container.dataset.version = version || '';
    const mine = ++drawn;
    container.dataset.drawing = String(mine);
    if (!mermaid || !text) {
      container.replaceChildren(
        Object.assign(document.createElement('pre'), { textContent: text }),
      );
      return;
    }
    try {
      const { svg } = await mermaid.render(`flow-edit-svg-${mine}`, text);
      if (container.dataset.drawing !== String(mine)) return;
      container.innerHTML = svg; // Mermaid's own output (securityLevel strict), not the draft's text
      const el = container.querySelector('svg');
      if (el) {
        el.setAttribute('role', 'img');
        el.setAttribute('aria-label', container.dataset.label || 'flow diagram');
        if (container.dataset.editDiagram === 'unrolled' && el.viewBox?.baseVal?.width) {
          el.style.maxWidth = 'none';
          el.setAttribute('width', String(el.viewBox.baseVal.width));
        }
      }
      container.dataset.rendered = String(mine);
    } catch (err) {
      container.dataset.error = String(err);
    }
  }

  function problemItem(issue) {
    const li = document.createElement('li');
    li.dataset.severity = issue.severity;
    const badge = document.createElement('span');
    badge.className = issue.severity === 'error' ? 'badge bad' : 'badge warn';
    badge.textContent = issue.severity;
    const link = document.createElement('a');
    link.href = '#source';
    link.dataset.line = String(issue.line);
    link.dataset.column = String(issue.column);
    link.textContent = `${issue.file}:${issue.line}:${issue.column}`;
    const rule = document.createElement('code');
    rule.textContent = issue.rule;
    li.append(badge, ' ', link, ' ', rule, ` ${issue.message}`);
    return li;
  }

  function show(result) {
    const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
    status.textContent = result.ok
      ? `No errors${result.warnings.length > 0 ? `, ${plural(result.warnings.length, 'warning')}` : ''}: version ${(result.version || '').slice(0, 12)}.`
      : `${plural(result.errors.length, 'error')}: the draft does not compile.`;
    problems.replaceChildren(...[...result.errors, ...result.warnings].map(problemItem));
    form.dataset.checked = String(Number(form.dataset.checked || '0') + 1);
    if (result.diagram) {
      note.textContent = 'The draft as the callee hears it.';
      for (const c of containers) {
        const text = result.diagram[c.dataset.editDiagram];
        if (text !== c.dataset.source) draw(c, text, result.version);
      }
    } else {
      // the last diagram that compiled stays, said to be old
      note.textContent = 'The draft does not compile: the diagram shows the last draft that did.';
    }
  }

  async function check() {
    const mine = ++asked;
    status.textContent = 'Checking…';
    try {
      const res = await fetch(form.dataset.flowEdit, {
        method: 'POST',
        headers: { accept: 'application/json' },
        body: new URLSearchParams({ source: source.value }),
      });
      if (!res.ok) throw new Error(`the server answered ${res.status}`);
      const result = await res.json();
      if (mine === asked) show(result);
    } catch (err) {
      if (mine === asked) status.textContent = `Could not check the draft: ${err.message}`;
    }
  }

  source.addEventListener('input', () => {
    numberLines();
    clearTimeout(timer);
    timer = setTimeout(check, DEBOUNCE_MS);
  });
  source.addEventListener('scroll', () => {
    gutter.scrollTop = source.scrollTop;
  });
  problems.addEventListener('click', (ev) => {
    const link = ev.target instanceof Element ? ev.target.closest('a[data-line]') : null;
    if (!link) return;
    ev.preventDefault();
    goTo(Number(link.dataset.line), Number(link.dataset.column));
  });
  numberLines();
  for (const c of containers) {
    const pre = c.querySelector('pre');
    const text = pre ? pre.textContent : '';
    if (text) draw(c, text, c.dataset.version);
  }
})();
