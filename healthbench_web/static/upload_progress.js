// Upload progress for a form marked data-upload-progress. The form is sent with
// XMLHttpRequest, whose upload events report how much of a large file has gone; the answer's
// #import-region (the form and the result) then replaces the page's own, so the page, its
// menu and its scripts stay: the focus goes to the result's heading and the result is
// announced. An answer without that region (a refusal page) replaces the body. Without
// JavaScript the form submits as usual. Listening on the document keeps working after a swap.

function announce(words) {
  const announcer = document.getElementById("announce");
  if (!announcer) return;
  // Emptied first, so the same words said twice are read twice.
  announcer.textContent = "";
  window.setTimeout(() => { announcer.textContent = words; }, 50);
}
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-upload-progress")) return;
  event.preventDefault();
  const bar = form.querySelector("progress");
  const status = form.querySelector("[data-progress-label]");
  const button = form.querySelector("button[type=submit]");
  // Refuse a file over the limit before sending it; the server checks again after upload.
  const limit = Number(form.dataset.maxBytes || 0);
  const file = form.querySelector("input[type=file]").files[0];
  if (limit && file && file.size > limit) {
    status.textContent = `${file.name} is ${(file.size / 1048576).toFixed(1)} MB; the browser import takes at most ` +
      `${Math.floor(limit / 1048576)} MB. Import it with manage.py import_healthbench FILE.`;
    status.classList.add("error");
    return;
  }
  status.classList.remove("error");
  const request = new XMLHttpRequest();
  request.open("POST", form.action || window.location.href);
  request.upload.addEventListener("progress", (progress) => {
    if (!progress.lengthComputable) return;
    bar.hidden = false;
    bar.max = progress.total;
    bar.value = progress.loaded;
    const percent = Math.floor((100 * progress.loaded) / progress.total);
    status.textContent = progress.loaded < progress.total
      ? `Uploading: ${percent}% of ${(progress.total / 1048576).toFixed(1)} MB`
      : "Uploaded; checking every line and importing…";
  });
  request.addEventListener("load", () => {
    const answer = new DOMParser().parseFromString(request.responseText, "text/html");
    document.title = answer.title;
    const fresh = answer.getElementById("import-region");
    const region = document.getElementById("import-region");
    if (!fresh || !region) {
      document.body.replaceWith(answer.body);
      return;
    }
    region.replaceWith(fresh);
    const result = fresh.querySelector("[data-autofocus]");
    const field = fresh.querySelector("[aria-invalid=true]");
    const target = result || field;
    if (target) {
      target.focus();
      target.scrollIntoView({ block: "start" });
    }
    if (result) {
      const section = result.closest("section");
      const first = section && section.querySelector("p");
      announce(result.textContent.trim() + (first ? ". " + first.textContent.trim() : ""));
    } else if (field) {
      const error = field.getAttribute("aria-describedby");
      const words = error && document.getElementById(error);
      announce("Not imported: " + (words ? words.textContent.trim() : "fix the form."));
    }
  });
  request.addEventListener("error", () => {
    status.textContent = "The upload failed: the connection was lost. Try again.";
    button.disabled = false;
  });
  button.disabled = true;
  request.send(new FormData(form));
});
