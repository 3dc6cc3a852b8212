// venturi dashboard: "select the page" checkbox, and the live badge following the event stream.
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
