// The pages' script: keyboard shortcuts of the answering page (1..q, or left/right for two
// options, choose; 1..k place a graded answer on its scale; t no preference, s skip, u undo;
// keys typed in a rating's radio buttons move between them instead), and the admin page's copy
// buttons. Each
// key clicks the button marked with data-key, so the page works the same without this script
// (the key hints and copy buttons are shown only with it). A form is sent once: its buttons
// are disabled after the first submit (the server refuses a second answer to a query anyway).
"use strict";

document.documentElement.classList.remove("no-js");

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("answer-form");
  const q = form ? Number(form.dataset.q) : 0;
  const graded = Boolean(form && form.dataset.graded);  // keys 1..k place a graded answer

  document.querySelectorAll("form").forEach((f) => {
    f.addEventListener("submit", (event) => {
      if (f.dataset.sent === "1") {
        event.preventDefault();
        return;
      }
      f.dataset.sent = "1";
    });
  });

  // a page restored from the back/forward cache can be sent again
  window.addEventListener("pageshow", () => {
    document.querySelectorAll("form").forEach((f) => delete f.dataset.sent);
  });

  document.querySelectorAll("button.copy[data-copy]").forEach((button) => {
    button.addEventListener("click", () => {
      const done = () => {
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = "Copy"; }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(button.dataset.copy).then(done, () => {});
      } else {  // plain http beyond localhost: select the link for the person to copy
        const link = button.previousElementSibling;
        if (link) window.getSelection().selectAllChildren(link);
      }
    });
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target && ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName)) return;
    let key = event.key.toLowerCase();
    if (q === 2 && !graded && key === "arrowleft") key = "1";
    if (q === 2 && !graded && key === "arrowright") key = "2";
    const button = document.querySelector(`button[data-key="${CSS.escape(key)}"]`);
    if (button) {
      event.preventDefault();
      button.click();
    }
  });
});
