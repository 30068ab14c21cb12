// The run page's "download ▾" menu (templates/run.html): a <details> that closes when a download is
// picked, on a click elsewhere, or on Escape (which gives the focus back to its summary).

export function mount(details) {
  if (!details) return;
  const close = () => {
    details.open = false;
  };
  details.addEventListener("click", (e) => {
    if (e.target.closest("a")) close();
  });
  document.addEventListener("click", (e) => {
    if (details.open && !details.contains(e.target)) close();
  });
  details.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && details.open) {
      e.stopPropagation(); // Escape means something to the viewer too
      close();
      details.querySelector("summary").focus();
    }
  });
}
