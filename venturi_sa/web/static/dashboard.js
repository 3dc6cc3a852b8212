// venturi dashboard: "select the page" checkbox, the live badge following the event stream,
// the jobs list holding still while rows are checked, and conditional fragment requests
// (a fragment the browser already shows answers 204 with no body).
document.addEventListener("change", function (event) {
  if (event.target && event.target.id === "pick-all") {
    document.querySelectorAll("input.pick").forEach(function (box) { box.checked = event.target.checked; });
  }
});
document.body.addEventListener("htmx:sseOpen", function () {
  var badge = document.getElementById("live-state");
  if (badge) { badge.classList.add("on"); }
});
document.body.addEventListener("htmx:sseError", function () {
  var badge = document.getElementById("live-state");
  if (badge) { badge.classList.remove("on"); }
});
document.body.addEventListener("htmx:confirm", function (event) {
  var elt = event.detail.elt;
  if (elt && elt.hasAttribute("data-hold-while-picked") && document.querySelector("input.pick:checked")) {
    event.preventDefault();  // the request is not sent: the checked rows stay as they are
  }
});
var etags = {};  // fragment path -> ETag of the body the page shows
document.body.addEventListener("htmx:configRequest", function (event) {
  var tag = etags[event.detail.path];
  if (tag) { event.detail.headers["If-None-Match"] = tag; }
});
document.body.addEventListener("htmx:afterRequest", function (event) {
  var xhr = event.detail.xhr, info = event.detail.pathInfo;
  if (xhr && info && xhr.status === 200) {
    var tag = xhr.getResponseHeader("ETag");
    if (tag) { etags[info.requestPath] = tag; } else { delete etags[info.requestPath]; }
  }
});
