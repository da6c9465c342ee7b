// Upload progress for a form marked data-upload-progress. The form is sent with
// XMLHttpRequest, whose upload events report how much of a large file has gone; the answer
// then replaces the page just as a plain submit would. Without JavaScript the form submits
// as usual. Listening on the document keeps working after the body is replaced.
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
    document.body.replaceWith(answer.body);
  });
  request.addEventListener("error", () => {
    status.textContent = "The upload failed: the connection was lost. Try again.";
    button.disabled = false;
  });
  button.disabled = true;
  request.send(new FormData(form));
});
