// Work that need not happen more than once a frame (redrawing a list as it scrolls, a chart as
// events arrive): `perFrame(fn)` returns a function that asks for `fn` on the next animation
// frame, however many times it is called before then.

export function perFrame(fn) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fn();
    });
  };
}
