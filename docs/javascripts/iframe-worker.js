// A Web Worker for pages opened from the file system (file://), where browsers refuse to
// start one: the worker's script runs in a hidden same-origin iframe instead, and messages
// pass between the two as they would between a page and a worker. Material's search runs
// in a worker; with this the site's search works from a USB stick, fetching nothing.
// (Material's offline plugin would load a shim of this kind from a CDN; mkdocs.yml names
// this file in extra.polyfills instead.)
(function () {
  if (location.protocol !== "file:" || typeof EventTarget === "undefined") return;

  class FileWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.queue = [];
      this.ready = false;
      const frame = document.createElement("iframe");
      frame.hidden = true;
      frame.setAttribute("aria-hidden", "true");
      document.body.appendChild(frame);
      const scope = frame.contentWindow;
      // The worker's side: postMessage answers the page, importScripts loads in order.
      scope.postMessage = (data) => {
        const event = new MessageEvent("message", {data: data});
        if (typeof this.onmessage === "function") this.onmessage(event);
        this.dispatchEvent(event);
      };
      const load = (src) => new Promise((resolve, reject) => {
        const script = scope.document.createElement("script");
        script.src = new URL(src, location.href).href;
        script.onload = resolve;
        script.onerror = () => reject(new Error("cannot load " + src));
        scope.document.head.appendChild(script);
      });
      scope.importScripts = (...sources) => sources.reduce(
        (done, src) => done.then(() => load(src)), Promise.resolve());
      this.scope = scope;
      load(url).then(() => {
        this.ready = true;
        this.queue.splice(0).forEach((data) => this.deliver(data));
      });
    }

    deliver(data) {
      const event = new this.scope.MessageEvent("message", {data: data});
      if (typeof this.scope.onmessage === "function") this.scope.onmessage(event);
      this.scope.dispatchEvent(event);
    }

    postMessage(data) {
      if (this.ready) this.deliver(data); else this.queue.push(data);
    }

    terminate() {
      this.ready = false;
    }
  }

  window.Worker = FileWorker;
})();
